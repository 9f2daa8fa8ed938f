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


def test_number_bounds_make_a_backfill_of_a_cursor_range() -> None:
    from decimal import Decimal

    r = run({"number_start": "100", "number_end": "250.5"})
    assert (r.mode, r.start, r.end) == ("backfill", Decimal("100"), Decimal("250.5"))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"number_start": "1"}, "both number_start and number_end"),
        ({"number_start": "5", "number_end": "5"}, "must be above number_start"),
        ({"number_start": "1; DROP TABLE x", "number_end": "2"}, "is not a decimal number"),
        ({"number_start": "1", "number_end": "2", "full_refresh": True}, "exclusive"),
        (
            {
                "number_start": "1",
                "number_end": "2",
                "window_start": "2026-01-01T00:00:00Z",
                "window_end": NOW.isoformat(),
            },
            "exclusive",
        ),
    ],
)
def test_bad_number_bounds_are_rejected(params: dict, message: str) -> None:
    with pytest.raises(RunParamError, match=message):
        run(params)


SAMPLES = [
    "2026-01-01T00:00:00Z",
    "2026-01-01T00:00:00+02:00",
    "2026-01-01T00:00:00.123456-07:00",
    "2026-01-01T00:00:00",  # no zone
    "2026-01-01 00:00:00+00:00",  # space instead of T
    "2026-01-01",
    "2026-01-01T25:00:00Z",
    "yesterday",
]


@pytest.mark.parametrize("value", SAMPLES)
def test_window_params_are_accepted_exactly_when_the_trigger_form_accepts_them(value: str) -> None:
    """The form's JSON schema (``format: date-time``, checked by Airflow's Param) and snowberg agree."""
    from airflow.sdk import Param
    from airflow.sdk.exceptions import ParamValidationError

    from snowberg.config.run_params import PARAM_SCHEMAS

    try:
        Param(None, **PARAM_SCHEMAS["window_start"]).resolve(value)
        form_accepts = True
    except ParamValidationError:
        form_accepts = False
    try:
        run({"window_start": value, "window_end": "2026-01-02T00:00:00Z"})
        snowberg_accepts = True
    except RunParamError:
        snowberg_accepts = False
    assert snowberg_accepts == form_accepts


def test_window_param_without_a_zone_says_how_to_fix_it() -> None:
    with pytest.raises(RunParamError, match=r"has no time zone: add Z or an offset"):
        run({"window_start": "2026-01-01T00:00:00", "window_end": "2026-01-02T00:00:00Z"})


def test_number_params_follow_the_form_schema() -> None:
    from airflow.sdk import Param
    from airflow.sdk.exceptions import ParamValidationError

    from snowberg.config.run_params import PARAM_SCHEMAS

    p = Param(None, **PARAM_SCHEMAS["number_start"])
    assert p.resolve("12345678901234567890123.25") == "12345678901234567890123.25"
    with pytest.raises(ParamValidationError):
        p.resolve("1e5")


# ---------------------------------------------------------------- snapshot ids (issue 20, item 9)


def test_snapshot_ids_are_text_of_ascii_digits_and_stay_exact() -> None:
    from snowberg.config.run_params import SNAPSHOT_ID_PATTERN, parse_snapshot_id

    big = "6412771532345617081"  # 19 digits: above 2**53, a browser would round it as a JSON number
    assert float(big) != int(big) and parse_snapshot_id("rollback_to_snapshot", big) == 6412771532345617081
    assert parse_snapshot_id("s", None) is None and parse_snapshot_id("s", "") is None
    assert parse_snapshot_id("s", 42) == 42  # an int from Python code is exact already
    assert SNAPSHOT_ID_PATTERN == "^[0-9]{1,19}$"
    for bad in (big + "\n", "１２", "²", "1_000", " 12", "-1", "9223372036854775808", True, 1.5):
        with pytest.raises(RunParamError, match="'s'"):
            parse_snapshot_id("s", bad)
