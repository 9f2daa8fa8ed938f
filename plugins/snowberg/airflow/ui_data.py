"""What the snowberg page in the Airflow UI shows, per configured table, and which tables need attention.

Read from the sources of truth, kept for a short time (``[snowberg] ui_cache_seconds``):

* the lake table's metadata (no data file is read), through ``ui_lake.CatalogPool`` (each catalog
  opened once, tables read in parallel, a timeout per read): the last snowberg commit (rows and bytes
  it added, snapshot, committing run), the live rows (``iceberg.deletes.live_rows``), the watermark,
  freshness judged as the table's own check judges it (``snowberg.checks.freshness``), and the last
  ``HISTORY`` snowberg commits for the chart (rows per run; the watermark's age at each commit:
  commit time minus the watermark it carried);
* Airflow's metadata database, in a fixed number of queries (``ui_db``): the latest run of the load
  DAG whatever its state (a failed or retrying load shows even while the lake still looks fresh), the
  committing run (the whole run's duration beside the commit task's), the latest run of the checks
  DAG (each check's state, time, result and reason), the Variable mirror, the freshness proof and
  the triggerer's watch record.

A piece that cannot be read becomes an ``errors`` entry, and an ``attention`` reason, on its table
only: one broken table does not hide the others.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import quote

from snowberg.airflow.ui_lake import CatalogPool, CatalogUnreachable
from snowberg.config.table_config import TableConfig
from snowberg.core.attempts import split_attempt

log = logging.getLogger(__name__)

HISTORY = 20
# The task that commits a load, per DAG shape (single task, scale-out, push-down unload, stream).
COMMIT_TASKS = ("load", "commit", "unload")
# The task that committed a small window itself (``inline_load_rows``), its load task skipped.
INLINE_COMMIT_TASK = "plan"
# XCom keys a check's result is pushed under (its return value; the result a failing check pushed first).
RESULT_KEYS = ("return_value", "result")
# Defaults of the page's settings (``[snowberg]`` section of Airflow's config, or AIRFLOW__SNOWBERG__*).
CACHE_SECONDS = 30.0
CATALOG_TIMEOUT_SECONDS = 3.0


def tables_config_path() -> Path:
    """The tables config the DAG files read (``SNOWBERG_TABLES_CONFIG``, else ``include/tables.yaml`` by the DAGs)."""
    env = os.environ.get("SNOWBERG_TABLES_CONFIG")
    if env:
        return Path(env)
    from airflow.configuration import conf

    return Path(conf.get("core", "dags_folder")).resolve().parent / "include" / "tables.yaml"


def page_setting(key: str, default: float) -> float:
    """A number from ``[snowberg]`` in Airflow's config (``AIRFLOW__SNOWBERG__<KEY>``), else ``default``."""
    from airflow.configuration import conf

    return conf.getfloat("snowberg", key, fallback=default)


@dataclass(kw_only=True)
class RunPoint:
    """One snowberg commit, for the chart."""

    snapshot_id: int
    run_id: str | None
    mode: str | None
    committed_at: str
    rows: int
    watermark_age_seconds: float | None  # commit time − the watermark it carried (time-like cursors only)


