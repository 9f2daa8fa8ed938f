"""Run parameters from the trigger form, validated before any SQL runs.

Airflow validates each Param against its JSON schema when a run is
triggered (a bad type or format is a 400 in the API and an error in the UI
form). What a schema cannot say — end after start, not in the future — is
checked here, first thing in the plan task. Nothing typed into the form is
spliced into SQL: window bounds are parsed into datetimes and re-serialised,
and only those values are bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from snowberg.core.window import Mode

# A plain decimal number, as text: NUMBER(38, s) values do not fit a JSON (double) number.
NUMBER_PATTERN = r"^-?[0-9]{1,38}(\.[0-9]{1,37})?$"
# An Iceberg snapshot id, as text: 19-digit ids pass 2**53, and a browser rounds a JSON number that large.
# JSON schema patterns are searches where ``$`` also matches before a trailing newline: the value is
# checked again here with ``re.fullmatch`` (``[0-9]``, not ``\d``: ASCII digits only).
SNAPSHOT_ID_PATTERN = r"^[0-9]{1,19}$"
MAX_SNAPSHOT_ID = 2**63 - 1  # Iceberg snapshot ids are Java longs
# A tag name (unanchored: ``re.fullmatch`` it; anchor it with ^…$ in a JSON schema).
TAG_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}"

PARAM_SCHEMAS: dict[str, dict[str, Any]] = {
    "window_start": {
        "type": ["null", "string"],
        "format": "date-time",
        "title": "Window start",
        "description": "Reload rows whose cursor is at or after this instant (RFC 3339 with a zone, for example "
        "2026-01-01T00:00:00Z). Leave empty for a normal incremental run.",
    },
    "window_end": {
        "type": ["null", "string"],
        "format": "date-time",
        "title": "Window end",
        "description": "Reload rows whose cursor is before this instant (exclusive). Must be after the start and "
        "not in the future; a window ending past the watermark is clamped to it.",
    },
    "number_start": {
        "type": ["null", "string"],
        "pattern": NUMBER_PATTERN,
        "title": "Number start (NUMBER cursors)",
        "description": "For a NUMBER cursor: reload rows whose cursor is at or above this value.",
    },
    "number_end": {
        "type": ["null", "string"],
        "pattern": NUMBER_PATTERN,
        "title": "Number end (NUMBER cursors)",
        "description": "For a NUMBER cursor: reload rows whose cursor is below this value (exclusive).",
    },
    "full_refresh": {
        "type": "boolean",
        "title": "Full refresh",
        "description": "Replace the whole Iceberg table with the source, in one commit.",
    },
    "dry_run": {
        "type": "boolean",
        "title": "Dry run",
        "description": "Plan the window and count the rows; write nothing.",
    },
}
PARAM_DEFAULTS: dict[str, Any] = {
    "window_start": None,
    "window_end": None,
    "number_start": None,
    "number_end": None,
    "full_refresh": False,
    "dry_run": False,
}


class RunParamError(ValueError):
    """A trigger form's params are invalid; the message names the param."""

    pass


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """What a manual trigger asked for: the run mode, its window bounds, and a dry run (plan and count only)."""

    mode: Mode
    start: datetime | Decimal | None = None  # instants for time cursors, numbers for NUMBER cursors
    end: datetime | Decimal | None = None
    dry_run: bool = False


def parse_instant(name: str, value: Any, error: type[ValueError] = RunParamError) -> datetime | None:
    """An RFC 3339 date-time param (with a zone) as an aware UTC datetime; ``None`` for empty.

    Text is checked with the same ``date-time`` format check the trigger form's
    JSON schema applies (jsonschema's), so a value is accepted here exactly
    when the form accepts it: a date-time without a zone is refused by both.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        from jsonschema import FormatChecker

        text = value.strip()
        if not FormatChecker().conforms(text, "date-time"):
            hint = " (it has no time zone: add Z or an offset such as +00:00)" if _naive_iso(text) else ""
            raise error(f"param {name!r}: {value[:80]!r} is not an ISO 8601 date-time with a zone (RFC 3339){hint}")
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    else:
        raise error(f"param {name!r}: expected an ISO 8601 date-time, got {type(value).__name__}")
    if dt.tzinfo is None:
        raise error(f"param {name!r}: {dt.isoformat()} has no time zone: add Z or an offset such as +00:00")
    return dt.astimezone(UTC)


def _naive_iso(text: str) -> bool:
    try:
        return datetime.fromisoformat(text).tzinfo is None
    except ValueError:
        return False


def parse_number(name: str, value: Any) -> Decimal | None:
    """A NUMBER-cursor bound: a decimal number as text (or an int); ``None`` for empty."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        raise RunParamError(f"param {name!r}: expected a number as text, got {type(value).__name__}")
    text = str(value).strip()
    if not re.fullmatch(NUMBER_PATTERN, text):
        raise RunParamError(f"param {name!r}: {text[:80]!r} is not a decimal number")
    return Decimal(text)


