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


def test_a_load_between_plan_and_rollback_commit_fails_the_rollback(catalog: Any, variables: Any) -> None:
    from pyiceberg.exceptions import CommitFailedException

    t = small_table(catalog, 3)
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


def test_a_tag_name_with_a_trailing_newline_is_refused(catalog: Any) -> None:
    t = small_table(catalog, 1)
    for bad in ("v1\n", "v1\r\n", "\nv1"):
        with pytest.raises(rb.RollbackError, match="invalid tag name"):
            rb.tag_snapshot(t, bad)
    assert rb.list_tags(catalog.load_table("ns.t")) == {}
