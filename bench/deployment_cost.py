"""What runs cost on a real scheduler: idle vs busy runs vs Airflow's floor, and a deployment's cost per hour.

    .venv/bin/python -m bench.deployment_cost                       # 20 tables, 3 simulated hours, 25 % busy
    .venv/bin/python -m bench.deployment_cost --tables 50 --hours 4 --busy 0.2 --repeats 5
    .venv/bin/python -m bench.deployment_cost --tables 1 --hours 1 --busy 1 --rows 5 --hour-rows 5 --no-preload
    .venv/bin/python -m bench.deployment_cost --watch --tables 8,32,100 --hours 1 --busy 0.25   # bench.watch_cost

A real Airflow 3 (api-server, scheduler with the LocalExecutor, dag-processor,
triggerer: the end-to-end suite's stack, ``tests/e2e/airflow_stack.py``) on a
PostgreSQL database of its own, the Snowflake emulator and the SQLite lake.
Snowflake is reached through a counting proxy, so every statement any task
sends is counted where it enters "Snowflake" (``/queries/v1/query-request``).

Measures, per run:

* worker seconds: CPU seconds (user + system) of the LocalExecutor's worker
  processes and everything they started (task supervisors, task processes),
  read from ``/proc`` before and after a phase, when no task is running;
* task starts: task instances that ran (a skipped task starts no process);
* Snowflake statements.

The workers run as a deployment following docs/airflow-deployment.md runs them: forked from a
forkserver that imported ``snowberg.airflow.worker_preload`` (``--no-preload``: Airflow's default,
forked from the scheduler). The executor has ``PARALLELISM`` (8) slots, and all its workers are
started before the phases (a forkserver's LocalExecutor starts one per queued task until it has them
all; a worker's start is no run's cost).

Phases (each on the same stack):

1. floor: a DAG of one no-op ``@task`` (an ``EmptyOperator`` starts no
   process, so it would be no floor), ``--repeats`` runs;
2. idle: a loaded table's DAG run with nothing new, ``--repeats`` runs;
3. busy: a run that loads ``--rows`` (10,000) new rows, ``--repeats`` runs;
4. deployment: ``--hours`` simulated hours; in each, ``--busy`` of the
   ``--tables`` tables get ``--hour-rows`` new rows and every table's DAG is
   triggered once (one scheduled run per table per hour); reported per table
   per hour.

Medians of the per-run figures; the machine's load is printed with them.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))

NOOP_DAG = '''
"""The floor: one no-op task (a task process that does nothing)."""
import pendulum
from airflow.sdk import DAG, task

with DAG("bench_noop", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False):

    @task
    def noop() -> None:
        return None

    noop()
'''


METADATA_PREFIXES = ("SHOW ", "DESC ", "DESCRIBE ", "USE ", "ALTER SESSION ", "BEGIN", "COMMIT", "ROLLBACK")
# One call of a watch poll's function, as the connector sends it (names bound client-side as string literals).
POLL_CALL = re.compile(r"""SYSTEM\$(?:LAST_CHANGE_COMMIT_TIME|STREAM_HAS_DATA)\('(?:[^']|'')*'\)(?: AS "S\d+")?""")


def statement_class(sql: str) -> str:
    """``poll`` (the watch's change-signal SELECT), ``metadata`` or ``warehouse``, from the statement's text.

    ``metadata``: commands Snowflake documents as needing no running warehouse (``SHOW``, ``DESCRIBE``: "does not
    require a running warehouse"), session settings and transaction control. ``poll``: a ``SELECT`` of nothing but
    ``SYSTEM$LAST_CHANGE_COMMIT_TIME`` / ``SYSTEM$STREAM_HAS_DATA`` calls (docs/event-driven.md). Everything else
    counts as ``warehouse``, also statements Snowflake might answer without one (``SELECT CURRENT_TIMESTAMP()``):
    the split never hides a warehouse statement.
    """
    text = " ".join(sql.split()).upper()
    if text.startswith(METADATA_PREFIXES):
        return "metadata"
    if text.startswith("SELECT SYSTEM$") and not POLL_CALL.sub("", text[len("SELECT ") :]).replace(",", "").strip():
        return "poll"
    return "warehouse"


