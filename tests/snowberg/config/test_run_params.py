"""Trigger-form params: validated before any SQL, nothing typed reaches SQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from snowberg.config.run_params import RunParamError, resolve_run

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def run(params: dict, run_type: str = "manual", **kw: object) -> object:
    return resolve_run(params, run_type=run_type, interval_start=kw.get("s"), interval_end=kw.get("e"), now=NOW)  # type: ignore[arg-type]


def test_default_is_incremental() -> None:
    r = run({"window_start": None, "window_end": None, "full_refresh": False, "dry_run": False})
    assert (r.mode, r.start, r.end, r.dry_run) == ("incremental", None, None, False)


def test_window_params_make_a_backfill() -> None:
    r = run({"window_start": "2026-01-01T00:00:00Z", "window_end": "2026-01-02T00:00:00+02:00"})
    assert r.mode == "backfill"
    assert r.end == datetime(2026, 1, 1, 22, tzinfo=UTC)


def test_backfill_run_without_conf_uses_data_interval() -> None:
    s, e = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    r = run({}, run_type="backfill", s=s, e=e)
    assert (r.mode, r.start, r.end) == ("backfill", s, e)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"window_start": "2026-01-02T00:00:00Z", "window_end": "2026-01-01T00:00:00Z"}, "must be after window_start"),
        ({"window_start": "2026-01-01T00:00:00Z", "window_end": "2027-01-01T00:00:00Z"}, "in the future"),
        ({"window_start": "2026-01-01'; DROP TABLE x; --", "window_end": "2026-01-02T00:00:00Z"}, "not an ISO 8601"),
        ({"window_start": "2026-01-01T00:00:00Z"}, "both window_start and window_end"),
        ({"full_refresh": "yes; DELETE"}, "expected true or false"),
        ({"dry_run": 1}, "expected true or false"),
        ({"sql": "SELECT 1"}, "unknown params"),
        (
            {"window_start": "2026-01-01T00:00:00Z", "window_end": "2026-01-02T00:00:00Z", "full_refresh": True},
            "exclusive",
        ),
    ],
)
def test_bad_params_are_rejected(params: dict, message: str) -> None:
    with pytest.raises(RunParamError, match=message):
        run(params)
