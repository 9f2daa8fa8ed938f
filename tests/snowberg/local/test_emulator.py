"""The local stack's emulator serves each table's change time as Snowflake documents it, and keeps its data.

The documented semantics (cited in snowberg/local/change_times.py):

* ``<db>.INFORMATION_SCHEMA.TABLES.LAST_ALTERED``, TIMESTAMP_LTZ, "last altered by a DML, DDL, or
  background metadata operation" (https://docs.snowflake.com/en/sql-reference/info-schema/tables); DML
  moves it "even when no rows are affected by the DML statement"
  (https://docs.snowflake.com/en/sql-reference/info-schema/schemata, usage notes).
* ``SYSTEM$LAST_CHANGE_COMMIT_TIME('<object_name>')``, NUMBER(38,0): the last change time as UTC
  nanoseconds since the epoch, increasing with each DML on the table
  (https://docs.snowflake.com/en/sql-reference/functions/system_last_change_commit_time).

A change is a committed change: a failed statement or a rolled-back transaction moves nothing; a query
moves nothing; one table's change moves no other table.

Two lanes run the same tests. ``emulator``: the real emulator process (``python -m
snowberg.local.emulator``) that the test session and ``snowberg stack up`` start; there the exact values
are checked too (the statement's own time on the server's clock, the function equal to LAST_ALTERED).
``live``: a real account, to check that the emulator's rules are Snowflake's; it asserts only what the
documentation promises (Snowflake calls the function's value an approximation, and its clock is not
ours). The live lane is skipped unless SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT, _USER, _PASSWORD and _WAREHOUSE
are set (optional _ROLE, which needs CREATE DATABASE); it creates and drops ``SNOWBERG_TEST_<random>``.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from snowberg.local.emulator import Emulator

LIVE = tuple(f"SNOWBERG_LIVE_SNOWFLAKE_{k}" for k in ("ACCOUNT", "USER", "PASSWORD", "WAREHOUSE"))


@dataclass
class Source:
    """A database with schema S on the emulator or a live account, and a session in it."""

    name: str
    conn: Any
    connect_kwargs: dict[str, Any]
    emulated: bool

    def connect(self, **extra: Any) -> Any:
        """Another session in the database."""
        import snowflake.connector

        return snowflake.connector.connect(**self.connect_kwargs, database=self.name, schema="S", **extra)

    def sql(self, text: str, params: Any = None) -> list[tuple[Any, ...]]:
        cur = self.conn.cursor()
        try:
            cur.execute(text, params)
            return list(cur.fetchall())
        finally:
            cur.close()


def live_source() -> Iterator[Source]:
    import snowflake.connector

    kw: dict[str, Any] = {
        k: os.environ[f"SNOWBERG_LIVE_SNOWFLAKE_{k.upper()}"] for k in ("account", "user", "password")
    }
    kw["warehouse"] = os.environ["SNOWBERG_LIVE_SNOWFLAKE_WAREHOUSE"]
    if os.environ.get("SNOWBERG_LIVE_SNOWFLAKE_ROLE"):
        kw["role"] = os.environ["SNOWBERG_LIVE_SNOWFLAKE_ROLE"]
    kw["session_parameters"] = {"TIMEZONE": "UTC"}
    name = f"SNOWBERG_TEST_{secrets.token_hex(4).upper()}"
    admin = snowflake.connector.connect(**kw)
    admin.cursor().execute(f"CREATE DATABASE {name}")
    try:
        admin.cursor().execute(f"CREATE SCHEMA {name}.S")
        src = Source(name=name, conn=None, connect_kwargs=kw, emulated=False)
        src.conn = src.connect()
        try:
            yield src
        finally:
            src.conn.close()
    finally:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


@pytest.fixture(
    params=[
        "emulator",
        pytest.param(
            "live",
            marks=[
                pytest.mark.live,
                pytest.mark.skipif(not all(os.environ.get(k) for k in LIVE), reason="set " + ", ".join(LIVE)),
            ],
        ),
    ]
)
def src(request: pytest.FixtureRequest) -> Iterator[Source]:
    if request.param == "live":
        sources = live_source()
        source = next(sources)
    else:
        sfdb = request.getfixturevalue("sfdb")
        kw = sfdb.server.connect_kwargs()
        source = Source(name=sfdb.name, conn=sfdb.conn, connect_kwargs=kw, emulated=True)
    source.sql("CREATE TABLE SRC (ID NUMBER(38,0), NOTE VARCHAR(20))")
    source.sql("INSERT INTO SRC VALUES (1, 'a'), (2, 'a'), (3, 'a')")
    source.sql("CREATE TABLE OTHER (ID NUMBER(38,0), NOTE VARCHAR(20))")
    source.sql("INSERT INTO OTHER VALUES (2, 'z'), (4, 'z')")
    yield source
    if request.param == "live":
        next(sources, None)  # drops the database


def emulator_only(src: Source) -> None:
    if not src.emulated:
        pytest.skip("the emulator's own implementation, not a documented Snowflake behaviour")


def altered(db: Source, table: str, schema: str = "S") -> datetime:
    """``LAST_ALTERED`` of ``db``.``schema``.``table``, read from INFORMATION_SCHEMA.TABLES."""
    (row,) = db.sql(
        f"SELECT LAST_ALTERED FROM {db.name}.INFORMATION_SCHEMA.TABLES "
        "WHERE TABLE_SCHEMA = %(s)s AND TABLE_NAME = %(t)s",
        {"s": schema, "t": table},
    )
    return row[0]


def commit_time(db: Source, table: str) -> int:
    (row,) = db.sql(f"SELECT SYSTEM$LAST_CHANGE_COMMIT_TIME('{db.name}.S.{table}')")
    return row[0]


def as_ns(at: datetime) -> int:
    return (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


DML = [
    "INSERT INTO SRC VALUES (4, 'b')",
    "INSERT INTO SRC SELECT ID + 10, NOTE FROM OTHER",
    "UPDATE SRC SET NOTE = 'b' WHERE ID = 2",
    "UPDATE SRC SET NOTE = 'b' WHERE ID = 99",  # no row affected: Snowflake still counts the DML
    "DELETE FROM SRC WHERE ID = 1",
    "MERGE INTO SRC USING OTHER ON SRC.ID = OTHER.ID WHEN MATCHED THEN UPDATE SET NOTE = OTHER.NOTE "
    "WHEN NOT MATCHED THEN INSERT (ID, NOTE) VALUES (OTHER.ID, OTHER.NOTE)",
    "TRUNCATE TABLE SRC",
]
DDL = [
    "ALTER TABLE SRC ADD COLUMN EXTRA NUMBER(38,0)",
    "COMMENT ON TABLE SRC IS 'orders'",
    "CREATE OR REPLACE TABLE SRC (ID NUMBER(38,0), NOTE VARCHAR(20))",
]


def test_each_dml_and_ddl_statement_moves_the_time_to_its_commit_and_no_other_tables(src: Source) -> None:
    other, other_ns = altered(src, "OTHER"), commit_time(src, "OTHER")
    for statement in DML + DDL:
        before, before_ns = altered(src, "SRC"), commit_time(src, "SRC")
        started = datetime.now(UTC)
        src.sql(statement)
        ended = datetime.now(UTC)
        after = altered(src, "SRC")
        assert before < after, statement
        if statement in DML:
            assert commit_time(src, "SRC") > before_ns, statement  # "for each DML operation ... increases"
        assert (altered(src, "OTHER"), commit_time(src, "OTHER")) == (other, other_ns), statement
        if src.emulated:
            assert started <= after <= ended, statement  # the statement's own time, on the server's clock
            assert commit_time(src, "SRC") == as_ns(after), statement  # the function and the view agree
    before = altered(src, "SRC")
    src.sql("ALTER TABLE SRC RENAME TO RENAMED")
    assert altered(src, "RENAMED") > before  # the renamed table carries the time of its rename


def test_queries_and_reading_the_time_do_not_move_it(src: Source) -> None:
    before, before_ns = altered(src, "SRC"), commit_time(src, "SRC")
    src.sql("SELECT COUNT(*) FROM SRC")
    src.sql("SELECT * FROM SRC s JOIN OTHER o ON s.ID = o.ID")
    src.sql(f"SELECT * FROM {src.name}.INFORMATION_SCHEMA.TABLES")
    assert (altered(src, "SRC"), commit_time(src, "SRC")) == (before, before_ns)


def test_a_failed_statement_does_not_move_it(src: Source) -> None:
    import snowflake.connector.errors

    before = altered(src, "SRC")
    with pytest.raises(snowflake.connector.errors.ProgrammingError):
        src.sql("INSERT INTO SRC VALUES ('not a number', 'b')")
    with pytest.raises(snowflake.connector.errors.ProgrammingError):
        src.sql("UPDATE SRC SET NO_SUCH_COLUMN = 1")
    assert altered(src, "SRC") == before and src.sql("SELECT COUNT(*) FROM SRC") == [(3,)]
    src.sql("INSERT INTO SRC VALUES (4, 'b')")
    assert altered(src, "SRC") > before  # the same statement, succeeding, does


def test_a_rolled_back_transaction_does_not_move_it_and_a_committed_one_takes_its_commit_time(src: Source) -> None:
    reader = Source(name=src.name, conn=src.connect(), connect_kwargs=src.connect_kwargs, emulated=src.emulated)
    try:
        before = altered(src, "SRC")
        src.sql("BEGIN")
        src.sql("INSERT INTO SRC VALUES (4, 'b')")
        src.sql("ROLLBACK")
        assert altered(src, "SRC") == before

        src.sql("BEGIN")
        src.sql("INSERT INTO SRC VALUES (4, 'b')")
        src.sql("UPDATE SRC SET NOTE = 'c' WHERE ID = 1")
        assert altered(reader, "SRC") == before  # not committed: another session sees no change
        committing = datetime.now(UTC)
        src.sql("COMMIT")
        after = altered(reader, "SRC")
        assert after > before
        if src.emulated:
            assert after >= committing  # the time of the COMMIT, not of the statements before it
    finally:
        reader.conn.close()


def test_with_autocommit_off_a_change_takes_the_time_of_its_commit(src: Source) -> None:
    conn = src.connect(autocommit=False)
    try:
        before = altered(src, "SRC")
        conn.cursor().execute("DELETE FROM SRC WHERE ID = 3")
        assert altered(src, "SRC") == before
        committing = datetime.now(UTC)
        conn.commit()
        after = altered(src, "SRC")
        assert after > before
        if src.emulated:
            assert after >= committing
    finally:
        conn.close()


def test_the_values_types_and_zone(src: Source) -> None:
    at = altered(src, "SRC")
    assert at.tzinfo is not None and at.utcoffset() == timedelta(0)  # an instant (TIMESTAMP_LTZ, session in UTC)
    cur = src.conn.cursor()
    cur.execute(f"SELECT SYSTEM$LAST_CHANGE_COMMIT_TIME('{src.name.lower()}.s.src')")
    ((value,),) = cur.fetchall()
    (column,) = cur.description
    assert isinstance(value, int) and (column.type_code, column.scale) == (0, 0)  # NUMBER, scale 0
    if src.emulated:
        assert value == as_ns(at)
        assert column.name == f"SYSTEM$LAST_CHANGE_COMMIT_TIME('{src.name}.S.SRC')"


def test_an_object_that_is_not_there_is_refused_as_snowflake_refuses_it(src: Source) -> None:
    import snowflake.connector.errors

    with pytest.raises(snowflake.connector.errors.ProgrammingError, match="does not exist or not authorized"):
        commit_time(src, "NOPE")


def test_create_if_not_exists_of_an_existing_table_changes_nothing(src: Source) -> None:
    """The emulator's choice where the documentation is silent (snowberg/local/change_times.py)."""
    emulator_only(src)
    before = altered(src, "SRC")
    src.sql("CREATE TABLE IF NOT EXISTS SRC (ID NUMBER(38,0), NOTE VARCHAR(20))")
    assert altered(src, "SRC") == before
    src.sql("CREATE TABLE IF NOT EXISTS NEW_ONE (ID NUMBER(38,0))")
    assert altered(src, "NEW_ONE") > before


