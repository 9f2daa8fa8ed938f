"""Operators for watermark loads: plan → load → publish.

Each takes the table settings its code path reads as keyword arguments named
after the table config's keys (``snowberg.airflow.operators.arguments``); the
DAG factory passes a configured table's values with ``operator_arguments``::

    plan = SnowbergPlanOperator(task_id="plan", **operator_arguments(SnowbergPlanOperator, cfg))
    load = SnowbergLoadOperator(task_id="load", window=plan.output, **operator_arguments(SnowbergLoadOperator, cfg))
    publish = SnowbergPublishOperator(
        task_id="publish", window=plan.output, **operator_arguments(SnowbergPublishOperator, cfg)
    )
    plan >> load >> publish

Written by hand, a load of ``SHOP.PUBLIC.ORDERS`` merged on ``id``::

    SnowbergLoadOperator(
        task_id="load",
        table_name="orders",
        source={"table": "SHOP.PUBLIC.ORDERS"},
        target="shop.orders",
        cursor={"column": "updated_at", "lookback": "10m"},
        primary_key=["id"],
        window=plan.output,
    )

Arguments shared by these operators (their meaning is the table config's, see
docs/configuration.md):

* ``table_name``: the table's ``name`` (logs, the Snowflake query tag);
* ``source``: ``{"table": "DB.SCHEMA.TABLE"}`` or ``{"query": "SELECT ..."}``
  (a ``Source`` or its dict);
* ``target``: the Iceberg table ``namespace.table``;
* ``snowflake_conn_id``, ``catalog``: the Airflow connection and the pyiceberg
  catalog (templated).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import AssetAlias, BaseOperator, SkipMixin

from snowberg.airflow.lineage import LoadLineage, record_load
from snowberg.airflow.operators.arguments import Settings, TableSettings
from snowberg.airflow.operators.idle import end_idle_run, skip_downstream
from snowberg.config.check_settings import HealthThresholds
from snowberg.config.table_config import (
    ColumnAddPolicy,
    ColumnDropPolicy,
    ColumnSettings,
    Cursor,
    MergeStrategy,
    OnPolicy,
    PartitionField,
    Source,
    TableConfig,
    WriteMode,
)
from snowberg.config.watch_settings import WatchSettings
from snowberg.core.attempts import attempt_id


def _attempt_id(context: Any) -> str:
    """The run id, plus the clear number once the whole run was cleared.

    A task retry keeps the plan (and so this id): a load that already
    committed appends nothing. Clearing the run, or re-running a backfill
    with "reprocess" (Airflow clears the same run id), re-plans: the new
    plan must reload its window, not find the earlier commit and skip.
    """
    dag_run = context.get("dag_run")
    return attempt_id(str(context["run_id"]), getattr(dag_run, "clear_number", 0) or 0)


class SnowbergTableOperator(TableSettings, BaseOperator):
    """The base of the operators that work on one configured table: its connection, catalog and settings.

    Subclasses take the settings they read as keyword arguments (see the
    module doc), set them as attributes and call ``check_table_settings()``.
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog")
    ui_color = "#d6ecfa"

    def __init__(self, **kwargs: Any) -> None:
        # Defined (not inherited) on purpose: for a mapped task, Airflow reads the defaults of every
        # ``__init__`` between the operator and BaseOperator, and an inherited one would hand it
        # BaseOperator's own (``inlets=None`` ...), which breaks the mapped slices' task context.
        super().__init__(**kwargs)

    @property
    def cfg(self) -> TableConfig:
        """The table config of this operator's arguments (what the library calls take)."""
        return self.build_config()


def load_and_record(operator: Any, cfg: TableConfig, conn: Any, catalog: Any, window: Any) -> dict[str, Any]:
    """Load ``window``, fill a column its commit added, record the lineage facts: the load task's work.

    The ``load`` task and a plan that loads a small window itself (``inline_load_rows``) both do it. Whatever
    the load found (committed, or already committed by an earlier try), a column its commit added is filled
    for the rows loaded before, once (the table records what is pending). The lineage facts are read now,
    from this connection and catalog: the listener's fork does no I/O.
    """
    from snowberg.load.column_backfill import backfill_added_columns
    from snowberg.load.extract import load_window

    done = load_window(cfg, conn, catalog, window).to_dict()
    if not window.dry_run:
        filled = backfill_added_columns(cfg, conn, catalog, run_id=window.run_id, dag_id=window.dag_id)
        if filled is not None:
            done["column_backfill"] = filled.to_dict()
    record_load(
        operator,
        source_table=cfg.source.table,
        snowflake_conn_id=operator.snowflake_conn_id,
        conn=conn,
        catalog_ref=operator.catalog,
        catalog=catalog,
        target=cfg.target,
        result=done,
    )
    return done


