"""SQL text for stream capture. No I/O: every function returns text and binds.

Rules as everywhere in snowberg: identifiers are validated and quoted by
``snowberg.core.identifiers``; values (batch ids, run ids, timestamps, LIKE
patterns) are bind parameters. The stream is read only by the consuming
``INSERT … SELECT`` inside an explicit transaction; every other statement
that names the stream is a compile-only ``LIMIT 0`` describe, which (like
any SELECT) does not move the offset.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from typing import Any

from snowberg.config.table_config import ColumnSettings
from snowberg.core.identifiers import TableName, quote_identifier
from snowberg.mapping.columns import SnowflakeColumn
from snowberg.snowflake.projection import hash_sql, select_list


class ChangeAction(enum.StrEnum):
    """The values of a stream's ``METADATA$ACTION`` (kept in staging as ``SNOWBERG_ACTION``).

    An update is a DELETE of the old image plus an INSERT of the new one.
    """

    INSERT = "INSERT"
    DELETE = "DELETE"


# Stream metadata columns (Snowflake names).
ACTION = "METADATA$ACTION"  # one of ``ChangeAction``
ISUPDATE = "METADATA$ISUPDATE"
ROW_ID = "METADATA$ROW_ID"
STREAM_METADATA = (ACTION, ISUPDATE, ROW_ID)

# Staging bookkeeping columns. Prefixed so they cannot collide with source
# columns in practice; a collision is refused (``check_columns``).
BATCH_ID = "SNOWBERG_BATCH_ID"
SEQ = "SNOWBERG_SEQ"
S_ACTION = "SNOWBERG_ACTION"
S_ISUPDATE = "SNOWBERG_ISUPDATE"
S_ROW_ID = "SNOWBERG_ROW_ID"
RUN_ID = "SNOWBERG_RUN_ID"
CONSUMED_AT = "SNOWBERG_CONSUMED_AT"
STREAM_CREATED = "SNOWBERG_STREAM_CREATED_ON"
STAGING_META: tuple[tuple[str, str], ...] = (
    (BATCH_ID, "NUMBER(38,0)"),
    (SEQ, "NUMBER(38,0)"),
    (S_ACTION, "VARCHAR(16)"),
    (S_ISUPDATE, "BOOLEAN"),
    (S_ROW_ID, "VARCHAR"),
    (RUN_ID, "VARCHAR"),
    (CONSUMED_AT, "TIMESTAMP_LTZ(9)"),
    (STREAM_CREATED, "VARCHAR"),
)
META_NAMES = frozenset(n for n, _ in STAGING_META)

# A staged marker row (action REFRESH, source columns NULL) says "this batch is
# a full copy of the table": the load replaces the target instead of merging.
REFRESH = "REFRESH"
# A GENERATION marker row (source columns NULL) carries only the stream's
# generation: the first batch of a stream without initial rows may hold no
# change, and without a row its generation would reach neither staging nor the
# Iceberg commit, so a later re-creation of the stream would go unnoticed.
GENERATION = "GENERATION"
MARKERS = (REFRESH, GENERATION)


def q(name: str) -> str:
    """Validate and quote one identifier (short, for the SQL below)."""
    return quote_identifier(name)


def column_sql_type(col: SnowflakeColumn) -> str:
    """The column's type as DDL for the staging table."""
    if col.type == "TEXT":
        return f"VARCHAR({col.length})" if col.length else "VARCHAR"
    if col.type == "BINARY":
        return f"BINARY({col.length})" if col.length else "BINARY"
    if col.type.startswith("STRUCTURED_"):
        return col.type.removeprefix("STRUCTURED_")
    return col.sql_type


def describe_stream_sql(stream: TableName) -> str:
    """Column metadata of the stream. ``LIMIT 0``: compiles, reads nothing, consumes nothing."""
    return f"SELECT * FROM {stream.quoted()} LIMIT 0"


def describe_table_sql(table: TableName) -> str:
    return f"SELECT * FROM {table.quoted()} LIMIT 0"


