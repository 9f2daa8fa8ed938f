"""The Iceberg side: catalogs, table creation, schema evolution.

Catalog settings never live in code. ``open_catalog(name)`` hands the name to
pyiceberg's ``load_catalog``, which reads ``PYICEBERG_CATALOG__<NAME>__<KEY>``
environment variables or ``~/.pyiceberg.yaml`` — the library's own, documented
configuration — so a SQL catalog on SQLite, a REST catalog or Glue are all a
matter of settings.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from snowberg.config.check_settings import AlertEvent
from snowberg.config.table_config import ColumnAddPolicy, ColumnDropPolicy, PartitionField, TableConfig
from snowberg.core import events
from snowberg.core.identifiers import IcebergName, clip
from snowberg.iceberg.identity import identity_properties
from snowberg.mapping.columns import SchemaEvolutionError
from snowberg.mapping.evolution import can_hold, can_widen
from snowberg.mapping.rules import MappedColumn, arrow_type_for

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table, Transaction

log = logging.getLogger(__name__)

# pyiceberg 0.12 retries a conflicting commit by re-applying the append on top
# of the new head. For snowberg that would let two runs commit the same
# window, so tables snowberg creates turn it off: a conflict fails the run and
# Airflow's retry re-plans from the table's new state.
TABLE_PROPERTIES = {
    "commit.retry.num-retries": "0",
    "format-version": "2",
    "write.parquet.compression-codec": "zstd",
    "snowberg.managed": "true",
}


def load_table_or_none(catalog: Catalog, cfg: TableConfig) -> Table | None:
    """The configured table's Iceberg table, or None before its first load."""
    return find_table(catalog, cfg.iceberg_name)


def find_table(catalog: Catalog, name: IcebergName | str) -> Table | None:
    """The table ``namespace.table`` in ``catalog``, or None when it does not exist (one home for the lookup)."""
    from pyiceberg.exceptions import NoSuchTableError

    n = name if isinstance(name, IcebergName) else IcebergName.parse(name)
    try:
        return catalog.load_table((n.namespace, n.table))
    except NoSuchTableError:
        return None


def build_schema(columns: Sequence[MappedColumn], *, key: Sequence[str] = ()) -> Schema:
    """An Iceberg schema of the mapped columns: ids in source order (a list element takes the next).

    Columns are optional, except the ``key`` columns: they become the schema's
    identifier fields, which the Iceberg spec requires to be required columns
    (snowberg refuses a NULL key before anything is written, so no row can
    break that). Readers such as the lake → Snowflake sync find a table's row
    identity there.
    """
    from pyiceberg.schema import Schema
    from pyiceberg.types import ListType, NestedField

    keys = set(key)
    fields = []
    ids = []
    next_id = 1
    for c in columns:
        t = c.iceberg_type
        fid = next_id
        next_id += 1
        if isinstance(t, ListType):
            t = ListType(element_id=next_id, element_type=t.element_type, element_required=t.element_required)
            next_id += 1
        fields.append(NestedField(field_id=fid, name=c.name, field_type=t, required=c.name in keys))
        if c.name in keys:
            ids.append(fid)
    return Schema(*fields, identifier_field_ids=ids)


def identifier_key(cfg: TableConfig, columns: Sequence[MappedColumn]) -> list[str]:
    """The columns that become the table's Iceberg identifier fields: a merge table's ``primary_key``.

    Empty for append tables, and when a key column's type cannot be an
    identifier field (float/double, nested types: the spec forbids them; the
    table then simply has no identifier fields, and syncs need ``key_columns``).
    """
    from snowberg.config.table_config import WriteMode

    if cfg.effective_write_mode is not WriteMode.MERGE or not cfg.primary_key:
        return []
    by_name = {c.name: c for c in columns}
    names = [k.lower() for k in cfg.primary_key]
    bad = [n for n in names if n not in by_name or not _identifier_type(by_name[n].iceberg_type)]
    if bad:
        log.warning(
            "table %s: primary_key column(s) %s cannot be Iceberg identifier fields (floating point or nested "
            "type); the table gets no identifier fields, so a sync of it needs key_columns",
            cfg.name,
            bad,
        )
        return []
    return names


