"""Run params of a stream DAG (trigger form), validated before any SQL.

* ``recover_stale_stream``: re-create the stream with initial rows and fully
  refresh the target (the way out of a stale stream).
* ``changes_start``/``changes_end`` (+ ``changes_target``): also backfill that
  window of changes with the CHANGES clause (nothing is consumed).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any


class ChangesTarget(enum.StrEnum):
    """Where a CHANGES backfill lands (``snowberg.streams.changes.backfill_changes``)."""

    CHANGELOG = "changelog"  # appended to the stream's changelog table
    TABLE = "table"  # applied to the target by primary key, like a stream batch


STREAM_PARAM_SCHEMAS: dict[str, dict[str, Any]] = {
    "recover_stale_stream": {
        "type": "boolean",
        "title": "Recover a stale stream",
        "description": "Re-create the stream (CREATE OR REPLACE … SHOW_INITIAL_ROWS = TRUE) and replace the Iceberg "
        "table with the source's current rows in one commit.",
    },
    "changes_start": {
        "type": ["null", "string"],
        "format": "date-time",
        "title": "CHANGES window start (UTC)",
        "description": "Backfill the changes from this instant with the CHANGES clause (needs CHANGE_TRACKING).",
    },
    "changes_end": {
        "type": ["null", "string"],
        "format": "date-time",
        "title": "CHANGES window end (UTC)",
        "description": "End of the CHANGES window (inclusive); not in the future.",
    },
    "changes_target": {
        "type": "string",
        "enum": [t.value for t in ChangesTarget],
        "title": "Backfill into",
        "description": "changelog: append the window's changes to the changelog table; table: apply them to the target "
        "(refused when the stream already applied later changes).",
    },
}
STREAM_PARAM_DEFAULTS: dict[str, Any] = {
    "recover_stale_stream": False,
    "changes_start": None,
    "changes_end": None,
    "changes_target": ChangesTarget.CHANGELOG.value,
}


class StreamParamError(ValueError):
    pass


@dataclass(frozen=True, kw_only=True)
class StreamRunRequest:
    recover: bool
    changes_start: datetime | None
    changes_end: datetime | None
    changes_target: ChangesTarget


def _instant(name: str, value: Any) -> datetime | None:
    # The same parsing as the watermark DAGs' window params.
    from snowberg.config.run_params import parse_instant

    return parse_instant(name, value, StreamParamError)


def resolve_stream_params(params: dict[str, Any], *, now: datetime | None = None) -> StreamRunRequest:
    """Validate what a schema cannot say: both window ends or none, end after start, not in the future."""
    known = {k: v for k, v in params.items() if k in STREAM_PARAM_DEFAULTS}
    recover = known.get("recover_stale_stream", False)
    if not isinstance(recover, bool):
        raise StreamParamError(f"param 'recover_stale_stream': expected true or false, got {str(recover)[:80]!r}")
    start = _instant("changes_start", known.get("changes_start"))
    end = _instant("changes_end", known.get("changes_end"))
    target = known.get("changes_target") or ChangesTarget.CHANGELOG
    if target not in [t.value for t in ChangesTarget]:
        valid = " or ".join(repr(t.value) for t in ChangesTarget)
        raise StreamParamError(f"param 'changes_target': {target!r} is not {valid}")
    if (start is None) != (end is None):
        raise StreamParamError("give both changes_start and changes_end, or neither")
    if start is not None and end is not None:
        now = now or datetime.now(UTC)
        if end <= start:
            raise StreamParamError(f"changes_end {end.isoformat()} must be after changes_start {start.isoformat()}")
        if end > now:
            raise StreamParamError(f"changes_end {end.isoformat()} is in the future")
    return StreamRunRequest(recover=recover, changes_start=start, changes_end=end, changes_target=ChangesTarget(target))


_PRESETS = {
    "@hourly": timedelta(hours=1),
    "@daily": timedelta(days=1),
    "@midnight": timedelta(days=1),
    "@weekly": timedelta(weeks=1),
    "@monthly": timedelta(days=31),
    "@quarterly": timedelta(days=92),
    "@yearly": timedelta(days=366),
    "@annually": timedelta(days=366),
}


def schedule_interval(schedule: str | None) -> timedelta | None:
    """The longest gap between two runs of ``schedule`` (a preset, a cron or a duration such as ``30m``).

    The longest gap is the one the stream has to survive unconsumed, so the
    staleness margin is measured against it. None for unscheduled DAGs.
    """
    if schedule is None or schedule in ("@once", "@continuous"):
        return None
    if schedule in _PRESETS:
        return _PRESETS[schedule]
    try:
        from snowberg.core.durations import parse_duration

        return parse_duration(schedule)
    except ValueError:
        pass
    from croniter import croniter

    it = croniter(schedule, datetime(2026, 1, 1, tzinfo=UTC))
    times = [it.get_next(datetime) for _ in range(50)]
    return max(b - a for a, b in zip(times, times[1:], strict=False))
