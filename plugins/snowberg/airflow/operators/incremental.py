"""Operators for watermark loads: plan → load → publish.

Example (what ``snowberg.airflow.dag_factory`` builds for each configured table)::

    plan = SnowbergPlanOperator(task_id="plan", table_config=cfg.model_dump(mode="json"))
    load = SnowbergLoadOperator(task_id="load", table_config=..., window=plan.output)
    publish = SnowbergPublishOperator(task_id="publish", table_config=..., window=plan.output)
    plan >> load >> publish
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from snowberg.airflow.lineage import LoadLineage
from snowberg.config.table_config import TableConfig


def _cfg(raw: dict[str, Any] | TableConfig) -> TableConfig:
    return raw if isinstance(raw, TableConfig) else TableConfig.model_validate(raw)


def _attempt_id(context: Any) -> str:
    """The run id, plus the clear number once the whole run was cleared.

    A task retry keeps the plan (and so this id): a load that already
    committed appends nothing. Clearing the run, or re-running a backfill
    with "reprocess" (Airflow clears the same run id), re-plans: the new
    plan must reload its window, not find the earlier commit and skip.
    """
    dag_run = context.get("dag_run")
    n = getattr(dag_run, "clear_number", 0) or 0
    return str(context["run_id"]) if n == 0 else f"{context['run_id']}#clear{n}"


class SnowbergTableOperator(BaseOperator):
    """The base of the operators that load one configured table: the config, its Snowflake connection and catalog.

    ``table_config`` is the table's entry as the DAG factory validated it
    (JSON, so the operator serializes); it is validated again here, cheaply.
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog")
    ui_color = "#d6ecfa"

    def __init__(
        self,
        *,
        table_config: dict[str, Any],
        snowflake_conn_id: str | None = None,
        catalog: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        cfg = _cfg(table_config)  # validates; cheap (pydantic only)
        self.table_config = cfg.model_dump(mode="json")
        self.snowflake_conn_id = snowflake_conn_id or cfg.snowflake_conn_id
        self.catalog = catalog or cfg.catalog

    @property
    def cfg(self) -> TableConfig:
        return _cfg(self.table_config)


class SnowbergPlanOperator(SnowbergTableOperator):
    """Reconcile the watermark mirror and fix this run's window (returned as XCom).

    Run params (validated before any SQL): ``window_start``/``window_end``
    (a backfill of that window), ``number_start``/``number_end`` (a backfill
    of a NUMBER cursor's range), ``full_refresh``, ``dry_run``. A run created
    by a backfill without params reloads its data interval (time cursors; a
    NUMBER cursor fails before any SQL and says to use the number params).
    """

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.config.run_params import resolve_run
        from snowberg.core.window import Mode
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.iceberg.state import AirflowVariables, read_state
        from snowberg.load.plan import check_backfill_request, plan_run
        from snowberg.load.publish import reconcile_before_plan
        from snowberg.load.slices import plan_slices
        from snowberg.snowflake.source import snowflake_hook

        cfg = self.cfg
        dag_run = context.get("dag_run")
        run_type = getattr(dag_run, "run_type", None)
        run_type = getattr(run_type, "value", run_type)
        request = resolve_run(
            dict(context.get("params") or {}),
            run_type=run_type,
            interval_start=context.get("data_interval_start"),
            interval_end=context.get("data_interval_end"),
        )
        self.log.info("run %s (%s): %s", context["run_id"], run_type, request)
        catalog = open_catalog(self.catalog)
        table, action = reconcile_before_plan(cfg, catalog, AirflowVariables())
        self.log.info("watermark mirror %s: %s", cfg.variable_key, action)
        if request.mode is Mode.BACKFILL:
            # From the table's metadata alone: a request that cannot work fails before Snowflake is touched.
            check_backfill_request(cfg, read_state(table), request.start, request.end)
        hook = snowflake_hook(self.snowflake_conn_id, cfg)
        conn = hook.get_conn()
        try:
            window = plan_run(
                cfg,
                conn,
                table,
                run_id=_attempt_id(context),
                mode=request.mode,
                start=request.start,
                end=request.end,
                dry_run=request.dry_run,
            )
            # A large window is cut by cursor value now, so retries read the same slices.
            window = plan_slices(cfg, conn, window)
        finally:
            conn.close()
        return window.to_dict()


class SnowbergLoadOperator(LoadLineage, SnowbergTableOperator):
    """Extract the planned window and commit it to Iceberg in one commit (idempotent per run)."""

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "window")

    def __init__(self, *, window: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.window = window

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.airflow.metrics import observed_load
        from snowberg.core.window import Window
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.load.extract import load_window
        from snowberg.snowflake.source import snowflake_hook

        cfg = self.cfg
        w = Window.from_dict(self.window)
        catalog = open_catalog(self.catalog)
        hook = snowflake_hook(self.snowflake_conn_id, cfg)
        conn = hook.get_conn()
        try:
            result = load_window(cfg, conn, catalog, w)
        finally:
            conn.close()
        return observed_load(self, cfg.name, result.to_dict())


class SnowbergPublishOperator(SnowbergTableOperator):
    """Read the commit back, then mirror the watermark into the table's Airflow Variable."""

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "window")

    def __init__(self, *, window: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.window = window

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.core.window import Window
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.iceberg.state import AirflowVariables
        from snowberg.load.publish import publish

        cfg = self.cfg
        w = Window.from_dict(self.window)
        if w.dry_run:
            from airflow.sdk.exceptions import AirflowSkipException

            # Nothing was committed, so there is nothing to publish or to check
            # (the checks downstream skip too: a dry run of a first load has no table yet).
            raise AirflowSkipException(f"dry run of {w.mode} window: nothing committed, nothing to publish")
        return publish(cfg, open_catalog(self.catalog), w, AirflowVariables())
