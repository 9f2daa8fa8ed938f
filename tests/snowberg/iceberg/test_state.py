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


# ---------------------------------------------------------------- the state copy in the table properties


def _commit(table: Any, run: str, wm: str) -> int:
    """A snowberg-like commit: the state in the snapshot summary and, in the same commit, in the properties."""
    st = {
        state.WATERMARK: wm,
        state.CURSOR_KIND: "timestamp_ntz",
        state.RUN_ID: run,
        state.MODE: "incremental",
        state.WINDOW_HIGH: wm,
    }
    tx = table.transaction()
    tx.set_properties({state.state_property(k): v for k, v in st.items()})
    tx.append(pa.table({"x": [int(run[1:])]}), snapshot_properties=st)
    return int(tx.commit_transaction().current_snapshot().snapshot_id)


def test_a_retry_after_a_rollback_outside_snowberg_finds_no_commit_in_the_stale_property_copy(catalog: Any) -> None:
    """Another engine rolls main back below run r2's commit; the properties (not rolled back) still say r2.

    The snapshot walk finds r1's commit on main, so the copy is not consulted: r2's retry finds no commit of
    its own and loads again, and the state is r1's. Trusting the copy, the retry would write nothing and r2's
    rows would be missing while the state said they were loaded.
    """
    catalog.create_namespace_if_not_exists("n")
    t = catalog.create_table("n.t", schema=pa.schema([("x", pa.int64())]))
    s1 = _commit(t, "r1", "2026-01-01 00:00:00.000000")
    s2 = _commit(catalog.load_table("n.t"), "r2", "2026-01-02 00:00:00.000000")
    t = catalog.load_table("n.t")
    t.manage_snapshots().rollback_to_snapshot(s1).commit()
    t = catalog.load_table("n.t")
    assert state.property_state(t)[state.RUN_ID] == "r2"  # the copy was not rolled back
    assert state.find_run_commit(t, "r2", "incremental", "2026-01-02 00:00:00.000000") is None
    st = state.read_state(t)
    assert st is not None and (st.run_id, st.from_properties) == ("r1", False)
    # The same engine then expires the snapshot it undid: nothing in the table tells the copy is stale but
    # r1's commit on main, which is why the copy is read only when main holds no snowberg commit at all.
    t.maintenance.expire_snapshots().by_id(s2).commit()
    t = catalog.load_table("n.t")
    assert t.snapshot_by_id(s2) is None and state.property_state(t)[state.RUN_ID] == "r2"
    assert state.find_run_commit(t, "r2", "incremental", "2026-01-02 00:00:00.000000") is None
    st = state.read_state(t)
    assert st is not None and (st.run_id, st.from_properties) == ("r1", False)


def test_a_rollback_outside_snowberg_below_its_first_commit_leaves_no_state(catalog: Any) -> None:
    """A table another engine wrote first; snowberg's first commit is undone by that engine's rollback.

    No snapshot on main carries snowberg state, as after snapshot expiry, but the commit's snapshot is still
    in the table, off main: the copy in the properties is the undone commit's, so it is neither a state (the
    next run would start above rows the table does not hold) nor a commit (the retry would write nothing).
    """
    catalog.create_namespace_if_not_exists("n")
    t = catalog.create_table("n.t", schema=pa.schema([("x", pa.int64())]))
    t.append(pa.table({"x": [0]}), snapshot_properties={"other": "writer"})
    before = catalog.load_table("n.t").current_snapshot().snapshot_id
    _commit(catalog.load_table("n.t"), "r1", "2026-01-01 00:00:00.000000")
    t = catalog.load_table("n.t")
    t.manage_snapshots().rollback_to_snapshot(before).commit()
    t = catalog.load_table("n.t")
    assert state.find_run_commit(t, "r1", "incremental", "2026-01-01 00:00:00.000000") is None
    assert state.read_state(t) is None
    # Another engine commits on top of the rolled-back head: still not r1's state.
    t.append(pa.table({"x": [5]}), snapshot_properties={"other": "writer"})
    t = catalog.load_table("n.t")
    assert state.read_state(t) is None
    assert state.find_run_commit(t, "r1", "incremental", "2026-01-01 00:00:00.000000") is None


def test_the_property_copy_is_the_state_when_expiry_took_the_commit_even_if_a_tag_kept_it(catalog: Any) -> None:
    """Expiry, not a rollback: every snapshot on main is newer than the snowberg commit the copy came from.

    A tag keeps that commit's snapshot in the table while the snapshots between it and main's head expire;
    it is then off main's walk, as an undone commit is, but nothing was undone: the copy is the state.
    """
    catalog.create_namespace_if_not_exists("n")
    t = catalog.create_table("n.t", schema=pa.schema([("x", pa.int64())]))
    s1 = _commit(t, "r1", "2026-01-01 00:00:00.000000")
    t = catalog.load_table("n.t")
    t.manage_snapshots().create_tag(s1, "keep").commit()
    for i in range(2):
        catalog.load_table("n.t").append(pa.table({"x": [10 + i]}), snapshot_properties={"other": "writer"})
    t = catalog.load_table("n.t")
    head = t.current_snapshot().snapshot_id
    t.maintenance.expire_snapshots().by_ids(
        [s.snapshot_id for s in t.snapshots() if s.snapshot_id not in (s1, head)]
    ).commit()
    t = catalog.load_table("n.t")
    assert t.snapshot_by_id(s1) is not None and [s.snapshot_id for s in state.ancestors(t)] == [head]
    st = state.read_state(t)
    assert st is not None and (st.run_id, st.from_properties) == ("r1", True)
    assert state.find_run_commit(t, "r1", "incremental", "2026-01-01 00:00:00.000000") is not None


