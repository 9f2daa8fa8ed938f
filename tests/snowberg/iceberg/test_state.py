"""The Variable mirror follows the table, never the other way round."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from snowberg.iceberg import state


def _table(catalog: Any, watermarks: list[str | None]) -> Any:
    catalog.create_namespace_if_not_exists("n")
    t = catalog.create_table("n.t", schema=pa.schema([("x", pa.int64())]))
    for i, wm in enumerate(watermarks):
        props = (
            {"other": "writer"}
            if wm is None
            else {
                state.WATERMARK: wm,
                state.CURSOR_KIND: "timestamp_ntz",
                state.RUN_ID: f"r{i}",
                state.MODE: "incremental",
            }
        )
        t.append(pa.table({"x": [i]}), snapshot_properties=props)
    return catalog.load_table("n.t")


def test_read_state_skips_other_writers(catalog: Any) -> None:
    t = _table(catalog, ["2026-01-01 00:00:00.000000", None])  # e.g. a compaction after our commit
    st = state.read_state(t)
    assert st is not None and st.watermark == "2026-01-01 00:00:00.000000" and st.run_id == "r0"


def test_ancestors_walk_from_the_current_or_a_given_snapshot_newest_first(catalog: Any) -> None:
    t = _table(catalog, [None, None, None])
    newest_first = [s.snapshot_id for s in reversed(t.snapshots())]
    assert [s.snapshot_id for s in state.ancestors(t)] == newest_first
    assert [s.snapshot_id for s in state.ancestors(t, newest_first[1])] == newest_first[1:]
    assert list(state.ancestors(t, 12345)) == []  # expired or unknown: nothing to walk


def test_reconcile_adopts_missing_or_behind(catalog: Any, variables: Any) -> None:
    t = _table(catalog, ["2026-01-01 00:00:00.000000", "2026-01-02 00:00:00.000000"])
    st = state.read_state(t)
    assert state.reconcile("k", st, variables, t).startswith("adopted table state (Variable was missing)")
    older = t.snapshots()[0]
    variables["k"] = json.dumps({"watermark": "2026-01-01 00:00:00.000000", "snapshot_id": older.snapshot_id})
    assert "adopted" in state.reconcile("k", st, variables, t)
    assert json.loads(variables["k"])["snapshot_id"] == st.snapshot_id
    assert state.reconcile("k", st, variables, t) == "in sync"


def test_reconcile_refuses_a_mirror_ahead_or_unknown(catalog: Any, variables: Any) -> None:
    t = _table(catalog, ["2026-01-01 00:00:00.000000"])
    st = state.read_state(t)
    variables["k"] = json.dumps({"watermark": "2026-02-01 00:00:00.000000", "snapshot_id": 1})
    with pytest.raises(state.StateError, match="ahead of the table"):
        state.reconcile("k", st, variables, t)
    variables["k"] = "not json"
    with pytest.raises(state.StateError, match="not a snowberg watermark mirror"):
        state.reconcile("k", st, variables, t)
    variables["k"] = json.dumps({"watermark": "x", "snapshot_id": 5})
    with pytest.raises(state.StateError, match="no snowberg commit"):
        state.reconcile("k", None, variables, None)


def _legacy_merge_commit(table: Any, props: dict[str, str]) -> None:
    """Two snapshots in one transaction, the state on both: how snowberg committed a merge before partial marks."""
    tx = table.transaction()
    tx.delete("x == 0", snapshot_properties=props)
    tx.append(pa.table({"x": [100]}), snapshot_properties=props)
    tx.commit_transaction()


def test_readers_skip_the_first_snapshot_of_an_old_two_snapshot_commit(catalog: Any) -> None:
    """A head left on the first snapshot of a commit (another engine's rollback, an older snowberg's) is no state.

    Old commits carry the state on every snapshot they stage; the first one is recognised by its child in the
    same commit (same run id and state, no maintenance mark) and skipped by every reader of the state.
    """
    t = _table(catalog, ["2026-01-01 00:00:00.000000"])  # run r0
    props = {
        state.WATERMARK: "2026-01-02 00:00:00.000000",
        state.CURSOR_KIND: "timestamp_ntz",
        state.RUN_ID: "r1",
        state.MODE: "incremental",
        state.WINDOW_HIGH: "2026-01-02 00:00:00.000000",
    }
    _legacy_merge_commit(t, props)
    t = catalog.load_table("n.t")
    last = t.current_snapshot()
    first = t.snapshot_by_id(last.parent_snapshot_id)
    assert state.read_state(t).snapshot_id == last.snapshot_id  # the head is the last part: its state counts
    t.manage_snapshots().set_current_snapshot(first.snapshot_id).commit()
    t = catalog.load_table("n.t")
    st = state.read_state(t)
    assert st is not None and st.run_id == "r0" and st.watermark == "2026-01-01 00:00:00.000000"
    assert state.find_run_commit(t, "r1", "incremental", props[state.WINDOW_HIGH]) is None  # a retry reloads
    assert [s.snapshot_id for s in state.run_commits(t)] == [first.parent_snapshot_id]


def test_reconcile_adopts_a_state_after_the_mirrored_snapshot_even_with_a_lower_watermark(
    catalog: Any, variables: Any
) -> None:
    """A full refresh may record a lower watermark (rows deleted at the source, another cursor column).

    The mirrored snapshot is an ancestor of the state's: the table moved on from it, nothing was lost. A
    mirror ahead of a table rolled back below it (outside snowberg) is still refused.
    """
    t = _table(catalog, ["2026-01-01 00:00:00.000000", "2026-01-03 00:00:00.000000", "2026-01-02 00:00:00.000000"])
    s0, s1, _ = t.snapshots()
    mirror = json.dumps({"watermark": "2026-01-03 00:00:00.000000", "snapshot_id": s1.snapshot_id})
    variables["k"] = mirror
    st = state.read_state(t)
    assert "adopted" in state.reconcile("k", st, variables, t)
    assert json.loads(variables["k"])["snapshot_id"] == st.snapshot_id
    t.manage_snapshots().set_current_snapshot(s0.snapshot_id).commit()
    t = catalog.load_table("n.t")
    variables["k"] = mirror
    with pytest.raises(state.StateError, match="ahead of the table"):
        state.reconcile("k", state.read_state(t), variables, t)
