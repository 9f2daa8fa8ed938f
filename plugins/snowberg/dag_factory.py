"""Build one DAG per configured table. Called from the thin files in ``dags/``.

Parse-time cost is the YAML read and pydantic validation; no connection,
Variable or heavy library is touched until a task runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Asset, CronDataIntervalTimetable, Param

from snowberg.config import TableConfig, load_config
from snowberg.durations import format_duration
from snowberg.operators.incremental import SnowbergLoadOperator, SnowbergPlanOperator, SnowbergPublishOperator
from snowberg.run_params import PARAM_DEFAULTS, PARAM_SCHEMAS

START_DATE = pendulum.datetime(2026, 1, 1, tz="UTC")


def table_asset(cfg: TableConfig) -> Asset:
    """The Asset downstream DAGs schedule on: it changes when a load commits."""
    n = cfg.iceberg_name
    return Asset(uri=f"iceberg://{cfg.catalog}/{n.namespace}/{n.table}", name=f"iceberg_{cfg.catalog}_{n.namespace}_{n.table}")


def _doc(cfg: TableConfig) -> str:
    src = cfg.source.table or "custom query"
    lines = [
        f"## snowberg: {cfg.name}",
        "",
        cfg.description or "",
        "",
        f"* **Source**: Snowflake `{src}` (connection `{cfg.snowflake_conn_id}`)",
        f"* **Target**: Iceberg `{cfg.target}` in catalog `{cfg.catalog}`",
    ]
    if cfg.cursor:
        lines += [
            f"* **Cursor**: `{cfg.cursor.column}`, lookback {format_duration(cfg.cursor.lookback)}, "
            f"commit lag {format_duration(cfg.cursor.commit_lag)}, NULL cursors: {cfg.cursor.null_policy.value}",
        ]
    lines += [
        f"* **Write mode**: {cfg.effective_write_mode.value}" + (f" on key {cfg.primary_key}" if cfg.primary_key else ""),
        f"* **Watermark mirror**: Variable `{cfg.variable_key}` (the table's snapshot summary is the truth)",
    ]
    if cfg.freshness_sla:
        lines.append(f"* **Freshness SLA**: {format_duration(cfg.freshness_sla)}")
    lines += [
        "",
        "Trigger with `window_start`/`window_end` to reload a window (a backfill: replaces that window in one",
        "commit, never moves the watermark), `full_refresh` to rebuild, `dry_run` to plan only.",
    ]
    return "\n".join(lines)


def _timetable(schedule: str | None) -> Any:
    """Cron schedules get real data intervals, so a backfill run's interval is its window.

    Airflow 3's default for a cron string is CronTriggerTimetable, whose data
    interval is a single instant: a run created by the UI's Backfill dialog
    (which sends no params) would have an empty window.
    """
    if schedule is None or schedule in ("@once", "@continuous"):
        return schedule
    return CronDataIntervalTimetable(schedule, timezone="UTC")


def build_dag(cfg: TableConfig) -> DAG:
    raw = cfg.model_dump(mode="json")
    params = {k: Param(PARAM_DEFAULTS[k], **schema) for k, schema in PARAM_SCHEMAS.items()}
    with DAG(
        dag_id=cfg.dag_id,
        schedule=_timetable(cfg.schedule),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        tags=["snowberg", "snowflake-to-iceberg", *cfg.tags],
        doc_md=_doc(cfg),
        params=params,
        default_args={"owner": cfg.owner, "retries": cfg.retries, "retry_delay": cfg.retry_delay},
    ) as dag:
        plan = SnowbergPlanOperator(task_id="plan", table_config=raw)
        # Backfill runs do not count toward max_active_runs (Airflow 3 gives each
        # backfill its own limit), so a backfill and a scheduled run of one table
        # can be active together: one load of a table at a time, across all runs.
        load = SnowbergLoadOperator(task_id="load", table_config=raw, window=plan.output, max_active_tis_per_dag=1)
        publish = SnowbergPublishOperator(task_id="publish", table_config=raw, window=plan.output, outlets=[table_asset(cfg)])
        plan >> load >> publish
    return dag


def build_dags(config_path: str | Path) -> dict[str, Any]:
    """All DAGs of a config file, keyed by DAG id (for ``globals().update``)."""
    cfg = load_config(config_path)
    return {t.dag_id: build_dag(t) for t in cfg.tables}
