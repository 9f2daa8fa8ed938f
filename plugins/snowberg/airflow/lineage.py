"""OpenLineage for snowberg's operators, through the Airflow OpenLineage provider.

The provider's listener calls ``get_openlineage_facets_on_complete(task_instance)``
on an operator when its task succeeds, in a process it forks from the task
process and kills after ``[openlineage] execution_timeout`` seconds (default
10). That fork must do no I/O: it shares the task's supervisor channel
(``Connection.get`` through it can hang), and a new Snowflake connection or
catalog there costs seconds the task waits for. So the facts the facets need
are gathered inside ``execute()``, from what the task already holds (its open
Snowflake connection and catalog, the table it committed to, the result it
returns), and kept on the operator (``record_*`` → ``LineageFacts``);
``get_openlineage_facets_on_complete`` only turns those plain values into
facet objects. When OpenLineage is not configured (the provider's
``is_disabled()``), nothing is gathered and a task pays nothing for lineage.

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
metadata of a ``LIMIT 0`` query on the task's open connection, Iceberg's from
the committed table), ``outputStatistics`` on the output (rows committed, bytes
of the data files added, file count, from the committed snapshot's summary)
and ``columnLineage`` from each Iceberg column to the Snowflake column it maps
from (table sources; a custom query's columns have no single source column).
The sliced load's commit task holds no Snowflake connection: its input carries
the name but no schema, and no column lineage.

Lineage is best effort by design: gathering the facts logs and gives up on
any error, the provider logs and drops an exception raised while building
facets, and a task never fails because lineage could not be built.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

log = logging.getLogger(__name__)

RESULT_ATTR = "snowberg_result"
FACTS_ATTR = "snowberg_lineage"
PRODUCER_SOURCE = "snowberg"


def remember_result(operator: Any, result: Any) -> Any:
    """Keep ``execute()``'s result on the operator (metrics, lineage); return it unchanged."""
    setattr(operator, RESULT_ATTR, result)
    return result


def result_of(operator: Any) -> dict[str, Any]:
    value = getattr(operator, RESULT_ATTR, None)
    return dict(value) if isinstance(value, Mapping) else {}


def lineage_enabled() -> bool:
    """Whether the OpenLineage provider will emit events here (installed, configured, not disabled).

    Decides whether ``execute()`` gathers lineage facts at all: without a
    transport the provider emits nothing, and the task should not pay for it.
    """
    try:
        from airflow.providers.openlineage import conf
    except ImportError:
        return False
    try:
        return not conf.is_disabled()
    except Exception:  # a broken [openlineage] section: the provider will not emit either
        log.warning("OpenLineage configuration unreadable: no lineage gathered", exc_info=True)
        return False


# ---------------------------------------------------------------------------
# The facts: plain values gathered in execute(), everything the facets need


@dataclass(frozen=True)
class SnowflakeSide:
    """A Snowflake table as a dataset: OpenLineage namespace and name, and its columns when read."""

    namespace: str
    name: str
    columns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class IcebergSide:
    """An Iceberg table as a dataset, as committed (location, catalog, schema, the snapshot's additions)."""

    namespace: str
    name: str
    identifier: str
    catalog_ref: str
    catalog_namespace: str
    catalog_type: str
    metadata_uri: str | None
    warehouse: str | None
    fields: tuple[tuple[str, str], ...]
    added_bytes: int | None = None
    added_files: int | None = None


@dataclass(frozen=True)
class LineageFacts:
    """One task's lineage: inputs, the output and the rows written; built into facets with no I/O."""

    inputs: tuple[SnowflakeSide | IcebergSide, ...]
    output: SnowflakeSide | IcebergSide
    rows: int
    column_lineage: bool = True


def facts_of(operator: Any) -> LineageFacts | None:
    value = getattr(operator, FACTS_ATTR, None)
    return value if isinstance(value, LineageFacts) else None


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
# Gathering the facts (in execute(): the task's own connection and catalog)


def snowflake_columns_on(conn: Any, table: str) -> tuple[tuple[str, str], ...]:
    """(column, Snowflake type) of a table on an open connection, from a query that reads no row."""
    from snowberg.core.identifiers import TableName
    from snowberg.snowflake.source import result_columns

    cur = conn.cursor()
    try:
        # The name is validated and quoted; no value is spliced.
        cur.execute(f"SELECT * FROM {TableName.parse(table).quoted()} LIMIT 0")  # noqa: S608
        return tuple((c.name, c.sql_type) for c in result_columns(cur))
    finally:
        cur.close()


