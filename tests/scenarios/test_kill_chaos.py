"""Chaos: SIGKILL the real plan → load → publish tasks at random moments; the lake still equals the source.

Two tables load from the Snowflake emulator into an Iceberg lake, on each lake
backend of ``tests/lakes`` it runs on (``file://`` + SQLite and S3 + PostgreSQL
catalog in the suite, Glue + S3 with ``SNOWBERG_CHAOS_LAKES``; each from an
Airflow connection, no AWS setting anywhere else): a keyed table (``write_mode``
merge, TIMESTAMP_NTZ cursor) and an append table (NUMBER cursor, no key). Each
iteration mutates both sources (inserts; updates that move the cursor — for the
keyed table, of existing keys), then runs each table's DAG run (plan → load →
publish, each step a real operator in its own process, see ``chaos_tasks``) and
SIGKILLs it at a moment drawn uniformly over the wall time a clean run took; one
run in three aims its kill at the load's commit instead, inside it or just after
it (a commit is a few percent of a run, so uniform kills alone rarely land
there). Those, and half of the other killed runs, are retried the way Airflow
retries a task (the killed step again in a new process, with the same planned
window); the others fail and leave their mess to the next run.

After every iteration, what must hold even before any recovery: no key twice in
the keyed table, no (id, seq) pair twice in the append table, no row the source
never had, no Variable ahead of its table. After the last iteration, two clean
runs, then:

* keyed table: one row per key, with the source's current values;
* append table: every current source row present (and the checks above);
* the table's watermark covers every source row and never passes the last
  planned high bound (NUMBER cursor: it equals the source's largest value);
* the Variable mirrors the table's state (same watermark, same snapshot).

Seeded: ``SNOWBERG_CHAOS_SEED`` (default 20261201). ``SNOWBERG_CHAOS_ITERATIONS``
(default 8 on ``file_sqlite``) and ``SNOWBERG_CHAOS_LAKE_ITERATIONS`` (default 6 on each
object-storage lake: what CI can afford beside the maintenance loop) set the least number of iterations;
a run goes on past them until at least ``SNOWBERG_CHAOS_KILLS`` runs were
really killed (default 10 per lake: a run that ends before its kill time is
not a kill). The kill points are printed (``pytest -s`` shows them; a failure
shows them too).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import chaos_tasks as ct
import pytest

from lakes import Lake, LakeBackend, lake_fixtures
from snowberg.local.stack import FakesnowServer, snowflake_connection_uri

pytestmark = pytest.mark.slow
lake, lake_services = lake_fixtures()

SEED = int(os.environ.get("SNOWBERG_CHAOS_SEED", "20261201"))
ITERATIONS = int(os.environ.get("SNOWBERG_CHAOS_ITERATIONS", "8"))
LAKE_ITERATIONS = int(os.environ.get("SNOWBERG_CHAOS_LAKE_ITERATIONS", "6"))
MIN_KILLS = int(os.environ.get("SNOWBERG_CHAOS_KILLS", "10"))
MAX_ITERATIONS = 4 * max(ITERATIONS, LAKE_ITERATIONS)  # a cap on the search for kills (a run ending early is no kill)
# The lakes the chaos loop runs on: the embedded default and object storage with a non-SQLite catalog (what
# the CI budget affords); SNOWBERG_CHAOS_LAKES=file_sqlite,s3_postgres,glue_s3 adds Glue + S3.
CHAOS_LAKES = [LakeBackend(b) for b in os.environ.get("SNOWBERG_CHAOS_LAKES", "file_sqlite,s3_postgres").split(",")]
AIM_AT_COMMIT = 1 / 3  # share of runs whose kill is aimed inside the commit rather than uniform over the run
DB = "CHAOS"
NOW = "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)"


def entries(lake: Lake) -> dict[str, dict[str, Any]]:
    common = {"snowflake_conn_id": "chaos_snowflake", "catalog": lake.conn_id}
    return {
        "merge": {
            "name": "chaos_merge",
            "source": {"table": f"{DB}.S.MERGE_SRC"},
            "target": f"{lake.namespace}.merge_t",
            "cursor": {"column": "updated_at"},
            "primary_key": ["id"],
            **common,
        },
        "append": {
            "name": "chaos_append",
            "source": {"table": f"{DB}.S.APPEND_SRC"},
            "target": f"{lake.namespace}.append_t",
            "cursor": {"column": "seq"},
            "write_mode": "append",
            **common,
        },
    }


@dataclass(kw_only=True)
class Lab:
    """The emulator, the lake and the Variable file the task processes share."""

    server: FakesnowServer
    conn: Any
    lake: Lake
    tmp: Path
    env: dict[str, str]
    configs: dict[str, dict[str, Any]]
    variables: ct.JsonFileVariables
    seq: int = 0
    next_id: int = 1
    history: dict[str, set[tuple[Any, ...]]] = field(default_factory=lambda: {"append": set()})
    counter: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sql(self, text: str) -> list[tuple[Any, ...]]:
        cur = self.conn.cursor()
        try:
            cur.execute(text)
            return list(cur.fetchall()) if cur.description else []
        finally:
            cur.close()

    def catalog(self) -> Any:
        """The lake's catalog, opened from its Airflow connection as a task opens it."""
        return self.lake.catalog()

    def spec(self, step: str, table: str, run_id: str, window: Any = None) -> ct.StepSpec:
        with self.lock:  # the two tables' runs go in two threads
            self.counter += 1
            n = self.counter
        d = self.tmp / "steps"
        d.mkdir(exist_ok=True)
        return ct.StepSpec(
            step=step,
            table_config=self.configs[table],
            run_id=run_id,
            window=window,
            env=self.env,
            variables_path=str(self.variables.path),
            trace_path=str(d / f"{n}.trace"),
            result_path=str(d / f"{n}.json"),
        )


