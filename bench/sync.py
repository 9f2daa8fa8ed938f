"""Lake → native Snowflake sync of a merge: what a 10,000-row change into a large lake table costs.

    .venv/bin/python -m bench.sync                          # 1M and 10M-row lake tables, 3 repeats
    .venv/bin/python -m bench.sync --sizes 1000000 --reload-rows 100000

The lake table is written directly with pyiceberg (files of 250k rows, keys
ascending), shaped like a snowberg merge table: ``id`` is a required column
and the table's Iceberg identifier field. Each timed run goes through
configuration: a ``syncs.yaml`` entry (no ``key_columns``: the identifier
field is the key; the full-reload contrast says ``key_columns: []`` and
``on_rewrite: full_reload``), the DAG ``build_sync_dags`` makes of it, and
that DAG's ``sync`` operator, with the catalog and Snowflake connection
given as Airflow connections in the environment. The native target is created by the sync's own DDL and filled
with ``--target-rows`` rows by the emulator's GENERATOR, and the sync state
is set to the lake's snapshot — as if the initial sync had run (the emulator
cannot hold and insert 10M rows through VALUES in reasonable time). Then a
merge-on-read change of ``--changed`` keys (uniform over the table) is
committed to the lake and one ``load_native`` run applies it; the run is
timed in its own process. ``--reload-rows`` also times what the same run
costs as a full reload (the path used before keyed changes) on a smaller
table, for contrast.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.run import REPO, child_env, med_range, warm_bytecode_cache

TARGET = ("SYNCBENCH", "SHOP", "EVENTS")


def SCHEMA() -> Any:  # noqa: N802 - reads as the constant it is
    import pyarrow as pa

    return pa.schema([pa.field("id", pa.int64(), nullable=False), ("note", pa.string()), ("amount", pa.float64())])


def build_lake(root: Path, n: int, file_rows: int = 250_000) -> Any:
    import itertools
    import uuid

    import numpy as np
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    (root / "warehouse").mkdir(parents=True)
    cat = SqlCatalog("s", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=f"file://{root / 'warehouse'}")
    cat.create_namespace("shop")
    schema = SCHEMA()
    t = cat.create_table("shop.events", schema=schema)
    with t.update_schema() as upd:
        upd.set_identifier_fields("id")  # what snowberg's merge tables declare
    tx = t.transaction()
    counter, write_uuid = itertools.count(0), uuid.uuid4()
    with tx.update_snapshot().fast_append() as fa:
        for lo in range(0, n, file_rows):
            k = np.arange(lo, min(n, lo + file_rows), dtype=np.int64)
            batch = pa.table({"id": k, "note": pa.array(k).cast(pa.string()), "amount": k * 0.5}, schema=schema)
            for f in _dataframe_to_data_files(tx.table_metadata, batch, t.io, write_uuid=write_uuid, counter=counter):
                fa.append_data_file(f)
    tx.commit_transaction()
    return cat


def merge_change(cat: Any, n: int, k: int, rng: random.Random) -> None:
    import pyarrow as pa

    from snowberg.iceberg.merge import write_position_deletes

    t = cat.load_table("shop.events")
    keys = pa.array(sorted(rng.sample(range(n), k)), pa.int64())
    tx = t.transaction()
    write_position_deletes(tx, pa.table({"id": keys}), {}, io=t.io)
    tx.append(pa.table({"id": keys, "note": pa.array(["changed"] * k), "amount": pa.array([1.0] * k)}, schema=SCHEMA()))
    tx.commit_transaction()


def prepare_target(conn: Any, cat: Any, rows: int) -> None:
    """Target table (the sync's DDL), ``rows`` rows, and the sync state pointing at the lake's snapshot."""
    from snowberg.core.identifiers import TableName
    from snowberg.sync.ddl import create_table_sql, target_columns
    from snowberg.sync.native import DEFAULT_LINEAGE_COLUMN, default_state_table, state_table_ddl

    t = cat.load_table("shop.events")
    target = TableName(database=TARGET[0], schema=TARGET[1], table=TARGET[2])
    state = default_state_table(target)
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE IF NOT EXISTS {TARGET[0]}")
    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {TARGET[0]}.{TARGET[1]}")
    cur.execute(f"DROP TABLE IF EXISTS {target.quoted()}")
    cur.execute(create_table_sql(target, target_columns(t.schema()), DEFAULT_LINEAGE_COLUMN))
    snap = t.current_snapshot().snapshot_id
    cur.execute(
        f"INSERT INTO {target.quoted()} SELECT seq4(), TO_VARCHAR(seq4()), seq4() * 0.5, {snap} "
        f"FROM TABLE(GENERATOR(ROWCOUNT => {rows}))"
    )
    cur.execute(state_table_ddl(state))
    cur.execute(f"DELETE FROM {state.quoted()}")
    cur.execute(
        f'INSERT INTO {state.quoted()} ("TARGET_TABLE", "SOURCE_TABLE_UUID", "SOURCE_SNAPSHOT_ID") '
        "VALUES (%(t)s, %(u)s, %(s)s)",
        {"t": str(target), "u": str(t.metadata.table_uuid), "s": snap},
    )
    cur.close()


def phase(spec: dict[str, Any]) -> dict[str, Any]:
    """One sync run in this process (called with --phase)."""
    import os
    import resource

    t0 = time.monotonic()

    from snowberg.airflow.sync_dags import build_sync_dags
    from snowberg.local.stack import snowflake_connection_uri

    root = Path(spec["lake"])
    os.environ["AIRFLOW_CONN_BENCH_LAKE"] = json.dumps(
        {
            "conn_type": "sqlite",
            "host": str(root / "catalog.db"),
            "extra": {"warehouse": f"file://{root / 'warehouse'}", "catalog_name": "s"},
        }
    )
    os.environ["AIRFLOW_CONN_BENCH_SNOWFLAKE"] = snowflake_connection_uri(spec["port"], TARGET[0])
    entry: dict[str, Any] = {
        "name": "bench_events",
        "schedule": None,
        "source": {"catalog": "bench_lake", "table": "shop.events"},
        "target": {
            "kind": "native",
            "snowflake_conn_id": "bench_snowflake",
            "table": ".".join(TARGET),
            "insert_batch_rows": 5000,
        },
        **spec["config"],
    }
    config = root / "syncs.yaml"
    config.write_text(json.dumps({"syncs": [entry]}))  # JSON is YAML
    op = build_sync_dags(config)["snowberg_sync_bench_events"].task_dict["sync"]
    r = op.execute({"run_id": spec["run_id"]})
    hwm = next(
        (int(ln.split()[1]) / 1024 for ln in Path("/proc/self/status").read_text().splitlines() if "VmHWM" in ln),
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    return {
        "mode": r["mode"],
        "rows": r["rows"],
        "seconds": r["seconds"],
        "process_seconds": time.monotonic() - t0,
        "rss_mb": hwm,
    }


def run(spec: dict[str, Any]) -> dict[str, Any]:
    t = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "bench.sync", "--phase", json.dumps(spec)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=child_env(),
    )
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode or line is None:
        raise RuntimeError(f"sync phase failed:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    out: dict[str, Any] = json.loads(line[7:])
    out["wall"] = time.monotonic() - t
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--changed", type=int, default=10_000)
    ap.add_argument("--target-rows", type=int, default=1_000_000)
    ap.add_argument("--reload-rows", type=int, default=0, help="also time a full reload of a table this size")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    if args.phase:
        print("RESULT " + json.dumps(phase(json.loads(args.phase))), flush=True)
        return 0

    from bench.worker import connect
    from snowberg.local.stack import FakesnowServer

    root = Path(tempfile.mkdtemp(prefix="snowberg-sync-bench-"))
    rng = random.Random(7)
    warm_bytecode_cache()
    rows: list[tuple[str, int, list[dict[str, Any]]]] = []
    try:
        with FakesnowServer(root / "fakesnow") as fs:
            conn = connect({"port": fs.port})
            for n in [int(x) for x in args.sizes.split(",")]:
                runs = []
                lake = root / f"lake-{n}"
                cat = build_lake(lake, n)
                base = cat.load_table("shop.events").current_snapshot().snapshot_id
                for r in range(args.repeats):
                    # every repeat starts from the built snapshot: the same table, a new change
                    cat.load_table("shop.events").manage_snapshots().set_current_snapshot(base).commit()
                    prepare_target(conn, cat, min(args.target_rows, n))
                    merge_change(cat, n, args.changed, rng)
                    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
                    x = run({"port": fs.port, "lake": str(lake), "run_id": f"s{r}", "config": {}})
                    x["load"] = load
                    runs.append(x)
                    print(f"# {n:,} changes: {x}", flush=True)
                shutil.rmtree(lake, ignore_errors=True)
                rows.append((f"{args.changed:,} changed of {n:,} (keyed changes)", n, runs))
            if args.reload_rows:
                runs = []
                for r in range(args.repeats):
                    lake = root / f"reload-{r}"
                    cat = build_lake(lake, args.reload_rows)
                    prepare_target(conn, cat, args.reload_rows)
                    merge_change(cat, args.reload_rows, args.changed, rng)
                    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
                    x = run(
                        {
                            "port": fs.port,
                            "lake": str(lake),
                            "run_id": f"f{r}",
                            "config": {"key_columns": [], "on_rewrite": "full_reload"},
                        }
                    )
                    x["load"] = load
                    runs.append(x)
                    print(f"# {args.reload_rows:,} full reload: {x}", flush=True)
                    shutil.rmtree(lake, ignore_errors=True)
                rows.append((f"{args.changed:,} changed of {args.reload_rows:,} (full reload)", args.reload_rows, runs))
            conn.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\n| sync run | mode | rows sent | wall s (process) | in-process s | peak RSS MB | load avg |")
    print("|---|---|---|---|---|---|---|")
    for label, _, rs in rows:
        print(
            f"| {label} | {rs[0]['mode']} | {rs[0]['rows']:,} | {med_range([x['wall'] for x in rs])} | "
            f"{med_range([x['seconds'] for x in rs])} | {statistics.median(x['rss_mb'] for x in rs):,.0f} | "
            f"{rs[0]['load']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