def test_reconcile_refuses_a_mirror_naming_a_snapshot_the_table_does_not_have(catalog: Any, variables: Any) -> None:
    """Not ahead by its watermark (equal, or lower), but its snapshot is unknown: the table lost commits.

    The Variable's snapshot was written by a commit the table no longer has (a restore of an older copy, a
    rollback and expiry): refused, not overwritten, so a person looks before the runs go on.
    """
    t = _table(catalog, ["2026-01-01 00:00:00.000000", "2026-01-02 00:00:00.000000"])
    st = state.read_state(t)
    for wm in ("2026-01-02 00:00:00.000000", "2026-01-01 12:00:00.000000"):
        variables["k"] = json.dumps({"watermark": wm, "snapshot_id": 424242, "run_id": "gone"})
        with pytest.raises(state.StateError, match="ahead of the table.*snapshot 424242"):
            state.reconcile("k", st, variables, t)
        assert json.loads(variables["k"])["snapshot_id"] == 424242  # left as it was


def test_a_variable_naming_another_runs_lost_commit_at_the_same_watermark_is_refused_when_state_is_from_properties(
    catalog: Any, variables: Any
) -> None:
    """Expiry took r1's snapshot: the state is the property copy (r1, watermark W). A Variable at W naming a
    snapshot the table does not have is the mirror of r1's own expired commit only if it names run r1; naming
    another run, it is a commit the table lost (a restore of an older copy): refused, left as it was."""
    catalog.create_namespace_if_not_exists("n")
    t = catalog.create_table("n.t", schema=pa.schema([("x", pa.int64())]))
    wm = "2026-01-01 00:00:00.000000"
    s1 = _commit(t, "r1", wm)
    mirrored = state.mirror_value(state.read_state(catalog.load_table("n.t")))  # type: ignore[arg-type]
    catalog.load_table("n.t").append(pa.table({"x": [7]}), snapshot_properties={"other": "writer"})
    t = catalog.load_table("n.t")
    t.maintenance.expire_snapshots().by_id(s1).commit()
    t = catalog.load_table("n.t")
    st = state.read_state(t)
    assert st is not None and (st.run_id, st.watermark, st.from_properties) == ("r1", wm, True)
    lost = json.dumps({"watermark": wm, "snapshot_id": 424242, "run_id": "r2", "cursor_kind": "timestamp_ntz"})
    variables["k"] = lost
    with pytest.raises(state.StateError, match="ahead of the table.*snapshot 424242"):
        state.reconcile("k", st, variables, t)
    assert variables["k"] == lost
    # Naming r1 but with another watermark: not the state the copy holds either.
    ahead = json.dumps(
        {"watermark": "2026-01-05 00:00:00.000000", "snapshot_id": s1, "run_id": "r1", "cursor_kind": "timestamp_ntz"}
    )
    variables["k"] = ahead
    with pytest.raises(state.StateError, match="ahead of the table"):
        state.reconcile("k", st, variables, t)
    # The mirror r1's commit wrote, its snapshot since expired: the same state, adopted.
    assert json.loads(mirrored)["snapshot_id"] == s1
    variables["k"] = mirrored
    assert "was expired" in state.reconcile("k", st, variables, t)
    assert json.loads(variables["k"])["snapshot_id"] == t.current_snapshot().snapshot_id


def test_a_variable_ahead_of_a_rollback_to_a_commit_without_a_watermark_is_reported(
    catalog: Any, variables: Any
) -> None:
    """r1 was a full refresh without a cursor (no watermark), r2 the first load with one. Another engine rolls
    main back to r1: the Variable (r2, watermark W) is ahead of a table whose state has no watermark. Reported,
    not overwritten: overwriting would start the next run from nothing while a person may want r2 back."""
    catalog.create_namespace_if_not_exists("n")
    t = catalog.create_table("n.t", schema=pa.schema([("x", pa.int64())]))
    tx = t.transaction()
    tx.append(
        pa.table({"x": [1]}),
        snapshot_properties={state.WATERMARK: "", state.RUN_ID: "r1", state.MODE: "full_refresh"},
    )
    s1 = int(tx.commit_transaction().current_snapshot().snapshot_id)
    s2 = _commit(catalog.load_table("n.t"), "r2", "2026-01-02 00:00:00.000000")
    t = catalog.load_table("n.t")
    mirror = state.mirror_value(state.read_state(t))  # type: ignore[arg-type]
    assert json.loads(mirror)["snapshot_id"] == s2
    variables["k"] = mirror
    t.manage_snapshots().rollback_to_snapshot(s1).commit()
    t = catalog.load_table("n.t")
    st = state.read_state(t)
    assert st is not None and (st.run_id, st.watermark) == ("r1", None)
    with pytest.raises(state.StateError, match="ahead of the table"):
        state.reconcile("k", st, variables, t)
    assert variables["k"] == mirror