def task_environment(lake: Lake, snowflake_uri: str) -> dict[str, str]:
    """What a task process sees: the two Airflow connections, and the lake fixture's "no AWS setting elsewhere".

    The children come from a fork server that may have started before this test scrubbed the environment:
    ``chaos_tasks.run_step`` drops every other ``AWS_*`` variable, so the connection is the only source of keys.
    """
    env = {"AIRFLOW_CONN_CHAOS_SNOWFLAKE": snowflake_uri, lake.env_var: lake.connection_json()}
    env.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
    return env


@pytest.fixture
def lab(fakesnow_server: FakesnowServer, lake: Lake, tmp_path: Path) -> Iterator[Lab]:
    conn = fakesnow_server.connect()
    lab = Lab(
        server=fakesnow_server,
        conn=conn,
        lake=lake,
        tmp=tmp_path,
        env=task_environment(lake, snowflake_connection_uri(fakesnow_server.port, database=DB)),
        configs=entries(lake),
        variables=ct.JsonFileVariables(tmp_path / "variables.json"),
    )
    lab.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    lab.sql(f"CREATE SCHEMA IF NOT EXISTS {DB}.S")
    lab.sql(
        f"CREATE OR REPLACE TABLE {DB}.S.MERGE_SRC (ID NUMBER(38,0), NOTE VARCHAR(40), UPDATED_AT TIMESTAMP_NTZ(9))"
    )
    lab.sql(f"CREATE OR REPLACE TABLE {DB}.S.APPEND_SRC (ID NUMBER(38,0), NOTE VARCHAR(40), SEQ NUMBER(38,0))")
    try:
        yield lab
    finally:
        conn.close()


# -- source mutations ------------------------------------------------------------------------------------------------


