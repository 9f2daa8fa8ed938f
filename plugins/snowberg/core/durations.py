"""Parse the durations used in table configs ("90s", "5m", "2h", "1d", ISO 8601)."""

from __future__ import annotations

import re
from datetime import timedelta

_SIMPLE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(value: object) -> timedelta:
    """Return a ``timedelta`` for ``value``.

    Accepts an int/float number of seconds, a short form such as ``"15m"``, or
    an ISO 8601 duration such as ``"PT1H"`` (parsed by pendulum, so we do not
    carry our own ISO parser).
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"duration must not be negative: {value!r}")
        return timedelta(seconds=value)
    if isinstance(value, str):
        m = _SIMPLE.match(value)
        if m:
            return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])
        if value.strip().upper().startswith("P"):
            import pendulum

            try:
                parsed = pendulum.parse(value.strip())
            except Exception as exc:  # pendulum raises its own ParserError
                raise ValueError(f"not a duration: {value!r}") from exc
            if isinstance(parsed, timedelta):
                return timedelta(seconds=parsed.total_seconds())
    raise ValueError(f"not a duration: {value!r} (use e.g. '90s', '15m', '2h', '1d' or ISO 8601 'PT1H')")


def format_duration(td: timedelta) -> str:
    secs = int(td.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs and secs % size == 0:
            return f"{secs // size}{unit}"
    return f"{secs}s"
