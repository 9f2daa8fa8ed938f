"""What watched tables (``watch:``) cost on a real Airflow, and how fast a change reaches the lake.

    .venv/bin/python -m bench.deployment_cost --watch --tables 8,32,100 --hours 1 --busy 0.25

Run by ``bench.deployment_cost --watch``: the same real Airflow 3 stack (api-server, scheduler with the
LocalExecutor, dag-processor, triggerer, PostgreSQL), the Snowflake emulator behind the counting proxy, the
SQLite lake. Every table is watched (``watch: {poll_interval: 10s, max_interval: null}``: runs only on
changes), its source in one of ``--databases`` databases.

Time is compressed: a simulated hour is ``--hour-polls`` polls (60: an hour at the default 1-minute poll
interval) at ``--poll-interval`` (10 s, the minimum), so 10 real minutes. In each simulated hour, ``--busy``
of the tables get ``--hour-rows`` new rows each, at a random moment in its first three quarters; the other
tables get nothing. Several ``--tables`` sizes run on ONE stack, smallest first: a size unpauses the DAGs
of its extra tables (a paused DAG's watcher does not run), waits for their first loads (not measured),
then measures its hours.

Measured over a size's hours (until the last change is in the lake and no run is left):

* task starts (task instances that ran) of tables that had no change, and of those that had;
* Snowflake statements by class (``statement_class``: ``poll``, ``metadata``, ``warehouse``) and by session:
  the proxy maps each statement to its session's ``QUERY_TAG`` (``snowberg:<table>`` for a table's runs,
  ``snowberg:watch`` for the poll); an idle warehouse statement is one not sent by a changed table's run;
* polls: bursts of the triggerer's ``poll`` statements (its session is tagged ``snowberg:watch``; a gap of
  more than half a poll interval starts another poll), and the statements per poll (mean and most);
* worker CPU (the scheduler's executor workers and their tasks) and the triggerer's CPU (its process tree),
  read from ``/proc``; the triggerer's CPU is given per real hour, at the measured poll interval;
* the triggerer's event-loop lag: Airflow's own watchdog (``TriggerRunner.block_watchdog``) sleeps 0.1 s in
  the trigger loop and logs when it woke later than ``[triggerer] blocked_main_thread_warning_threshold``,
  set here to 0.15 s, so every lag above 0.05 s is logged; the lines in the window are counted;
* latency: from the source's commit (the emulator's ``SYSTEM$LAST_CHANGE_COMMIT_TIME`` of the insert, UTC ns)
  to the lake's commit (the timestamp of the first snapshot holding the insert's last row);
* busy run: the median duration of the changed tables' runs (start to end, from the REST API).

Each size prints a JSON line; the last line is the last size's, with every size under ``sizes``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.deployment_cost import CountingProxy, bench_env, tree_cpu_seconds, worker_cpu_seconds

LAG_LINE = re.compile(r"async thread was blocked for ([0-9.]+) seconds")
POLL_TAG = "snowberg:watch"  # the QUERY_TAG of the triggerer's poll session (watch_trigger.watch_connection)
WATCHDOG_SLEEP_S = 0.1  # TriggerRunner.block_watchdog's sleep
WATCHDOG_THRESHOLD_S = 0.15  # what we set: a wake-up later than this is logged (lag > 0.05 s)


def database_of(i: int, databases: int) -> str:
    return "SNOWBERG_BENCH" if i % databases == 0 else f"SNOWBERG_BENCH_{i % databases}"


def source_of(i: int, databases: int) -> str:
    return f"{database_of(i, databases)}.BENCH.SRC{i:03d}"


def watch_tables_config(n: int, databases: int, poll_interval_s: int) -> dict[str, Any]:
    return {
        "defaults": {
            "snowflake_conn_id": "snowflake_default",
            "catalog": "lake",
            "retries": 0,
            "watch": {"poll_interval": f"{poll_interval_s}s", "max_interval": None},
            "checks_schedule": None,
            "maintenance": {"enabled": False},
        },
        "tables": [
            {
                "name": f"t{i:03d}",
                "source": {"table": source_of(i, databases)},
                "target": f"bench.t{i:03d}",
                "cursor": {"column": "updated_at"},
                "primary_key": ["id"],
                "freshness_sla": "2h",
            }
            for i in range(n)
        ],
    }


@dataclass
class Change:
    table: int
    last_id: int
    commit_ns: int
    lake_ms: int | None = None


class WatchBench:
    def __init__(self, args: argparse.Namespace, snow: Any, lake_props: dict[str, str]) -> None:
        self.args = args
        self.snow = snow
        self.lake_props = lake_props
        self.next_id: dict[int, int] = {}

    # -- sources

    def create_sources(self, n: int) -> None:
        cur = self.snow.cursor()
        for d in range(self.args.databases):
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {database_of(d, self.args.databases)}")
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {database_of(d, self.args.databases)}.BENCH")
        for i in range(n):
            cur.execute(
                f"CREATE TABLE {source_of(i, self.args.databases)} "
                "(ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9), PAYLOAD VARCHAR)"
            )
            self.next_id[i] = 0
            self.insert(i, 100)
        cur.close()

    def insert(self, i: int, rows: int) -> Change:
        """Insert ``rows`` rows into table ``i``'s source; the change with the emulator's commit time."""
        start = self.next_id[i]
        self.next_id[i] += rows
        cur = self.snow.cursor()
        name = source_of(i, self.args.databases)
        cur.execute(
            f"INSERT INTO {name} SELECT {start} + SEQ4(), "  # noqa: S608 - numbers and checked names only
            "DATEADD('second', -60, CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)), "
            f"'payload ' || SEQ4() FROM TABLE(GENERATOR(ROWCOUNT => {rows}))"
        )
        cur.execute("SELECT SYSTEM$LAST_CHANGE_COMMIT_TIME(%(t)s)", {"t": name})
        (commit_ns,) = cur.fetchone()
        cur.close()
        return Change(table=i, last_id=start + rows - 1, commit_ns=int(commit_ns))

    # -- the lake

    def lake_commit_ms(self, change: Change) -> int | None:
        """The timestamp of the first snapshot of the table that holds the change's last row (None: not yet)."""
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog("lake", uri=self.lake_props["uri"], warehouse=self.lake_props["warehouse"])
        t = catalog.load_table(("bench", f"t{change.table:03d}"))
        for snap in sorted(t.snapshots(), key=lambda s: s.timestamp_ms):
            if snap.timestamp_ms < change.commit_ns // 1_000_000 - 1000:
                continue
            ids = t.scan(snapshot_id=snap.snapshot_id, selected_fields=("id",)).to_arrow().column("id").to_pylist()
            if change.last_id in {int(x) for x in ids}:
                return int(snap.timestamp_ms)
        return None


