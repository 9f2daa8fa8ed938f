"""Maintenance on the demo table after many small incremental runs: files, scan time, metadata size.

    .venv/bin/python -m bench.maintenance                  # 100 runs, 20k orders, 40 changed per run
    .venv/bin/python -m bench.maintenance --runs 30 --orders 5000

Starts its own emulator and a SQLite catalog in a temporary folder, seeds the
demo data, loads ``demo_orders`` (include/tables.yaml, merge on order_id,
partitioned by day(order_date)) once, then drives ``--runs`` incremental runs
through the library (plan → load → publish, as the DAG does), each after
updating ``--changes`` orders. Then it measures:

* data files and the whole-table scan time (median of 5) before and after
  compaction, and the scan time of a freshly written copy of the same rows
  (one ``append`` into an empty table with the same spec) — the ratio is
  what compaction must bring back to ≤ 1.2;
* the metadata file size before and after snapshot expiry (keeping the newest
  ``--keep``), and the number of orphan files the sweep removes.

Prints one JSON document (docs/maintenance.md quotes a run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class _Vars(dict):  # type: ignore[type-arg]
    def set(self, k: str, v: str) -> None:
        self[k] = v


def _scan_seconds(table: Any, repeat: int = 15) -> tuple[float, float]:
    """Median (wall, CPU) seconds of a whole-table scan; CPU time is steadier on a shared machine."""
    table.scan().to_arrow()  # warm the file system cache
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        table.scan().to_arrow()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return round(statistics.median(wall), 4), round(statistics.median(cpu), 4)


def run(runs: int, orders: int, changes: int, keep: int) -> dict[str, Any]:
    from pyiceberg.catalog.sql import SqlCatalog

    from snowberg.config.table_config import load_config
    from snowberg.iceberg import maintenance as m
    from snowberg.load.extract import load_window
    from snowberg.load.plan import plan_run
    from snowberg.load.publish import publish, reconcile_before_plan
    from snowberg.local.seed import DATABASE, SCHEMA, seed
    from snowberg.local.stack import FakesnowServer

    work = Path(tempfile.mkdtemp(prefix="snowberg-bench-maint-"))
    (work / "wh").mkdir()
    catalog = SqlCatalog("lake", uri=f"sqlite:///{work}/c.db", warehouse=f"file://{work}/wh")
    base = next(t for t in load_config(REPO / "include" / "tables.yaml").tables if t.name == "demo_orders")
    assert base.cursor is not None
    cfg = base.model_copy(update={"cursor": base.cursor.model_copy(update={"commit_lag": timedelta(0)})})
    variables = _Vars()
    out: dict[str, Any] = {"runs": runs, "orders": orders, "changes_per_run": changes}
    with FakesnowServer(work / "fakesnow") as srv:
        conn: Any = srv.connect()
        seed(conn, orders=orders)
        conn.cursor().execute(f"USE DATABASE {DATABASE}")

        def one(run_id: str) -> None:
            table, _ = reconcile_before_plan(cfg, catalog, variables)
            w = plan_run(cfg, conn, table, run_id=run_id)
            load_window(cfg, conn, catalog, w)
            publish(cfg, catalog, w, variables)

        t0 = time.perf_counter()
        one("initial")
        out["initial_load_s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        for i in range(runs):
            lo = (i * changes * 7) % max(orders - changes * 7, 1)
            conn.cursor().execute(
                f"UPDATE {DATABASE}.{SCHEMA}.ORDERS SET QUANTITY = QUANTITY + 1, UPDATED_AT = "
                "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ) "
                "WHERE ORDER_ID > %(lo)s AND ORDER_ID <= %(hi)s AND MOD(ORDER_ID, 7) = 0",
                {"lo": lo, "hi": lo + changes * 7},
            )
            time.sleep(0.002)
            one(f"run{i:03d}")
        out["incremental_runs_s"] = round(time.perf_counter() - t0, 2)
        conn.close()

    table = catalog.load_table(cfg.target)
    rows = table.scan().to_arrow()
    fresh = catalog.create_table("shop.orders_fresh", schema=table.schema(), partition_spec=table.spec())
    fresh.append(rows)
    fresh = catalog.load_table("shop.orders_fresh")
    out["rows"] = rows.num_rows
    out["snapshots_before"] = len(table.metadata.snapshots)
    out["data_files_before"] = len(table.inspect.files())
    out["fresh_copy_data_files"] = len(fresh.inspect.files())
    out["scan_s_fresh_copy"], out["scan_cpu_s_fresh_copy"] = _scan_seconds(fresh)
    out["scan_s_before"], out["scan_cpu_s_before"] = _scan_seconds(table)
    out["manifests_before"] = len(table.inspect.manifests())

    c = m.compact(table)
    table = catalog.load_table(cfg.target)
    m.follow_variable(table, cfg.variable_key, variables)
    out["compaction"] = {k: c.to_dict()[k] for k in ("files_before", "files_after", "rows_rewritten", "seconds")}
    out["data_files_after"] = len(table.inspect.files())
    out["manifests_after"] = len(table.inspect.manifests())
    out["scan_s_after"], out["scan_cpu_s_after"] = _scan_seconds(table)
    for kind in ("s", "cpu_s"):
        out[f"scan_{kind}_ratio_before"] = round(out[f"scan_{kind}_before"] / out[f"scan_{kind}_fresh_copy"], 2)
        out[f"scan_{kind}_ratio_after"] = round(out[f"scan_{kind}_after"] / out[f"scan_{kind}_fresh_copy"], 2)

    e = m.expire_snapshots(table, older_than=timedelta(0), min_snapshots=keep)
    table = catalog.load_table(cfg.target)
    out["metadata_bytes_before_expiry"] = e.metadata_bytes_before
    out["metadata_bytes_after_expiry"] = e.metadata_bytes_after
    out["snapshots_after_expiry"] = len(table.metadata.snapshots)
    o = m.remove_orphan_files(table, older_than=timedelta(0))
    out["orphan_files_removed"] = o.deleted
    table = catalog.load_table(cfg.target)
    out["rows_after_all"] = len(table.scan().to_arrow())
    out["work_dir"] = str(work)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--orders", type=int, default=20_000)
    p.add_argument("--changes", type=int, default=40)
    p.add_argument("--keep", type=int, default=5)
    a = p.parse_args()
    print(json.dumps(run(a.runs, a.orders, a.changes, a.keep), indent=2))


if __name__ == "__main__":
    main()
