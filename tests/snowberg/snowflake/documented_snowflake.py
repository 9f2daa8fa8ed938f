"""A Snowflake connection that answers the watch poll as Snowflake documents it (written from the docs, not
recorded from an account; the live lane, ``test_change_signal_live.py``, runs the same statements on one).

What it answers, per Snowflake's function reference:

* ``SYSTEM$LAST_CHANGE_COMMIT_TIME('<table or view>')``: a NUMBER (scale 0), "a token that can be used
  to detect whether a database table or view changed between two calls"; "for each DML operation
  performed on the specified table or underlying tables in the specified view, the returned value
  increases" (here: a counter that ``dml`` moves);
* ``SYSTEM$STREAM_HAS_DATA('<stream>')``: a BOOLEAN, TRUE while the stream holds change data (``dml``
  on a stream's name sets it, ``consume`` clears it);
* an object that does not exist, or that the role cannot see, fails the statement at compile time:
  ``SQL compilation error: Object '<name>' does not exist or not authorized.`` (``ProgrammingError``,
  errno 2003, as the connector raises it);
* a dropped network raises the connector's ``OperationalError`` (errno 250001).

It also counts statements (``statements``), can make each one slow (``delay``, a blocking sleep as
the synchronous connector would), and can refuse connections (``down``).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

CALL = re.compile(r"(SYSTEM\$LAST_CHANGE_COMMIT_TIME|SYSTEM\$STREAM_HAS_DATA)\(%\((\w+)\)s\)")
TOKEN_BASE = 1_661_920_053_987_000_000  # the documentation's example value


def _key(name: str) -> str:
    """A name as the poll binds it (``"DB"."S"."T"``) or as a test writes it (``DB.S.T``), compared upper-case."""
    return ".".join(p.strip('"').upper() for p in name.split("."))


class DocumentedSnowflake:
    def __init__(self) -> None:
        self.tokens: dict[str, int] = {}
        self.streams: dict[str, bool] = {}
        self.hidden: set[str] = set()  # dropped, or a revoked grant: "does not exist or not authorized"
        self.statements: list[str] = []
        self.delay = 0.0
        self.down = False
        self.connections = 0
        self._lock = threading.Lock()

    def table(self, name: str) -> None:
        self.tokens[_key(name)] = TOKEN_BASE

    def stream(self, name: str, has_data: bool = False) -> None:
        self.streams[_key(name)] = has_data

    def dml(self, name: str) -> None:
        """An INSERT/UPDATE/DELETE on a table (its token increases) or on a stream's table (it has data)."""
        with self._lock:
            if _key(name) in self.streams:
                self.streams[_key(name)] = True
            else:
                self.tokens[_key(name)] += 1_000_000

    def consume(self, stream: str) -> None:
        self.streams[_key(stream)] = False

    def token(self, name: str) -> str:
        return str(self.tokens[_key(name)])

    def connect(self) -> DocumentedConnection:
        if self.down:
            raise _operational()
        self.connections += 1
        return DocumentedConnection(self)

    def answer(self, sql: str, params: dict[str, Any]) -> tuple[Any, ...]:
        if self.down:
            raise _operational()
        if self.delay:
            time.sleep(self.delay)
        self.statements.append(sql)
        calls = CALL.findall(sql)
        if not calls or not sql.startswith("SELECT "):
            raise AssertionError(f"the documented double answers only the watch poll: {sql!r}")
        row = []
        for function, param in calls:
            name = _key(params[param])
            known = self.tokens if function.endswith("COMMIT_TIME") else self.streams
            if name in self.hidden or name not in known:
                from snowflake.connector.errors import ProgrammingError

                raise ProgrammingError(
                    msg=f"SQL compilation error:\nObject '{params[param]}' does not exist or not authorized.",
                    errno=2003,
                    sqlstate="02000",
                )
            row.append(known[name])
        return tuple(row)


def _operational() -> Exception:
    from snowflake.connector.errors import OperationalError

    return OperationalError(msg="Could not connect to Snowflake backend after 0 attempt(s).", errno=250001)


class DocumentedConnection:
    def __init__(self, account: DocumentedSnowflake) -> None:
        self.account = account
        self.closed = False

    def cursor(self) -> DocumentedCursor:
        return DocumentedCursor(self.account)

    def close(self) -> None:
        self.closed = True


class DocumentedCursor:
    def __init__(self, account: DocumentedSnowflake) -> None:
        self.account = account
        self.row: tuple[Any, ...] | None = None

    def execute(self, sql: str, params: dict[str, Any] | None = None) -> DocumentedCursor:
        self.row = self.account.answer(sql, params or {})
        return self

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.row

    def close(self) -> None:
        pass


class TokensOver:
    """An emulator connection whose watch-poll statements the documented double answers, every other one the emulator.

    The local emulator does not serve ``SYSTEM$LAST_CHANGE_COMMIT_TIME``; a test that runs a watched
    table's plan on it routes that one statement here (``account.dml`` moves the token when the test
    changes the source).
    """

    def __init__(self, conn: Any, account: DocumentedSnowflake) -> None:
        self.conn = conn
        self.account = account

    def cursor(self, *args: Any, **kwargs: Any) -> _RoutingCursor:
        return _RoutingCursor(self.conn.cursor(*args, **kwargs), self.account)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


class _RoutingCursor:
    def __init__(self, cur: Any, account: DocumentedSnowflake) -> None:
        self.cur = cur
        self.account = account
        self.row: tuple[Any, ...] | None = None

    def execute(self, sql: str, params: Any = None, *args: Any, **kwargs: Any) -> Any:
        if CALL.search(sql):
            self.row = self.account.answer(sql, params or {})
            return self
        self.row = None
        return self.cur.execute(sql, params, *args, **kwargs)

    def fetchone(self) -> Any:
        return self.row if self.row is not None else self.cur.fetchone()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cur, name)
