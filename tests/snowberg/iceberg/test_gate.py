"""The commit gate against the real emulator and a real Iceberg catalog.

What these prove
* A table that existed before snowberg first wrote to it (created with plain
  pyiceberg, default properties: 4 rebase retries) does not get a racing
  append re-applied: the snowberg commit fails, the table holds only the
  other writer's rows, and a later snowberg commit records
  ``commit.retry.num-retries=0`` on the table.
* Snapshot expiry by another engine cannot erase the state: after a foreign
  commit and the expiry of every snapshot but the current one, the next run
  loads exactly the new rows (append table: no duplicates), and the Variable
  mirror follows without a false "ahead of the table" alarm.
* A rollback to an older snowberg snapshot reads that snapshot's state (the
  snapshot walk wins over the table-property copy).
* Every commit records rows planned, extracted and committed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from snowberg.config.table_config import TableConfig, parse_config
from snowberg.iceberg import state
from snowberg.load.extract import load_window
from snowberg.load.plan import plan_run
from snowberg.load.publish import publish, reconcile_before_plan

DDL = "CREATE TABLE {t} (ID NUMBER(38,0), AMOUNT NUMBER(10,2), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ(9))"


def cfg_for(sfdb: Any, target: str = "ns.t", **over: Any) -> TableConfig:
    entry: dict[str, Any] = {
        "name": target.replace(".", "_"),
        "source": {"table": sfdb.table("SRC")},
        "target": target,
        "cursor": {"column": "updated_at"},
        "write_mode": "append",
        "primary_key": [],
    }
    entry.update(over)
    return parse_config({"tables": [entry]}).tables[0]


NOW = "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)"


def insert(sfdb: Any, ids: range, updated: str) -> None:
    ts = NOW if updated == "now" else f"'{updated}'::TIMESTAMP_NTZ"
    rows = ", ".join(f"({i}, {i}.25, 'a', {ts})" for i in ids)
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES {rows}")


def run(cfg: TableConfig, sfdb: Any, catalog: Any, variables: Any, run_id: str) -> Any:
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, sfdb.conn, table, run_id=run_id)
    r = load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)
    return r


def ids(catalog: Any, name: str = "ns.t") -> list[int]:
    return sorted(int(v) for v in catalog.load_table(name).scan().to_arrow().column("id").to_pylist())


@pytest.fixture
def src(sfdb: Any) -> Any:
    sfdb.sql(DDL.format(t=sfdb.table("SRC")))
    insert(sfdb, range(1, 101), "2026-01-01 00:00:00")
    return sfdb


def test_racing_append_on_a_table_snowberg_did_not_create_is_not_rebased(
    src: Any, catalog: Any, variables: Any, monkeypatch: Any
) -> None:
    from pyiceberg.exceptions import CommitFailedException

    from snowberg.core import faults

    # The schema snowberg would write, on a table made by plain pyiceberg with default properties.
    run(cfg_for(src, target="ns.scratch"), src, catalog, variables, "scratch")
    catalog.create_table("ns.t", schema=catalog.load_table("ns.scratch").schema())
    assert "commit.retry.num-retries" not in catalog.load_table("ns.t").properties  # pyiceberg default: 4 retries
    other_rows = catalog.load_table("ns.scratch").scan().to_arrow().slice(0, 3)

    real = faults.crash_point

    def race(name: str) -> None:
        if name == "before_commit":  # another writer lands between snowberg's plan and its commit
            catalog.load_table("ns.t").append(other_rows)
        real(name)

    monkeypatch.setattr(faults, "crash_point", race)
    cfg = cfg_for(src)
    with pytest.raises(CommitFailedException):
        run(cfg, src, catalog, variables, "r1")
    monkeypatch.setattr(faults, "crash_point", real)
    assert ids(catalog) == [1, 2, 3]  # only the other writer's rows: snowberg's append was not re-applied
    assert state.read_state(catalog.load_table("ns.t")) is None

    r = run(cfg, src, catalog, variables, "r2")  # the retry re-plans on the new head and commits once
    assert r.status == "committed" and r.rows == 100
    assert catalog.load_table("ns.t").properties["commit.retry.num-retries"] == "0"


def test_state_survives_expiry_of_every_snowberg_snapshot(src: Any, catalog: Any, variables: Any) -> None:
    cfg = cfg_for(src)
    r1 = run(cfg, src, catalog, variables, "r1")
    assert r1.rows == 100
    t = catalog.load_table("ns.t")
    t.overwrite(t.scan().to_arrow())  # another engine rewrites the table (a compaction, say)
    t = catalog.load_table("ns.t")
    t.maintenance.expire_snapshots().older_than(datetime.now(UTC) + timedelta(seconds=1)).commit()
    t = catalog.load_table("ns.t")
    assert len(t.snapshots()) == 1
    assert not any(
        "snowberg.watermark" in (s.summary.additional_properties if s.summary else {}) for s in t.snapshots()
    )

    st = state.read_state(t)
    assert st is not None and st.watermark == r1.watermark and st.from_properties
    insert(src, range(101, 106), "now")
    r2 = run(cfg, src, catalog, variables, "r2")
    assert (r2.status, r2.rows) == ("committed", 5)
    assert ids(catalog) == list(range(1, 106))  # exactly the new rows: no duplicate, none lost
    after = state.read_state(catalog.load_table("ns.t"))
    assert after is not None and not after.from_properties and after.run_id == "r2"


def test_rollback_reads_the_older_snapshots_state_not_the_properties(src: Any, catalog: Any, variables: Any) -> None:
    cfg = cfg_for(src)
    r1 = run(cfg, src, catalog, variables, "r1")
    insert(src, range(101, 106), "now")
    r2 = run(cfg, src, catalog, variables, "r2")
    assert r2.watermark != r1.watermark
    t = catalog.load_table("ns.t")
    t.manage_snapshots().rollback_to_snapshot(r1.snapshot_id).commit()
    t = catalog.load_table("ns.t")
    assert t.properties[state.state_property(state.WATERMARK)] == r2.watermark  # the copy is newer …
    st = state.read_state(t)
    assert st is not None and st.watermark == r1.watermark and not st.from_properties  # … the snapshot wins


def test_every_commit_records_rows_planned_extracted_and_committed(src: Any, catalog: Any, variables: Any) -> None:
    cfg = cfg_for(src)
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, src.conn, table, run_id="r1")
    insert(src, range(101, 104), "2026-01-01 00:00:00")  # late rows inside the planned window (at its high bound)
    r = load_window(cfg, src.conn, catalog, w)
    props = catalog.load_table("ns.t").current_snapshot().summary.additional_properties
    assert props[state.ROWS_PLANNED] == "100"
    assert props[state.ROWS_EXTRACTED] == "103" and props[state.ROWS] == "103"
    assert (r.rows_planned, r.rows_extracted, r.rows) == (100, 103, 103)


# ---------------------------------------------------------------- one commit, several snapshots (issue 20, item 1)


def _snowberg(snap: Any) -> dict[str, str]:
    return {k: v for k, v in snap.summary.additional_properties.items() if k.startswith(state.PREFIX)}


@pytest.mark.parametrize("strategy", ["merge_on_read", "copy_on_write"])
def test_only_the_last_snapshot_of_a_merge_commit_carries_the_state(
    src: Any, catalog: Any, variables: Any, strategy: str
) -> None:
    from maint_harness import table_cfg

    cfg = table_cfg(src, merge_strategy=strategy)
    run(cfg, src, catalog, variables, "r1")
    src.sql(f"UPDATE {src.table('SRC')} SET NOTE = 'b', UPDATED_AT = {NOW} WHERE ID IN (1, 2)")
    run(cfg, src, catalog, variables, "r2")
    t = catalog.load_table("ns.t")
    last = t.current_snapshot()
    parts = []
    for s in state.ancestors(t):
        if _snowberg(s).get(state.RUN_ID) != "r2":
            break
        parts.append(s)
    assert len(parts) >= 2 and parts[0].snapshot_id == last.snapshot_id  # a removal, then the append
    commit_id = _snowberg(last)[state.COMMIT_ID]
    assert state.WATERMARK in _snowberg(last) and state.PARTIAL_OF not in _snowberg(last)
    for p in parts[1:]:
        props = _snowberg(p)
        assert props[state.PARTIAL_OF] == commit_id and state.COMMIT_ID not in props
        assert state.WATERMARK not in props and state.WINDOW_HIGH not in props  # no state: never a target
        assert props[state.RUN_ID] == "r2" and props[state.MODE] == "incremental"
        assert state.last_of_commit(t, p).snapshot_id == last.snapshot_id
    assert state.last_of_commit(t, last).snapshot_id == last.snapshot_id
    # A head left on the removal (another engine's rollback) reads the state before the commit.
    t.manage_snapshots().set_current_snapshot(parts[-1].snapshot_id).commit()
    t = catalog.load_table("ns.t")
    st = state.read_state(t)
    assert st is not None and st.run_id == "r1"
    assert state.find_run_commit(t, "r2", "incremental", _snowberg(last)[state.WINDOW_HIGH]) is None


def test_a_commit_that_only_removes_rows_ends_with_the_snapshot_that_carries_the_state(catalog: Any) -> None:
    """Propagated deletes: the removal's snapshots are partial, an append of no files carries the state."""
    from maint_harness import small_table
    from pyiceberg.expressions import In

    from snowberg.iceberg import gate

    t = small_table(catalog, 2)  # ids 0..19, state of run2
    base = t.current_snapshot().snapshot_id
    gate.commit(
        t,
        t.transaction(),
        state_props=state.current_state_props(t),
        summary={state.RUN_ID: "scheduled__B", state.MODE: "propagate", state.ROWS: "0"},
        replaced=gate.Replacement(rows=In("id", {1, 15})),
        crash_points=None,
        dag_id="snowberg_t__checks",
    )
    t = catalog.load_table("ns.t")
    assert sorted(r["id"] for r in t.scan().to_arrow().to_pylist()) == [i for i in range(20) if i not in (1, 15)]
    staged = []
    for s in state.ancestors(t):
        if s.snapshot_id == base:
            break
        staged.append(s)
    last, parts = staged[0], staged[1:]
    props = _snowberg(last)
    assert last.summary.operation.value == "append" and parts  # the removal staged its own snapshot(s)
    assert props[state.WATERMARK] == "2" and props[state.RUN_ID] == "scheduled__B"
    assert props[state.DAG_ID] == "snowberg_t__checks" and props[state.ROWS_DELETED] == "2"
    assert all(_snowberg(p)[state.PARTIAL_OF] == props[state.COMMIT_ID] for p in parts)
    assert all(state.WATERMARK not in _snowberg(p) for p in parts)
    # The table-property copy keeps the carried state: the load's run, not the propagating DAG's.
    assert t.properties[state.state_property(state.RUN_ID)] == "run2"
    assert state.state_property(state.DAG_ID) not in t.properties
    assert state.read_state(t).snapshot_id == last.snapshot_id