class CheckOutcome(StrEnum):
    """What a check task's run says about the table (its Airflow state alone does not: a skip is no pass)."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "could not run"
    NOT_FINISHED = "not finished"


class Attention(StrEnum):
    """Why a table needs someone's attention, most urgent first (the page's order)."""

    LOAD_FAILED = "load failed"
    LOAD_RETRYING = "load retrying"
    CATALOG_UNREACHABLE = "catalog unreachable"
    TABLE_MISSING = "table missing"
    CHECK_FAILED = "check failed"  # shown as "check failed: <task>"
    STALE = "stale"
    WATCH_FAILING = "watch failing"
    UNREADABLE = "status unreadable"


_RANK = {a: i for i, a in enumerate(Attention)}

# Task states in which the check did not look at the table.
_NOT_RUN_STATES = frozenset({"skipped", "upstream_failed", "removed"})


def check_outcome(state: str | None, result: Any) -> tuple[CheckOutcome, str | None]:
    """(outcome, reason) of a check task from its state and the result it pushed.

    A check that could not compare (no lake table, nothing committed, an
    inconclusive comparison) pushes ``{"status": "not_run", "reason": ...}`` or
    a report with ``inconclusive`` and a ``note``, and is skipped: shown as
    "could not run" with that reason, whatever the task's state. A failed
    check's reason is read from the result it pushed (``failure_reason``).
    """
    from snowberg.airflow.operators.volume import NOT_RUN

    if isinstance(result, dict):
        if result.get("status") == NOT_RUN:
            return CheckOutcome.NOT_RUN, str(result.get("reason") or "") or None
        if result.get("inconclusive"):
            return CheckOutcome.NOT_RUN, "inconclusive: " + str(result.get("note") or "no note")
    if state in _NOT_RUN_STATES:
        return CheckOutcome.NOT_RUN, f"task {state}"
    if state == "success":
        return CheckOutcome.PASSED, None
    if state == "failed":
        return CheckOutcome.FAILED, failure_reason(result)
    return CheckOutcome.NOT_FINISHED, None


def failure_reason(result: Any) -> str:
    """Why a check failed, in words, from the result it pushed (counts, differing days and keys, reasons)."""
    if not isinstance(result, dict):
        return "no result recorded: see the task log"
    parts: list[str] = []
    if result.get("error"):
        parts.append(str(result["error"]))
    if isinstance(result.get("source_rows"), int) and isinstance(result.get("lake_rows"), int):
        parts.append(f"source {result['source_rows']:,} rows, lake {result['lake_rows']:,} rows")
    days = result.get("differing_days") or {}
    if isinstance(days, dict) and days:
        shown = [f"{d or '(all)'}: source {v.get('source')}, lake {v.get('lake')}" for d, v in list(days.items())[:3]]
        parts.append(f"{len(days)} differing day(s) ({'; '.join(shown)}{'; …' if len(days) > 3 else ''})")
    diffs = result.get("differences") or []
    if isinstance(diffs, list) and diffs:
        keys = [f"{d.get('key')} {d.get('kind')}" for d in diffs[:5] if isinstance(d, dict)]
        parts.append(f"{len(diffs)} differing key(s): {', '.join(keys)}{', …' if len(diffs) > 5 else ''}")
    for key in ("reasons", "problems"):
        if isinstance(result.get(key), list) and result[key]:
            parts.append("; ".join(str(r) for r in result[key]))
    anomaly = result.get("anomaly")
    if isinstance(anomaly, dict) and anomaly.get("anomalous"):
        parts.append(str(anomaly.get("reason")))
    if result.get("advice"):
        parts.append(f"what to do: {result['advice']}")
    return "; ".join(parts) or "failed: see the task log"


def task_url(dag_id: str, run_id: str, task_id: str | None = None, *, root: str = "") -> str:
    """The Airflow 3 UI page of a run (or of a task instance: its log), relative to the UI's root.

    Relative, never built from ``[api] base_url`` (unset by default, then ``localhost``): the link
    works on whatever host and path the page itself was opened on.
    """
    url = f"{root}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"
    return url if task_id is None else f"{url}/tasks/{quote(task_id, safe='')}"


@dataclass(kw_only=True)
class RunInfo:
    """A DAG run, as the page links it."""

    run_id: str
    state: str | None
    start_date: str | None
    end_date: str | None
    url: str
    duration_seconds: float | None = None  # the whole run (end − start; so far, while it runs)
    retrying_task: str | None = None  # a task waiting for or in its next try


@dataclass(kw_only=True)
class CheckTask:
    task_id: str
    state: str | None
    end_date: str | None  # the check's time: when its task finished
    url: str | None = None  # its task instance page (the log)
    result: Any = None
    outcome: CheckOutcome = CheckOutcome.NOT_FINISHED
    reason: str | None = None  # why a check failed or could not run


@dataclass(kw_only=True)
class TableStatus:
    name: str
    dag_id: str
    checks_dag_id: str
    source: str
    target: str
    catalog: str
    as_of: str | None = None  # when this status was read
    attention: str | None = None  # None: all is well; else an ``Attention`` (``check failed: <task>``)
    attention_detail: str | None = None  # the reason in words
    last_load_run: RunInfo | None = None
    exists: bool | None = None  # None: not known (the catalog could not be read)
    snapshot_id: int | None = None
    run_id: str | None = None  # the run that committed the last snowberg snapshot
    committing_run: RunInfo | None = None
    mode: str | None = None
    committed_at: str | None = None
    rows: int | None = None  # rows the last load committed
    bytes: int | None = None  # bytes of data files it added
    live_rows: int | None = None  # rows the table holds now
    load_task_seconds: float | None = None  # the committing task(s) of that run
    watermark: str | None = None
    # The masking/row access policies the current state's load allowed (on_policy: allow), from its summary.
    policies_allowed: str | None = None
    watermark_kind: str | None = None
    watermark_zone: str | None = None  # the zone of a wall-clock (NTZ, DATE) watermark
    mirror: str | None = None
    mirror_in_sync: bool | None = None
    sla: str | None = None
    sla_seconds: float | None = None
    freshness_measure: str | None = None
    fresh: bool | None = None
    freshness_since: str | None = None  # the instant the judged age runs from
    freshness_age_seconds: float | None = None  # the age judged against the SLA (on ``freshness_measure``)
    watermark_lag_seconds: float | None = None
    max_watermark_lag_seconds: float | None = None
    freshness_reasons: list[str] = field(default_factory=list)
    checks_run: RunInfo | None = None
    checks: list[CheckTask] = field(default_factory=list)
    watch: dict[str, Any] | None = None
    history: list[RunPoint] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    catalog_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def memo(self, key: str, make: Callable[[], str]) -> str:
        """``make()`` once per status (its JSON, its HTML): a repeat view of cached statuses renders nothing again."""
        kept: dict[str, str] = self.__dict__.setdefault("_memo", {})  # not a field: not in ``to_dict``
        if key not in kept:
            kept[key] = make()
        return kept[key]

    def to_json(self) -> str:
        return self.memo("json", lambda: json.dumps(self.to_dict(), default=str))


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def _iso_dt(dt: datetime | None) -> str | None:
    if dt is None:
        return None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).astimezone(UTC).isoformat(timespec="seconds")


def history(table: Any, limit: int = HISTORY) -> list[RunPoint]:
    """The last ``limit`` snowberg commits on main, oldest first."""
    from snowberg.checks.freshness import watermark_time
    from snowberg.iceberg import state

    out: list[RunPoint] = []
    for snap in state.run_commits(table):
        props = dict(snap.summary.additional_properties) if snap.summary else {}
        lag = None
        try:
            wt = watermark_time(props.get(state.CURSOR_KIND), props.get(state.WATERMARK) or None)
        except ValueError:
            wt = None
        if wt is not None:
            lag = round(snap.timestamp_ms / 1000 - wt.timestamp(), 1)
        out.append(
            RunPoint(
                snapshot_id=snap.snapshot_id,
                run_id=props.get(state.RUN_ID),
                mode=props.get(state.MODE),
                committed_at=_iso(snap.timestamp_ms),
                rows=int(props.get(state.ROWS) or 0),
                watermark_age_seconds=lag,
            )
        )
        if len(out) >= limit:
            break
    return list(reversed(out))


# ---------------------------------------------------------------------------
# The lake side (runs on the pool's threads: reads the catalog and the prefetched Variables only)


def read_lake(status: TableStatus, cfg: TableConfig, catalog: Any, variables: Any, now: datetime) -> None:
    """Fill ``status`` from the lake table's metadata (``catalog`` already open)."""
    from pyiceberg.exceptions import NoSuchTableError

    from snowberg.checks import freshness
    from snowberg.checks.freshness import CURSOR_KINDS
    from snowberg.iceberg import state
    from snowberg.iceberg.deletes import live_rows
    from snowberg.iceberg.watch_state import freshness_proof

    n = cfg.iceberg_name
    try:
        table = catalog.load_table((n.namespace, n.table))
    except NoSuchTableError:
        table = None
    # Judged as the table's own check judges it (its measure, the last proof of currency, the watermark
    # lag in the cursor's zone), so a quiet table whose check passes is not STALE here.
    zone = cfg.cursor.timezone if cfg.cursor else "UTC"
    f = freshness.evaluate(
        table,
        name=cfg.target,
        sla=cfg.freshness_sla,
        max_watermark_lag=cfg.max_watermark_lag,
        now=now,
        cursor_timezone=zone,
        measure=cfg.freshness_measure,
        proof=freshness_proof(
            cfg.target,
            cfg.freshness_measure,
            variables,
            watch_conn_id=cfg.snowflake_conn_id if cfg.watch is not None else None,
        ),
    )
    status.fresh, status.freshness_reasons = f.fresh, list(f.reasons)
    since, hours = (
        (f.proven_current_at, f.hours_since_proven_current)
        if f.measure == "proven_current"
        else (f.last_write_at, f.hours_since_last_write)
    )
    status.freshness_since = since
    status.freshness_age_seconds = None if hours is None else round(hours * 3600, 1)
    status.watermark_lag_seconds = None if f.watermark_lag_hours is None else round(f.watermark_lag_hours * 3600, 1)
    status.exists = table is not None
    if table is None:
        return
    st = state.read_state(table)
    if st is not None:
        snap = table.snapshot_by_id(st.snapshot_id)
        summary = snap.summary.additional_properties if snap is not None and snap.summary else {}
        status.snapshot_id, status.run_id, status.mode = st.snapshot_id, st.run_id, st.mode
        status.committed_at, status.watermark = _iso(st.timestamp_ms), st.watermark
        status.watermark_kind = st.cursor_kind
        status.watermark_zone = zone if st.cursor_kind in CURSOR_KINDS else None
        status.rows = int(summary.get(state.ROWS) or 0)
        status.bytes = int(summary.get("added-files-size") or 0)
        status.policies_allowed = summary.get(state.POLICIES_ALLOWED)
    status.live_rows = live_rows(table)
    status.history = history(table)