def _identifier_type(t: Any) -> bool:
    from pyiceberg.types import DoubleType, FloatType

    return bool(t.is_primitive) and not isinstance(t, (DoubleType, FloatType))


def _transform(text: str) -> Any:
    from pyiceberg.transforms import parse_transform

    return parse_transform(text)


def build_partition_spec(schema: Schema, fields: Sequence[PartitionField], table_name: str) -> PartitionSpec:
    """The partition spec for the config's ``partition_by``, refusing a column or transform that does not fit."""
    from pyiceberg.partitioning import PartitionField as IcebergPartitionField
    from pyiceberg.partitioning import PartitionSpec

    out = []
    for i, pf in enumerate(fields):
        try:
            src = schema.find_field(pf.column)
        except ValueError:
            raise SchemaEvolutionError(
                f"table {table_name!r}: partition_by column {pf.column!r} is not a column of the source"
            ) from None
        transform = _transform(pf.transform)
        if not transform.can_transform(src.field_type):
            raise SchemaEvolutionError(
                f"table {table_name!r}: partition transform {pf.transform} cannot apply to column "
                f"{pf.column!r} of type {src.field_type}"
            )
        out.append(IcebergPartitionField(source_id=src.field_id, field_id=1000 + i, transform=transform, name=pf.name))
    return PartitionSpec(*out)


def ensure_namespace(catalog: Catalog, namespace: str) -> None:
    """Create ``namespace`` unless it exists; another writer creating it at the same moment is no error.

    pyiceberg's ``create_namespace_if_not_exists`` checks, then creates: the first loads of several tables
    in one new namespace (every table's first run, when a deployment starts) all find it missing, and the
    losers get the catalog's refusal, which pyiceberg's SQL catalog raises as a bare ``IntegrityError``
    (a unique constraint) rather than ``NamespaceAlreadyExistsError``. Whatever the refusal, a namespace
    that exists afterwards is what was asked for.
    """
    try:
        catalog.create_namespace_if_not_exists(namespace)
    except Exception:
        if not catalog.namespace_exists(namespace):
            raise
        log.info("namespace %s was created by another writer at the same moment", namespace)


def create_table(
    catalog: Catalog, cfg: TableConfig, columns: Sequence[MappedColumn], *, identifier_fields: bool = True
) -> Table:
    """Create the lake table (and its namespace) with snowberg's table properties and identity.

    A merge table's ``primary_key`` becomes its identifier fields (required
    columns) unless ``identifier_fields`` is False: the push-down unload
    registers Parquet files Snowflake wrote, whose columns are all optional,
    which pyiceberg refuses for required columns; the next extract run adds
    them (``identifier_update``).
    """
    n = cfg.iceberg_name
    ensure_namespace(catalog, n.namespace)
    schema = build_schema(columns, key=identifier_key(cfg, columns) if identifier_fields else ())
    spec = build_partition_spec(schema, cfg.partition_by, cfg.name)
    props = dict(TABLE_PROPERTIES) | identity_properties(cfg)
    log.info("creating Iceberg table %s (%d columns, partition %s)", n, len(columns), spec)
    return catalog.create_table((n.namespace, n.table), schema=schema, partition_spec=spec, properties=props)


KEPT_NULL = "snowberg.columns-kept-null"  # table property: dropped columns already reported (keep_null)
# Table property: columns added while on_column_added is backfill whose values the rows loaded before still lack.
# Set in the commit that adds them, removed by the backfill's commit (load.column_backfill): a crash between the two
# leaves it set, so a retry or the next run backfills once.
BACKFILL_PENDING = "snowberg.columns-to-backfill"


def pending_backfill(properties: dict[str, str]) -> list[str]:
    """The columns ``BACKFILL_PENDING`` names (table properties of the table or of a transaction)."""
    return [c for c in properties.get(BACKFILL_PENDING, "").split(",") if c]


