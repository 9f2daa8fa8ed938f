"""DAG parse time for N configured tables (default 200): what the dag-processor pays per parse of the DAG file.

    .venv/bin/python -m bench.parse_time              # 200 tables, 5 runs
    .venv/bin/python -m bench.parse_time --tables 500 --runs 3

Each run is a fresh interpreter that has already imported Airflow (as the
dag-processor has) and then times ``DagBag`` parsing ``dags/snowberg_tables.py``
with a generated config of N tables (``SNOWBERG_TABLES_CONFIG``): YAML read,
pydantic validation, every DAG built. It also reports the share spent
importing snowberg, and checks that no heavy library (pyarrow, pyiceberg, the
Snowflake connector, pandas) was imported by the parse.

``--sliced`` also times the same tables with the mapped-slice load
(``operators.scale.sliced_load``) in every DAG, to show what opting all
tables in to scale-out would cost at parse time.

``--watch`` makes every table a watched one (``watch:``, docs/event-driven.md; the query
sources become table sources, which is what a watched table needs): each load DAG is then
scheduled on its source Asset with its watcher's trigger.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
# The dag-processor's full parse: at most 5 s per 1,000 tables on a two-core machine (quiet).
TARGET_S_PER_1000 = 5.0
HEAVY = ("pyarrow", "pyiceberg", "snowflake.connector", "pandas", "duckdb", "fakesnow")


def tables_config(n: int, *, watch: bool = False) -> dict[str, Any]:
    """N tables, mixing table and query sources, partitions, cursors, keys, SLAs; ``watch``: every table watched."""
    tables = []
    for i in range(n):
        t: dict[str, Any] = {
            "name": f"t{i:04d}",
            "target": f"bench.t{i:04d}",
            "cursor": {"column": "updated_at", "commit_lag": "1m", "lookback": "10m" if i % 6 == 0 else "0s"},
            "primary_key": ["id"] if i % 2 == 0 else [],
            "schedule": "@hourly" if i % 4 else "0 */6 * * *",
            "tags": ["bench", f"group{i % 7}"],
        }
        if i % 5 == 0:
            t["source"] = {"query": f"SELECT ID, AMOUNT, UPDATED_AT FROM DB.S.SRC{i} WHERE AMOUNT > 0"}
        else:
            t["source"] = {"table": f"DB.S.SRC{i}"}
        if i % 2 == 1:
            t["partition_by"] = ["day(updated_at)"]
        if i % 3 == 1:
            t["freshness_sla"] = "2h"
        if watch:
            t["source"] = {"table": f"DB{i % 4}.S.SRC{i}"}
            t["watch"] = {"poll_interval": "1m"} if i % 2 else True
            del t["schedule"]
        tables.append(t)
    return {"defaults": {"snowflake_conn_id": "snowflake_default", "catalog": "lake", "retries": 2}, "tables": tables}


PROBE = """
import json, sys, time
t0 = time.perf_counter()
import airflow.sdk  # the dag-processor has Airflow loaded before it parses a file
from airflow.dag_processing.dagbag import DagBag
t1 = time.perf_counter()
sliced = sys.argv[2] == "1"
if sliced:
    import snowberg.airflow.dag_factory as f
    from snowberg.airflow.operators.scale import sliced_load
    original = f.build_dag
    def build_with_slices(cfg):
        dag = original(cfg)
        plan, load = dag.get_task("plan"), dag.get_task("load")
        with dag:
            commit = sliced_load(cfg, plan)
        return dag
    f.build_dag = build_with_slices
reference_cpu_s = None
if len(sys.argv) > 3 and sys.argv[3] == "1":
    # A yardstick in the same process: plain Airflow DAGs (scheduled, six trigger-form Params, two tasks).
    # Load on a shared machine slows it and the parse alike, so their ratio holds where seconds do not.
    import pendulum
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG, Param
    c0 = time.process_time()
    for i in range(200):
        with DAG(dag_id=f"reference_{i}", schedule="@hourly", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
                 auto_register=False, params={f"p{j}": Param(None, type=["null", "string"]) for j in range(6)}):
            EmptyOperator(task_id="a") >> EmptyOperator(task_id="b")
    reference_cpu_s = time.process_time() - c0
t2, c2 = time.perf_counter(), time.process_time()
bag = DagBag(dag_folder=sys.argv[1], safe_mode=False)
t3, c3 = time.perf_counter(), time.process_time()
heavy = sorted(m for m in ("pyarrow", "pyiceberg", "snowflake.connector", "pandas", "duckdb", "fakesnow") \
if m in sys.modules)
print("PARSE " + json.dumps({"airflow_import_s": t1 - t0, "parse_s": t3 - t2, "cpu_s": c3 - c2,
      "reference_cpu_s": reference_cpu_s, "dags": len(bag.dags),
      "errors": {k: v[:500] for k, v in bag.import_errors.items()}, "heavy": heavy,
      "tasks": sum(len(d.tasks) for d in bag.dags.values()), "ids": sorted(bag.dags)}))