def new_status(cfg: TableConfig) -> TableStatus:
    return TableStatus(
        name=cfg.name,
        dag_id=cfg.dag_id,
        checks_dag_id=f"{cfg.dag_id}__checks",
        source=cfg.source.table or "custom query",
        target=cfg.target,
        catalog=cfg.catalog,
        sla=_fmt_duration(cfg.freshness_sla),
        sla_seconds=cfg.freshness_sla.total_seconds() if cfg.freshness_sla else None,
        max_watermark_lag_seconds=cfg.max_watermark_lag.total_seconds() if cfg.max_watermark_lag else None,
        freshness_measure=str(cfg.freshness_measure),
    )


def _fmt_duration(td: Any) -> str | None:
    from snowberg.core.durations import format_duration

    return format_duration(td) if td else None


def table_status(
    cfg: TableConfig, session: Any = None, *, timeout: float | None = None, now: datetime | None = None
) -> TableStatus:
    """One table's status (``session`` None: the lake side only), judged at ``now``. The page: ``collect``."""
    from snowberg.iceberg.state import MetadataDbVariables

    variables = None if session else MetadataDbVariables()
    return _collect([cfg], session, timeout=timeout, variables=variables, now=now)[0]


# ---------------------------------------------------------------------------
# The Airflow side (batched)