def mark_backfill(tx: Transaction, cfg: TableConfig, add: Sequence[MappedColumn]) -> None:
    """Record the added columns the rows already in the lake must get (``on_column_added: backfill``), in ``tx``.

    Only when there are such rows (a snapshot) and a run would not reload them anyway (a table with a cursor).
    """
    if not add or cfg.on_column_added is not ColumnAddPolicy.BACKFILL or cfg.cursor is None:
        return
    if tx.table_metadata.current_snapshot() is None:
        return
    had = pending_backfill(tx.table_metadata.properties)
    tx.set_properties({BACKFILL_PENDING: ",".join(had + [c.name for c in add if c.name not in had])})


def dropped_columns(table_schema: Schema, columns: Sequence[MappedColumn]) -> list[str]:
    """Columns of the table that the source no longer sends."""
    sent = {c.name for c in columns}
    return [f.name for f in table_schema.fields if f.name not in sent]


def plan_schema_changes(
    table_schema: Schema,
    columns: Sequence[MappedColumn],
    *,
    cfg: TableConfig | None = None,
    kept_null: Collection[str] = (),
) -> tuple[list[MappedColumn], list[tuple[MappedColumn, Any]]]:
    """Columns to add, and columns to widen; raise when a change cannot be applied.

    With ``cfg`` (the table being written), columns the table has and the
    source no longer sends are handled by ``cfg.on_column_dropped``, and any
    change is reported as a ``schema_change`` alert event. Without it (a check
    that the source still fits an already-planned table) dropped columns are
    not this call's concern. ``kept_null`` are dropped columns already
    reported (``keep_null`` writes NULL into them on every run; one alert is
    enough).
    """
    add: list[MappedColumn] = []
    widen: list[tuple[MappedColumn, Any]] = []
    for c in columns:
        try:
            existing = table_schema.find_field(c.name)
        except ValueError:
            add.append(c)
            continue
        if can_hold(existing.field_type, c.iceberg_type):
            continue
        if can_widen(existing.field_type, c.iceberg_type):
            widen.append((c, existing.field_type))
            continue
        raise SchemaEvolutionError(
            f"column {c.source.name!r}: the Iceberg table has {existing.field_type}, the source is now "
            f"{c.source.sql_type} (→ {c.iceberg_type}); Iceberg cannot change {existing.field_type} to "
            f"{c.iceberg_type}. Nothing was written. Rebuild the table (full refresh into a new target) "
            "or cast the column in a custom query."
        )
    if cfg is not None:
        dropped = dropped_columns(table_schema, columns)
        report_schema_changes(cfg, add, widen, [d for d in dropped if d not in kept_null])
        if dropped and cfg.on_column_dropped is ColumnDropPolicy.FAIL:
            raise SchemaEvolutionError(
                f"table {cfg.name!r}: column(s) {clip(dropped, 200)} of Iceberg table {cfg.target} are no longer "
                "in the source. Nothing was written. Set on_column_dropped: keep_null to keep them and write "
                "NULL from now on, or bring them back in the source (or as NULL AS <column> in a custom query)."
            )
        if dropped:
            log.warning(
                "table %s: column(s) %s no longer in the source: written as NULL (on_column_dropped: keep_null)",
                cfg.name,
                dropped,
            )
    return add, widen


def report_schema_changes(
    cfg: TableConfig, add: Sequence[MappedColumn], widen: Sequence[tuple[MappedColumn, Any]], dropped: Sequence[str]
) -> None:
    """Tell the table's alert channels that the source's columns changed (``schema_change``).

    Sent when a run finds the change, before its commit: a run that then
    fails (and is retried) sends it again. Delivery never fails the run.
    """
    if not (add or widen or dropped):
        return
    changes = {
        "added": [f"{c.name} {c.iceberg_type}" for c in add],
        "widened": [f"{c.name} {old} → {c.iceberg_type}" for c, old in widen],
        "dropped": [f"{name} ({cfg.on_column_dropped.value})" for name in dropped],
    }
    changes = {k: v for k, v in changes.items() if v}
    details: dict[str, Any] = dict(changes)
    if add:
        details["existing_rows"] = added_column_consequence(cfg, [c.name for c in add])
    log.info("table %s: source schema changed: %s", cfg.name, details)
    events.emit(AlertEvent.SCHEMA_CHANGE, table=cfg.name, lake_table=cfg.target, details=details)