def bench_env(root: Path, proxy_port: int, dags: Path, *, paused: bool, preload: bool = True) -> dict[str, str]:
    """The bench stack's environment: the local stack's, Snowflake through the counting proxy in SNOWBERG_BENCH,
    the tables config ``root/tables.yaml`` and the DAG folder ``dags``; without ``preload``, Airflow's default
    worker start (forked from the scheduler, no preloaded modules) instead of the deployment's forkserver."""
    from snowberg.local.stack import stack_env, worker_preload_env

    env = stack_env(root, proxy_port)
    if not preload:
        for k in worker_preload_env():
            env.pop(k)
    env["AIRFLOW_CONN_SNOWFLAKE_DEFAULT"] = env["AIRFLOW_CONN_SNOWFLAKE_DEFAULT"].replace(
        "SNOWBERG_DEMO", "SNOWBERG_BENCH"
    )
    env.update(
        {
            "SNOWBERG_TABLES_CONFIG": str(root / "tables.yaml"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": str(paused),
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "4",
        }
    )
    return env


class CountingProxy:
    """Forwards HTTP to the emulator and counts the statements (query requests) and logins passing through.

    Each statement is also recorded with its time, its class (``statement_class``) and its session's
    ``QUERY_TAG`` (snowberg tags a table's sessions ``snowberg:<table>`` and the watch poll's ``snowberg:watch``):
    the tag comes from the login request's session parameters, the session from the token the login returned.

    It also keeps the peak of statements in flight (``peak_in_flight``, reset with ``reset_peak``): query
    requests received from a client and not yet answered, however long the emulator queues them. (Open
    sessions cannot be counted here: the emulator's login reply has no master token, so the connector's
    ``close()`` never sends its ``/session?delete=true``.)
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.lock = threading.Lock()
        self.counts = {"statements": 0, "logins": 0}
        self.tags: dict[str, str] = {}  # session token -> QUERY_TAG
        self.records: list[tuple[float, str, str]] = []  # (time, class, tag) of each statement
        self.in_flight = 0
        self.peak_in_flight = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?", 1)[0]
                sent = _json(body, self.headers.get("Content-Encoding"))
                token = (self.headers.get("Authorization") or "").partition('Token="')[2].rstrip('"')
                statement = path == "/queries/v1/query-request"
                with proxy.lock:
                    if statement:
                        proxy.counts["statements"] += 1
                        sql = str((sent or {}).get("sqlText") or "")
                        proxy.records.append((time.time(), statement_class(sql), proxy.tags.get(token, "")))
                        proxy.in_flight += 1
                        proxy.peak_in_flight = max(proxy.peak_in_flight, proxy.in_flight)
                    elif path == "/session/v1/login-request":
                        proxy.counts["logins"] += 1
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=600)
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    r = conn.getresponse()
                    data = r.read()
                finally:
                    if statement:
                        with proxy.lock:
                            proxy.in_flight -= 1
                if path == "/session/v1/login-request":
                    got = _json(data, r.getheader("Content-Encoding")) or {}
                    params = ((sent or {}).get("data") or {}).get("SESSION_PARAMETERS") or {}
                    new_token = (got.get("data") or {}).get("token")
                    if new_token:
                        with proxy.lock:
                            proxy.tags[str(new_token)] = str(params.get("QUERY_TAG") or "")
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_DELETE = _forward  # noqa: N815 - http.server's naming

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.counts)

    def statements_since(self, t0: float, t1: float = float("inf")) -> list[tuple[float, str, str]]:
        with self.lock:
            return [r for r in self.records if t0 <= r[0] < t1]

    def reset_peak(self) -> None:
        """Start the peak of statements in flight again from what is in flight now."""
        with self.lock:
            self.peak_in_flight = self.in_flight

    def stop(self) -> None:
        self.server.shutdown()


def _json(body: bytes, encoding: str | None) -> Any:
    """A request's or response's JSON body (the connector gzips its requests), or None."""
    try:
        if encoding and "gzip" in encoding.lower():
            body = gzip.decompress(body)
        return json.loads(body) if body else None
    except (OSError, ValueError):
        return None


def worker_cpu_seconds(scheduler_pid: int) -> float:
    """CPU seconds of everything the scheduler started (executor workers, supervisors, tasks), live or reaped.

    Live descendants count with their own time and that of their reaped children; workers that exited
    count through the scheduler's ``children_*`` times. The scheduler's own loop is not counted.
    """
    sched = psutil.Process(scheduler_pid)
    t = sched.cpu_times()
    total = t.children_user + t.children_system
    for child in sched.children(recursive=False):
        try:
            total += tree_cpu_seconds(child)
        except psutil.Error:
            pass
    return total


PARALLELISM = 8  # the bench stack's LocalExecutor slots: every worker is started before anything is measured


def executor_workers(scheduler_pid: int) -> list[psutil.Process]:
    """The LocalExecutor's worker processes (children of the scheduler, or of its forkserver), by their title."""
    out = []
    for p in psutil.Process(scheduler_pid).children(recursive=True):
        try:
            if " ".join(p.cmdline()).startswith("airflow worker -- LocalExecutor"):
                out.append(p)
        except psutil.Error:
            pass
    return out


def tree_cpu_seconds(p: psutil.Process) -> float:
    t = p.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for c in p.children(recursive=False):
        try:
            total += tree_cpu_seconds(c)
        except psutil.Error:
            pass
    return total


def tables_config(n: int, database: str) -> dict[str, Any]:
    return {
        "defaults": {
            "snowflake_conn_id": "snowflake_default",
            "catalog": "lake",
            "retries": 0,
            "schedule": None,  # runs are triggered: one per table per simulated hour
            "checks_schedule": None,
            "maintenance": {"enabled": False},
        },
        "tables": [
            {
                "name": f"t{i:03d}",
                "source": {"table": f"{database}.BENCH.SRC{i:03d}"},
                "target": f"bench.t{i:03d}",
                "cursor": {"column": "updated_at"},
                "primary_key": ["id"],
                "freshness_sla": "2h",
            }
            for i in range(n)
        ],
    }


class Bench:
    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args = args
        self.root = root
        self.next_id = [0] * args.tables

    # -- sources

    def insert(self, snow: Any, i: int, rows: int) -> None:
        start = self.next_id[i]
        self.next_id[i] += rows
        cur = snow.cursor()
        cur.execute(
            f"INSERT INTO SNOWBERG_BENCH.BENCH.SRC{i:03d} SELECT {start} + SEQ4(), "  # noqa: S608 - numbers only
            "DATEADD('second', -60, CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)), "
            f"'payload ' || SEQ4() FROM TABLE(GENERATOR(ROWCOUNT => {rows}))"
        )
        cur.close()

    # -- runs

    def run_all(self, api: Any, stack: Any, dag_ids: list[str], timeout: float = 1800) -> list[dict[str, Any]]:
        """Trigger one run of each DAG, wait for all; the task instances of each run."""
        from airflow_stack import TERMINAL

        runs = [(d, api.trigger(d)["dag_run_id"]) for d in dag_ids]
        deadline = time.monotonic() + timeout
        pending = list(runs)
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"runs not finished: {pending[:5]}")
            stack.check_alive()
            time.sleep(3)
            try:
                pending = [(d, r) for d, r in pending if api.run(d, r)["state"] not in TERMINAL]
            except httpx.TimeoutException:  # an api-server busy on a loaded machine: ask again
                continue
        out = []
        for d, r in runs:
            run = api.run(d, r)
            tis = api.task_instances(d, r)
            out.append({"dag_id": d, "run_id": r, "state": run["state"], "run": run, "tis": tis})
        return out

    def measure(self, api: Any, stack: Any, proxy: CountingProxy, sched_pid: int, dag_ids: list[str]) -> dict[str, Any]:
        time.sleep(3)  # let the last supervisors exit and be reaped
        cpu0, q0 = worker_cpu_seconds(sched_pid), proxy.snapshot()
        runs = self.run_all(api, stack, dag_ids)
        time.sleep(3)
        cpu1, q1 = worker_cpu_seconds(sched_pid), proxy.snapshot()
        failed = [r for r in runs if r["state"] != "success"]
        if failed:
            raise RuntimeError(
                f"runs failed: {[(r['dag_id'], {t['task_id']: t['state'] for t in r['tis']}) for r in failed]}"
            )
        started = sum(1 for r in runs for t in r["tis"] if t.get("start_date") and t["state"] != "skipped")
        slot = sum(float(t.get("duration") or 0) for r in runs for t in r["tis"])
        return {
            "runs": len(runs),
            "worker_cpu_s": cpu1 - cpu0,
            "task_starts": started,
            "task_seconds": slot,
            "statements": q1["statements"] - q0["statements"],
            "logins": q1["logins"] - q0["logins"],
            "skipped": sum(1 for r in runs for t in r["tis"] if t["state"] == "skipped"),
        }


