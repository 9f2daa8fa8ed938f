"""The source-version query and the reading of its answer.

The reading is tested on every answer Snowflake documents, which no emulator
gives all of (fakesnow alone answers ``LAST_ALTERED`` with the epoch and
``BYTES`` with 0; the local stack's emulator serves a real ``LAST_ALTERED``,
tests/snowberg/local/test_emulator.py), so the rows below are shaped from
Snowflake's documentation of
``INFORMATION_SCHEMA.TABLES`` (TABLE_TYPE text: BASE TABLE, TEMPORARY TABLE,
EXTERNAL TABLE, EVENT TABLE, VIEW or MATERIALIZED VIEW; LAST_ALTERED
TIMESTAMP_LTZ, which the connector hands back as an aware datetime;
ROW_COUNT and BYTES NUMBER, NULL for views), not recorded from Snowflake.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from snowberg.core.identifiers import IdentifierError, TableName
from snowberg.snowflake.source_version import Observed, SourceVersion, parse_version, unchanged, version_sql

AT = datetime(2026, 11, 30, 9, 15, 2, 123456, tzinfo=timezone(timedelta(hours=-8)))  # LTZ in a Pacific session


def test_the_query_binds_schema_and_table_as_snowflake_stores_them_and_quotes_the_database() -> None:
    sql, params = version_sql(TableName.parse("shop_db.raw.orders"))
    assert sql == (
        'SELECT TABLE_TYPE, LAST_ALTERED, ROW_COUNT, BYTES FROM "SHOP_DB".INFORMATION_SCHEMA.TABLES '
        "WHERE TABLE_SCHEMA = %(schema)s AND TABLE_NAME = %(table)s"
    )
    assert params == {"schema": "RAW", "table": "ORDERS"}
    # Mixed case is a quoted identifier in Snowflake: kept as written.
    assert version_sql(TableName.parse("Db.Raw.Orders"))[1] == {"schema": "Raw", "table": "Orders"}
    with pytest.raises(IdentifierError):
        version_sql(TableName(database='x"; DROP TABLE t; --', schema="s", table="t"))


def test_a_base_table_has_a_version_in_utc_whatever_the_session_zone() -> None:
    got = parse_version("DB.S.T", [("BASE TABLE", AT, 1200, 40960)])
    assert got.version == SourceVersion(
        table="DB.S.T", last_altered="2026-11-30T17:15:02.123456+00:00", row_count=1200, bytes=40960
    )
    # The same instant read in another session zone is the same version.
    assert parse_version("DB.S.T", [("BASE TABLE", AT.astimezone(UTC), 1200, 40960)]) == got


@pytest.mark.parametrize(
    ("rows", "reason"),
    [
        ([], "not in INFORMATION_SCHEMA.TABLES"),
        ([("VIEW", AT, None, None)], "TABLE_TYPE 'VIEW'"),
        ([("MATERIALIZED VIEW", AT, 10, 100)], "TABLE_TYPE 'MATERIALIZED VIEW'"),
        ([("EXTERNAL TABLE", AT, None, None)], "TABLE_TYPE 'EXTERNAL TABLE'"),
        ([("BASE TABLE", None, 3, 0)], "no LAST_ALTERED"),
        ([("BASE TABLE", datetime(1970, 1, 1, tzinfo=UTC), 3, 0)], "no LAST_ALTERED"),  # fakesnow's own answer
        ([("BASE TABLE", AT, None, 10)], "no ROW_COUNT/BYTES"),
    ],
)
def test_anything_but_a_base_table_with_its_metadata_is_an_unknown_version(rows: list, reason: str) -> None:
    got = parse_version("DB.S.T", rows)
    assert got.version is None and reason in got.reason


def test_unchanged_only_when_every_field_is_equal() -> None:
    base = SourceVersion(table="DB.S.T", last_altered="2026-11-30T17:15:02.123456+00:00", row_count=3, bytes=1024)
    assert unchanged(base, Observed(version=base)) is not None
    assert "unchanged since the last load" in str(unchanged(base, Observed(version=base)))
    for changed in (
        SourceVersion(table="DB.S.T", last_altered="2026-11-30T17:15:02.123457+00:00", row_count=3, bytes=1024),
        SourceVersion(table="DB.S.T", last_altered=base.last_altered, row_count=4, bytes=1024),
        SourceVersion(table="DB.S.T", last_altered=base.last_altered, row_count=3, bytes=2048),
        SourceVersion(table="DB.S.U", last_altered=base.last_altered, row_count=3, bytes=1024),
    ):
        assert unchanged(base, Observed(version=changed)) is None
    assert unchanged(None, Observed(version=base)) is None  # nothing recorded: reload
    assert unchanged(base, Observed(version=None, reason="a view")) is None  # unknown now: reload


def test_the_recorded_text_reads_back_and_garbage_reads_as_nothing() -> None:
    v = SourceVersion(table="DB.S.T", last_altered="2026-11-30T17:15:02.123456+00:00", row_count=3, bytes=1024)
    assert SourceVersion.from_text(v.to_text()) == v
    for bad in (None, "", "{", '{"table": "x"}', "[1]"):
        assert SourceVersion.from_text(bad) is None
