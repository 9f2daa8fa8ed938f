"""The stream batch id in the Iceberg snapshot summary: read back newest first, expiry-proof, backfills skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
from streams_harness import Harness

from snowberg.iceberg import state as core_state
from snowberg.streams import checkpoint as cp


def _table(catalog: Any) -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    catalog.create_namespace("shop")
    return catalog.create_table("shop.orders", schema=Schema(NestedField(1, "id", LongType(), required=False)))


def _append(table: Any, ids: list[int], props: dict[str, str] | None = None) -> int:
    table.append(pa.table({"id": pa.array(ids, pa.int64())}), snapshot_properties=props or {})
    snap = table.current_snapshot()
    assert snap is not None
    return int(snap.snapshot_id)


def test_no_table_and_no_stream_commit_mean_batch_zero(catalog: Any) -> None:
    assert cp.read_stream_state(None) is None and cp.committed_batch(None) == 0
    t = _table(catalog)
    assert cp.read_stream_state(t) is None and cp.committed_batch(t) == 0  # no snapshot at all
    _append(t, [1], {core_state.MODE: "full_refresh"})
    assert cp.read_stream_state(t) is None and cp.committed_batch(t) == 0  # snowberg commits, none of a stream


def test_the_newest_stream_commit_wins_and_backfill_commits_are_skipped(catalog: Any) -> None:
    t = _table(catalog)
    _append(t, [1], {cp.BATCH_ID: "2", core_state.RUN_ID: "r2"})
    stream_snap = _append(
        t,
        [2],
        {cp.BATCH_ID: "3", core_state.RUN_ID: "r3", cp.CONSUMED_AT: "2026-06-01T00:00:00+00:00", cp.GENERATION: "g1"},
    )
    _append(t, [3], cp.changes_identity("2026-05-01T00:00:00+00:00", None))  # a CHANGES backfill after it
    _append(t, [4])  # another engine's append
    st = cp.read_stream_state(t)
    assert st is not None and cp.committed_batch(t) == 3
    snap = t.snapshot_by_id(stream_snap)
    assert snap is not None
    assert st.to_dict() == {
        "batch_id": 3,
        "snapshot_id": stream_snap,
        "run_id": "r3",
        "consumed_at": "2026-06-01T00:00:00+00:00",
        "timestamp_ms": snap.timestamp_ms,
        "generation": "g1",
    }


def test_the_table_properties_stand_in_when_every_stream_snapshot_is_gone(catalog: Any) -> None:
    t = _table(catalog)
    current = _append(t, [1])
    with t.transaction() as tx:
        tx.set_properties({core_state.state_property(cp.BATCH_ID): "7", core_state.state_property(cp.GENERATION): ""})
    t = catalog.load_table("shop.orders")
    st = cp.read_stream_state(t)
    assert st is not None and (st.batch_id, st.snapshot_id, st.run_id, st.generation) == (7, current, None, None)


def test_changes_identity_names_the_backfill_window() -> None:
    assert cp.changes_identity("2026-05-01T00:00:00+00:00", "2026-05-02T00:00:00+00:00") == {
        "snowberg.mode": "stream_changes_backfill",
        "snowberg.changes-start": "2026-05-01T00:00:00+00:00",
        "snowberg.changes-end": "2026-05-02T00:00:00+00:00",
    }
    assert cp.changes_identity("2026-05-01T00:00:00+00:00", None)["snowberg.changes-end"] == ""


def test_batch_id_survives_expiry_of_every_stream_snapshot(harness: Harness) -> None:
    h = harness
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    h.run()
    h.update(1, "paid")
    h.run()
    t = h.catalog().load_table("shop.orders")
    batch = cp.committed_batch(t)
    t.overwrite(t.scan().to_arrow())  # another engine rewrites the table (a compaction, say)
    t = h.catalog().load_table("shop.orders")
    t.maintenance.expire_snapshots().older_than(datetime.now(UTC) + timedelta(seconds=1)).commit()
    t = h.catalog().load_table("shop.orders")
    assert len(t.snapshots()) == 1 and cp.committed_batch(t) == batch
    h.insert((3, "new", "30.00"))
    res = h.run()
    assert res["load"]["batches"] == [batch + 1] and not res["load"]["refresh"]
    assert h.target_rows() == h.source_rows()


def test_a_head_left_on_the_first_snapshot_of_an_old_two_snapshot_commit_reads_the_batch_before(catalog: Any) -> None:
    """Old stream commits carried the batch id on both snapshots of a key replacement (delete, then append)."""
    t = _table(catalog)
    _append(t, [1, 2], {cp.BATCH_ID: "4", core_state.RUN_ID: "r4"})
    props = {cp.BATCH_ID: "5", core_state.RUN_ID: "r5", core_state.MODE: cp.MODE_STREAM}
    tx = t.transaction()
    tx.delete("id == 1", snapshot_properties=props)
    tx.append(pa.table({"id": pa.array([1], pa.int64())}), snapshot_properties=props)
    tx.commit_transaction()
    t = catalog.load_table("shop.orders")
    assert cp.committed_batch(t) == 5
    first = t.snapshot_by_id(t.current_snapshot().parent_snapshot_id)
    t.manage_snapshots().set_current_snapshot(first.snapshot_id).commit()  # another engine's rollback
    assert cp.committed_batch(catalog.load_table("shop.orders")) == 4  # batch 5 is not complete there