def create_stream_sql(
    stream: TableName, table: TableName, *, append_only: bool, show_initial_rows: bool, replace: bool = False
) -> str:
    head = "CREATE OR REPLACE STREAM" if replace else "CREATE STREAM IF NOT EXISTS"
    opts = []
    if append_only:
        opts.append("APPEND_ONLY = TRUE")
    if show_initial_rows:
        opts.append("SHOW_INITIAL_ROWS = TRUE")
    tail = (" " + " ".join(opts)) if opts else ""
    return f"{head} {stream.quoted()} ON TABLE {table.quoted()}{tail} COMMENT = 'snowberg change capture'"


def show_stream_sql(stream: TableName) -> tuple[str, dict[str, Any]]:
    """``SHOW STREAMS`` for one stream. LIKE is a pattern: callers match the name exactly."""
    scope = f"{q(stream.database)}.{q(stream.schema)}"
    return f"SHOW STREAMS LIKE %(stream_like)s IN SCHEMA {scope}", {"stream_like": _stored(stream.table)}


def _stored(name: str) -> str:
    """How Snowflake stores a name snowberg quotes (all lower-case → upper-case)."""
    return name.upper() if name == name.lower() else name


def stored_name(name: str) -> str:
    """How Snowflake stores a name snowberg quotes (all lower-case names are upper-cased)."""
    return _stored(name)


def check_columns(columns: Sequence[SnowflakeColumn]) -> None:
    """Refuse source columns whose names clash with the staging table's own columns."""
    clash = sorted({c.name for c in columns} & META_NAMES)
    if clash:
        raise ValueError(f"source columns {clash} clash with snowberg's staging columns; rename them in the source")


def create_staging_sql(staging: TableName, columns: Sequence[SnowflakeColumn]) -> str:
    cols = [f"{q(n)} {t}" for n, t in STAGING_META]
    cols += [f"{q(c.name)} {column_sql_type(c)}" for c in columns]
    return f"CREATE TABLE IF NOT EXISTS {staging.quoted()} ({', '.join(cols)})"


def add_column_sql(staging: TableName, col: SnowflakeColumn) -> str:
    return f"ALTER TABLE {staging.quoted()} ADD COLUMN {q(col.name)} {column_sql_type(col)}"


def next_batch_sql(staging: TableName) -> str:
    return f"SELECT COALESCE(MAX({q(BATCH_ID)}), 0) AS max_batch FROM {staging.quoted()}"


def idle_probe_sql(staging: TableName) -> str:
    """One statement: does the stream hold change data, and how many staged rows wait for the lake?

    Bind ``stream`` (the stream's quoted name as a string, as ``SYSTEM$STREAM_HAS_DATA`` takes it) and
    ``committed`` (the lake table's batch id). Snowflake documents that the function may say TRUE for a
    stream without changes, never FALSE for one with changes, and that calling it on an empty stream keeps
    the stream from going stale.
    """
    return (
        "SELECT SYSTEM$STREAM_HAS_DATA(%(stream)s) AS has_data, "
        f"(SELECT COUNT(*) FROM {staging.quoted()} WHERE {q(BATCH_ID)} > %(committed)s) AS pending"
    )


def consume_sql(
    stream: TableName, staging: TableName, columns: Sequence[SnowflakeColumn], hashed: Collection[str] = ()
) -> tuple[str, dict[str, Any]]:
    """The one statement that moves the stream's offset (inside BEGIN … COMMIT).

    ``hashed``: stored names of ``columns.hash`` columns, staged as their salted SHA-256 (the clear value never
    reaches the staging table). Rows are numbered within the batch, deletes first: a stream returns the
    net change per row between two table versions, so the old images go
    before the new ones and "last wins" is the table's state at the end.
    """
    src = [q(c.name) for c in columns]
    target = [q(n) for n, _ in STAGING_META] + src
    deletes_first = f"CASE s.{q(ACTION)} WHEN '{ChangeAction.DELETE}' THEN 0 ELSE 1 END"
    seq = f"ROW_NUMBER() OVER (ORDER BY {deletes_first}, s.{q(ROW_ID)})"
    select = [
        "CAST(%(batch_id)s AS NUMBER(38,0))",
        seq,
        f"s.{q(ACTION)}",
        f"s.{q(ISUPDATE)}",
        f"CAST(s.{q(ROW_ID)} AS VARCHAR)",
        "%(run_id)s",
        "CURRENT_TIMESTAMP()",
        "%(stream_created)s",
    ] + [hash_sql(c.name, "s.") if c.name in hashed else f"s.{q(c.name)}" for c in columns]
    sql = f"INSERT INTO {staging.quoted()} ({', '.join(target)}) SELECT {', '.join(select)} FROM {stream.quoted()} AS s"
    return sql, {}