def mutate(lab: Lab, rng: random.Random, it: int) -> str:
    """Inserts and cursor-moving updates in both sources; returns a one-line description."""
    ids = [r[0] for r in lab.sql(f"SELECT ID FROM {DB}.S.MERGE_SRC")]
    n_ins, n_upd = rng.randint(1, 30), min(len(ids), rng.randint(0, 15))
    new = range(lab.next_id, lab.next_id + n_ins)
    lab.next_id += n_ins
    lab.sql(f"INSERT INTO {DB}.S.MERGE_SRC VALUES " + ", ".join(f"({i}, 'm{it}', {NOW})" for i in new))
    if n_upd:
        upd = sorted(rng.sample(ids, n_upd))
        lab.sql(
            f"UPDATE {DB}.S.MERGE_SRC SET NOTE = 'u{it}', UPDATED_AT = {NOW} WHERE ID IN ({', '.join(map(str, upd))})"
        )

    a_ids = [r[0] for r in lab.sql(f"SELECT ID FROM {DB}.S.APPEND_SRC")]
    a_ins, a_upd = rng.randint(1, 30), min(len(a_ids), rng.randint(0, 15))
    lab.seq += 1
    a_new = range(lab.next_id, lab.next_id + a_ins)
    lab.next_id += a_ins
    lab.sql(f"INSERT INTO {DB}.S.APPEND_SRC VALUES " + ", ".join(f"({i}, 'a{it}', {lab.seq})" for i in a_new))
    if a_upd:
        lab.seq += 1
        upd = sorted(rng.sample(a_ids, a_upd))
        lab.sql(
            f"UPDATE {DB}.S.APPEND_SRC SET NOTE = 'v{it}', SEQ = {lab.seq} WHERE ID IN ({', '.join(map(str, upd))})"
        )
    for row in lab.sql(f"SELECT ID, SEQ, NOTE FROM {DB}.S.APPEND_SRC"):
        lab.history["append"].add((int(row[0]), int(row[1]), row[2]))
    return f"merge +{n_ins} ~{n_upd}, append +{a_ins} ~{a_upd}"


# -- DAG runs --------------------------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class RunRecord:
    table: str
    run_id: str
    seconds: float
    planned_high: str | None = None
    kill_ms: float | None = None
    kill_step: str | None = None
    kill_phase: str | None = None
    kill_relative: str | None = None  # before/inside the commit, between commit and Variable, after the Variable
    retried: bool = False
    load_status: str | None = None
    commit_ms: float | None = None  # how long the load's commit took (from its trace), when it finished one


PHASES = {
    "plan:start": "planning",
    "load:start": "extracting",
    "after_extract": "data files written, commit not started",
    "before_commit": "inside the commit",
    "after_commit": "after the commit, before the Variable",
    "publish:start": "reading the commit back",
    "before_publish": "reading the commit back",
    "variable_set": "after the Variable write",
    "plan:end": "plan done",
    "load:end": "load done",
    "publish:end": "publish done",
}


def phase_at(trace: ct.Trace, kill_ns: int) -> str:
    passed = [ev for ns, ev in trace.events() if ns <= kill_ns]
    if not passed:
        return "process starting"
    return PHASES.get(passed[-1], passed[-1])


def relative_to_commit(traces: list[ct.Trace], kill_ns: int) -> str:
    """Where a kill fell relative to the run's commit and Variable write (from every step's trace so far)."""
    passed = [ev for t in traces for ns, ev in t.events() if ns <= kill_ns]
    if "after_commit" in passed:
        # the plan step may write the Variable too (reconcile); the publish step's write is the mirror of this commit
        return (
            "after the Variable"
            if "publish:start" in passed and "variable_set" in passed[passed.index("publish:start") :]
            else "between commit and Variable"
        )
    if "before_commit" in passed:
        return "inside the commit"
    return "before the commit"


def commit_ms(trace: ct.Trace) -> float | None:
    ev = {e: ns for ns, e in trace.events()}
    if "before_commit" in ev and "after_commit" in ev:
        return (ev["after_commit"] - ev["before_commit"]) / 1e6
    return None


def step_failed(lab: Lab, rec: RunRecord, spec: ct.StepSpec, out: ct.StepOutcome) -> AssertionError:
    return AssertionError(
        f"{rec.table} run {rec.run_id}: step {spec.step} exited {out.exitcode} without being killed "
        f"(trace: {[e for _, e in ct.Trace(spec.trace_path).events()]}); see the child's stderr above"
    )