def snowflake_side(conn_id: str, table: str, conn: Any | None = None) -> SnowflakeSide:
    """A Snowflake table's dataset facts; its columns only when the task has a connection open (``conn``)."""
    columns = snowflake_columns_on(conn, table) if conn is not None else ()
    return SnowflakeSide(namespace=snowflake_namespace(conn_id), name=snowflake_name(table), columns=columns)


def iceberg_side(catalog_ref: str, catalog: Any, table: Any, identifier: str, snapshot_id: Any = None) -> IcebergSide:
    """An Iceberg table's dataset facts from a loaded table (its metadata is in memory: no file is read)."""
    namespace, name = storage_name(table.location())
    props = getattr(catalog, "properties", None) or {}
    size = files = None
    snap = table.snapshot_by_id(int(snapshot_id)) if snapshot_id is not None else None
    if snap is not None and snap.summary is not None:
        summary = snap.summary.additional_properties
        size = int(summary.get("added-files-size", 0) or 0)
        files = int(summary.get("added-data-files", 0) or 0)
    return IcebergSide(
        namespace=namespace,
        name=name,
        identifier=identifier,
        catalog_ref=catalog_ref,
        catalog_namespace=catalog_namespace(catalog),
        catalog_type=str(props.get("type") or type(catalog).__name__),
        metadata_uri=table.metadata_location,
        warehouse=props.get("warehouse"),
        fields=tuple((fld.name, str(fld.field_type)) for fld in table.schema().fields),
        added_bytes=size,
        added_files=files,
    )


def _load_table(catalog: Any, identifier: str) -> Any:
    from snowberg.core.identifiers import IcebergName

    n = IcebergName.parse(identifier)
    return catalog.load_table((n.namespace, n.table))


def _keep(operator: Any, what: str, gather: Any) -> None:
    """Gather the facts when lineage is on and keep them on the operator; never fail the task for them."""
    if not lineage_enabled():
        return
    try:
        setattr(operator, FACTS_ATTR, gather())
    except Exception:
        log.warning("%s: no lineage facts gathered (the task itself succeeded)", what, exc_info=True)


def record_load(
    operator: Any,
    *,
    source_table: str | None,
    snowflake_conn_id: str,
    conn: Any | None,
    catalog_ref: str,
    catalog: Any,
    target: str,
    result: Mapping[str, Any],
    rows_key: str = "rows",
) -> None:
    """A load into the lake (Snowflake → Iceberg), called at the end of ``execute()``.

    ``source_table`` is ``None`` for custom-query sources (no input dataset and no
    column lineage: the query's tables are not ours to guess). ``conn``: the
    task's open Snowflake connection (the source's column types), or ``None``.
    """

    def gather() -> LineageFacts:
        table = _load_table(catalog, target)
        out = iceberg_side(catalog_ref, catalog, table, target, result.get("snapshot_id"))
        inputs = (snowflake_side(snowflake_conn_id, source_table, conn),) if source_table else ()
        return LineageFacts(inputs=inputs, output=out, rows=int(result.get(rows_key) or 0))

    _keep(operator, target, gather)


def record_native_sync(
    operator: Any,
    *,
    source_catalog: str,
    source: Any,
    snowflake_conn_id: str,
    conn: Any,
    target_table: str,
    result: Mapping[str, Any],
) -> None:
    """A lake → native Snowflake table sync: ``source`` is the Iceberg table the task read."""

    def gather() -> LineageFacts:
        src = iceberg_side(source_catalog, source_catalog_of(source, source_catalog), source, operator.source_table)
        out = snowflake_side(snowflake_conn_id, target_table, conn)
        return LineageFacts(inputs=(src,), output=out, rows=int(result.get("rows") or 0))

    _keep(operator, target_table, gather)


def record_iceberg_sync(
    operator: Any,
    *,
    source_catalog: str,
    source: Any,
    target_catalog_ref: str,
    target_catalog: Any,
    target_table: str,
    result: Mapping[str, Any],
) -> None:
    """A lake → Iceberg sync: named as the Snowflake table when the target catalog is Horizon."""

    def gather() -> LineageFacts:
        src = iceberg_side(source_catalog, source_catalog_of(source, source_catalog), source, operator.source_table)
        rows = int(result.get("rows") or 0)
        if horizon_database(target_catalog_ref) is not None:
            namespace, name = horizon_output(target_catalog_ref, target_table)
            return LineageFacts(inputs=(src,), output=SnowflakeSide(namespace=namespace, name=name), rows=rows)
        table = _load_table(target_catalog, target_table)
        out = iceberg_side(target_catalog_ref, target_catalog, table, target_table, result.get("snapshot_id"))
        return LineageFacts(inputs=(src,), output=out, rows=rows, column_lineage=False)

    _keep(operator, target_table, gather)


