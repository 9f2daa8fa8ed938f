"""The first loads of many small tables at once under a pool: wall time, Snowflake concurrency, failures.

    .venv/bin/python -m bench.first_loads --tables 100 --slots 8        # pool snowberg_snowflake_default, 8 slots
    .venv/bin/python -m bench.first_loads --tables 100 --slots 32
    .venv/bin/python -m bench.first_loads --tables 100 --no-pool        # Airflow's default_pool (128 slots)

The stack of ``bench.deployment_cost`` (a real Airflow 3: api-server, scheduler with the LocalExecutor,
dag-processor, triggerer on a PostgreSQL database of its own, ``tests/e2e/airflow_stack.py``; the
emulator behind that bench's counting proxy; the SQLite lake). ``--tables`` source tables of ``--rows``
rows each, a tables.yaml with one entry per table, every entry with ``pool: snowberg_snowflake_default``
(created with ``--slots`` slots by ``snowberg pools --create``), ``inline_load_rows`` left at its
default (a first load of a few rows loads in the plan task). Every DAG is unpaused, then one run of each
is triggered, all at once, and the bench waits for all of them.

Reported:

* wall seconds from the first trigger request to the latest run end (run ``end_date``);
* failures: runs that did not end in success (the goal is none);
* ``statements_in_flight_max``: the largest number of Snowflake statements in flight at once, counted
  where they enter "Snowflake" (the proxy: a query request received from a task and not yet answered;
  a statement queued in the emulator, which runs statements in a thread pool, counts as in flight);
* ``pool_tasks_running_max``: the largest number of the pool's task instances running at once, from
  their start and end dates in the metadata database (all tasks of the load DAGs are in the pool);
* task starts, statements and logins (Snowflake sessions opened) in total. Sessions open at once are not
  counted: against the emulator the connector never sends its session close (see ``CountingProxy``).

Last line: the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.deployment_cost import REPO, Bench, CountingProxy, tables_config

POOL = "snowberg_snowflake_default"
DATABASE = "SNOWBERG_BENCH"


def max_overlap(intervals: list[tuple[datetime, datetime]]) -> int:
    """The largest number of intervals open at one instant (an end at t comes before a start at t)."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals], key=lambda e: (e[0], e[1]))
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def first_loads_config(tables: int, pool: bool) -> dict[str, Any]:
    """``bench.deployment_cost``'s tables (cursor, key, triggered runs), each entry naming the pool."""
    config = tables_config(tables, DATABASE)
    if pool:
        for entry in config["tables"]:
            entry["pool"] = POOL
    return config


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=100)
    ap.add_argument("--rows", type=int, default=5, help="rows of each source table")
    ap.add_argument("--slots", type=int, default=8, help="slots of the pool")
    ap.add_argument("--no-pool", action="store_true", help="entries without pool: Airflow's default_pool")
    ap.add_argument(
        "--parallelism", type=int, default=16, help="Airflow's [core] parallelism (must exceed --slots to test the cap)"
    )
    ap.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the runs")
    args = ap.parse_args(argv)
    # SIGTERM ends the run through the finally blocks: Airflow, the emulator and the database are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.path.insert(0, str(REPO / "tests" / "e2e"))
    from airflow_stack import AirflowStack, create_database, drop_database, parse_ts, running_stack

    from snowberg.local.stack import FakesnowServer, free_port, stack_env

    root = Path(tempfile.mkdtemp(prefix="snowberg-firstloads-"))
    fs = FakesnowServer(root / "fakesnow")
    fs.start()
    proxy = CountingProxy(fs.port)
    db = f"snowberg_firstloads_{os.getpid()}"
    started = time.monotonic()
    loads: list[float] = []
    try:
        bench = Bench(argparse.Namespace(tables=args.tables), root)
        snow: Any = fs.connect()
        cur = snow.cursor()
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {DATABASE}.BENCH")
        for i in range(args.tables):
            cur.execute(
                f"CREATE TABLE {DATABASE}.BENCH.SRC{i:03d} "
                "(ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9), PAYLOAD VARCHAR)"
            )
            bench.insert(snow, i, args.rows)
        cur.close()
        snow.close()
        dags = root / "dags"
        dags.mkdir()
        (dags / "snowberg_tables.py").write_text((REPO / "dags" / "snowberg_tables.py").read_text())
        (root / "lake" / "warehouse").mkdir(parents=True)
        (root / "tables.yaml").write_text(yaml.safe_dump(first_loads_config(args.tables, not args.no_pool)))
        env = stack_env(root, proxy.port)
        env["AIRFLOW_CONN_SNOWFLAKE_DEFAULT"] = env["AIRFLOW_CONN_SNOWFLAKE_DEFAULT"].replace("SNOWBERG_DEMO", DATABASE)
        env.update(
            {
                "SNOWBERG_TABLES_CONFIG": str(root / "tables.yaml"),
                "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
                "AIRFLOW__CORE__PARALLELISM": str(args.parallelism),
            }
        )
        url = create_database(db)
        stack = AirflowStack(
            "firstloads", home=root / "airflow", database=db, sql_alchemy_conn=url, api_port=free_port(), extra_env=env
        )
        res = stack.airflow("db", "migrate", timeout=900)
        if res.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
        if not args.no_pool:
            snowberg = str(Path(sys.executable).with_name("snowberg"))
            made = subprocess.run(
                [snowberg, "pools", "--create", "--slots", str(args.slots)],
                env=stack.env,
                cwd=root,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            print(made.stdout.strip(), flush=True)
            if made.returncode != 0:
                raise RuntimeError(f"snowberg pools --create failed:\n{made.stdout[-2000:]}\n{made.stderr[-2000:]}")
        with running_stack(stack):
            api = stack.client()
            api.http.timeout = httpx.Timeout(300)  # the api-server shares 2 cores with the tasks it serves
            pool = api.get(f"/pools/{'default_pool' if args.no_pool else POOL}")
            table_dags = [f"snowberg_t{i:03d}" for i in range(args.tables)]
            api.wait_dags(table_dags, timeout=900)
            for d in table_dags:
                api.set_paused(d, False)
            print(
                f"stack up in {time.monotonic() - started:.0f} s; pool {pool['name']} {pool['slots']} slots; "
                f"triggering {args.tables} first loads",
                flush=True,
            )
            loads.append(os.getloadavg()[0])
            proxy.reset_peak()
            q0 = proxy.snapshot()
            t0 = datetime.now(UTC)
            runs = bench.run_all(api, stack, table_dags, timeout=args.timeout)
            q1 = proxy.snapshot()
            peak = proxy.peak_in_flight
            loads.append(os.getloadavg()[0])
    finally:
        proxy.stop()
        fs.stop()
        drop_database(db)
        shutil.rmtree(
            root, ignore_errors=True
        )  # the emulator's files, the lake, AIRFLOW_HOME (logs stay in test-artifacts)

    failed = [r for r in runs if r["state"] != "success"]
    ends = [parse_ts(r["run"]["end_date"]) for r in runs if r["run"].get("end_date")]
    tis = [t for r in runs for t in r["tis"]]
    ran = [t for t in tis if t.get("start_date") and t.get("end_date") and t["state"] != "skipped"]
    in_pool = [t for t in ran if t.get("pool") == pool["name"]]
    report = {
        "tables": args.tables,
        "rows_per_table": args.rows,
        "pool": pool["name"],
        "slots": pool["slots"],
        "parallelism": args.parallelism,
        "wall_s": round((max(ends) - t0).total_seconds(), 1) if ends else None,
        "runs": len(runs),
        "failures": len(failed),
        "failed": [(r["dag_id"], {t["task_id"]: t["state"] for t in r["tis"]}) for r in failed][:10],
        "statements_in_flight_max": peak,
        "pool_tasks_running_max": max_overlap([(parse_ts(t["start_date"]), parse_ts(t["end_date"])) for t in in_pool]),
        "tasks_running_max": max_overlap([(parse_ts(t["start_date"]), parse_ts(t["end_date"])) for t in ran]),
        "task_starts": len(ran),
        "task_starts_by_task": dict(sorted(Counter(t["task_id"] for t in ran).items())),
        "statements": q1["statements"] - q0["statements"],
        "logins": q1["logins"] - q0["logins"],
        "load_average_1min": loads,
        "cpus": os.cpu_count(),
        "total_s": round(time.monotonic() - started),
    }
    print(
        f"{args.tables} first loads, pool {report['pool']} ({report['slots']} slots, parallelism {args.parallelism}): "
        f"{report['wall_s']} s from trigger to the last run's end, {report['failures']} failures; at most "
        f"{report['statements_in_flight_max']} Snowflake statements in flight, "
        f"{report['pool_tasks_running_max']} pool tasks running"
    )
    print(json.dumps(report))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