def added_column_consequence(cfg: TableConfig, names: Sequence[str]) -> str:
    """What an added column means for the rows already in the lake, as the ``schema_change`` event says it.

    Snowflake may hold values for those rows (``ADD COLUMN … DEFAULT x``, an UPDATE that does not move the
    cursor) that no incremental run re-reads: a quiet difference no check finds, unless it is announced.
    """
    cols = ", ".join(repr(n) for n in names)
    if cfg.cursor is None and cfg.stream is None:
        return f"every run reloads the whole table: the rows already in the lake get {cols} from this run's reload"
    if cfg.on_column_added is ColumnAddPolicy.BACKFILL:
        return (
            f"on_column_added: backfill: after this run's commit, {cols} is re-read from Snowflake by primary key "
            "for the rows already in the lake and written in one more commit; a one-time cost ∝ the table (every "
            "lake file holding such rows is read and rewritten, one Snowflake query per batch of keys)"
        )
    return (
        f"on_column_added: null: the rows already in the lake hold NULL in {cols}, while Snowflake may hold values "
        "for them (ADD COLUMN … DEFAULT, or an update that does not move the cursor), and no later run re-reads "
        "them. With on_column_added: backfill they are re-read by primary key (a one-time cost ∝ the table); "
        "or reload the table"
    )


def check_key_columns(cfg: TableConfig, columns: Sequence[MappedColumn]) -> None:
    """Every ``primary_key`` column must be a column of the source, before anything is written."""
    names = {c.name for c in columns}
    missing = [k for k in cfg.primary_key if k.lower() not in names]
    if missing:
        raise SchemaEvolutionError(
            f"table {cfg.name!r}: field 'primary_key': column(s) {clip(missing, 200)} are not in the source, which "
            f"has {clip(sorted(names), 200)}. Nothing was written. Fix primary_key, or select the key in a "
            "custom query."
        )


def identifier_update(table: Table, cfg: TableConfig, columns: Sequence[MappedColumn]) -> list[str]:
    """The key columns an existing merge table should now declare as identifier fields (empty: nothing to do).

    Tables created before snowberg set identifier fields get them on their
    next commit. Making a column required is only safe when no live row holds
    NULL in it: snowberg refused NULL keys on every load, and this is checked
    again from the data files' null counts in the manifests (metadata only; a
    file without the count, or with a NULL, leaves the table as it is, with a
    warning). A table that already declares identifier fields keeps them.
    """
    want = identifier_key(cfg, columns)
    schema = table.schema()
    if not want or schema.identifier_field_ids:
        return []
    ids: dict[int, str] = {}
    for name in want:
        try:
            ids[schema.find_field(name).field_id] = name
        except ValueError:  # a key column added by this run: older rows hold NULL there
            log.warning("table %s: key column %s is new; identifier fields not set", cfg.name, name)
            return []
    snap = table.current_snapshot()
    if snap is not None:
        from pyiceberg.manifest import ManifestContent

        for m in snap.manifests(table.io):
            if m.content != ManifestContent.DATA:
                continue
            for e in m.fetch_manifest_entry(table.io, discard_deleted=True):
                counts = e.data_file.null_value_counts or {}
                unsafe = [n for fid, n in ids.items() if counts.get(fid) is None or counts[fid] > 0]
                if unsafe:
                    log.warning(
                        "table %s: data file %s has NULLs (or no null count) in key column(s) %s; "
                        "identifier fields not set",
                        cfg.name,
                        e.data_file.file_path,
                        unsafe,
                    )
                    return []
    return want