def dag_run(
    lab: Lab,
    table: str,
    run_id: str,
    kill_after: float | None = None,
    retry: bool = False,
    kill_in_commit: float | None = None,
) -> RunRecord:
    """plan → load → publish, each step a process.

    ``kill_after``: SIGKILL whatever runs that many seconds into the run. ``kill_in_commit``: SIGKILL the
    load that many seconds after it started its commit (no kill if it has nothing to commit).
    """
    rec = RunRecord(table=table, run_id=run_id, seconds=0.0)
    t0 = time.monotonic()
    deadline = None if kill_after is None else t0 + kill_after
    window: Any = None
    traces: list[ct.Trace] = []
    for step in ct.STEPS:
        spec = lab.spec(step, table, run_id, window)
        traces.append(ct.Trace(spec.trace_path))
        p = ct.start_step(spec)
        trigger = ("before_commit", kill_in_commit) if step == "load" and kill_in_commit is not None else None
        out = ct.finish_step(spec, p, t0, deadline, trigger=trigger)
        if step == "load":
            rec.commit_ms = commit_ms(traces[-1])
        if out.killed:
            kill_ns = time.monotonic_ns()
            rec.kill_ms = (kill_ns / 1e9 - t0) * 1000
            rec.kill_step, rec.kill_phase = step, phase_at(traces[-1], kill_ns)
            rec.kill_relative = relative_to_commit(traces, kill_ns)
            if not retry:
                break
            # Airflow's task retry: the same step again in a new process, with the same XCom input.
            rec.retried = True
            deadline = None
            spec = lab.spec(step, table, run_id, window)
            out = ct.finish_step(spec, ct.start_step(spec), t0, None)
        if out.exitcode != 0:
            raise step_failed(lab, rec, spec, out)
        if step == "plan":
            window = out.result
            rec.planned_high = window.get("high")
        elif step == "load":
            rec.load_status = out.result["status"]
    rec.seconds = time.monotonic() - t0
    return rec


def both(run: Callable[[str], RunRecord]) -> dict[str, RunRecord]:
    """``run`` for the keyed and the append table at once, as two DAGs' runs overlap on a worker pool.

    The tables are independent (their own DAGs, tables and Variables); running them side by side halves the
    test's wall time, and each run's kill moment is still drawn over that run's own span. A failure in one
    is raised after both ended (no child is left running behind the test).
    """
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="chaos-dag") as pool:
        futures = {t: pool.submit(run, t) for t in ("merge", "append")}
        return {t: f.result() for t, f in futures.items()}


# -- checks ----------------------------------------------------------------------------------------------------------


def lake_rows(lab: Lab, table: str) -> list[dict[str, Any]]:
    t = lab.catalog().load_table(lab.configs[table]["target"])
    return list(t.scan().to_arrow().to_pylist())


def lake_or_empty(lab: Lab, table: str) -> list[dict[str, Any]]:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return lake_rows(lab, table)
    except NoSuchTableError:
        return []


