"""Cursor values: how a watermark is written, read back, compared and shifted.

A watermark is stored as text in the snapshot summary and bound as a
parameter in SQL; these functions are the one place that text is made and
parsed, so a value round-trips exactly.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

CURSOR_KINDS = ("timestamp_ntz", "timestamp_tz", "date", "number")

SQL_TYPES = {
    "timestamp_ntz": "TIMESTAMP_NTZ(9)",
    "timestamp_tz": "TIMESTAMP_TZ(9)",
    "date": "DATE",
    "number": "NUMBER(38,{scale})",
}


def format_cursor_value(kind: str, value: Any) -> str:
    """Serialise a cursor value for the snapshot summary and bind parameters."""
    if value is None:
        raise ValueError("cursor value is NULL")
    if kind == "timestamp_ntz":
        if isinstance(value, datetime):
            if value.tzinfo is not None:
                value = value.astimezone(UTC).replace(tzinfo=None)
            return value.isoformat(sep=" ", timespec="microseconds")
        return str(datetime.fromisoformat(str(value)).isoformat(sep=" ", timespec="microseconds"))
    if kind == "timestamp_tz":
        if isinstance(value, datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=UTC)
            return value.astimezone(UTC).isoformat(sep=" ", timespec="microseconds")
        return format_cursor_value(kind, parse_cursor_value(kind, str(value)))
    if kind == "date":
        if isinstance(value, datetime):
            value = value.date()
        if isinstance(value, date):
            return value.isoformat()
        return date.fromisoformat(str(value)).isoformat()
    if kind == "number":
        return str(Decimal(str(value)))
    raise ValueError(f"unknown cursor kind {kind!r}")


def parse_cursor_value(kind: str, text: str) -> Any:
    """Inverse of ``format_cursor_value``: a comparable Python value."""
    if kind == "timestamp_ntz":
        v = datetime.fromisoformat(text)
        return v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo else v
    if kind == "timestamp_tz":
        v = datetime.fromisoformat(text)
        return (v if v.tzinfo else v.replace(tzinfo=UTC)).astimezone(UTC)
    if kind == "date":
        return date.fromisoformat(text)
    if kind == "number":
        return Decimal(text)
    raise ValueError(f"unknown cursor kind {kind!r}")


def shift_cursor(kind: str, text: str, delta: timedelta) -> str:
    """``text - delta`` for lookback (timestamps and dates only)."""
    v = parse_cursor_value(kind, text)
    if kind == "date":
        days = -(-int(delta.total_seconds()) // 86400)
        return format_cursor_value(kind, v - timedelta(days=days))
    if kind == "number":
        raise ValueError("lookback is a duration and does not apply to a NUMBER cursor")
    return format_cursor_value(kind, v - delta)
