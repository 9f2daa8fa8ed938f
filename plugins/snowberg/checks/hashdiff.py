"""Checksums of key-hash buckets on both sides, bisected down to the rows that differ.

The idea is data-diff's (checksum ranges of rows in each database, recurse
only into ranges whose checksums differ), with three changes that suit a
Snowflake → Iceberg pair:

* **Buckets by key hash, not key value.** Level ``L`` groups rows by the first
  ``L × digits_per_level`` hex digits of ``MD5(key text)``. That order is the
  same on both sides for every key type (no collation, no float or timestamp
  ordering to agree on), and one ``GROUP BY`` query per level answers for
  *every* differing bucket at once: the number of Snowflake queries grows with
  the depth (log₁₆ of the rows), not with the number of differences.
* **Cursor days first, and cheap.** Level 0 groups by the cursor's day and
  compares the row count and two sums of cheap per-row numbers (the cursor's
  epoch value and the first key column, modulo 2³¹−1): no hash at all, so
  verifying equal tables costs about one aggregate pass on each side. Later
  levels only read the days that differ. (``strict`` uses the MD5 checksums at
  level 0 too: a change that keeps a day's count and both sums is then caught
  as well, for one hash per row.)
* **A checksum both sides compute identically.** Below level 0, each row's
  canonical text (key columns, then the cursor; numbers as decimal text, dates
  and timestamps as integers since the epoch, UTC) is hashed with MD5; two
  28-bit slices of the hex digest are turned into integers and summed per
  bucket together with the row count. Snowflake's ``HASH_AGG`` would be
  cheaper but cannot be computed outside Snowflake; MD5 of canonical text can
  (DuckDB on the lake side). 28-bit slices keep each sum exact in a 64-bit
  integer or a double up to 2²⁵ rows per bucket (Snowflake's NUMBER sums are
  exact anyway; the emulator returns doubles).

The Snowflake SQL turns hex into a number with ``TO_NUMBER(<hex>, 'XXXXXXX')``
(a documented SQL format model). The local emulator (fakesnow) does not
implement format models, so ``HashDialect.EMULATOR`` renders
``CAST('0x' || <hex> AS BIGINT)`` instead (DuckDB's syntax, which the emulator
passes through); everything else in the text is the same.
"""

# SQL here is built from validated, quoted identifiers and fixed fragments; every value is bound.
# ruff: noqa: S608

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from snowberg.core.cursor import CursorKind
from snowberg.core.identifiers import quote_identifier

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

# Hex digits of the row digest that feed the two checksum slices (28 bits each).
SLICE_DIGITS = 7
KEY_SEPARATOR = "\x1f"  # between key columns (ASCII unit separator)
CURSOR_SEPARATOR = "\x1e"  # between the key and the cursor (ASCII record separator)
NULL_TEXT = "null"  # canonical text of a NULL cursor (cursors are never text, so it cannot collide)
NULL_DAY = "null"


class HashDialect(StrEnum):
    """How the Snowflake side turns hex digits into a number (see the module doc)."""

    SNOWFLAKE = "snowflake"
    EMULATOR = "emulator"


class ValueKind(StrEnum):
    """Column kinds with a canonical text form both sides produce identically."""

    INTEGER = "integer"
    DECIMAL = "decimal"
    TEXT = "text"
    DATE = "date"
    TIMESTAMP_NTZ = "timestamp_ntz"
    TIMESTAMP_TZ = "timestamp_tz"


class VolumeInputError(ValueError):
    """The table cannot be verified as configured (a key type, NULL keys, no key): the message says why."""


def value_kind(sf_type: str, scale: int | None, *, table: str, column: str) -> ValueKind:
    """The comparable kind of a Snowflake column, or a clear error for types with no shared text form."""
    if sf_type == "NUMBER":
        return ValueKind.INTEGER if not scale else ValueKind.DECIMAL
    if sf_type == "TEXT":
        return ValueKind.TEXT
    if sf_type == "DATE":
        return ValueKind.DATE
    if sf_type == "TIMESTAMP_NTZ":
        return ValueKind.TIMESTAMP_NTZ
    if sf_type in ("TIMESTAMP_TZ", "TIMESTAMP_LTZ"):
        return ValueKind.TIMESTAMP_TZ
    raise VolumeInputError(
        f"table {table!r}: column {column!r} is {sf_type}: its values have no text form that Snowflake and the "
        "lake render identically (floats, binary, semi-structured, booleans, times); use a NUMBER, text, DATE or "
        "TIMESTAMP key, or set volume.count_only"
    )


# Arrow type families each kind accepts on the lake side.
_LAKE_TYPES: dict[ValueKind, tuple[str, ...]] = {
    ValueKind.INTEGER: ("int8", "int16", "int32", "int64", "decimal128(", "decimal256("),
    ValueKind.DECIMAL: ("decimal128(", "decimal256("),
    ValueKind.TEXT: ("string", "large_string"),
    ValueKind.DATE: ("date32", "date64"),
    ValueKind.TIMESTAMP_NTZ: ("timestamp[",),
    ValueKind.TIMESTAMP_TZ: ("timestamp[",),
}


def check_lake_type(kind: ValueKind, arrow_type: Any, *, table: str, column: str) -> None:
    """Refuse to compare a column whose lake type does not match its Snowflake kind."""
    text = str(arrow_type)
    if not text.startswith(_LAKE_TYPES[kind]):
        raise VolumeInputError(
            f"table {table!r}: column {column!r} is {kind.value} in Snowflake but {text} in the lake: "
            "the two sides cannot be compared"
        )


@dataclass(frozen=True, kw_only=True)
class Column:
    """One compared column: its Snowflake and lake names and its kind."""

    name: str  # as configured (lower case unless quoted)
    kind: ValueKind

    @property
    def sf(self) -> str:
        return quote_identifier(self.name, "column")

    @property
    def lake(self) -> str:
        return self.name.lower()


