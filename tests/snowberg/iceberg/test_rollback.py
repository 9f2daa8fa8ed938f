"""Rollback with the watermark, tags that survive expiry — with real loads from the emulator."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from maint_harness import DDL, NOW, insert, lake_pairs, load, small_table, source_rows, table_cfg

from snowberg.iceberg import maintenance as m
from snowberg.iceberg import rollback as rb
from snowberg.iceberg import state


@pytest.fixture
def src(sfdb: Any) -> Any:
    sfdb.sql(DDL.format(t=sfdb.table("SRC")))
    insert(sfdb, range(1, 21), "2026-01-01 00:00:00")
    return sfdb


def _two_runs(src: Any, catalog: Any, variables: Any, ids: str = "1, 2, 3") -> Any:
    """The table's config after run r1 loaded the source and run r2 merged an update of ``ids``."""
    cfg = table_cfg(src)
    load(cfg, src, catalog, variables, "r1")
    _change(src, ids, "second")
    load(cfg, src, catalog, variables, "r2")
    return cfg


def _change(src: Any, ids: str, note: str) -> None:
    src.sql(f"UPDATE {src.table('SRC')} SET NOTE = '{note}', UPDATED_AT = {NOW} WHERE ID IN ({ids})")
    time.sleep(0.01)


def test_rollback_before_a_run_reloads_its_window_exactly_once(src: Any, catalog: Any, variables: Any) -> None:
    cfg = table_cfg(src)
    load(cfg, src, catalog, variables, "r1")
    _change(src, "1, 2, 3", "second")
    insert(src, range(21, 26), "now", note="new")
    r2 = load(cfg, src, catalog, variables, "r2")
    assert r2.rows == 8
    t = catalog.load_table("ns.t")
    plan = rb.rollback(t, cfg.name, variables=variables, variable_key=cfg.variable_key, before_run="r2")
    t = catalog.load_table("ns.t")
    st = state.read_state(t)
    assert plan.committed and st is not None and st.run_id == "r1" and plan.watermark_after == st.watermark
    assert json.loads(variables[cfg.variable_key])["snapshot_id"] == st.snapshot_id  # the Variable followed
    assert len(lake_pairs(catalog)) == 20 and {u["run_id"] for u in plan.undone} == {
        "r2"
    }  # a merge commits delete + append
    # The next scheduled run reloads the rolled-back window once: lake equals source, no duplicates.
    r3 = load(cfg, src, catalog, variables, "r3")
    assert r3.status == "committed" and r3.rows == 8
    assert lake_pairs(catalog) == source_rows(src)
    assert load(cfg, src, catalog, variables, "r4").status == "nothing_new"
    assert lake_pairs(catalog) == source_rows(src)


def test_rollback_dry_run_shows_the_change_and_changes_nothing(src: Any, catalog: Any, variables: Any) -> None:
    cfg = table_cfg(src)
    load(cfg, src, catalog, variables, "r1")
    _change(src, "4", "x")
    load(cfg, src, catalog, variables, "r2")
    t = catalog.load_table("ns.t")
    head = t.current_snapshot().snapshot_id
    before_var = variables[cfg.variable_key]
    plan = rb.rollback(t, cfg.name, variables=variables, variable_key=cfg.variable_key, before_run="r2", dry_run=True)
    assert not plan.committed and plan.current_snapshot_id == head
    assert "would roll back" in plan.describe() and "run r2" in plan.describe()
    assert plan.rows_now == 20 and plan.rows_after == 20
    assert catalog.load_table("ns.t").current_snapshot().snapshot_id == head
    assert variables[cfg.variable_key] == before_var


def test_rollback_to_snapshot_and_to_tag_and_state_properties_follow(catalog: Any, variables: Any) -> None:
    t = small_table(catalog, 4)
    snaps = [s.snapshot_id for s in t.snapshots()]
    t.transaction().set_properties({"snowberg.state.watermark": "4"}).commit_transaction()
    t = catalog.load_table("ns.t")
    rb.tag_snapshot(t, "good", snaps[1])
    plan = rb.rollback(catalog.load_table("ns.t"), "t", variables=variables, variable_key="k", to_tag="good")
    t = catalog.load_table("ns.t")
    assert t.current_snapshot().snapshot_id == snaps[1] and plan.watermark_after == "2"
    assert t.properties["snowberg.state.watermark"] == "2"
    assert json.loads(variables["k"])["watermark"] == "2"
    rb.rollback(t, "t", variables=variables, variable_key="k", to_snapshot=snaps[3])  # forward again
    t = catalog.load_table("ns.t")
    assert state.read_state(t).watermark == "4" and t.properties["snowberg.state.watermark"] == "4"