def inline_alias(table_name: str) -> AssetAlias:
    """The plan task's outlet: the table's Asset event goes through it only when the plan itself loaded rows.

    An idle plan must not tell downstream DAGs that the table changed, and Airflow sends an event for every
    Asset in a succeeding task's outlets; through an ``AssetAlias`` the task names the Asset at run time
    (Airflow's way to emit asset events conditionally), so only a plan that committed sends one.
    """
    return AssetAlias(name=f"snowberg_inline_load_{table_name}")


class SnowbergPlanOperator(LoadLineage, SnowbergTableOperator, SkipMixin):
    """Reconcile the watermark mirror and fix this run's window (returned as XCom).

    An idle run (an incremental window with nothing new) ends here: the plan
    records that it proved the lake current (``snowberg.iceberg.current``,
    what the freshness check measures) and skips every task downstream the
    way ``ShortCircuitOperator`` does (``SkipMixin.skip``: the plan succeeds,
    the rest shows *skipped*), so no further task process starts and the run
    sends Snowflake the plan's statement and the source's policy metadata query.

    A small incremental window (at most ``inline_load_rows`` rows, not sliced) is loaded here too, on the
    plan's Snowflake connection and catalog: extract and commit (the same gate as the ``load`` task), publish,
    and the table-health report; then the downstream tasks are skipped. Each task start pays a process, the
    imports of pyiceberg, pyarrow and the connector, the DAG file's parse and a login: for a handful of rows
    that was most of a run's cost (docs/performance.md, "Busy runs"). The table's Asset event is sent through
    ``inline_alias`` (``asset_alias``), as ``publish`` would send it. When the report breaches a limit with
    ``fail_on_breach``, ``table_health`` is left to run (and fail, with its alert). A retry of a plan whose
    commit landed plans again from the table's state (the commit moved its watermark): the gate, not the
    window, keeps every row once.

    Run params (validated before any SQL): ``window_start``/``window_end``
    (a backfill of that window), ``number_start``/``number_end`` (a backfill
    of a NUMBER cursor's range), ``full_refresh``, ``dry_run``. A run created
    by a backfill without params reloads its data interval (time cursors; a
    NUMBER cursor fails before any SQL and says to use the number params).
    Backfills, full refreshes and dry runs always go through the ``load`` task.

    :param table_name: the table's name (logs, the Snowflake query tag).
    :param source: the Snowflake table or query (``Source`` or its dict).
    :param target: the Iceberg table ``namespace.table``.
    :param cursor: the watermark cursor (``Cursor`` or its dict); None: every run is a full refresh.
    :param primary_key: the key columns (checked against the table's recorded identity; slices cut by it).
    :param geo_format: the session's GEOGRAPHY/GEOMETRY output format (``geojson`` or ``wkt``).
    :param max_rows_per_slice: a window with more rows is cut into slices by cursor value.
    :param watch: the table's ``watch`` settings (``WatchSettings`` or its dict): a watched table's run reads the
        source's change token first and records what it saw for the triggerer (docs/event-driven.md).
    :param columns: the ``columns`` section (``ColumnSettings`` or its dict): excluded columns are never read,
        hashed ones are hashed in Snowflake.
    :param on_policy: ``fail``, ``warn`` or ``allow``: a masking or row access policy on the source.
    :param inline_load_rows: load windows of at most this many rows here (0: never). Only with ``asset_alias``
        and ``asset``: the skipped ``publish`` would have sent the table's Asset event, so this task must.
        The load's settings below are used only then.
    :param asset_alias: the ``AssetAlias`` (put it in ``outlets``) through which an inline load sends the
        ``asset``'s event (``inline_alias`` names it as the DAG factory does).
    :param asset: the table's Asset (what ``publish`` has in its outlets).
    :param write_mode: as ``SnowbergLoadOperator``'s.
    :param merge_strategy: as ``SnowbergLoadOperator``'s.
    :param partition_by: as ``SnowbergLoadOperator``'s.
    :param number_as_long: as ``SnowbergLoadOperator``'s.
    :param timestamp_nanos: as ``SnowbergLoadOperator``'s.
    :param batch_rows: as ``SnowbergLoadOperator``'s.
    :param on_column_dropped: as ``SnowbergLoadOperator``'s.
    :param on_column_added: as ``SnowbergLoadOperator``'s (an inline load backfills an added column as ``load`` does).
    :param health: the table-health limits (``HealthThresholds`` or its dict), as ``TableHealthOperator``'s.
    :param snowflake_conn_id: the Snowflake connection (templated).
    :param catalog: the pyiceberg catalog (templated).
    """

    inherits_from_skipmixin = True  # Airflow's NotPreviouslySkippedDep: a cleared downstream task stays skipped

    def __init__(
        self,
        *,
        table_name: str,
        source: Source | Settings,
        target: str,
        cursor: Cursor | Settings | None = None,
        primary_key: Sequence[str] = (),
        geo_format: str = "geojson",
        max_rows_per_slice: int = 250_000,
        watch: WatchSettings | Settings | None = None,
        columns: ColumnSettings | Settings | None = None,
        on_policy: OnPolicy | str = OnPolicy.FAIL,
        inline_load_rows: int = 10_000,
        asset_alias: AssetAlias | None = None,
        asset: Any = None,
        write_mode: WriteMode | str | None = None,
        merge_strategy: MergeStrategy | str = MergeStrategy.MERGE_ON_READ,
        partition_by: Sequence[PartitionField | Settings | str] = (),
        number_as_long: Sequence[str] = (),
        timestamp_nanos: str = "error",
        batch_rows: int = 250_000,
        on_column_dropped: ColumnDropPolicy | str = ColumnDropPolicy.FAIL,
        on_column_added: ColumnAddPolicy | str | None = ColumnAddPolicy.NULL,
        health: HealthThresholds | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table_name = table_name
        self.source = source
        self.target = target
        self.cursor = cursor
        self.primary_key = primary_key
        self.geo_format = geo_format
        self.max_rows_per_slice = max_rows_per_slice
        self.watch = watch
        self.columns = columns or {}
        self.on_policy = on_policy
        self.inline_load_rows = inline_load_rows
        self.asset_alias = asset_alias
        self.asset = asset
        self.write_mode = write_mode
        self.merge_strategy = merge_strategy
        self.partition_by = partition_by
        self.number_as_long = number_as_long
        self.timestamp_nanos = timestamp_nanos
        self.batch_rows = batch_rows
        self.on_column_dropped = on_column_dropped
        self.on_column_added = on_column_added
        self.health = health
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.config.run_params import resolve_run
        from snowberg.core.window import Mode
        from snowberg.iceberg.catalogs import lake_errors, open_catalog
        from snowberg.iceberg.gate import nothing_new
        from snowberg.iceberg.state import AirflowVariables, read_state
        from snowberg.load.plan import check_backfill_request, plan_run
        from snowberg.load.publish import reconcile_before_plan, record_watched_plan
        from snowberg.load.slices import plan_slices
        from snowberg.snowflake.hook import snowflake_connection

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
        with lake_errors(self.catalog):
            catalog = open_catalog(self.catalog)
            table, action = reconcile_before_plan(cfg, catalog, AirflowVariables())
            self.log.info("watermark mirror %s: %s", cfg.variable_key, action)
            if request.mode is Mode.BACKFILL:
                # From the table's metadata alone: a request that cannot work fails before Snowflake is touched.
                check_backfill_request(cfg, read_state(table), request.start, request.end)
            with snowflake_connection(self.snowflake_conn_id, cfg) as conn:
                window = plan_run(
                    cfg,
                    conn,
                    table,
                    run_id=_attempt_id(context),
                    dag_id=self.dag_id,
                    mode=request.mode,
                    start=request.start,
                    end=request.end,
                    dry_run=request.dry_run,
                )
                # A large window is cut by cursor value now, so retries read the same slices.
                window = plan_slices(cfg, conn, window)
                idle = nothing_new(window)
                record_watched_plan(self.target, window, AirflowVariables(), idle=idle)
                if not idle and self.loads_inline(window):
                    self._load_inline(context, cfg, conn, catalog, window)
                    return window.to_dict()
        if idle:
            self._end_idle_run(context, window)
        return window.to_dict()

    def loads_inline(self, window: Any) -> bool:
        """Does this task load ``window``: incremental, unsliced, at most ``inline_load_rows``, an Asset to tell?"""
        from snowberg.core.window import Mode
        from snowberg.load.slices import SLICE_BOUNDS

        return (
            self.inline_load_rows > 0
            and self.asset_alias is not None
            and self.asset is not None
            and window.mode == Mode.INCREMENTAL
            and not window.dry_run
            and window.rows_in_window is not None
            and window.rows_in_window <= self.inline_load_rows
            and not window.extra.get(SLICE_BOUNDS)
        )

    def _load_inline(self, context: Any, cfg: TableConfig, conn: Any, catalog: Any, window: Any) -> None:
        """What ``load``, ``publish`` and (unless it would fail) ``table_health`` do, here; then skip them."""
        from snowberg.airflow.metrics import observed_load
        from snowberg.airflow.operators.health import failing, health_report
        from snowberg.iceberg.state import AirflowVariables
        from snowberg.iceberg.tables import find_table
        from snowberg.load.publish import publish

        self.log.info(
            "%s rows in the window: loading them in this task (inline_load_rows %s)",
            window.rows_in_window,
            self.inline_load_rows,
        )
        done = load_and_record(self, cfg, conn, catalog, window)  # as the load task does
        published = publish(cfg, catalog, window, AirflowVariables())
        if self.asset_alias is not None and self.asset is not None:
            context["outlet_events"][self.asset_alias].add(self.asset)
        observed_load(self, cfg.name, done)
        table = find_table(catalog, cfg.target)
        thresholds = cfg.health or HealthThresholds()
        keep = set()
        if table is not None:
            report = health_report(table, name=cfg.target, thresholds=thresholds, log=self.log)
            if failing(report, thresholds):
                keep.add("table_health")  # it runs (its trigger rule is none_failed) and fails with its alert
            for b in report.breaches:
                self.log.warning("health limit breached: %s", b.message)
        skip_downstream(
            self,
            context,
            result=window.to_dict(),
            why=f"loaded in the plan task: {done.get('rows', 0)} rows, {published.get('rows_loaded', 0)} published",
            keep=keep,
        )

    def _end_idle_run(self, context: Any, window: Any) -> None:
        """Record that this run proved the lake current, push the plan, and skip everything downstream."""
        from snowberg.iceberg.current import CurrentProof

        end_idle_run(
            self,
            context,
            target=self.target,
            proof=CurrentProof(
                proven_at=window.planned_at,
                run_id=window.run_id,
                dag_id=self.dag_id,
                watermark=window.base_watermark,
                snapshot_id=window.base_snapshot_id,
            ),
            result=window.to_dict(),
            why=f"nothing new for {self.table_name}: the lake is current as of {window.planned_at}",
        )


class SnowbergLoadOperator(LoadLineage, SnowbergTableOperator):
    r"""Extract the planned window and commit it to Iceberg in one commit (idempotent per run).

    :param window: the plan task's XCom (``plan.output``; templated).
    :param table_name: the table's name (logs, the Snowflake query tag).
    :param source: the Snowflake table or query (``Source`` or its dict).
    :param target: the Iceberg table ``namespace.table``.
    :param cursor: the watermark cursor (``Cursor`` or its dict); None for a full-refresh table.
    :param primary_key: the key columns: rows merge on them, and each must be filled.
    :param write_mode: ``merge`` or ``append``; None: merge when there is a primary key.
    :param merge_strategy: ``merge_on_read`` (position deletes) or ``copy_on_write``.
    :param partition_by: the partition spec of a new table (``["day(updated_at)"]`` or ``PartitionField``\ s).
    :param number_as_long: NUMBER columns written as long (see docs/type-mapping.md).
    :param timestamp_nanos: ``error`` or ``truncate`` for nanosecond timestamps.
    :param geo_format: GEOGRAPHY/GEOMETRY as ``geojson`` or ``wkt``.
    :param batch_rows: rows per written batch.
    :param on_column_dropped: ``fail`` or ``keep_null`` when a column is gone from the source.
    :param on_column_added: ``null`` or ``backfill``: after the commit, a column the source gained is re-read by
        key for the rows loaded before (``snowberg.load.column_backfill``; also on a retry whose load had committed).
    :param columns: the ``columns`` section (``ColumnSettings`` or its dict): excluded columns are never read,
        hashed ones are read as their salted SHA-256 (the salt from the Airflow Variable ``columns.hash_salt``).
    :param snowflake_conn_id: the Snowflake connection (templated).
    :param catalog: the pyiceberg catalog (templated).
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "window")

    def __init__(
        self,
        *,
        window: Any,
        table_name: str,
        source: Source | Settings,
        target: str,
        cursor: Cursor | Settings | None = None,
        primary_key: Sequence[str] = (),
        write_mode: WriteMode | str | None = None,
        merge_strategy: MergeStrategy | str = MergeStrategy.MERGE_ON_READ,
        partition_by: Sequence[PartitionField | Settings | str] = (),
        number_as_long: Sequence[str] = (),
        timestamp_nanos: str = "error",
        geo_format: str = "geojson",
        batch_rows: int = 250_000,
        on_column_dropped: ColumnDropPolicy | str = ColumnDropPolicy.FAIL,
        on_column_added: ColumnAddPolicy | str | None = ColumnAddPolicy.NULL,
        columns: ColumnSettings | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.window = window
        self.table_name = table_name
        self.source = source
        self.target = target
        self.cursor = cursor
        self.primary_key = primary_key
        self.write_mode = write_mode
        self.merge_strategy = merge_strategy
        self.partition_by = partition_by
        self.number_as_long = number_as_long
        self.timestamp_nanos = timestamp_nanos
        self.geo_format = geo_format
        self.batch_rows = batch_rows
        self.on_column_dropped = on_column_dropped
        self.on_column_added = on_column_added
        self.columns = columns or {}
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.airflow.metrics import observed_load
        from snowberg.core.window import Window
        from snowberg.iceberg.catalogs import lake_errors, open_catalog
        from snowberg.snowflake.hook import snowflake_connection

        cfg = self.cfg
        w = Window.from_dict(self.window)
        with lake_errors(self.catalog):
            catalog = open_catalog(self.catalog)
            with snowflake_connection(self.snowflake_conn_id, cfg) as conn:
                done = load_and_record(self, cfg, conn, catalog, w)
        return observed_load(self, cfg.name, done)


class SnowbergPublishOperator(SnowbergTableOperator):
    """Read the commit back, then mirror the watermark into the table's Airflow Variable.

    Reads the Iceberg table only (no Snowflake connection).

    :param window: the plan task's XCom (``plan.output``; templated).
    :param table_name: the table's name.
    :param source: the Snowflake table or query (``Source`` or its dict): part of the table's identity.
    :param target: the Iceberg table ``namespace.table`` (its Variable is named after it).
    :param watch: the table's ``watch`` settings: a watched table's run records that its rows are in the lake.
    :param catalog: the pyiceberg catalog (templated).
    """

    template_fields: Sequence[str] = ("catalog", "window")

    def __init__(
        self,
        *,
        window: Any,
        table_name: str,
        source: Source | Settings,
        target: str,
        watch: WatchSettings | Settings | None = None,
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.window = window
        self.table_name = table_name
        self.source = source
        self.target = target
        self.watch = watch
        self.catalog = catalog
        self.check_table_settings()

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.core.window import Window
        from snowberg.iceberg.catalogs import lake_errors, open_catalog
        from snowberg.iceberg.state import AirflowVariables
        from snowberg.load.publish import publish

        cfg = self.cfg
        w = Window.from_dict(self.window)
        if w.dry_run:
            from airflow.sdk.exceptions import AirflowSkipException

            # Nothing was committed, so there is nothing to publish or to check
            # (the checks downstream skip too: a dry run of a first load has no table yet).
            raise AirflowSkipException(f"dry run of {w.mode} window: nothing committed, nothing to publish")
        with lake_errors(self.catalog):
            return publish(cfg, open_catalog(self.catalog), w, AirflowVariables())
