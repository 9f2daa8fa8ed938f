"""Merge cost against the table's size: a fixed change merged into lake tables of growing size.

    .venv/bin/python -m bench.merge                                   # 1M and 10M rows, 10k changed, both strategies
    .venv/bin/python -m bench.merge --sizes 1000000,5000000,10000000 --strategies merge_on_read
    .venv/bin/python -m bench.merge --sizes 1000000 --changed 10000,100000 --memory   # peak RSS vs changed rows

The lake table of each size is written directly with pyiceberg (files of
``--file-rows`` rows, keys ascending across files, as cursor-ordered loads
leave a table), on top of one snowberg commit that holds the state, so the
emulator only holds the changed rows. Each measured run is one snowberg
incremental run (plan → load → publish) in its own process
(``bench.worker``); after each run the table is rolled back to the built
snapshot, so every repeat merges the same change into the same table.

Distributions of the changed keys: ``uniform`` (sampled over every key) and
``newest`` (sampled from the newest 5% of keys).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.run import med_range, run_phase, warm_bytecode_cache

SOURCE = "SNOWBERG_DEMO.BENCH.EVENTS"
TARGET = "bench.events"
DDL = (
    f"CREATE OR REPLACE TABLE {SOURCE} (ID NUMBER(18,0), CUSTOMER NUMBER(9,0), AMOUNT NUMBER(10,2), "
    "NOTE VARCHAR, FLAG BOOLEAN, DAY DATE, UPDATED_AT TIMESTAMP_NTZ(6))"
)
T0 = 1_767_225_600  # 2026-01-01 UTC, seconds


def config(strategy: str) -> dict[str, Any]:
    return {
        "name": "bench_events",
        "source": {"table": SOURCE},
        "target": TARGET,
        "primary_key": ["id"],
        "number_as_long": [],
        "merge_strategy": strategy,
    }


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def source_rows(conn: Any, ids: list[int], updated: str) -> None:
    cur = conn.cursor()
    cur.execute(f"DELETE FROM {SOURCE}")
    step = 5000
    for i in range(0, len(ids), step):
        chunk = ids[i : i + step]
        values = ", ".join(
            f"({k}, {k % 1000}, {k % 997}.5, 'n{k}', {'TRUE' if k % 2 else 'FALSE'}, '2026-01-02', '{updated}')"
            for k in chunk
        )
        cur.execute(f"INSERT INTO {SOURCE} VALUES {values}")
    cur.close()


def build_lake(spec: dict[str, Any], conn: Any, n: int, file_rows: int) -> int:
    """Seed commit through snowberg (schema + state), then n rows appended by pyiceberg in one snapshot."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from bench.worker import catalog
    from snowberg.iceberg.tables import arrow_schema

    source_rows(conn, [n + 10_000_000], "2025-12-31 00:00:00")  # one row: creates the table and the watermark
    run_phase({**spec, "phase": "snowberg", "run_id": "seed", "slice_rows": 0})
    cat = catalog(spec)
    t = cat.load_table(TARGET)
    schema = arrow_schema(t.schema())
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    counter = itertools.count(0)
    write_uuid = uuid.uuid4()
    tx = t.transaction()
    with tx.update_snapshot().fast_append() as fa:
        for lo in range(0, n, file_rows):
            k = np.arange(lo, min(n, lo + file_rows), dtype=np.int64)
            cols = {
                "id": pa.array(k),
                "customer": pa.array(k % 1000),
                "amount": pa.array((k % 997).astype(np.int16)).cast(pa.decimal128(10, 2)),
                "note": pc.binary_join_element_wise("n", pa.array(k).cast(pa.string()), ""),
                "flag": pa.array(k % 2 == 1),
                "day": pa.array((k // 100_000 + 20_000).astype(np.int32)).cast(pa.date32()),
                "updated_at": pa.array((k + T0 - n - 86_400) * 1_000_000).cast(pa.timestamp("us")),
            }
            batch = pa.table({f.name: cols[f.name].cast(f.type) for f in schema}, schema=schema)
            for f in _dataframe_to_data_files(tx.table_metadata, batch, t.io, write_uuid=write_uuid, counter=counter):
                fa.append_data_file(f)
    tx.commit_transaction()
    t = cat.load_table(TARGET)
    snap = t.current_snapshot()
    assert snap is not None
    return int(snap.snapshot_id)


def rollback(spec: dict[str, Any], snapshot_id: int) -> None:
    from bench.worker import catalog

    t = catalog(spec).load_table(TARGET)
    t.manage_snapshots().set_current_snapshot(snapshot_id).commit()
    Path(spec["variables"]).unlink(missing_ok=True)


def changed_keys(n: int, k: int, dist: str, rng: random.Random) -> list[int]:
    if dist == "uniform":
        return sorted(rng.sample(range(n), k))
    lo = n - max(n // 20, k)
    return sorted(rng.sample(range(lo, n), k))


def check_rows(spec: dict[str, Any], n: int, keys: list[int], changed_at: dt.datetime) -> None:
    """Correctness: the table holds n + 1 rows, each changed key once, in its new version."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from bench.worker import catalog

    t = catalog(spec).load_table(TARGET)
    a = t.scan(selected_fields=("id", "updated_at")).to_arrow()
    total = a.num_rows
    new = a.filter(pc.greater_equal(a.column("updated_at"), pa.scalar(changed_at, a.schema.field("updated_at").type)))
    got = sorted(new.column("id").to_pylist())
    if total != n + 1 or got != keys:
        raise AssertionError(
            f"wrong rows after the merge: {total:,} rows (want {n + 1:,}), "
            f"changed keys {len(got)} {got[:5]} want {len(keys)} {keys[:5]}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--changed", default="10000", help="comma list of changed-row counts")
    ap.add_argument("--distributions", default="uniform,newest")
    ap.add_argument("--strategies", default="merge_on_read,copy_on_write")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--file-rows", type=int, default=250_000)
    ap.add_argument("--slice-rows", type=int, default=25_000, help="max_rows_per_slice of the merge runs")
    ap.add_argument("--check", action="store_true", help="verify the rows after the first run of each cell")
    ap.add_argument("--root", default=None)
    args = ap.parse_args(argv)

    from bench.worker import connect
    from snowberg.local.stack import FakesnowServer

    root = Path(args.root or tempfile.mkdtemp(prefix="snowberg-merge-bench-"))
    rng = random.Random(13)
    warm_bytecode_cache()
    results: list[dict[str, Any]] = []
    try:
        with FakesnowServer(root / "fakesnow") as fs:
            conn = connect({"port": fs.port})
            cur = conn.cursor()
            cur.execute("CREATE DATABASE IF NOT EXISTS SNOWBERG_DEMO")
            cur.execute("CREATE SCHEMA IF NOT EXISTS SNOWBERG_DEMO.BENCH")
            cur.execute(DDL)
            cur.close()
            for n in [int(x) for x in args.sizes.split(",")]:
                for strategy in args.strategies.split(","):
                    lake = root / f"lake-{n}-{strategy}"
                    shutil.rmtree(lake, ignore_errors=True)
                    (lake / "warehouse").mkdir(parents=True)
                    spec = {
                        "port": fs.port,
                        "lake": str(lake),
                        "variables": str(lake / "variables.json"),
                        "target": TARGET,
                        "config": config(strategy),
                    }
                    t = time.monotonic()
                    base = build_lake(spec, conn, n, args.file_rows)
                    time.sleep(3)  # the changed rows' cursor must be later than the seed run's watermark
                    print(f"# built {n:,} rows ({strategy}) in {time.monotonic() - t:.1f}s", flush=True)
                    for k in [int(x) for x in args.changed.split(",")]:
                        for dist in args.distributions.split(","):
                            keys = changed_keys(n, k, dist, rng)
                            changed_at = dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0) - dt.timedelta(
                                seconds=2
                            )
                            source_rows(conn, keys, changed_at.isoformat(sep=" "))
                            runs = []
                            for r in range(args.repeats):
                                rollback(spec, base)
                                load = load_average()
                                x = run_phase(
                                    {
                                        **spec,
                                        "phase": "snowberg",
                                        "run_id": f"m-{k}-{dist}-{r}",
                                        "slice_rows": args.slice_rows,
                                    }
                                )
                                x["load"] = load
                                if x.get("status") != "committed" or x.get("rows") != k:
                                    raise AssertionError(f"merge run did not commit {k} rows: {x}")
                                runs.append(x)
                                if args.check and r == 0:
                                    check_rows(spec, n, keys, changed_at)
                            cell = {"size": n, "strategy": strategy, "changed": k, "dist": dist, "runs": runs}
                            results.append(cell)
                            print(
                                f"# {n:,} {strategy} {k:,} {dist}: "
                                + ", ".join(f"{x['wall']:.2f}s/{x['rss_mb']:.0f}MB (load {x['load']})" for x in runs),
                                flush=True,
                            )
                    shutil.rmtree(lake, ignore_errors=True)
            conn.close()
    finally:
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    print("\n".join(render(results)))
    return 0


def render(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "| table rows | strategy | changed rows | distribution | wall s (process) | in-process s | peak RSS MB "
        "| load avg at start |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in results:
        rs = c["runs"]
        lines.append(
            f"| {c['size']:,} | {c['strategy']} | {c['changed']:,} | {c['dist']} | "
            f"{med_range([r['wall'] for r in rs])} | "
            f"{med_range([r['seconds'] for r in rs])} | {med_range([r['rss_mb'] for r in rs], '{:,.0f}')} | "
            f"{rs[0]['load']} |"
        )
    by = {
        (c["size"], c["strategy"], c["changed"], c["dist"]): statistics.median(r["wall"] for r in c["runs"])
        for c in results
    }
    sizes = sorted({c["size"] for c in results})
    if len(sizes) > 1:
        lines += [
            "",
            f"| ratio {sizes[-1]:,} ÷ {sizes[0]:,} rows (process wall) | strategy | changed | distribution |",
            "|---|---|---|---|",
        ]
        for (n, s, k, d), v in sorted(by.items()):
            if n == sizes[-1] and (sizes[0], s, k, d) in by:
                lines.append(f"| {v / by[(sizes[0], s, k, d)]:.2f}× | {s} | {k:,} | {d} |")
    return lines


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
