"""What the snowberg page in the Airflow UI shows, per configured table.

Read on request, from the sources of truth, never from a cache:

* the lake table's metadata (no data file is read): the last snowberg load
  (rows, bytes added, snapshot id, run id), the watermark, freshness against
  the SLA (``snowberg.checks.freshness``), and the last ``history`` snowberg
  commits for the chart (rows per run, and the watermark's age at each commit:
  commit time minus the watermark it carried — how far behind the source's
  cursor the load was, not how long ago the lake was written);
* Airflow's metadata database: the Variable mirror, the load task's duration
  in the run that committed, and the latest run of the table's checks DAG
  (each check task's state, its outcome — passed, failed, could not run (with
  the reason), not finished — and the result it returned).

Every piece that cannot be read (no table yet, a catalog that does not
answer) becomes an ``error`` string on that table, so one broken table does
not hide the others.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from snowberg.config.table_config import TableConfig
from snowberg.core.attempts import split_attempt

log = logging.getLogger(__name__)

HISTORY = 20
# The task that commits a load, per DAG shape (single task, scale-out, push-down unload, stream).
COMMIT_TASKS = ("load", "commit", "unload")
# The task that committed a small window itself (``inline_load_rows``), its load task skipped.
INLINE_COMMIT_TASK = "plan"


def tables_config_path() -> Path:
    """The tables config the DAG files read (``SNOWBERG_TABLES_CONFIG``, else ``include/tables.yaml`` by the DAGs)."""
    env = os.environ.get("SNOWBERG_TABLES_CONFIG")
    if env:
        return Path(env)
    from airflow.configuration import conf

    return Path(conf.get("core", "dags_folder")).resolve().parent / "include" / "tables.yaml"


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


# Task states in which the check did not look at the table.
_NOT_RUN_STATES = frozenset({"skipped", "upstream_failed", "removed"})


def check_outcome(state: str | None, result: Any) -> tuple[CheckOutcome, str | None]:
    """(outcome, reason) of a check task from its state and the result it pushed.

    A check that could not compare (no lake table, nothing committed, an
    inconclusive comparison) pushes ``{"status": "not_run", "reason": ...}`` or
    a report with ``inconclusive`` and a ``note``, and is skipped: shown as
    "could not run" with that reason, whatever the task's state.
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
        return CheckOutcome.FAILED, None
    return CheckOutcome.NOT_FINISHED, None


@dataclass(kw_only=True)
class CheckTask:
    task_id: str
    state: str | None
    end_date: str | None
    result: Any = None
    outcome: CheckOutcome = CheckOutcome.NOT_FINISHED
    reason: str | None = None  # why a check could not run


@dataclass(kw_only=True)
class TableStatus:
    name: str
    dag_id: str
    checks_dag_id: str
    source: str
    target: str
    catalog: str
    exists: bool = False
    snapshot_id: int | None = None
    run_id: str | None = None
    mode: str | None = None
    committed_at: str | None = None
    rows: int | None = None
    bytes: int | None = None
    duration_seconds: float | None = None
    watermark: str | None = None
    # The masking/row access policies the current state's load allowed (on_policy: allow), from its summary.
    policies_allowed: str | None = None
    mirror: str | None = None
    mirror_in_sync: bool | None = None
    sla: str | None = None
    fresh: bool | None = None
    hours_since_last_write: float | None = None
    freshness_reasons: list[str] = field(default_factory=list)
    checks_run_id: str | None = None
    checks: list[CheckTask] = field(default_factory=list)
    history: list[RunPoint] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


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


def _lake(status: TableStatus, cfg: TableConfig) -> None:
    from pyiceberg.exceptions import NoSuchTableError

    from snowberg.checks import freshness
    from snowberg.core.durations import format_duration
    from snowberg.iceberg import state
    from snowberg.iceberg.catalogs import open_catalog
    from snowberg.iceberg.state import MetadataDbVariables
    from snowberg.iceberg.watch_state import freshness_proof

    n = cfg.iceberg_name
    try:
        table = open_catalog(cfg.catalog).load_table((n.namespace, n.table))
    except NoSuchTableError:
        table = None
    status.sla = format_duration(cfg.freshness_sla) if cfg.freshness_sla else None
    # Judged as the table's own check judges it (its measure, the last proof of currency, the watermark
    # lag in the cursor's zone), so a quiet table whose check passes is not STALE here.
    f = freshness.evaluate(
        table,
        name=cfg.target,
        sla=cfg.freshness_sla,
        max_watermark_lag=cfg.max_watermark_lag,
        cursor_timezone=cfg.cursor.timezone if cfg.cursor else "UTC",
        measure=cfg.freshness_measure,
        proof=freshness_proof(
            cfg.target,
            cfg.freshness_measure,
            MetadataDbVariables(),
            watch_conn_id=cfg.snowflake_conn_id if cfg.watch is not None else None,
        ),
    )
    status.fresh, status.hours_since_last_write, status.freshness_reasons = (
        f.fresh,
        f.hours_since_last_write,
        list(f.reasons),
    )
    if table is None:
        return
    status.exists = True
    st = state.read_state(table)
    if st is not None:
        snap = table.snapshot_by_id(st.snapshot_id)
        summary = snap.summary.additional_properties if snap is not None and snap.summary else {}
        status.snapshot_id, status.run_id, status.mode = st.snapshot_id, st.run_id, st.mode
        status.committed_at, status.watermark = _iso(st.timestamp_ms), st.watermark
        status.rows = int(summary.get(state.ROWS) or 0)
        status.bytes = int(summary.get("added-files-size") or 0)
        status.policies_allowed = summary.get(state.POLICIES_ALLOWED)
    status.history = history(table)