def apply_schema_changes(
    tx: Transaction,
    add: Sequence[MappedColumn],
    widen: Sequence[tuple[MappedColumn, Any]],
    *,
    identifier: Sequence[str] = (),
    optional: Sequence[str] = (),
) -> None:
    """Add new columns, widen changed ones and declare the key (``identifier_update``) in the transaction.

    They commit with the data. Declaring the key makes its columns required,
    which pyiceberg calls an incompatible change: ``identifier_update`` has
    checked that no live row holds NULL there, so it is allowed for that.
    ``optional``: required columns to make optional, dropping the identifier
    fields (a compatible change): files Snowflake wrote declare every column
    optional, and Iceberg refuses to register them into required columns; the
    next extract run declares the key again.
    """
    if not add and not widen and not identifier and not optional:
        return
    with tx.update_schema(allow_incompatible_changes=bool(identifier)) as upd:
        if optional:
            log.info(
                "schema: key column(s) %s become optional, no identifier fields (push-down unload)", list(optional)
            )
            upd.set_identifier_fields()
            for name in optional:
                upd.make_column_optional(name)
        for c in add:
            log.info("schema: adding column %s %s", c.name, c.iceberg_type)
            upd.add_column(c.name, c.iceberg_type)
        for c, old in widen:
            log.info("schema: widening column %s %s → %s", c.name, old, c.iceberg_type)
            upd.update_column(c.name, field_type=c.iceberg_type)
        if identifier:
            log.info("schema: key column(s) %s become required identifier fields", list(identifier))
            for name in identifier:
                upd.update_column(name, required=True)
            upd.set_identifier_fields(*identifier)


def arrow_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema batches are cast to before they are written."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, arrow_type_for(f.field_type), nullable=not f.required) for f in schema.fields])


def begin_write(
    catalog: Catalog, cfg: TableConfig, table: Table | None, columns: Sequence[MappedColumn]
) -> tuple[Table, Transaction, pa.Schema, bool]:
    """Create the table if missing, open a transaction with the schema changes applied.

    Returns the table, the transaction, the Arrow schema batches must be cast
    to, and whether the schema changed (a run with no rows still commits then).
    Every snowberg write path starts here, so creation and evolution rules
    are the same for watermark loads, streams and backfills.
    """
    check_key_columns(cfg, columns)
    if table is None:
        table = create_table(catalog, cfg, columns)
    ident = identifier_update(table, cfg, columns)
    tx = table.transaction()
    schema = tx.table_metadata.schema()
    kept = [c for c in tx.table_metadata.properties.get(KEPT_NULL, "").split(",") if c]
    add, widen = plan_schema_changes(schema, columns, cfg=cfg, kept_null=kept)
    now_kept = sorted(dropped_columns(schema, columns))
    if now_kept != sorted(kept):
        tx.set_properties({KEPT_NULL: ",".join(now_kept)})
    apply_schema_changes(tx, add, widen, identifier=ident)
    mark_backfill(tx, cfg, add)
    return table, tx, arrow_schema(tx.table_metadata.schema()), bool(add or widen or ident)


def ensure_table(
    catalog: Catalog,
    cfg: TableConfig,
    table: Table | None,
    columns: Sequence[MappedColumn],
    *,
    identifier_fields: bool = True,
) -> Table:
    """Create the table if missing and commit the schema changes the source needs, before any data is written.

    For writers whose data files are written by other tasks or by Snowflake
    (mapped slices, push-down unload): they must write against the final
    schema, so its changes are committed first (``begin_write`` stages them
    in the data commit instead). ``identifier_fields`` False (the push-down
    unload, which registers files Snowflake wrote with optional columns) leaves
    the key undeclared; see ``create_table``.
    """
    if table is None:
        table = create_table(catalog, cfg, columns, identifier_fields=identifier_fields)
    ident = identifier_update(table, cfg, columns) if identifier_fields else []
    relax = [] if identifier_fields else required_columns(table.schema())
    add, widen = plan_schema_changes(table.schema(), columns, cfg=cfg)
    if add or widen or ident or relax:
        tx = table.transaction()
        apply_schema_changes(tx, add, widen, identifier=ident, optional=relax)
        mark_backfill(tx, cfg, add)
        table = tx.commit_transaction()
    return table


def required_columns(schema: Schema) -> list[str]:
    """The top-level columns ``schema`` declares required (snowberg's tables: the key's identifier fields)."""
    return [f.name for f in schema.fields if f.required]