def test_rollback_refuses_bad_targets_before_any_write(catalog: Any) -> None:
    t = small_table(catalog, 2)
    with pytest.raises(rb.RollbackError, match="exactly one"):
        rb.plan_rollback(t, "t")
    with pytest.raises(rb.RollbackError, match="not in the table"):
        rb.plan_rollback(t, "t", to_snapshot=123)
    with pytest.raises(rb.RollbackError, match="no tag"):
        rb.plan_rollback(t, "t", to_tag="nope")
    with pytest.raises(rb.RollbackError, match="no commit of run"):
        rb.plan_rollback(t, "t", before_run="nope")
    with pytest.raises(rb.RollbackError, match="first retained snapshot"):
        rb.plan_rollback(t, "t", before_run="run1")


@pytest.mark.parametrize("recorded", [True, False], ids=["no-rebase-recorded", "pyiceberg-default-retries"])
def test_a_load_between_plan_and_rollback_commit_fails_the_rollback(
    catalog: Any, variables: Any, recorded: bool
) -> None:
    """Also on a table that never recorded ``commit.retry.num-retries=0`` (pyiceberg would retry on the new head)."""
    from pyiceberg.exceptions import CommitFailedException

    t = small_table(catalog, 3)
    if not recorded:
        with t.transaction() as tx:
            tx.remove_properties("commit.retry.num-retries")
        t = catalog.load_table("ns.t")
        assert "commit.retry.num-retries" not in t.properties
    stale = catalog.load_table("ns.t")
    target = list(t.snapshots())[0].snapshot_id
    t.append(_one_row())
    with pytest.raises(CommitFailedException):
        rb.rollback(stale, "t", variables=variables, variable_key="k", to_snapshot=target)
    assert "k" not in variables


def _one_row() -> Any:
    import pyarrow as pa

    return pa.table({"id": pa.array([1], pa.int64()), "grp": pa.array([1], pa.int64()), "note": ["x"]})


def test_tags_survive_expiry_and_are_listed(catalog: Any) -> None:
    t = small_table(catalog, 6)
    first = list(t.snapshots())[0].snapshot_id
    assert rb.tag_snapshot(t, "release-1", first) == first
    assert rb.tag_snapshot(catalog.load_table("ns.t"), "release-1", first) == first  # idempotent
    with pytest.raises(rb.RollbackError, match="already exists"):
        rb.tag_snapshot(catalog.load_table("ns.t"), "release-1")
    with pytest.raises(rb.RollbackError, match="invalid tag"):
        rb.tag_snapshot(catalog.load_table("ns.t"), "bad tag;")
    far = datetime.now(UTC) + timedelta(days=30)
    m.expire_snapshots(catalog.load_table("ns.t"), older_than=timedelta(0), min_snapshots=1, now=far)
    t = catalog.load_table("ns.t")
    assert rb.list_tags(t) == {"release-1": first} and t.snapshot_by_id(first) is not None
    assert len(t.scan(snapshot_id=first).to_arrow()) == 10


# ---------------------------------------------------------------- the middle of a commit (issue 20, item 1)


def _merge_run_snapshots(catalog: Any) -> tuple[Any, Any]:
    """(the removal snapshot, the append snapshot) of the table's newest commit: a merge stages both."""
    t = catalog.load_table("ns.t")
    last = t.current_snapshot()
    first = t.snapshot_by_id(last.parent_snapshot_id)
    return first, last