def _run_info(row: Any, tasks: list[Any], root: str) -> RunInfo:
    from snowberg.airflow.ui_db import RunRow

    assert isinstance(row, RunRow)
    end = row.end_date or (datetime.now(UTC) if row.start_date and row.state in ("running", "queued") else None)
    duration = (end - row.start_date).total_seconds() if end and row.start_date else None
    retrying = next(
        (
            t.task_id
            for t in tasks
            if t.state == "up_for_retry" or (t.state in ("running", "queued", "scheduled") and t.try_number > 1)
        ),
        None,
    )
    return RunInfo(
        run_id=row.run_id,
        state=row.state,
        start_date=_iso_dt(row.start_date),
        end_date=_iso_dt(row.end_date),
        url=task_url(row.dag_id, row.run_id, root=root),
        duration_seconds=None if duration is None else round(duration, 1),
        retrying_task=retrying,
    )


def _checks(
    run: Any, tasks: list[Any], results: dict[tuple[str, str, str], dict[str, Any]], root: str
) -> list[CheckTask]:
    out = []
    for ti in tasks:
        if ti.map_index != -1:
            continue
        stored = results.get((ti.dag_id, ti.run_id, ti.task_id), {})
        result = next((stored[k] for k in RESULT_KEYS if k in stored), None)
        outcome, reason = check_outcome(ti.state, result)
        out.append(
            CheckTask(
                task_id=ti.task_id,
                state=ti.state,
                end_date=_iso_dt(ti.end_date),
                url=task_url(ti.dag_id, ti.run_id, ti.task_id, root=root),
                result=result,
                outcome=outcome,
                reason=reason,
            )
        )
    return out


