"""A stream pipeline under test: source table + stream (double) + staging in fakesnow, target in Iceberg."""

from __future__ import annotations

import json
import os
import subprocess
import traceback
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from stream_double import StreamDouble

from snowberg.config.stream_settings import StreamSource
from snowberg.config.table_config import TableConfig
from snowberg.streams.steps import cleanup_step, consume_step, load_step

LIVE_ENV = (
    "SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT",
    "SNOWBERG_LIVE_SNOWFLAKE_USER",
    "SNOWBERG_LIVE_SNOWFLAKE_PASSWORD",
    "SNOWBERG_LIVE_SNOWFLAKE_WAREHOUSE",
)
# A module of the live lane: ``pytestmark = LIVE_LANE`` (marked ``live``; skipped without the settings).
LIVE_LANE = [
    pytest.mark.live,
    pytest.mark.skipif(
        not all(os.environ.get(k) for k in LIVE_ENV), reason="live Snowflake lane: set " + ", ".join(LIVE_ENV)
    ),
]


def live_database(*ddl: str) -> Iterator[tuple[Any, str]]:
    """A fixture body: a database ``SNOWBERG_TEST_<random>`` on the live account with schema ``S``, then ``ddl``
    (``{db}`` in each statement is the database); yields the connection and the database, drops it after."""
    db = f"SNOWBERG_TEST_{uuid.uuid4().hex[:10].upper()}"
    conn = live_connect(None)
    cur = conn.cursor()
    try:
        for sql in (f"CREATE DATABASE {db}", f"CREATE SCHEMA {db}.S", *ddl):
            cur.execute(sql.replace("{db}", db))
        yield conn, db
    finally:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()


def live_connect(database: str | None) -> Any:
    """A connection to the real account of the live lane (settings from SNOWBERG_LIVE_SNOWFLAKE_*)."""
    import snowflake.connector

    from snowberg.snowflake.session import session_parameters

    kw: dict[str, Any] = {
        "account": os.environ["SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT"],
        "user": os.environ["SNOWBERG_LIVE_SNOWFLAKE_USER"],
        "password": os.environ["SNOWBERG_LIVE_SNOWFLAKE_PASSWORD"],
        "warehouse": os.environ["SNOWBERG_LIVE_SNOWFLAKE_WAREHOUSE"],
        "session_parameters": session_parameters(None),
    }
    if os.environ.get("SNOWBERG_LIVE_SNOWFLAKE_ROLE"):
        kw["role"] = os.environ["SNOWBERG_LIVE_SNOWFLAKE_ROLE"]
    if database:
        kw["database"], kw["schema"] = database, "SRC"
    return snowflake.connector.connect(**kw)


def connect_kwargs(server: dict[str, Any]) -> dict[str, Any]:
    """The emulator's connect kwargs with snowberg's pinned session (TIMEZONE=UTC …) added."""
    from snowberg.snowflake.session import session_parameters

    kw = dict(server)
    kw["session_parameters"] = session_parameters(None, kw.get("session_parameters"))
    return kw


