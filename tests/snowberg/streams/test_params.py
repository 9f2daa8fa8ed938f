"""Run params of a stream DAG: the trigger form's schema, what it cannot say, and the schedule's longest gap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from snowberg.streams.params import (
    STREAM_PARAM_DEFAULTS,
    STREAM_PARAM_SCHEMAS,
    StreamParamError,
    resolve_stream_params,
    schedule_interval,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def test_every_param_has_a_schema_and_a_default_the_schema_accepts() -> None:
    import jsonschema

    assert set(STREAM_PARAM_SCHEMAS) == set(STREAM_PARAM_DEFAULTS)
    for name, schema in STREAM_PARAM_SCHEMAS.items():
        jsonschema.validate(STREAM_PARAM_DEFAULTS[name], schema)
        assert schema["title"] and schema["description"]
    assert STREAM_PARAM_SCHEMAS["changes_target"]["enum"] == ["changelog", "table"]


def test_the_defaults_resolve_to_a_plain_run() -> None:
    r = resolve_stream_params(dict(STREAM_PARAM_DEFAULTS), now=NOW)
    assert (r.recover, r.changes_start, r.changes_end, r.changes_target) == (False, None, None, "changelog")
    assert resolve_stream_params({}, now=NOW) == r
    # The DAG's other params (of other tasks) are not this module's business.
    assert resolve_stream_params({"full_refresh": True, "window_start": "x"}, now=NOW) == r


def test_a_window_is_read_as_utc_instants() -> None:
    r = resolve_stream_params(
        {
            "recover_stale_stream": True,
            "changes_start": "2026-05-01T02:00:00+02:00",
            "changes_end": datetime(2026, 5, 2, tzinfo=UTC),
            "changes_target": "table",
        },
        now=NOW,
    )
    assert r.recover is True and r.changes_target == "table"
    assert r.changes_start == datetime(2026, 5, 1, tzinfo=UTC) and r.changes_end == datetime(2026, 5, 2, tzinfo=UTC)
    assert r.changes_start.tzinfo is UTC


@pytest.mark.parametrize(
    "params,message",
    [
        ({"recover_stale_stream": "yes"}, "param 'recover_stale_stream': expected true or false, got 'yes'"),
        ({"changes_target": "elsewhere"}, "param 'changes_target': 'elsewhere' is not 'changelog' or 'table'"),
        ({"changes_start": "2026-05-01T00:00:00Z"}, "give both changes_start and changes_end, or neither"),
        ({"changes_end": "2026-05-01T00:00:00Z"}, "give both changes_start and changes_end, or neither"),
        (
            {"changes_start": "2026-05-02T00:00:00Z", "changes_end": "2026-05-01T00:00:00Z"},
            "changes_end 2026-05-01T00:00:00+00:00 must be after changes_start 2026-05-02T00:00:00+00:00",
        ),
        (
            {"changes_start": "2026-05-01T00:00:00Z", "changes_end": "2026-05-01T00:00:00Z"},
            "must be after changes_start",
        ),
        (
            {"changes_start": "2026-05-01T00:00:00Z", "changes_end": "2026-07-01T00:00:00Z"},
            "changes_end 2026-07-01T00:00:00+00:00 is in the future",
        ),
        ({"changes_start": "2026-05-01T00:00:00", "changes_end": "2026-05-02T00:00:00Z"}, "has no time zone"),
        ({"changes_start": "yesterday", "changes_end": "2026-05-02T00:00:00Z"}, "param 'changes_start'"),
    ],
    ids=[
        "recover-not-bool",
        "unknown-target",
        "start-only",
        "end-only",
        "end-before-start",
        "empty-window",
        "end-in-future",
        "no-zone",
        "not-a-date",
    ],
)
def test_bad_params_are_refused_before_any_sql_naming_the_param(params: dict[str, object], message: str) -> None:
    with pytest.raises(StreamParamError) as exc:
        resolve_stream_params(params, now=NOW)
    assert message in str(exc.value)
    assert isinstance(exc.value, ValueError)


@pytest.mark.parametrize(
    "schedule,gap",
    [
        ("@hourly", timedelta(hours=1)),
        ("@daily", timedelta(days=1)),
        ("@weekly", timedelta(weeks=1)),
        ("@monthly", timedelta(days=31)),
        ("@yearly", timedelta(days=366)),
        ("30m", timedelta(minutes=30)),
        ("PT2H", timedelta(hours=2)),
        ("*/15 * * * *", timedelta(minutes=15)),
        ("0 9 * * 1-5", timedelta(days=3)),  # Friday 09:00 → Monday 09:00
        ("0 0 1 * *", timedelta(days=31)),
    ],
)
def test_the_schedule_interval_is_the_longest_gap_between_runs(schedule: str, gap: timedelta) -> None:
    assert schedule_interval(schedule) == gap


@pytest.mark.parametrize("schedule", [None, "@once", "@continuous"])
def test_unscheduled_dags_have_no_interval(schedule: str | None) -> None:
    assert schedule_interval(schedule) is None


def test_a_schedule_that_is_neither_preset_duration_nor_cron_is_refused() -> None:
    with pytest.raises(ValueError, match="columns"):
        schedule_interval("every now and then")


def test_run_params_resolve_a_changes_window_and_refuse_every_bad_form() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    assert resolve_stream_params({}, now=now).recover is False
    r = resolve_stream_params(
        {
            "recover_stale_stream": True,
            "changes_start": "2026-05-01T00:00:00Z",
            "changes_end": "2026-05-02T00:00:00+00:00",
            "changes_target": "table",
        },
        now=now,
    )
    assert r.recover and r.changes_end - r.changes_start == timedelta(days=1) and r.changes_target == "table"
    for bad in (
        {"changes_start": "2026-05-01"},
        {"changes_start": "2026-05-01T00:00:00Z", "changes_end": "2026-05-02T00:00:00"},  # no zone: the form refuses it
        {"changes_start": "2026-05-02", "changes_end": "2026-05-01"},
        {"changes_start": "2026-05-01", "changes_end": "2026-07-01"},
        {"recover_stale_stream": "yes"},
        {"changes_target": "elsewhere"},
    ):
        with pytest.raises(StreamParamError):
            resolve_stream_params(bad, now=now)
    assert schedule_interval("@hourly") == timedelta(hours=1)
    assert schedule_interval("0 9 * * 1-5") == timedelta(days=3)  # Friday → Monday is the longest gap
    assert schedule_interval(None) is None
