"""Maintenance under fire: compaction, expiry, orphan removal and rollbacks race loads, merges and mapped slices.

Two keyed tables load the same Snowflake source (inserts, and updates that move
the cursor) on merge-on-read, so every merge leaves position-delete files:

* ``merge`` — the incremental DAG (plan → load → publish);
* ``sliced`` — the mapped-slices DAG (plan → plan_slices → load_slice… → commit
  → publish); in about one iteration in four its commit is held back: the
  slices write their staged files in one iteration and the commit comes in the
  next, after the orphan sweep ran with those files older than its age; every
  third iteration (or the next one free of a held commit) the run fails after
  its slices wrote, before its commit (its staging is abandoned once the next
  run commits).

Each iteration starts, side by side, a run of each DAG and a maintenance DAG
run: a scheduled one (compact → expire snapshots → remove orphan files) on one
of the tables, or, every third iteration, a manual rollback ``--before-run`` of
one of the last three merge runs still in the table's history.
Each process (every task step is a real operator in its own process, see
``chaos_tasks``) may be SIGKILLed at a random moment; a killed step is retried
as Airflow retries a task, or its run fails. A step that fails by itself (a
commit that lost a race, a rollback planned on a head that moved, a commit
refusing staged files the sweep took) is retried up to twice, then its run
fails; what it said is counted and printed.

Orphan removal runs "at the floor": ``orphan_age`` is the floor's role scaled
to this test — longer than any write in flight here (a step takes seconds),
shorter than the time between iterations, so the files of killed runs are
swept while staged slices and live files must be kept (``allow_short_orphan_age``
is the override the floor offers for this). Expiry keeps 3 snapshots, with a
1-second retention.

After every iteration, one clean run of each DAG (not while a slice commit is
held back for the sliced table), then:

* every snapshot in each table's history reads, every file it names present;
* the lake equals the source: one row per key, the source's current values;
* the table's watermark covers the source, and the Variable mirrors the table's
  state (same watermark, same snapshot).

After the last iteration, once the orphan age has passed, a final sweep of the
sliced table must leave no staging of a run that can no longer commit (killed
runs overtaken by later commits, commits that died before cleaning up): only
the held slice commit's, if one is waiting. The staging bytes after each
iteration and after the final sweep are printed.

Seeded: ``SNOWBERG_MAINT_CHAOS_SEED`` (default 20261202). At least
``SNOWBERG_MAINT_CHAOS_ITERATIONS`` iterations (default 4) and on until
``SNOWBERG_MAINT_CHAOS_KILLS`` processes were really killed (default 20).
``SNOWBERG_MAINT_CHAOS_LAKES`` lists the lake backends (default ``file_sqlite,s3_postgres``:
the embedded lake and S3 with a PostgreSQL catalog; add ``glue_s3`` for Glue). ``pytest -s`` prints every
iteration's runs, kills and errors.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
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

SEED = int(os.environ.get("SNOWBERG_MAINT_CHAOS_SEED", "20261202"))
ITERATIONS = int(os.environ.get("SNOWBERG_MAINT_CHAOS_ITERATIONS", "4"))
MIN_KILLS = int(os.environ.get("SNOWBERG_MAINT_CHAOS_KILLS", "20"))
LAKES = [
    LakeBackend(b) for b in os.environ.get("SNOWBERG_MAINT_CHAOS_LAKES", "file_sqlite,s3_postgres").split(",") if b
]
MAX_ITERATIONS = 4 * max(ITERATIONS, MIN_KILLS)
ORPHAN_AGE_S = 8  # the floor's role scaled to this test (see the module doc)
KILL_SHARE = 0.9  # share of processes given a kill time (uniform over their run's span)
ROLLBACK_EVERY = 3  # every third iteration's maintenance run is a manual rollback instead of the scheduled steps
HOLD_SLICE_COMMIT = 0.25  # share of sliced runs whose commit comes in the next iteration, after a sweep
# Every third iteration (or the next one whose sliced run is free) a sliced run writes its slices and fails before
# its commit (a commit task failing past its retries): its staging is abandoned once the next run commits, and a
# later sweep must remove it.
ABANDON_EVERY = 3
TASK_RETRIES = 2  # a step that fails by itself is retried this many times, as Airflow's retries do
# What a step may fail with by itself here: a commit that lost a race to another writer (pyiceberg's
# requirement check), a load whose planned base watermark a rollback moved (re-plan), a rollback refused
# (its target expired, or the head moved under it). Anything else — a missing file above all — fails the test.
EXPECTED_ERRORS = (
    "pyiceberg.exceptions.CommitFailedException",
    "snowberg.iceberg.state.ConcurrentCommitError",
    "snowberg.iceberg.rollback.RollbackError",
)
DB = "MCHAOS"
NOW = "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)"


def entries(lake: Lake) -> dict[str, dict[str, Any]]:
    common: dict[str, Any] = {
        "snowflake_conn_id": "chaos_snowflake",
        "catalog": lake.conn_id,
        "source": {"table": f"{DB}.S.SRC"},
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "maintenance": {
            "snapshot_retention": "1s",
            "min_snapshots": 3,
            "allow_short_orphan_age": True,
            "orphan_age": f"{ORPHAN_AGE_S}s",
        },
    }
    return {
        "merge": {"name": "mchaos_merge", "target": f"{lake.namespace}.merge_t", **common},
        "sliced": {"name": "mchaos_sliced", "target": f"{lake.namespace}.sliced_t", **common},
    }


class RunStopped(Exception):
    """A DAG run that ended failed: a step killed and not retried, or failing past its retries."""


@dataclass(kw_only=True)
class Lab:
    server: FakesnowServer
    conn: Any
    lake: Lake
    tmp: Path
    env: dict[str, str]
    configs: dict[str, dict[str, Any]]
    variables: ct.JsonFileVariables
    next_id: int = 1
    counter: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sql(self, text: str) -> list[tuple[Any, ...]]:
        cur = self.conn.cursor()
        try:
            cur.execute(text)
            return list(cur.fetchall()) if cur.description else []
        finally:
            cur.close()

    def table(self, name: str) -> Any:
        return self.lake.catalog().load_table(self.configs[name]["target"])

    def spec(self, step: str, table: str, run_id: str, **kw: Any) -> ct.StepSpec:
        with self.lock:
            self.counter += 1
            n = self.counter
        d = self.tmp / "steps"
        d.mkdir(exist_ok=True)
        return ct.StepSpec(
            step=step,
            table_config=self.configs[table],
            run_id=run_id,
            env=self.env,
            variables_path=str(self.variables.path),
            trace_path=str(d / f"{n}.trace"),
            result_path=str(d / f"{n}.json"),
            **kw,
        )


@pytest.fixture
def lab(fakesnow_server: FakesnowServer, lake: Lake, tmp_path: Path) -> Iterator[Lab]:
    conn = fakesnow_server.connect()
    env = {
        "AIRFLOW_CONN_CHAOS_SNOWFLAKE": snowflake_connection_uri(fakesnow_server.port, database=DB),
        lake.env_var: lake.connection_json(),
        # the lake fixture's scrubbed AWS settings: chaos_tasks.run_step drops every other AWS_* variable
        **{k: v for k, v in os.environ.items() if k.startswith("AWS_")},
    }
    lab = Lab(
        server=fakesnow_server,
        conn=conn,
        lake=lake,
        tmp=tmp_path,
        env=env,
        configs=entries(lake),
        variables=ct.JsonFileVariables(tmp_path / "variables.json"),
    )
    lab.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    lab.sql(f"CREATE SCHEMA IF NOT EXISTS {DB}.S")
    lab.sql(f"CREATE OR REPLACE TABLE {DB}.S.SRC (ID NUMBER(38,0), NOTE VARCHAR(40), UPDATED_AT TIMESTAMP_NTZ(9))")
    try:
        yield lab
    finally:
        conn.close()


def mutate(lab: Lab, rng: random.Random, it: int) -> str:
    ids = [r[0] for r in lab.sql(f"SELECT ID FROM {DB}.S.SRC")]
    n_ins, n_upd = rng.randint(5, 40), min(len(ids), rng.randint(0, 20))
    new = range(lab.next_id, lab.next_id + n_ins)
    lab.next_id += n_ins
    lab.sql(f"INSERT INTO {DB}.S.SRC VALUES " + ", ".join(f"({i}, 'n{it}', {NOW})" for i in new))
    if n_upd:
        upd = sorted(rng.sample(ids, n_upd))
        lab.sql(f"UPDATE {DB}.S.SRC SET NOTE = 'u{it}', UPDATED_AT = {NOW} WHERE ID IN ({', '.join(map(str, upd))})")
    return f"+{n_ins} ~{n_upd}"


# -- runs: each a chain of steps, each step a process that may be killed ------------------------------------------


@dataclass(kw_only=True)
class Run:
    """One DAG run in flight: when to kill it (seconds after its start, or None) and what happened."""

    lab: Lab
    table: str
    run_id: str
    kill_after: float | None
    retry_killed: bool
    t0: float = 0.0
    kill_at: float | None = None  # the kill moment (monotonic seconds), set when the run starts
    kills: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the maintenance steps did
    staged_kept: int = 0  # the sweep's count of staged files it kept
    staging_removed: int = 0  # abandoned staging folders its sweep removed
    outcome: str = "ok"

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.kill_at = None if self.kill_after is None else self.t0 + self.kill_after

    def step(self, step: str, **kw: Any) -> Any:
        """Run one step; kill it if the run's kill moment falls inside it; retry as Airflow would."""
        attempts = 0
        while True:
            spec = self.lab.spec(step, self.table, self.run_id, **kw)
            deadline, self.kill_at = self.kill_at, None  # one kill per run at most
            out = ct.finish_step(spec, ct.start_step(spec), self.t0, deadline)
            if out.killed:
                self.kills.append(f"{step}: {phase(spec)}")
                if not self.retry_killed:
                    raise RunStopped(f"{step} killed")
                continue
            if deadline is not None:
                self.kill_at = deadline  # not reached in this step: it stays for the next one
            if out.exitcode == 0:
                return out.result
            error = out.error or f"exit code {out.exitcode}"
            if "AirflowSkipException" in error:
                return None
            self.errors.append(f"{step}: {error.splitlines()[0][:300]}")
            attempts += 1
            if attempts > TASK_RETRIES:
                raise RunStopped(f"{step} failed {attempts} times")