def _per_run(samples: list[dict[str, Any]]) -> dict[str, float]:
    keys = ("worker_cpu_s", "task_starts", "task_seconds", "statements", "logins")
    return {k: statistics.median(s[k] / s["runs"] for s in samples) for k in keys}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", default="20", help="tables (with --watch: sizes, e.g. 8,32,100, on one stack)")
    ap.add_argument("--watch", action="store_true", help="every table watched: bench.watch_cost")
    ap.add_argument("--poll-interval", type=int, default=10, help="--watch: seconds between polls (at least 10)")
    ap.add_argument("--hour-polls", type=int, default=60, help="--watch: polls in a simulated hour (60: 1m polls)")
    ap.add_argument("--databases", type=int, default=2, help="--watch: source databases the tables spread over")
    ap.add_argument("--workdir", type=Path, default=None, help="--watch: where its temporary folder goes")
    ap.add_argument("--hours", type=int, default=3, help="simulated hours (one run per table per hour)")
    ap.add_argument("--busy", type=float, default=0.25, help="share of tables with new rows in an hour")
    ap.add_argument("--hour-rows", type=int, default=1_000, help="new rows of a busy table in an hour")
    ap.add_argument("--rows", type=int, default=10_000, help="new rows of a run in the busy phase")
    ap.add_argument("--repeats", type=int, default=3, help="runs in each of the floor, idle and busy phases")
    ap.add_argument(
        "--no-preload",
        dest="preload",
        action="store_false",
        help="start the LocalExecutor's workers as Airflow does by default, without snowberg.airflow.worker_preload",
    )
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    # SIGTERM (and SIGINT, which a background job ignores) ends the run through the finally blocks:
    # the Airflow stack, the emulator and the database are stopped and dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.watch:
        from bench.watch_cost import run

        return run(args)
    args.tables = int(args.tables)

    from airflow_stack import AirflowStack, create_database, drop_database, running_stack

    from snowberg.local.stack import FakesnowServer, free_port

    root = Path(tempfile.mkdtemp(prefix="snowberg-deploycost-"))
    bench = Bench(args, root)
    fs = FakesnowServer(root / "fakesnow")
    fs.start()
    proxy = CountingProxy(fs.port)
    db = f"snowberg_deploycost_{os.getpid()}"
    started = time.monotonic()
    try:
        snow: Any = fs.connect()
        cur = snow.cursor()
        cur.execute("CREATE DATABASE IF NOT EXISTS SNOWBERG_BENCH")
        cur.execute("CREATE SCHEMA IF NOT EXISTS SNOWBERG_BENCH.BENCH")
        for i in range(args.tables):
            cur.execute(
                f"CREATE TABLE SNOWBERG_BENCH.BENCH.SRC{i:03d} "
                "(ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9), PAYLOAD VARCHAR)"
            )
            bench.insert(snow, i, 100)
        cur.close()
        dags = root / "dags"
        dags.mkdir()
        (dags / "snowberg_tables.py").write_text((REPO / "dags" / "snowberg_tables.py").read_text())
        (dags / "bench_noop.py").write_text(NOOP_DAG)
        (root / "lake" / "warehouse").mkdir(parents=True)
        (root / "tables.yaml").write_text(yaml.safe_dump(tables_config(args.tables, "SNOWBERG_BENCH")))
        env = bench_env(root, proxy.port, dags, paused=False, preload=args.preload)
        env["AIRFLOW__CORE__PARALLELISM"] = str(PARALLELISM)
        url = create_database(db)
        stack = AirflowStack(
            "deploycost", home=root / "airflow", database=db, sql_alchemy_conn=url, api_port=free_port(), extra_env=env
        )
        t = time.monotonic()
        res = stack.airflow("db", "migrate", timeout=900)
        if res.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
        print(f"metadata database migrated in {time.monotonic() - t:.0f} s", flush=True)
        with running_stack(stack):
            api = stack.client()
            api.http.timeout = httpx.Timeout(300)  # the api-server shares 2 cores with the tasks it serves
            table_dags = [f"snowberg_t{i:03d}" for i in range(args.tables)]
            api.wait_dags(["bench_noop", *table_dags], timeout=600)
            for d in ["bench_noop", *table_dags]:
                api.set_paused(d, False)
            sched = next(s for s in stack.services if s.name == "scheduler")
            assert sched.proc is not None
            pid = sched.proc.pid
            print(f"stack up in {time.monotonic() - started:.0f} s; first load of {args.tables} tables", flush=True)
            todo = table_dags  # the first load of every table (not measured); a run lost to the load is rerun
            for _ in range(3):
                todo = [r["dag_id"] for r in bench.run_all(api, stack, todo) if r["state"] != "success"]
                if not todo:
                    break
            if todo:
                raise RuntimeError(f"first loads failed three times: {todo}")
            # Started from a forkserver (the preload), the LocalExecutor starts a worker for each queued task until
            # it has PARALLELISM of them (forked from the scheduler, all at once at its start): a worker's start is
            # no task's cost, so every worker is started before the phases.
            for _ in range(4 * PARALLELISM):
                if len(executor_workers(pid)) >= PARALLELISM:
                    break
                bench.run_all(api, stack, ["bench_noop"] * 4)
            else:
                raise RuntimeError(f"the executor started {len(executor_workers(pid))} of {PARALLELISM} workers")
            print(f"{len(executor_workers(pid))} executor workers running", flush=True)

            phases: dict[str, list[dict[str, Any]]] = {"floor": [], "idle": [], "busy": []}
            for k in range(args.repeats):
                phases["floor"].append(bench.measure(api, stack, proxy, pid, ["bench_noop"]))
                phases["idle"].append(bench.measure(api, stack, proxy, pid, [table_dags[k % args.tables]]))
                if phases["idle"][-1]["task_starts"] != 1:
                    raise RuntimeError(f"the idle run was not idle: {phases['idle'][-1]}")
                bench.insert(snow, k % args.tables, args.rows)
                phases["busy"].append(bench.measure(api, stack, proxy, pid, [table_dags[k % args.tables]]))
                print(f"repeat {k + 1}: " + json.dumps({p: v[-1] for p, v in phases.items()}), flush=True)
            per_run = {p: _per_run(v) for p, v in phases.items()}

            rng = random.Random(args.seed)
            hours = []
            for h in range(args.hours):
                busy = sorted(rng.sample(range(args.tables), max(1, round(args.busy * args.tables))))
                for i in busy:
                    bench.insert(snow, i, args.hour_rows)
                m = bench.measure(api, stack, proxy, pid, table_dags)
                m["busy_tables"] = len(busy)
                hours.append(m)
                print(f"hour {h + 1}: {json.dumps(m)}", flush=True)
        snow.close()
    finally:
        proxy.stop()
        fs.stop()
        drop_database(db)

    n, hrs = args.tables, args.hours
    deployment = {
        k: sum(m[k] for m in hours) / (n * hrs) for k in ("worker_cpu_s", "task_starts", "statements", "task_seconds")
    }
    floor = per_run["floor"]["worker_cpu_s"]
    report = {
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "per_run_median": per_run,
        "ratio_idle_to_floor": per_run["idle"]["worker_cpu_s"] / floor,
        "ratio_busy_to_floor": per_run["busy"]["worker_cpu_s"] / floor,
        "deployment_per_table_hour": deployment,
        "hours": hours,
        "wall_s": round(time.monotonic() - started),
    }
    print()
    print(f"per run (median of {args.repeats}; worker CPU s, task starts, Snowflake statements):")
    for p in ("floor", "idle", "busy"):
        r = per_run[p]
        print(
            f"  {p:5s}  {r['worker_cpu_s']:6.2f} s  {r['task_starts']:.0f} task starts  "
            f"{r['statements']:.0f} statements  ({r['task_seconds']:.1f} s in tasks)"
        )
    print(
        f"  idle / floor = {report['ratio_idle_to_floor']:.2f}x   busy ({args.rows:,} rows) / floor = "
        f"{report['ratio_busy_to_floor']:.2f}x"
    )
    print(
        f"deployment: {n} tables, {hrs} simulated hours, {args.busy:.0%} busy per hour ({args.hour_rows:,} rows): "
        f"per table per hour {deployment['worker_cpu_s']:.2f} worker CPU s, {deployment['task_starts']:.2f} task "
        f"starts, {deployment['statements']:.2f} statements"
    )
    print(f"load average {report['load_average']}, wall {report['wall_s']} s")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
