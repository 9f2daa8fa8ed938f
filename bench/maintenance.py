"""Maintenance benchmarks: the demo table after many small runs, and compaction's memory at two sizes.

    .venv/bin/python -m bench.maintenance                  # 100 runs, 20k orders, 40 changed per run
    .venv/bin/python -m bench.maintenance --runs 30 --orders 5000
    .venv/bin/python -m bench.maintenance memory           # compaction peak RSS: 1M and 5M rows, 2 shapes, 3 runs

``memory`` builds, per shape and size, a merge-on-read table of many small
files with position delete files (``--file-rows`` rows per data file, then
``--merges`` merge runs each replacing ``--merge-share`` of the keys, spread
over every file), then compacts it ``--repeats`` times, each run in its own
process, restoring the catalog in between (the same starting table). Each
compaction process reports its peak RSS (``ru_maxrss``, imports included)
and its RSS before compacting; the summary gives medians and the ratio of
the largest size's peak to the smallest's (the bound: at most 1.3). Shapes:
``typed`` (bench.shapes: NUMBER(38,0) key kept as decimal, NUMBER(10,2),
FLOAT, VARCHAR, BOOLEAN, DATE, VARIANT, TIMESTAMP_NTZ) and ``narrow``
(NUMBER(18,0) key as long, VARCHAR, TIMESTAMP_NTZ), generated in Arrow with
the values bench.shapes seeds in the emulator (the emulator is not needed to
measure compaction).

The default mode:

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
    o = m.remove_orphan_files(table, older_than=timedelta(0), allow_short_age=True)  # nothing else writes here
    out["orphan_files_removed"] = o.deleted
    table = catalog.load_table(cfg.target)
    out["rows_after_all"] = len(table.scan().to_arrow())
    out["work_dir"] = str(work)
    return out


# ---------------------------------------------------------------- compaction memory

SHAPES = ("typed", "narrow")


def _decimals(unscaled: Any, precision: int, scale: int) -> Any:
    """A decimal128 array from unscaled int64 values (built from buffers: no Python Decimal per row)."""
    import numpy as np
    import pyarrow as pa

    lo = unscaled.astype(np.int64)
    words = np.column_stack([lo, np.where(lo < 0, -1, 0).astype(np.int64)]).tobytes()  # 128-bit little-endian
    return pa.Array.from_buffers(pa.decimal128(precision, scale), len(lo), [None, pa.py_buffer(words)])


def shape_batch(shape: str, start: int, n: int) -> Any:
    """Rows ``start … start+n-1`` of a shape, with the values bench.shapes seeds (``seq4()`` = row number)."""
    import numpy as np
    import pyarrow as pa

    seq = np.arange(start, start + n, dtype=np.int64)
    base = np.datetime64("2026-01-01T00:00:00", "us")
    stamps = base + seq.astype("timedelta64[s]")
    ts = pa.array(stamps, pa.timestamp("us"))
    if shape == "narrow":
        return pa.record_batch({"id": pa.array(seq + 1), "note": pa.array([f"n{i}" for i in seq]), "updated_at": ts})
    if shape != "typed":
        raise ValueError(f"unknown shape {shape!r} (known: {', '.join(SHAPES)})")
    return pa.record_batch(
        {
            "id": _decimals(seq + 1, 38, 0),
            "amount": _decimals((seq * 53) % 100_000, 10, 2),
            "rate": pa.array((seq % 10) / 40.0),
            "note": pa.array([f"note {i}" for i in seq]),
            "flag": pa.array(seq % 5 == 0),
            "day": pa.array(stamps.astype("datetime64[D]")),
            "details": pa.array([f'{{"n":{i},"tag":"x{i % 7}"}}' for i in seq]),
            "updated_at": ts,
        }
    )


def build_table(work: Path, shape: str, rows: int, file_rows: int, merges: int, share: float) -> dict[str, Any]:
    """A merge-on-read table of ``rows`` rows in files of ``file_rows``, then ``merges`` merge runs."""
    import numpy as np
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    from snowberg.iceberg import gate, state
    from snowberg.iceberg.deletes import live_rows

    (work / "wh").mkdir(parents=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{work}/c.db", warehouse=f"file://{work}/wh")
    catalog.create_namespace("b")
    first = shape_batch(shape, 0, 1)
    t = catalog.create_table("b.t", schema=first.schema, properties={"commit.retry.num-retries": "0"})

    def props(i: int) -> dict[str, str]:
        return {state.WATERMARK: str(i), state.CURSOR_KIND: "number", state.RUN_ID: f"run{i}", state.MODE: "x"}

    one_file_per_chunk = t.metadata.model_copy(
        update={"properties": {**t.metadata.properties, "write.target-file-size-bytes": str(1 << 40)}}
    )
    tx = t.transaction()
    with tx.update_snapshot(snapshot_properties=props(0)).fast_append() as fa:
        for start in range(0, rows, file_rows):
            batch = shape_batch(shape, start, min(file_rows, rows - start))
            for f in _dataframe_to_data_files(one_file_per_chunk, pa.Table.from_batches([batch]), t.io):
                fa.append_data_file(f)
    tx.commit_transaction()
    rng = np.random.default_rng(7)
    for m in range(1, merges + 1):
        t = catalog.load_table("b.t")
        picked = np.sort(rng.choice(rows, size=int(rows * share), replace=False))
        # New versions of the picked rows: the same keys, the other values from row numbers beyond the table.
        keys = shape_batch(shape, 0, 0).schema.field("id").type
        key_col = pa.array(picked + 1) if keys == pa.int64() else _decimals(picked + 1, 38, 0)
        changed = shape_batch(shape, rows * (m + 1), len(picked)).set_column(0, "id", key_col)
        tx = t.transaction()
        gate.remove_replaced(tx, gate.Replacement(keys=pa.table({"id": key_col})), props(m))
        tx.append(pa.Table.from_batches([changed]), snapshot_properties=props(m))
        tx.commit_transaction()
    t = catalog.load_table("b.t")
    files = t.inspect.files().select(["content", "file_size_in_bytes"]).to_pylist()
    return {
        "rows": live_rows(t),
        "data_files": sum(1 for f in files if f["content"] == 0),
        "delete_files": sum(1 for f in files if f["content"] == 1),
        "bytes": sum(f["file_size_in_bytes"] for f in files),
    }


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def compact_child(work: Path) -> dict[str, Any]:
    """One compaction in this process: its peak RSS (imports included) and its RSS just before compacting."""
    import resource

    from pyiceberg.catalog.sql import SqlCatalog

    from snowberg.iceberg import maintenance as m

    catalog = SqlCatalog("bench", uri=f"sqlite:///{work}/c.db", warehouse=f"file://{work}/wh")
    t = catalog.load_table("b.t")
    before = _rss_mb()
    started = time.perf_counter()
    r = m.compact(t)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "status": r.status,
        "rows": r.rows_rewritten,
        "files_in": r.rewritten_files,
        "files_out": r.written_files,
        "delete_files_removed": r.delete_files_removed,
        "groups": len(r.groups),
        "seconds": round(seconds, 2),
        "rss_before_mb": round(before, 1),
        "peak_rss_mb": round(peak, 1),
    }


def memory(
    sizes: list[int], shapes: list[str], repeats: int, file_rows: int, merges: int, share: float
) -> dict[str, Any]:
    import shutil
    import subprocess
    import sys

    from bench.run import child_env

    root = Path(tempfile.mkdtemp(prefix="snowberg-bench-compact-"))
    out: dict[str, Any] = {"load_before": Path("/proc/loadavg").read_text().split()[:3], "shapes": {}}
    try:
        for shape in shapes:
            per: dict[str, Any] = {}
            for rows in sizes:
                work = root / f"{shape}-{rows}"
                t0 = time.perf_counter()
                built = build_table(work, shape, rows, file_rows, merges, share)
                built["build_s"] = round(time.perf_counter() - t0, 1)
                shutil.copy(work / "c.db", work / "c.db.orig")
                runs = []
                for _ in range(repeats):
                    shutil.copy(work / "c.db.orig", work / "c.db")  # the same starting table for every run
                    proc = subprocess.run(
                        [sys.executable, "-m", "bench.maintenance", "compact-child", str(work)],
                        cwd=REPO,
                        env=child_env(),
                        capture_output=True,
                        text=True,
                    )
                    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
                    if proc.returncode != 0 or line is None:
                        raise RuntimeError(f"compaction failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
                    runs.append(json.loads(line[len("RESULT ") :]))
                per[str(rows)] = {
                    "table": built,
                    "runs": runs,
                    "median_peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
                    "median_rss_before_mb": statistics.median(r["rss_before_mb"] for r in runs),
                    "median_seconds": statistics.median(r["seconds"] for r in runs),
                }
                shutil.rmtree(work / "wh", ignore_errors=True)
            lo, hi = per[str(min(sizes))], per[str(max(sizes))]
            per["peak_ratio_largest_to_smallest"] = round(hi["median_peak_rss_mb"] / lo["median_peak_rss_mb"], 3)
            out["shapes"][shape] = per
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out["load_after"] = Path("/proc/loadavg").read_text().split()[:3]
    return out


def main() -> None:
    import sys

    if len(sys.argv) > 1 and sys.argv[1] == "compact-child":
        print("RESULT " + json.dumps(compact_child(Path(sys.argv[2]))))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "memory":
        p = argparse.ArgumentParser(prog="python -m bench.maintenance memory")
        p.add_argument("--sizes", default="1000000,5000000")
        p.add_argument("--shapes", default=",".join(SHAPES))
        p.add_argument("--repeats", type=int, default=3)
        p.add_argument("--file-rows", type=int, default=10_000)
        p.add_argument("--merges", type=int, default=3)
        p.add_argument("--merge-share", type=float, default=0.005)
        a = p.parse_args(sys.argv[2:])
        sizes = [int(x) for x in a.sizes.split(",")]
        result = memory(sizes, a.shapes.split(","), a.repeats, a.file_rows, a.merges, a.merge_share)
        print(json.dumps(result, indent=2))
        return
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--orders", type=int, default=20_000)
    p.add_argument("--changes", type=int, default=40)
    p.add_argument("--keep", type=int, default=5)
    a = p.parse_args()
    print(json.dumps(run(a.runs, a.orders, a.changes, a.keep), indent=2))


if __name__ == "__main__":
    main()
