"""SQL building (quoted identifiers, bound values), session pinning, cursor values."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from snowberg.config.table_config import parse_config
from snowberg.core.cursor import CursorKind, format_cursor_value, parse_cursor_value, shift_cursor
from snowberg.core.identifiers import IdentifierError, TableName, quote_identifier
from snowberg.core.window import Mode, Window
from snowberg.snowflake.source import SourceQuery


def _cfg(**over: Any) -> Any:
    entry = {"name": "t", "source": {"table": "DB.S.ORDERS"}, "target": "n.t", "cursor": {"column": "updated_at"}}
    entry.update(over)
    return parse_config({"tables": [entry]}).tables[0]


def test_identifiers_are_validated_and_quoted() -> None:
    assert quote_identifier("updated_at") == '"UPDATED_AT"'
    assert quote_identifier("MixedCase") == '"MixedCase"'
    assert TableName.parse("db.s.t").quoted() == '"DB"."S"."T"'
    for bad in ['x"; DROP TABLE y; --', "a b", "1abc", "", "a.b"]:
        with pytest.raises(IdentifierError):
            quote_identifier(bad)


def test_extract_sql_binds_values_and_quotes_names() -> None:
    sq = SourceQuery(_cfg())
    w = Window(
        mode=Mode.INCREMENTAL,
        cursor_column="updated_at",
        cursor_kind=CursorKind.TIMESTAMP_NTZ,
        low="2026-01-01 00:00:00.000000",
        high="2026-01-02 00:00:00.000000",
        high_inclusive=True,
    )
    sql, params = sq.extract_sql(w)
    assert sql == (
        'SELECT * FROM "DB"."S"."ORDERS" WHERE "UPDATED_AT" > CAST(%(low)s AS TIMESTAMP_NTZ(9)) '
        'AND "UPDATED_AT" <= CAST(%(high)s AS TIMESTAMP_NTZ(9))'
    )
    assert params == {"low": "2026-01-01 00:00:00.000000", "high": "2026-01-02 00:00:00.000000"}


def test_backfill_window_is_half_open_and_nulls_optional() -> None:
    sq = SourceQuery(_cfg())
    w = Window(
        mode=Mode.BACKFILL,
        cursor_column="updated_at",
        cursor_kind=CursorKind.TIMESTAMP_TZ,
        low="a",
        low_inclusive=True,
        high="b",
        include_nulls=True,
    )
    sql, _ = sq.extract_sql(w)
    assert (
        '"UPDATED_AT" >= CAST(%(low)s AS TIMESTAMP_TZ(9)) AND "UPDATED_AT" < CAST(%(high)s AS TIMESTAMP_TZ(9))' in sql
    )
    assert sql.endswith('OR "UPDATED_AT" IS NULL')


def test_custom_query_is_a_subquery() -> None:
    sq = SourceQuery(_cfg(source={"query": "SELECT a, updated_at FROM x"}))
    assert sq.from_clause == "(SELECT a, updated_at FROM x) AS snowberg_src"


def test_high_comes_from_snowflake_clock_in_the_cursor_zone_minus_lag() -> None:
    sq = SourceQuery(_cfg())
    sql, params = sq.plan_sql(
        CursorKind.TIMESTAMP_NTZ, 0, None, False, timedelta(minutes=5), count_nulls=False, zone="Asia/Tokyo"
    )
    assert "DATEADD(second, -300, CAST(CONVERT_TIMEZONE(%(zone)s, CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ))" in sql
    assert params == {"zone": "Asia/Tokyo"}
    with pytest.raises(ValueError, match="NUMBER cursor"):
        sq.plan_sql(CursorKind.NUMBER, 0, None, False, timedelta(seconds=1), count_nulls=False)


@pytest.mark.parametrize(
    ("kind", "value", "text"),
    [
        ("timestamp_ntz", "2026-01-01T01:02:03.123456", "2026-01-01 01:02:03.123456"),
        ("timestamp_tz", "2026-01-01T03:02:03+02:00", "2026-01-01 01:02:03.000000+00:00"),
        ("date", "2026-01-01", "2026-01-01"),
        ("number", 42, "42"),
    ],
)
def test_cursor_values_round_trip(kind: str, value: Any, text: str) -> None:
    from datetime import datetime

    v = datetime.fromisoformat(value) if kind.startswith("timestamp") else value
    assert format_cursor_value(kind, v) == text
    assert format_cursor_value(kind, parse_cursor_value(kind, text)) == text


def test_lookback_shift() -> None:
    assert (
        shift_cursor("timestamp_ntz", "2026-01-02 00:00:00.000000", timedelta(hours=1)) == "2026-01-01 23:00:00.000000"
    )
    assert shift_cursor("date", "2026-01-02", timedelta(hours=1)) == "2026-01-01"
