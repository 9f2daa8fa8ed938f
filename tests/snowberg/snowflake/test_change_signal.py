"""The watch poll's SQL, against a connection answering as Snowflake documents it (``documented_snowflake``).

One statement per database plus one for the streams, whatever the number of tables; a name Snowflake cannot
resolve fails only itself (its statement is asked name by name); a broken connection fails the rest.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from documented_snowflake import DocumentedSnowflake  # noqa: E402

from snowberg.core.identifiers import TableName  # noqa: E402
from snowberg.snowflake.change_signal import (  # noqa: E402
    SignalKind,
    WatchedSource,
    normalize,
    poll_groups,
    read_signal,
    read_signals,
    signal_sql,
)


def sources(tables: int, databases: int, streams: int = 0) -> list[WatchedSource]:
    out = [
        WatchedSource(key=f"t{i}", kind=SignalKind.TABLE, name=TableName.parse(f"DB{i % databases}.S.T{i}"))
        for i in range(tables)
    ]
    out += [
        WatchedSource(key=f"s{i}", kind=SignalKind.STREAM, name=TableName.parse(f"DB{i}.S.ST{i}"))
        for i in range(streams)
    ]
    return out


def account_for(watched: list[WatchedSource]) -> DocumentedSnowflake:
    sf = DocumentedSnowflake()
    for w in watched:
        (sf.table if w.kind is SignalKind.TABLE else sf.stream)(str(w.name))
    return sf


def test_the_sql_calls_the_documented_function_per_name_with_the_quoted_names_bound() -> None:
    sql, params = signal_sql(SignalKind.TABLE, [TableName.parse("Sales.shop.Orders"), TableName.parse("DB.S.T")])
    assert sql == (
        'SELECT SYSTEM$LAST_CHANGE_COMMIT_TIME(%(n0)s) AS "S0", SYSTEM$LAST_CHANGE_COMMIT_TIME(%(n1)s) AS "S1"'
    )
    # Mixed case stays exact, all lower-case means the stored upper-case name (the rule of quote_identifier).
    assert params == {"n0": '"Sales"."SHOP"."Orders"', "n1": '"DB"."S"."T"'}
    sql, _ = signal_sql(SignalKind.STREAM, [TableName.parse("DB.S.ST")])
    assert sql == 'SELECT SYSTEM$STREAM_HAS_DATA(%(n0)s) AS "S0"'


@pytest.mark.parametrize("tables", [10, 1000])
def test_a_poll_sends_one_statement_per_database_and_one_for_all_streams(tables: int) -> None:
    watched = sources(tables, databases=3, streams=4)
    sf = account_for(watched)
    out = read_signals(sf.connect(), watched)
    assert out.statements == 4 == len(sf.statements)  # 3 databases + 1 for the streams, at 10 and at 1,000 tables
    assert not out.broken
    assert all(r.value is not None and r.error is None for r in out.reads.values())
    assert len(out.reads) == tables + 4


def test_tokens_follow_dml_and_streams_say_whether_they_hold_data() -> None:
    watched = sources(2, databases=1, streams=1)
    sf = account_for(watched)
    conn = sf.connect()
    before = read_signals(conn, watched).reads
    sf.dml("DB0.S.T1")
    sf.dml("DB0.S.ST0")
    after = read_signals(conn, watched).reads
    assert after["t0"].value == before["t0"].value
    assert after["t1"].value != before["t1"].value and int(after["t1"].value or 0) > int(before["t1"].value or 0)
    assert (before["s0"].value, after["s0"].value) == ("false", "true")


def test_a_name_snowflake_cannot_resolve_fails_alone_and_names_the_object() -> None:
    watched = sources(5, databases=1)
    sf = account_for(watched)
    sf.hidden.add("DB0.S.T3")  # dropped, or its grant revoked: the statement fails whole
    out = read_signals(sf.connect(), watched)
    assert not out.broken
    assert out.statements == 1 + 5  # the database's statement, then each of its names alone
    assert {k for k, r in out.reads.items() if r.error} == {"t3"}
    assert out.reads["t3"].error is not None and "DB0.S.T3" in out.reads["t3"].error
    assert "does not exist or not authorized" in out.reads["t3"].error
    assert all(out.reads[k].value for k in ("t0", "t1", "t2", "t4"))

    # Polled alone from then on (``alone``), the bad name no longer fails its database's statement.
    out = read_signals(sf.connect(), watched, alone={"t3"})
    assert out.statements == 2 and {k for k, r in out.reads.items() if r.error} == {"t3"}


def test_a_broken_connection_fails_every_source_left_and_says_so() -> None:
    watched = sources(4, databases=2, streams=1)
    sf = account_for(watched)
    conn = sf.connect()
    sf.down = True
    out = read_signals(conn, watched)
    assert out.broken and out.statements == 1
    assert all(r.error is not None and "OperationalError" in r.error for r in out.reads.values())
    assert len(out.reads) == 5


def test_groups_are_per_database_case_blind_and_chunked() -> None:
    watched = [
        WatchedSource(key="a", kind=SignalKind.TABLE, name=TableName.parse("db.S.A")),
        WatchedSource(key="b", kind=SignalKind.TABLE, name=TableName.parse("DB.S.B")),
    ]
    assert [[m.key for m in g] for g in poll_groups(watched)] == [["a", "b"]]


@pytest.mark.parametrize(
    ("kind", "value", "text"),
    [
        (SignalKind.TABLE, 1661920053987000000, "1661920053987000000"),
        (SignalKind.STREAM, True, "true"),
        (SignalKind.STREAM, "FALSE", "false"),
    ],
)
def test_signals_are_normalized(kind: SignalKind, value: object, text: str) -> None:
    assert normalize(kind, value) == text


@pytest.mark.parametrize("value", [None, "maybe"])
def test_a_stream_answer_that_is_not_a_boolean_is_refused(value: object) -> None:
    with pytest.raises(ValueError):
        normalize(SignalKind.STREAM, value)


def test_read_signal_is_the_plans_one_statement() -> None:
    sf = DocumentedSnowflake()
    sf.table("DB.S.T")
    assert read_signal(sf.connect(), SignalKind.TABLE, TableName.parse("DB.S.T")) == sf.token("DB.S.T")
    assert len(sf.statements) == 1
