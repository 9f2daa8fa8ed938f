"""Build one DAG per configured table. Called from the two-line files in ``dags/``.

Parse-time cost is the YAML read and pydantic validation; no connection,
Variable or heavy library is touched until a task runs.

The operators take a table's settings as explicit keyword arguments; this
module is where a ``TableConfig`` becomes them, through
``snowberg.airflow.operators.arguments.operator_arguments`` (each operator's
signature says which settings it takes).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import (
    DAG,
    Asset,
    AssetOrTimeSchedule,
    AssetWatcher,
    CronDataIntervalTimetable,
    DeltaDataIntervalTimetable,
)

from snowberg.airflow.alerts import build_notifiers
from snowberg.airflow.operators.arguments import operator_arguments
from snowberg.airflow.operators.freshness import SnapshotFreshnessOperator
from snowberg.airflow.operators.health import TableHealthOperator
from snowberg.airflow.operators.incremental import (
    SnowbergLoadOperator,
    SnowbergPlanOperator,
    SnowbergPublishOperator,
    inline_alias,
)
from snowberg.airflow.operators.invalid_config import InvalidTableConfigOperator
from snowberg.airflow.operators.maintenance import MaintenanceStep, SnowbergMaintenanceOperator, maintenance_params
from snowberg.airflow.operators.scale import SnowbergUnloadOperator, sliced_load
from snowberg.airflow.operators.storage import VerifyExternalVolumeOperator
from snowberg.airflow.operators.streams import build_stream_tasks
from snowberg.airflow.operators.volume import FULL_VERIFICATION_PARAM, VolumeCheckOperator
from snowberg.airflow.parsing import attach_form, form_param, parsing_dag_id
from snowberg.airflow.watch_trigger import SourceChangeTrigger
from snowberg.config.locations import ConfigFile
from snowberg.config.locations import config_path as config_path_of
from snowberg.config.run_params import PARAM_DEFAULTS, PARAM_SCHEMAS
from snowberg.config.table_config import (
    DAG_ID_PREFIX,
    DAG_SUFFIXES,
    BrokenEntry,
    TableConfig,
    load_config_isolated,
    load_config_selected,
)
from snowberg.core.durations import format_duration
from snowberg.core.identifiers import TableName, clip
from snowberg.streams.params import STREAM_PARAM_DEFAULTS, STREAM_PARAM_SCHEMAS

START_DATE = pendulum.datetime(2026, 1, 1, tz="UTC")
log = logging.getLogger(__name__)


class InvalidTableConfigWarning(UserWarning):
    """A table entry was left out of the DAGs because its config is invalid."""


def table_asset(cfg: TableConfig) -> Asset:
    """The Asset downstream DAGs schedule on: it changes when a load commits."""
    n = cfg.iceberg_name
    return Asset(
        uri=f"iceberg://{cfg.catalog}/{n.namespace}/{n.table}", name=f"iceberg_{cfg.catalog}_{n.namespace}_{n.table}"
    )


def watched_source_asset(cfg: TableConfig) -> Asset:
    """The Snowflake source of a watched table as an Asset whose watcher starts the load (docs/event-driven.md).

    ``snowflake://<connection id>/<database>/<schema>/<name>?snowberg_table=<table>``: the Snowflake
    provider's URI rule wants an account in the host position, which lives in the connection a DAG file
    must not read, so the connection id stands in for it (as for a sync's target); the table's name in the
    query keeps two tables watching one source apart (each has its own watcher and its own run record).
    The watched object is the stream for a stream table, else the table or view.
    """
    assert cfg.watch is not None
    kind, source = ("stream", cfg.stream.name) if cfg.stream is not None else ("table", cfg.source.table)
    assert source is not None  # TableConfig refuses watch on a query source
    trigger = SourceChangeTrigger(
        dag_id=cfg.dag_id,
        table=cfg.name,
        target=cfg.target,
        kind=kind,
        source=source,
        snowflake_conn_id=cfg.snowflake_conn_id,
        poll_interval=cfg.watch.poll_interval.total_seconds(),
        # Without webhook_url: the trigger's arguments are part of the serialised DAG, which the UI and the API
        # show, and such a URL carries its token (webhook_conn_id keeps it in a connection).
        alerts=cfg.alerts.model_dump(mode="json", exclude={"webhook_url"}) if cfg.alerts is not None else None,
        freshness_sla=cfg.freshness_sla.total_seconds() if cfg.freshness_sla is not None else None,
    )
    path = "/".join(p.lower() for p in str(TableName.parse(source)).split("."))
    return Asset(
        uri=f"snowflake://{cfg.snowflake_conn_id.lower()}/{path}?snowberg_table={cfg.name}",
        name=f"snowberg_source_{cfg.name}",
        watchers=[AssetWatcher(name=f"snowberg_watch_{cfg.name}", trigger=trigger)],
    )


def load_schedule(cfg: TableConfig) -> Any:
    """The load DAG's schedule: ``schedule``, or for a watched table its source Asset or ``max_interval``.

    Airflow's asset-or-time schedule runs the DAG when the watcher fires and on the ``max_interval``
    timetable (real data intervals, so the Backfill dialog cuts runs by it); with ``max_interval: null``
    only the Asset schedules it.
    """
    if cfg.watch is None:
        return _timetable(cfg.schedule)
    asset = watched_source_asset(cfg)
    if cfg.watch.max_interval is None:
        return [asset]
    return AssetOrTimeSchedule(timetable=DeltaDataIntervalTimetable(cfg.watch.max_interval), assets=[asset])


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
    if cfg.stream:
        lines.append(
            f"* **Stream**: `{cfg.stream.model_dump(exclude_none=True)}` (change capture, exactly once by batch id)"
        )
    if cfg.cursor:
        lines += [
            f"* **Cursor**: `{cfg.cursor.column}`, lookback {format_duration(cfg.cursor.lookback)}, "
            f"commit lag {format_duration(cfg.cursor.commit_lag)}, NULL cursors: {cfg.cursor.null_policy.value}",
        ]
    lines += [
        f"* **Write mode**: {cfg.effective_write_mode.value}"
        + (f" on key {cfg.primary_key}" if cfg.primary_key else ""),
        f"* **Watermark mirror**: Variable `{cfg.variable_key}` (the table's snapshot summary is the truth)",
    ]
    if cfg.freshness_sla:
        lines.append(
            f"* **Freshness SLA**: {format_duration(cfg.freshness_sla)} ({cfg.freshness_measure.value}), "
            "checked by the checks DAG"
        )
    if cfg.watch is not None:
        lines.append(
            f"* **Watch**: runs when the source changes (a metadata poll every "
            f"{format_duration(cfg.watch.poll_interval)} in the triggerer)"
            + (f", and at least every {format_duration(cfg.watch.max_interval)}" if cfg.watch.max_interval else "")
            + "; see docs/event-driven.md"
        )
    if cfg.cursor is None and cfg.stream is None:
        lines.append(
            "* **No cursor**: a scheduled run is a full refresh (one replace commit), skipped while Snowflake "
            "reports the source unchanged (LAST_ALTERED, ROW_COUNT, BYTES)"
        )
    lines += [
        "",
        "Trigger with `window_start`/`window_end` (or `number_start`/`number_end` for a NUMBER cursor) to reload",
        "a window (a backfill: replaces that window in one commit, clamped to the watermark, never moves it),",
        "`full_refresh` to rebuild, `dry_run` to plan only.",
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


def check_schedule(schedule: Any) -> None:
    """Raise if Airflow would refuse ``schedule`` (a cron string it cannot parse) when it validates the DAG."""
    if not isinstance(schedule, str | None):
        raise ValueError(f"schedule must be a string, got {clip(schedule)}")
    timetable = _timetable(schedule)
    if hasattr(timetable, "validate"):
        timetable.validate()


def _default_args(cfg: TableConfig, dag_id: str | None = None, *, pooled: bool = False) -> dict[str, Any]:
    """``dag_id``: the DAG the tasks are in (the checks and unload DAGs have their own), so alert links open it.

    ``pooled``: the DAG's tasks run in the table's ``pool`` (its load and unload DAGs: they query Snowflake;
    mapped slices too, each taking a slot, so the pool also caps a scaled-out load's queries).
    """
    args: dict[str, Any] = {"owner": cfg.owner, "retries": cfg.retries, "retry_delay": cfg.retry_delay}
    if pooled and cfg.pool is not None:
        args["pool"] = cfg.pool
    notifiers = build_notifiers(cfg.alerts, table=cfg.name, dag_id=dag_id or cfg.dag_id)
    if notifiers:
        # Task-level callbacks: they receive the exception, so the alert can
        # say which check failed and what was observed.
        args["on_failure_callback"] = notifiers
    return args


def _checks(cfg: TableConfig, *, freshness: bool = True, trigger_rule: str = "all_success") -> list[Any]:
    """Freshness and health tasks (metadata only); wired after loads and in the checks DAG.

    Freshness runs in the checks DAG only (``freshness=False`` after a load): a load run proves the
    lake current or fails on its own, so a quiet source keeps the load DAG green, and the checks DAG,
    on its own schedule, is what alerts when the load stops proving it (docs/checks-and-alerts.md).
    """
    tasks: list[Any] = [
        TableHealthOperator(
            task_id="table_health",
            table=cfg.target,
            catalog=cfg.catalog,
            thresholds=cfg.health,
            table_name=cfg.name,
            trigger_rule=trigger_rule,
        ),
    ]
    if cfg.freshness_sla is not None and freshness:
        tasks.insert(
            0,
            SnapshotFreshnessOperator(
                task_id="check_freshness",
                table=cfg.target,
                catalog=cfg.catalog,
                freshness_sla=cfg.freshness_sla,
                max_watermark_lag=cfg.max_watermark_lag,
                table_name=cfg.name,
                cursor_timezone=cfg.cursor.timezone if cfg.cursor else "UTC",
                measure=cfg.freshness_measure,
                watch_conn_id=cfg.snowflake_conn_id if cfg.watch is not None else None,
            ),
        )
    return tasks


def _volume_check(cfg: TableConfig) -> Any | None:
    """The source-vs-lake volume check (docs/volume-checks.md), in the checks DAG: every table gets one.

    Watermark tables are verified by key (incrementally; in full on ``volume.full_schedule`` or when the
    checks DAG is triggered with ``full_verification``); stream and cursor-less tables by counts.
    """
    if not cfg.volume.enabled:
        return None
    return VolumeCheckOperator(task_id="check_volume", retries=0, **operator_arguments(VolumeCheckOperator, cfg))


def build_checks_dag(cfg: TableConfig) -> DAG:
    """Checks on their own schedule: a table that receives nothing at all still alerts."""
    with DAG(
        dag_id=f"{cfg.dag_id}__checks",
        schedule=cfg.checks_schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        tags=["snowberg", "checks", *cfg.tags],
        doc_md=f"## snowberg checks: {cfg.name}\n\n"
        f"Freshness (SLA {format_duration(cfg.freshness_sla) if cfg.freshness_sla else 'none'}) "
        f"and table health of Iceberg `{cfg.target}` from metadata only, on their own schedule, so a table that "
        "stops receiving data alerts even when no load runs. See docs/checks-and-alerts.md. "
        f"Trigger with `{FULL_VERIFICATION_PARAM}` for a full volume verification (docs/volume-checks.md).",
        default_args=_default_args(cfg, f"{cfg.dag_id}__checks"),
    ) as dag:
        checks = _checks(cfg)
        if cfg.external_volume:
            vol = VerifyExternalVolumeOperator(
                task_id="verify_external_volume",
                external_volume=cfg.external_volume,
                snowflake_conn_id=cfg.snowflake_conn_id,
                catalog=cfg.catalog,
                table=cfg.target,
                table_name=cfg.name,
            )
            vol >> checks
        _volume_check(cfg)
    return attach_form(
        dag,
        {
            FULL_VERIFICATION_PARAM: form_param(
                False, type="boolean", description="verify the whole table, not only what changed since the last check"
            )
        },
    )


def build_stream_dag(cfg: TableConfig) -> DAG:
    """Change capture from a Snowflake Stream: consume → load → cleanup (docs/streams.md)."""
    params = {k: form_param(STREAM_PARAM_DEFAULTS[k], **s) for k, s in STREAM_PARAM_SCHEMAS.items()}
    with DAG(
        dag_id=cfg.dag_id,
        schedule=load_schedule(cfg) if cfg.watch is not None else cfg.schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        tags=["snowberg", "snowflake-stream-to-iceberg", *cfg.tags],
        doc_md=_doc(cfg),
        default_args=_default_args(cfg, pooled=True),
    ) as dag:
        tasks = build_stream_tasks(cfg, outlets=[table_asset(cfg)])
        tasks["cleanup"] >> _checks(cfg, freshness=False)
    return attach_form(dag, params)


def build_dag(cfg: TableConfig) -> DAG:
    if cfg.stream is not None:
        return build_stream_dag(cfg)
    params = {k: form_param(PARAM_DEFAULTS[k], **schema) for k, schema in PARAM_SCHEMAS.items()}
    with DAG(
        dag_id=cfg.dag_id,
        schedule=load_schedule(cfg),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        tags=["snowberg", "snowflake-to-iceberg", *cfg.tags],
        doc_md=_doc(cfg),
        default_args=_default_args(cfg, pooled=True),
    ) as dag:
        plan = _plan(cfg, inline=not cfg.scale_out)
        if cfg.scale_out:
            # Slices as mapped tasks (spread over Celery workers); one commit at the end.
            load: Any = sliced_load(cfg, plan, max_parallel=cfg.max_parallel_slices)
        else:
            load = SnowbergLoadOperator(
                task_id="load", window=plan.output, **operator_arguments(SnowbergLoadOperator, cfg)
            )
            plan >> load
        # Backfill runs do not count toward max_active_runs (Airflow 3 gives each
        # backfill its own limit), so a backfill and a scheduled run of one table
        # can be active together: one committing task of a table at a time, across
        # all runs (docs/airflow-deployment.md).
        load.max_active_tis_per_dag = 1
        publish = SnowbergPublishOperator(
            task_id="publish",
            window=plan.output,
            outlets=[table_asset(cfg)],
            **operator_arguments(SnowbergPublishOperator, cfg),
        )
        # none_failed: a plan that loaded a small window itself leaves table_health to run (after the skipped
        # load and publish) only when the check would fail.
        load >> publish >> _checks(cfg, freshness=False, trigger_rule="none_failed")
    return attach_form(dag, params)


def _plan(cfg: TableConfig, *, inline: bool) -> SnowbergPlanOperator:
    """The plan task; ``inline``: it loads windows of up to ``inline_load_rows`` rows itself (docs/performance.md).

    Its outlet is an ``AssetAlias`` through which such a load sends the table's Asset event (an idle plan sends
    none); the unload DAG and mapped slices always load in their own tasks.
    """
    arguments = operator_arguments(SnowbergPlanOperator, cfg)
    if not inline or cfg.inline_load_rows == 0:
        return SnowbergPlanOperator(task_id="plan", **arguments)
    alias = inline_alias(cfg.name)
    return SnowbergPlanOperator(task_id="plan", asset_alias=alias, asset=table_asset(cfg), outlets=[alias], **arguments)


def build_unload_dag(cfg: TableConfig) -> DAG:
    """Push-down unload, triggered by hand: Snowflake writes Parquet to the lake, Iceberg registers it."""
    assert cfg.unload is not None
    params = {k: form_param(PARAM_DEFAULTS[k], **schema) for k, schema in PARAM_SCHEMAS.items()}
    with DAG(
        dag_id=f"{cfg.dag_id}__unload",
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        tags=["snowberg", "push-down-unload", *cfg.tags],
        doc_md=f"## snowberg push-down unload: {cfg.name}\n\nSnowflake unloads the planned window as Parquet to "
        f"stage `{cfg.unload.stage}`; the files are checked against the mapped types and registered in "
        f"`{cfg.target}` with `add_files` in one commit. "
        "For big initial loads and full refreshes; see docs/performance.md.",
        default_args=_default_args(cfg, f"{cfg.dag_id}__unload", pooled=True),
    ) as dag:
        plan = _plan(cfg, inline=False)
        unload = SnowbergUnloadOperator(
            task_id="unload", window=plan.output, **operator_arguments(SnowbergUnloadOperator, cfg)
        )
        publish = SnowbergPublishOperator(
            task_id="publish",
            window=plan.output,
            outlets=[table_asset(cfg)],
            **operator_arguments(SnowbergPublishOperator, cfg),
        )
        plan >> unload >> publish
    return attach_form(dag, params)


def build_invalid_entry_dag(entry: BrokenEntry) -> DAG:
    """A DAG named for a broken entry whose only task fails with the config error.

    It runs on the entry's schedule (hourly when that is unreadable too), so a
    broken table shows a failed run where its load would have been, and pages
    through the entry's ``alerts`` when that section is valid.
    """
    raw = entry.raw if isinstance(entry.raw, dict) else {}
    schedule = raw.get("schedule", "@hourly")
    try:
        notifiers = build_notifiers(raw.get("alerts"), table=entry.name, dag_id=f"snowberg_{entry.name}")
    except Exception:  # noqa: BLE001 - the alerts section may be what is broken
        notifiers = []
    for sched in (schedule, "@hourly"):
        try:
            check_schedule(sched)
            with DAG(
                dag_id=f"snowberg_{entry.name}",
                schedule=_timetable(sched) if isinstance(sched, str) else None,
                start_date=START_DATE,
                catchup=False,
                max_active_runs=1,
                tags=["snowberg", "invalid-config"],
                doc_md=f"## snowberg: invalid table config\n\nThis entry of the tables config is not loaded:\n\n"
                f"```\n{entry.error}\n```\n\nFix the entry; the table's DAGs replace this one at the next parse.",
                default_args={"owner": "snowberg", "retries": 0, "on_failure_callback": notifiers},
            ) as dag:
                InvalidTableConfigOperator(task_id="config_error", error=entry.error)
            return dag
        except Exception:  # noqa: BLE001 - a bad schedule string is one of the errors we report
            continue
    raise AssertionError("unreachable: '@hourly' is a valid schedule")


def table_dags(t: TableConfig) -> list[DAG]:
    """The DAGs of one table, validated as the DAG processor will (so its errors stay this table's)."""
    # Checked before any DAG is built: Airflow registers a DAG when it is
    # created, so a DAG that fails validation later would fail the whole file.
    check_schedule(t.schedule)
    check_schedule(t.checks_schedule)
    built = [build_dag(t), build_checks_dag(t)]
    if t.unload is not None and t.stream is None:
        built.append(build_unload_dag(t))
    if t.maintenance.enabled:
        built.append(build_maintenance_dag(t))
    for d in built:
        d.validate()
    return built


def build_maintenance_dag(cfg: TableConfig) -> DAG:
    """Expire, compact, sweep orphans on the table's own schedule; rollback and tags as manual runs."""
    s = cfg.maintenance
    with DAG(
        dag_id=f"{cfg.dag_id}__maintenance",
        schedule=s.schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        tags=["snowberg", "maintenance", *cfg.tags],
        doc_md=f"## snowberg maintenance: {cfg.name}\n\nOn Iceberg `{cfg.target}`: compact small files in one "
        f"replace commit that keeps the watermark, expire snapshots older than "
        f"{format_duration(s.snapshot_retention)} beyond the newest {s.min_snapshots} (never the state snapshot or a "
        f"tagged one), remove unreferenced files older than {format_duration(s.orphan_age)}; then the health report. "
        "Trigger with `rollback_to_snapshot`, `rollback_before_run` or `rollback_to_tag` to roll the table and its "
        "watermark back, or `tag` to tag a snapshot; `dry_run` only reports. See docs/maintenance.md.",
        default_args=_default_args(cfg),
    ) as dag:
        arguments = operator_arguments(SnowbergMaintenanceOperator, cfg)
        steps = [
            SnowbergMaintenanceOperator(
                task_id=step.value, step=step, trigger_rule="none_failed", max_active_tis_per_dag=1, **arguments
            )
            for step in MaintenanceStep
        ]
        health = TableHealthOperator(
            task_id="table_health",
            table=cfg.target,
            catalog=cfg.catalog,
            thresholds=cfg.health,
            table_name=cfg.name,
            trigger_rule="none_failed",
        )
        for a, b in zip(steps, steps[1:], strict=False):
            a >> b
        steps[-1] >> health
    return attach_form(dag, maintenance_params())


def table_names_of(dag_id: str) -> set[str]:
    """The table names one of whose DAGs could be ``dag_id`` (empty when it is no table's DAG id)."""
    if not dag_id.startswith(DAG_ID_PREFIX):
        return set()
    base = dag_id[len(DAG_ID_PREFIX) :]
    return {base} | {base[: -len(s)] for s in DAG_SUFFIXES if base.endswith(s) and len(base) > len(s)}


def selected_dags(config_path: Path, dag_id: str) -> dict[str, Any] | None:
    """The DAGs of the one table ``dag_id`` belongs to, validating and building no other table's; None if unsure.

    None (the caller builds everything) when no valid entry can be picked out
    alone (``load_config_selected``), when building it fails (its stand-in is
    then a broken-entry DAG), or when the table has no DAG of that id: so the
    DAG returned is always the one the full parse builds.
    """
    names = table_names_of(dag_id)
    if not names:
        return None
    picked = load_config_selected(config_path, names)
    if picked is None:
        return None
    dags: dict[str, Any] = {}
    for t in picked:
        try:
            dags.update({d.dag_id: d for d in table_dags(t)})
        except Exception:  # noqa: BLE001 - the full parse reports it as this table's broken entry
            return None
    return dags if dag_id in dags else None


def build_dags(
    config: str | Path | None = None, *, dag_file: str | Path | None = None, dag_id: str | None = None
) -> dict[str, Any]:
    """All DAGs of a tables config, keyed by DAG id: a DAG file is ``globals().update(build_dags(dag_file=__file__))``.

    The config is ``config``, else ``$SNOWBERG_TABLES_CONFIG``, else
    ``include/tables.yaml`` beside the DAG file's folder or under the current
    directory (``snowberg.config.locations``).

    In a task process (``dag_id``, else Airflow's parsing context, names the
    DAG being run) only the DAGs of that DAG's table are validated and built:
    Airflow parses the file again for every task, and building every table's
    DAGs there made each task's cost grow with the number of tables
    (docs/performance.md). When that table cannot be picked out alone, all
    DAGs are built, as in the dag-processor.

    Entries are validated one by one: a broken entry is logged (and warned, so
    the DAG processor records it with the file) at parse time and gets a
    stand-in DAG that fails with its error, while every other table's DAGs are
    built as usual. Errors in the file as a whole still fail the import.
    """
    config_path = config_path_of(ConfigFile.TABLES, config, dag_file=dag_file)
    wanted = dag_id if dag_id is not None else parsing_dag_id()
    if wanted:
        only = selected_dags(config_path, wanted)
        if only is not None:
            return only
    cfg = load_config_isolated(config_path)
    dags: dict[str, Any] = {}
    broken = list(cfg.broken)
    for t in cfg.tables:
        try:
            built = table_dags(t)
        except Exception as exc:  # noqa: BLE001 - e.g. a schedule Airflow refuses: this table only
            error = f"{config_path}: table {t.name!r}: {type(exc).__name__}: {clip(str(exc), 400)[1:-1]}"
            broken.append(BrokenEntry(index=-1, name=t.name, error=error, raw=t.model_dump(mode="json")))
            continue
        dags.update({d.dag_id: d for d in built})
    for b in broken:
        log.error("snowberg: table config entry not loaded: %s", b.error)
        warnings.warn(f"snowberg: table config entry not loaded: {b.error}", InvalidTableConfigWarning, stacklevel=2)
        dag = build_invalid_entry_dag(b)
        dags[dag.dag_id] = dag
    return dags