def test_a_watermark_writer_records_its_dag_with_its_run_in_the_summary_and_the_state_copy(
    src: Any, catalog: Any, variables: Any
) -> None:
    cfg = cfg_for(src)
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, src.conn, table, run_id="scheduled__A", dag_id="snowberg_ns_t")
    load_window(cfg, src.conn, catalog, w)
    t = catalog.load_table("ns.t")
    props = _snowberg(t.current_snapshot())
    assert (props[state.RUN_ID], props[state.DAG_ID]) == ("scheduled__A", "snowberg_ns_t")
    assert t.properties[state.state_property(state.DAG_ID)] == "snowberg_ns_t"
    assert props["snowberg.cursor-column"] == "updated_at"  # the identity the state was recorded with


def test_a_head_left_on_a_full_refreshs_removal_is_not_that_refresh_for_its_retry(catalog: Any) -> None:
    """A table without a cursor: its full refresh names its commit by run id and mode alone (no window).

    The refresh's removal snapshot carries that run id and mode too (who wrote it). With main left on it by
    another engine's rollback, the table is empty: the retry must not take the removal for its commit
    (it would write nothing and leave the table empty), and the state is the commit's before it.
    """
    from maint_harness import small_table
    from pyiceberg.expressions import AlwaysTrue

    from snowberg.core.window import Mode, Window
    from snowberg.iceberg import gate

    t = small_table(catalog, 2)
    w = Window(mode=Mode.FULL_REFRESH, run_id="scheduled__R", dag_id="snowberg_t", base_watermark="2")
    assert gate.admit(t, w).go
    gate.commit(
        t,
        t.transaction(),
        state_props=gate.window_state(w),
        replaced=gate.Replacement(rows=AlwaysTrue()),
        crash_points=None,
        dag_id="snowberg_t",
    )
    t = catalog.load_table("ns.t")
    assert gate.admit(t, w).status == "already_committed"  # the whole commit on main: its retry writes nothing
    removal = t.snapshot_by_id(t.current_snapshot().parent_snapshot_id)
    assert _snowberg(removal)[state.RUN_ID] == "scheduled__R" and state.PARTIAL_OF in _snowberg(removal)
    t.manage_snapshots().set_current_snapshot(removal.snapshot_id).commit()
    t = catalog.load_table("ns.t")
    assert t.scan().to_arrow().num_rows == 0
    assert gate.admit(t, w).go  # the retry loads again
    assert state.read_state(t).run_id == "run2"