@pytest.mark.parametrize("strategy", ["merge_on_read", "copy_on_write"])
def test_rollback_into_a_merge_run_then_the_next_run_leaves_lake_equal_source(
    src: Any, catalog: Any, variables: Any, strategy: str
) -> None:
    """The issue's reproduction: roll back to a merge run's removal snapshot, run once more, compare.

    Before the fix the rollback was accepted, the table lost the replaced keys while the watermark said
    their window was loaded, and the next run found nothing new: rows missing with every run green.
    Either answer is right now, a refusal or a correct table; the lake must equal the source.
    """
    cfg = table_cfg(src, merge_strategy=strategy)
    load(cfg, src, catalog, variables, "r1")
    _change(src, "1, 2, 3", "second")
    load(cfg, src, catalog, variables, "r2")
    removal, _ = _merge_run_snapshots(catalog)
    t = catalog.load_table("ns.t")
    try:
        rb.rollback(t, cfg.name, variables=variables, variable_key=cfg.variable_key, to_snapshot=removal.snapshot_id)
    except rb.RollbackError:
        pass
    assert load(cfg, src, catalog, variables, "r3").status in ("committed", "nothing_new")
    assert lake_pairs(catalog) == source_rows(src)


def test_rollback_and_tags_refuse_the_middle_of_a_commit_and_name_its_last_snapshot(
    src: Any, catalog: Any, variables: Any
) -> None:
    cfg = _two_runs(src, catalog, variables)
    removal, last = _merge_run_snapshots(catalog)
    t = catalog.load_table("ns.t")
    head_before = t.current_snapshot().snapshot_id
    use = f"use snapshot {last.snapshot_id}"
    with pytest.raises(rb.RollbackError, match=use):
        rb.rollback(t, cfg.name, variables=variables, variable_key=cfg.variable_key, to_snapshot=removal.snapshot_id)
    with pytest.raises(rb.RollbackError, match=use):
        rb.tag_snapshot(t, "mid", removal.snapshot_id)
    # A tag another tool put on it is refused as a rollback target too.
    t.manage_snapshots().create_tag(removal.snapshot_id, "outside").commit()
    t = catalog.load_table("ns.t")
    with pytest.raises(rb.RollbackError, match=use):
        rb.plan_rollback(t, cfg.name, to_tag="outside")
    t = catalog.load_table("ns.t")
    assert t.current_snapshot().snapshot_id == head_before and "mid" not in t.metadata.refs
    # The last snapshot of the commit is a fine target (a no-op here), and so is tagging it.
    assert rb.tag_snapshot(t, "good", last.snapshot_id) == last.snapshot_id


def _legacy_merge_commit(table: Any, replace_ids: list[int], props: dict[str, str]) -> None:
    """A commit as snowberg wrote it before the fix: a delete and an append in ONE transaction, state on both."""
    import pyarrow as pa
    from pyiceberg.expressions import In

    tx = table.transaction()
    tx.delete(In("id", set(replace_ids)), snapshot_properties=props)
    data = pa.table(
        {
            "id": pa.array(replace_ids, pa.int64()),
            "grp": pa.array([x % 3 for x in replace_ids], pa.int64()),
            "note": pa.array(["new"] * len(replace_ids), pa.string()),
        }
    )
    tx.append(data, snapshot_properties=props)
    tx.commit_transaction()


def test_old_commits_with_state_on_every_snapshot_are_read_as_one_commit(catalog: Any, variables: Any) -> None:
    from maint_harness import state_props

    t = small_table(catalog, 2)
    _legacy_merge_commit(t, [1, 2, 13], state_props(3))
    t = catalog.load_table("ns.t")
    last = t.current_snapshot()
    removal = t.snapshot_by_id(last.parent_snapshot_id)
    assert removal.summary.additional_properties[state.WATERMARK] == "3"  # the old form: state on both
    with pytest.raises(rb.RollbackError, match=f"use snapshot {last.snapshot_id}"):
        rb.plan_rollback(t, "t", to_snapshot=removal.snapshot_id)
    with pytest.raises(rb.RollbackError, match=f"use snapshot {last.snapshot_id}"):
        rb.tag_snapshot(t, "mid", removal.snapshot_id)
    # before-run undoes the whole commit: back to run 2's snapshot, watermark 2
    plan = rb.plan_rollback(t, "t", before_run="run3")
    assert plan.target_snapshot_id == removal.parent_snapshot_id and plan.watermark_after == "2"


# ---------------------------------------------------------------- identity with the state (issue 20, item 3)