def _marker_sql(staging: TableName, action: str) -> str:
    cols = [q(BATCH_ID), q(SEQ), q(S_ACTION), q(S_ISUPDATE), q(RUN_ID), q(CONSUMED_AT), q(STREAM_CREATED)]
    return (
        f"INSERT INTO {staging.quoted()} ({', '.join(cols)}) "
        f"SELECT CAST(%(batch_id)s AS NUMBER(38,0)), 0, '{action}', FALSE, %(run_id)s, CURRENT_TIMESTAMP(), "
        "%(stream_created)s"
    )


def refresh_marker_sql(staging: TableName) -> str:
    return _marker_sql(staging, REFRESH)


def generation_marker_sql(staging: TableName) -> str:
    """A row that records the stream's generation in a batch that staged no change."""
    return _marker_sql(staging, GENERATION)


def last_stream_created_sql(staging: TableName) -> str:
    """The stream generation (its ``created_on``) the newest staged batch came from."""
    return (
        f"SELECT {q(STREAM_CREATED)} AS created_on FROM {staging.quoted()} "
        f"ORDER BY {q(BATCH_ID)} DESC, {q(SEQ)} LIMIT 1"
    )


def pending_batches_sql(staging: TableName) -> str:
    """Staged batches above the table's batch id, with row counts and refresh markers."""
    return (
        f"SELECT {q(BATCH_ID)} AS batch_id, COUNT(*) AS n, "
        f"MAX(CASE WHEN {q(S_ACTION)} = '{REFRESH}' THEN 1 ELSE 0 END) AS refresh, "
        f"MAX({q(CONSUMED_AT)}) AS consumed_at "
        f"FROM {staging.quoted()} WHERE {q(BATCH_ID)} > %(low)s "
        f"GROUP BY {q(BATCH_ID)} ORDER BY {q(BATCH_ID)}"
    )


def _range(low_param: str = "low", high_param: str = "high") -> str:
    markers = ", ".join(f"'{m}'" for m in MARKERS)
    return f"{q(BATCH_ID)} > %({low_param})s AND {q(BATCH_ID)} <= %({high_param})s AND {q(S_ACTION)} NOT IN ({markers})"


def changed_keys_sql(staging: TableName, key: Sequence[str]) -> str:
    """Every primary key touched in the batch range: all of them are deleted from the target first."""
    cols = ", ".join(q(k) for k in key)
    return f"SELECT DISTINCT {cols} FROM {staging.quoted()} WHERE {_range()}"


def final_rows_sql(staging: TableName, columns: Sequence[str], key: Sequence[str]) -> str:
    """The last change per key (batch id, then row sequence); kept when it is an insert.

    With no key (an append-only stream without primary key) every insert is kept.
    """
    cols = ", ".join(q(c) for c in columns)
    if not key:
        return (
            f"SELECT {cols} FROM {staging.quoted()} WHERE {_range()} AND {q(S_ACTION)} = '{ChangeAction.INSERT}' "
            f"ORDER BY {q(BATCH_ID)}, {q(SEQ)}"
        )
    part = ", ".join(q(k) for k in key)
    return (
        f"SELECT {cols} FROM (SELECT {cols}, {q(S_ACTION)} AS snowberg_last_action, "
        f"ROW_NUMBER() OVER (PARTITION BY {part} ORDER BY {q(BATCH_ID)} DESC, {q(SEQ)} DESC) AS snowberg_rank "
        f"FROM {staging.quoted()} WHERE {_range()}) AS last_change "
        f"WHERE snowberg_rank = 1 AND snowberg_last_action = '{ChangeAction.INSERT}'"
    )