def attention(s: TableStatus) -> tuple[str | None, str | None]:
    """(attention, the reason in words) of a table, the most urgent first (``Attention``'s order)."""
    run = s.last_load_run
    if run is not None and run.state == "failed":
        return Attention.LOAD_FAILED.value, f"the latest load run {run.run_id} failed"
    if run is not None and run.retrying_task:
        return Attention.LOAD_RETRYING.value, f"task {run.retrying_task} of run {run.run_id} failed and is retrying"
    if s.catalog_error:
        return Attention.CATALOG_UNREACHABLE.value, s.catalog_error
    if s.exists is False:
        return Attention.TABLE_MISSING.value, f"the lake table {s.target} does not exist in catalog {s.catalog}"
    failed = [c for c in s.checks if c.outcome is CheckOutcome.FAILED]
    if failed:
        return f"{Attention.CHECK_FAILED.value}: {failed[0].task_id}", failed[0].reason
    if s.fresh is False:
        return Attention.STALE.value, "; ".join(s.freshness_reasons) or None
    if s.watch and s.watch.get("state") == "failing":
        return Attention.WATCH_FAILING.value, s.watch.get("error")
    if s.errors:
        return Attention.UNREADABLE.value, s.errors[0]
    return None, None


def attention_rank(s: TableStatus) -> tuple[int, str]:
    """Sort key: tables that need attention first (most urgent kind first), then by name."""
    if s.attention is None:
        return len(_RANK), s.name
    return _RANK[Attention(s.attention.split(":", 1)[0])], s.name