def dag_of(i: int) -> str:
    return f"snowberg_t{i:03d}"


def wait_first_loads(api: Any, stack: Any, tables: list[int], timeout: float = 3600) -> None:
    """Until each table has one successful run (its first load: no run has recorded it yet)."""
    deadline = time.monotonic() + timeout
    todo = list(tables)
    while todo:
        if time.monotonic() > deadline:
            raise TimeoutError(f"first loads not done: {[dag_of(i) for i in todo[:10]]}")
        stack.check_alive()
        time.sleep(5)
        left = []
        for i in todo:
            runs = api.runs(dag_of(i))
            if any(r["state"] == "failed" for r in runs):
                raise RuntimeError(f"{dag_of(i)}: first load failed: {runs}")
            if not (len(runs) >= 1 and all(r["state"] == "success" for r in runs)):
                left.append(i)
        todo = left
        print(f"  first loads left: {len(todo)}", flush=True)


def poll_bursts(times: list[float], interval: float) -> list[int]:
    """The statements of each poll: bursts of poll statements; a gap of more than half an interval starts another."""
    bursts: list[int] = []
    last = None
    for t in sorted(times):
        if last is None or t - last > interval / 2:
            bursts.append(0)
        bursts[-1] += 1
        last = t
    return bursts


def lag_lines(log_path: Path, offset: int) -> list[float]:
    """The watchdog's wake-up delays (s) logged after ``offset`` bytes of the triggerer's log."""
    with open(log_path, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return [float(m.group(1)) for m in LAG_LINE.finditer(text)]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def measure_size(
    bench: WatchBench, api: Any, stack: Any, proxy: CountingProxy, n: int, rng: random.Random
) -> dict[str, Any]:
    args = bench.args
    hour_s = args.hour_polls * args.poll_interval
    sched = stack.service("scheduler").proc.pid
    trig = stack.service("triggerer")
    trig_log = trig.log_path
    log_offset = trig_log.stat().st_size
    t0 = time.time()
    cpu_w0 = worker_cpu_seconds(sched)
    cpu_t0 = tree_cpu_seconds(psutil.Process(trig.proc.pid))
    changes: list[Change] = []
    for h in range(args.hours):
        hour_start = time.monotonic()
        busy = rng.sample(range(n), max(1, round(args.busy * n)))
        plan = sorted((rng.uniform(0, 0.75 * hour_s), i) for i in busy)
        for at, i in plan:
            time.sleep(max(0.0, hour_start + at - time.monotonic()))
            changes.append(bench.insert(i, args.hour_rows))
        stack.check_alive()
        time.sleep(max(0.0, hour_start + hour_s - time.monotonic()))
        print(f"  {n} tables: simulated hour {h + 1} done ({len(busy)} tables changed)", flush=True)
    # The window ends when every change is in the lake and no run is left.
    deadline = time.monotonic() + 1800
    while True:
        for c in changes:
            if c.lake_ms is None:
                c.lake_ms = bench.lake_commit_ms(c)
        if all(c.lake_ms is not None for c in changes) and not any(
            api.runs(dag_of(i), state=["queued", "running"]) for i in range(n)
        ):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"changes not in the lake: {[c for c in changes if c.lake_ms is None][:5]}")
        stack.check_alive()
        time.sleep(5)
    time.sleep(3)  # the last task processes exit and are reaped
    t1 = time.time()
    cpu_w1 = worker_cpu_seconds(sched)
    cpu_t1 = tree_cpu_seconds(psutil.Process(trig.proc.pid))
    lags = lag_lines(trig_log, log_offset)

    changed_tags = {f"snowberg:t{c.table:03d}" for c in changes}
    changed_dags = {dag_of(c.table) for c in changes}
    task_starts = {"idle": 0, "changed": 0}
    runs_changed, busy_runs = 0, []
    for i in range(n):
        for r in api.runs(dag_of(i)):
            start = r.get("start_date")
            if not start or _ts(start) < t0:
                continue
            if r["state"] != "success":
                raise RuntimeError(f"{dag_of(i)} run {r['dag_run_id']} ended {r['state']}")
            tis = api.task_instances(dag_of(i), r["dag_run_id"])
            started = sum(1 for t in tis if t.get("start_date") and t["state"] != "skipped")
            kind = "changed" if dag_of(i) in changed_dags else "idle"
            task_starts[kind] += started
            if kind == "changed":
                runs_changed += 1
                busy_runs.append(_ts(r["end_date"]) - _ts(start))
    stmts = proxy.statements_since(t0, t1)
    by_class: dict[str, int] = {}
    for _, cls, tag in stmts:
        key = "poll (runs' token reads)" if cls == "poll" and tag != POLL_TAG else cls
        by_class[key] = by_class.get(key, 0) + 1
    idle_wh = sum(1 for _, cls, tag in stmts if cls == "warehouse" and tag not in changed_tags)
    # The triggerer's polls only: a run's plan also reads its table's change token (the same function).
    poll_times = [t for t, cls, tag in stmts if cls == "poll" and tag == POLL_TAG]
    bursts = poll_bursts(poll_times, args.poll_interval)
    polls = len(bursts)
    latencies = [(c.lake_ms or 0) / 1000 - c.commit_ns / 1e9 for c in changes]
    window_h = (t1 - t0) / 3600
    result = {
        "tables": n,
        "databases": args.databases,
        "simulated_hours": args.hours,
        "real_seconds": round(t1 - t0),
        "changes": len(changes),
        "runs_of_changed_tables": runs_changed,
        "idle_task_starts": task_starts["idle"],
        "changed_task_starts": task_starts["changed"],
        "statements": by_class,
        "idle_warehouse_statements": idle_wh,
        "polls": polls,
        "poll_statements_per_poll": round(len(poll_times) / polls, 2) if polls else None,
        "poll_statements_max": max(bursts, default=0),
        "worker_cpu_s": round(cpu_w1 - cpu_w0, 1),
        "triggerer_cpu_s": round(cpu_t1 - cpu_t0, 1),
        "triggerer_cpu_s_per_hour": round((cpu_t1 - cpu_t0) / window_h, 1),
        "event_loop_lag_over_0_05_s": len(lags),
        "event_loop_lag_max_s": round(max(lags) - WATCHDOG_SLEEP_S, 3) if lags else None,
        "latency_p50_s": round(pct(latencies, 0.5), 1),
        "latency_p95_s": round(pct(latencies, 0.95), 1),
        "latency_max_s": round(max(latencies), 1) if latencies else None,
        "poll_interval_s": args.poll_interval,
        "busy_run_s": round(statistics.median(busy_runs), 1) if busy_runs else None,
        "load_average": [round(x, 1) for x in os.getloadavg()],
    }
    return result