def source_catalog_of(table: Any, catalog_ref: str) -> Any:
    """The catalog a loaded table came from (pyiceberg keeps it on the table), for its name and properties."""
    catalog = getattr(table, "catalog", None)
    if catalog is None:
        raise ValueError(f"table of catalog {catalog_ref!r} carries no catalog")
    return catalog


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
# Facets from the facts (pure: what the listener's fork runs)


def _facets() -> Any:
    from airflow.providers.common.compat.openlineage import facet

    return facet


def _schema_facet(fields: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> Any:
    f = _facets()
    return f.SchemaDatasetFacet(fields=[f.SchemaDatasetFacetFields(name=n, type=t) for n, t in fields])


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


def _dataset_facets(side: SnowflakeSide | IcebergSide) -> dict[str, Any]:
    if isinstance(side, SnowflakeSide):
        return {"schema": _schema_facet(side.columns)} if side.columns else {}
    from openlineage.client.generated.catalog_dataset import CatalogDatasetFacet

    f = _facets()
    return {
        "schema": _schema_facet(side.fields),
        "symlinks": f.SymlinksDatasetFacet(
            identifiers=[f.Identifier(namespace=side.catalog_namespace, name=side.identifier, type="TABLE")]
        ),
        "catalog": CatalogDatasetFacet(
            framework="iceberg",
            type=side.catalog_type,
            name=side.catalog_ref,
            metadataUri=side.metadata_uri,
            warehouseUri=side.warehouse,
            source=PRODUCER_SOURCE,
        ),
    }


def _columns(side: SnowflakeSide | IcebergSide) -> list[tuple[str, str]]:
    return list(side.columns if isinstance(side, SnowflakeSide) else side.fields)


def build_lineage(facts: LineageFacts) -> OperatorLineage:
    """The ``OperatorLineage`` of gathered facts: facet objects only, no connection, catalog or file."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    f = _facets()
    inputs = [f.Dataset(namespace=s.namespace, name=s.name, facets=_dataset_facets(s)) for s in facts.inputs]
    out = facts.output
    facets = _dataset_facets(out)
    if facts.column_lineage and len(facts.inputs) == 1:
        src = facts.inputs[0]
        in_cols, out_cols = _columns(src), _columns(out)
        if in_cols and out_cols:
            facets["columnLineage"] = column_lineage(src.namespace, src.name, in_cols, [c for c, _ in out_cols])
    if isinstance(out, IcebergSide):
        stats = f.OutputStatisticsOutputDatasetFacet(
            rowCount=facts.rows, size=out.added_bytes, fileCount=out.added_files
        )
    else:
        stats = f.OutputStatisticsOutputDatasetFacet(rowCount=facts.rows)
    output = f.OutputDataset(
        namespace=out.namespace, name=out.name, facets=facets, outputFacets={"outputStatistics": stats}
    )
    return OperatorLineage(inputs=inputs, outputs=[output])


class GatheredLineage:
    """Mixin of every lineage-emitting operator: the facets of the facts its ``execute()`` gathered.

    ``None`` (the provider then sends the event without datasets) when nothing
    was gathered: lineage off at execute time, or gathering failed.
    """

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage | None:
        facts = facts_of(self)
        return build_lineage(facts) if facts is not None else None


# The operators' mixins, by kind (one gathering function each: record_load, record_native_sync, record_iceberg_sync).
LoadLineage = GatheredLineage
StreamLoadLineage = GatheredLineage
IcebergSyncLineage = GatheredLineage
NativeSyncLineage = GatheredLineage


__all__ = [
    "FACTS_ATTR",
    "GatheredLineage",
    "IcebergSide",
    "IcebergSyncLineage",
    "LineageFacts",
    "LoadLineage",
    "NativeSyncLineage",
    "SnowflakeSide",
    "StreamLoadLineage",
    "build_lineage",
    "catalog_namespace",
    "column_lineage",
    "facts_of",
    "horizon_database",
    "horizon_output",
    "iceberg_side",
    "lineage_enabled",
    "record_iceberg_sync",
    "record_load",
    "record_native_sync",
    "remember_result",
    "result_of",
    "snowflake_columns_on",
    "snowflake_name",
    "snowflake_namespace",
    "snowflake_side",
    "source_catalog_of",
    "storage_name",
]