def table_watermark(lab: Lab, table: str) -> tuple[str | None, int | None]:
    """The watermark the table's newest snowberg commit recorded, and that snapshot's id."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        t = lab.catalog().load_table(lab.configs[table]["target"])
    except NoSuchTableError:
        return None, None
    snap = t.current_snapshot()
    while snap is not None:
        props = snap.summary.additional_properties if snap.summary else {}
        if "snowberg.watermark" in props:
            return props["snowberg.watermark"] or None, snap.snapshot_id
        snap = t.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return None, None


def variable_key(lab: Lab, table: str) -> str:
    ns, name = lab.configs[table]["target"].split(".")
    return f"snowberg__{ns}__{name}__watermark"


def check_safe(lab: Lab, where: str) -> None:
    """What must hold after any kill, before any recovery: nothing doubled, nothing invented, no mirror ahead."""
    rows = lake_or_empty(lab, "merge")
    dup = [k for k, c in Counter(int(r["id"]) for r in rows).items() if c > 1]
    assert not dup, f"{where}: keyed table holds keys more than once: {dup[:10]}"
    a_rows = [(int(r["id"]), int(r["seq"]), r["note"]) for r in lake_or_empty(lab, "append")]
    dups = [p for p, c in Counter((i, s) for i, s, _ in a_rows).items() if c > 1]
    assert not dups, f"{where}: append table holds (id, seq) pairs more than once: {dups[:10]}"
    invented = sorted(set(a_rows) - lab.history["append"])
    assert not invented, f"{where}: append table holds rows the source never had: {invented[:10]}"
    a_wm, _ = table_watermark(lab, "append")
    raw = lab.variables.get(variable_key(lab, "append"))
    if raw is not None and json.loads(raw)["watermark"] is not None:
        assert a_wm is not None and int(json.loads(raw)["watermark"]) <= int(a_wm), (
            f"{where}: the append table's Variable {raw} is ahead of the table's watermark {a_wm}"
        )


def check(lab: Lab, last_high: dict[str, str | None], where: str) -> None:
    """After clean runs: the lake equals the source, the watermark covers it, the Variable mirrors the table."""
    check_safe(lab, where)
    # keyed table: one row per key, the source's current values
    src = {int(i): (n, u) for i, n, u in lab.sql(f"SELECT ID, NOTE, UPDATED_AT FROM {DB}.S.MERGE_SRC")}
    got = {int(r["id"]): (r["note"], r["updated_at"]) for r in lake_rows(lab, "merge")}
    missing = sorted(set(src) - set(got))
    extra = sorted(set(got) - set(src))
    stale = sorted(k for k in set(src) & set(got) if src[k] != got[k])
    assert not (missing or extra or stale), (
        f"{where}: keyed table differs from the source: missing {missing[:10]}, extra {extra[:10]}, "
        f"stale {[(k, got[k], src[k]) for k in stale[:5]]}"
    )
    wm, snap_id = table_watermark(lab, "merge")
    assert wm is not None
    newest = max(u for _, u in src.values())
    assert newest <= datetime.fromisoformat(wm), f"{where}: source row at {newest} is past the watermark {wm}"
    assert last_high["merge"] is not None
    assert datetime.fromisoformat(wm) <= datetime.fromisoformat(last_high["merge"]), (
        f"{where}: watermark {wm} passed the last planned high {last_high['merge']}"
    )
    check_mirror(lab, "merge", wm, snap_id, where)

    # append table: every current source row is there (duplicates and invented rows: check_safe)
    a_src = {(int(i), int(s), n) for i, s, n in lab.sql(f"SELECT ID, SEQ, NOTE FROM {DB}.S.APPEND_SRC")}
    a_rows = {(int(r["id"]), int(r["seq"]), r["note"]) for r in lake_rows(lab, "append")}
    absent = sorted(a_src - a_rows)
    assert not absent, f"{where}: append table lacks current source rows {absent[:10]}"
    a_wm, a_snap = table_watermark(lab, "append")
    top = max(s for _, s, _ in a_src)
    assert a_wm is not None and int(a_wm) == top, f"{where}: append watermark {a_wm}, source's largest seq {top}"
    check_mirror(lab, "append", a_wm, a_snap, where)


def check_mirror(lab: Lab, table: str, wm: str | None, snap_id: int | None, where: str) -> None:
    raw = lab.variables.get(variable_key(lab, table))
    assert raw is not None, f"{where}: no Variable for {table}"
    mirror = json.loads(raw)
    assert (mirror["watermark"], mirror["snapshot_id"]) == (wm, snap_id), (
        f"{where}: Variable of {table} says {mirror}, the table watermark {wm} in snapshot {snap_id}"
    )


# -- the test --------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(1800)  # a loaded machine runs the object-storage lakes several times slower
@pytest.mark.parametrize("lake", CHAOS_LAKES, indirect=True)
def test_sigkill_at_random_moments_never_loses_or_duplicates_a_row(lab: Lab) -> None:
    rng = random.Random(SEED)
    backend = lab.lake.backend
    iterations = ITERATIONS if backend is LakeBackend.FILE_SQLITE else LAKE_ITERATIONS
    log: list[str] = [f"chaos on {backend.value}: seed {SEED}, at least {iterations} iterations and {MIN_KILLS} kills"]
    last_high: dict[str, str | None] = {"merge": None, "append": None}

    def clean(table: str, tag: str) -> RunRecord:
        r = dag_run(lab, table, f"clean__{tag}__{table}")
        last_high[table] = r.planned_high or last_high[table]
        return r

    # Time clean runs first: the first load, then two runs with new and updated rows (what each iteration does).
    # The span starts as their mean; every run that ends before its kill time pulls it halfway to its own length
    # (the machine is shared, and its speed drifts during the test).
    t_setup = time.monotonic()
    mutate(lab, rng, 0)
    span: dict[str, float] = {"merge": 0.0, "append": 0.0}
    commit_span: dict[str, float] = {"merge": 0.0, "append": 0.0}
    both(lambda table: clean(table, "first"))
    for n in (1, 2):
        mutate(lab, rng, 0)
        for table, r in both(lambda table, n=n: clean(table, f"timed{n}")).items():
            span[table] += r.seconds / 2
            commit_span[table] = max(commit_span[table], (r.commit_ms or 0) / 1000)
    check(lab, last_high, "after the timed clean runs")
    log.append(
        f"setup {time.monotonic() - t_setup:.1f} s; clean run span: "
        + ", ".join(f"{t} {span[t] * 1000:.0f} ms (commit {commit_span[t] * 1000:.0f} ms)" for t in span)
    )

    landed: Counter[str] = Counter()
    relative: Counter[str] = Counter()
    started = time.monotonic()
    kills = 0
    it = 0
    try:
        # At least `iterations`, and on until MIN_KILLS runs were really killed (a run may end before its kill).
        while it < iterations or (kills < MIN_KILLS and it < MAX_ITERATIONS):
            it += 1
            what = mutate(lab, rng, it)
            # Every draw first (in table order: the seed replays), then both tables' runs side by side.
            draws: dict[str, tuple[float, bool, float | None]] = {}
            for table in ("merge", "append"):
                kill_after = rng.uniform(0, span[table])
                retry = rng.random() < 0.5
                # A commit is a few percent of a run: one run in three aims its kill at the commit instead, over twice
                # its length, so about half land inside it and half just after it, while the load still runs (its
                # retry must then find the commit and append nothing).
                # Those runs are always retried: a retry after a commit that landed is the
                # case that must append nothing.
                in_commit = rng.uniform(0, 2 * commit_span[table]) if rng.random() < AIM_AT_COMMIT else None
                draws[table] = (kill_after, retry or in_commit is not None, in_commit)

            def chaos_run(table: str, it: int = it, draws: dict[str, Any] = draws) -> RunRecord:
                kill_after, retry, in_commit = draws[table]
                return dag_run(
                    lab,
                    table,
                    f"chaos__{it}__{table}",
                    kill_after=None if in_commit is not None else kill_after,
                    retry=retry,
                    kill_in_commit=in_commit,
                )

            for table, r in both(chaos_run).items():
                kill_after, retry, in_commit = draws[table]
                if r.planned_high and not (r.kill_step == "plan" and not r.retried):
                    last_high[table] = r.planned_high
                if r.kill_ms is not None:
                    kills += 1
                    aim = f"aimed {in_commit * 1000:.0f} ms after the commit started, " if in_commit is not None else ""
                    where = f"{aim}kill at {r.kill_ms:5.0f} ms in {r.kill_step}: {r.kill_phase} [{r.kill_relative}]"
                    where += ", task retried" if r.retried else ", run failed"
                elif in_commit is not None:
                    where = (
                        f"no kill: aimed {in_commit * 1000:.0f} ms after a commit start, "
                        "the run had none or ended first"
                    )
                else:
                    where = f"no kill: run ended at {r.seconds * 1000:.0f} ms, before {kill_after * 1000:.0f} ms"
                    span[table] = (span[table] + r.seconds) / 2
                relative[r.kill_relative or "after the run (no kill)"] += 1
                landed[f"{r.kill_step}: {r.kill_phase}" if r.kill_step else "(no kill)"] += 1
                log.append(
                    f"iter {it:2d} {table:6s} [{what}] {where}" + (f" (load {r.load_status})" if r.load_status else "")
                )
            check_safe(lab, f"iteration {it}")
        both(lambda table: clean(table, f"{it}a"))
        both(lambda table: clean(table, f"{it}b"))
        check(lab, last_high, f"two clean runs after iteration {it}")
        log.append(f"iter {it:2d} two clean runs: the lake equals the source")
        assert kills >= MIN_KILLS, f"only {kills} runs were killed in {it} iterations (the loop ends runs early?)"
    finally:
        log.append(
            f"chaos phase on {backend.value} took {time.monotonic() - started:.1f} s, {it} iterations, "
            f"{kills} kills; final span " + ", ".join(f"{t} {span[t] * 1000:.0f} ms" for t in span) + "; kills landed:"
        )
        log += [f"  {n:3d} × {k}" for k, n in sorted(relative.items())]
        log.append("by step and phase:")
        log += [f"  {n:3d} × {k}" for k, n in sorted(landed.items())]
        print("\n".join(log))
