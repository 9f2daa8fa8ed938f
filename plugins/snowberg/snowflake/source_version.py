"""Has a source table changed since the last load? Snowflake's own answer, from INFORMATION_SCHEMA.TABLES.

A table without a cursor is reloaded whole (a full refresh). Snowflake keeps,
for each table, ``LAST_ALTERED`` ("the date and time the object was last
altered by a DML, DDL, or background metadata operation"), ``ROW_COUNT`` and
``BYTES`` in ``<database>.INFORMATION_SCHEMA.TABLES``: one metadata query,
no warehouse scan. The full refresh records what it saw (the *source
version*) with its commit; the next scheduled run compares and skips when
all three are unchanged.

Only a base table has a version that follows its rows. For anything else
the version is *unknown* and the table is reloaded: a custom query (no
single table), a view or materialized view (``LAST_ALTERED`` changes with
the view's DDL, not with its base tables' rows), an external or event
table, a table this role cannot see, and a ``LAST_ALTERED`` that is NULL
or not after the Unix epoch (no real alteration time; fakesnow on its own
answers so).

A background operation that changes ``LAST_ALTERED`` (reclustering) costs
one needless reload, never a missed change: the comparison errs towards
reloading.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from snowberg.config.table_config import TableConfig
from snowberg.core.identifiers import TableName, quote_identifier

# TABLE_TYPE values whose LAST_ALTERED follows the rows (Snowflake documents BASE TABLE, TEMPORARY TABLE,
# EXTERNAL TABLE, EVENT TABLE, VIEW and MATERIALIZED VIEW).
VERSIONED_TYPES = frozenset({"BASE TABLE"})
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, kw_only=True)
class SourceVersion:
    """What Snowflake reports about a source table's last change; equal versions mean an unchanged table."""

    table: str  # database.schema.table as configured: a version of another table never matches
    last_altered: str  # ISO 8601 in UTC
    row_count: int
    bytes: int

    def to_text(self) -> str:
        """The version as recorded in a commit's snapshot summary (compact JSON)."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str | None) -> SourceVersion | None:
        """The recorded version; None when nothing (or something unreadable) was recorded."""
        if not text:
            return None
        try:
            d = json.loads(text)
            return cls(
                table=str(d["table"]),
                last_altered=str(d["last_altered"]),
                row_count=int(d["row_count"]),
                bytes=int(d["bytes"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True, kw_only=True)
class Observed:
    """The source's version now, or None with the reason it is unknown (then the table is reloaded)."""

    version: SourceVersion | None
    reason: str = ""


def stored_name(part: str) -> str:
    """How Snowflake stores an identifier the config names (the rule of ``quote_identifier``)."""
    return quote_identifier(part)[1:-1]


def version_sql(name: TableName) -> tuple[str, dict[str, str]]:
    """The metadata query for one table and its bind parameters (the database is an identifier, quoted)."""
    database = quote_identifier(name.database, "database")
    sql = (
        f"SELECT TABLE_TYPE, LAST_ALTERED, ROW_COUNT, BYTES FROM {database}.INFORMATION_SCHEMA.TABLES "  # noqa: S608 - quoted identifier; values bound
        "WHERE TABLE_SCHEMA = %(schema)s AND TABLE_NAME = %(table)s"
    )
    return sql, {"schema": stored_name(name.schema), "table": stored_name(name.table)}


def _instant(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str) and value:
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    if dt.tzinfo is None:  # TIMESTAMP_LTZ comes back aware; a naive value is read as UTC
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def parse_version(table: str, rows: Sequence[Sequence[Any]]) -> Observed:
    """The version from the rows of ``version_sql`` (TABLE_TYPE, LAST_ALTERED, ROW_COUNT, BYTES)."""
    if not rows:
        return Observed(
            version=None, reason=f"{table} is not in INFORMATION_SCHEMA.TABLES (or not visible to this role)"
        )
    if len(rows) > 1:
        return Observed(version=None, reason=f"{table} matches {len(rows)} rows of INFORMATION_SCHEMA.TABLES")
    table_type, last_altered, row_count, size = rows[0]
    if table_type not in VERSIONED_TYPES:
        return Observed(
            version=None,
            reason=f"{table} is of TABLE_TYPE {table_type!r}: only a base table's LAST_ALTERED follows its rows",
        )
    at = _instant(last_altered)
    if at is None or at <= EPOCH:
        return Observed(version=None, reason=f"Snowflake reports no LAST_ALTERED for {table} ({last_altered!r})")
    if row_count is None or size is None:
        return Observed(version=None, reason=f"Snowflake reports no ROW_COUNT/BYTES for {table}")
    return Observed(
        version=SourceVersion(
            table=table, last_altered=at.isoformat(timespec="microseconds"), row_count=int(row_count), bytes=int(size)
        )
    )


def observe(cfg: TableConfig, conn: Any) -> Observed:
    """The source's version now (one metadata query), or why it is unknown (a query source asks nothing)."""
    if not cfg.source.table:
        return Observed(version=None, reason="the source is a custom query: no single table to ask about")
    return observe_table(TableName.parse(cfg.source.table), conn)


def observe_table(name: TableName, conn: Any) -> Observed:
    """Table ``name``'s version now (one metadata query), or why it is unknown."""
    sql, params = version_sql(name)
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        rows = cur.fetchall()
    finally:
        cur.close()
    return parse_version(str(name), rows)


def unchanged(recorded: SourceVersion | None, now: Observed) -> str | None:
    """Why a reload can be skipped (the same version as the last load recorded), else None."""
    if now.version is None or recorded is None or recorded != now.version:
        return None
    v = now.version
    return (
        f"the source {v.table} is unchanged since the last load (LAST_ALTERED {v.last_altered}, "
        f"{v.row_count:,} rows, {v.bytes:,} bytes)"
    )


def changed_reason(recorded: SourceVersion | None, now: Observed) -> str:
    """Why the table is reloaded (for the plan's log)."""
    if now.version is None:
        return f"the source's version is unknown: {now.reason}"
    if recorded is None:
        return "no earlier load recorded the source's version"
    diffs = [
        f"{k} {getattr(recorded, k)!r} → {getattr(now.version, k)!r}"
        for k in ("table", "last_altered", "row_count", "bytes")
        if getattr(recorded, k) != getattr(now.version, k)
    ]
    return "the source changed: " + ", ".join(diffs)
