"""Cursor values: how a watermark is written, read back, compared and shifted.

A watermark is stored as text in the snapshot summary and bound as a
parameter in SQL; ``CursorKind`` is the one place that text is made and
parsed, so a value round-trips exactly. Each kind carries its own behaviour
(format, parse, shift, SQL type, clock, numeric projection for slicing), the
way dlt keeps ``JsonIncremental`` and ``ArrowIncremental`` apart, instead of
``if kind == ...`` ladders in every caller.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, tzinfo
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation
from enum import StrEnum
from typing import Any

_EPOCH = datetime(1970, 1, 1)
_EPOCH_DATE = date(1970, 1, 1)


class CursorKind(StrEnum):
    """The kinds of watermark cursor, from the Snowflake type of the cursor column."""

    TIMESTAMP_NTZ = "timestamp_ntz"
    TIMESTAMP_TZ = "timestamp_tz"
    DATE = "date"
    NUMBER = "number"

    # -- classification ----------------------------------------------------

    @classmethod
    def for_snowflake_type(cls, type_name: str) -> CursorKind | None:
        """The kind for a Snowflake column type (``TIMESTAMP_LTZ`` compares as an instant), or None."""
        return _BY_SNOWFLAKE_TYPE.get(type_name.upper())

    @property
    def is_time(self) -> bool:
        """Timestamps and dates: bounded by a clock, shifted by durations, backfilled by time windows."""
        return self is not CursorKind.NUMBER

    @property
    def follows_writer_clock(self) -> bool:
        """Values are wall-clock readings without a zone: which clock wrote them is configuration.

        A TIMESTAMP_NTZ filled by ``CURRENT_TIMESTAMP()`` holds the writer
        session's wall time, and a DATE is "today" somewhere. ``cursor.timezone``
        names that somewhere.
        """
        return self in (CursorKind.TIMESTAMP_NTZ, CursorKind.DATE)

    @property
    def capped_at_newest(self) -> bool:
        """The window's high bound never passes the newest cursor value in the source.

        NUMBER cursors have no clock, so the newest value *is* the high bound.
        TIMESTAMP_NTZ values are compared with a clock the writer may not share:
        if the writer's clock runs behind the configured one, a high bound taken
        from the clock would commit a watermark above every row still to be
        written, and those rows would never be read. Capped at the newest value,
        the watermark never passes a row that exists, whatever the writer's clock.
        """
        return self in (CursorKind.TIMESTAMP_NTZ, CursorKind.NUMBER)

    # -- values ------------------------------------------------------------

    def sql_type(self, scale: int = 0) -> str:
        """The Snowflake type bind parameters are cast to."""
        return {
            CursorKind.TIMESTAMP_NTZ: "TIMESTAMP_NTZ(9)",
            CursorKind.TIMESTAMP_TZ: "TIMESTAMP_TZ(9)",
            CursorKind.DATE: "DATE",
            CursorKind.NUMBER: f"NUMBER(38,{scale})",
        }[self]

    def format_value(self, value: Any) -> str:
        """Serialise a cursor value for the snapshot summary and bind parameters."""
        if value is None:
            raise ValueError("cursor value is NULL")
        if self is CursorKind.TIMESTAMP_NTZ:
            if not isinstance(value, datetime):
                value = datetime.fromisoformat(str(value))
            if value.tzinfo is not None:
                value = value.astimezone(UTC).replace(tzinfo=None)
            return value.isoformat(sep=" ", timespec="microseconds")
        if self is CursorKind.TIMESTAMP_TZ:
            if not isinstance(value, datetime):
                value = self.parse_value(str(value))
            if value.tzinfo is None:
                value = value.replace(tzinfo=UTC)
            return value.astimezone(UTC).isoformat(sep=" ", timespec="microseconds")
        if self is CursorKind.DATE:
            if isinstance(value, datetime):
                value = value.date()
            if isinstance(value, date):
                return value.isoformat()
            return date.fromisoformat(str(value)).isoformat()
        return str(_decimal(value))

    def parse_value(self, text: str) -> Any:
        """Inverse of ``format_value``: a comparable Python value."""
        if self is CursorKind.TIMESTAMP_NTZ:
            v = datetime.fromisoformat(text)
            return v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo else v
        if self is CursorKind.TIMESTAMP_TZ:
            v = datetime.fromisoformat(text)
            return (v if v.tzinfo else v.replace(tzinfo=UTC)).astimezone(UTC)
        if self is CursorKind.DATE:
            return date.fromisoformat(text)
        return _decimal(text)

    def shift_value(self, text: str, delta: timedelta) -> str:
        """``text - delta`` for lookback (dates move by whole days, rounded up)."""
        v = self.parse_value(text)
        if self is CursorKind.NUMBER:
            raise ValueError("lookback is a duration and does not apply to a NUMBER cursor")
        if self is CursorKind.DATE:
            days = -(-int(delta.total_seconds()) // 86400)
            return self.format_value(v - timedelta(days=days))
        return self.format_value(v - delta)

    def window_bound(self, value: Any, clock: tzinfo, scale: int = 0) -> str:
        """A backfill bound (an instant from the trigger form or a data interval, or a number) as cursor text.

        Windows are half-open ``[start, end)`` over instants. An NTZ cursor
        compares wall time in ``clock`` (``cursor.timezone``); a DATE cursor
        counts day ``D`` in the window when the instant ``D 00:00`` (in
        ``clock``) is, so a bound inside a day moves to the next midnight and
        consecutive intervals reload each day exactly once.
        """
        if self is CursorKind.NUMBER:
            if isinstance(value, datetime | date):
                raise TypeError("a NUMBER cursor is bounded by numbers, not by dates")
            # Rounded up to the column's scale: both bounds are "first value in / first value out".
            return self.format_value(_decimal(value).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_CEILING))
        if not isinstance(value, datetime):
            if isinstance(value, int | float | Decimal):
                raise TypeError(f"a {self.value.upper()} cursor is bounded by date-times, not by numbers")
            value = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        if self is CursorKind.TIMESTAMP_TZ:
            return self.format_value(value)
        wall = value.astimezone(clock).replace(tzinfo=None) if value.tzinfo else value
        if self is CursorKind.TIMESTAMP_NTZ:
            return self.format_value(wall)
        day = wall.date() + (timedelta(days=1) if wall.time() != datetime.min.time() else timedelta(0))
        return self.format_value(day)

    def iceberg_literal(self, text: str) -> Any:
        """A cursor value as a pyiceberg expression literal (ISO text for times, a Decimal for numbers)."""
        v = self.parse_value(text)
        return v if self is CursorKind.NUMBER else v.isoformat()

    def as_instant(self, text: str, clock: tzinfo = UTC) -> datetime | None:
        """A time-like value as an aware UTC datetime (NTZ and DATE read in ``clock``); None for NUMBER."""
        if self is CursorKind.NUMBER:
            return None
        v = self.parse_value(text)
        if self is CursorKind.DATE:
            return datetime(v.year, v.month, v.day, tzinfo=clock).astimezone(UTC)
        if v.tzinfo is None:
            return v.replace(tzinfo=clock).astimezone(UTC)
        return v.astimezone(UTC)

    # -- SQL -----------------------------------------------------------------

    def clock_sql(self, lag: timedelta, zone_param: str) -> str | None:
        """Snowflake's clock minus ``lag``, as this kind, or None for NUMBER (no clock).

        NTZ reads the wall clock in the zone bound as ``%(zone_param)s``. A
        DATE window ends at the last *closed* day: yesterday of ``clock - lag``,
        never today, so rows dated today that arrive later are still read.
        """
        secs = int(lag.total_seconds())
        wall = f"CAST(CONVERT_TIMEZONE(%({zone_param})s, CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)"
        if self is CursorKind.TIMESTAMP_NTZ:
            return f"DATEADD(second, {-secs}, {wall})"
        if self is CursorKind.TIMESTAMP_TZ:
            return f"DATEADD(second, {-secs}, CURRENT_TIMESTAMP())"
        if self is CursorKind.DATE:
            return f"DATEADD(day, -1, CAST(DATEADD(second, {-secs}, {wall}) AS DATE))"
        if secs:
            raise ValueError("commit_lag is a duration and does not apply to a NUMBER cursor; set it to 0")
        return None

    def numeric_sql(self, cursor_sql: str) -> str:
        """The cursor as a number APPROX_PERCENTILE can digest (microseconds since the epoch, days, or itself)."""
        if self in (CursorKind.TIMESTAMP_NTZ, CursorKind.TIMESTAMP_TZ):
            return f"DATE_PART(EPOCH_MICROSECOND, {cursor_sql})"
        if self is CursorKind.DATE:
            return f"DATEDIFF(day, '1970-01-01'::DATE, {cursor_sql})"
        return cursor_sql

    def from_numeric(self, value: Any, scale: int = 0) -> str:
        """Inverse of ``numeric_sql``: a cursor value as text (floored to the cursor's resolution)."""
        d = Decimal(str(value))
        if self is CursorKind.NUMBER:
            return self.format_value(d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_FLOOR))
        whole = int(d.to_integral_value(rounding=ROUND_FLOOR))
        if self is CursorKind.TIMESTAMP_NTZ:
            return self.format_value(_EPOCH + timedelta(microseconds=whole))
        if self is CursorKind.TIMESTAMP_TZ:
            return self.format_value(_EPOCH.replace(tzinfo=UTC) + timedelta(microseconds=whole))
        return self.format_value(_EPOCH_DATE + timedelta(days=whole))

    def between(self, lo: Any, hi: Any, fraction: Decimal, scale: int = 0) -> str:
        """The value ``fraction`` of the way from ``lo`` to ``hi`` (parsed values), as cursor text."""
        if self is CursorKind.NUMBER:
            return self.from_numeric(lo + (hi - lo) * fraction, scale)
        if self is CursorKind.DATE:
            return self.format_value(lo + timedelta(days=int((hi - lo).days * fraction)))
        span_us = (hi - lo) // timedelta(microseconds=1)
        return self.format_value(lo + timedelta(microseconds=int(span_us * fraction)))


_BY_SNOWFLAKE_TYPE = {
    "TIMESTAMP_NTZ": CursorKind.TIMESTAMP_NTZ,
    "TIMESTAMP_LTZ": CursorKind.TIMESTAMP_TZ,
    "TIMESTAMP_TZ": CursorKind.TIMESTAMP_TZ,
    "DATE": CursorKind.DATE,
    "NUMBER": CursorKind.NUMBER,
}

CURSOR_KINDS = tuple(k.value for k in CursorKind)


def _decimal(value: Any) -> Decimal:
    try:
        return Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"{str(value)[:80]!r} is not a number") from None


# Function forms, for callers that hold the kind as text (snapshot summaries, XCom).


def format_cursor_value(kind: str, value: Any) -> str:
    """Serialise a cursor value for the snapshot summary and bind parameters."""
    return CursorKind(kind).format_value(value)


def parse_cursor_value(kind: str, text: str) -> Any:
    """Inverse of ``format_cursor_value``: a comparable Python value."""
    return CursorKind(kind).parse_value(text)


def shift_cursor(kind: str, text: str, delta: timedelta) -> str:
    """``text - delta`` for lookback (timestamps and dates only)."""
    return CursorKind(kind).shift_value(text, delta)