def test_concurrent_writers_to_one_table_all_succeed_and_the_time_follows_the_last_commit(src: Source) -> None:
    emulator_only(src)  # the emulator's recording (appends, a lock), not Snowflake's
    errors: list[BaseException] = []

    def write(n: int) -> None:
        conn = src.connect()
        try:
            for i in range(10):
                conn.cursor().execute(f"INSERT INTO SRC VALUES ({100 * n + i}, 'w')")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            conn.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    finished = datetime.now(UTC)
    assert errors == []
    assert src.sql("SELECT COUNT(*) FROM SRC") == [(23,)]
    last = altered(src, "SRC")
    assert last <= finished
    src.sql("INSERT INTO SRC VALUES (999, 'x')")
    assert altered(src, "SRC") > last


def test_rows_varchar_lengths_and_times_survive_a_restart(tmp_path: Path) -> None:
    """The emulator's instance, closed and opened again on its folder (the server process does the same)."""
    first = Emulator(tmp_path)
    cur = first.connect().cursor()
    cur.execute("CREATE DATABASE KEPT")
    cur.execute("CREATE SCHEMA KEPT.S")
    cur.execute("CREATE TABLE KEPT.S.T (ID NUMBER(38,0), NOTE VARCHAR(20))")
    cur.execute("INSERT INTO KEPT.S.T VALUES (1, 'a'), (2, 'a')")
    cur.execute("UPDATE KEPT.S.T SET NOTE = 'changed' WHERE ID = 2")
    cur.execute("CREATE TABLE KEPT.S.GONE (ID NUMBER(38,0))")
    cur.execute("DROP TABLE KEPT.S.GONE")
    cur.execute("SELECT SYSTEM$LAST_CHANGE_COMMIT_TIME('KEPT.S.T')")
    ((kept,),) = cur.fetchall()
    times = "KEPT._fs_information_schema._snowberg_changes"
    cur.execute(f"SELECT TABLE_NAME FROM {times} ORDER BY 1")
    assert cur.fetchall() == [("GONE",), ("T",)]  # one row per table, however many statements changed it
    first.close()

    again = Emulator(tmp_path)
    cur = again.connect().cursor()  # no database named: the kept ones are attached at start
    try:
        cur.execute("SELECT ID, NOTE FROM KEPT.S.T ORDER BY ID")
        assert cur.fetchall() == [(1, "a"), (2, "changed")]
        cur.execute("SELECT CHARACTER_MAXIMUM_LENGTH FROM KEPT.INFORMATION_SCHEMA.COLUMNS WHERE COLUMN_NAME = 'NOTE'")
        assert cur.fetchall() == [(20,)]  # fakesnow's cross-database metadata is kept too
        cur.execute("SELECT SYSTEM$LAST_CHANGE_COMMIT_TIME('KEPT.S.T')")
        assert cur.fetchall() == [(kept,)]
        cur.execute(f"SELECT TABLE_NAME FROM {times}")
        assert cur.fetchall() == [("T",)]  # a dropped table's time is forgotten at start
        cur.execute("INSERT INTO KEPT.S.T VALUES (3, 'c')")
        cur.execute("SELECT SYSTEM$LAST_CHANGE_COMMIT_TIME('KEPT.S.T')")
        assert cur.fetchall()[0][0] > kept
    finally:
        again.close()


def test_closing_an_emulator_in_process_leaves_fakesnows_server_helper_alone(tmp_path: Path) -> None:
    """Importing the ``fakesnow.server`` module rebinds the package's ``fakesnow.server()`` helper to it.

    Other emulators of the same process (the suite's stream tests start theirs with ``fakesnow.server()``)
    must keep working after an in-process emulator closes: closing must not import the server module (only
    the server process holds sessions there). A fresh interpreter, so no earlier import hides the effect.
    """
    import subprocess
    import sys

    code = (
        "import sys, fakesnow; from pathlib import Path; from snowberg.local.emulator import Emulator; "
        f"Emulator(Path({str(tmp_path)!r})).close(); "
        "print(callable(fakesnow.server), 'fakesnow.server' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False"]
