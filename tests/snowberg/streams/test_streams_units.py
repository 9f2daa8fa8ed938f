"""SQL text, settings and SHOW STREAMS parsing: no server needed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from snowberg.config.stream_settings import StreamSource
from snowberg.core.identifiers import TableName
from snowberg.mapping.columns import SnowflakeColumn
from snowberg.streams import sql as S
from snowberg.streams.errors import StaleStreamError, StreamGoingStaleError, StreamMissingError
from snowberg.streams.status import check_margin, parse_show_row, require_fresh

STREAM = TableName.parse("DB.SRC.ORDERS_STREAM")
STAGING = TableName.parse("DB.STAGE.ORDERS_STAGING")


def test_settings_validate_names_and_default_the_staging_table() -> None:
    s = StreamSource(name="db.src.orders_stream", create=True, on_table="db.src.orders")
    assert s.staging_name.quoted() == '"DB"."SRC"."ORDERS_STREAM_SNOWBERG_STAGING"'
    for bad in (
        {"name": "orders_stream"},
        {"name": "DB.SRC.S", "staging_table": "DB.SRC.S"},
        {"name": "DB.SRC.S", "changelog_target": "not valid"},
        {"name": "DB.SRC.S", "unknown": 1},
        {"name": "DB.SRC.S;DROP"},
    ):
        with pytest.raises(ValidationError):
            StreamSource.model_validate(bad)
    with pytest.raises(ValidationError):
        s.append_only = True  # type: ignore[misc]  # frozen


def test_consume_is_one_insert_select_from_the_stream_with_quoted_identifiers() -> None:
    cols = [
        SnowflakeColumn(name="ID", type="NUMBER", precision=38, scale=0),
        SnowflakeColumn(name="Status", type="TEXT", length=10),
    ]
    text, _ = S.consume_sql(STREAM, STAGING, cols)
    assert text.startswith('INSERT INTO "DB"."STAGE"."ORDERS_STAGING" (')
    assert 'FROM "DB"."SRC"."ORDERS_STREAM" AS s' in text
    assert '"Status"' in text and "%(batch_id)s" in text and "%(run_id)s" in text
    assert "CASE s.\"METADATA$ACTION\" WHEN 'DELETE' THEN 0 ELSE 1 END" in text  # deletes before inserts
    assert S.describe_stream_sql(STREAM).endswith("LIMIT 0")  # the only other statement that names the stream


def test_create_and_show_stream_sql() -> None:
    table = TableName.parse("DB.SRC.ORDERS")
    assert S.create_stream_sql(STREAM, table, append_only=False, show_initial_rows=True) == (
        'CREATE STREAM IF NOT EXISTS "DB"."SRC"."ORDERS_STREAM" ON TABLE "DB"."SRC"."ORDERS" SHOW_INITIAL_ROWS = TRUE '
        "COMMENT = 'snowberg change capture'"
    )
    assert S.create_stream_sql(STREAM, table, append_only=True, show_initial_rows=False, replace=True).startswith(
        'CREATE OR REPLACE STREAM "DB"."SRC"."ORDERS_STREAM" ON TABLE "DB"."SRC"."ORDERS" APPEND_ONLY = TRUE'
    )
    text, params = S.show_stream_sql(STREAM)
    assert text == 'SHOW STREAMS LIKE %(stream_like)s IN SCHEMA "DB"."SRC"' and params == {
        "stream_like": "ORDERS_STREAM"
    }


def test_final_rows_take_the_last_change_per_key() -> None:
    text = S.final_rows_sql(STAGING, ["ID", "STATUS"], ["ID"])
    assert 'PARTITION BY "ID" ORDER BY "SNOWBERG_BATCH_ID" DESC, "SNOWBERG_SEQ" DESC' in text
    assert "snowberg_last_action = 'INSERT'" in text and "<> 'REFRESH'" in text


def test_changes_sql_reads_a_range_without_an_offset() -> None:
    text = S.changes_sql(TableName.parse("DB.SRC.ORDERS"), ["ID"], append_only=False, end=True)
    assert "CHANGES(INFORMATION => DEFAULT) AT(TIMESTAMP => TO_TIMESTAMP_LTZ(%(start)s))" in text
    assert text.endswith("END(TIMESTAMP => TO_TIMESTAMP_LTZ(%(end)s))")


def _row(**kw: object) -> dict[str, object]:
    base = {
        "name": "ORDERS_STREAM",
        "table_name": "DB.SRC.ORDERS",
        "mode": "DEFAULT",
        "stale": "false",
        "stale_after": datetime(2026, 6, 10, tzinfo=UTC),
        "invalid_reason": "N/A",
        "created_on": datetime(2026, 6, 1, tzinfo=UTC),
    }
    return {**base, **kw}


def test_show_streams_row_parsing_and_staleness_rules() -> None:
    now = datetime(2026, 6, 9, tzinfo=UTC)
    st = parse_show_row(_row())
    assert st.stale is False and st.invalid_reason is None and st.generation == "2026-06-01T00:00:00.000000+00:00"
    assert "in 1 day" in check_margin(st, STREAM, interval=timedelta(hours=1), intervals=2, now=now)
    with pytest.raises(StreamGoingStaleError):
        check_margin(st, STREAM, interval=timedelta(hours=13), intervals=2, now=now)
    with pytest.raises(StaleStreamError, match="recover_stale_stream=true"):
        require_fresh(parse_show_row(_row(stale="true")), STREAM, now=now)
    with pytest.raises(StaleStreamError):
        require_fresh(st, STREAM, now=datetime(2026, 6, 11, tzinfo=UTC))
    with pytest.raises(StreamMissingError, match="does not exist"):
        require_fresh(None, STREAM, now=now)


def test_stream_table_problems_for_the_table_config_validator() -> None:
    from snowberg.config.stream_settings import stream_table_problems

    s = StreamSource(name="DB.SRC.S", create=True)
    assert stream_table_problems(s, primary_key=["id"], source_table="DB.SRC.T", has_cursor=False) == []
    probs = stream_table_problems(s, primary_key=[], source_table=None, has_cursor=True)
    assert len(probs) == 3 and "primary_key" in probs[1] and "on_table" in probs[2]
    assert (
        stream_table_problems(
            StreamSource(name="DB.SRC.S", append_only=True), primary_key=[], source_table=None, has_cursor=False
        )
        == []
    )