class CountingConnection:
    """A connection that records every statement its cursors execute (``statements``), then runs it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.statements: list[str] = []

    def cursor(self) -> Any:
        return _CountingCursor(self.conn.cursor(), self.statements)

    def close(self) -> None:
        self.conn.close()


class _CountingCursor:
    def __init__(self, cur: Any, statements: list[str]) -> None:
        self.cur, self.statements = cur, statements

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cur, name)

    def execute(self, sql: str, params: Any = None, **kwargs: Any) -> Any:
        self.statements.append(sql)
        self.cur.execute(sql, params, **kwargs)
        return self


class Harness:
    """``run()`` does consume → load → cleanup in process; ``run_step_in_subprocess`` crashes for real."""

    def __init__(
        self,
        server: dict[str, Any] | None,
        tmp_path: Path,
        *,
        append_only: bool = False,
        changelog: bool = False,
        primary_key: list[str] | None = None,
    ) -> None:
        """``server``: fakesnow connect kwargs (the stream double is used), or None for the live lane."""
        self.server = server
        self.live = server is None
        self.tmp = tmp_path
        self.db = (
            os.environ.get("SNOWBERG_LIVE_DATABASE_PREFIX", "SNOWBERG_TEST_") if self.live else "SB_"
        ) + uuid.uuid4().hex[:10].upper()
        self.conns: list[Any] = []
        self.warehouse = tmp_path / "warehouse"
        self.warehouse.mkdir(exist_ok=True)
        self.catalog_props = {"uri": f"sqlite:///{tmp_path / 'catalog.db'}", "warehouse": f"file://{self.warehouse}"}
        self.configure(append_only=append_only, changelog=changelog, primary_key=primary_key)
        if self.live:
            boot = live_connect(None)
            boot.cursor().execute(f'CREATE DATABASE "{self.db}" DATA_RETENTION_TIME_IN_DAYS = 1')
            boot.cursor().execute(f'CREATE SCHEMA "{self.db}"."SRC"')
            boot.close()
        self.admin = self.connect()
        cur = self.admin.cursor()
        cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.db}"."STAGE"')
        cur.execute(f'USE SCHEMA "{self.db}"."SRC"')
        cur.execute(
            f'CREATE TABLE "{self.db}"."SRC"."ORDERS" (ID NUMBER(38,0), STATUS VARCHAR, AMOUNT NUMBER(10,2), '
            f"UPDATED_AT TIMESTAMP_NTZ)"
        )
        self.runs = 0
        self._pipeline_conn: Any = None

    def configure(
        self,
        *,
        append_only: bool = False,
        changelog: bool = False,
        primary_key: list[str] | None = None,
        create: bool = True,
    ) -> None:
        self.cfg = TableConfig.model_validate(
            {
                "name": "orders",
                "source": {"table": f"{self.db}.SRC.ORDERS"},
                "target": "shop.orders",
                "primary_key": ["id"] if primary_key is None else primary_key,
                "schedule": "@hourly",
            }
        )
        self.stream = StreamSource(
            name=f"{self.db}.SRC.ORDERS_STREAM",
            create=create,
            append_only=append_only,
            staging_table=f"{self.db}.STAGE.ORDERS_STAGING",
            changelog_target="shop.orders_changelog" if changelog else None,
        )

    # -- connections -------------------------------------------------------------------------------
    def connect(self) -> Any:
        import snowflake.connector

        if self.live:
            conn = live_connect(self.db)
            self.conns.append(conn)
            return conn
        raw = snowflake.connector.connect(**connect_kwargs(self.server), database=self.db, schema="SRC")
        self.conns.append(raw)
        return StreamDouble(raw, database=self.db, keys={f"{self.db}.SRC.ORDERS": ["ID"]})

    def catalog(self) -> Any:
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog("lake", **self.catalog_props)

    def close(self) -> None:
        if self.live:
            try:
                self.admin.cursor().execute(f'DROP DATABASE IF EXISTS "{self.db}"')
            except Exception:
                pass
        for c in self.conns:
            try:
                c.close()
            except Exception:
                pass

    # -- source DML --------------------------------------------------------------------------------
    def sql(self, text: str, params: Any = None) -> list[tuple[Any, ...]]:
        cur = self.admin.cursor()
        cur.execute(text, params)
        try:
            return list(cur.fetchall())
        except Exception:
            return []

    def insert(self, *rows: tuple[int, str, str]) -> None:
        for i, status, amount in rows:
            self.sql(
                f'INSERT INTO "{self.db}"."SRC"."ORDERS" (ID, STATUS, AMOUNT, UPDATED_AT) '
                "VALUES (%(i)s, %(s)s, %(a)s, CURRENT_TIMESTAMP())",
                {"i": i, "s": status, "a": amount},
            )

    def update(self, i: int, status: str) -> None:
        self.sql(f'UPDATE "{self.db}"."SRC"."ORDERS" SET STATUS = %(s)s WHERE ID = %(i)s', {"s": status, "i": i})

    def delete(self, i: int) -> None:
        self.sql(f'DELETE FROM "{self.db}"."SRC"."ORDERS" WHERE ID = %(i)s', {"i": i})

    # -- the pipeline ------------------------------------------------------------------------------
    def run(self, *, recover: bool = False, conn: Any = None) -> dict[str, Any]:
        self.runs += 1
        run_id = f"manual__run{self.runs}"
        if conn is None:
            if self._pipeline_conn is None:
                self._pipeline_conn = self.connect()
            conn = self._pipeline_conn
        cat = self.catalog()
        consumed = consume_step(self.cfg, self.stream, conn, cat, run_id=run_id, recover=recover)
        loaded = load_step(self.cfg, self.stream, conn, cat, run_id=run_id, consumed=consumed)
        cleaned = cleanup_step(self.cfg, self.stream, conn, cat)
        return {"consume": consumed, "load": loaded, "cleanup": cleaned}

    def run_step_in_subprocess(
        self, step: str, fault: str | None, *, consumed: dict[str, Any] | None = None, run_id: str = "crash__run"
    ) -> subprocess.CompletedProcess[str]:
        """Run one step in a forked child that dies at ``fault`` (``SNOWBERG_FAULT``) like a killed worker.

        ``os.fork`` keeps the imports (a fresh interpreter costs seconds on a busy
        machine); the child opens its own Snowflake connection and catalog, and
        ``os._exit`` at the failpoint skips every cleanup, as a real crash does.
        """
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            os.close(read_fd)
            code = 1
            try:
                if fault:
                    os.environ["SNOWBERG_FAULT"] = fault
                conn, cat = self.connect(), self.catalog()
                if step == "consume":
                    out = consume_step(self.cfg, self.stream, conn, cat, run_id=run_id)
                elif step == "load":
                    out = load_step(self.cfg, self.stream, conn, cat, run_id=run_id, consumed=consumed)
                else:
                    out = cleanup_step(self.cfg, self.stream, conn, cat)
                os.write(write_fd, json.dumps(out, default=str).encode())
                code = 0
            except BaseException:
                os.write(write_fd, traceback.format_exc().encode())
            finally:
                os._exit(code)
        os.close(write_fd)
        chunks = []
        while data := os.read(read_fd, 65536):
            chunks.append(data)
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        text = b"".join(chunks).decode(errors="replace")
        return subprocess.CompletedProcess([step], os.waitstatus_to_exitcode(status), text, text)

    # -- observations ------------------------------------------------------------------------------
    def source_rows(self) -> list[dict[str, Any]]:
        rows = self.sql(f'SELECT ID, STATUS, AMOUNT FROM "{self.db}"."SRC"."ORDERS" ORDER BY ID')
        return [
            {"id": Decimal(r[0]), "status": r[1], "amount": Decimal(r[2]) if r[2] is not None else None} for r in rows
        ]

    def target_rows(self, target: str = "shop.orders") -> list[dict[str, Any]]:
        t = self.catalog().load_table(target)
        rows = t.scan().to_arrow().to_pylist()
        return sorted(({k: r[k] for k in ("id", "status", "amount")} for r in rows), key=lambda r: r["id"])

    def changelog_rows(self) -> list[dict[str, Any]]:
        t = self.catalog().load_table("shop.orders_changelog")
        rows = t.scan().to_arrow().to_pylist()
        return sorted(
            rows, key=lambda r: (r["snowberg_batch_id"] or 0, r["snowberg_seq"] or 0, str(r.get("snowberg_row_id")))
        )

    def staged_count(self) -> int:
        return int(self.sql(f'SELECT COUNT(*) FROM "{self.db}"."STAGE"."ORDERS_STAGING"')[0][0])

    def stream_pending(self) -> int:
        """Rows a bare SELECT on the stream returns now (consumes nothing)."""
        cur = self.admin.cursor()
        cur.execute(f'SELECT COUNT(*) FROM "{self.db}"."SRC"."ORDERS_STREAM"')
        return int(cur.fetchone()[0])
