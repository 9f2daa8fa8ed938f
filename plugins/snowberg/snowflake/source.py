"""Reading from Snowflake: the window's SQL, the extract query and its result's columns and batches.

All SQL built here follows two rules: identifiers are validated and quoted
(``snowberg.core.identifiers``), values are bind parameters (pyformat, bound by the
connector) and cast in SQL to the cursor's type.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from snowberg.config.table_config import TableConfig
from snowberg.core.cursor import CursorKind
from snowberg.core.identifiers import TableName, quote_identifier
from snowberg.core.window import Window
from snowberg.mapping.columns import SnowflakeColumn
from snowberg.snowflake.projection import projected

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------
# Cursor values


def cursor_kind(col: SnowflakeColumn) -> CursorKind:
    """The cursor kind of a column, refusing a type that cannot be a watermark."""
    kind = CursorKind.for_snowflake_type(col.type)
    if kind is None:
        raise ValueError(
            f"cursor column {col.name!r} is {col.sql_type}; a watermark cursor must be TIMESTAMP_*, DATE or NUMBER"
        )
    return kind


class SourceQuery:
    """SQL text for one configured source."""

    def __init__(self, cfg: TableConfig) -> None:
        self.cfg = cfg
        if cfg.source.table:
            self.base_clause = TableName.parse(cfg.source.table).quoted()
        else:
            alias = "snowberg_base" if cfg.columns.exclude or cfg.columns.hash else "snowberg_src"
            self.base_clause = f"({cfg.source.query}) AS {alias}"
        # Every statement reads the source through this: excluded columns left out, hashed ones hashed.
        self.from_clause = projected(self.base_clause, cfg.columns)
        self.cursor_sql = quote_identifier(cfg.cursor.column, "cursor column") if cfg.cursor else None

    def from_clause_at(self, at_clause: str) -> str:
        """``from_clause`` with ``at_clause`` (time travel, ``AT(…)``) on the source table, under the projection."""
        return projected(f"{self.base_clause} {at_clause}", self.cfg.columns)

    def describe_cursor_sql(self) -> str:
        """A query returning no rows whose result metadata types the cursor column."""
        return f"SELECT {self.cursor_sql} FROM {self.from_clause} LIMIT 0"

    def _typed(self, kind: CursorKind, scale: int, param: str) -> str:
        return f"CAST(%({param})s AS {kind.sql_type(scale)})"

    def newest_expr(self) -> str:
        """The newest cursor value in the whole source."""
        return f"(SELECT MAX({self.cursor_sql}) FROM {self.from_clause})"

    def predicate(self, w: Window) -> tuple[str, dict[str, Any]]:
        """WHERE clause text and its bind parameters."""
        if self.cursor_sql is None or w.cursor_kind is None:
            return "TRUE", {}
        parts: list[str] = []
        params: dict[str, Any] = {}
        c = self.cursor_sql
        if w.low is not None:
            parts.append(f"{c} {'>=' if w.low_inclusive else '>'} {self._typed(w.cursor_kind, w.cursor_scale, 'low')}")
            params["low"] = w.low
        if w.high is not None:
            parts.append(
                f"{c} {'<=' if w.high_inclusive else '<'} {self._typed(w.cursor_kind, w.cursor_scale, 'high')}"
            )
            params["high"] = w.high
        text = " AND ".join(parts) if parts else f"{c} IS NOT NULL"
        if w.include_nulls:
            text = f"({text}) OR {c} IS NULL"
        return text, params

    def extract_sql(self, w: Window) -> tuple[str, dict[str, Any]]:
        """The SELECT reading the window's rows, with its bound parameters."""
        where, params = self.predicate(w)
        return f"SELECT * FROM {self.from_clause} WHERE {where}", params

    def plan_sql(
        self,
        kind: CursorKind,
        scale: int,
        low: str | None,
        low_inclusive: bool,
        lag: timedelta,
        count_nulls: bool,
        zone: str = "UTC",
    ) -> tuple[str, dict[str, Any]]:
        """One query: the window's upper bound from Snowflake's clock, and what lies in the window.

        It also returns the unlagged clock and the newest cursor value in the
        whole source, so the plan can tell a writer whose clock is not
        ``cursor.timezone``. A run with nothing new costs exactly this query
        (the first run of a table also describes the cursor column; later runs
        take its kind from the table's state and check it against the type of
        ``min_cursor`` in this query's result).
        """
        c = self.cursor_sql
        params: dict[str, Any] = {}
        if kind.follows_writer_clock:
            params["zone"] = zone
        cond = []
        if low is not None:
            cond.append(f"{c} {'>=' if low_inclusive else '>'} {self._typed(kind, scale, 'low')}")
            params["low"] = low
        inner_where = " AND ".join(cond) if cond else "TRUE"
        if count_nulls:
            inner_where = f"({inner_where}) OR {c} IS NULL"
        lagged = kind.clock_sql(lag, "zone")
        if lagged is None:
            hi = "x.newest"  # NUMBER: no clock, the newest value is the bound
        elif kind.capped_at_newest:
            # CASE, not LEAST: Snowflake's LEAST is NULL when the source is empty, the
            # emulator's skips NULLs; an empty source must give "nothing to read".
            hi = "CASE WHEN x.newest IS NULL THEN NULL WHEN x.newest < x.lagged THEN x.newest ELSE x.lagged END"
        else:
            hi = "x.lagged"
        clock = kind.clock_sql(timedelta(0), "zone") if kind is CursorKind.TIMESTAMP_NTZ else "NULL"
        sql = (
            f"SELECT h.hi AS high, h.clock AS clock, h.newest AS newest, COUNT(s.c) AS rows_in_window, "
            f"COUNT(s.one) - COUNT(s.c) AS null_rows, MIN(s.c) AS min_cursor, MAX(s.c) AS max_cursor "
            f"FROM (SELECT {hi} AS hi, x.clock AS clock, x.newest AS newest FROM "
            f"(SELECT {lagged or 'NULL'} AS lagged, {clock} AS clock, {self.newest_expr()} AS newest) x) h "
            f"LEFT JOIN (SELECT {c} AS c, 1 AS one FROM {self.from_clause} WHERE {inner_where}) s "
            f"ON (s.c <= h.hi OR s.c IS NULL) "
            f"GROUP BY h.hi, h.clock, h.newest"
        )
        return sql, params


def describe_cursor(cur: Any, sq: SourceQuery) -> SnowflakeColumn:
    """Snowflake's own metadata of the cursor column (type, precision, scale), read without rows."""
    cur.execute(sq.describe_cursor_sql())
    md = (getattr(cur, "_description", None) or cur.description)[0]
    return SnowflakeColumn.from_metadata(md)


def result_columns(cur: Any) -> list[SnowflakeColumn]:
    """Snowflake's own column metadata for the current result."""
    mds = getattr(cur, "_description", None) or cur.description
    return [SnowflakeColumn.from_metadata(md) for md in mds]


def fetch_batches(cur: Any) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the current result, as the connector streams them."""
    for table in cur.fetch_arrow_batches():
        yield from table.to_batches()
