"""Snapshot freshness: metadata only, an SLA, a watermark lag, and the deferrable wait."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from snowberg.checks import freshness


def test_fresh_table_measures_age_and_watermark_lag(orders: Any) -> None:
    now = datetime.now(UTC)
    f = freshness.evaluate(orders, name="lake.orders", sla=timedelta(hours=1), now=now)
    assert f.fresh and f.exists and f.reasons == []
    snap = orders.current_snapshot()
    assert f.current_snapshot_id == snap.snapshot_id == f.last_write_snapshot_id == f.watermark_snapshot_id
    assert f.last_write_operation == "append"
    assert f.hours_since_last_write is not None and 0 <= f.hours_since_last_write < 0.1
    assert f.watermark == "2026-01-01 00:00:00.000000" and f.cursor_kind == "timestamp_ntz"
    expected_lag = (now - datetime(2026, 1, 1, tzinfo=UTC)).total_seconds() / 3600
    assert f.watermark_lag_hours == pytest.approx(expected_lag, abs=0.01)
    assert f.watermark_run_id == "r1"
    assert f.sla == "1h" and f.sla_hours == 1.0
    text = freshness.render(f)
    assert "FRESH" in text and "hours since last write" in text and "watermark lag" in text


def test_stale_when_older_than_sla(orders: Any) -> None:
    later = datetime.now(UTC) + timedelta(hours=3)
    f = freshness.evaluate(orders, name="lake.orders", sla=timedelta(hours=2), now=later)
    assert not f.fresh
    assert f.hours_since_last_write == pytest.approx(3.0, abs=0.05)
    assert len(f.reasons) == 1 and "over the SLA of 2h" in f.reasons[0]
    assert "h ago" in f.observed and f.expected == "a write within 2h"
    assert "STALE" in freshness.render(f)


def test_watermark_lag_limit(orders: Any) -> None:
    f = freshness.evaluate(orders, name="lake.orders", sla=timedelta(hours=1), max_watermark_lag=timedelta(days=1))
    assert not f.fresh  # the data is fresh, but the watermark is from 2026-01-01
    assert any("lags" in r and "over the limit of 1d" in r for r in f.reasons)
    assert f.expected == "a write within 1h and watermark lag within 1d"


def test_missing_and_empty_tables_are_stale(catalog: Any, lake: Any) -> None:
    f = freshness.evaluate(None, name="lake.nope", sla=timedelta(hours=1))
    assert not f.fresh and not f.exists and f.observed == "table does not exist"
    empty = catalog.create_table("lake.empty", schema=lake.schema())
    f = freshness.evaluate(empty, name="lake.empty", sla=timedelta(hours=1))
    assert not f.fresh and f.exists and "no data snapshot" in f.reasons[0]
    assert f.observed == "no data snapshot"


def test_other_writers_snapshot_counts_as_a_write_but_not_as_watermark(orders: Any, lake: Any) -> None:
    first = orders.current_snapshot()
    lake.append(orders, lake.batch([100]), watermark=None)  # a commit by another engine, no snowberg state
    f = freshness.evaluate(orders, name="lake.orders", sla=timedelta(hours=1))
    assert f.last_write_snapshot_id == orders.current_snapshot().snapshot_id != first.snapshot_id
    assert f.watermark_snapshot_id == first.snapshot_id  # read_state skips the foreign snapshot


def _snap(sid: int, parent: int | None, op: str, ts: int) -> Any:
    return SimpleNamespace(
        snapshot_id=sid,
        parent_snapshot_id=parent,
        timestamp_ms=ts,
        summary=SimpleNamespace(operation=SimpleNamespace(value=op)),
    )


def test_compaction_snapshots_are_not_writes() -> None:
    snaps = {1: _snap(1, None, "append", 1_000), 2: _snap(2, 1, "replace", 2_000), 3: _snap(3, 2, "replace", 3_000)}
    table = SimpleNamespace(current_snapshot=lambda: snaps[3], snapshot_by_id=lambda i: snaps.get(i))
    assert freshness.last_data_snapshot(table).snapshot_id == 1  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "wm", "expected"),
    [
        ("timestamp_ntz", "2026-01-01 06:00:00.000000", datetime(2026, 1, 1, 6, tzinfo=UTC)),
        ("timestamp_tz", "2026-01-01 06:00:00.000000+02:00", datetime(2026, 1, 1, 4, tzinfo=UTC)),
        ("date", "2026-01-02", datetime(2026, 1, 2, tzinfo=UTC)),
        ("number", "12345", None),
        (None, "x", None),
    ],
)
def test_watermark_time(kind: str | None, wm: str, expected: datetime | None) -> None:
    assert freshness.watermark_time(kind, wm) == expected


def test_ntz_watermark_is_read_on_the_cursor_timezone_clock() -> None:
    wm = "2026-01-01 06:00:00.000000"  # Los Angeles wall time (UTC-08:00 in January)
    assert freshness.watermark_time("timestamp_ntz", wm, "America/Los_Angeles") == datetime(2026, 1, 1, 14, tzinfo=UTC)
    assert freshness.watermark_time("date", "2026-01-02", "Asia/Tokyo") == datetime(2026, 1, 1, 15, tzinfo=UTC)


def test_unreadable_watermark_is_reported(orders: Any, lake: Any) -> None:
    orders.append(
        lake.batch([7]), snapshot_properties={"snowberg.watermark": "garbage", "snowberg.cursor-kind": "timestamp_ntz"}
    )
    f = freshness.evaluate(orders, name="lake.orders", sla=timedelta(hours=1))
    assert not f.fresh and "cannot be read" in f.reasons[0]


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
    op = SnapshotFreshnessOperator(task_id="freshness", table="lake.orders", freshness_sla="10ms", table_name="orders")
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


def test_exception_pickles(use_catalog: Any, orders: Any, context: dict[str, Any]) -> None:
    import pickle

    from snowberg.airflow.operators.check_base import SnowbergCheckFailed

    e = SnowbergCheckFailed(
        "x is stale", table="lake.x", check="freshness", observed="o", expected="e", details={"a": 1}
    )
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.message, e2.table, e2.check, e2.observed, e2.expected, e2.details) == (
        "x is stale",
        "lake.x",
        "freshness",
        "o",
        "e",
        {"a": 1},
    )


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
