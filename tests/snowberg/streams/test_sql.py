"""SQL text for stream capture: quoting, binds, and the staging queries run on the emulator."""

from __future__ import annotations

import pytest
from streams_harness import Harness

from snowberg.core.identifiers import TableName
from snowberg.mapping.columns import SnowflakeColumn
from snowberg.streams import sql as S

STREAM = TableName.parse("DB.SRC.ORDERS_STREAM")
STAGING = TableName.parse("DB.STAGE.ORDERS_STAGING")


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
    assert "snowberg_last_action = 'INSERT'" in text and "NOT IN ('REFRESH', 'GENERATION')" in text


def test_changes_sql_reads_a_range_without_an_offset() -> None:
    text = S.changes_sql(TableName.parse("DB.SRC.ORDERS"), ["ID"], append_only=False, end=True)
    assert "CHANGES(INFORMATION => DEFAULT) AT(TIMESTAMP => TO_TIMESTAMP_LTZ(%(start)s))" in text
    assert text.endswith("END(TIMESTAMP => TO_TIMESTAMP_LTZ(%(end)s))")
    open_ended = S.changes_sql(TableName.parse("DB.SRC.ORDERS"), ["ID"], append_only=True, end=False)
    assert "CHANGES(INFORMATION => APPEND_ONLY)" in open_ended and "END(" not in open_ended
    assert '"METADATA$ACTION" AS "SNOWBERG_ACTION"' in open_ended


def test_staging_column_types_keep_lengths_and_unwrap_structured_types() -> None:
    assert S.column_sql_type(SnowflakeColumn(name="S", type="TEXT", length=16)) == "VARCHAR(16)"
    assert S.column_sql_type(SnowflakeColumn(name="S", type="TEXT")) == "VARCHAR"
    assert S.column_sql_type(SnowflakeColumn(name="B", type="BINARY", length=8)) == "BINARY(8)"
    assert S.column_sql_type(SnowflakeColumn(name="B", type="BINARY")) == "BINARY"
    assert S.column_sql_type(SnowflakeColumn(name="O", type="STRUCTURED_OBJECT")) == "OBJECT"
    assert S.column_sql_type(SnowflakeColumn(name="N", type="NUMBER", precision=10, scale=2)) == "NUMBER(10,2)"
    assert S.column_sql_type(SnowflakeColumn(name="T", type="TIMESTAMP_NTZ", scale=9)) == "TIMESTAMP_NTZ(9)"


def test_stored_name_upper_cases_only_all_lower_case_names() -> None:
    assert S.stored_name("orders_stream") == "ORDERS_STREAM"
    assert S.stored_name("Orders_Stream") == "Orders_Stream"  # quoted mixed case is kept as written
    assert S.stored_name("ORDERS") == "ORDERS"


def test_source_columns_that_clash_with_staging_columns_are_refused_by_name() -> None:
    S.check_columns([SnowflakeColumn(name="ID", type="NUMBER", precision=38, scale=0)])
    clash = [SnowflakeColumn(name="SNOWBERG_SEQ", type="TEXT"), SnowflakeColumn(name="SNOWBERG_BATCH_ID", type="TEXT")]
    with pytest.raises(ValueError, match=r"\['SNOWBERG_BATCH_ID', 'SNOWBERG_SEQ'\] clash with snowberg's staging"):
        S.check_columns(clash)


def _staging(h: Harness) -> TableName:
    """A staging table on the emulator holding four batches: a refresh, then changes to keys 1-3."""
    staging = TableName.parse(f"{h.db}.STAGE.SQL_STAGING")
    cols = [
        SnowflakeColumn(name="ID", type="NUMBER", precision=38, scale=0),
        SnowflakeColumn(name="STATUS", type="TEXT"),
    ]
    h.sql(S.create_staging_sql(staging, cols))
    h.sql(S.refresh_marker_sql(staging), {"batch_id": 1, "run_id": "r1", "stream_created": "g1"})
    rows = [
        # batch, seq, action, isupdate, row id, ID, STATUS
        (1, 1, "INSERT", False, "a", 1, "new"),
        (1, 2, "INSERT", False, "b", 2, "new"),
        (2, 1, "DELETE", True, "a", 1, "new"),
        (2, 2, "INSERT", True, "a", 1, "paid"),
        (2, 3, "INSERT", False, "c", 3, "new"),
        (3, 1, "DELETE", False, "b", 2, "new"),
        (3, 2, "DELETE", True, "a", 1, "paid"),
        (3, 3, "INSERT", True, "a", 1, "shipped"),
        (4, 1, "DELETE", False, "c", 3, "new"),
    ]
    for b, seq, action, upd, rid, i, status in rows:
        h.sql(
            f"INSERT INTO {staging.quoted()} "
            '("SNOWBERG_BATCH_ID", "SNOWBERG_SEQ", "SNOWBERG_ACTION", "SNOWBERG_ISUPDATE", "SNOWBERG_ROW_ID", '
            '"SNOWBERG_RUN_ID", "SNOWBERG_CONSUMED_AT", "SNOWBERG_STREAM_CREATED_ON", "ID", "STATUS") '
            "VALUES (%(b)s, %(seq)s, %(a)s, %(u)s, %(rid)s, %(run)s, CURRENT_TIMESTAMP(), %(g)s, %(i)s, %(s)s)",
            {"b": b, "seq": seq, "a": action, "u": upd, "rid": rid, "run": f"r{b}", "g": "g1", "i": i, "s": status},
        )
    return staging


