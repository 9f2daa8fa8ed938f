"""Where a load run's task processes spend their CPU: parse, imports, connections, the work.

    .venv/bin/python -m bench.task_cost --rows 5 --repeats 3
    .venv/bin/python -m bench.task_cost --rows 1000 --repeats 3

``bench.deployment_cost`` measures what a run costs on a real Airflow; this
says where it goes. Each task of a busy run (``plan``, then ``load``,
``publish`` and ``table_health`` unless the plan skipped them) runs in a fresh
process that first imports what a LocalExecutor worker holds before it forks
a task (Airflow's SDK, task runner, models and DagBag: the floor's no-op task
pays none of it either), then, as Airflow's task runner does:

* **parse**: the DAG file, with the task's DAG id as the parsing context;
* **execute** the operator with a minimal context (Variables in a JSON file,
  as in ``bench/worker.py``: a task supervisor is not running here).

The CPU (user + system) of everything after the worker's imports is split, each
second to the innermost of: *imports* (every outermost ``import`` statement),
*snowflake login* (``snowflake.connector.connect``), *catalog* (``open_catalog``),
*parse*, and *work* (the rest of ``execute``). Medians over ``--repeats``
busy runs of ``--rows`` new rows each, on the emulator and the SQLite lake.
"""

from __future__ import annotations

import argparse
import builtins
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from bench.worker import FileVariables  # the Variable stand-in the worker benchmark's processes share

REPO = Path(__file__).resolve().parent.parent
TASKS = ("plan", "load", "publish", "table_health")
PARTS = ("parse", "imports", "snowflake_login", "catalog", "work")