def _airflow(status: TableStatus, cfg: TableConfig, session: Any) -> None:
    from airflow.models import DagRun, TaskInstance, Variable
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    mirror = Variable.get(cfg.variable_key, default_var=None)
    status.mirror = mirror
    if mirror is not None and status.watermark is not None:
        try:
            status.mirror_in_sync = json.loads(mirror).get("watermark") == status.watermark
        except (ValueError, AttributeError):
            status.mirror_in_sync = False
    if status.run_id:
        run_id, _ = split_attempt(status.run_id)  # the attempt id names the run (and its clear number)
        durations = session.scalars(
            select(TaskInstance.duration).where(
                TaskInstance.dag_id == cfg.dag_id,
                TaskInstance.run_id == run_id,
                TaskInstance.task_id.in_(COMMIT_TASKS),
            )
        ).all()
        known = [d for d in durations if d is not None]
        if not known:  # no committing task ran: the plan loaded the window itself
            known = [
                d
                for d in session.scalars(
                    select(TaskInstance.duration).where(
                        TaskInstance.dag_id == cfg.dag_id,
                        TaskInstance.run_id == run_id,
                        TaskInstance.task_id == INLINE_COMMIT_TASK,
                    )
                ).all()
                if d is not None
            ]
        status.duration_seconds = round(float(sum(known)), 1) if known else None
    checks_run = session.scalars(
        select(DagRun)
        .where(DagRun.dag_id == status.checks_dag_id, DagRun.end_date.is_not(None))
        .order_by(DagRun.end_date.desc())
        .limit(1)
    ).first()
    if checks_run is None:
        return
    status.checks_run_id = checks_run.run_id
    tis = session.scalars(
        select(TaskInstance)
        .where(TaskInstance.dag_id == status.checks_dag_id, TaskInstance.run_id == checks_run.run_id)
        .order_by(TaskInstance.task_id)
    ).all()
    for ti in tis:
        result = None
        for key in ("return_value", "result"):
            row = session.scalars(
                XComModel.get_many(
                    run_id=checks_run.run_id, key=key, dag_ids=status.checks_dag_id, task_ids=ti.task_id
                ).with_only_columns(XComModel.value)
            ).first()
            if row is not None:
                result = XComModel.deserialize_value(type("X", (), {"value": row})())
                break
        state = str(ti.state.value if hasattr(ti.state, "value") else ti.state) if ti.state else None
        outcome, reason = check_outcome(state, result)
        status.checks.append(
            CheckTask(
                task_id=ti.task_id,
                state=state,
                end_date=ti.end_date.isoformat(timespec="seconds") if ti.end_date else None,
                result=result,
                outcome=outcome,
                reason=reason,
            )
        )


def table_status(cfg: TableConfig, session: Any) -> TableStatus:
    status = TableStatus(
        name=cfg.name,
        dag_id=cfg.dag_id,
        checks_dag_id=f"{cfg.dag_id}__checks",
        source=cfg.source.table or "custom query",
        target=cfg.target,
        catalog=cfg.catalog,
    )
    for step in (_lake, lambda s, c: _airflow(s, c, session)):
        try:
            step(status, cfg)
        except Exception as exc:  # noqa: BLE001 - one table that cannot be read must not hide the others
            log.warning("snowberg page: %s: %s", cfg.name, exc, exc_info=True)
            status.errors.append(f"{type(exc).__name__}: {str(exc)[:300]}")
    return status


def collect(dag_ids: set[str] | None, session: Any, path: Path | None = None) -> list[TableStatus]:
    """Every configured table whose DAG is in ``dag_ids`` (``None``: all of them)."""
    from snowberg.config.table_config import load_config

    cfg = load_config(path or tables_config_path())
    return [table_status(t, session) for t in cfg.tables if dag_ids is None or t.dag_id in dag_ids]