def _run(
    cfg: Any, sfdb: Any, catalog: Any, variables: Any, run_id: str, mode: str = "incremental", dag_id: str = ""
) -> Any:
    from snowberg.load.extract import load_window
    from snowberg.load.plan import plan_run
    from snowberg.load.publish import publish, reconcile_before_plan

    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, sfdb.conn, table, run_id=run_id, mode=mode, **({"dag_id": dag_id} if dag_id else {}))
    r = load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)
    return r


def test_rollback_across_a_cursor_change_restores_the_identity_with_the_watermark(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    """Cursor updated_at → changed_at, full refresh, rollback before the refresh, next run.

    Before the fix the table went back to updated_at's watermark but kept recording changed_at: the next run
    of the new config passed the identity check and read changed_at > (updated_at's watermark), missing rows.
    """
    from snowberg.iceberg.identity import CURSOR_COLUMN, ConfigDriftError

    t_src = sfdb.table("SRC")
    sfdb.sql(
        f"CREATE TABLE {t_src} (ID NUMBER(38,0), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ, CHANGED_AT TIMESTAMP_NTZ)"
    )
    rows = ", ".join(f"({i}, 'a', '2026-01-01 00:00:00', '2025-01-01 00:00:00')" for i in range(1, 11))
    sfdb.sql(f"INSERT INTO {t_src} VALUES {rows}")
    old = table_cfg(sfdb)
    new = table_cfg(sfdb, cursor={"column": "changed_at"})
    _run(old, sfdb, catalog, variables, "r1")
    _run(new, sfdb, catalog, variables, "refresh", mode="full_refresh")
    assert catalog.load_table("ns.t").properties[CURSOR_COLUMN] == "changed_at"
    plan = rb.rollback(
        catalog.load_table("ns.t"), old.name, variables=variables, variable_key=old.variable_key, before_run="refresh"
    )
    assert plan.committed
    t = catalog.load_table("ns.t")
    assert state.read_state(t).run_id == "r1" and t.properties[CURSOR_COLUMN] == "updated_at"
    # Rows whose new cursor lies below the old cursor's watermark: the old code's next run skipped them.
    more = ", ".join(f"({i}, 'b', {NOW}, '2025-06-01 00:00:00')" for i in range(11, 16))
    sfdb.sql(f"INSERT INTO {t_src} VALUES {more}")
    try:
        _run(new, sfdb, catalog, variables, "next")
    except ConfigDriftError as exc:  # the restored identity refuses the new config: loud, nothing written
        assert "cursor.column was 'updated_at', is now 'changed_at'" in str(exc)
        _run(new, sfdb, catalog, variables, "refresh2", mode="full_refresh")
    lake = sorted(int(r["id"]) for r in catalog.load_table("ns.t").scan().to_arrow().to_pylist())
    assert lake == list(range(1, 16))


def test_rollback_across_a_key_change_restores_the_key_with_the_watermark(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    """Key id → (id, grp), full refresh, rollback before the refresh: the table records its old key again.

    The new config's next run is then refused (loud, nothing written) instead of merging by a key the
    table's rows were not written by; the old config's next run loads on.
    """
    from snowberg.iceberg.identity import PRIMARY_KEY, ConfigDriftError

    t_src = sfdb.table("SRC")
    sfdb.sql(f"CREATE TABLE {t_src} (ID NUMBER(38,0), GRP NUMBER(38,0), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ)")
    rows = ", ".join(f"({i}, 1, 'a', '2026-01-01 00:00:00')" for i in range(1, 11))
    sfdb.sql(f"INSERT INTO {t_src} VALUES {rows}")
    old = table_cfg(sfdb)
    new = table_cfg(sfdb, primary_key=["id", "grp"])
    _run(old, sfdb, catalog, variables, "r1")
    recorded_old = catalog.load_table("ns.t").properties[PRIMARY_KEY]
    _run(new, sfdb, catalog, variables, "refresh", mode="full_refresh")
    assert catalog.load_table("ns.t").properties[PRIMARY_KEY] != recorded_old
    plan = rb.rollback(
        catalog.load_table("ns.t"), old.name, variables=variables, variable_key=old.variable_key, before_run="refresh"
    )
    assert plan.committed
    t = catalog.load_table("ns.t")
    assert state.read_state(t).run_id == "r1" and t.properties[PRIMARY_KEY] == recorded_old
    more = ", ".join(f"({i}, 2, 'b', {NOW})" for i in range(11, 14))
    sfdb.sql(f"INSERT INTO {t_src} VALUES {more}")
    before = catalog.load_table("ns.t").current_snapshot().snapshot_id
    with pytest.raises(ConfigDriftError, match="primary_key"):
        _run(new, sfdb, catalog, variables, "next")
    assert catalog.load_table("ns.t").current_snapshot().snapshot_id == before
    _run(old, sfdb, catalog, variables, "next-old")
    lake = sorted(int(r["id"]) for r in catalog.load_table("ns.t").scan().to_arrow().to_pylist())
    assert lake == list(range(1, 14))


def test_a_rollback_across_a_full_refresh_to_a_snapshot_without_a_recorded_identity_is_refused(catalog: Any) -> None:
    """Snapshots written before commits recorded their identity: whether a refresh changed it is unknown."""
    import pyarrow as pa
    from maint_harness import state_props

    from snowberg.iceberg.identity import CURSOR_COLUMN, PRIMARY_KEY, SOURCE, VERSION

    t = small_table(catalog, 2)
    t.transaction().set_properties(
        {VERSION: "1", SOURCE: "DB.S.T", CURSOR_COLUMN: "a", PRIMARY_KEY: "id"}
    ).commit_transaction()
    t = catalog.load_table("ns.t")
    # Without a refresh in between the identity cannot have changed: the rollback goes ahead.
    assert rb.plan_rollback(t, "t", before_run="run2").watermark_after == "1"
    rows = pa.table({"id": pa.array([1], pa.int64()), "grp": pa.array([1], pa.int64()), "note": ["x"]})
    t.append(rows, snapshot_properties={**state_props(3, "run3"), state.MODE: "full_refresh"})
    t = catalog.load_table("ns.t")
    t.transaction().set_properties({CURSOR_COLUMN: "b"}).commit_transaction()  # what the refresh recorded
    t = catalog.load_table("ns.t")
    with pytest.raises(rb.RollbackError, match="full refresh.*run3"):
        rb.plan_rollback(t, "t", before_run="run3")


def test_a_tag_name_with_a_trailing_newline_is_refused(catalog: Any) -> None:
    t = small_table(catalog, 1)
    for bad in ("v1\n", "v1\r\n", "\nv1"):
        with pytest.raises(rb.RollbackError, match="invalid tag name"):
            rb.tag_snapshot(t, bad)
    assert rb.list_tags(catalog.load_table("ns.t")) == {}


# ---------------------------------------------------------------- run ids of two DAGs (issue 20, item 7)


def test_rollback_before_a_load_run_leaves_the_checks_dags_propagate_with_the_same_run_id(
    src: Any, catalog: Any, variables: Any
) -> None:
    """The checks DAG propagates a source delete as run scheduled__B; then the load DAG's run scheduled__B loads."""
    from snowberg.checks import hashdiff as hd
    from snowberg.checks import volume

    cfg = table_cfg(src)
    load_dag, checks_dag = cfg.dag_id, f"{cfg.dag_id}__checks"
    _run(cfg, src, catalog, variables, "scheduled__A", dag_id=load_dag)
    src.sql(f"DELETE FROM {src.table('SRC')} WHERE ID = 5")
    t = catalog.load_table("ns.t")
    gone = hd.KeyDiff(
        key={"id": "5"}, kind=hd.DiffKind.LAKE_ONLY, source_cursor=None, lake_cursor="5", canonical=("5",)
    )
    done = volume.commit_hard_deletes(
        t,
        cfg,
        [gone],
        columns=[hd.Column(name="id", kind=hd.ValueKind.INTEGER)],
        run_id="scheduled__B",
        expected_snapshot_id=t.current_snapshot().snapshot_id,
        dag_id=checks_dag,
    )
    assert done.removed == 1 and done.not_removed == []
    propagated = catalog.load_table("ns.t").current_snapshot().snapshot_id
    _change(src, "1, 2", "second")
    _run(cfg, src, catalog, variables, "scheduled__B", dag_id=load_dag)
    t = catalog.load_table("ns.t")
    with pytest.raises(rb.RollbackError, match=f"more than one writer: {load_dag} .*; {checks_dag} "):
        rb.plan_rollback(t, cfg.name, before_run="scheduled__B")
    plan = rb.rollback(
        t, cfg.name, variables=variables, variable_key=cfg.variable_key, before_run="scheduled__B", dag_id=load_dag
    )
    assert plan.target_snapshot_id == propagated and {u["dag_id"] for u in plan.undone} == {load_dag}
    assert 5 not in dict(lake_pairs(catalog))  # the propagated delete stays
    _run(cfg, src, catalog, variables, "scheduled__C", dag_id=load_dag)
    assert lake_pairs(catalog) == source_rows(src)


@pytest.mark.parametrize("strategy", ["merge_on_read", "copy_on_write"])
def test_rollback_before_a_merge_run_goes_below_its_first_snapshot_and_the_next_run_restores_it(
    src: Any, catalog: Any, variables: Any, strategy: str
) -> None:
    """``--before-run`` of a merge run: the parent of the run's FIRST snapshot (its removal), not of its last.

    The parent of the last snapshot is the removal itself, half a commit: refused at best. The whole commit
    is undone instead, and the next run reloads its window, equal to the source.
    """
    cfg = table_cfg(src, merge_strategy=strategy)
    r1 = load(cfg, src, catalog, variables, "r1")
    _change(src, "1, 2, 3", "second")
    load(cfg, src, catalog, variables, "r2")
    removal, _ = _merge_run_snapshots(catalog)
    assert removal.parent_snapshot_id == r1.snapshot_id
    t = catalog.load_table("ns.t")
    plan = rb.rollback(t, cfg.name, variables=variables, variable_key=cfg.variable_key, before_run="r2")
    assert (plan.committed, plan.target_snapshot_id) == (True, r1.snapshot_id)
    assert state.read_state(catalog.load_table("ns.t")).run_id == "r1"
    assert load(cfg, src, catalog, variables, "r3").status == "committed"
    assert lake_pairs(catalog) == source_rows(src)


def test_a_rollback_to_a_snapshot_before_snowbergs_first_commit_is_refused(catalog: Any) -> None:
    """Another engine wrote the table first: main there would hold no watermark, so the next run reloads
    everything on top of the rows (append tables: every row twice). Refused, naming a full refresh."""
    import pyarrow as pa

    catalog.create_namespace_if_not_exists("ns")
    t = catalog.create_table("ns.t", schema=pa.schema([("x", pa.int64())]))
    t.append(pa.table({"x": [0]}), snapshot_properties={"other": "writer"})
    before = catalog.load_table("ns.t").current_snapshot().snapshot_id
    props = {state.WATERMARK: "1", state.CURSOR_KIND: "number", state.RUN_ID: "r1", state.MODE: "incremental"}
    catalog.load_table("ns.t").append(pa.table({"x": [1]}), snapshot_properties=props)
    t = catalog.load_table("ns.t")
    head = t.current_snapshot().snapshot_id
    with pytest.raises(rb.RollbackError, match="carries no snowberg state.*full refresh"):
        rb.rollback(t, "t", variables=None, variable_key=None, to_snapshot=before)
    assert catalog.load_table("ns.t").current_snapshot().snapshot_id == head


def test_a_plan_that_read_the_table_before_a_rollback_does_not_strand_the_variable(
    src: Any, catalog: Any, variables: Any
) -> None:
    """A run's reconcile racing ``rollback --before-run``: seen in the maintenance kill loop on S3 + PostgreSQL.

    The plan loads the table, the rollback commits and sets the Variable, then the plan's reconcile (still
    holding the table as it was) finds the Variable behind its state and writes the undone run's state back.
    Its load then fails on the commit gate (main moved). The next run must adopt the rolled-back table, whose
    commit names the head it undid, instead of refusing a Variable "ahead of the table" forever.
    """
    cfg = _two_runs(src, catalog, variables)
    stale = catalog.load_table("ns.t")  # the racing plan's read
    rb.rollback(
        catalog.load_table("ns.t"), cfg.name, variables=variables, variable_key=cfg.variable_key, before_run="r2"
    )
    state.reconcile(cfg.variable_key, state.read_state(stale), variables, stale)  # the lost update
    assert json.loads(variables[cfg.variable_key])["run_id"] == "r2"
    r3 = load(cfg, src, catalog, variables, "r3")
    assert r3.status == "committed" and r3.rows == 3
    assert lake_pairs(catalog) == source_rows(src)
    st = state.read_state(catalog.load_table("ns.t"))
    assert st is not None and json.loads(variables[cfg.variable_key])["snapshot_id"] == st.snapshot_id


def test_a_variable_naming_a_head_undone_outside_snowberg_is_still_refused(
    src: Any, catalog: Any, variables: Any
) -> None:
    """Only a head snowberg's rollback undid is adopted: another engine's rollback leaves the Variable refused.

    Also after an earlier snowberg rollback: its record names the head it undid, not any head after it.
    """
    cfg = _two_runs(src, catalog, variables, "1")
    t = catalog.load_table("ns.t")
    r1 = next(s for s in state.run_commits(t) if s.summary[state.RUN_ID] == "r1")
    t.manage_snapshots().set_current_snapshot(r1.snapshot_id).commit()
    t = catalog.load_table("ns.t")
    with pytest.raises(state.StateError, match="ahead of the table"):
        state.reconcile(cfg.variable_key, state.read_state(t), variables, t)
    # A person resolves it (the Variable follows the table); then a snowberg rollback (recorded), a new run,
    # and another engine's rollback below that run: the Variable names r4, which no snowberg rollback undid.
    variables[cfg.variable_key] = state.mirror_value(state.read_state(t))
    _change(src, "2", "third")
    load(cfg, src, catalog, variables, "r3")
    rb.rollback(
        catalog.load_table("ns.t"), cfg.name, variables=variables, variable_key=cfg.variable_key, before_run="r3"
    )
    load(cfg, src, catalog, variables, "r4")
    t = catalog.load_table("ns.t")
    assert t.properties.get(state.UNDONE_HEAD) and state.read_state(t).run_id == "r4"
    below = next(s for s in state.run_commits(t) if s.summary[state.RUN_ID] != "r4")
    t.manage_snapshots().set_current_snapshot(below.snapshot_id).commit()
    t = catalog.load_table("ns.t")
    with pytest.raises(state.StateError, match="ahead of the table"):
        state.reconcile(cfg.variable_key, state.read_state(t), variables, t)


def test_another_engines_rollback_below_a_snowberg_rollbacks_target_is_refused(
    src: Any, catalog: Any, variables: Any
) -> None:
    """The record of a snowberg rollback covers the snapshots it undid, not its own target or anything below it.

    snowberg rolls back before r3 (main → r2, the Variable follows), then another engine sets main to r1. The
    Variable names r2, an ancestor of the undone head that main no longer holds, but no snowberg rollback undid
    it: the next reconcile must refuse, as for any rollback made outside snowberg.
    """
    cfg = _two_runs(src, catalog, variables)
    _change(src, "4", "third")
    load(cfg, src, catalog, variables, "r3")
    undone = state.read_state(catalog.load_table("ns.t"))
    rb.rollback(
        catalog.load_table("ns.t"), cfg.name, variables=variables, variable_key=cfg.variable_key, before_run="r3"
    )
    assert json.loads(variables[cfg.variable_key])["run_id"] == "r2"
    t = catalog.load_table("ns.t")
    r1 = next(s for s in state.run_commits(t) if s.summary[state.RUN_ID] == "r1")
    t.manage_snapshots().set_current_snapshot(r1.snapshot_id).commit()  # another engine's rollback
    t = catalog.load_table("ns.t")
    with pytest.raises(state.StateError, match="ahead of the table"):
        state.reconcile(cfg.variable_key, state.read_state(t), variables, t)
    assert json.loads(variables[cfg.variable_key])["run_id"] == "r2"
    # Nor is the head snowberg undid adopted any more (a racing run wrote it back): main left the rollback's target.
    variables[cfg.variable_key] = state.mirror_value(undone)
    with pytest.raises(state.StateError, match="ahead of the table"):
        state.reconcile(cfg.variable_key, state.read_state(t), variables, t)
