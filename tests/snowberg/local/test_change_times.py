"""Which tables a statement changes, read as fakesnow parses it (no server: the rules alone).

What moves a table's change time follows Snowflake's documentation, cited in
snowberg/local/change_times.py: DML (INSERT, UPDATE, DELETE, MERGE, TRUNCATE TABLE, COPY INTO <table>)
and DDL on the table; not a query. The emulator's behaviour, end to end, is in test_emulator.py.
"""

from __future__ import annotations

import pytest
from fakesnow.dialect import parse_one

from snowberg.local.change_times import (
    Effect,
    TableKey,
    change_time_calls,
    classify,
    column_name,
    object_name,
)

T = TableKey("DB", "S", "T")


@pytest.mark.parametrize(
    ("sql", "effect", "changed"),
    [
        ("INSERT INTO t VALUES (1)", Effect.DML, (T,)),
        ("INSERT INTO t (a) SELECT a FROM u", Effect.DML, (T,)),
        ("INSERT OVERWRITE INTO t SELECT 1", Effect.DML, (T,)),
        ("UPDATE t SET a = 1 WHERE FALSE", Effect.DML, (T,)),  # no row affected: still a change
        ("DELETE FROM other.t", Effect.DML, (TableKey("DB", "OTHER", "T"),)),
        (
            "MERGE INTO db2.s.t AS x USING u ON x.a = u.a WHEN MATCHED THEN DELETE",
            Effect.DML,
            (TableKey("DB2", "S", "T"),),
        ),
        ("TRUNCATE TABLE IF EXISTS t", Effect.DML, (T,)),
        ("COPY INTO t FROM @stage", Effect.DML, (T,)),
        ("COPY INTO @stage FROM t", Effect.DML, ()),  # an unload writes a stage, not a table
        ('INSERT INTO "Mixed"."t" VALUES (1)', Effect.DML, (TableKey("DB", "Mixed", "t"),)),  # quoted: as written
        ("CREATE TABLE t (a INT)", Effect.DDL, (T,)),
        ("CREATE OR REPLACE TABLE t AS SELECT 1 AS a", Effect.DDL, (T,)),
        ("CREATE TEMPORARY TABLE t (a INT)", Effect.DDL, ()),
        ("ALTER TABLE t ADD COLUMN b INT", Effect.DDL, (T,)),
        ("ALTER TABLE t SET COMMENT = 'x'", Effect.DDL, (T,)),
        ("ALTER TABLE t RENAME TO u", Effect.DDL, (TableKey("DB", "S", "U"),)),
        ("ALTER TABLE t SWAP WITH u", Effect.DDL, (T, TableKey("DB", "S", "U"))),
        ("COMMENT ON TABLE t IS 'x'", Effect.DDL, (T,)),
        ("COMMENT ON COLUMN t.a IS 'x'", Effect.DDL, (T,)),
        ("DROP TABLE t", Effect.DDL, ()),
        ("CREATE VIEW v AS SELECT 1 AS a", Effect.DDL, ()),
        ("SELECT * FROM t", Effect.NONE, ()),
        ("BEGIN", Effect.BEGIN, ()),
        ("COMMIT", Effect.COMMIT, ()),
        ("ROLLBACK", Effect.ROLLBACK, ()),
        ("ALTER SESSION SET AUTOCOMMIT = FALSE", Effect.SESSION, ()),
    ],
)
def test_what_a_statement_changes(sql: str, effect: Effect, changed: tuple[TableKey, ...]) -> None:
    st = classify(parse_one(sql), "DB", "S")
    assert (st.effect, st.changed) == (effect, changed)


def test_create_if_not_exists_changes_the_table_only_if_it_is_new_and_a_database_is_noted() -> None:
    assert classify(parse_one("CREATE TABLE IF NOT EXISTS t (a INT)"), "DB", "S").only_if_new
    assert not classify(parse_one("CREATE OR REPLACE TABLE t (a INT)"), "DB", "S").only_if_new
    assert classify(parse_one("CREATE DATABASE IF NOT EXISTS demo"), None, None).created_database == "DEMO"


def test_an_unqualified_name_without_a_session_default_names_no_table() -> None:
    assert classify(parse_one("INSERT INTO t VALUES (1)"), None, None).changed == ()


def test_the_function_calls_their_argument_and_their_column_name() -> None:
    calls = change_time_calls(
        parse_one("SELECT SYSTEM$LAST_CHANGE_COMMIT_TIME('db.s.t'), system$last_change_commit_time('u') AS x")
    )
    assert [object_name(c) for c in calls] == ["db.s.t", "u"]
    assert column_name(calls[0]) == "SYSTEM$LAST_CHANGE_COMMIT_TIME('DB.S.T')"
    (bad,) = change_time_calls(parse_one("SELECT SYSTEM$LAST_CHANGE_COMMIT_TIME(1)"))
    with pytest.raises(ValueError, match="takes one string literal"):
        object_name(bad)
