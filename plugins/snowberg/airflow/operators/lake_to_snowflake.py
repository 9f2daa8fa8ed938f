"""Operators for lake → Snowflake syncs: write, then check Snowflake sees the rows.

Example (what ``dags/snowberg_syncs.py`` builds for each entry of
``include/syncs.yaml``)::

    # Into a Snowflake-managed Iceberg table through Horizon's Iceberg REST catalog
    sync = IcebergToSnowflakeIcebergOperator(
        task_id="sync",
        source_catalog="lake", source_table="sales.orders",
        target_catalog="snowflake_horizon",        # Airflow connection, conn_type snowflake (PAT as password)
        target_table="SALES.ORDERS",
    )
    check = SnowflakeVisibilityCheckOperator(
        task_id="check_visible", kind="iceberg", snowflake_conn_id="snowflake_horizon",
        table="ANALYTICS.SALES.ORDERS", sync_result=sync.output,
        target_catalog="snowflake_horizon", target_table="SALES.ORDERS",
    )
    sync >> check

    # Into a native Snowflake table (COPY or INSERTs, and the sync state, in one transaction)
    load = IcebergToSnowflakeNativeOperator(
        task_id="sync", source_catalog="lake", source_table="sales.orders",
        snowflake_conn_id="snowflake_default", target_table="ANALYTICS.SALES.ORDERS_NATIVE",
    )
    check = SnowflakeVisibilityCheckOperator(
        task_id="check_visible", kind="native", snowflake_conn_id="snowflake_default",
        table="ANALYTICS.SALES.ORDERS_NATIVE", sync_result=load.output,
    )

Catalogs, hooks and connections are opened in ``execute()`` only; module
import costs nothing beyond Airflow's SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from airflow.sdk import BaseOperator

from snowberg.airflow.lineage import IcebergSyncLineage, NativeSyncLineage, record_iceberg_sync, record_native_sync
from snowberg.airflow.operators.lake_access import names_lake_connection
from snowberg.core.identifiers import IcebergName, TableName
from snowberg.sync.snapshots import OnRewrite


def _source_table(catalog_ref: str, table: str) -> tuple[Any, str]:
    from snowberg.iceberg.catalogs import open_catalog

    name = IcebergName.parse(table)
    catalog = open_catalog(catalog_ref)
    return catalog.load_table((name.namespace, name.table)), f"{catalog_ref}:{name}"


class IcebergToSnowflakeIcebergOperator(IcebergSyncLineage, BaseOperator):
    """Sync the source's new snapshots into a Snowflake-managed Iceberg table through a REST catalog.

    Returns the ``IcebergSyncResult`` as a dict (XCom) for the visibility check.
    ``key_columns`` (default None: the source's Iceberg identifier fields)
    lets overwrite/delete snapshots be applied by key; without a key,
    ``on_rewrite``: ``fail`` (default) refuses them, ``full_reload`` replaces
    the target's rows with the source's.
    """

    template_fields: Sequence[str] = ("source_catalog", "source_table", "target_catalog", "target_table", "on_rewrite")
    ui_color = "#e0f2ff"

    def __init__(
        self,
        *,
        source_catalog: str,
        source_table: str,
        target_catalog: str,
        target_table: str,
        on_rewrite: OnRewrite | str = OnRewrite.FAIL,
        key_columns: Sequence[str] | None = None,
        create_if_missing: bool = False,
        create_in_snowflake: dict[str, str] | None = None,
        batch_rows: int = 250_000,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.source_catalog = source_catalog
        self.source_table = source_table
        self.target_catalog = target_catalog
        self.target_table = target_table
        self.on_rewrite = on_rewrite
        self.key_columns = list(key_columns) if key_columns is not None else None
        self.create_if_missing = create_if_missing
        self.create_in_snowflake = create_in_snowflake
        self.batch_rows = batch_rows

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.airflow.metrics import observed_sync
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.sync.horizon import sync_iceberg

        source, label = _source_table(self.source_catalog, self.source_table)
        target = _target_name(self.target_table)
        target_catalog = open_catalog(self.target_catalog)
        result = sync_iceberg(
            source,
            target_catalog,
            target,
            source_label=label,
            run_id=context["run_id"],
            dag_id=self.dag_id,
            on_rewrite=self.on_rewrite,
            key_columns=self.key_columns,
            create_if_missing=self.create_if_missing,  # type: ignore[arg-type]
            create_in_snowflake=self._creator(),
            batch_rows=self.batch_rows,
        )
        done = result.to_dict()
        record_iceberg_sync(
            self,
            source_catalog=self.source_catalog,
            source=source,
            target_catalog_ref=self.target_catalog,
            target_catalog=target_catalog,
            target_table=self.target_table,
            result=done,
        )
        return observed_sync(self, self.target_table, done)

    def _creator(self) -> Any:
        """Runs ``CREATE ICEBERG TABLE`` in Snowflake when the target is missing (``create_in_snowflake``)."""
        if not self.create_in_snowflake:
            return None
        c = dict(self.create_in_snowflake)

        def create(schema: Any) -> None:
            from snowberg.core.identifiers import TableName
            from snowberg.snowflake.hook import snowflake_hook
            from snowberg.sync.ddl import create_iceberg_table_sql

            sql = create_iceberg_table_sql(
                TableName.parse(c["table"]),
                schema,
                external_volume=c["external_volume"],
                base_location=c["base_location"],
            )
            self.log.info("creating the Snowflake-managed target:\n%s", sql)
            snowflake_hook(c["snowflake_conn_id"]).run(sql)

        return create


def _target_name(text: str) -> IcebergName:
    """``SCHEMA.TABLE`` inside the REST catalog (Horizon: the Snowflake schema and table, any case, ``$`` allowed)."""
    from snowberg.core.identifiers import validate_identifier

    parts = text.split(".")
    if len(parts) != 2:
        raise ValueError(f"expected namespace.table, got {text!r}")
    for p in parts:
        validate_identifier(p, "target name part")
    return IcebergName(namespace=parts[0], table=parts[1])


class IcebergToSnowflakeNativeOperator(NativeSyncLineage, BaseOperator):
    """Load the source's new snapshots into a native Snowflake table, exactly once.

    Rows and the sync state (``state_table``, default
    ``<db>.<schema>.SNOWBERG_SYNC_STATE``) commit in one Snowflake transaction.
    Rows travel by COPY from Parquet: the lake's own files through ``stage``
    (an external stage over the lake, whose URL the lake calls ``stage_url``),
    else Parquet the worker writes and PUTs; fewer than ``copy_min_rows``
    worker rows go as bound INSERTs (docs/lake-to-snowflake.md).
    ``key_columns`` (default None: the source's Iceberg identifier fields)
    lets overwrite/delete snapshots be applied as deletes + inserts by key.
    Returns the ``NativeLoadResult`` as a dict (XCom).
    """

    template_fields: Sequence[str] = (
        "source_catalog",
        "source_table",
        "snowflake_conn_id",
        "target_table",
        "state_table",
        "on_rewrite",
        "stage",
        "stage_url",
    )
    ui_color = "#d9f2e6"

    def __init__(
        self,
        *,
        source_catalog: str,
        source_table: str,
        target_table: str,
        snowflake_conn_id: str = "snowflake_default",
        state_table: str | None = None,
        on_rewrite: OnRewrite | str = OnRewrite.FAIL,
        key_columns: Sequence[str] | None = None,
        lineage_column: str | None = "_SNOWBERG_SOURCE_SNAPSHOT_ID",
        insert_batch_rows: int = 1000,
        stage: str | None = None,
        stage_url: str | None = None,
        copy_min_rows: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.source_catalog = source_catalog
        self.source_table = source_table
        self.snowflake_conn_id = snowflake_conn_id
        self.target_table = target_table
        self.state_table = state_table
        self.on_rewrite = on_rewrite
        self.key_columns = list(key_columns) if key_columns is not None else None
        self.lineage_column = lineage_column
        self.insert_batch_rows = insert_batch_rows
        self.stage = stage
        self.stage_url = stage_url
        self.copy_min_rows = copy_min_rows

    @names_lake_connection("source_catalog")
    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.airflow.metrics import observed_sync
        from snowberg.snowflake.hook import snowflake_connection
        from snowberg.sync.copy_load import CopyPaths
        from snowberg.sync.copy_sql import DEFAULT_COPY_MIN_ROWS, LakeStage
        from snowberg.sync.native import load_native

        source, label = _source_table(self.source_catalog, self.source_table)
        copy = CopyPaths(
            lake_stage=LakeStage(stage=self.stage, stage_url=self.stage_url) if self.stage and self.stage_url else None,
            copy_min_rows=DEFAULT_COPY_MIN_ROWS if self.copy_min_rows is None else self.copy_min_rows,
        )
        with snowflake_connection(self.snowflake_conn_id) as conn:
            result = load_native(
                source,
                conn,
                target=TableName.parse(self.target_table),
                source_label=label,
                run_id=context["run_id"],
                state_table=TableName.parse(self.state_table) if self.state_table else None,
                on_rewrite=self.on_rewrite,
                key_columns=self.key_columns,
                lineage_column=self.lineage_column,
                insert_batch_rows=self.insert_batch_rows,
                copy=copy,
            )
            done = result.to_dict()
            record_native_sync(
                self,
                source_catalog=self.source_catalog,
                source=source,
                snowflake_conn_id=self.snowflake_conn_id,
                conn=conn,
                target_table=self.target_table,
                result=done,
            )
        return observed_sync(self, self.target_table, done)


class SnowflakeVisibilityCheckOperator(BaseOperator):
    """Fail unless Snowflake's SQL returns the rows the upstream sync committed.

    ``kind="native"``: the state row and the per-snapshot lineage counts.
    ``kind="iceberg"``: ``COUNT(*)`` equals the committed (or current) target
    snapshot's live rows; give ``target_catalog``/``target_table`` so a later
    commit by another writer is not mistaken for a failure.
    A keyed sync's target must also hold the source's row count; give
    ``source_catalog``/``source_table`` (the sync's source) and the rows of
    the keys a change touched are compared with the source too.
    """

    template_fields: Sequence[str] = (
        "snowflake_conn_id",
        "table",
        "sync_result",
        "target_catalog",
        "target_table",
        "source_catalog",
        "source_table",
    )
    ui_color = "#fff3d6"

    def __init__(
        self,
        *,
        kind: Literal["native", "iceberg"],
        snowflake_conn_id: str,
        table: str,
        sync_result: Any,
        target_catalog: str | None = None,
        target_table: str | None = None,
        source_catalog: str | None = None,
        source_table: str | None = None,
        timeout: float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if kind not in ("native", "iceberg"):
            raise ValueError(f"kind must be 'native' or 'iceberg', not {kind!r}")
        self.kind = kind
        self.snowflake_conn_id = snowflake_conn_id
        self.table = table
        self.sync_result = sync_result
        self.target_catalog = target_catalog
        self.target_table = target_table
        self.source_catalog = source_catalog
        self.source_table = source_table
        self.timeout = timeout

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.snowflake.hook import snowflake_connection
        from snowberg.sync import visibility

        result = self.sync_result
        if not isinstance(result, dict):
            raise TypeError(f"sync_result must be the upstream sync's XCom dict, got {type(result).__name__}")
        source = None
        if self.source_catalog and self.source_table and result.get("key_columns"):
            source, _ = _source_table(self.source_catalog, self.source_table)
        with snowflake_connection(self.snowflake_conn_id) as conn:
            if self.kind == "native":
                return visibility.check_native(conn, result, source=source)
            return visibility.check_iceberg(
                conn,
                TableName.parse(self.table),
                result,
                current_rows=self._current_rows(),
                timeout=self.timeout,
                source=source,
            )

    def _current_rows(self) -> Callable[[], int | None] | None:
        """Re-reads the target's live row count from its catalog (None without catalog settings)."""
        if not (self.target_catalog and self.target_table):
            return None
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.iceberg.deletes import live_rows

        catalog, ident = open_catalog(self.target_catalog), _target_name(self.target_table)

        def current() -> int | None:
            return live_rows(catalog.load_table((ident.namespace, ident.table)))

        return current