# ---------------------------------------------------------------------------
# Canonical text, per side


def sf_text(col: Column) -> str:
    """Snowflake SQL for a column's canonical text (the same text ``duck_text`` makes from the lake's values).

    Numbers are their plain decimal text, dates the days since 1970-01-01 and
    timestamps the microseconds since the epoch (UTC): integer text is cheap to
    make on both sides, exact, and free of format settings. (The emulator also
    ignores ``TO_VARCHAR``'s format argument on columns, so a formatted form
    could not be tested locally.)
    """
    c = col.sf
    if col.kind in (ValueKind.INTEGER, ValueKind.DECIMAL):
        return f"TO_VARCHAR({c})"
    if col.kind is ValueKind.TEXT:
        return c
    if col.kind is ValueKind.DATE:
        return f"TO_VARCHAR(DATEDIFF(day, TO_DATE('1970-01-01'), {c}))"
    return f"TO_VARCHAR(DATE_PART(EPOCH_MICROSECOND, {c}))"


def sf_day(col: Column) -> str:
    """The cursor's UTC day (a DATE; NULL for a NULL cursor), or NULL for NUMBER cursors (one group)."""
    if col.kind is ValueKind.TIMESTAMP_TZ:
        return f"CAST(CONVERT_TIMEZONE('UTC', {col.sf}) AS DATE)"
    if col.kind in (ValueKind.TIMESTAMP_NTZ, ValueKind.DATE):
        return f"CAST({col.sf} AS DATE)"
    return "CAST(NULL AS DATE)"


def duck_text(col: Column) -> str:
    """DuckDB SQL for the column's canonical text, the same text Snowflake's side hashes."""
    c = '"' + col.lake.replace('"', '""') + '"'
    if col.kind in (ValueKind.INTEGER, ValueKind.DECIMAL):
        return f"CAST({c} AS VARCHAR)"
    if col.kind is ValueKind.TEXT:
        return c
    if col.kind is ValueKind.DATE:
        return f"CAST(datediff('day', DATE '1970-01-01', {c}) AS VARCHAR)"
    # timestamptz columns are handed to DuckDB as naive UTC (see LakeSide)
    return f"CAST(epoch_us({c}) AS VARCHAR)"


def duck_day(col: Column) -> str:
    """DuckDB SQL for the day a row falls in (NULL for a cursor that is not a time)."""
    c = '"' + col.lake + '"'
    if col.kind in (ValueKind.TIMESTAMP_TZ, ValueKind.TIMESTAMP_NTZ, ValueKind.DATE):
        return f"CAST({c} AS DATE)"
    return "CAST(NULL AS DATE)"


WEAK_MODULUS = 2147483647  # keeps each level-0 sum exact in a double up to 2**22 rows per day


def sf_weak(col: Column) -> str:
    """A cheap per-row number for level 0 (no hash): sums of these are the first, weak checksum."""
    c = col.sf
    if col.kind in (ValueKind.TIMESTAMP_NTZ, ValueKind.TIMESTAMP_TZ):
        return f"MOD(DATE_PART(EPOCH_MICROSECOND, {c}), {WEAK_MODULUS})"
    if col.kind is ValueKind.DATE:
        return f"DATEDIFF(day, TO_DATE('1970-01-01'), {c})"
    if col.kind in (ValueKind.INTEGER, ValueKind.DECIMAL):
        return f"MOD(CAST({c} AS NUMBER(38,0)), {WEAK_MODULUS})"
    return f"LENGTH({c})"


def duck_weak(col: Column) -> str:
    """DuckDB SQL for the column's cheap level-0 checksum term (kept below ``WEAK_MODULUS``)."""
    c = '"' + col.lake + '"'
    if col.kind in (ValueKind.TIMESTAMP_NTZ, ValueKind.TIMESTAMP_TZ):
        return f"epoch_us({c}) % {WEAK_MODULUS}"
    if col.kind is ValueKind.DATE:
        return f"datediff('day', DATE '1970-01-01', {c})"
    if col.kind in (ValueKind.INTEGER, ValueKind.DECIMAL):
        return f"CAST({c} AS HUGEINT) % {WEAK_MODULUS}"
    return f"length({c})"


def day_text(value: Any) -> str:
    """A day group as text: ISO date, ``null`` for NULL cursors, ``''`` for NUMBER cursors' one group."""
    if value is None:
        return NULL_DAY
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def display(kind: ValueKind, text: str | None) -> str | None:
    """Canonical text → what people read in a report (ISO dates and timestamps)."""
    if text is None:
        return None
    if kind is ValueKind.DATE:
        return (_EPOCH.date() + timedelta(days=int(text))).isoformat()
    if kind in (ValueKind.TIMESTAMP_NTZ, ValueKind.TIMESTAMP_TZ):
        ts = _EPOCH + timedelta(microseconds=int(text))
        return ts.isoformat(sep=" ", timespec="microseconds") + ("+00:00" if kind is ValueKind.TIMESTAMP_TZ else "")
    return text