def phase(spec: ct.StepSpec) -> str:
    events = [e for _, e in ct.Trace(spec.trace_path).events()]
    return events[-1] if events else "process starting"


def load_run(r: Run) -> None:
    window = r.step("plan")
    r.step("load", window=window)
    r.step("publish", window=window)


def slice_writes(r: Run) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    window = r.step("plan")
    tasks = r.step("slice_plan", window=window) or []
    results = [r.step("slice_load", slice_task=t) for t in tasks]
    return window, [x for x in results if x]


def slice_finish(r: Run, window: dict[str, Any], results: list[dict[str, Any]]) -> None:
    r.step("slice_commit", window=window, slice_results=results)
    r.step("publish", window=window)


def note_sweep(r: Run, out: dict[str, Any]) -> None:
    """Note what a sweep did; count the abandoned staging folders it removed."""
    removed = sum(1 for s in out["staging"] if s["removed"])
    r.staging_removed += removed
    r.notes.append(
        f"swept {out['deleted']} orphans, kept {out['staged_kept']} staged, removed {removed} abandoned staging"
    )


def sweep(r: Run) -> None:
    out = r.step("remove_orphan_files")
    note_sweep(r, out)
    r.staged_kept = int(out["staged_kept"])


def maintenance_run(r: Run, params: dict[str, Any] | None) -> None:
    if params is not None:
        out = r.step("manual", params=params) or {}
        plan = out.get("rollback") or {}
        r.notes.append(
            f"rolled back {len(plan.get('undone') or [])} snapshot(s), watermark now {plan.get('watermark_after')}"
        )
        return
    for step in ("compact", "expire_snapshots", "remove_orphan_files"):
        out = r.step(step)
        if out is None:
            continue
        if step == "compact":
            r.notes.append(
                f"compact {out['status']}: {out['rewritten_files']} data files, "
                f"{out['delete_files_removed']} delete files"
            )
        elif step == "expire_snapshots":
            r.notes.append(f"expired {len(out['expired'])}")
        else:
            note_sweep(r, out)


