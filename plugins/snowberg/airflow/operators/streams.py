"""Operators for stream capture: consume → load → cleanup, a staleness check, and a CHANGES backfill.

Each takes the table settings its code path reads as keyword arguments named
after the table config's keys (``snowberg.airflow.operators.arguments``): at
least ``table_name``, ``source``, ``target``, ``primary_key`` and ``stream``
(the ``StreamSource`` or its dict). ``build_stream_tasks`` wires them for a
configured table (what the DAG factory builds for a table with ``stream:``)::

    tasks = build_stream_tasks(cfg, outlets=[table_asset(cfg)])
    # changes_backfill >> consume >> load >> cleanup >> stream_staleness

By hand::

    consume = SnowbergStreamConsumeOperator(
        task_id="consume",
        table_name="orders_cdc",
        source={"table": "SHOP.PUBLIC.ORDERS"},
        target="shop.orders",
        primary_key=["order_id"],
        stream={"name": "SHOP.PUBLIC.ORDERS_SNOWBERG_STREAM", "create": True},
    )

Run params (``snowberg.streams.params``): ``recover_stale_stream``,
``changes_start``/``changes_end``/``changes_target``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseOperator, SkipMixin

from snowberg.airflow.lineage import StreamLoadLineage, record_load
from snowberg.airflow.operators.arguments import Settings, TableSettings, operator_arguments
from snowberg.airflow.operators.idle import end_idle_run
from snowberg.config.stream_settings import StreamSource
from snowberg.config.table_config import ColumnDropPolicy, ColumnSettings, PartitionField, Source, TableConfig
from snowberg.config.watch_settings import WatchSettings


class _StreamOperator(TableSettings, BaseOperator):
    """The stream operators' base: the config of their arguments, its stream settings, a Snowflake connection."""

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog")
    ui_color = "#e0f2f1"

    def __init__(self, **kwargs: Any) -> None:
        # Defined, not inherited: see ``SnowbergTableOperator.__init__`` (Airflow reads each class's defaults).
        super().__init__(**kwargs)

    def configs(self) -> tuple[TableConfig, StreamSource]:
        """The table config built from the arguments, and its stream settings."""
        cfg = self.build_config()
        assert cfg.stream is not None  # a required argument of every stream operator
        return cfg, cfg.stream

    def connect(self, cfg: TableConfig) -> Any:
        """A Snowflake connection (autocommit; the consume step opens its own transaction)."""
        from snowberg.snowflake.hook import snowflake_hook

        return snowflake_hook(cfg.snowflake_conn_id, cfg).get_conn()


class SnowbergStreamConsumeOperator(_StreamOperator, SkipMixin):
    """Consume the stream into the staging table as one batch, in one Snowflake transaction.

    Creates the stream when configured (``stream.create``) and stops with a
    recovery hint when it is stale. With the run param
    ``recover_stale_stream=true`` it re-creates the stream with initial rows
    first; the load then replaces the target. Returns the batch (XCom).

    An idle run ends here: when the stream has no change data and no staged
    batch waits for the lake (one statement, ``SYSTEM$STREAM_HAS_DATA``, which
    also keeps an empty stream from going stale), the task records that the
    lake is proven current (what the freshness check measures) and skips every
    task after it, as the watermark plan does.

    :param table_name: the table's name (logs, the Snowflake query tag).
    :param source: the Snowflake table (``Source`` or its dict): the stream's table unless ``stream.on_table``.
    :param target: the Iceberg table ``namespace.table``.
    :param primary_key: the key columns updates and deletes apply by (a standard stream needs them).
    :param stream: the stream, its staging table and changelog (``StreamSource`` or its dict).
    :param geo_format: GEOGRAPHY/GEOMETRY as ``geojson`` or ``wkt`` (the session's output format).
    :param watch: the table's ``watch`` settings: a watched table's run records what it consumed for the
        triggerer (docs/event-driven.md).
    :param columns: the ``columns`` section (``ColumnSettings`` or its dict): excluded columns are never staged,
        hashed ones are staged as their salted SHA-256 (the salt from the Airflow Variable ``columns.hash_salt``).
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
        primary_key: Sequence[str] = (),
        stream: StreamSource | Settings,
        geo_format: str = "geojson",
        watch: WatchSettings | Settings | None = None,
        columns: ColumnSettings | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table_name = table_name
        self.source = source
        self.target = target
        self.primary_key = primary_key
        self.stream = stream
        self.geo_format = geo_format
        self.watch = watch
        self.columns = columns or {}
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.iceberg.catalogs import lake_errors, open_catalog
        from snowberg.iceberg.state import AirflowVariables
        from snowberg.iceberg.watch_state import RunPhase, record_run
        from snowberg.streams.params import resolve_stream_params
        from snowberg.streams.steps import consume_step, idle_step

        cfg, stream = self.configs()
        request = resolve_stream_params(dict(context.get("params") or {}))
        conn = self.connect(cfg)
        try:
            with lake_errors(self.catalog):
                catalog = open_catalog(self.catalog)
                probed_at = datetime.now(UTC)
                idle = None if request.recover else idle_step(cfg, stream, conn, catalog)
                # A watched table's record: done when idle; else running, as the stream's offset moved
                # (change data from now on is the next run's) and the batch is not in the lake yet.
                seen = {"run_id": context["run_id"], "dag_id": self.dag_id, "observed_at": probed_at.isoformat()}
                if idle is not None:
                    if cfg.watch is not None:
                        record_run(
                            cfg.target,
                            AirflowVariables(),
                            phase=RunPhase.DONE,
                            signal="false",
                            snapshot_id=idle.snapshot_id,
                            **seen,
                        )
                    return self._end_idle_run(context, cfg, idle, probed_at)
                consumed = consume_step(cfg, stream, conn, catalog, run_id=context["run_id"], recover=request.recover)
                if cfg.watch is not None:
                    record_run(cfg.target, AirflowVariables(), phase=RunPhase.RUNNING, signal=None, **seen)
                return consumed
        finally:
            conn.close()

    def _end_idle_run(self, context: Any, cfg: TableConfig, st: Any, probed_at: datetime) -> dict[str, Any]:
        """Record the proof of currency and skip the rest of the run; returns the task's result."""
        from snowberg.iceberg.current import CurrentProof

        proven_at = probed_at.isoformat()
        result = {"status": "idle", "committed_batch_id": st.batch_id, "proven_current_at": proven_at}
        end_idle_run(
            self,
            context,
            target=cfg.target,
            proof=CurrentProof(
                proven_at=proven_at,
                run_id=context["run_id"],
                dag_id=self.dag_id,
                watermark=None,  # a stream table has no watermark
                snapshot_id=st.snapshot_id,
            ),
            result=result,
            why=f"stream of {cfg.name} has no change data and nothing is staged: the lake is current as of {proven_at}",
        )
        return result