def test_staging_queries_resolve_last_change_wins_on_the_emulator(harness: Harness) -> None:
    h = harness
    staging = _staging(h)
    assert h.sql(S.next_batch_sql(staging)) == [(4,)]
    pending = h.sql(S.pending_batches_sql(staging), {"low": 1})
    assert [(int(b), int(n), int(r)) for b, n, r, _ in pending] == [(2, 3, 0), (3, 3, 0), (4, 1, 0)]
    assert [int(r) for _, _, r, _ in h.sql(S.pending_batches_sql(staging), {"low": 0})][:1] == [1]  # the marker
    rng = {"low": 0, "high": 3}
    assert sorted(int(k) for (k,) in h.sql(S.changed_keys_sql(staging, ["ID"]), rng)) == [1, 2, 3]
    final = h.sql(S.final_rows_sql(staging, ["ID", "STATUS"], ["ID"]), rng)
    assert sorted((int(i), s) for i, s in final) == [(1, "shipped"), (3, "new")]  # key 2 deleted in batch 3
    final_to_4 = h.sql(S.final_rows_sql(staging, ["ID", "STATUS"], ["ID"]), {"low": 0, "high": 4})
    assert sorted((int(i), s) for i, s in final_to_4) == [(1, "shipped")]
    no_key = h.sql(S.final_rows_sql(staging, ["ID", "STATUS"], []), {"low": 1, "high": 3})
    assert [(int(i), s) for i, s in no_key] == [(1, "paid"), (3, "new"), (1, "shipped")]  # every insert, in order
    changelog = h.sql(S.changelog_rows_sql(staging, ["ID"]), {"low": 0, "high": 1})
    assert [(r[1], r[3]) for r in changelog] == [(1, "REFRESH"), (1, "INSERT"), (1, "INSERT")]
    assert h.sql(S.generation_sql(staging), {"high": 2}) == [("g1",)]
    assert h.sql(S.last_stream_created_sql(staging)) == [("g1",)]


def test_a_generation_marker_is_a_pending_batch_but_no_change_on_the_emulator(harness: Harness) -> None:
    """Batch 5 holds only the stream's new generation: the load commits it, yet it changes no row."""
    h = harness
    staging = _staging(h)
    h.sql(S.generation_marker_sql(staging), {"batch_id": 5, "run_id": "r5", "stream_created": "g2"})
    assert [(int(b), int(n), int(r)) for b, n, r, _ in h.sql(S.pending_batches_sql(staging), {"low": 4})] == [(5, 1, 0)]
    rng = {"low": 4, "high": 5}
    assert h.sql(S.changed_keys_sql(staging, ["ID"]), rng) == []
    assert h.sql(S.final_rows_sql(staging, ["ID", "STATUS"], ["ID"]), rng) == []
    assert h.sql(S.final_rows_sql(staging, ["ID", "STATUS"], []), rng) == []
    assert not any(h.sql(S.null_keys_sql(staging, ["ID"]), rng)[0])  # the marker's NULL ID is not a NULL key
    assert h.sql(S.changelog_rows_sql(staging, ["ID"]), rng) == []
    assert h.sql(S.generation_sql(staging), {"high": 5}) == [("g2",)]
    assert h.sql(S.last_stream_created_sql(staging)) == [("g2",)]


def test_staging_checks_find_null_keys_and_duplicate_inserts_on_the_emulator(harness: Harness) -> None:
    h = harness
    staging = _staging(h)
    rng = {"low": 0, "high": 4}
    assert [int(n) for n in h.sql(S.null_keys_sql(staging, ["ID"]), rng)[0]] == [0]
    assert h.sql(S.duplicate_inserts_sql(staging, ["ID"]), rng) == []
    h.sql(
        f'INSERT INTO {staging.quoted()} ("SNOWBERG_BATCH_ID", "SNOWBERG_SEQ", "SNOWBERG_ACTION", "ID", "STATUS") '
        "VALUES (4, 2, 'INSERT', 5, 'x'), (4, 3, 'INSERT', 5, 'y'), (4, 4, 'INSERT', NULL, 'z')"
    )
    assert [int(n) for n in h.sql(S.null_keys_sql(staging, ["ID"]), rng)[0]] == [1]
    assert [(int(b), int(k), int(n)) for b, k, n in h.sql(S.duplicate_inserts_sql(staging, ["ID"]), rng)] == [(4, 5, 2)]


def test_cleanup_deletes_only_batches_up_to_the_committed_one(harness: Harness) -> None:
    h = harness
    staging = _staging(h)
    h.sql(S.cleanup_sql(staging), {"through": 2})
    assert sorted({int(b) for (b,) in h.sql(f'SELECT "SNOWBERG_BATCH_ID" FROM {staging.quoted()}')}) == [3, 4]
    h.sql(S.clear_staging_sql(staging))
    assert h.sql(f"SELECT COUNT(*) FROM {staging.quoted()}") == [(0,)]