def canonical(kind: ValueKind, shown: str) -> str:
    """Inverse of ``display``."""
    if kind is ValueKind.DATE:
        return str((date.fromisoformat(shown) - _EPOCH.date()).days)
    if kind in (ValueKind.TIMESTAMP_NTZ, ValueKind.TIMESTAMP_TZ):
        ts = datetime.fromisoformat(shown).replace(tzinfo=None)
        return str((ts - _EPOCH) // timedelta(microseconds=1))
    return shown


_EPOCH = datetime(1970, 1, 1)


def _concat(parts: Sequence[str], sep_sql: str) -> str:
    out = parts[0]
    for p in parts[1:]:
        out = f"{out} || {sep_sql} || {p}"
    return out


# ---------------------------------------------------------------------------
# What is compared


@dataclass(frozen=True, kw_only=True)
class Range:
    """Cursor values between ``low`` and ``high`` (the cursor kind's text; None: unbounded on that side).

    Incremental checks verify a few of these (the windows committed since the
    last verified snapshot); the bisection pushes differing days down as
    ranges too, so both sides read only the rows of those days: a range on
    the column itself is what Snowflake prunes micro-partitions by and what
    pyiceberg prunes data files by (a function of the column, such as its
    date, is neither).
    """

    low: str | None = None
    high: str | None = None
    low_inclusive: bool = False
    high_inclusive: bool = True

    def describe(self) -> str:
        lo = "(-inf" if self.low is None else ("[" if self.low_inclusive else "(") + self.low
        hi = "+inf)" if self.high is None else self.high + ("]" if self.high_inclusive else ")")
        return f"{lo}, {hi}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "low": self.low,
            "high": self.high,
            "low_inclusive": self.low_inclusive,
            "high_inclusive": self.high_inclusive,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Range:
        return cls(
            low=None if d.get("low") is None else str(d["low"]),
            high=None if d.get("high") is None else str(d["high"]),
            low_inclusive=bool(d.get("low_inclusive", False)),
            high_inclusive=bool(d.get("high_inclusive", True)),
        )


def kind_of(col: Column) -> CursorKind:
    """The cursor kind whose text and SQL type a column's ranges use."""
    return {
        ValueKind.TIMESTAMP_NTZ: CursorKind.TIMESTAMP_NTZ,
        ValueKind.TIMESTAMP_TZ: CursorKind.TIMESTAMP_TZ,
        ValueKind.DATE: CursorKind.DATE,
    }.get(col.kind, CursorKind.NUMBER)


def day_range(col: Column, day: str) -> Range | None:
    """The cursor range of one day group (``[day, day + 1)``, UTC for zoned timestamps); None for NUMBER cursors.

    ``CAST(c AS DATE) = day`` and ``day <= c < day + 1`` select the same rows;
    the second is a range on the column, which both sides can prune by.
    """
    if day in (NULL_DAY, ""):
        return None
    d = date.fromisoformat(day)
    nxt = d + timedelta(days=1)
    if col.kind is ValueKind.DATE:
        return Range(low=d.isoformat(), high=nxt.isoformat(), low_inclusive=True, high_inclusive=False)
    if col.kind is ValueKind.TIMESTAMP_NTZ:
        lo, hi = f"{d.isoformat()} 00:00:00.000000", f"{nxt.isoformat()} 00:00:00.000000"
        return Range(low=lo, high=hi, low_inclusive=True, high_inclusive=False)
    if col.kind is ValueKind.TIMESTAMP_TZ:
        lo, hi = f"{d.isoformat()} 00:00:00.000000+00:00", f"{nxt.isoformat()} 00:00:00.000000+00:00"
        return Range(low=lo, high=hi, low_inclusive=True, high_inclusive=False)
    return None


@dataclass(frozen=True, kw_only=True)
class Spec:
    """Columns and scope of one comparison."""

    table: str  # the config's name, for messages
    keys: tuple[Column, ...]
    cursor: Column | None
    cursor_kind: str | None  # snowberg cursor kind of the watermark
    cursor_scale: int = 0
    watermark: str | None = None  # compare rows with cursor <= watermark (None: all rows)
    # and, when given, only rows in one of these cursor ranges (an incremental check); empty: every row
    ranges: tuple[Range, ...] = ()
    include_null_cursor: bool = False
    digits_per_level: int = 2
    leaf_rows: int = 2000
    max_queries: int = 30
    max_keys: int = 20
    strict: bool = False  # MD5 checksums from level 0 (else level 0 sums cheap per-row numbers)


@dataclass(frozen=True, kw_only=True)
class Sums:
    count: int
    h1: int
    h2: int
    null_keys: int = 0


@dataclass(frozen=True, kw_only=True)
class Row:
    key: tuple[str, ...]  # canonical key text, per column
    cursor: str | None  # canonical cursor text


class Side(Protocol):
    name: str

    def sums(
        self, level: int, days: Sequence[str] | None, prefixes: Sequence[str] | None
    ) -> dict[tuple[str, str], Sums]:
        """Per (day, bucket prefix of ``level`` digits-groups): count and checksums."""
        ...

    def rows(self, days: Sequence[str] | None, level: int, prefixes: Sequence[str]) -> list[Row]:
        """Rows of the given buckets (canonical text)."""
        ...


# ---------------------------------------------------------------------------
# Snowflake side: SQL text (pure) and its runner


class SnowflakeSql:
    """The Snowflake queries of a comparison. Identifiers quoted, values bound (pyformat).

    ``from_params``: bind parameters the FROM clause itself uses (a time-travel
    ``AT(TIMESTAMP => …)``); every query carries them.
    """

    def __init__(
        self,
        spec: Spec,
        from_clause: str,
        dialect: HashDialect = HashDialect.SNOWFLAKE,
        from_params: Mapping[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.from_clause = from_clause
        self.dialect = dialect
        self.from_params = dict(from_params or {})
        sep = "CHR(31)"
        self.key_text = _concat([sf_text(k) for k in spec.keys], sep) if spec.keys else "''"
        if spec.cursor is not None:
            cur_text = f"COALESCE({sf_text(spec.cursor)}, '{NULL_TEXT}')"
            self.row_text = f"{self.key_text} || CHR(30) || {cur_text}"
            self.day = sf_day(spec.cursor)
        else:
            self.row_text = self.key_text
            self.day = "CAST(NULL AS DATE)"

    def hex_number(self, hex_sql: str) -> str:
        if self.dialect is HashDialect.SNOWFLAKE:
            return f"TO_NUMBER({hex_sql}, '{'X' * SLICE_DIGITS}')"
        return f"CAST('0x' || {hex_sql} AS BIGINT)"

    def _typed(self, param: str) -> str:
        s = self.spec
        assert s.cursor is not None
        kind = CursorKind(s.cursor_kind) if s.cursor_kind else kind_of(s.cursor)
        return f"CAST(%({param})s AS {kind.sql_type(s.cursor_scale)})"

    def _range(self, r: Range, name: str, params: dict[str, Any]) -> str:
        """One cursor range as a predicate on the column (what micro-partition pruning works with)."""
        assert self.spec.cursor is not None
        c = self.spec.cursor.sf
        parts = []
        if r.low is not None:
            parts.append(f"{c} {'>=' if r.low_inclusive else '>'} {self._typed(name + 'lo')}")
            params[name + "lo"] = r.low
        if r.high is not None:
            parts.append(f"{c} {'<=' if r.high_inclusive else '<'} {self._typed(name + 'hi')}")
            params[name + "hi"] = r.high
        if not parts:
            return f"{c} IS NOT NULL"
        return parts[0] if len(parts) == 1 else "(" + " AND ".join(parts) + ")"

    def scope(self) -> tuple[str, dict[str, Any]]:
        """The rows compared: cursor at or below the watermark, in one of the spec's ranges (+ NULL cursors)."""
        s = self.spec
        params: dict[str, Any] = dict(self.from_params)
        if s.cursor is None or (s.watermark is None and not s.ranges):
            return "TRUE", params
        parts = []
        if s.watermark is not None and s.cursor_kind is not None:
            parts.append(f"{s.cursor.sf} <= {self._typed('wm')}")
            params["wm"] = s.watermark
        if s.ranges:
            alts = [self._range(r, f"r{i}", params) for i, r in enumerate(s.ranges)]
            parts.append(alts[0] if len(alts) == 1 else "(" + " OR ".join(alts) + ")")
        text = " AND ".join(parts) if parts else "TRUE"
        if s.include_null_cursor:
            text = f"({text} OR {s.cursor.sf} IS NULL)"
        return text, params

    def _filters(
        self, days: Sequence[str] | None, level: int, prefixes: Sequence[str] | None
    ) -> tuple[str, dict[str, Any]]:
        where, params = self.scope()
        parts = [where]
        if days is not None and self.spec.cursor is not None and kind_of(self.spec.cursor).is_time:
            alts: list[str] = []
            for i, d in enumerate(days):
                r = day_range(self.spec.cursor, d)
                if r is not None:
                    alts.append(self._range(r, f"d{i}", params))
                else:  # the NULL-cursor group (a NUMBER cursor's one group is not filtered at all: see above)
                    alts.append(f"{self.spec.cursor.sf} IS NULL")
            if alts:
                parts.append("(" + " OR ".join(alts) + ")" if len(alts) > 1 else alts[0])
        if prefixes is not None and level > 0:
            n = level * self.spec.digits_per_level
            names = [f"p{i}" for i in range(len(prefixes))]
            parts.append(f"SUBSTR(MD5({self.key_text}), 1, {n}) IN ({', '.join(f'%({x})s' for x in names)})")
            params.update(dict(zip(names, prefixes, strict=True)))
        return " AND ".join(parts), params

    def sums_sql(
        self, level: int, days: Sequence[str] | None, parent_prefixes: Sequence[str] | None
    ) -> tuple[str, dict[str, Any]]:
        """One query: per cursor day and key-hash bucket, the rows, their checksums and NULL keys."""
        where, params = self._filters(days, level - 1, parent_prefixes)
        n = level * self.spec.digits_per_level
        bucket = f"SUBSTR(MD5({self.key_text}), 1, {n})" if n else "''"
        nulls = " OR ".join(f"{k.sf} IS NULL" for k in self.spec.keys) or "FALSE"
        if level == 0 and not self.spec.strict:
            wc = f"COALESCE({sf_weak(self.spec.cursor)}, 0)" if self.spec.cursor is not None else "0"
            wk = f"COALESCE({sf_weak(self.spec.keys[0])}, 0)" if self.spec.keys else "0"
            sql = (
                f"SELECT {self.day} AS d, '' AS b, COUNT(*) AS n, COALESCE(SUM({wc}), 0) AS h1, "
                f"COALESCE(SUM({wk}), 0) AS h2, SUM(CASE WHEN {nulls} THEN 1 ELSE 0 END) AS null_keys "
                f"FROM {self.from_clause} WHERE {where} GROUP BY d"
            )
            return sql, params
        h1 = self.hex_number(f"SUBSTR(h, 1, {SLICE_DIGITS})")
        h2 = self.hex_number(f"SUBSTR(h, {SLICE_DIGITS + 1}, {SLICE_DIGITS})")
        sql = (
            f"SELECT d, b, COUNT(*) AS n, COALESCE(SUM({h1}), 0) AS h1, COALESCE(SUM({h2}), 0) AS h2, "
            f"SUM(nk) AS null_keys FROM ("
            f"SELECT {self.day} AS d, {bucket} AS b, MD5({self.row_text}) AS h, "
            f"CASE WHEN {nulls} THEN 1 ELSE 0 END AS nk FROM {self.from_clause} WHERE {where}"
            f") GROUP BY d, b"
        )
        return sql, params

    def rows_sql(self, days: Sequence[str] | None, level: int, prefixes: Sequence[str]) -> tuple[str, dict[str, Any]]:
        where, params = self._filters(days, level, prefixes)
        cols = [f"{sf_text(k)} AS k{i}" for i, k in enumerate(self.spec.keys)]
        cur = f"{sf_text(self.spec.cursor)} AS c" if self.spec.cursor is not None else "NULL AS c"
        return f"SELECT {', '.join(cols)}, {cur} FROM {self.from_clause} WHERE {where}", params

    def lookup_sql(self, keys: Sequence[tuple[str, ...]]) -> tuple[str, dict[str, Any]]:
        """Source rows of some keys, whatever their cursor (to tell pending updates from deletes)."""
        names = [f"k{i}" for i in range(len(keys))]
        params = dict(self.from_params)
        params.update({n: KEY_SEPARATOR.join(k) for n, k in zip(names, keys, strict=True)})
        cols = [f"{sf_text(k)} AS k{i}" for i, k in enumerate(self.spec.keys)]
        cur = f"{sf_text(self.spec.cursor)} AS c" if self.spec.cursor is not None else "NULL AS c"
        in_list = ", ".join(f"%({n})s" for n in names)
        return f"SELECT {', '.join(cols)}, {cur} FROM {self.from_clause} WHERE {self.key_text} IN ({in_list})", params


def _int(v: Any) -> int:
    return int(v) if v is not None else 0


class SnowflakeSide:
    """Runs ``SnowflakeSql`` on a DB-API cursor and counts the queries."""

    name = "source"

    def __init__(self, cursor: Any, sql: SnowflakeSql) -> None:
        self.cur = cursor
        self.sql = sql
        self.queries = 0
        self.rows_fetched = 0  # rows downloaded by the row-level comparison (never the whole table)
        # Rows the pushed-down predicates select, summed over the aggregate and fetch queries: what Snowflake
        # aggregates (it reads at most the micro-partitions holding them). Key lookups are counted apart.
        self.rows_scanned = 0
        self.lookups = 0
        self.seconds = 0.0  # time in Snowflake's queries (level 0 overlaps the lake side's)

    def _run(self, text: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        self.queries += 1
        if not params:
            text = text.replace("%%", "%")  # what the connector's pyformat step does when there are values
        t0 = time.monotonic()
        try:
            self.cur.execute(text, dict(params) or None)
            return list(self.cur.fetchall())
        finally:
            self.seconds += time.monotonic() - t0

    def sums(
        self, level: int, days: Sequence[str] | None, prefixes: Sequence[str] | None
    ) -> dict[tuple[str, str], Sums]:
        text, params = self.sql.sums_sql(level, days, prefixes)
        out = {
            (day_text(d), str(b)): Sums(count=_int(n), h1=_int(h1), h2=_int(h2), null_keys=_int(nk))
            for d, b, n, h1, h2, nk in self._run(text, params)
        }
        self.rows_scanned += sum(s.count for s in out.values())
        return out

    def rows(self, days: Sequence[str] | None, level: int, prefixes: Sequence[str]) -> list[Row]:
        text, params = self.sql.rows_sql(days, level, prefixes)
        out = [_row(r) for r in self._run(text, params)]
        self.rows_fetched += len(out)
        self.rows_scanned += len(out)
        return out

    def lookup(self, keys: Sequence[tuple[str, ...]]) -> list[Row]:
        """Source rows of ``keys`` in one query (``lookup_chunks`` splits a long key list into such queries)."""
        if not keys:
            return []
        text, params = self.sql.lookup_sql(keys)
        self.lookups += 1
        return [_row(r) for r in self._run(text, params)]


LOOKUP_TEXT_BYTES = 256_000
"""Key text one lookup query binds: the bound statement stays far below the 1 MB Snowflake recommends."""


def lookup_chunks(keys: Sequence[tuple[str, ...]]) -> list[list[tuple[str, ...]]]:
    """``keys`` split into lists whose text (with quotes and separators) fits one lookup query."""
    out: list[list[tuple[str, ...]]] = []
    size = 0
    for k in keys:
        n = sum(len(v.encode()) for v in k) + 4 * len(k) + 2
        if not out or size + n > LOOKUP_TEXT_BYTES:
            out.append([])
            size = 0
        out[-1].append(k)
        size += n
    return out


def _row(r: Sequence[Any]) -> Row:
    return Row(key=tuple(str(v) for v in r[:-1]), cursor=None if r[-1] is None else str(r[-1]))


# ---------------------------------------------------------------------------
# Lake side: DuckDB aggregating a stream of Arrow batches


def _naive_utc_type(t: Any) -> Any:
    import pyarrow as pa

    return pa.timestamp(t.unit) if pa.types.is_timestamp(t) and t.tz is not None else t


def naive_utc(data: pa.Table) -> pa.Table:
    """Timestamp-with-zone columns as naive UTC: DuckDB then renders them without a session time zone."""
    import pyarrow as pa

    cols: dict[str, Any] = {}
    for name in data.column_names:
        arr = data.column(name)
        cols[name] = arr.cast(_naive_utc_type(arr.type))  # Iceberg stores UTC instants
    return pa.table(cols)


def naive_utc_reader(reader: pa.RecordBatchReader) -> pa.RecordBatchReader:
    """``naive_utc`` batch by batch: the stream stays a stream."""
    import pyarrow as pa

    schema = reader.schema
    target = pa.schema([pa.field(f.name, _naive_utc_type(f.type), f.nullable) for f in schema])
    if target.equals(schema):
        return reader

    def batches() -> Iterator[pa.RecordBatch]:
        for b in reader:
            yield pa.RecordBatch.from_arrays(
                [col.cast(f.type) for col, f in zip(b.columns, target, strict=True)], schema=target
            )

    return pa.RecordBatchReader.from_batches(target, batches())


BatchSource = Callable[[Sequence[str] | None], "pa.RecordBatchReader"]
"""A fresh stream of the lake's compared columns, given the day groups a query needs (None: every day).

The volume check's source plans an Iceberg scan whose row filter is the
check's scope and those days as cursor ranges (pyiceberg then skips data files
by partition and column statistics) and reads the files one at a time.
"""


def table_source(data: pa.Table) -> BatchSource:
    """A ``BatchSource`` over an Arrow table already in memory (tests, small tables)."""
    return lambda days: data.to_reader()


class LakeSide:
    """The lake's key and cursor columns, aggregated by DuckDB as they stream past.

    DuckDB is used because its ``md5``/``epoch_us``/hex casts give the same
    text and numbers as the Snowflake SQL, vectorised (hashing a million rows
    in Python would cost more than reading them). No query holds the table:
    each one reads a fresh stream from ``data`` (a ``BatchSource``; an Arrow
    table is wrapped in one) restricted to the days it needs, and DuckDB keeps
    only its groups — one per day at level 0, one per differing bucket below.
    Keeping each key's newest version (append tables) sorts within a key
    partition; DuckDB spills that to its temporary directory beyond
    ``memory_limit_mb``.
    """

    name = "lake"

    def __init__(
        self,
        data: pa.Table | BatchSource,
        spec: Spec,
        *,
        latest_version_only: bool = False,
        memory_limit_mb: int | None = None,
    ) -> None:
        import duckdb

        self.spec = spec
        self.source: BatchSource = data if callable(data) else table_source(data)
        self.seconds = 0.0  # time in the lake side's queries, reading the files included
        self.latest_version_only = latest_version_only and spec.cursor is not None and bool(spec.keys)
        self.queries = 0
        config: dict[str, Any] = {"preserve_insertion_order": False}
        if memory_limit_mb is not None:
            config["memory_limit"] = f"{int(memory_limit_mb)}MB"
            config["temp_directory"] = tempfile.gettempdir()
        self.con = duckdb.connect(config=config)
        key_text = _concat([duck_text(k) for k in spec.keys], "chr(31)") if spec.keys else "''"
        if spec.cursor is not None:
            row_text = f"{key_text} || chr(30) || COALESCE({duck_text(spec.cursor)}, '{NULL_TEXT}')"
            day = duck_day(spec.cursor)
            cur_text = duck_text(spec.cursor)
        else:
            row_text, day, cur_text = key_text, "CAST(NULL AS DATE)", "NULL"
        nulls = " OR ".join(f'"{k.lake}" IS NULL' for k in spec.keys) or "FALSE"
        wc = f"COALESCE({duck_weak(spec.cursor)}, 0)" if spec.cursor is not None else "0"
        wk = f"COALESCE({duck_weak(spec.keys[0])}, 0)" if spec.keys else "0"
        keys_sel = "".join(f"{duck_text(k)} AS k{i}, " for i, k in enumerate(spec.keys))
        key_cols = "".join(f"k{i}, " for i in range(len(spec.keys)))
        source = "lake_raw"
        if self.latest_version_only and spec.cursor is not None:
            part = ", ".join(f'"{k.lake}"' for k in spec.keys)
            source = (
                f'(SELECT * FROM lake_raw QUALIFY row_number() OVER (PARTITION BY {part} ORDER BY "{spec.cursor.lake}" '
                "DESC NULLS LAST) = 1)"
            )
        # A subquery, not a table: the equal case is one aggregate pass over the stream (DuckDB prunes the
        # key-bucket hash when a query does not use it); deeper levels read again only the days they need.
        self.lake_sql = (
            f"SELECT d, md5(kt) AS kb, "
            f"CAST('0x' || substr(h, 1, {SLICE_DIGITS}) AS BIGINT) AS h1, "
            f"CAST('0x' || substr(h, {SLICE_DIGITS + 1}, {SLICE_DIGITS}) AS BIGINT) AS h2, nk, wc, wk, {key_cols}c "
            f"FROM (SELECT {day} AS d, {key_text} AS kt, md5({row_text}) AS h, "
            f"CASE WHEN {nulls} THEN 1 ELSE 0 END AS nk, "
            f"{wc} AS wc, {wk} AS wk, "
            f"{keys_sel}{cur_text} AS c FROM {source})"
        )

    def query(self, sql: str, params: Sequence[Any], days: Sequence[str] | None) -> list[tuple[Any, ...]]:
        """Run ``sql`` (over the table ``lake``) on a fresh stream of the given days."""
        # Keeping each key's newest version needs all of the key's versions in scope, not one day's.
        t0 = time.monotonic()
        reader = naive_utc_reader(self.source(None if self.latest_version_only else days))
        self.queries += 1
        self.con.register("lake_raw", reader)
        try:
            return self.con.execute(f"WITH lake AS ({self.lake_sql}) {sql}", list(params)).fetchall()
        finally:
            self.con.unregister("lake_raw")
            self.seconds += time.monotonic() - t0

    def _where(self, days: Sequence[str] | None, level: int, prefixes: Sequence[str] | None) -> tuple[str, list[Any]]:
        parts, params = ["TRUE"], []
        if days is not None:
            dated = [d for d in days if d not in (NULL_DAY, "")]
            alts = [f"d IN ({', '.join('CAST(? AS DATE)' for _ in dated)})"] if dated else []
            if len(dated) < len(days):
                alts.append("d IS NULL")
            parts.append("(" + " OR ".join(alts) + ")")
            params += dated
        if prefixes is not None and level > 0:
            n = level * self.spec.digits_per_level
            parts.append(f"substr(kb, 1, {n}) IN ({', '.join('?' for _ in prefixes)})")
            params += list(prefixes)
        return " AND ".join(parts), params

    def sums(
        self, level: int, days: Sequence[str] | None, prefixes: Sequence[str] | None
    ) -> dict[tuple[str, str], Sums]:
        where, params = self._where(days, level - 1, prefixes)
        n = level * self.spec.digits_per_level
        b = f"substr(kb, 1, {n})" if n else "''"
        h1, h2 = ("wc", "wk") if level == 0 and not self.spec.strict else ("h1", "h2")
        rows = self.query(
            f"SELECT d, {b} AS b, COUNT(*), COALESCE(SUM({h1}), 0), COALESCE(SUM({h2}), 0), SUM(nk) FROM lake "
            f"WHERE {where} GROUP BY 1, 2",
            params,
            days,
        )
        return {
            (day_text(d), str(bb)): Sums(count=c, h1=int(x), h2=int(y), null_keys=int(z)) for d, bb, c, x, y, z in rows
        }

    def rows(self, days: Sequence[str] | None, level: int, prefixes: Sequence[str]) -> list[Row]:
        where, params = self._where(days, level, prefixes)
        cols = "".join(f"k{i}, " for i in range(len(self.spec.keys)))
        return [_row(r) for r in self.query(f"SELECT {cols}c FROM lake WHERE {where}", params, days)]

    def day_counts(self, days: Sequence[str] | None = None) -> dict[str, int]:
        """Rows per day group (count-only checks): one streamed pass, one group per day."""
        where, params = self._where(days, 0, None)
        rows = self.query(f"SELECT d, COUNT(*) FROM lake WHERE {where} GROUP BY 1", params, days)
        return {day_text(d): int(n) for d, n in rows}

    def close(self) -> None:
        self.con.close()


def canonical_keys(data: pa.Table, keys: Sequence[Column]) -> set[tuple[str, ...]]:
    """The canonical key text (``KeyDiff.canonical``) of each row of a lake Arrow table."""
    import duckdb

    if data.num_rows == 0 or not keys:
        return set()
    con = duckdb.connect()
    try:
        con.register("lake_raw", naive_utc(data))
        cols = ", ".join(duck_text(k) for k in keys)
        return {tuple(str(v) for v in r) for r in con.execute(f"SELECT DISTINCT {cols} FROM lake_raw").fetchall()}
    finally:
        con.close()


# ---------------------------------------------------------------------------
# The bisection


class DiffKind(StrEnum):
    """How a key differs between the two sides."""

    SOURCE_ONLY = "source_only"  # in Snowflake, not in the lake (lost, or backdated below the watermark)
    LAKE_ONLY = "lake_only"  # in the lake, not in Snowflake up to the watermark
    CURSOR_DIFFERS = "cursor_differs"  # in both, with a different cursor value


@dataclass(frozen=True, kw_only=True)
class KeyDiff:
    key: dict[str, str]
    kind: DiffKind
    source_cursor: str | None
    lake_cursor: str | None
    note: str = ""
    canonical: tuple[str, ...] = ()  # the key's canonical text per column (for lookups)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind.value,
            "source_cursor": self.source_cursor,
            "lake_cursor": self.lake_cursor,
            "note": self.note,
        }


class Truncation(StrEnum):
    """Which budget stopped a comparison before every differing bucket was compared row by row."""

    QUERIES = "queries"  # volume.max_queries: no query left for another level, a fetch or the key lookup
    ROWS = "rows"  # more rows in the differing buckets than one check fetches (max_reported_keys × leaf_rows)
    BUCKETS = "buckets"  # more differing buckets in one level than one query names (MAX_BUCKETS)


MAX_BUCKETS = 10_000
"""Differing buckets one level's query names (an IN list of hex prefixes: ~150 kB of statement text, far
below the 1 MB Snowflake recommends per statement)."""


def fetch_budget(spec: Spec) -> int:
    """Rows one check fetches per side for the row-by-row comparison: ``max_keys`` buckets of ``leaf_rows``.

    The bound the bisection always had (it narrowed at most ``max_keys`` buckets of at most ``leaf_rows``
    rows), now spent on as many buckets as fit, so many small differences are all narrowed down in one check.
    """
    return spec.max_keys * spec.leaf_rows


@dataclass(kw_only=True)
class DiffResult:
    source_rows: int = 0
    lake_rows: int = 0
    days: dict[str, tuple[int, int]] = field(default_factory=dict)  # differing days: (source, lake) counts
    diffs: list[KeyDiff] = field(default_factory=list)
    truncated: bool = False  # more differing buckets than were narrowed down
    truncated_by: Truncation | None = None  # which budget ran out first
    levels: int = 0
    source_queries: int = 0
    source_null_keys: int = 0
    lake_null_keys: int = 0

    @property
    def equal(self) -> bool:
        return not self.days and not self.diffs


def _rollup(sums: Mapping[tuple[str, str], Sums]) -> dict[str, Sums]:
    out: dict[str, list[int]] = {}
    for (d, _), s in sums.items():
        acc = out.setdefault(d, [0, 0, 0, 0])
        acc[0] += s.count
        acc[1] += s.h1
        acc[2] += s.h2
        acc[3] += s.null_keys
    return {d: Sums(count=a[0], h1=a[1], h2=a[2], null_keys=a[3]) for d, a in out.items()}


def _differing(a: Mapping[Any, Sums], b: Mapping[Any, Sums]) -> list[Any]:
    zero = Sums(count=0, h1=0, h2=0)
    return sorted(
        k
        for k in set(a) | set(b)
        if (a.get(k, zero).count, a.get(k, zero).h1, a.get(k, zero).h2)
        != (b.get(k, zero).count, b.get(k, zero).h1, b.get(k, zero).h2)
    )


def hashdiff(source: Side, lake: Side, spec: Spec, *, source_queries: Any = None) -> DiffResult:
    """Compare the two sides; narrow differing buckets level by level; diff the small ones row by row.

    ``source_queries`` (a callable returning the Snowflake query count so far)
    lets the bisection stop before it spends more than ``spec.max_queries``.
    """

    def spent() -> int:
        return int(source_queries()) if source_queries is not None else 0

    res = DiffResult()
    s0, l0 = source.sums(0, None, None), lake.sums(0, None, None)
    s_days, l_days = _rollup(s0), _rollup(l0)
    res.source_rows = sum(s.count for s in s_days.values())
    res.lake_rows = sum(s.count for s in l_days.values())
    res.source_null_keys = sum(s.null_keys for s in s_days.values())
    res.lake_null_keys = sum(s.null_keys for s in l_days.values())
    if res.source_null_keys or res.lake_null_keys:
        names = [k.name for k in spec.keys]
        raise VolumeInputError(
            f"table {spec.table!r}: primary_key {names} is NULL in {res.source_null_keys} source row(s) and "
            f"{res.lake_null_keys} lake row(s) up to the watermark: rows without a key cannot be matched; "
            "fix the key or set volume.count_only"
        )
    zero = Sums(count=0, h1=0, h2=0)
    days = _differing(s_days, l_days)
    res.days = {d: (s_days.get(d, zero).count, l_days.get(d, zero).count) for d in days}
    if not days:
        return res

    level = 0
    prefixes: list[str] | None = None
    leaves: list[tuple[int, list[str]]] = []  # (level, bucket prefixes) compared row by row
    max_level = 32 // spec.digits_per_level  # an MD5 digest has 32 hex digits
    budget = fetch_budget(spec)
    fetched = 0  # rows (per side, at most) the leaves fetch

    def stop(why: Truncation) -> None:
        res.truncated = True
        res.truncated_by = res.truncated_by or why

    while prefixes is None or prefixes:
        level += 1
        # one query for this level, one per leaf fetch (this level's included) and one for the key lookup
        if spent() + 2 + len(leaves) + 1 > spec.max_queries:
            stop(Truncation.QUERIES)
            break
        if fetched >= budget:
            stop(Truncation.ROWS)
            break
        s_l = source.sums(level, days, prefixes)
        l_l = lake.sums(level, days, prefixes)
        by_prefix: dict[str, int] = {}
        for d, b in _differing(s_l, l_l):  # a bucket is fetched across all differing days
            n = max(s_l.get((d, b), zero).count, l_l.get((d, b), zero).count)
            by_prefix[b] = by_prefix.get(b, 0) + n
        if len(by_prefix) > MAX_BUCKETS:
            stop(Truncation.BUCKETS)
            by_prefix = dict(sorted(by_prefix.items())[:MAX_BUCKETS])
        small = {b: n for b, n in sorted(by_prefix.items()) if n <= spec.leaf_rows or level >= max_level}
        deeper = {b: n for b, n in by_prefix.items() if b not in small}
        if fetched + sum(small.values()) > budget:
            # More rows than one check fetches. Each differing bucket holds at least one differing row, so
            # when their number fits, the next level (each bucket split 16**digits ways) sheds the equal rows
            # around them; otherwise fetch the buckets that fit and leave the rest to the next check.
            room_for_a_level = spent() + 2 + len(leaves) + 1 <= spec.max_queries
            splittable = level < max_level and fetched + len(small) <= budget
            if splittable and room_for_a_level:
                deeper.update(small)
                small = {}
            else:
                fits: dict[str, int] = {}
                for b, n in small.items():
                    if fetched + sum(fits.values()) + n <= budget:
                        fits[b] = n
                small = fits
                stop(Truncation.QUERIES if splittable else Truncation.ROWS)
        if small:
            leaves.append((level, sorted(small)))
            fetched += sum(small.values())
        prefixes = sorted(deeper)
    res.levels = level
    found: list[KeyDiff] = []
    for lv, pre in leaves:
        found += _row_diff(source.rows(days, lv, pre), lake.rows(days, lv, pre), spec)
    res.diffs = found
    res.source_queries = spent()
    return res


def _row_diff(s_rows: Iterable[Row], l_rows: Iterable[Row], spec: Spec) -> list[KeyDiff]:
    src: dict[tuple[str, ...], set[str | None]] = {}
    lak: dict[tuple[str, ...], set[str | None]] = {}
    for r in s_rows:
        src.setdefault(r.key, set()).add(r.cursor)
    for r in l_rows:
        lak.setdefault(r.key, set()).add(r.cursor)
    names = [k.name for k in spec.keys]
    ck = spec.cursor.kind if spec.cursor is not None else ValueKind.TEXT
    out: list[KeyDiff] = []
    for key in sorted(set(src) | set(lak)):
        sc, lc = src.get(key), lak.get(key)
        if sc == lc:
            continue
        kd = {n: display(c.kind, v) or "" for n, c, v in zip(names, spec.keys, key, strict=True)}
        s1, l1 = display(ck, _one(sc)), display(ck, _one(lc))
        if lc is None:
            kind = DiffKind.SOURCE_ONLY
        elif sc is None:
            kind = DiffKind.LAKE_ONLY
        else:
            kind = DiffKind.CURSOR_DIFFERS
        out.append(KeyDiff(key=kd, kind=kind, source_cursor=s1, lake_cursor=l1, canonical=key))
    return out


def _one(values: set[str | None] | None) -> str | None:
    """The newest of a key's cursor values (canonical integer text compares by length, then digits)."""
    if not values:
        return None
    return max((v for v in values if v is not None), key=lambda v: (len(v), v), default=None)


__all__ = [
    "Column",
    "DiffKind",
    "DiffResult",
    "HashDialect",
    "KeyDiff",
    "LakeSide",
    "MAX_BUCKETS",
    "BatchSource",
    "Range",
    "Row",
    "SnowflakeSide",
    "SnowflakeSql",
    "Spec",
    "Sums",
    "Truncation",
    "ValueKind",
    "VolumeInputError",
    "canonical_keys",
    "check_lake_type",
    "day_range",
    "fetch_budget",
    "hashdiff",
    "kind_of",
    "lookup_chunks",
    "naive_utc",
    "naive_utc_reader",
    "table_source",
    "value_kind",
]
