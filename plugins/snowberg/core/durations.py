"""Parse the durations used in table configs ("90s", "5m", "2h", "1d", ISO 8601)."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

# re.ASCII: \d would also match every Unicode digit ("\u0663"), which Decimal() reads without a word.
_SIMPLE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*", re.ASCII)
_UNIT_SECONDS = {
    "ms": Decimal("0.001"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
    "d": Decimal(86400),
    "w": Decimal(604800),
}


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
        m = _SIMPLE.fullmatch(value)
        if m:
            # Decimal, not float: "315360000.000001s" must read back to the microsecond format_duration wrote.
            micros = Decimal(m.group(1)) * _UNIT_SECONDS[m.group(2)] * 10**6
            return timedelta(microseconds=int(micros.to_integral_value()))
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
    """Write ``td`` in the short form ``parse_duration`` reads back exactly, for messages and docs.

    Whole seconds use the largest unit that divides them ("90m", "2d"); whole milliseconds use "ms";
    anything finer is written as seconds with up to six decimals.
    """
    micros = td // timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    secs, frac = divmod(micros, 10**6)
    if frac == 0:
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if secs and secs % size == 0:
                return f"{sign}{secs // size}{unit}"
        return f"{sign}{secs}s"
    if micros % 1_000 == 0:
        return f"{sign}{micros // 1_000}ms"
    return f"{sign}{secs}.{frac:06d}".rstrip("0") + "s"