def _collect(
    cfgs: list[TableConfig],
    session: Any,
    *,
    timeout: float | None = None,
    root: str = "",
    variables: Any = None,
    now: datetime | None = None,
) -> list[TableStatus]:
    from snowberg.airflow import ui_db
    from snowberg.iceberg.watch_state import watch_status

    now = now or datetime.now(UTC)
    statuses = {c.name: new_status(c) for c in cfgs}
    for s in statuses.values():
        s.as_of = now.isoformat(timespec="seconds")
    dag_ids = {c.dag_id for c in cfgs} | {f"{c.dag_id}__checks" for c in cfgs}

    def guarded(step: str, fn: Any, default: Any) -> Any:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - what cannot be read is said on the page, not raised
            log.warning("snowberg page: %s: %s", step, exc, exc_info=True)
            for s in statuses.values():
                s.errors.append(f"{step}: {type(exc).__name__}: {str(exc)[:300]}")
            return default

    latest: dict[str, Any] = {}
    if session is None and variables is None:
        variables = ui_db.PrefetchedVariables({})  # no metadata database: environment Variables only
    if session is not None:
        latest = guarded("latest runs", lambda: ui_db.latest_runs(session, dag_ids), {})
        values = guarded("Variables", lambda: ui_db.snowberg_variables(session), {})
        variables = ui_db.PrefetchedVariables(values)

    # The lake: every table in parallel, a timeout per read.
    def job(cfg: TableConfig) -> Any:
        def read(catalog: Any) -> TableStatus:
            # A status of its own: a read given up at the timeout that returns later changes nothing shown.
            mine = new_status(cfg)
            read_lake(mine, cfg, catalog, variables, now)
            return mine

        return read

    results = pool().read(
        [(c.name, c.catalog, job(c)) for c in cfgs],
        timeout=timeout if timeout is not None else page_setting("ui_catalog_timeout_seconds", CATALOG_TIMEOUT_SECONDS),
    )
    for cfg in cfgs:
        s, res = statuses[cfg.name], results.get(cfg.name)
        if isinstance(res, TableStatus):
            res.as_of, res.errors = s.as_of, s.errors
            statuses[cfg.name] = s = res
        elif isinstance(res, BaseException):
            s.catalog_error = (
                str(res)  # says which catalog and for how long
                if isinstance(res, CatalogUnreachable)
                else f"catalog {cfg.catalog} could not be read: {type(res).__name__}: {str(res)[:300]}"
            )
            s.errors.append(s.catalog_error)
        try:
            s.watch = watch_status(cfg, variables).to_dict()
        except Exception as exc:  # noqa: BLE001 - one table's record must not hide the others
            s.errors.append(f"watch record: {type(exc).__name__}: {exc}")
        if cfg.variable_key and variables is not None:
            s.mirror = variables.get(cfg.variable_key)
            if s.mirror is not None and s.watermark is not None:
                try:
                    s.mirror_in_sync = json.loads(s.mirror).get("watermark") == s.watermark
                except (ValueError, AttributeError):
                    s.mirror_in_sync = False

    if session is not None:
        committing = {(s.dag_id, split_attempt(s.run_id)[0]) for s in statuses.values() if s.run_id}
        shown = {(r.dag_id, r.run_id) for r in latest.values()} | committing
        tasks = guarded("task instances", lambda: ui_db.task_rows(session, shown), {})
        runs = guarded("committing runs", lambda: ui_db.runs(session, committing), {})
        checks_runs = {(r.dag_id, r.run_id) for d, r in latest.items() if d.endswith("__checks")}
        xcoms = guarded("check results", lambda: ui_db.xcom_values(session, checks_runs, RESULT_KEYS), {})
        for s in statuses.values():
            if (load := latest.get(s.dag_id)) is not None:
                s.last_load_run = _run_info(load, tasks.get((load.dag_id, load.run_id), []), root)
            if s.run_id:
                key = (s.dag_id, split_attempt(s.run_id)[0])  # the attempt id names the run (and its clear number)
                if key in runs:
                    s.committing_run = _run_info(runs[key], tasks.get(key, []), root)
                known = [t.duration for t in tasks.get(key, []) if t.task_id in COMMIT_TASKS and t.duration]
                if not known:  # no committing task ran: the plan loaded the window itself (inline_load_rows)
                    known = [t.duration for t in tasks.get(key, []) if t.task_id == INLINE_COMMIT_TASK and t.duration]
                s.load_task_seconds = round(float(sum(known)), 1) if known else None
            if (chk := latest.get(s.checks_dag_id)) is not None:
                s.checks_run = _run_info(chk, [], root)
                s.checks = _checks(chk, tasks.get((chk.dag_id, chk.run_id), []), xcoms, root)
    for s in statuses.values():
        s.attention, s.attention_detail = attention(s)
    return sorted(statuses.values(), key=attention_rank)


# ---------------------------------------------------------------------------
# Process-wide state: the catalog pool and the status cache