def run_safely(r: Run, body: Any) -> Run:
    r.start()
    try:
        body(r)
    except RunStopped as exc:
        r.outcome = f"failed ({exc})"
    return r


# -- checks ----------------------------------------------------------------------------------------------------------


def every_snapshot_reads(lab: Lab, name: str, where: str) -> int:
    """Read each snapshot in the table's history: every manifest, data and delete file it names is there."""
    table = lab.table(name)
    for snap in table.metadata.snapshots:
        try:
            table.scan(snapshot_id=snap.snapshot_id).to_arrow()
        except (FileNotFoundError, OSError) as exc:
            raise AssertionError(
                f"{where}: {name} snapshot {snap.snapshot_id} ({snap.summary.operation if snap.summary else '?'}, "
                f"{dict(snap.summary.additional_properties) if snap.summary else {}}) does not read: {exc}"
            ) from exc
    return len(table.metadata.snapshots)


def lake_equals_source(lab: Lab, name: str, where: str) -> None:
    from snowberg.iceberg.state import read_state

    src = {int(i): (n, u) for i, n, u in lab.sql(f"SELECT ID, NOTE, UPDATED_AT FROM {DB}.S.SRC")}
    table = lab.table(name)
    rows = table.scan().to_arrow().to_pylist()
    dup = [k for k, c in Counter(int(r["id"]) for r in rows).items() if c > 1]
    assert not dup, f"{where}: {name} holds keys more than once: {dup[:10]}"
    got = {int(r["id"]): (r["note"], r["updated_at"]) for r in rows}
    missing = sorted(set(src) - set(got))
    extra = sorted(set(got) - set(src))
    stale = sorted(k for k in set(src) & set(got) if src[k] != got[k])
    assert not (missing or extra or stale), (
        f"{where}: {name} differs from the source: missing {missing[:10]}, extra {extra[:10]}, "
        f"stale {[(k, got[k], src[k]) for k in stale[:5]]}"
    )
    st = read_state(table)
    assert st is not None and st.watermark is not None, f"{where}: {name} carries no state"
    newest = max(u for _, u in src.values())
    assert newest <= datetime.fromisoformat(st.watermark), f"{where}: {name}: {newest} past watermark {st.watermark}"
    ns, tname = lab.configs[name]["target"].split(".")
    raw = lab.variables.get(f"snowberg__{ns}__{tname}__watermark")
    assert raw is not None, f"{where}: no Variable for {name}"
    mirror = json.loads(raw)
    assert (mirror["watermark"], mirror["snapshot_id"]) == (st.watermark, st.snapshot_id), (
        f"{where}: the Variable of {name} says {mirror}, the table's state {st.watermark} in {st.snapshot_id}"
    )


