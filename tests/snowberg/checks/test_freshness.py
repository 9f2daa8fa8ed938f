"""Snapshot freshness: metadata only, an SLA, a watermark lag (the operator and its deferrable wait:
tests/snowberg/airflow/operators/test_freshness.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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
        summary=SimpleNamespace(operation=SimpleNamespace(value=op), additional_properties={}),
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


def test_a_partial_snapshot_left_as_head_is_not_the_last_write(catalog: Any) -> None:
    """The removal snapshot of a commit (main left on it by another engine) holds half a commit."""
    import pyarrow as pa

    from snowberg.iceberg import state

    catalog.create_namespace("p")
    t = catalog.create_table("p.t", schema=pa.schema([("x", pa.int64())]))
    t.append(pa.table({"x": [1]}), snapshot_properties={state.COMMIT_ID: "c1"})
    complete = t.current_snapshot().snapshot_id
    t.append(pa.table({"x": [2]}), snapshot_properties={state.PARTIAL_OF: "c2", state.RUN_ID: "r2"})
    assert freshness.last_data_snapshot(catalog.load_table("p.t")).snapshot_id == complete


# ---------------------------------------------------------------------------
# proven_current: a quiet source is not a stuck pipeline (issue 22, item 3)


def _proof(orders: Any, at: datetime, watermark: str | None = "2026-01-01 00:00:00.000000") -> Any:
    from snowberg.iceberg.current import CurrentProof

    return CurrentProof(proven_at=at.isoformat(), run_id="idle-1", dag_id="snowberg_orders", watermark=watermark)


def test_an_idle_run_proves_a_quiet_table_fresh(orders: Any) -> None:
    later = datetime.now(UTC) + timedelta(hours=3)
    proof = _proof(orders, later - timedelta(minutes=30))
    f = freshness.evaluate(
        orders, name="lake.orders", sla=timedelta(hours=2), now=later, measure="proven_current", proof=proof
    )
    assert f.fresh and f.reasons == []
    assert f.hours_since_last_write == pytest.approx(3.0, abs=0.05)  # no data for 3 h: the source is quiet
    assert f.hours_since_proven_current == pytest.approx(0.5, abs=0.01) and f.proven_by_run == "idle-1"
    assert "lake proven current" in f.observed and "proven current" in freshness.render(f)
    # Today's measure, kept as an option: the same table is stale by the time since its last data.
    old = freshness.evaluate(
        orders, name="lake.orders", sla=timedelta(hours=2), now=later, measure="last_data", proof=proof
    )
    assert not old.fresh and "last write" in old.reasons[0]


def test_no_proof_for_longer_than_the_sla_is_stale(orders: Any) -> None:
    later = datetime.now(UTC) + timedelta(hours=3)
    proof = _proof(orders, later - timedelta(hours=2, minutes=30))
    f = freshness.evaluate(
        orders, name="lake.orders", sla=timedelta(hours=2), now=later, measure="proven_current", proof=proof
    )
    assert not f.fresh
    assert "no run has proven the lake current" in f.reasons[0] and "idle-1" in f.reasons[0]
    assert f.expected == "a run proving the lake current within 2h"
    # No proof at all: the last data snapshot is the last proof.
    none = freshness.evaluate(orders, name="lake.orders", sla=timedelta(hours=2), now=later, measure="proven_current")
    assert not none.fresh and none.hours_since_proven_current == pytest.approx(3.0, abs=0.05)


def test_a_proof_made_on_another_watermark_does_not_count(orders: Any) -> None:
    later = datetime.now(UTC) + timedelta(hours=3)
    proof = _proof(orders, later - timedelta(minutes=5), watermark="2025-06-01 00:00:00.000000")  # before a rollback
    f = freshness.evaluate(
        orders, name="lake.orders", sla=timedelta(hours=2), now=later, measure="proven_current", proof=proof
    )
    assert not f.fresh and f.proven_by_run == "r1"


def test_a_stream_tables_idle_run_proves_it_fresh(catalog: Any) -> None:
    """A stream table has no watermark: its consume's proof (watermark None) is what its freshness ages from."""
    import pyarrow as pa

    from snowberg.iceberg import state
    from snowberg.iceberg.current import CurrentProof
    from snowberg.streams import checkpoint as cp

    catalog.create_namespace_if_not_exists("s")
    t = catalog.create_table("s.orders", schema=pa.schema([("x", pa.int64())]))
    t.append(pa.table({"x": [1]}), snapshot_properties={cp.BATCH_ID: "1", state.MODE: cp.MODE_STREAM})
    t = catalog.load_table("s.orders")
    later = datetime.now(UTC) + timedelta(hours=3)
    proof = CurrentProof(
        proven_at=(later - timedelta(minutes=10)).isoformat(),
        run_id="scheduled__idle",
        dag_id="snowberg_orders",
        watermark=None,
        snapshot_id=t.current_snapshot().snapshot_id,
    )
    f = freshness.evaluate(t, name="s.orders", sla=timedelta(hours=1), now=later, measure="proven_current", proof=proof)
    assert f.fresh and f.proven_by_run == "scheduled__idle"
    stale = freshness.evaluate(t, name="s.orders", sla=timedelta(hours=1), now=later, measure="proven_current")
    assert not stale.fresh and "no run has proven the lake current" in stale.reasons[0]
