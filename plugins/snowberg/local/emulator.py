"""The local stack's Snowflake emulator: fakesnow's HTTP server, with its data kept and tables' change times.

``python -m snowberg.local.emulator -p PORT -d DIR`` serves Snowflake's HTTP protocol as ``fakesnow -s``
does (fakesnow 0.12.1: DuckDB underneath, sqlglot transforms, a Starlette app), with two additions that
are the emulator's behaviour, not snowberg's: nothing here runs against a real Snowflake.

* **Data kept in DIR.** fakesnow's command line ignores ``-d`` in server mode: ``fakesnow -s`` serves
  ``fakesnow.server.shared_fs``, an in-memory instance, so a restart lost every table. Here that
  instance is built with ``db_path``: each database is a DuckDB file ``DIR/<NAME>.db`` (fakesnow's own
  layout for ``db_path``), fakesnow's cross-database metadata (VARCHAR lengths, comments, stages) is kept
  in ``DIR/_fs_global.db`` instead of memory, the files found at start are attached again, and a SIGTERM
  or SIGINT closes the databases cleanly.
* **Change times.** fakesnow answers ``INFORMATION_SCHEMA.TABLES.LAST_ALTERED`` with the epoch and has
  no ``SYSTEM$LAST_CHANGE_COMMIT_TIME``. Here every committed DML or DDL statement on a table records
  its commit time (the rules, with Snowflake's documentation: ``snowberg.local.change_times``), and
  both serve it: ``LAST_ALTERED`` as a TIMESTAMP_LTZ, the function as UTC nanoseconds since the epoch.

* **No policies.** fakesnow has no masking or row access policies, and no
  ``INFORMATION_SCHEMA.POLICY_REFERENCES``: here the table function answers with its documented columns and
  no row, which is the truth about any emulated table.

How: fakesnow's instance, connection and cursor classes are subclassed (never patched or copied), and
the server module's ``shared_fs`` is set to the subclassed instance before its app starts. The cursor
reads each statement as fakesnow parsed it (``_transform_explode``), and inlines the function's value
before fakesnow's transforms run (``_transform``): both are fakesnow 0.12.1's own steps, which is why the
``local``/``dev`` extras pin that version.

The times live in a table of each database, ``<db>._fs_information_schema._snowberg_changes`` (fakesnow's
metadata schema, which its INFORMATION_SCHEMA views leave out): one row per table, so a kept database keeps
its times and reading them costs the same however many statements ran. A statement's time is taken once it
has committed: a failed statement, or a transaction rolled back, leaves none; a transaction's changes take
the time of its COMMIT. Every write of a time is taken and committed under one lock, so times increase in
commit order and two writes never conflict.

A table the emulator never saw change (made by plain fakesnow) keeps fakesnow's epoch ``LAST_ALTERED``,
which snowberg reads as an unknown version, and 0 from the function.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import snowflake.connector.errors
import sqlglot
from fakesnow import info_schema
from fakesnow.conn import FakeSnowflakeConnection
from fakesnow.cursor import FakeSnowflakeCursor
from fakesnow.instance import GLOBAL_DATABASE_NAME, FakeSnow
from fakesnow.transforms import show
from snowflake.connector.cursor import DictCursor, SnowflakeCursor
from sqlglot import exp

from snowberg.local.change_times import (
    Effect,
    Statement,
    TableKey,
    change_time_calls,
    classify,
    column_name,
    object_name,
    table_key,
)

log = logging.getLogger(__name__)

CHANGES = "_snowberg_changes"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def changes_table(database: str) -> str:
    """Where ``database``'s change times live (fakesnow's metadata schema of that database)."""
    return f"{_quoted(database)}._fs_information_schema.{CHANGES}"


def tables_view_sql(database: str) -> str:
    """fakesnow's INFORMATION_SCHEMA.TABLES view of ``database``, its LAST_ALTERED from the recorded times.

    Built from fakesnow's own view definition (``info_schema.SQL_CREATE_INFORMATION_SCHEMA_TABLES_VIEW``),
    so every other column stays fakesnow's; a table with no recorded time keeps fakesnow's value.
    """
    create = sqlglot.parse_one(
        info_schema.SQL_CREATE_INFORMATION_SCHEMA_TABLES_VIEW.substitute(catalog=database), read="duckdb"
    )
    assert isinstance(create, exp.Create) and isinstance(create.expression, exp.Select)
    create.set("exists", False)
    create.set("replace", True)
    select = create.expression
    (last_altered,) = [p for p in select.expressions if p.alias_or_name == "LAST_ALTERED"]
    last_altered.set("this", exp.func("COALESCE", exp.column("committed_at", "_changes"), last_altered.this))
    select.join(
        exp.to_table(changes_table(database), dialect="duckdb").as_("_changes"),
        on="_changes.table_schema = tables.schema_name AND _changes.table_name = tables.table_name",
        join_type="left",
        copy=False,
    )
    return create.sql(dialect="duckdb")


# POLICY_REFERENCES' documented columns (https://docs.snowflake.com/en/sql-reference/functions/policy_references).
POLICY_REFERENCES_COLUMNS = (
    "POLICY_DB",
    "POLICY_SCHEMA",
    "POLICY_NAME",
    "POLICY_KIND",
    "REF_DATABASE_NAME",
    "REF_SCHEMA_NAME",
    "REF_ENTITY_NAME",
    "REF_ENTITY_DOMAIN",
    "REF_COLUMN_NAME",
    "REF_ARG_COLUMN_NAMES",
    "TAG_DATABASE",
    "TAG_SCHEMA",
    "TAG_NAME",
    "POLICY_STATUS",
)


def no_policies(expression: exp.Expr) -> None:
    """Replace each ``TABLE(….POLICY_REFERENCES(…))`` in ``expression`` by its columns with no row."""
    for node in list(expression.find_all(exp.TableFromRows)):
        call = node.this.expression if isinstance(node.this, exp.Dot) else node.this
        if not (isinstance(call, exp.Anonymous) and str(call.name).upper() == "POLICY_REFERENCES"):
            continue
        cols = ", ".join(f"CAST(NULL AS VARCHAR) AS {c}" for c in POLICY_REFERENCES_COLUMNS)
        empty = sqlglot.parse_one(f"SELECT {cols} WHERE FALSE", read="snowflake")
        node.replace(exp.Subquery(this=empty, alias=exp.TableAlias(this=exp.to_identifier(node.alias or "policies"))))


class CommitClock:
    """Change times that only increase, and the lock under which a time is taken and committed.

    Holding the lock from taking a time until it is committed means a reader never sees a later time
    before an earlier one: a poller that saw time T and sees T again has missed no commit. It also keeps
    the writes of times one at a time, each in a transaction that began after the last one committed,
    so DuckDB never finds two of them in conflict.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._last_us = 0

    def observe(self, at: datetime | None) -> None:
        """Never hand out a time at or before ``at`` (a time kept from an earlier run)."""
        if at is not None:
            self._last_us = max(self._last_us, (at - EPOCH) // timedelta(microseconds=1))

    def next(self) -> datetime:
        """Now, or a microsecond after the last time handed out if the clock has not moved past it."""
        self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
        return EPOCH + timedelta(microseconds=self._last_us)


class Emulator(FakeSnow):
    """fakesnow's instance with its databases kept in ``db_path`` and change times recorded."""

    def __init__(self, db_path: Path) -> None:
        db_path.mkdir(parents=True, exist_ok=True)
        super().__init__(db_path=db_path)
        self.clock = CommitClock()
        self._ensured: set[str] = set()
        self._ensure_lock = threading.Lock()
        # fakesnow keeps metadata that spans databases (VARCHAR lengths, comments, stages, users) in an
        # in-memory database; a kept table would come back without them. Keep it in a file beside the rest.
        self.duck_conn.execute(f"DETACH {GLOBAL_DATABASE_NAME}")
        global_file = str(db_path / f"{GLOBAL_DATABASE_NAME}.db").replace("'", "''")
        self.duck_conn.execute(f"ATTACH '{global_file}' AS {GLOBAL_DATABASE_NAME}")
        self.duck_conn.execute(info_schema.fs_global_creation_sql())
        self.duck_conn.execute(show.fs_global_creation_sql())
        kept = [f.stem for f in sorted(db_path.glob("*.db")) if f.stem != GLOBAL_DATABASE_NAME]
        for database in kept:
            self.connect(database=database).close()  # fakesnow attaches a database when connected to it
        log.info("databases kept in %s: %s", db_path, ", ".join(kept) or "none yet")

    def connect(
        self,
        database: str | None = None,
        schema: str | None = None,
        nop_regexes: list[str] | None = None,
        **kwargs: Any,
    ) -> RecordingConnection:
        # FakeSnow.connect with the subclassed connection (its body: one cursor of the instance per session).
        conn = RecordingConnection(
            self,
            self.duck_conn.cursor(),
            self.results_cache,
            database,
            schema,
            create_database=self.create_database_on_connect,
            create_schema=self.create_schema_on_connect,
            db_path=self.db_path,
            nop_regexes=nop_regexes or self.nop_regexes,
            **kwargs,
        )
        if conn.database_set and conn.database:
            self.ensure(conn.database)
        return conn

    def ensure(self, database: str) -> None:
        """Give ``database`` its change-time table and LAST_ALTERED view, once per process.

        Runs when the database is attached (at start, on connecting to it, after CREATE DATABASE) and
        before a time is written to it. It also forgets the times of tables that are gone and lets the
        clock start after the kept ones.
        """
        with self._ensure_lock:
            if database in self._ensured:
                return
            cur = self.duck_conn.cursor()
            try:
                table = changes_table(database)
                cur.execute(
                    f"CREATE TABLE IF NOT EXISTS {table} (table_schema VARCHAR NOT NULL, table_name VARCHAR NOT NULL, "
                    "committed_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (table_schema, table_name))"
                )
                cur.execute(
                    f"DELETE FROM {table} AS c WHERE NOT EXISTS (SELECT 1 FROM duckdb_tables() AS t WHERE "
                    "t.database_name = ? AND t.schema_name = c.table_schema AND t.table_name = c.table_name)",
                    [database],
                )
                cur.execute(tables_view_sql(database))
                (latest,) = cur.execute(f"SELECT max(committed_at) FROM {table}").fetchone() or (None,)
                self.clock.observe(latest)
            finally:
                cur.close()
            self._ensured.add(database)

    def close(self) -> None:
        """Close every session and the instance: DuckDB checkpoints each database file as it closes.

        Sessions of the HTTP server live in ``fakesnow.server``, which only the server process (``serve``)
        has imported. It is not imported here: importing that module rebinds the package's ``fakesnow.server()``
        helper to it, which would break any other fakesnow server the same process starts later.
        """
        server: Any = sys.modules.get("fakesnow.server")
        if server is not None:
            for session in list(server.sessions.values()):
                session.close()
            server.sessions.clear()
        self.duck_conn.close()


class RecordingConnection(FakeSnowflakeConnection):
    """A session: fakesnow's connection, and the tables its open transaction has changed."""

    def __init__(self, instance: Emulator, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instance = instance
        self.open = False  # a transaction is open: after BEGIN, or after a DML with AUTOCOMMIT off
        self.pending: set[TableKey] = set()  # tables it changed: their time is taken when it commits

    @property
    def autocommits(self) -> bool:
        return bool(self._autocommit)

    def cursor(self, cursor_class: type[SnowflakeCursor] = SnowflakeCursor) -> RecordingCursor:
        return RecordingCursor(conn=self, duck_conn=self._duck_conn, use_dict_result=cursor_class == DictCursor)


class RecordingCursor(FakeSnowflakeCursor):
    """fakesnow's cursor, recording the commit time of each change and serving it."""

    _conn: RecordingConnection

    def execute(
        self, command: str, params: Sequence[Any] | dict[Any, Any] | None = None, *args: Any, **kwargs: Any
    ) -> RecordingCursor:
        self._statement: Statement | None = None
        super().execute(command, params, *args, **kwargs)
        if self._statement is not None:  # it ran, and succeeded (fakesnow raises on failure)
            self._after(self._statement)
        return self

    def _transform_explode(self, expression: exp.Expr) -> list[exp.Expr]:
        """fakesnow's first step after parsing, once per statement: note what the statement changes."""
        st = classify(expression, self._conn.database, self._conn.schema)
        if st.only_if_new and self._exists(st.changed[0]):
            st = Statement(effect=Effect.DDL)  # CREATE TABLE IF NOT EXISTS of a table that exists: no change
        self._statement = st
        return super()._transform_explode(expression)

    def _transform(self, expression: exp.Expr, params: Any) -> exp.Expr:
        """Answer ``SYSTEM$LAST_CHANGE_COMMIT_TIME('<table>')`` and ``POLICY_REFERENCES`` before fakesnow's own."""
        no_policies(expression)
        for call in change_time_calls(expression):
            value = exp.Literal.number(self._change_time_ns(call))
            call.replace(exp.alias_(value, column_name(call), quoted=True) if call.parent is expression else value)
        return super()._transform(expression, params)

    def _after(self, st: Statement) -> None:
        """Track the session's transaction; stamp the tables whose changes this statement committed."""
        conn = self._conn
        committed: set[TableKey] = set()
        # fakesnow commits the open transaction on COMMIT, and, with AUTOCOMMIT off, before DDL or ALTER
        # SESSION (Snowflake's implicit commit): its changes are committed now.
        implicit = st.effect in (Effect.DDL, Effect.SESSION) and not conn.autocommits
        if conn.open and (st.effect is Effect.COMMIT or implicit):
            committed |= conn.pending
        if st.effect in (Effect.COMMIT, Effect.ROLLBACK) or implicit:
            conn.open = False
            conn.pending.clear()
        if st.effect is Effect.BEGIN:
            conn.open = True
        if st.created_database:
            conn.instance.ensure(st.created_database)
        if st.changes_tables:
            if conn.open or (st.effect is Effect.DML and not conn.autocommits):
                # Inside BEGIN ... COMMIT (where fakesnow also runs DDL when AUTOCOMMIT is on), or a DML with
                # AUTOCOMMIT off, which fakesnow runs in a transaction it opens: the time comes with the commit.
                conn.open = True
                conn.pending.update(st.changed)
            else:
                committed.update(st.changed)
        if committed:
            self._stamp(committed)

    def _stamp(self, tables: Iterable[TableKey]) -> None:
        """Record that ``tables``' changes committed now.

        The time is committed right after the change, in a transaction of its own: fakesnow's MERGE and
        DDL write to more than one database (its metadata lives in ``_fs_global``), which a single DuckDB
        transaction cannot. An emulator killed between the two commits keeps the change without its time.
        """
        instance = self._conn.instance
        by_database: dict[str, list[TableKey]] = {}
        for key in sorted(tables):
            by_database.setdefault(key.database, []).append(key)
        with instance.clock.lock:
            at = instance.clock.next()
            for database, keys in by_database.items():
                instance.ensure(database)
                table = changes_table(database)
                for key in keys:
                    # UPDATE, else INSERT: DuckDB's INSERT ... ON CONFLICT DO UPDATE costs ten times as much
                    # (7 ms against 0.7 ms here), and under the lock no other write can come between the two.
                    (updated,) = self._duck_conn.execute(
                        f"UPDATE {table} SET committed_at = ? WHERE table_schema = ? AND table_name = ?",
                        [at, key.schema, key.table],
                    ).fetchone() or (0,)
                    if not updated:
                        self._duck_conn.execute(f"INSERT INTO {table} VALUES (?, ?, ?)", [key.schema, key.table, at])

    def _exists(self, key: TableKey) -> bool:
        row = self._duck_conn.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND schema_name = ? AND table_name = ?",
            list(key),
        ).fetchone()
        return bool(row and row[0])

    def _change_time_ns(self, call: exp.Anonymous) -> int:
        """The function's value: the table's last change time in UTC nanoseconds since the epoch (0: none seen)."""
        try:
            name = object_name(call)
            table = exp.to_table(name, dialect="snowflake")
        except (ValueError, sqlglot.errors.ParseError) as e:
            raise snowflake.connector.errors.ProgrammingError(msg=str(e), errno=1003, sqlstate="42000") from None
        key = table_key(table, self._conn.database, self._conn.schema)
        if key is None or not self._exists(key):
            views = 0
            if key is not None:
                row = self._duck_conn.execute(
                    "SELECT count(*) FROM duckdb_views() WHERE database_name = ? AND schema_name = ? AND view_name = ?",
                    list(key),
                ).fetchone()
                views = row[0] if row else 0
            if views:
                raise snowflake.connector.errors.ProgrammingError(
                    msg=f"the local emulator answers {call.name} for tables only, not the view '{name}'",
                    errno=9999,
                    sqlstate="99999",
                )
            # Snowflake's answer for an object that is not there (or not visible to the role).
            raise snowflake.connector.errors.ProgrammingError(
                msg=f"SQL compilation error:\nObject '{name}' does not exist or not authorized.",
                errno=2003,
                sqlstate="02000",
            )
        row = self._duck_conn.execute(
            f"SELECT epoch_ns(committed_at) FROM {changes_table(key.database)} "
            "WHERE table_schema = ? AND table_name = ?",
            [key.schema, key.table],
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0


def serve(db_path: Path, port: int, host: str = "127.0.0.1") -> None:
    """Serve the emulator on ``host:port`` until SIGTERM or SIGINT, then close its databases."""
    import uvicorn

    emulator = Emulator(db_path)
    # The module, not the package's ``fakesnow.server()`` helper of the same name.
    server_module: Any = importlib.import_module("fakesnow.server")
    server_module.shared_fs = emulator  # the instance fakesnow's login hands every session
    server = uvicorn.Server(uvicorn.Config(server_module.app, host=host, port=port, log_level="info", access_log=False))

    def stop(_signum: int, _frame: object) -> None:
        # Before the server runs: do not start. After uvicorn's graceful shutdown it raises the signal again
        # (its handlers hand back to these): already stopping, so nothing more to do.
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.run()
    finally:
        emulator.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m snowberg.local.emulator",
        description="fakesnow's Snowflake HTTP server, with its data kept in --db-path and tables' change times",
    )
    p.add_argument("-d", "--db-path", required=True, type=Path, help="folder of the DuckDB database files")
    p.add_argument("-p", "--port", required=True, type=int)
    p.add_argument("--host", default="127.0.0.1")
    args = p.parse_args(argv)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))  # uvicorn's look, same log
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    serve(args.db_path, args.port, args.host)
    return 0


if __name__ == "__main__":
    code = main()
    # The databases are closed (checkpointed) by now. Skip the interpreter's teardown of fakesnow's
    # libraries (pandas, pyarrow, the connector): about a second on every stop, for nothing.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
