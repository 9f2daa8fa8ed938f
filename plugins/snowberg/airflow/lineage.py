"""OpenLineage for snowberg's operators, through the Airflow OpenLineage provider.

The provider's listener calls ``get_openlineage_facets_on_complete(task_instance)``
on an operator when its task succeeds. Every snowberg operator that reads or
writes data implements it with one call into this module, which builds the
``OperatorLineage`` from the operator's settings and the result its
``execute()`` returned (kept on the operator by ``remember_result``; the
listener runs in a fork of the task process, which still has it).

Dataset names follow the OpenLineage naming spec:

* a Snowflake table: namespace ``snowflake://{organization}-{account}`` (the
  connection's account normalised as the Snowflake provider's own SQL lineage
  does, so our events join the provider's), name
  ``{DATABASE}.{SCHEMA}.{TABLE}`` as Snowflake resolves it (unquoted names
  upper-case);
* an Iceberg table: the storage of its location, as the spec names object
  storage (``s3://{bucket}`` + ``{path}``, ``file`` + ``{path}``), which is
  what Spark's and Flink's Iceberg integrations emit too, plus a ``symlinks``
  facet with its catalog identifier (``{namespace}.{table}`` in the catalog's
  namespace) and a ``catalog`` facet (framework ``iceberg``, catalog type,
  name, metadata file and warehouse).

Facets: ``schema`` on both sides (Snowflake's column types from the result
metadata of a ``LIMIT 0`` query, Iceberg's from the table), ``outputStatistics``
on the output (rows committed, bytes of the data files added, file count, from
the committed snapshot's summary) and ``columnLineage`` from each Iceberg
column to the Snowflake column it maps from (table sources; a custom query's
columns have no single source column).

The provider is optional: without it installed nothing here is imported and
no operator changes behaviour. Lineage is best effort by design — the
provider logs and drops an exception raised while extracting, and a task
never fails because lineage could not be built.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

log = logging.getLogger(__name__)

RESULT_ATTR = "snowberg_result"
PRODUCER_SOURCE = "snowberg"


def remember_result(operator: Any, result: Any) -> Any:
    """Keep ``execute()``'s result on the operator for the lineage extractor; return it unchanged."""
    setattr(operator, RESULT_ATTR, result)
    return result


def result_of(operator: Any) -> dict[str, Any]:
    value = getattr(operator, RESULT_ATTR, None)
    return dict(value) if isinstance(value, Mapping) else {}


# ---------------------------------------------------------------------------
# Names


def snowflake_name(table: str) -> str:
    """``DATABASE.SCHEMA.TABLE`` as Snowflake resolves the configured name (all-lower parts are unquoted names)."""
    from snowberg.core.identifiers import TableName, quote_identifier

    t = TableName.parse(table)
    return ".".join(quote_identifier(p).strip('"') for p in (t.database, t.schema, t.table))


def snowflake_namespace(conn_id: str) -> str:
    """``snowflake://{organization}-{account}`` for a Snowflake connection.

    The account is normalised by the Snowflake provider's ``fix_account_name``
    (as its own SQL lineage does), but always taken from the connection's
    account: the provider prefers a ``host`` when one is set, and a private-link
    host or a local emulator's address is not the account's name.
    """
    from airflow.providers.snowflake.utils.openlineage import fix_account_name
    from airflow.sdk import Connection

    conn = Connection.get(conn_id)
    extra = conn.extra_dejson or {}
    account = extra.get("account") or extra.get("extra__snowflake__account")
    if not account and conn.host and conn.host.endswith(".snowflakecomputing.com"):
        account = conn.host[: -len(".snowflakecomputing.com")]
    if not account:
        raise ValueError(f"Snowflake connection {conn_id!r} has no account: no OpenLineage namespace")
    return f"snowflake://{fix_account_name(str(account))}"


def storage_name(location: str) -> tuple[str, str]:
    """(namespace, name) of a storage location per the naming spec: ``s3://bucket`` + path, ``file`` + path."""
    parts = urlsplit(location)
    if parts.scheme in ("", "file"):
        return "file", parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}", parts.path.strip("/")