_pool: CatalogPool | None = None
_cache: dict[tuple[Any, ...], tuple[float, list[TableStatus]]] = {}
_cache_lock = threading.Lock()


def pool() -> CatalogPool:
    """The process's catalog pool (catalogs kept for ``[snowberg] ui_catalog_keep_seconds``, default 10 min)."""
    global _pool
    if _pool is None:
        from snowberg.iceberg.catalogs import open_catalog

        _pool = CatalogPool(open_catalog, keep_seconds=page_setting("ui_catalog_keep_seconds", 600.0))
    return _pool


def clear_cache() -> None:
    """Forget the cached statuses and the open catalogs (tests; a config change is seen without it)."""
    with _cache_lock:
        _cache.clear()
        _configs.clear()
    if _pool is not None:
        _pool.forget()


# A cached status older than this many cache lifetimes is not served while a refresh runs: read again now.
STALE_LIFETIMES = 5
_refreshing: threading.Thread | None = None
_configs: dict[tuple[Any, ...], list[TableConfig]] = {}


def _tables(path: Path, key: tuple[Any, ...]) -> list[TableConfig]:
    """The configured tables, parsed once per version of the file (500 tables: ~0.5 s of YAML and validation)."""
    from snowberg.config.table_config import load_config

    if key not in _configs:
        _configs.clear()
        _configs[key] = list(load_config(path).tables)
    return _configs[key]


def _refresh_in_background(key: tuple[Any, ...], path: Path, root: str) -> None:
    """Read every status again on a thread of its own, with its own session; the page serves the kept ones."""
    global _refreshing
    if _refreshing is not None and _refreshing.is_alive():
        return

    def run() -> None:
        from airflow.utils.session import create_session

        try:
            with create_session() as session:
                statuses = _collect(_tables(path, key[:3]), session, root=root)
            with _cache_lock:
                if key in _cache:  # not replaced meanwhile by a newer config or an on-demand refresh
                    _cache[key] = (time.monotonic(), statuses)
        except Exception:  # noqa: BLE001 - the next view reads them itself
            log.warning("snowberg page: background refresh failed", exc_info=True)

    _refreshing = threading.Thread(target=run, name="snowberg-ui-refresh", daemon=True)
    _refreshing.start()


def wait_for_refresh(timeout: float) -> bool:
    """Wait for a running background refresh (tests, benchmarks); True when none is running any more."""
    thread = _refreshing
    if thread is not None:
        thread.join(timeout)
    return thread is None or not thread.is_alive()


def collect(
    dag_ids: set[str] | None,
    session: Any,
    path: Path | None = None,
    *,
    root: str = "",
    refresh: bool = False,
) -> list[TableStatus]:
    """Every configured table whose DAG is in ``dag_ids`` (``None``: all of them), attention first.

    The statuses of all tables are read together and kept for ``[snowberg] ui_cache_seconds``
    (default 30 s; 0: never kept); each user's page filters them. Once that time has passed, a view
    gets the kept statuses (their ``as_of`` says when they were read) while a background thread reads
    them again; kept statuses older than ``STALE_LIFETIMES`` lifetimes are read again before the
    answer. ``refresh``: read them again now.
    """
    path = (path or tables_config_path()).resolve()
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size, root)
    ttl = page_setting("ui_cache_seconds", CACHE_SECONDS)
    with _cache_lock:  # one reader at a time: a second request waits for the first's result
        hit = _cache.get(key)
        age = time.monotonic() - hit[0] if hit is not None else None
        if hit is not None and age is not None and not refresh and ttl < age <= ttl * STALE_LIFETIMES:
            _refresh_in_background(key, path, root)
        elif refresh or hit is None or age is None or age > ttl:
            statuses = _collect(_tables(path, key[:3]), session, root=root)
            hit = (time.monotonic(), statuses)  # the lifetime runs from when the reading ended
            _cache.clear()
            if ttl > 0:
                _cache[key] = hit
    return [t for t in hit[1] if dag_ids is None or t.dag_id in dag_ids]