class SnowbergStreamLoadOperator(StreamLoadLineage, _StreamOperator):
    """Apply the staged batches up to the consumed one to Iceberg in one commit (idempotent).

    :param consumed: the consume task's XCom (``consume.output``; templated).
    :param table_name: the table's name (logs, the Snowflake query tag).
    :param source: the Snowflake table (``Source`` or its dict): the stream's table unless ``stream.on_table``.
    :param target: the Iceberg table ``namespace.table``.
    :param primary_key: the key columns updates and deletes apply by (a standard stream needs them).
    :param stream: the stream, its staging table and changelog (``StreamSource`` or its dict).
    :param partition_by: the partition spec of a new table.
    :param number_as_long: NUMBER columns written as long.
    :param timestamp_nanos: ``error`` or ``truncate`` for nanosecond timestamps.
    :param geo_format: GEOGRAPHY/GEOMETRY as ``geojson`` or ``wkt``.
    :param batch_rows: rows per written batch.
    :param on_column_dropped: ``fail`` or ``keep_null`` when a column is gone from the source.
    :param columns: the ``columns`` section (``ColumnSettings`` or its dict): excluded columns are never staged,
        hashed ones are staged as their salted SHA-256 (the salt from the Airflow Variable ``columns.hash_salt``).
    :param snowflake_conn_id: the Snowflake connection (templated).
    :param catalog: the pyiceberg catalog (templated).
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "consumed")

    def __init__(
        self,
        *,
        consumed: Any = None,
        table_name: str,
        source: Source | Settings,
        target: str,
        primary_key: Sequence[str] = (),
        stream: StreamSource | Settings,
        partition_by: Sequence[PartitionField | Settings | str] = (),
        number_as_long: Sequence[str] = (),
        timestamp_nanos: str = "error",
        geo_format: str = "geojson",
        batch_rows: int = 250_000,
        on_column_dropped: ColumnDropPolicy | str = ColumnDropPolicy.FAIL,
        columns: ColumnSettings | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.consumed = consumed
        self.table_name = table_name
        self.source = source
        self.target = target
        self.primary_key = primary_key
        self.stream = stream
        self.partition_by = partition_by
        self.number_as_long = number_as_long
        self.timestamp_nanos = timestamp_nanos
        self.geo_format = geo_format
        self.batch_rows = batch_rows
        self.on_column_dropped = on_column_dropped
        self.columns = columns or {}
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.airflow.metrics import observed_load
        from snowberg.iceberg.catalogs import lake_errors, open_catalog
        from snowberg.streams.steps import load_step

        cfg, stream = self.configs()
        conn = self.connect(cfg)
        try:
            with lake_errors(self.catalog):
                catalog = open_catalog(self.catalog)
                result = load_step(
                    cfg,
                    stream,
                    conn,
                    catalog,
                    run_id=context["run_id"],
                    dag_id=self.dag_id,
                    consumed=self.consumed,
                )
                record_load(
                    self,
                    source_table=stream.on_table or cfg.source.table,
                    snowflake_conn_id=self.snowflake_conn_id,
                    conn=conn,
                    catalog_ref=self.catalog,
                    catalog=catalog,
                    target=cfg.target,
                    result=result,
                    rows_key="rows_appended",
                )
        finally:
            conn.close()
        return observed_load(self, cfg.name, result)


class SnowbergStreamCleanupOperator(_StreamOperator):
    """Read the commit back, delete the staged rows it holds, mirror the batch id to a Variable.

    :param table_name: the table's name (logs, the Snowflake query tag).
    :param source: the Snowflake table (``Source`` or its dict): the stream's table unless ``stream.on_table``.
    :param target: the Iceberg table ``namespace.table``.
    :param primary_key: the key columns updates and deletes apply by (a standard stream needs them).
    :param stream: the stream, its staging table and changelog (``StreamSource`` or its dict).
    :param geo_format: GEOGRAPHY/GEOMETRY as ``geojson`` or ``wkt`` (the session's output format).
    :param watch: the table's ``watch`` settings: a watched table's run records that its batch is in the lake.
    :param snowflake_conn_id: the Snowflake connection (templated).
    :param catalog: the pyiceberg catalog (templated).
    """

    def __init__(
        self,
        *,
        table_name: str,
        source: Source | Settings,
        target: str,
        primary_key: Sequence[str] = (),
        stream: StreamSource | Settings,
        geo_format: str = "geojson",
        watch: WatchSettings | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table_name = table_name
        self.source = source
        self.target = target
        self.primary_key = primary_key
        self.stream = stream
        self.geo_format = geo_format
        self.watch = watch
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.iceberg.catalogs import lake_errors, open_catalog
        from snowberg.iceberg.state import AirflowVariables
        from snowberg.iceberg.watch_state import finish_run
        from snowberg.streams.steps import cleanup_step

        cfg, stream = self.configs()
        conn = self.connect(cfg)
        try:
            with lake_errors(self.catalog):
                done = cleanup_step(cfg, stream, conn, open_catalog(self.catalog), variables=AirflowVariables())
        finally:
            conn.close()
        if cfg.watch is not None:
            finish_run(
                cfg.target,
                AirflowVariables(),
                run_id=context["run_id"],
                watermark=None,
                snapshot_id=done["snapshot_id"],
            )
        return done


class SnowbergStreamStalenessOperator(_StreamOperator):
    """Fail (and so alert through the DAG's notifiers) when the stream is stale or will be within N intervals.

    The margin is ``stream.stale_alert_intervals`` (default 2) × the longest
    interval of ``schedule``. Reads Snowflake only (no catalog).

    :param schedule: the DAG's schedule (preset, cron or duration; the table's ``schedule``); None: daily.
    :param interval: the margin's interval, in place of the schedule's.
    :param table_name: the table's name (logs, the Snowflake query tag).
    :param source: the Snowflake table (``Source`` or its dict): the stream's table unless ``stream.on_table``.
    :param target: the Iceberg table ``namespace.table``.
    :param primary_key: the key columns updates and deletes apply by (a standard stream needs them).
    :param stream: the stream, its staging table and changelog (``StreamSource`` or its dict).
    :param geo_format: GEOGRAPHY/GEOMETRY as ``geojson`` or ``wkt`` (the session's output format).
    :param snowflake_conn_id: the Snowflake connection (templated).
    """

    template_fields: Sequence[str] = ("snowflake_conn_id",)

    def __init__(
        self,
        *,
        schedule: str | None = "@hourly",
        interval: timedelta | None = None,
        table_name: str,
        source: Source | Settings,
        target: str,
        primary_key: Sequence[str] = (),
        stream: StreamSource | Settings,
        geo_format: str = "geojson",
        snowflake_conn_id: str = "snowflake_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.schedule = schedule
        self.interval = interval
        self.table_name = table_name
        self.source = source
        self.target = target
        self.primary_key = primary_key
        self.stream = stream
        self.geo_format = geo_format
        self.snowflake_conn_id = snowflake_conn_id
        self.check_table_settings()

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.streams.params import schedule_interval
        from snowberg.streams.steps import staleness_step

        cfg, stream = self.configs()
        interval = self.interval or schedule_interval(self.schedule) or timedelta(days=1)
        conn = self.connect(cfg)
        try:
            return staleness_step(stream, conn, interval=interval)
        finally:
            conn.close()


class SnowbergStreamChangesOperator(_StreamOperator):
    """Backfill a window of changes with CHANGES (AT/END) when the run params give one; consumes nothing.

    The changes land in the table or in ``stream.changelog_target`` (run param ``changes_target``).

    :param table_name: the table's name (logs, the Snowflake query tag).
    :param source: the Snowflake table (``Source`` or its dict): the stream's table unless ``stream.on_table``.
    :param target: the Iceberg table ``namespace.table``.
    :param primary_key: the key columns updates and deletes apply by (a standard stream needs them).
    :param stream: the stream, its staging table and changelog (``StreamSource`` or its dict).
    :param partition_by: the partition spec of a new table.
    :param number_as_long: NUMBER columns written as long.
    :param timestamp_nanos: ``error`` or ``truncate`` for nanosecond timestamps.
    :param geo_format: GEOGRAPHY/GEOMETRY as ``geojson`` or ``wkt``.
    :param batch_rows: rows per written batch.
    :param on_column_dropped: ``fail`` or ``keep_null`` when a column is gone from the source.
    :param columns: the ``columns`` section (``ColumnSettings`` or its dict): excluded columns are never staged,
        hashed ones are staged as their salted SHA-256 (the salt from the Airflow Variable ``columns.hash_salt``).
    :param snowflake_conn_id: the Snowflake connection (templated).
    :param catalog: the pyiceberg catalog (templated).
    """

    def __init__(
        self,
        *,
        table_name: str,
        source: Source | Settings,
        target: str,
        primary_key: Sequence[str] = (),
        stream: StreamSource | Settings,
        partition_by: Sequence[PartitionField | Settings | str] = (),
        number_as_long: Sequence[str] = (),
        timestamp_nanos: str = "error",
        geo_format: str = "geojson",
        batch_rows: int = 250_000,
        on_column_dropped: ColumnDropPolicy | str = ColumnDropPolicy.FAIL,
        columns: ColumnSettings | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table_name = table_name
        self.source = source
        self.target = target
        self.primary_key = primary_key
        self.stream = stream
        self.partition_by = partition_by
        self.number_as_long = number_as_long
        self.timestamp_nanos = timestamp_nanos
        self.geo_format = geo_format
        self.batch_rows = batch_rows
        self.on_column_dropped = on_column_dropped
        self.columns = columns or {}
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.iceberg.catalogs import lake_errors, open_catalog
        from snowberg.streams.changes import backfill_changes
        from snowberg.streams.params import resolve_stream_params

        cfg, stream = self.configs()
        request = resolve_stream_params(dict(context.get("params") or {}))
        if request.changes_start is None or request.changes_end is None:
            self.log.info("no changes_start/changes_end param: no CHANGES backfill this run")
            return {"status": "not_requested"}
        conn = self.connect(cfg)
        try:
            with lake_errors(self.catalog):
                return backfill_changes(
                    cfg,
                    stream,
                    conn,
                    open_catalog(self.catalog),
                    start=request.changes_start,
                    end=request.changes_end,
                    run_id=context["run_id"],
                    dag_id=self.dag_id,
                    target=request.changes_target,
                )
        finally:
            conn.close()


def build_stream_tasks(cfg: TableConfig, *, outlets: Sequence[Any] = ()) -> dict[str, BaseOperator]:
    """Create and chain a stream table's tasks (call inside ``with DAG(...)``; the DAG takes
    ``snowberg.streams.params.STREAM_PARAM_SCHEMAS`` as its params). The staleness check's
    margin follows the table's ``schedule``."""
    backfill = SnowbergStreamChangesOperator(
        task_id="changes_backfill", **operator_arguments(SnowbergStreamChangesOperator, cfg)
    )
    consume = SnowbergStreamConsumeOperator(task_id="consume", **operator_arguments(SnowbergStreamConsumeOperator, cfg))
    load = SnowbergStreamLoadOperator(
        task_id="load", consumed=consume.output, **operator_arguments(SnowbergStreamLoadOperator, cfg)
    )
    cleanup = SnowbergStreamCleanupOperator(
        task_id="cleanup", outlets=list(outlets), **operator_arguments(SnowbergStreamCleanupOperator, cfg)
    )
    check = SnowbergStreamStalenessOperator(
        task_id="stream_staleness",
        trigger_rule="all_done",
        retries=0,
        # A watched stream is consumed soon after it holds data; the longest gap between its runs is max_interval.
        interval=cfg.watch.max_interval if cfg.watch is not None else None,
        **operator_arguments(SnowbergStreamStalenessOperator, cfg),
    )
    backfill >> consume >> load >> cleanup >> check
    return {
        "changes_backfill": backfill,
        "consume": consume,
        "load": load,
        "cleanup": cleanup,
        "stream_staleness": check,
    }
