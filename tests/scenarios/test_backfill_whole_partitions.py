"""A backfill whose window covers whole partitions of a table partitioned by a transform of the cursor
replaces exactly those partitions: the commit drops their files (no rewrite), adds the reloaded rows,
keeps the watermark, and leaves every other partition's files untouched."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowberg" / "iceberg"))
from maint_harness import DDL, table_cfg  # noqa: E402

from snowberg.iceberg import state  # noqa: E402
from snowberg.load.extract import load_window  # noqa: E402
from snowberg.load.plan import BACKFILL, plan_run  # noqa: E402
from snowberg.load.publish import publish, reconcile_before_plan  # noqa: E402


def test_backfill_of_whole_days_replaces_exactly_those_partitions(sfdb: Any, catalog: Any, variables: Any) -> None:
    sfdb.sql(DDL.format(t=sfdb.table("SRC")))
    days = ["2026-01-01", "2026-01-02", "2026-01-03"]
    rows = ", ".join(
        f"({d * 10 + h}, {h}.5, 'v1', '{day} {h:02d}:00:00'::TIMESTAMP_NTZ)"
        for d, day in enumerate(days)
        for h in range(5)
    )
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES {rows}")
    cfg = table_cfg(sfdb, partition_by=["day(updated_at)"], write_mode="append", primary_key=[])
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, sfdb.conn, table, run_id="r1")
    load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)
    t = catalog.load_table("ns.t")
    wm = state.read_state(t).watermark
    files_before = {f["file_path"]: f["partition"] for f in t.inspect.files().to_pylist()}
    assert len(files_before) == 3

    # The source corrects day 2 (rows rewritten in place, cursor unchanged): a backfill of exactly that day.
    sfdb.sql(
        f"UPDATE {sfdb.table('SRC')} SET NOTE = 'v2' WHERE UPDATED_AT >= '2026-01-02' AND UPDATED_AT < '2026-01-03'"
    )
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(
        cfg, sfdb.conn, table, run_id="b1", mode=BACKFILL, start="2026-01-02T00:00:00", end="2026-01-03T00:00:00"
    )
    r = load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)
    assert r.status == "committed" and r.rows == 5
    t = catalog.load_table("ns.t")
    delete_snap = t.snapshot_by_id(t.current_snapshot().parent_snapshot_id)
    p = delete_snap.summary.additional_properties
    assert delete_snap.summary.operation.value == "delete"
    assert (
        p["deleted-data-files"] == "1" and p["deleted-records"] == "5" and "added-data-files" not in p
    )  # dropped, not rewritten
    files_after = {f["file_path"]: f["partition"] for f in t.inspect.files().to_pylist()}
    removed = set(files_before) - set(files_after)
    assert len(removed) == 1 and len(set(files_before) & set(files_after)) == 2  # the other days' files untouched
    assert len(files_after) == 3
    assert state.read_state(t).watermark == wm  # a backfill never moves the watermark
    notes = sorted((r["id"], r["note"]) for r in t.scan().to_arrow().to_pylist())
    assert notes == sorted((d * 10 + h, "v2" if d == 1 else "v1") for d in range(3) for h in range(5))

    # The source deletes day 3 entirely: a backfill of that day empties the partition (a dynamic
    # partition overwrite, which only replaces partitions present in the new rows, would keep it).
    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')} WHERE UPDATED_AT >= '2026-01-03'")
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(
        cfg, sfdb.conn, table, run_id="b2", mode=BACKFILL, start="2026-01-03T00:00:00", end="2026-01-04T00:00:00"
    )
    load_window(cfg, sfdb.conn, catalog, w)
    t = catalog.load_table("ns.t")
    assert len(t.inspect.files()) == 2 and state.read_state(t).watermark == wm
    assert sorted(r["id"] for r in t.scan().to_arrow().to_pylist()) == [d * 10 + h for d in range(2) for h in range(5)]