def _without_userinfo(uri: str) -> str:
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[1], parts.path, parts.query, parts.fragment))


def catalog_namespace(catalog: Any) -> str:
    """The namespace of a catalog's table identifiers: its URI (credentials removed), else ``iceberg://{name}``."""
    uri = (getattr(catalog, "properties", None) or {}).get("uri")
    return _without_userinfo(str(uri)) if uri else f"iceberg://{catalog.name}"


# ---------------------------------------------------------------------------
# Datasets


def _facets() -> Any:
    from airflow.providers.common.compat.openlineage import facet

    return facet


def _schema_facet(fields: list[tuple[str, str]]) -> Any:
    f = _facets()
    return f.SchemaDatasetFacet(fields=[f.SchemaDatasetFacetFields(name=n, type=t) for n, t in fields])


def snowflake_columns(conn_id: str, table: str) -> list[tuple[str, str]]:
    """(column, Snowflake type) of a table, from the result metadata of a query that reads no row."""
    from snowberg.core.identifiers import TableName
    from snowberg.snowflake.hook import snowflake_connection
    from snowberg.snowflake.source import result_columns

    with snowflake_connection(conn_id) as conn:
        cur = conn.cursor()
        try:
            # The name is validated and quoted; no value is spliced.
            cur.execute(f"SELECT * FROM {TableName.parse(table).quoted()} LIMIT 0")  # noqa: S608
            return [(c.name, c.sql_type) for c in result_columns(cur)]
        finally:
            cur.close()


def snowflake_dataset(namespace: str, table: str, columns: list[tuple[str, str]] | None = None) -> Any:
    f = _facets()
    facets = {"schema": _schema_facet(columns)} if columns else {}
    return f.Dataset(namespace=namespace, name=snowflake_name(table), facets=facets)


def iceberg_dataset(catalog_ref: str, catalog: Any, table: Any, identifier: str) -> Any:
    """The Iceberg table as a dataset: its storage location, its catalog name as a symlink, its schema."""
    from openlineage.client.generated.catalog_dataset import CatalogDatasetFacet

    f = _facets()
    namespace, name = storage_name(table.location())
    props = getattr(catalog, "properties", None) or {}
    facets: dict[str, Any] = {
        "schema": _schema_facet([(fld.name, str(fld.field_type)) for fld in table.schema().fields]),
        "symlinks": f.SymlinksDatasetFacet(
            identifiers=[f.Identifier(namespace=catalog_namespace(catalog), name=identifier, type="TABLE")]
        ),
        "catalog": CatalogDatasetFacet(
            framework="iceberg",
            type=str(props.get("type") or type(catalog).__name__),
            name=catalog_ref,
            metadataUri=table.metadata_location,
            warehouseUri=props.get("warehouse"),
            source=PRODUCER_SOURCE,
        ),
    }
    return f.Dataset(namespace=namespace, name=name, facets=facets)


def output_statistics(table: Any, snapshot_id: int | None, rows: int) -> Any:
    """Rows committed, and bytes and files the commit added (from the snapshot summary: no file is read)."""
    f = _facets()
    size = files = None
    snap = table.snapshot_by_id(int(snapshot_id)) if snapshot_id is not None else None
    if snap is not None and snap.summary is not None:
        summary = snap.summary.additional_properties
        size = int(summary.get("added-files-size", 0) or 0)
        files = int(summary.get("added-data-files", 0) or 0)
    return f.OutputStatisticsOutputDatasetFacet(rowCount=int(rows), size=size, fileCount=files)


def column_lineage(
    input_namespace: str, input_name: str, columns: list[tuple[str, str]], output_fields: list[str]
) -> Any:
    """Each output column from the input column it maps from (names compare case-insensitively), cast only."""
    f = _facets()
    by_lower = {c.lower(): c for c, _ in columns}
    fields = {
        out: f.Fields(
            inputFields=[f.InputField(namespace=input_namespace, name=input_name, field=by_lower[out.lower()])],
            transformationType="IDENTITY",
            transformationDescription="type mapping only",
        )
        for out in output_fields
        if out.lower() in by_lower
    }
    return f.ColumnLineageDatasetFacet(fields=fields)


