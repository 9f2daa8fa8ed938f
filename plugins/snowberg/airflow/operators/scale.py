"""Scale-out: a large window loaded by mapped slice tasks, committed once.

    plan ─► plan_slices ─► load_slice ×N (dynamic task mapping) ─► commit ─► publish

* ``plan_slices`` (``SnowbergSlicePlanOperator``) cuts the planned window into
  cursor ranges of at most ``max_rows_per_slice`` rows and prepares the table
  (creates it, applies schema changes). Its XCom is a list: one entry per slice.
* ``load_slice`` (``SnowbergSliceLoadOperator``, mapped with
  ``.partial(...).expand(slice_task=...)``) extracts one slice and writes its
  Parquet data files plus a small staging manifest. It commits nothing, so a
  failed slice retries alone, on any worker, without touching the others.
* ``commit`` (``SnowbergSliceCommitOperator``) reads the slices' manifests and
  appends every data file in one Iceberg commit that carries the watermark
  (and, for merge tables, the copy-on-write delete of replaced keys). A re-run
  after a commit that landed appends nothing; a re-run after a commit that
  failed commits the same files once.

Under CeleryExecutor the mapped instances are queued like any task and spread
over the workers; ``max_active_tis_per_dagrun`` caps how many read Snowflake at
once. ``sliced_load`` wires the four tasks into a DAG (used by the factory
when a table opts in to scale-out).

Example (the operators take the table settings they read as keyword
arguments, like ``snowberg.airflow.operators.incremental``'s)::

    plan = SnowbergPlanOperator(task_id="plan", **operator_arguments(SnowbergPlanOperator, cfg))
    commit = sliced_load(cfg, plan, max_parallel=4)
    publish = SnowbergPublishOperator(
        task_id="publish", window=plan.output, **operator_arguments(SnowbergPublishOperator, cfg)
    )
    commit >> publish
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from snowberg.airflow.lineage import LoadLineage, record_load
from snowberg.airflow.operators.arguments import Settings, operator_arguments
from snowberg.airflow.operators.incremental import SnowbergTableOperator
from snowberg.airflow.operators.lake_access import names_lake_connection
from snowberg.config.table_config import (
    ColumnDropPolicy,
    ColumnSettings,
    Cursor,
    MergeStrategy,
    PartitionField,
    Source,
    TableConfig,
    UnloadSettings,
    WriteMode,
)
from snowberg.load.slices import SliceMethod


class SnowbergSlicePlanOperator(SnowbergTableOperator):
    """Cut the planned window into slices; return one mapped-task argument per slice.

    An empty list (nothing new, a dry run, or the run already committed) makes
    Airflow skip the mapped ``load_slice`` tasks; ``commit`` still runs and
    records nothing.

    :param window: the plan task's XCom (``plan.output``; templated).
    :param max_rows_per_slice: the most rows in one slice (templated).
    :param slice_method: how the cursor range is cut: ``quantiles`` (default) or ``range`` (``SliceMethod``).
    :param table_name: the table's name (logs, the Snowflake query tag).
    :param source: the Snowflake table or query (``Source`` or its dict).
    :param target: the Iceberg table ``namespace.table`` (created or evolved here).
    :param cursor: the watermark cursor (``Cursor`` or its dict).
    :param primary_key: the key columns (a first merge load checks them unique in Snowflake).
    :param write_mode: ``merge`` or ``append``; None: merge when there is a primary key.
    :param partition_by: the partition spec of a new table.
    :param number_as_long: NUMBER columns written as long.
    :param timestamp_nanos: ``error`` or ``truncate`` for nanosecond timestamps.
    :param geo_format: GEOGRAPHY/GEOMETRY as ``geojson`` or ``wkt``.
    :param on_column_dropped: ``fail`` or ``keep_null`` when a column is gone from the source.
    :param columns: the ``columns`` section (``ColumnSettings`` or its dict): excluded columns are never read,
        hashed ones are read as their salted SHA-256 (the salt from the Airflow Variable ``columns.hash_salt``).
    :param snowflake_conn_id: the Snowflake connection (templated).
    :param catalog: the pyiceberg catalog (templated).
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "window", "max_rows_per_slice")
    ui_color = "#c9e4f5"

    def __init__(
        self,
        *,
        window: Any,
        max_rows_per_slice: int = 250_000,
        slice_method: SliceMethod | str = SliceMethod.QUANTILES,
        table_name: str,
        source: Source | Settings,
        target: str,
        cursor: Cursor | Settings | None = None,
        primary_key: Sequence[str] = (),
        write_mode: WriteMode | str | None = None,
        partition_by: Sequence[PartitionField | Settings | str] = (),
        number_as_long: Sequence[str] = (),
        timestamp_nanos: str = "error",
        geo_format: str = "geojson",
        on_column_dropped: ColumnDropPolicy | str = ColumnDropPolicy.FAIL,
        columns: ColumnSettings | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.window = window
        self.max_rows_per_slice = max_rows_per_slice
        self.slice_method = SliceMethod.parse(slice_method).value  # a bad name fails when the DAG is parsed
        self.table_name = table_name
        self.source = source
        self.target = target
        self.cursor = cursor
        self.primary_key = primary_key
        self.write_mode = write_mode
        self.partition_by = partition_by
        self.number_as_long = number_as_long
        self.timestamp_nanos = timestamp_nanos
        self.geo_format = geo_format
        self.on_column_dropped = on_column_dropped
        self.columns = columns or {}
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    @names_lake_connection("catalog")
    def execute(self, context: Any) -> list[dict[str, Any]]:
        from snowberg.core.window import Window
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.load.mapped import prepare_slices
        from snowberg.snowflake.hook import snowflake_connection

        cfg = self.cfg
        w = Window.from_dict(self.window)
        with snowflake_connection(self.snowflake_conn_id, cfg) as conn:
            return prepare_slices(
                cfg,
                conn,
                open_catalog(self.catalog),
                w,
                max_rows=int(self.max_rows_per_slice) if self.max_rows_per_slice else None,
                method=self.slice_method,
            )


class SnowbergSliceLoadOperator(SnowbergTableOperator):
    """Extract one slice and write its data files (not committed). Map it over ``plan_slices``' output.


    :param slice_task: one entry of ``plan_slices``' XCom (mapped; templated).
    :param table_name: the table's name (logs, the Snowflake query tag).
    :param source: the Snowflake table or query (``Source`` or its dict).
    :param target: the Iceberg table ``namespace.table``.
    :param cursor: the watermark cursor (``Cursor`` or its dict).
    :param primary_key: the key columns: collected for the commit's merge, and each must be filled.
    :param write_mode: ``merge`` or ``append``; None: merge when there is a primary key.
    :param number_as_long: NUMBER columns written as long.
    :param timestamp_nanos: ``error`` or ``truncate`` for nanosecond timestamps.
    :param geo_format: GEOGRAPHY/GEOMETRY as ``geojson`` or ``wkt``.
    :param batch_rows: rows per written batch.
    :param columns: the ``columns`` section (``ColumnSettings`` or its dict): excluded columns are never read,
        hashed ones are read as their salted SHA-256 (the salt from the Airflow Variable ``columns.hash_salt``).
    :param snowflake_conn_id: the Snowflake connection (templated).
    :param catalog: the pyiceberg catalog (templated).
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "slice_task")
    ui_color = "#b3d9f2"

    def __init__(
        self,
        *,
        slice_task: Any,
        table_name: str,
        source: Source | Settings,
        target: str,
        cursor: Cursor | Settings | None = None,
        primary_key: Sequence[str] = (),
        write_mode: WriteMode | str | None = None,
        number_as_long: Sequence[str] = (),
        timestamp_nanos: str = "error",
        geo_format: str = "geojson",
        batch_rows: int = 250_000,
        columns: ColumnSettings | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.slice_task = slice_task
        self.table_name = table_name
        self.source = source
        self.target = target
        self.cursor = cursor
        self.primary_key = primary_key
        self.write_mode = write_mode
        self.number_as_long = number_as_long
        self.timestamp_nanos = timestamp_nanos
        self.geo_format = geo_format
        self.batch_rows = batch_rows
        self.columns = columns or {}
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    @names_lake_connection("catalog")
    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.load.mapped import write_slice
        from snowberg.snowflake.hook import snowflake_connection

        cfg = self.cfg
        with snowflake_connection(self.snowflake_conn_id, cfg) as conn:
            return write_slice(cfg, conn, open_catalog(self.catalog), dict(self.slice_task))


class SnowbergSliceCommitOperator(LoadLineage, SnowbergTableOperator):
    """Append every slice's data files in one Iceberg commit with the watermark (idempotent per run).

    Runs when no upstream failed (``none_failed``), so a window with nothing
    new — whose mapped tasks were skipped — still ends cleanly.

    :param window: the plan task's XCom (``plan.output``; templated).
    :param slice_results: the mapped ``load_slice`` tasks' XComs (templated).
    :param table_name: the table's name (logs).
    :param source: the Snowflake table or query (``Source`` or its dict): recorded in the table's identity.
    :param target: the Iceberg table ``namespace.table``.
    :param cursor: the watermark cursor (``Cursor`` or its dict).
    :param primary_key: the key columns whose earlier versions the commit replaces.
    :param write_mode: ``merge`` or ``append``; None: merge when there is a primary key.
    :param merge_strategy: ``merge_on_read`` (position deletes) or ``copy_on_write``.
    :param columns: the ``columns`` section (``ColumnSettings`` or its dict): excluded columns are never read,
        hashed ones are read as their salted SHA-256 (the salt from the Airflow Variable ``columns.hash_salt``).
    :param snowflake_conn_id: the Snowflake connection (lineage only; templated).
    :param catalog: the pyiceberg catalog (templated).
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "window", "slice_results")
    ui_color = "#d6ecfa"

    def __init__(
        self,
        *,
        window: Any,
        slice_results: Any,
        table_name: str,
        source: Source | Settings,
        target: str,
        cursor: Cursor | Settings | None = None,
        primary_key: Sequence[str] = (),
        write_mode: WriteMode | str | None = None,
        merge_strategy: MergeStrategy | str = MergeStrategy.MERGE_ON_READ,
        columns: ColumnSettings | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("trigger_rule", "none_failed")
        super().__init__(**kwargs)
        self.window = window
        self.slice_results = slice_results
        self.table_name = table_name
        self.source = source
        self.target = target
        self.cursor = cursor
        self.primary_key = primary_key
        self.write_mode = write_mode
        self.merge_strategy = merge_strategy
        self.columns = columns or {}
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    @names_lake_connection("catalog")
    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.core.window import Window
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.load.mapped import commit_slices

        results = [dict(r) for r in (self.slice_results or []) if r]
        from snowberg.airflow.metrics import observed_load

        cfg = self.cfg
        catalog = open_catalog(self.catalog)
        result = commit_slices(cfg, catalog, Window.from_dict(self.window), results)
        # No Snowflake connection here: the input is named, without its column types.
        record_load(
            self,
            source_table=cfg.source.table,
            snowflake_conn_id=self.snowflake_conn_id,
            conn=None,
            catalog_ref=self.catalog,
            catalog=catalog,
            target=cfg.target,
            result=result,
        )
        return observed_load(self, cfg.name, result)


def sliced_load(
    cfg: TableConfig,
    plan: Any,
    *,
    max_rows_per_slice: int | None = None,
    max_parallel: int | None = None,
    slice_method: SliceMethod | str = SliceMethod.QUANTILES,
) -> SnowbergSliceCommitOperator:
    """Add plan_slices → load_slice (mapped) → commit for table ``cfg`` after ``plan``; return the commit task.

    Call inside a ``with DAG(...)`` block. ``max_rows_per_slice`` overrides
    the table's; ``max_parallel`` caps the mapped slices running at once in
    one DAG run (``max_active_tis_per_dagrun``).
    """
    prepare_args = operator_arguments(SnowbergSlicePlanOperator, cfg)
    if max_rows_per_slice is not None:
        prepare_args["max_rows_per_slice"] = max_rows_per_slice
    prepare = SnowbergSlicePlanOperator(
        task_id="plan_slices", window=plan.output, slice_method=slice_method, **prepare_args
    )
    partial_kwargs: dict[str, Any] = {"task_id": "load_slice", **operator_arguments(SnowbergSliceLoadOperator, cfg)}
    if max_parallel:
        partial_kwargs["max_active_tis_per_dagrun"] = max_parallel
    slices = SnowbergSliceLoadOperator.partial(**partial_kwargs).expand(slice_task=prepare.output)
    commit = SnowbergSliceCommitOperator(
        task_id="commit",
        window=plan.output,
        slice_results=slices.output,
        **operator_arguments(SnowbergSliceCommitOperator, cfg),
    )
    plan >> prepare >> slices >> commit
    return commit


class SnowbergUnloadOperator(LoadLineage, SnowbergTableOperator):
    """Push-down: Snowflake unloads the planned window as Parquet into a stage in the lake; one commit registers it.

    For initial loads and full refreshes of very large tables (see
    docs/performance.md). ``unload.stage`` is ``DB.SCHEMA.STAGE``, an
    external stage whose URL (``unload.stage_url``, as the lake's FileIO
    addresses it) is in the lake's storage. Use in place of the load task::

        plan >> SnowbergUnloadOperator(
            task_id="unload",
            window=plan.output,
            unload={"stage": "LAKE.PUBLIC.LAKE_STAGE", "stage_url": "s3://lake/warehouse/shop/orders/data"},
            **operator_arguments(SnowbergUnloadOperator, cfg),  # or the table settings below, by hand
        ) >> publish

    :param window: the plan task's XCom (``plan.output``; templated).
    :param unload: the stage, its URL, the file prefix and size (``UnloadSettings`` or its dict; templated:
        a templated value is validated once rendered).
    :param table_name: the table's name (logs, the Snowflake query tag).
    :param source: the Snowflake table or query (``Source`` or its dict).
    :param target: the Iceberg table ``namespace.table`` (created or evolved here).
    :param cursor: the watermark cursor (``Cursor`` or its dict).
    :param primary_key: the key columns (a merge table cannot take push-down increments; see the docs).
    :param write_mode: ``merge`` or ``append``; None: merge when there is a primary key.
    :param merge_strategy: ``merge_on_read`` (position deletes) or ``copy_on_write``.
    :param partition_by: the partition spec of a new table (the unload writes its files by it).
    :param number_as_long: NUMBER columns written as long.
    :param timestamp_nanos: ``error`` or ``truncate`` for nanosecond timestamps.
    :param geo_format: GEOGRAPHY/GEOMETRY as ``geojson`` or ``wkt``.
    :param on_column_dropped: ``fail`` or ``keep_null`` when a column is gone from the source.
    :param columns: the ``columns`` section (``ColumnSettings`` or its dict): excluded columns are never read,
        hashed ones are read as their salted SHA-256 (the salt from the Airflow Variable ``columns.hash_salt``).
    :param snowflake_conn_id: the Snowflake connection (templated).
    :param catalog: the pyiceberg catalog (templated).
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "window", "unload")
    ui_color = "#e1f0fa"

    def __init__(
        self,
        *,
        window: Any,
        unload: UnloadSettings | Settings,
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
        on_column_dropped: ColumnDropPolicy | str = ColumnDropPolicy.FAIL,
        columns: ColumnSettings | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.window = window
        self.unload = unload
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
        self.on_column_dropped = on_column_dropped
        self.columns = columns or {}
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.core.window import Window
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.load.unload import DEFAULT_MAX_FILE_SIZE, UnloadTarget, unload_window
        from snowberg.snowflake.hook import snowflake_connection

        cfg = self.cfg
        assert cfg.unload is not None  # a required argument
        target = UnloadTarget(
            stage=cfg.unload.stage,
            stage_url=cfg.unload.stage_url,
            prefix=cfg.unload.prefix,
            max_file_size=cfg.unload.max_file_size or DEFAULT_MAX_FILE_SIZE,
        )
        from snowberg.airflow.metrics import observed_load

        with snowflake_connection(self.snowflake_conn_id, cfg) as conn:
            catalog = open_catalog(self.catalog)
            result = unload_window(
                cfg,
                conn,
                catalog,
                Window.from_dict(self.window),
                target,
                try_number=int(getattr(context.get("ti"), "try_number", 1) or 1),
            )
            record_load(
                self,
                source_table=cfg.source.table,
                snowflake_conn_id=self.snowflake_conn_id,
                conn=conn,
                catalog_ref=self.catalog,
                catalog=catalog,
                target=cfg.target,
                result=result,
            )
        return observed_load(self, cfg.name, result)
