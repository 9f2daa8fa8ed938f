"""Durations in table configs: seconds, short forms ("90s", "15m") and ISO 8601, refused with an example when bad."""

from __future__ import annotations

from datetime import timedelta

import pytest

from snowberg.core.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (90, timedelta(seconds=90)),
        (1.5, timedelta(seconds=1.5)),
        (0, timedelta(0)),
        ("250ms", timedelta(milliseconds=250)),
        ("90s", timedelta(seconds=90)),
        (" 15m ", timedelta(minutes=15)),
        ("2h", timedelta(hours=2)),
        ("1.5h", timedelta(minutes=90)),
        ("1d", timedelta(days=1)),
        ("2w", timedelta(weeks=2)),
        ("PT1H", timedelta(hours=1)),
        ("PT30S", timedelta(seconds=30)),
        ("P1DT2H", timedelta(days=1, hours=2)),
        (timedelta(minutes=3), timedelta(minutes=3)),
    ],
)
def test_seconds_short_forms_and_iso_8601_all_parse(value: object, expected: timedelta) -> None:
    assert parse_duration(value) == expected


# "\u0663" is ARABIC-INDIC DIGIT THREE: \d and Decimal() both accept it unless told ASCII only.
@pytest.mark.parametrize(
    "value", ["soon", "15 minutes", "5x", "", "-5m", "P", "Pfoo", None, [5], "\u0663s", "1\u0663m", "\u00b2h"]
)
def test_anything_else_is_refused_with_an_example_of_what_works(value: object) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(value)


def test_the_refusal_of_text_shows_the_forms_that_work() -> None:
    with pytest.raises(ValueError, match=r"'soon'.*'90s', '15m', '2h', '1d' or ISO 8601 'PT1H'"):
        parse_duration("soon")


def test_a_negative_number_of_seconds_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative: -1"):
        parse_duration(-1)


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_is_not_a_number_of_seconds(value: bool) -> None:
    with pytest.raises(ValueError, match=f"not a duration: {value}"):
        parse_duration(value)


@pytest.mark.parametrize(
    ("td", "text"),
    [
        (timedelta(days=2), "2d"),
        (timedelta(hours=3), "3h"),
        (timedelta(minutes=90), "90m"),
        (timedelta(seconds=45), "45s"),
        (timedelta(seconds=3601), "3601s"),
        (timedelta(0), "0s"),
    ],
)
def test_format_uses_the_largest_unit_that_divides_evenly(td: timedelta, text: str) -> None:
    assert format_duration(td) == text
    assert parse_duration(text) == td


@pytest.mark.parametrize(
    ("td", "text"),
    [
        (timedelta(milliseconds=250), "250ms"),
        (timedelta(seconds=1.5), "1500ms"),
        (timedelta(seconds=90, milliseconds=1), "90001ms"),
        (timedelta(microseconds=1), "0.000001s"),
        (timedelta(seconds=2, microseconds=500), "2.0005s"),
        (timedelta(days=3650, microseconds=1), "315360000.000001s"),
    ],
)
def test_sub_second_durations_format_to_text_that_reads_back_the_same(td: timedelta, text: str) -> None:
    assert format_duration(td) == text
    assert parse_duration(text) == td