class Ledger:
    """CPU seconds charged to the innermost open part (a stack of parts; time goes to the top one)."""

    def __init__(self) -> None:
        self.spent = dict.fromkeys(PARTS, 0.0)
        self.stack = ["work"]
        self.mark = time.process_time()

    def _charge(self) -> None:
        now = time.process_time()
        self.spent[self.stack[-1]] += now - self.mark
        self.mark = now

    def enter(self, part: str) -> None:
        self._charge()
        self.stack.append(part)

    def leave(self) -> None:
        self._charge()
        self.stack.pop()

    def wrap(self, part: str, fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.enter(part)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave()

        return wrapped


class TaskInstance:
    """What an operator asks of ``context["ti"]`` here: XCom pushes (kept) and skips (recorded)."""

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One task process: the worker's imports (not counted), then parse and execute, counted by part."""
    import airflow.dag_processing.dagbag
    import airflow.models
    import airflow.sdk
    import airflow.sdk.execution_time.task_runner  # noqa: F401 - what a LocalExecutor worker holds before forking

    start = time.process_time()
    before = set(sys.modules)
    ledger = Ledger()
    real_import = builtins.__import__
    depth = [0]

    patched: set[str] = set()

    def patch_loaded() -> None:
        """Count logins and catalog opens once their modules are loaded (importing them here would count them)."""
        connector = sys.modules.get("snowflake.connector")
        if connector is not None and "connector" not in patched:
            patched.add("connector")
            connector.connect = ledger.wrap("snowflake_login", connector.connect)  # type: ignore[attr-defined]
        catalogs = sys.modules.get("snowberg.iceberg.catalogs")
        if catalogs is not None and "catalogs" not in patched:
            patched.add("catalogs")
            catalogs.open_catalog = ledger.wrap("catalog", catalogs.open_catalog)  # type: ignore[attr-defined]
        st = sys.modules.get("snowberg.iceberg.state")
        if st is not None and "state" not in patched:
            patched.add("state")
            st.AirflowVariables = lambda: FileVariables(spec["variables"])  # type: ignore[attr-defined]

    def counted_import(*args: Any, **kwargs: Any) -> Any:
        if depth[0]:
            return real_import(*args, **kwargs)
        depth[0] += 1
        ledger.enter("imports")
        try:
            return real_import(*args, **kwargs)
        finally:
            ledger.leave()
            depth[0] -= 1
            patch_loaded()

    os.environ["_AIRFLOW_PARSING_CONTEXT_DAG_ID"] = spec["dag_id"]
    os.environ["_AIRFLOW_PARSING_CONTEXT_TASK_ID"] = spec["task_id"]
    ledger.enter("parse")  # the DAG file's imports are the parse's
    bag = airflow.dag_processing.dagbag.DagBag(dag_folder=spec["dag_file"])
    task = bag.dags[spec["dag_id"]].get_task(spec["task_id"])
    ledger.leave()
    patch_loaded()
    builtins.__import__ = counted_import
    if spec.get("window") is not None:
        task.window = spec["window"]
    ti = TaskInstance()
    skipped: list[str] = []
    task.skip = lambda ti, tasks: skipped.extend(t.task_id for t in tasks)
    context = {
        "run_id": spec["run_id"],
        "dag_run": type("DagRun", (), {"run_type": "manual", "clear_number": 0})(),
        "params": {},
        "data_interval_start": None,
        "data_interval_end": None,
        "ti": ti,
        "outlet_events": collections.defaultdict(lambda: types.SimpleNamespace(add=lambda *a, **k: None)),
    }
    result = task.execute(context)
    ledger.leave()
    builtins.__import__ = real_import
    heavy = sorted(
        m
        for m in ("pyarrow", "pyiceberg", "snowflake.connector", "pandas", "numpy", "duckdb", "boto3", "polars")
        if m in sys.modules and m not in before
    )
    return {
        "task": spec["task_id"],
        "cpu_s": time.process_time() - start,
        "parts": ledger.spent,
        "skipped": skipped,
        "result": ti.pushed.get("return_value", result),
        "new_modules": len(set(sys.modules) - before),
        "heavy_imported": heavy,
    }


def run_child(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.task_cost", "--child", json.dumps(spec, default=str)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])  # type: ignore[no-any-return]
    raise RuntimeError(f"task {spec['task_id']} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def busy_run(spec: dict[str, Any], env: dict[str, str], run_id: str) -> list[dict[str, Any]]:
    """The tasks of one run, each in its own process; a task the plan skipped does not run."""
    out = []
    window = None
    skipped: set[str] = set()
    for task_id in TASKS:
        if task_id in skipped:
            continue
        r = run_child(spec | {"task_id": task_id, "run_id": run_id, "window": window}, env)
        if task_id == "plan":
            window = r["result"]
        skipped.update(r["skipped"])
        out.append(r)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5, help="new rows of each busy run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(json.loads(args.child)), default=str), flush=True)
        return 0

    import yaml

    from snowberg.local.stack import FakesnowServer, stack_env

    root = Path(
        tempfile.mkdtemp(prefix="snowberg-taskcost-", dir=REPO / ".snowberg" if (REPO / ".snowberg").is_dir() else None)
    )
    fs = FakesnowServer(root / "fakesnow").start()
    try:
        snow: Any = fs.connect()
        cur = snow.cursor()
        cur.execute("CREATE DATABASE IF NOT EXISTS SNOWBERG_DEMO")
        cur.execute("CREATE SCHEMA IF NOT EXISTS SNOWBERG_DEMO.BENCH")
        cur.execute(
            "CREATE TABLE SNOWBERG_DEMO.BENCH.SRC (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9), PAYLOAD VARCHAR)"
        )
        next_id = [0]

        def insert(n: int) -> None:
            cur.execute(
                f"INSERT INTO SNOWBERG_DEMO.BENCH.SRC SELECT {next_id[0]} + SEQ4(), "  # noqa: S608 - numbers only
                "DATEADD('second', -60, CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)), "
                f"'payload ' || SEQ4() FROM TABLE(GENERATOR(ROWCOUNT => {n}))"
            )
            next_id[0] += n

        insert(100)
        dags = root / "dags"
        dags.mkdir()
        (dags / "snowberg_tables.py").write_text((REPO / "dags" / "snowberg_tables.py").read_text())
        (root / "lake" / "warehouse").mkdir(parents=True)
        entry = {
            "name": "t000",
            "source": {"table": "SNOWBERG_DEMO.BENCH.SRC"},
            "target": "bench.t000",
            "cursor": {"column": "updated_at"},
            "primary_key": ["id"],
            "freshness_sla": "2h",
        }
        defaults = {"retries": 0, "schedule": None, "checks_schedule": None, "maintenance": {"enabled": False}}
        (root / "tables.yaml").write_text(yaml.safe_dump({"defaults": defaults, "tables": [entry]}))
        env = dict(os.environ) | stack_env(root, fs.port)
        env |= {"SNOWBERG_TABLES_CONFIG": str(root / "tables.yaml"), "AIRFLOW_HOME": str(root / "airflow")}
        spec = {
            "dag_id": "snowberg_t000",
            "dag_file": str(dags / "snowberg_tables.py"),
            "variables": str(root / "v.json"),
        }
        busy_run(spec, env, "manual__first")  # the first load (not measured)
        runs = []
        for k in range(args.repeats):
            insert(args.rows)
            runs.append(busy_run(spec, env, f"manual__busy_{k}"))
            print(json.dumps([{t["task"]: round(t["cpu_s"], 2)} for t in runs[-1]]), flush=True)
        snow.close()
    finally:
        fs.stop()

    print(f"\nbusy run of {args.rows:,} new rows, task process CPU s (median of {args.repeats}):")
    print("| task | " + " | ".join(PARTS) + " | total | heavy modules imported |")
    print("|---|" + "---|" * (len(PARTS) + 2))
    totals = {p: 0.0 for p in PARTS}
    for task in TASKS:
        rs = [t for run in runs for t in run if t["task"] == task]
        if not rs:
            continue
        med = {p: statistics.median(r["parts"][p] for r in rs) for p in PARTS}
        for p in PARTS:
            totals[p] += med[p]
        cpu = statistics.median(r["cpu_s"] for r in rs)
        print(
            f"| {task} | "
            + " | ".join(f"{med[p]:.2f}" for p in PARTS)
            + f" | {cpu:.2f} | "
            + (", ".join(rs[0]["heavy_imported"]) or "none")
            + " |"
        )
    print("| **run** | " + " | ".join(f"{totals[p]:.2f}" for p in PARTS) + f" | {sum(totals.values()):.2f} | |")
    starts = statistics.median(len(run) for run in runs)
    print(f"task starts per run: {starts:.0f}; load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
