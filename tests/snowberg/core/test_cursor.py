"""CursorKind: each kind formats, parses, shifts, bounds windows and names its SQL type."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from snowberg.core.cursor import CURSOR_KINDS, CursorKind

LA = ZoneInfo("America/Los_Angeles")


def test_kinds_are_one_closed_set_equal_to_their_text() -> None:
    assert CURSOR_KINDS == ("timestamp_ntz", "timestamp_tz", "date", "number")
    assert CursorKind("date") is CursorKind.DATE and CursorKind.DATE == "date"
    assert CursorKind.for_snowflake_type("TIMESTAMP_LTZ") is CursorKind.TIMESTAMP_TZ
    assert CursorKind.for_snowflake_type("VARCHAR") is None


def test_each_kind_names_its_snowflake_type_and_only_number_takes_the_scale() -> None:
    assert [k.sql_type(2) for k in CursorKind] == ["TIMESTAMP_NTZ(9)", "TIMESTAMP_TZ(9)", "DATE", "NUMBER(38,2)"]


@pytest.mark.parametrize(
    ("kind", "value", "clock", "expected"),
    [
        # an instant from the form, read on the writer's wall clock
        (CursorKind.TIMESTAMP_NTZ, datetime(2026, 9, 2, tzinfo=UTC), LA, "2026-09-01 17:00:00.000000"),
        (CursorKind.TIMESTAMP_NTZ, "2026-09-02T00:00:00Z", UTC, "2026-09-02 00:00:00.000000"),
        (
            CursorKind.TIMESTAMP_TZ,
            datetime(2026, 9, 2, 2, tzinfo=ZoneInfo("Europe/Paris")),
            LA,
            "2026-09-02 00:00:00.000000+00:00",
        ),
        # a DATE counts when its midnight is in the window: a bound inside a day moves to the next midnight
        (CursorKind.DATE, datetime(2026, 9, 2, tzinfo=UTC), UTC, "2026-09-02"),
        (CursorKind.DATE, datetime(2026, 9, 2, 0, 0, 1, tzinfo=UTC), UTC, "2026-09-03"),
        (CursorKind.DATE, datetime(2026, 9, 2, 7, tzinfo=UTC), LA, "2026-09-02"),  # midnight in Los Angeles
        (CursorKind.NUMBER, Decimal("10.001"), UTC, "10.01"),
        (CursorKind.NUMBER, "7", UTC, "7.00"),
    ],
)
def test_window_bounds(kind: CursorKind, value: object, clock: ZoneInfo, expected: str) -> None:
    assert kind.window_bound(value, clock, scale=2) == expected


def test_window_bounds_refuse_the_other_family() -> None:
    with pytest.raises(TypeError, match="NUMBER cursor is bounded by numbers"):
        CursorKind.NUMBER.window_bound(datetime(2026, 9, 2, tzinfo=UTC), UTC)
    with pytest.raises(TypeError, match="DATE cursor is bounded by date-times"):
        CursorKind.DATE.window_bound(Decimal(5), UTC)
    with pytest.raises(ValueError, match="is not a number"):
        CursorKind.NUMBER.window_bound("2026-09-02T00:00:00Z", UTC)


def test_date_clock_ends_at_the_last_closed_day() -> None:
    sql = CursorKind.DATE.clock_sql(timedelta(hours=2), "zone")
    assert sql == (
        "DATEADD(day, -1, CAST(DATEADD(second, -7200, "
        "CAST(CONVERT_TIMEZONE(%(zone)s, CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)) AS DATE))"
    )
    assert CursorKind.NUMBER.clock_sql(timedelta(0), "zone") is None


def test_instants_for_freshness() -> None:
    assert CursorKind.DATE.as_instant("2026-09-02") == datetime(2026, 9, 2, tzinfo=UTC)
    assert CursorKind.TIMESTAMP_NTZ.as_instant("2026-09-02 00:00:00", LA) == datetime(2026, 9, 2, 7, tzinfo=UTC)
    assert CursorKind.NUMBER.as_instant("5") is None


def test_shift_and_numeric_projection() -> None:
    assert CursorKind.DATE.shift_value("2026-09-02", timedelta(hours=1)) == "2026-09-01"
    with pytest.raises(ValueError, match="NUMBER cursor"):
        CursorKind.NUMBER.shift_value("5", timedelta(hours=1))
    lo, hi = date(2026, 9, 1), date(2026, 9, 11)
    assert CursorKind.DATE.between(lo, hi, Decimal("0.5")) == "2026-09-06"
    assert CursorKind.NUMBER.from_numeric(Decimal("2.379"), 2) == "2.37"


def test_a_stored_watermark_becomes_an_iceberg_literal_of_its_kind() -> None:
    assert CursorKind.TIMESTAMP_NTZ.iceberg_literal("2026-09-02 00:00:00.000000") == "2026-09-02T00:00:00"
    assert CursorKind.DATE.iceberg_literal("2026-09-02") == "2026-09-02"
    assert CursorKind.NUMBER.iceberg_literal("10.50") == Decimal("10.50")