def staging_footprint(lab: Lab) -> tuple[int, int, int]:
    """The sliced table's staging: (staged runs, abandoned ones, bytes of their folders and of the unreferenced data
    files their staging manifests name)."""
    from snowberg.iceberg import maintenance as m
    from snowberg.iceberg import staging

    table = lab.table("sliced")
    listed = list(staging.list_files(table.io, table.location()))
    runs = staging.staged_runs(table, listed)
    size = {staging.path_key(f.path): f.size or 0 for f in listed}
    named = set().union(*(r.named for r in runs)) - m.referenced_files(table)
    total = sum(r.bytes for r in runs) + sum(size.get(k, 0) for k in named)
    return len(runs), sum(r.judgement.verdict.abandoned for r in runs), total


def recent_merge_runs(lab: Lab) -> list[tuple[str, str]]:
    """(run id, DAG id) of the merge table's committed load runs still in its history, oldest first."""
    from snowberg.iceberg import state

    table = lab.table("merge")
    out = []
    for snap in reversed(list(state.ancestors(table))):
        p = snap.summary.additional_properties if snap.summary else {}
        if p.get(state.RUN_ID) and p.get(state.COMMIT_ID) and not p.get(state.MAINTENANCE):
            pair = (p[state.RUN_ID], p.get(state.DAG_ID, ""))
            if pair not in out:
                out.append(pair)
    return out