"""


def child_env(config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        SNOWBERG_TABLES_CONFIG=str(config),
        PYTHONPYCACHEPREFIX=str(Path(tempfile.gettempdir()) / "snowberg-bench-pycache"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="True",
        PYTHONWARNINGS="ignore",
    )
    env.setdefault("AIRFLOW_HOME", str(Path(tempfile.gettempdir()) / "snowberg-bench-airflow-home"))
    return env


def parse_once(
    n: int,
    *,
    sliced: bool = False,
    workdir: Path | None = None,
    dag_id: str | None = None,
    repo: Path = REPO,
    reference: bool = False,
    timeout: float = 600,
    watch: bool = False,
) -> dict[str, Any]:
    """One fresh-process parse of the DAG file for n tables.

    ``dag_id``: parse as a task process of that DAG does (Airflow's parsing
    context set in the environment); None: as the dag-processor does.
    ``repo``: the checkout whose ``dags/`` and ``plugins/`` are parsed (an
    older commit's, to compare). ``reference``: also time a yardstick of
    plain Airflow DAGs in the same process first (``reference_cpu_s``).
    """
    workdir = workdir or Path(tempfile.mkdtemp(prefix="snowberg-parse-"))
    config = workdir / f"tables-{n}{'-watch' if watch else ''}.yaml"
    if not config.exists():
        config.write_text(yaml.safe_dump(tables_config(n, watch=watch), sort_keys=False))
    env = child_env(config)
    if dag_id is not None:
        env.update(_AIRFLOW_PARSING_CONTEXT_DAG_ID=dag_id, _AIRFLOW_PARSING_CONTEXT_TASK_ID="plan")
    if repo != REPO:
        env["PYTHONPATH"] = os.pathsep.join([str(repo / "plugins"), env.get("PYTHONPATH", "")])
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            str(repo / "dags" / "snowberg_tables.py"),
            "1" if sliced else "0",
            "1" if reference else "0",
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("PARSE ")), None)
    if line is None:
        raise RuntimeError(f"parse probe failed:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}")
    return dict(json.loads(line[len("PARSE ") :]))


def task_parse_pairs(n: int, runs: int, *, workdir: Path, repo: Path = REPO, watch: bool = False) -> dict[str, Any]:
    """A task's parse of the DAG file with 1 and with n tables, alternating: medians and the ratio of each pair.

    The task is ``snowberg_t0000``'s (the first table of both configs). Each
    pair runs back to back, so load on a shared machine hits both sides
    alike; the ratio is taken pair by pair.
    """
    one, many, ratios = [], [], []
    for _ in range(runs):
        a = parse_once(1, workdir=workdir, dag_id="snowberg_t0000", repo=repo, watch=watch)
        b = parse_once(n, workdir=workdir, dag_id="snowberg_t0000", repo=repo, watch=watch)
        for r in (a, b):
            if r["errors"] or "snowberg_t0000" not in r["ids"]:
                raise RuntimeError(f"task parse failed: {r['errors'] or r['ids'][:5]}")
        one.append(a["parse_s"])
        many.append(b["parse_s"])
        ratios.append(b["parse_s"] / a["parse_s"])
    return {
        "one_s": statistics.median(one),
        "many_s": statistics.median(many),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "dags_built": b["dags"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sliced", action="store_true", help="also time DAGs with the mapped-slice load in every DAG")
    ap.add_argument("--task", action="store_true", help="time a task's parse (parsing context set): 1 vs N tables")
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout to parse (default: this one)")
    ap.add_argument("--watch", action="store_true", help="every table watched (scheduled on its source Asset)")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="snowberg-parse-"))
    if args.task:
        parse_once(args.tables, workdir=work, dag_id="snowberg_t0000", repo=args.repo, watch=args.watch)  # warm up
        r = task_parse_pairs(args.tables, args.runs, workdir=work, repo=args.repo, watch=args.watch)
        print(f"| task parse (context snowberg_t0000) | 1 table s | {args.tables} tables s | ratio (median of pairs) |")
        print("|---|---|---|---|")
        print(
            f"| {r['dags_built']} DAGs built | {r['one_s']:.2f} | {r['many_s']:.2f} | {r['ratio']:.2f} "
            f"[{min(r['ratios']):.2f}–{max(r['ratios']):.2f}] |"
        )
        return 0
    parse_once(args.tables, workdir=work, repo=args.repo, watch=args.watch)  # warm the bytecode cache
    shapes = [False, True] if args.sliced else [False]
    print(
        f"| DAG shape | tables | DAGs | tasks | parse s (median [range] of {args.runs}) | CPU s "
        "| CPU ÷ yardstick | target | heavy imports |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for sliced in shapes:
        runs = [
            parse_once(args.tables, sliced=sliced, workdir=work, repo=args.repo, reference=True, watch=args.watch)
            for _ in range(args.runs)
        ]
        secs = [r["parse_s"] for r in runs]
        cpu = [r["cpu_s"] for r in runs]
        ratio = statistics.median(r["cpu_s"] / r["reference_cpu_s"] for r in runs)
        r0 = runs[0]
        if r0["errors"]:
            print(f"import errors: {r0['errors']}")
            return 1
        label = "plan → load → publish (+ checks DAG)" if not sliced else "with mapped slices in every DAG"
        label += ", watched" if args.watch else ""
        print(
            f"| {label} | {args.tables} | {r0['dags']} | {r0['tasks']} | {statistics.median(secs):.2f} "
            f"[{min(secs):.2f}–{max(secs):.2f}] | {statistics.median(cpu):.2f} | {ratio:.1f} "
            f"| {TARGET_S_PER_1000 * args.tables / 1000:.1f} s | {r0['heavy'] or 'none'} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