def _load_table(catalog: Any, identifier: str) -> Any:
    from snowberg.core.identifiers import IcebergName

    n = IcebergName.parse(identifier)
    return catalog.load_table((n.namespace, n.table))


def _lineage(inputs: list[Any], outputs: list[Any]) -> OperatorLineage:
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(inputs=inputs, outputs=outputs)


# ---------------------------------------------------------------------------
# What the operators call


def snowflake_to_iceberg(
    *,
    source_table: str | None,
    snowflake_conn_id: str,
    catalog_ref: str,
    target: str,
    result: Mapping[str, Any],
    rows_key: str = "rows",
) -> OperatorLineage:
    """A load into the lake: the Snowflake source table in, the Iceberg table out.

    ``source_table`` is ``None`` for custom-query sources (no input dataset and no
    column lineage: the query's tables are not ours to guess).
    """
    from snowberg.iceberg.catalogs import open_catalog

    catalog = open_catalog(catalog_ref)
    table = _load_table(catalog, target)
    out = iceberg_dataset(catalog_ref, catalog, table, target)
    facets = dict(out.facets)
    inputs: list[Any] = []
    if source_table:
        ns = snowflake_namespace(snowflake_conn_id)
        columns = snowflake_columns(snowflake_conn_id, source_table)
        src = snowflake_dataset(ns, source_table, columns)
        inputs.append(src)
        facets["columnLineage"] = column_lineage(ns, src.name, columns, [fld.name for fld in table.schema().fields])
    f = _facets()
    stats = output_statistics(table, result.get("snapshot_id"), int(result.get(rows_key) or 0))
    output = f.OutputDataset(
        namespace=out.namespace, name=out.name, facets=facets, outputFacets={"outputStatistics": stats}
    )
    return _lineage(inputs, [output])


def iceberg_to_snowflake(
    *,
    source_catalog: str,
    source_table: str,
    output_namespace: str,
    output_table: str,
    result: Mapping[str, Any],
    output_columns: list[tuple[str, str]] | None = None,
) -> OperatorLineage:
    """A lake → Snowflake sync: the Iceberg table in, the Snowflake table out, with the rows synced."""
    from snowberg.iceberg.catalogs import open_catalog

    f = _facets()
    catalog = open_catalog(source_catalog)
    table = _load_table(catalog, source_table)
    src = iceberg_dataset(source_catalog, catalog, table, source_table)
    name = snowflake_name(output_table)
    facets: dict[str, Any] = {}
    if output_columns:
        facets["schema"] = _schema_facet(output_columns)
        facets["columnLineage"] = column_lineage(
            src.namespace, src.name, [(fld.name, "") for fld in table.schema().fields], [c for c, _ in output_columns]
        )
    stats = f.OutputStatisticsOutputDatasetFacet(rowCount=int(result.get("rows") or 0))
    output = f.OutputDataset(
        namespace=output_namespace, name=name, facets=facets, outputFacets={"outputStatistics": stats}
    )
    return _lineage([src], [output])