# -- the test --------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(1800)  # a loaded machine runs it several times slower than CI
@pytest.mark.parametrize("lake", LAKES, indirect=True)
def test_maintenance_and_rollbacks_under_sigkill_never_lose_or_corrupt(lab: Lab) -> None:
    rng = random.Random(SEED)
    log: list[str] = [f"maintenance chaos on {lab.lake.backend.value}: seed {SEED}"]
    errors: Counter[str] = Counter()
    kinds: Counter[str] = Counter()

    # Two clean runs of each DAG: the tables exist, and each run's span is measured (kills are drawn over it).
    mutate(lab, rng, 0)
    span = {"merge": 0.0, "sliced": 0.0, "maintenance": 0.0}
    for n in range(2):
        if n:
            mutate(lab, rng, 0)
        for name, body in (("merge", load_run), ("sliced", lambda r: slice_finish(r, *slice_writes(r)))):
            r = run_safely(Run(lab=lab, table=name, run_id=f"setup{n}", kill_after=None, retry_killed=True), body)
            assert r.outcome == "ok" and not r.errors, (name, r.outcome, r.errors)
            span[name] = time.monotonic() - r.t0
    r = run_safely(
        Run(lab=lab, table="merge", run_id="setup_m", kill_after=None, retry_killed=True),
        lambda r: maintenance_run(r, None),
    )
    assert r.outcome == "ok" and not r.errors, r.errors
    span["maintenance"] = time.monotonic() - r.t0
    log.append("spans: " + ", ".join(f"{k} {v:.1f} s" for k, v in span.items()))

    held: tuple[str, dict[str, Any], list[dict[str, Any]], float] | None = None  # run id, window, results, when
    footprints: list[int] = []  # bytes of the sliced table's staging after each iteration
    abandon_due = False
    abandoned_runs = staging_removed = 0
    kills = 0
    it = 0
    started = time.monotonic()
    try:
        while it < ITERATIONS or (kills < MIN_KILLS and it < MAX_ITERATIONS):
            it += 1
            what = mutate(lab, rng, it)
            abandon_due = abandon_due or it % ABANDON_EVERY == 0

            def draw(name: str) -> tuple[float | None, bool]:
                at = rng.uniform(0, span[name]) if rng.random() < KILL_SHARE else None
                return at, rng.random() < 0.5

            runs: list[tuple[Run, Any]] = []
            at, retry = draw("merge")
            runs.append((Run(lab=lab, table="merge", run_id=f"chaos{it}", kill_after=at, retry_killed=retry), load_run))

            commit_held = held
            if commit_held is not None:
                # The held slice commit, after a sweep that ran with its staged files older than the orphan age.
                run_id, window, results, written = commit_held
                time.sleep(max(0.0, written + ORPHAN_AGE_S + 1 - time.monotonic()))
                swept = run_safely(
                    Run(lab=lab, table="sliced", run_id=f"sweep{it}", kill_after=None, retry_killed=True), sweep
                )
                assert swept.outcome == "ok", swept.errors
                staging_removed += swept.staging_removed
                assert swept.staged_kept > 0, f"iteration {it}: the sweep found no staged file of {run_id} to keep"
                log.append(f"iter {it:2d} before the held commit of {run_id}: {'; '.join(swept.notes)}")
                at, retry = draw("sliced")
                runs.append(
                    (
                        Run(lab=lab, table="sliced", run_id=run_id, kill_after=at, retry_killed=True),
                        lambda r, w=window, rs=results: slice_finish(r, w, rs),
                    )
                )
                held = None
                sliced_what = f"held commit of {run_id}"
            elif rng.random() < HOLD_SLICE_COMMIT:
                sliced_what = "slices written, commit held"

                def hold(r: Run) -> None:
                    nonlocal held
                    window, results = slice_writes(r)
                    held = (r.run_id, window, results, time.monotonic())

                runs.append(
                    (Run(lab=lab, table="sliced", run_id=f"chaos{it}", kill_after=None, retry_killed=True), hold)
                )
            elif abandon_due:
                abandon_due = False
                abandoned_runs += 1
                sliced_what = "slices written, the run fails before its commit"
                runs.append(
                    (
                        Run(lab=lab, table="sliced", run_id=f"chaos{it}", kill_after=None, retry_killed=True),
                        slice_writes,
                    )
                )
            else:
                sliced_what = "sliced run"
                at, retry = draw("sliced")
                runs.append(
                    (
                        Run(lab=lab, table="sliced", run_id=f"chaos{it}", kill_after=at, retry_killed=retry),
                        lambda r: slice_finish(r, *slice_writes(r)),
                    )
                )

            params = None
            candidates = recent_merge_runs(lab)[-3:]
            if candidates and it % ROLLBACK_EVERY == 2:
                run_id, dag_id = rng.choice(candidates)
                params = {"rollback_before_run": run_id, "rollback_dag_id": dag_id}
                m_table, m_what = "merge", f"rollback before {run_id}"
            else:
                m_table = rng.choice(["merge", "sliced"])
                m_what = f"maintenance of {m_table}"
            at, retry = draw("maintenance")
            runs.append(
                (
                    Run(lab=lab, table=m_table, run_id=f"maint{it}", kill_after=at, retry_killed=retry),
                    lambda r, p=params: maintenance_run(r, p),
                )
            )

            with ThreadPoolExecutor(max_workers=len(runs)) as pool:
                done = [f.result() for f in [pool.submit(run_safely, run, body) for run, body in runs]]
            if commit_held is not None:
                # Killed or not, the held commit must land: its staged files outlived the sweep.
                held_run = next(r for r in done if r.run_id == commit_held[0])
                assert held_run.outcome == "ok", f"iteration {it}: the held slice commit: {held_run.errors}"
            for r in done:
                kills += len(r.kills)
                staging_removed += r.staging_removed
                for e in r.errors:
                    errors[":".join(e.split(":")[:2])] += 1
                kinds.update(r.kills)
            log.append(
                f"iter {it:2d} [{what}] merge run, {sliced_what}, {m_what}: "
                + "; ".join(
                    f"{r.table}/{r.run_id} {r.outcome}"
                    + (f", killed in {', '.join(r.kills)}" if r.kills else "")
                    + (f", errors {r.errors}" if r.errors else "")
                    + (f" ({'; '.join(r.notes)})" if r.notes else "")
                    for r in done
                )
            )

            # Recovery: one clean run of each DAG (the sliced DAG waits while its commit is held), then the checks.
            clean: list[tuple[str, Any]] = [("merge", load_run)]
            if held is None:
                clean.append(("sliced", lambda r: slice_finish(r, *slice_writes(r))))
            for name, body in clean:
                r = run_safely(Run(lab=lab, table=name, run_id=f"clean{it}", kill_after=None, retry_killed=True), body)
                assert r.outcome == "ok" and not r.errors, f"iteration {it}: clean {name} run: {r.outcome} {r.errors}"
            where = f"after iteration {it}"
            counts = {name: every_snapshot_reads(lab, name, where) for name in ("merge", "sliced")}
            for name, _ in clean:
                lake_equals_source(lab, name, where)
            staged_runs, abandoned, staged_bytes = staging_footprint(lab)
            footprints.append(staged_bytes)
            log.append(
                f"iter {it:2d} checked: every snapshot reads ({counts}), "
                + ", ".join(name for name, _ in clean)
                + " equal the source, Variables mirror the state; sliced staging: "
                + f"{staged_runs} run(s), {abandoned} abandoned, {staged_bytes:,} bytes"
            )
        # Staging is bounded: once the orphan age has passed since the last commit, a sweep leaves only the
        # staging of a run that may still commit (the held slice commit, if one is waiting).
        time.sleep(ORPHAN_AGE_S + 1)
        final = run_safely(Run(lab=lab, table="sliced", run_id="final", kill_after=None, retry_killed=True), sweep)
        assert final.outcome == "ok", final.errors
        staging_removed += final.staging_removed
        staged_runs, abandoned, staged_bytes = staging_footprint(lab)
        log.append(
            f"staging of the sliced table: {abandoned_runs} run(s) failed after their slices wrote, "
            f"{staging_removed} abandoned staging folder(s) removed by sweeps; at most {max(footprints, default=0):,} "
            f"bytes after an iteration; after a final sweep {staged_runs} run(s), {abandoned} abandoned, "
            f"{staged_bytes:,} bytes ({'; '.join(final.notes)})"
        )
        assert abandoned == 0 and staged_runs == (1 if held is not None else 0), (staged_runs, abandoned)
        assert staging_removed >= abandoned_runs > 0, (abandoned_runs, staging_removed)
        assert kills >= MIN_KILLS, f"only {kills} processes were killed in {it} iterations"
        unexpected = sorted(e for e in errors if not any(x in e for x in EXPECTED_ERRORS))
        assert not unexpected, f"steps failed with errors no race explains: {unexpected}"
    finally:
        log.append(f"{it} iterations, {kills} kills in {time.monotonic() - started:.0f} s; kills landed in:")
        log += [f"  {n:3d} × {k}" for k, n in sorted(kinds.items())]
        log.append("steps that failed by themselves (then retried):")
        log += [f"  {n:3d} × {k}" for k, n in sorted(errors.items())]
        print("\n".join(log))
