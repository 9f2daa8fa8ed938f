"""Run snowberg's plan / load / publish tasks in child processes that a test can SIGKILL.

Each task step runs in its own process, like an Airflow worker runs a task:
the child builds the real operator (``SnowbergPlanOperator``,
``SnowbergLoadOperator``, ``SnowbergPublishOperator``) and calls its
``execute()`` with a task-like context. Connections (Snowflake and
the Iceberg catalog) come from ``AIRFLOW_CONN_*`` environment variables, as in
a deployment; the only stand-in is the Variable store (Airflow's task SDK
needs a supervisor to write Variables), which is a JSON file that survives the
processes (``JsonFileVariables``).

Children are forked from a ``multiprocessing`` fork server that has already
imported pyiceberg, pyarrow, the Snowflake connector and the operators, so a
step starts in milliseconds instead of the seconds a fresh interpreter needs
to import them — which keeps a 20-iteration chaos run within a few minutes and
makes the kill time a fraction of the task's real work, not of its imports.

Every child appends what it passed (the failpoints of ``snowberg.core.faults``,
each Variable write, the end of the step) with a timestamp to a trace file,
written unbuffered, so the parent can tell where a SIGKILL landed.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

STEPS = ("plan", "load", "publish")
# The mapped-slices DAG's steps after its plan (slice_load runs once per slice), and the maintenance DAG's.
SLICE_STEPS = ("slice_plan", "slice_load", "slice_commit")
MAINTENANCE_STEPS = ("compact", "expire_snapshots", "remove_orphan_files", "manual")
PRELOAD = [
    # "__main__" first: the fork server imports the main module once, so children do not re-run it each.
    "__main__",
    "chaos_tasks",
    "pyarrow",
    "pyarrow.parquet",
    "pyiceberg.catalog.sql",
    # The object-storage lakes' catalogs and FileIO (tests/lakes): Glue, PostgreSQL, S3 through pyarrow.
    "pyiceberg.catalog.glue",
    "psycopg2",
    "boto3",
    "pyarrow.fs",
    "pyiceberg.table",
    "pyiceberg.io.pyarrow",
    "snowflake.connector",
    "airflow.sdk",
    "airflow.providers.snowflake.hooks.snowflake",
    "snowberg.airflow.operators.incremental",
    "snowberg.load.plan",
    "snowberg.load.extract",
    "snowberg.load.publish",
    "snowberg.load.slices",
    "snowberg.load.mapped",
    "snowberg.airflow.operators.scale",
    "snowberg.airflow.operators.maintenance",
    "snowberg.iceberg.maintenance",
    "snowberg.iceberg.rollback",
    "snowberg.iceberg.catalogs",
    "snowberg.config.run_params",
    "chaos_warmup",
]


class JsonFileVariables:
    """A Variable store in a JSON file: what one process writes, the next reads.

    Writes go to a temporary file that replaces the store in one rename, so a
    process killed while writing leaves the old content, never half a file.
    """

    def __init__(self, path: str | Path, trace: Trace | None = None) -> None:
        self.path = Path(path)
        self.trace = trace

    def all(self) -> dict[str, str]:
        try:
            return dict(json.loads(self.path.read_text()))
        except FileNotFoundError:
            return {}

    def get(self, key: str) -> str | None:
        return self.all().get(key)

    def set(self, key: str, value: str) -> None:
        data = self.all()
        data[key] = value
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, self.path)
        if self.trace is not None:
            self.trace.mark("variable_set")


class Trace:
    """Append-only ``<monotonic ns> <event>`` lines, one ``write`` each (nothing buffered to lose)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def mark(self, event: str) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{time.monotonic_ns()} {event}\n".encode())
        finally:
            os.close(fd)

    def events(self) -> list[tuple[int, str]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            ns, _, ev = line.partition(" ")
            out.append((int(ns), ev))
        return out


@dataclass(kw_only=True)
class StepSpec:
    """Everything a child needs to run one task step (picklable)."""

    step: str
    table_config: dict[str, Any]
    run_id: str
    window: dict[str, Any] | None = None
    env: dict[str, str] = field(default_factory=dict)
    variables_path: str
    trace_path: str
    result_path: str
    # SQL catalog only: the catalog applies the commit, then the client sees a dropped database connection.
    lose_commit_response: bool = False
    # The mapped-slices steps' XCom input: one slice (slice_load) or every slice's result (slice_commit).
    slice_task: dict[str, Any] | None = None
    slice_results: list[dict[str, Any]] | None = None
    # The run's params (the maintenance DAG's trigger form: a rollback).
    params: dict[str, Any] = field(default_factory=dict)


def _install_variable_store(store: JsonFileVariables) -> None:
    """Back Airflow's ``Variable`` with the JSON file store (the one stand-in).

    Outside a worker, the task SDK has no supervisor to write Variables to. The
    patch is on Airflow's class, not on snowberg: snowberg's own code, whatever
    module it reads and writes Variables from, runs unchanged.
    """
    from airflow.sdk import Variable

    missing = object()

    def get(cls: Any, key: str, default: Any = missing, deserialize_json: bool = False) -> Any:
        value = store.get(key)
        if value is None:
            if default is missing:
                raise KeyError(f"Variable {key} does not exist")
            return default
        return json.loads(value) if deserialize_json else value

    def set_(cls: Any, key: str, value: Any, description: str | None = None, serialize_json: bool = False) -> None:
        store.set(key, json.dumps(value) if serialize_json else str(value))

    Variable.get = classmethod(get)  # type: ignore[method-assign,assignment]
    Variable.set = classmethod(set_)  # type: ignore[method-assign,assignment]


def _install_trace(trace: Trace) -> None:
    """Record every failpoint the real code passes (they bracket extract, commit and publish)."""
    from snowberg.core import faults

    original = faults.crash_point

    def traced(name: str) -> None:
        trace.mark(name)
        original(name)

    faults.crash_point = traced  # type: ignore[assignment]


def _lose_sql_commit_responses() -> None:
    """Make pyiceberg's SQL catalog apply each commit and then fail as if the connection dropped.

    That is what a client sees when the database committed the pointer swap
    but the connection died before the acknowledgement arrived: the error
    class SQLAlchemy raises for a broken connection, after the change is durable.
    """
    from pyiceberg.catalog.sql import SqlCatalog
    from sqlalchemy.exc import OperationalError

    applied = SqlCatalog.commit_table

    def commit_then_lose(self: Any, *args: Any, **kwargs: Any) -> Any:
        applied(self, *args, **kwargs)
        raise OperationalError(
            "COMMIT", {}, ConnectionResetError("server closed the connection unexpectedly"), connection_invalidated=True
        )

    SqlCatalog.commit_table = commit_then_lose  # type: ignore[method-assign]


def run_step(spec: StepSpec) -> None:
    """Child entry point: run one operator's ``execute()`` and write its return value."""
    # Only the spec's AWS settings (a lake test's: none but the no-such-file paths): the fork server may hold
    # variables from before the test scrubbed them, and keys from there would hide a FileIO that lost the
    # connection's.
    for var in [v for v in os.environ if v.startswith("AWS_") and v not in spec.env]:
        del os.environ[var]
    os.environ.update(spec.env)
    trace = Trace(spec.trace_path)
    trace.mark(f"{spec.step}:start")
    _install_variable_store(JsonFileVariables(spec.variables_path, trace))
    _install_trace(trace)
    if spec.lose_commit_response:
        _lose_sql_commit_responses()
    from snowberg.airflow.operators.arguments import operator_arguments
    from snowberg.airflow.operators.incremental import (
        SnowbergLoadOperator,
        SnowbergPlanOperator,
        SnowbergPublishOperator,
    )
    from snowberg.airflow.operators.maintenance import SnowbergMaintenanceOperator
    from snowberg.airflow.operators.scale import (
        SnowbergSliceCommitOperator,
        SnowbergSliceLoadOperator,
        SnowbergSlicePlanOperator,
    )
    from snowberg.config.table_config import TableConfig

    cfg = TableConfig.model_validate(spec.table_config)
    op: Any
    if spec.step in MAINTENANCE_STEPS:
        op = SnowbergMaintenanceOperator(
            task_id=spec.step, step=spec.step, **operator_arguments(SnowbergMaintenanceOperator, cfg)
        )
    elif spec.step == "slice_plan":
        op = SnowbergSlicePlanOperator(
            task_id=spec.step, window=spec.window, **operator_arguments(SnowbergSlicePlanOperator, cfg)
        )
    elif spec.step == "slice_load":
        op = SnowbergSliceLoadOperator(
            task_id=spec.step, slice_task=spec.slice_task, **operator_arguments(SnowbergSliceLoadOperator, cfg)
        )
    elif spec.step == "slice_commit":
        op = SnowbergSliceCommitOperator(
            task_id=spec.step,
            window=spec.window,
            slice_results=spec.slice_results,
            **operator_arguments(SnowbergSliceCommitOperator, cfg),
        )
    elif spec.step == "plan":
        op = SnowbergPlanOperator(task_id=spec.step, **operator_arguments(SnowbergPlanOperator, cfg))
    elif spec.step == "load":
        op = SnowbergLoadOperator(
            task_id=spec.step, window=spec.window, **operator_arguments(SnowbergLoadOperator, cfg)
        )
    elif spec.step == "publish":
        op = SnowbergPublishOperator(
            task_id=spec.step, window=spec.window, **operator_arguments(SnowbergPublishOperator, cfg)
        )
    else:
        raise ValueError(f"unknown step {spec.step!r}")
    context = {
        "run_id": spec.run_id,
        "dag_run": SimpleNamespace(run_type="scheduled", clear_number=0, run_id=spec.run_id),
        "params": dict(spec.params),
        "data_interval_start": None,
        "data_interval_end": None,
    }
    try:
        result = op.execute(context)
    except BaseException as exc:  # what the task's log would show; the process still fails
        Path(spec.result_path + ".error").write_text(f"{type(exc).__module__}.{type(exc).__name__}: {exc}")
        raise
    tmp = spec.result_path + ".tmp"
    Path(tmp).write_text(json.dumps(result, default=str))
    os.replace(tmp, spec.result_path)
    trace.mark(f"{spec.step}:end")


_CTX: Any = None
_CTX_LOCK = threading.Lock()  # the chaos tests start steps from several threads: one of them starts the server


def context() -> Any:
    """The fork-server context (started once per test session, with the heavy imports done)."""
    with _CTX_LOCK:
        return _context()


def _context() -> Any:
    global _CTX
    if _CTX is None:
        from multiprocessing import forkserver

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        # The fork server imports the preload list with the interpreter's own sys.path (Python 3.11 does not
        # pass the parent's): put this folder on its PYTHONPATH while it starts.
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent), *([old] if old else [])])
        try:
            forkserver.ensure_running()
        finally:
            if old is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = old
        _CTX = ctx
    return _CTX


