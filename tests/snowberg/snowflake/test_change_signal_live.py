"""Live lane of the watch poll: its statements on a real account (``test_change_signal.py`` runs them against
answers written from Snowflake's documentation).

Checks what the documentation says and the triggerer relies on: a table's change token moves with DML and
not with a read; a stream says it holds data after an insert and not after its consumption; a dropped table
fails its own statement only; and, in a session without a warehouse, the poll's statements still run
(Snowflake refuses a statement that needs one: "No active warehouse selected in the current session").

Skipped unless SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT, _USER, _PASSWORD, _WAREHOUSE are set (optional _ROLE; the role
needs CREATE DATABASE). Each test creates and drops its own database ``SNOWBERG_TEST_<random>``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "streams"))
from streams_harness import LIVE_LANE, live_database  # noqa: E402

from snowberg.core.identifiers import TableName  # noqa: E402
from snowberg.snowflake.change_signal import SignalKind, WatchedSource, read_signals  # noqa: E402

pytestmark = LIVE_LANE


@pytest.fixture
def account() -> Iterator[tuple[Any, str]]:
    yield from live_database(
        "CREATE TABLE {db}.S.ORDERS (ID NUMBER(38,0))",
        "CREATE TABLE {db}.S.GONE (ID NUMBER(38,0))",
        "CREATE STREAM {db}.S.ORDERS_STREAM ON TABLE {db}.S.ORDERS",
    )


def watched(db: str) -> list[WatchedSource]:
    return [
        WatchedSource(key="orders", kind=SignalKind.TABLE, name=TableName.parse(f"{db}.S.ORDERS")),
        WatchedSource(key="gone", kind=SignalKind.TABLE, name=TableName.parse(f"{db}.S.GONE")),
        WatchedSource(key="stream", kind=SignalKind.STREAM, name=TableName.parse(f"{db}.S.ORDERS_STREAM")),
    ]


def test_tokens_move_with_dml_only_and_a_stream_says_when_it_holds_data(account: tuple[Any, str]) -> None:
    conn, db = account
    cur = conn.cursor()
    first = read_signals(conn, watched(db)).reads
    assert first["stream"].value == "false"
    cur.execute(f"SELECT COUNT(*) FROM {db}.S.ORDERS")
    assert read_signals(conn, watched(db)).reads["orders"].value == first["orders"].value
    cur.execute(f"INSERT INTO {db}.S.ORDERS VALUES (1)")
    after = read_signals(conn, watched(db)).reads
    assert after["orders"].value != first["orders"].value
    assert after["stream"].value == "true"
    cur.execute(f"CREATE TEMPORARY TABLE {db}.S.SINK (ID NUMBER(38,0))")
    cur.execute(f"INSERT INTO {db}.S.SINK SELECT ID FROM {db}.S.ORDERS_STREAM")
    assert read_signals(conn, watched(db)).reads["stream"].value == "false"

    cur.execute(f"DROP TABLE {db}.S.GONE")
    out = read_signals(conn, watched(db))
    assert out.reads["gone"].error is not None and "does not exist or not authorized" in out.reads["gone"].error
    assert out.reads["orders"].value == after["orders"].value and not out.broken


def test_the_poll_needs_no_warehouse(account: tuple[Any, str]) -> None:
    _, db = account
    import snowflake.connector

    kw: dict[str, Any] = {
        k: os.environ[f"SNOWBERG_LIVE_SNOWFLAKE_{k.upper()}"] for k in ("account", "user", "password")
    }
    if os.environ.get("SNOWBERG_LIVE_SNOWFLAKE_ROLE"):
        kw["role"] = os.environ["SNOWBERG_LIVE_SNOWFLAKE_ROLE"]
    conn = snowflake.connector.connect(**kw)  # no warehouse
    try:
        cur = conn.cursor()
        cur.execute("SELECT CURRENT_WAREHOUSE()")
        (warehouse,) = cur.fetchone()
        if warehouse is not None:
            pytest.skip(f"the live user has a default warehouse ({warehouse}): this session cannot be without one")
        out = read_signals(conn, watched(db)[:1] + watched(db)[2:])
        assert not out.broken and all(r.error is None for r in out.reads.values()), out.reads
    finally:
        conn.close()
