"""Each task process imports only what its path needs (docs/performance.md, "Busy runs").

A task start pays its imports again in a fresh process: the DAG file's parse must import no data library, and a
task that never talks to Snowflake must not import the connector (which imports pandas and numpy) nor the
libraries of other paths (DuckDB, polars, the emulator). Each case imports what the task's ``execute()`` imports,
in a fresh interpreter after Airflow's SDK (a worker has it), and lists what else came in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
DATA_LIBRARIES = ("pyarrow", "pyiceberg", "snowflake.connector", "pandas", "numpy", "duckdb", "polars", "fakesnow")
OTHER_PATHS = ("duckdb", "polars", "fakesnow", "boto3", "sqlglot")

# What each task's execute() imports (the modules its function-level imports name), and what must stay out.
CASES = {
    "plan and load": (
        [
            "snowberg.airflow.operators.incremental",
            "snowberg.config.run_params",
            "snowberg.iceberg.catalogs",
            "snowberg.iceberg.gate",
            "snowberg.iceberg.state",
            "snowberg.load.plan",
            "snowberg.load.publish",
            "snowberg.load.slices",
            "snowberg.load.extract",
            "snowberg.snowflake.hook",
            "snowberg.airflow.metrics",
            "snowberg.airflow.operators.health",
            "snowberg.checks.health",
        ],
        OTHER_PATHS,
    ),
    "publish": (
        [
            "snowberg.airflow.operators.incremental",
            "snowberg.core.window",
            "snowberg.iceberg.catalogs",
            "snowberg.iceberg.state",
            "snowberg.load.publish",
        ],
        ("snowflake.connector", "pandas", *OTHER_PATHS),
    ),
    "table_health": (
        ["snowberg.airflow.operators.health", "snowberg.checks.health", "snowberg.iceberg.catalogs"],
        ("snowflake.connector", "pandas", *OTHER_PATHS),
    ),
}

# Each case runs in a fork of one process that imported ``{first}`` once, as a worker forks its tasks; the case
# "parse" parses the DAG file as a task process does (its arguments: the tables config and the DAG file).
PROBE_TEMPLATE = """
import json, os, sys, threading
{first}
cases = json.loads(sys.argv[1])
out = {{"python_threads": threading.active_count()}}
for case, modules in cases.items():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        before = set(sys.modules)
        if case == "parse":
            os.environ["SNOWBERG_TABLES_CONFIG"] = modules[0]
            os.environ["_AIRFLOW_PARSING_CONTEXT_DAG_ID"] = "snowberg_t1"
            ns = {{"__file__": modules[1]}}
            exec(open(ns["__file__"]).read(), ns)
            assert "snowberg_t1" in ns
        else:
            for name in modules:
                __import__(name)
        os.write(w, json.dumps(sorted(set(sys.modules) - before)).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out[case] = json.loads(f.read())
    os.waitpid(pid, 0)
print(json.dumps(out))
"""
PROBE = PROBE_TEMPLATE.format(first="import airflow.sdk  # what a worker holds before it forks a task")
# What the LocalExecutor's forkserver imports (docs/airflow-deployment.md)
PRELOADED_PROBE = PROBE_TEMPLATE.format(first="import snowberg.airflow.worker_preload")


def _probe(probe: str, cases: dict[str, list[str]]) -> dict[str, Any]:
    """What ``probe`` printed: per case the modules it brought in, and the process's Python threads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("_AIRFLOW_PARSING_CONTEXT")}
    res = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(cases)], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


def _imported(cases: dict[str, list[str]]) -> dict[str, set[str]]:
    """The modules each case's imports brought in, each in a fresh fork of one process that imported Airflow."""
    return {k: set(v) for k, v in _probe(PROBE, cases).items() if isinstance(v, list)}


@pytest.fixture(scope="module")
def imported() -> dict[str, set[str]]:
    return _imported({case: modules for case, (modules, _) in CASES.items()} | {"connector": ["snowflake.connector"]})


def _present(new: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(r for r in roots if r in new)


@pytest.mark.parametrize("task", sorted(CASES))
def test_a_task_path_imports_no_library_it_does_not_use(task: str, imported: dict[str, set[str]]) -> None:
    assert _present(imported[task], CASES[task][1]) == [], f"{task} imports libraries its path does not use"


def test_the_probe_sees_a_heavy_import(imported: dict[str, set[str]]) -> None:
    """The probe itself can fail: the connector does import pandas."""
    assert _present(imported["connector"], ("pandas", "numpy")) == ["numpy", "pandas"]


def test_a_task_parse_imports_no_data_library(tmp_path: Path) -> None:
    """The DAG file, parsed as a task process parses it (its DAG id as the parsing context)."""
    import yaml

    (tmp_path / "tables.yaml").write_text(
        yaml.safe_dump(
            {
                "tables": [
                    {"name": "t1", "source": {"table": "D.S.T"}, "target": "n.t", "cursor": {"column": "u"}},
                    {"name": "t2", "source": {"table": "D.S.T2"}, "target": "n.t2", "primary_key": ["id"]},
                ]
            }
        )
    )
    code = f"""
import json, os, sys
import airflow.sdk
before = set(sys.modules)
os.environ["SNOWBERG_TABLES_CONFIG"] = {str(tmp_path / "tables.yaml")!r}
os.environ["_AIRFLOW_PARSING_CONTEXT_DAG_ID"] = "snowberg_t1"
ns = {{"__file__": {str(REPO / "dags" / "snowberg_tables.py")!r}}}
exec(open(ns["__file__"]).read(), ns)
assert "snowberg_t1" in ns, sorted(k for k in ns if k.startswith("snowberg"))
print(json.dumps(sorted(set(sys.modules) - before)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    new = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert _present(new, DATA_LIBRARIES) == []


def test_after_the_worker_preload_a_tasks_parse_and_execute_import_no_library(tmp_path: Path) -> None:
    """The preload lists what each task path imports: a task forked after it imports none of the heavy libraries.

    That is what the forkserver saves each task (``bench.deployment_cost`` with and without ``--no-preload``); a
    library added to a task path and not to ``PRELOAD_MODULES`` fails here. The preload starts no Python thread
    (the forkserver forks after it), and Airflow's asset-URI handler discovery ran in it (boto3 is there already).
    """
    import yaml

    (tmp_path / "tables.yaml").write_text(
        yaml.safe_dump(
            {
                "tables": [
                    {"name": "t1", "source": {"table": "D.S.T"}, "target": "n.t", "cursor": {"column": "u"}},
                    {"name": "t2", "source": {"table": "D.S.T2"}, "target": "n.t2", "primary_key": ["id"]},
                ]
            }
        )
    )
    cases = {case: modules for case, (modules, _) in CASES.items()}
    cases["parse"] = [str(tmp_path / "tables.yaml"), str(REPO / "dags" / "snowberg_tables.py")]
    out = _probe(PRELOADED_PROBE, cases)
    heavy = (*DATA_LIBRARIES, "boto3", "botocore")
    for case in cases:
        assert _present(set(out[case]), heavy) == [], f"{case}: imports after the preload"
    # The first Asset of a parse makes Airflow import every provider's asset-URI handlers, once per process.
    handlers = [m for m in out["parse"] if m.startswith("airflow.providers.") and ".assets" in m]
    assert handlers == [], "the parse ran Airflow's asset-URI handler discovery again"
    # A Python thread beside the main one would make the forkserver's fork unsafe (the native helper threads of
    # numpy's BLAS and pyarrow's jemalloc handle fork themselves, through pthread_atfork).
    assert out["python_threads"] == 1
