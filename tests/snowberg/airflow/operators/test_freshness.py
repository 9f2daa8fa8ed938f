"""The snapshot freshness operator: measures, failures, metadata only, and the deferrable wait."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

# ---------------------------------------------------------------------------
# The operator


def test_operator_fresh_returns_measures(use_catalog: Any, orders: Any, context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.freshness import SnapshotFreshnessOperator

    op = SnapshotFreshnessOperator(task_id="freshness", table="lake.orders", freshness_sla="1h", table_name="orders")
    out = op.execute(context)
    assert out["fresh"] is True and out["table"] == "lake.orders"
    assert out["hours_since_last_write"] < 0.1
    assert out["watermark"] == "2026-01-01 00:00:00.000000"
    assert set(op.template_fields) >= {"table", "catalog", "freshness_sla", "max_watermark_lag"}


def test_operator_stale_fails_without_retry(use_catalog: Any, orders: Any, context: dict[str, Any]) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.airflow.operators.freshness import SnapshotFreshnessOperator

    time.sleep(0.05)
    op = SnapshotFreshnessOperator(
        task_id="freshness", table="lake.orders", freshness_sla="10ms", table_name="orders", measure="last_data"
    )
    with pytest.raises(SnowbergCheckFailed) as ei:
        op.execute(context)
    err = ei.value
    assert isinstance(err, AirflowFailException)
    assert err.check == "freshness" and err.table == "lake.orders"
    assert str(err).startswith("orders is stale: last write") and "over the SLA" in str(err)
    assert "last write" in err.observed and err.expected.startswith("a write within")
    xcom = context["ti"].xcom["result"]
    assert xcom["fresh"] is False and xcom["hours_since_last_write"] >= 0


def test_operator_missing_table(use_catalog: Any, context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.airflow.operators.freshness import SnapshotFreshnessOperator

    with pytest.raises(SnowbergCheckFailed, match="does not exist"):
        SnapshotFreshnessOperator(task_id="f", table="lake.missing", freshness_sla="1h").execute(context)


def test_operator_bad_duration_is_clear(use_catalog: Any, orders: Any, context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.freshness import SnapshotFreshnessOperator

    with pytest.raises(ValueError, match="freshness_sla: not a duration"):
        SnapshotFreshnessOperator(task_id="f", table="lake.orders", freshness_sla="soon").execute(context)
    with pytest.raises(ValueError, match="wait_timeout"):
        SnapshotFreshnessOperator(task_id="f", table="lake.orders", freshness_sla="1h", deferrable=True)


# ---------------------------------------------------------------------------
# Metadata only: no data file is ever opened


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every location opened for reading through pyiceberg's FileIO (metadata, manifests, data)."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    seen: list[str] = []
    real = PyArrowFileIO.new_input

    def new_input(self: Any, location: str) -> Any:
        seen.append(location)
        return real(self, location)

    monkeypatch.setattr(PyArrowFileIO, "new_input", new_input)
    return seen


def test_freshness_and_health_open_no_data_file(
    use_catalog: Any, orders: Any, lake: Any, tmp_path: Path, context: dict[str, Any], opened: list[str]
) -> None:
    from snowberg.airflow.operators.freshness import SnapshotFreshnessOperator
    from snowberg.airflow.operators.health import TableHealthOperator

    lake.append(orders, lake.batch([11, 12, 13]), watermark="2026-01-02 00:00:00.000000", run_id="r2")
    data_files = list((tmp_path / "wh").rglob("*.parquet"))
    assert len(data_files) == 2
    for p in data_files:  # the proof: with no data file on disk, the checks still answer
        p.unlink()
    opened.clear()

    out = SnapshotFreshnessOperator(task_id="f", table="lake.orders", freshness_sla="1h").execute(context)
    assert out["fresh"] and out["watermark"] == "2026-01-02 00:00:00.000000"
    assert not any(p.endswith(".parquet") for p in opened), opened
    assert not any(".avro" in p for p in opened), opened  # freshness does not even read manifests

    report = TableHealthOperator(task_id="h", table="lake.orders").execute(context)
    assert report["data_files"] == 2 and report["rows"] == 13
    assert not any(p.endswith(".parquet") for p in opened), opened
    assert any(p.endswith(".avro") for p in opened)  # health reads manifests, which is metadata


# ---------------------------------------------------------------------------
# Deferrable: wait in the triggerer for a fresh snapshot


def test_deferrable_defers_then_completes_when_a_write_lands(
    use_catalog: Any, orders: Any, lake: Any, context: dict[str, Any]
) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    from snowberg.airflow.operators.freshness import FreshnessTrigger, SnapshotFreshnessOperator

    time.sleep(2.1)
    # stale now; the write lands ~1 s into the wait and stays fresh for 2 s: two polls see it
    op = SnapshotFreshnessOperator(
        task_id="f", table="lake.orders", freshness_sla="2s", deferrable=True, wait_timeout="30s", poll_interval="1s"
    )
    with pytest.raises(TaskDeferred) as ei:
        op.execute(context)
    trigger = ei.value.trigger
    assert isinstance(trigger, FreshnessTrigger) and ei.value.method_name == "execute_complete"
    classpath, kwargs = trigger.serialize()
    assert classpath == "snowberg.airflow.operators.freshness.FreshnessTrigger"
    trigger = FreshnessTrigger(**kwargs)  # as the triggerer rebuilds it

    def later() -> None:
        time.sleep(1.0)
        lake.append(orders, lake.batch([50]), watermark="2026-01-03 00:00:00.000000", run_id="r3")

    writer = threading.Thread(target=later)
    writer.start()

    async def first_event() -> Any:
        async for event in trigger.run():
            return event

    event = asyncio.run(asyncio.wait_for(first_event(), timeout=60))
    writer.join()
    assert event.payload["status"] == "fresh" and event.payload["polls"] >= 2
    out = op.execute_complete(context, event.payload)
    assert out["fresh"] and out["watermark"] == "2026-01-03 00:00:00.000000"


def test_deferrable_deadline_fails(use_catalog: Any, orders: Any, context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.airflow.operators.freshness import FreshnessTrigger, SnapshotFreshnessOperator

    time.sleep(0.05)
    trigger = FreshnessTrigger(
        catalog="lake",
        table="lake.orders",
        sla_seconds=0.01,
        max_watermark_lag_seconds=None,
        deadline=(datetime.now(UTC) + timedelta(seconds=1)).isoformat(),
        poll_interval=0.3,
    )

    async def first_event() -> Any:
        async for event in trigger.run():
            return event

    event = asyncio.run(asyncio.wait_for(first_event(), timeout=30))
    assert event.payload["status"] == "deadline"
    op = SnapshotFreshnessOperator(
        task_id="f", table="lake.orders", freshness_sla="10ms", deferrable=True, wait_timeout="1s"
    )
    with pytest.raises(SnowbergCheckFailed, match="stale"):
        op.execute_complete(context, event.payload)