def horizon_database(catalog_ref: str) -> str | None:
    """The database of a Horizon catalog connection (conn_type snowflake, ``extra.database``), else ``None``."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = Connection.get(catalog_ref)
    except AirflowNotFoundException:
        return None
    if (conn.conn_type or "").lower() != "snowflake":
        return None
    database = (conn.extra_dejson or {}).get("database")
    return str(database) if database else None


def horizon_output(target_catalog: str, target_table: str) -> tuple[str, str]:
    """(namespace, DATABASE.SCHEMA.TABLE) of a Snowflake-managed Iceberg table written through Horizon.

    The catalog's warehouse is the Snowflake database; the account of the same
    connection gives the namespace.
    """
    database = horizon_database(target_catalog)
    if database is None:
        raise ValueError(f"catalog {target_catalog!r} is not a Snowflake (Horizon) connection with extra.database")
    return snowflake_namespace(target_catalog), f"{database}.{target_table}"


# ---------------------------------------------------------------------------
# One entry point per kind of operator (each operator's get_openlineage_facets_on_complete calls one)


def load_lineage(operator: Any) -> OperatorLineage:
    """Snowflake → Iceberg loads (single task, slice commit, push-down unload)."""
    cfg = operator.cfg
    return snowflake_to_iceberg(
        source_table=cfg.source.table,
        snowflake_conn_id=operator.snowflake_conn_id,
        catalog_ref=operator.catalog,
        target=cfg.target,
        result=result_of(operator),
    )


def stream_lineage(operator: Any) -> OperatorLineage:
    """Stream loads: the table the stream tracks in, the Iceberg table out."""
    cfg, stream = operator.configs()
    return snowflake_to_iceberg(
        source_table=stream.on_table or cfg.source.table,
        snowflake_conn_id=operator.snowflake_conn_id,
        catalog_ref=operator.catalog,
        target=cfg.target,
        result=result_of(operator),
        rows_key="rows_appended",
    )


def iceberg_sync_lineage(operator: Any) -> OperatorLineage:
    """Lake → Snowflake-managed Iceberg: named as the Snowflake table when the catalog is Horizon."""
    from snowberg.iceberg.catalogs import open_catalog

    result = result_of(operator)
    if horizon_database(operator.target_catalog) is not None:
        namespace, table = horizon_output(operator.target_catalog, operator.target_table)
        return iceberg_to_snowflake(
            source_catalog=operator.source_catalog,
            source_table=operator.source_table,
            output_namespace=namespace,
            output_table=table,
            result=result,
        )
    # Another REST catalog: the target is an Iceberg table, named like the source.
    f = _facets()
    source_catalog = open_catalog(operator.source_catalog)
    src = iceberg_dataset(
        operator.source_catalog,
        source_catalog,
        _load_table(source_catalog, operator.source_table),
        operator.source_table,
    )
    catalog = open_catalog(operator.target_catalog)
    target = iceberg_dataset(
        operator.target_catalog, catalog, _load_table(catalog, operator.target_table), operator.target_table
    )
    stats = f.OutputStatisticsOutputDatasetFacet(rowCount=int(result.get("rows") or 0))
    out = f.OutputDataset(
        namespace=target.namespace, name=target.name, facets=target.facets, outputFacets={"outputStatistics": stats}
    )
    return _lineage([src], [out])


def native_sync_lineage(operator: Any) -> OperatorLineage:
    """Lake → native Snowflake table."""
    return iceberg_to_snowflake(
        source_catalog=operator.source_catalog,
        source_table=operator.source_table,
        output_namespace=snowflake_namespace(operator.snowflake_conn_id),
        output_table=operator.target_table,
        result=result_of(operator),
        output_columns=snowflake_columns(operator.snowflake_conn_id, operator.target_table),
    )


class LoadLineage:
    """Mixin for Snowflake → Iceberg loading operators (the provider's listener calls this on success)."""

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return load_lineage(self)


class StreamLoadLineage:
    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return stream_lineage(self)


class IcebergSyncLineage:
    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return iceberg_sync_lineage(self)


class NativeSyncLineage:
    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        return native_sync_lineage(self)


__all__ = [
    "IcebergSyncLineage",
    "LoadLineage",
    "NativeSyncLineage",
    "StreamLoadLineage",
    "catalog_namespace",
    "column_lineage",
    "horizon_database",
    "horizon_output",
    "iceberg_sync_lineage",
    "load_lineage",
    "native_sync_lineage",
    "stream_lineage",
    "iceberg_dataset",
    "iceberg_to_snowflake",
    "remember_result",
    "result_of",
    "snowflake_dataset",
    "snowflake_name",
    "snowflake_namespace",
    "snowflake_to_iceberg",
    "storage_name",
]
