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

How rows travel (``--first-sync``, ``--crossover``, ``--change-paths``): the same syncs.yaml entry with
``stage``/``stage_url`` (an external stage over the lake's warehouse: COPY reads the lake's files,
``stage_copy``), with ``copy_min_rows: 0`` (the worker writes Parquet, PUTs it into a temporary stage
and COPYs it, ``put_copy``) and with a threshold no run reaches (bound INSERTs, ``insert``)::

    .venv/bin/python -m bench.sync --first-sync --sizes 1000000,10000000 --repeats 1
    .venv/bin/python -m bench.sync --crossover 500,2000,8000,20000
    .venv/bin/python -m bench.sync --sizes 1000000 --change-paths insert,put_copy

Two lake shapes: ``narrow`` (long key, string, double) and ``typed`` (long key, decimal(38,0),
decimal(10,2), double, boolean, date, JSON text as a Snowflake VARIANT lands in the lake, timestamp,
timestamptz). Each run reports the worker's wall time, CPU seconds and peak RSS (its own process),
the emulator's CPU seconds over the run (the fakesnow server: DuckDB executing the statements) and the
statements the worker sent, by kind.
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


def TYPED() -> Any:  # noqa: N802 - reads as the constant it is
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("big", pa.decimal128(38, 0)),
            ("amount", pa.decimal128(10, 2)),
            ("rate", pa.float64()),
            ("flag", pa.bool_()),
            ("day", pa.date32()),
            ("details", pa.string()),
            ("updated_at", pa.timestamp("us")),
            ("placed_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def shape_batch(shape: str, k: Any) -> Any:
    """The rows of keys ``k`` (a numpy int64 array) in a lake shape."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if shape == "narrow":
        return pa.table({"id": k, "note": pa.array(k).cast(pa.string()), "amount": k * 0.5}, schema=SCHEMA())
    ids = pa.array(k)
    base = np.datetime64("2026-01-01T00:00:00", "us")
    return pa.table(
        {
            "id": ids,
            "big": ids.cast(pa.decimal128(38, 0)),
            "amount": pa.array(k % 100_000).cast(pa.decimal128(19, 0)).cast(pa.decimal128(10, 2)),
            "rate": (k % 10) / 40.0,
            "flag": pa.array(k % 5 == 0),
            "day": pa.array((k % 3650).astype(np.int32)).cast(pa.date32()),
            "details": pc.binary_join_element_wise('{"n":', ids.cast(pa.string()), ',"tag":"x"}', ""),
            "updated_at": pa.array(base + k.astype("timedelta64[s]")),
            "placed_at": pa.array(base + k.astype("timedelta64[ms]")).cast(pa.timestamp("us", tz="UTC")),
        },
        schema=TYPED(),
    )


def build_lake(root: Path, n: int, file_rows: int = 250_000, shape: str = "narrow") -> Any:
    import itertools
    import uuid

    import numpy as np
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    (root / "warehouse").mkdir(parents=True)
    cat = SqlCatalog("s", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=f"file://{root / 'warehouse'}")
    cat.create_namespace("shop")
    schema = SCHEMA() if shape == "narrow" else TYPED()
    t = cat.create_table("shop.events", schema=schema)
    with t.update_schema() as upd:
        upd.set_identifier_fields("id")  # what snowberg's merge tables declare
    tx = t.transaction()
    counter, write_uuid = itertools.count(0), uuid.uuid4()
    with tx.update_snapshot().fast_append() as fa:
        for lo in range(0, n, file_rows):
            batch = shape_batch(shape, np.arange(lo, min(n, lo + file_rows), dtype=np.int64))
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

    statements = count_statements()
    root = Path(spec["lake"])
    os.environ["AIRFLOW_CONN_BENCH_LAKE"] = json.dumps(
        {
            "conn_type": "sqlite",
            "host": str(root / "catalog.db"),
            "extra": {"warehouse": f"file://{root / 'warehouse'}", "catalog_name": "s"},
        }
    )
    sf = json.loads(snowflake_connection_uri(spec["port"], TARGET[0]))
    sf["schema"] = TARGET[1]  # the emulator's COPY from a stage wants a current schema; Snowflake does not
    os.environ["AIRFLOW_CONN_BENCH_SNOWFLAKE"] = json.dumps(sf)
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
    entry["target"].update(spec.get("target", {}))
    config = root / "syncs.yaml"
    config.write_text(json.dumps({"syncs": [entry]}))  # JSON is YAML
    op = build_sync_dags(config)["snowberg_sync_bench_events"].task_dict["sync"]
    statements.clear()
    cpu0 = _cpu_seconds()
    r = op.execute({"run_id": spec["run_id"]})
    cpu = _cpu_seconds() - cpu0
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
        "cpu": cpu,
        "path": r.get("load_path", "insert"),
        "statements": dict(statements),
    }


def _cpu_seconds() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def count_statements() -> dict[str, int]:
    """Count the statements this process sends (by first keyword), as the server receives them."""
    from collections import Counter

    from snowflake.connector.cursor import SnowflakeCursor

    counts: Counter[str] = Counter()
    real = SnowflakeCursor.execute

    def execute(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("_is_internal"):
            counts[command.split(None, 1)[0].upper() if command.strip() else "?"] += 1
        return real(self, command, *args, **kwargs)

    SnowflakeCursor.execute = execute  # type: ignore[method-assign]
    return counts  # type: ignore[return-value]


def server_cpu(pid: int) -> float:
    """The emulator process's CPU seconds so far (utime + stime of /proc/<pid>/stat)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(spec: dict[str, Any], server_pid: int | None = None) -> dict[str, Any]:
    t = time.monotonic()
    emu0 = server_cpu(server_pid) if server_pid else 0.0
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
    out["emulator_cpu"] = server_cpu(server_pid) - emu0 if server_pid else None
    return out


NO_INSERT_LIMIT = 10**15  # a copy_min_rows no run reaches: every row as a bound INSERT


def path_target(path: str, lake: Path) -> dict[str, Any]:
    """The syncs.yaml target fields that make a run take ``path``."""
    if path == "stage_copy":
        return {
            "stage": ".".join((*TARGET[:2], "LAKE")),
            "stage_url": f"file://{lake / 'warehouse'}/",
            "copy_min_rows": 0,
        }
    if path == "put_copy":
        return {"copy_min_rows": 0}
    if path == "insert":
        return {"copy_min_rows": NO_INSERT_LIMIT}
    raise ValueError(f"unknown path {path!r}")


def fresh_target(conn: Any, lake: Path) -> None:
    """No target table, no sync state, and the lake stage over this lake's warehouse: a first sync."""
    from snowberg.core.identifiers import TableName
    from snowberg.sync.native import default_state_table, state_table_ddl

    target = TableName(database=TARGET[0], schema=TARGET[1], table=TARGET[2])
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE IF NOT EXISTS {TARGET[0]}")
    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {TARGET[0]}.{TARGET[1]}")
    cur.execute(f"DROP TABLE IF EXISTS {target.quoted()}")
    cur.execute(state_table_ddl(default_state_table(target)))
    cur.execute(f"DELETE FROM {default_state_table(target).quoted()}")
    cur.execute(f"CREATE OR REPLACE STAGE {TARGET[0]}.{TARGET[1]}.LAKE URL = 'file://{lake / 'warehouse'}/'")
    cur.close()


def first_syncs(
    conn: Any,
    pid: int,
    root: Path,
    sizes: list[int],
    shapes: list[str],
    paths: list[str],
    repeats: int,
    insert_max: int,
) -> list[tuple[str, list[dict[str, Any]]]]:
    """A first sync of each size, shape and path (INSERTs only up to ``insert_max`` rows)."""
    out = []
    for shape in shapes:
        for n in sizes:
            lake = root / f"first-{shape}-{n}"
            build_lake(lake, n, shape=shape)
            for path in paths:
                if path == "insert" and n > insert_max:
                    continue
                runs = []
                for r in range(repeats):
                    fresh_target(conn, lake)
                    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
                    spec = {
                        "port": 0,
                        "lake": str(lake),
                        "run_id": f"f{r}",
                        "config": {},
                        "target": path_target(path, lake),
                    }
                    x = run({**spec, "port": conn.port}, pid)
                    x["load"] = load
                    runs.append(x)
                    print(f"# first sync {shape} {n:,} {path}: {x}", flush=True)
                out.append((f"first sync, {shape}, {n:,} rows, {path}", runs))
            shutil.rmtree(lake, ignore_errors=True)
    return out


def print_paths(rows: list[tuple[str, list[dict[str, Any]]]]) -> None:
    print(
        "\n| run | path taken | rows | wall s (process) | in-process s | worker CPU s | emulator CPU s | "
        "worker peak RSS MB | statements |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, rs in rows:
        st = ", ".join(f"{k} {v}" for k, v in sorted(rs[0]["statements"].items()))
        print(
            f"| {label} | {rs[0]['path']} | {rs[0]['rows']:,} | {med_range([x['wall'] for x in rs])} | "
            f"{med_range([x['seconds'] for x in rs])} | {med_range([x['cpu'] for x in rs])} | "
            f"{med_range([x['emulator_cpu'] for x in rs])} | {statistics.median(x['rss_mb'] for x in rs):,.0f} | {st} |"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--changed", type=int, default=10_000)
    ap.add_argument("--target-rows", type=int, default=1_000_000)
    ap.add_argument("--reload-rows", type=int, default=0, help="also time a full reload of a table this size")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--first-sync", action="store_true", help="time first syncs of --sizes per path and shape")
    ap.add_argument("--crossover", default="", help="first syncs of these small sizes on every path (the threshold)")
    ap.add_argument("--paths", default="stage_copy,put_copy,insert")
    ap.add_argument("--shapes", default="narrow,typed")
    ap.add_argument("--insert-max", type=int, default=20_000, help="largest first sync timed with INSERTs")
    ap.add_argument("--change-paths", default="", help="keyed change runs per path (insert, put_copy)")
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
    sizes = [int(x) for x in args.sizes.split(",")]
    try:
        with FakesnowServer(root / "fakesnow") as fs:
            conn = connect({"port": fs.port})
            assert fs.proc is not None
            if args.first_sync or args.crossover:
                small = [int(x) for x in args.crossover.split(",")] if args.crossover else sizes
                done = first_syncs(
                    conn,
                    fs.proc.pid,
                    root,
                    small,
                    args.shapes.split(","),
                    args.paths.split(","),
                    args.repeats,
                    args.insert_max,
                )
                conn.close()
                print_paths(done)
                return 0
            if args.change_paths:
                done = []
                for n in sizes:
                    lake = root / f"change-{n}"
                    cat = build_lake(lake, n)
                    base = cat.load_table("shop.events").current_snapshot().snapshot_id
                    for path in args.change_paths.split(","):
                        runs = []
                        for r in range(args.repeats):
                            cat.load_table("shop.events").manage_snapshots().set_current_snapshot(base).commit()
                            prepare_target(conn, cat, min(args.target_rows, n))
                            merge_change(cat, n, args.changed, rng)
                            spec = {"port": fs.port, "lake": str(lake), "run_id": f"c{r}", "config": {}}
                            x = run({**spec, "target": path_target(path, lake)}, fs.proc.pid)
                            runs.append(x)
                            print(f"# change {n:,} {path}: {x}", flush=True)
                        done.append((f"{args.changed:,} keys changed of {n:,}, {path}", runs))
                    shutil.rmtree(lake, ignore_errors=True)
                conn.close()
                print_paths(done)
                return 0
            for n in sizes:
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