def parse_snapshot_id(name: str, value: Any) -> int | None:
    """A snapshot id a person typed (trigger form, command line): ASCII digits as text, or an int; None for empty.

    Refused: JSON numbers that are not ints, digits of other scripts (``int()`` would take ``"١٢"``),
    signs, spaces, underscores, a trailing newline, and anything above a Java long.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RunParamError(f"param {name!r}: expected a snapshot id as text, got {type(value).__name__}")
    if isinstance(value, str) and not re.fullmatch(SNAPSHOT_ID_PATTERN[1:-1], value):
        raise RunParamError(f"param {name!r}: {value[:80]!r} is not a snapshot id (1 to 19 ASCII digits)")
    sid = int(value)
    if not 0 <= sid <= MAX_SNAPSHOT_ID:
        raise RunParamError(f"param {name!r}: {sid} is not a snapshot id (0 to {MAX_SNAPSHOT_ID})")
    return sid


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    raise RunParamError(f"param {name!r}: expected true or false, got {str(value)[:80]!r}")


def resolve_run(
    params: dict[str, Any],
    *,
    run_type: str | None,
    interval_start: datetime | None,
    interval_end: datetime | None,
    now: datetime | None = None,
) -> RunRequest:
    """Decide what a run does from its params, type and data interval.

    * params window_start/window_end → a backfill of exactly that window
    * params number_start/number_end → a backfill of that cursor range (NUMBER cursors)
    * a backfill run (the UI's Backfill dialog sends no conf) → its data interval
    * full_refresh → replace the table
    * otherwise → incremental from the table's watermark
    """
    unknown = set(params) - set(PARAM_DEFAULTS)
    if unknown:
        raise RunParamError(f"unknown params {sorted(unknown)}; allowed: {sorted(PARAM_DEFAULTS)}")
    now = now or datetime.now(UTC)
    start = parse_instant("window_start", params.get("window_start"))
    end = parse_instant("window_end", params.get("window_end"))
    n_start = parse_number("number_start", params.get("number_start"))
    n_end = parse_number("number_end", params.get("number_end"))
    full = _bool("full_refresh", params.get("full_refresh", False))
    dry = _bool("dry_run", params.get("dry_run", False))
    if (start is None) != (end is None):
        raise RunParamError("give both window_start and window_end, or neither")
    if (n_start is None) != (n_end is None):
        raise RunParamError("give both number_start and number_end, or neither")
    if n_start is not None and n_end is not None:
        if start is not None:
            raise RunParamError("window_start/window_end and number_start/number_end are exclusive: choose one")
        if full:
            raise RunParamError("full_refresh and a window are exclusive: choose one")
        if n_end <= n_start:
            raise RunParamError(f"number_end {n_end} must be above number_start {n_start}")
        return RunRequest(mode=Mode.BACKFILL, start=n_start, end=n_end, dry_run=dry)
    if start is None and run_type == "backfill":
        if interval_start is None or interval_end is None:
            raise RunParamError("a backfill run needs a data interval or window params")
        start, end = interval_start.astimezone(UTC), interval_end.astimezone(UTC)
    if start is not None and end is not None:
        if full:
            raise RunParamError("full_refresh and a window are exclusive: choose one")
        if end <= start:
            raise RunParamError(f"window_end {end.isoformat()} must be after window_start {start.isoformat()}")
        if end > now:
            raise RunParamError(
                f"window_end {end.isoformat()} is in the future (now {now.isoformat(timespec='seconds')})"
            )
        return RunRequest(mode=Mode.BACKFILL, start=start, end=end, dry_run=dry)
    return RunRequest(mode=Mode.FULL_REFRESH if full else Mode.INCREMENTAL, dry_run=dry)
