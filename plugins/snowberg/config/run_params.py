"""Run parameters from the trigger form, validated before any SQL runs.

Airflow validates each Param against its JSON schema when a run is
triggered (a bad type or format is a 400 in the API and an error in the UI
form). What a schema cannot say — end after start, not in the future — is
checked here, first thing in the plan task. Nothing typed into the form is
spliced into SQL: window bounds are parsed into datetimes and re-serialised,
and only those values are bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

PARAM_SCHEMAS: dict[str, dict[str, Any]] = {
    "window_start": {
        "type": ["null", "string"],
        "format": "date-time",
        "title": "Window start (UTC)",
        "description": "Reload rows whose cursor is at or after this instant. Leave empty for a normal incremental run.",
    },
    "window_end": {
        "type": ["null", "string"],
        "format": "date-time",
        "title": "Window end (UTC)",
        "description": "Reload rows whose cursor is before this instant (exclusive). Must be after the start and not in the future.",
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
PARAM_DEFAULTS: dict[str, Any] = {"window_start": None, "window_end": None, "full_refresh": False, "dry_run": False}


class RunParamError(ValueError):
    pass


@dataclass(frozen=True)
class RunRequest:
    mode: str  # incremental | backfill | full_refresh
    start: datetime | None
    end: datetime | None
    dry_run: bool


def parse_instant(name: str, value: Any, error: type[ValueError] = RunParamError) -> datetime | None:
    """An ISO 8601 param as an aware UTC datetime (naive means UTC); ``None`` for empty."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise error(f"param {name!r}: {value[:80]!r} is not an ISO 8601 date-time") from None
    else:
        raise error(f"param {name!r}: expected an ISO 8601 date-time, got {type(value).__name__}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


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
    full = _bool("full_refresh", params.get("full_refresh", False))
    dry = _bool("dry_run", params.get("dry_run", False))
    if (start is None) != (end is None):
        raise RunParamError("give both window_start and window_end, or neither")
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
        return RunRequest("backfill", start, end, dry)
    return RunRequest("full_refresh" if full else "incremental", None, None, dry)