@dataclass(kw_only=True)
class StepOutcome:
    step: str
    exitcode: int | None
    killed: bool
    result: Any
    seconds: float
    error: str | None = None  # the exception the step failed with, if it raised


STATUS_LOST = 255  # the exit code multiprocessing's fork-server client reports when a child's status is lost


def start_step(spec: StepSpec) -> Any:
    p = context().Process(target=run_step, args=(spec,), name=f"snowberg-{spec.step}", daemon=True)
    p.start()
    return p


def sigkill(p: Any) -> bool:
    """SIGKILL the child this test started, by its id; False when it ended by itself in between.

    ``is_alive()`` and the kill are two steps: a child that exits between them, and is reaped
    (``multiprocessing`` reaps on ``is_alive``/``join``), has no process left to kill
    (``ProcessLookupError``); one that exited but is not reaped yet takes the signal as a no-op. Either
    way that run was not killed, and the test must count it so: the exit code tells.
    """
    try:
        os.kill(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    p.join(5)
    return bool(p.exitcode == -signal.SIGKILL)


def finish_step(
    spec: StepSpec,
    p: Any,
    started: float,
    deadline: float | None,
    timeout: float = 120,
    trigger: tuple[str, float] | None = None,
) -> StepOutcome:
    """Wait for the step and SIGKILL it if it is still running at ``deadline`` (monotonic seconds), or
    ``trigger[1]`` seconds after it traced the event ``trigger[0]`` (to aim a kill inside the commit)."""
    killed = kill_sent = False
    if trigger is not None:
        event, delay = trigger
        trace = Trace(spec.trace_path)
        while p.is_alive():
            if any(ev == event for _, ev in trace.events()):
                p.join(delay)
                kill_sent = p.is_alive()
                killed = kill_sent and sigkill(p)
                break
            p.join(0.001)
    elif deadline is not None:
        p.join(max(0.0, deadline - time.monotonic()))
        kill_sent = p.is_alive()
        killed = kill_sent and sigkill(p)
    p.join(timeout)
    if p.is_alive():
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        raise TimeoutError(f"step {spec.step} did not finish in {timeout}s")
    exitcode = p.exitcode
    err = Path(spec.result_path + ".error")
    if exitcode == STATUS_LOST and not err.exists():
        # multiprocessing's fork-server client reports 255 when it could not read the child's exit status
        # from the fork server (popen_forkserver.poll: "perhaps the forkserver process itself got killed");
        # seen once in CI on a loaded 2-core machine. The step's own files say how it ended: a result file
        # is written only after execute() returned; an exception writes the .error file. With neither, it
        # died by the kill this harness sent, or it stays an unexplained failure (exit code 255).
        if Path(spec.result_path).exists():
            exitcode = 0
        elif kill_sent:
            killed, exitcode = True, -signal.SIGKILL
    result = None
    if not killed and exitcode == 0:
        result = json.loads(Path(spec.result_path).read_text())
    return StepOutcome(
        step=spec.step,
        exitcode=exitcode,
        killed=killed,
        result=result,
        seconds=time.monotonic() - started,
        error=err.read_text() if err.exists() else None,
    )


def run(spec: StepSpec) -> StepOutcome:
    """Run one step to its end (no kill)."""
    return finish_step(spec, start_step(spec), time.monotonic(), None)