CHANGELOG_META = (BATCH_ID, SEQ, S_ACTION, S_ISUPDATE, S_ROW_ID, CONSUMED_AT)


def changelog_rows_sql(staging: TableName, columns: Sequence[str]) -> str:
    """Every staged change in the range, in order, with its action and batch id (REFRESH markers included).

    GENERATION markers are left out: they are bookkeeping, not a change to the table.
    """
    cols = ", ".join(q(c) for c in columns)
    meta = ", ".join(q(c) for c in CHANGELOG_META)
    return (
        f"SELECT {cols}, {meta} FROM {staging.quoted()} WHERE {q(BATCH_ID)} > %(low)s AND {q(BATCH_ID)} <= %(high)s "
        f"AND {q(S_ACTION)} <> '{GENERATION}' ORDER BY {q(BATCH_ID)}, {q(SEQ)}"
    )


def cleanup_sql(staging: TableName) -> str:
    return f"DELETE FROM {staging.quoted()} WHERE {q(BATCH_ID)} <= %(through)s"


def clear_staging_sql(staging: TableName) -> str:
    return f"DELETE FROM {staging.quoted()}"


def changes_sql(
    table: TableName, columns: Sequence[str], *, append_only: bool, end: bool, settings: ColumnSettings | None = None
) -> str:
    """A stateless range read with the CHANGES clause (needs CHANGE_TRACKING = TRUE on the table).

    Nothing is consumed: CHANGES has no offset. ``AT`` is the start of the
    range, ``END`` its end (inclusive, per Snowflake's docs). The metadata
    columns are renamed to the staging names (``SNOWBERG_ACTION`` …) so a
    window looks like a staged batch. ``settings``: the table's ``columns`` (excluded left out, hashed hashed).
    """
    info = "APPEND_ONLY" if append_only else "DEFAULT"
    cols = ", ".join(select_list(columns, settings) if settings is not None else [q(c) for c in columns])
    meta = ", ".join(
        f"{q(m)} AS {q(a)}" for m, a in zip(STREAM_METADATA, (S_ACTION, S_ISUPDATE, S_ROW_ID), strict=True)
    )
    end_sql = " END(TIMESTAMP => TO_TIMESTAMP_LTZ(%(end)s))" if end else ""
    return (
        f"SELECT {cols}, {meta} FROM {table.quoted()} "
        f"CHANGES(INFORMATION => {info}) AT(TIMESTAMP => TO_TIMESTAMP_LTZ(%(start)s)){end_sql}"
    )


def generation_sql(staging: TableName) -> str:
    """The stream generation of the newest staged batch up to ``high``."""
    return (
        f"SELECT {q(STREAM_CREATED)} FROM {staging.quoted()} WHERE {q(BATCH_ID)} <= %(high)s "
        f"ORDER BY {q(BATCH_ID)} DESC LIMIT 1"
    )


def null_keys_sql(staging: TableName, key: Sequence[str]) -> str:
    """Per key column, how many staged changes of the range have NULL there (a key must be whole)."""
    counts = ", ".join(f"SUM(CASE WHEN {q(k)} IS NULL THEN 1 ELSE 0 END) AS {q(k)}" for k in key)
    return f"SELECT {counts} FROM {staging.quoted()} WHERE {_range()}"


def duplicate_inserts_sql(staging: TableName, key: Sequence[str]) -> str:
    """Keys inserted more than once within ONE batch: the source holds two rows for one key.

    An update is a DELETE + INSERT pair and a delete + re-insert has two
    row ids with different actions: both are legitimate. Two INSERTs of one
    key in one batch mean two live rows share the key in the source, and
    keeping one of them would silently drop the other.
    """
    cols = ", ".join(q(k) for k in key)
    return (
        f"SELECT {q(BATCH_ID)}, {cols}, COUNT(*) AS n FROM {staging.quoted()} "
        f"WHERE {_range()} AND {q(S_ACTION)} = '{ChangeAction.INSERT}' "
        f"GROUP BY {q(BATCH_ID)}, {cols} HAVING COUNT(*) > 1 LIMIT 3"
    )