def _ts(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def run(args: argparse.Namespace) -> int:
    """The ``--watch`` mode of ``bench.deployment_cost`` (see the module doc)."""
    import shutil
    import tempfile

    import httpx
    import yaml
    from airflow_stack import AirflowStack, create_database, drop_database, running_stack

    from snowberg.local.stack import FakesnowServer, free_port

    sizes = sorted(int(x) for x in str(args.tables).split(","))
    root = Path(tempfile.mkdtemp(prefix="snowberg-watchcost-", dir=args.workdir)).resolve()
    fs = FakesnowServer(root / "fakesnow")
    fs.start()
    proxy = CountingProxy(fs.port)
    db = f"snowberg_watchcost_{os.getpid()}"
    results: list[dict[str, Any]] = []
    rng = random.Random(args.seed)
    try:
        snow: Any = fs.connect()
        lake_dir = root / "lake"
        lake = {"uri": f"sqlite:///{lake_dir / 'catalog.db'}", "warehouse": f"file://{lake_dir / 'warehouse'}"}
        bench = WatchBench(args, snow, lake)
        bench.create_sources(sizes[-1])
        dags = root / "dags"
        dags.mkdir()
        repo = Path(__file__).resolve().parent.parent
        (dags / "snowberg_tables.py").write_text((repo / "dags" / "snowberg_tables.py").read_text())
        (root / "lake" / "warehouse").mkdir(parents=True)
        config = watch_tables_config(sizes[-1], args.databases, args.poll_interval)
        (root / "tables.yaml").write_text(yaml.safe_dump(config))
        env = bench_env(root, proxy.port, dags, paused=True, preload=args.preload)
        env["AIRFLOW__TRIGGERER__BLOCKED_MAIN_THREAD_WARNING_THRESHOLD"] = str(WATCHDOG_THRESHOLD_S)
        url = create_database(db)
        stack = AirflowStack(
            "watchcost", home=root / "airflow", database=db, sql_alchemy_conn=url, api_port=free_port(), extra_env=env
        )
        res = stack.airflow("db", "migrate", timeout=900)
        if res.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
        with running_stack(stack):
            api = stack.client()
            api.http.timeout = httpx.Timeout(300)
            api.wait_dags([dag_of(i) for i in range(sizes[-1])], timeout=900)
            done = 0
            for n in sizes:
                new = list(range(done, n))
                for i in new:
                    api.set_paused(dag_of(i), False)
                print(f"{n} tables: waiting for the first loads of {len(new)}", flush=True)
                wait_first_loads(api, stack, new)
                time.sleep(3 * args.poll_interval)  # the polls find every loaded table current
                done = n
                result = measure_size(bench, api, stack, proxy, n, rng)
                results.append(result)
                print(json.dumps(result), flush=True)
        snow.close()
    finally:
        proxy.stop()
        fs.stop()
        drop_database(db)
        shutil.rmtree(root, ignore_errors=True)
    last = dict(results[-1])
    last["sizes"] = results
    print(json.dumps(last))
    return 0
