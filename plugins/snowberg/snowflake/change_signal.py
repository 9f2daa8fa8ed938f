"""Has a watched source changed? Snowflake's metadata answers, one statement per database (docs/event-driven.md).

Two system functions answer from a table's version metadata, without reading a row:

* ``SYSTEM$LAST_CHANGE_COMMIT_TIME('<table or view>')``: Snowflake documents it as "a token that can be
  used to detect whether a database table or view changed between two calls", a NUMBER that "increases"
  with "each DML operation performed on the specified table or underlying tables in the specified view",
  and asks that it be used as a change indicator, not as a timestamp. snowberg compares tokens for
  equality only. Unlike ``LAST_ALTERED`` in ``INFORMATION_SCHEMA.TABLES`` (which also moves on DDL and
  background maintenance), it follows DML, and it works for views.
* ``SYSTEM$STREAM_HAS_DATA('<stream>')``: whether a stream holds change data. Documented to avoid false
  negatives (a stream with changes never answers FALSE) but not false positives, and calling it on an
  empty stream keeps the stream from going stale. It is the check a task's ``WHEN`` clause makes "to avoid
  starting or resuming a warehouse unnecessarily".

A poll sends one ``SELECT`` per database for all watched tables in it (``CHUNK`` names at most per
statement) and one for all watched streams: its statements follow the number of databases, not of tables.
Names are bound as values, as both functions take them: the quoted ``"DB"."SCHEMA"."NAME"`` inside the
string, so a mixed-case name resolves exactly (``TableName.quoted``).

A statement fails whole when one name in it cannot be resolved (a dropped object, a revoked grant:
Snowflake's "does not exist or not authorized"). The names of such a statement are then asked one by
one, so one bad object never hides the others, and each failure names its object. Any other error
(network, login, a closed session) fails every source still to be read: the caller reconnects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from snowberg.core.identifiers import TableName

log = logging.getLogger(__name__)

CHUNK = 5000  # names per statement: a SELECT of 5,000 calls is about 350 KB of text


class SignalKind(StrEnum):
    """What is polled for a watched table, by how it is loaded."""

    TABLE = "table"  # a table or view: its change token (watermark and cursor-less tables)
    STREAM = "stream"  # a Snowflake stream: whether it holds change data (stream tables)

    @property
    def function(self) -> str:
        return "SYSTEM$LAST_CHANGE_COMMIT_TIME" if self is SignalKind.TABLE else "SYSTEM$STREAM_HAS_DATA"


@dataclass(frozen=True, kw_only=True)
class WatchedSource:
    """One object to poll; ``key`` is the caller's name for it (a watched table's DAG id)."""

    key: str
    kind: SignalKind
    name: TableName
    quoted: str = field(init=False)  # the name as the functions take it, validated and quoted once

    def __post_init__(self) -> None:
        object.__setattr__(self, "quoted", self.name.quoted())


@dataclass(frozen=True, kw_only=True)
class SignalRead:
    """The signal of one source: its token (``"true"``/``"false"`` for a stream), or why it could not be read."""

    key: str
    value: str | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class PollOutcome:
    """What one poll read, and whether the connection broke (the caller reconnects before the next poll)."""

    reads: dict[str, SignalRead]
    statements: int
    broken: bool = False


def signal_sql(kind: SignalKind, names: Sequence[TableName | str]) -> tuple[str, dict[str, str]]:
    """One ``SELECT`` of ``kind``'s function for each name (columns ``S0``, ``S1``, …), names bound as values.

    A name is a ``TableName``, or the text of one already quoted (``WatchedSource.quoted``).
    """
    if not names:
        raise ValueError("no source to poll")
    cols = ", ".join(f'{kind.function}(%(n{i})s) AS "S{i}"' for i in range(len(names)))
    return f"SELECT {cols}", {f"n{i}": n if isinstance(n, str) else n.quoted() for i, n in enumerate(names)}


def poll_groups(sources: Iterable[WatchedSource], alone: Collection[str] = ()) -> list[list[WatchedSource]]:
    """The statements of a poll: the tables of each database together, all streams together (chunks of ``CHUNK``).

    Sources whose key is in ``alone`` (those that failed lately) get a statement each, so a dropped
    table does not fail its database's statement on every poll.
    """
    by_statement: dict[tuple[SignalKind, str], list[WatchedSource]] = {}
    singles = []
    for s in sources:
        if s.key in alone:
            singles.append([s])
            continue
        group = s.name.database.upper() if s.kind is SignalKind.TABLE else ""
        by_statement.setdefault((s.kind, group), []).append(s)
    out = []
    for _, members in sorted(by_statement.items()):
        out += [members[i : i + CHUNK] for i in range(0, len(members), CHUNK)]
    return out + singles


def normalize(kind: SignalKind, value: Any) -> str:
    """A signal as text: the token's digits, or ``true``/``false`` for a stream; NULL is refused."""
    if value is None:
        raise ValueError(f"Snowflake answered NULL to {kind.function}")
    if kind is SignalKind.STREAM:
        if isinstance(value, bool):
            return "true" if value else "false"
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise ValueError(f"{kind.function} answered {value!r}, not a boolean")
        return text
    return str(int(value))


def is_statement_error(exc: BaseException) -> bool:
    """A SQL error of the statement (compilation, an unknown or unauthorized object), not of the connection."""
    try:
        from snowflake.connector.errors import ProgrammingError
    except ImportError:  # pragma: no cover - the connector comes with the Snowflake provider
        return False
    return isinstance(exc, ProgrammingError)


def _execute(conn: Any, kind: SignalKind, members: Sequence[WatchedSource]) -> list[Any]:
    sql, params = signal_sql(kind, [m.quoted for m in members])
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        row = cur.fetchone()
    finally:
        cur.close()
    if row is None or len(row) != len(members):
        raise ValueError(f"expected one row of {len(members)} values, got {row!r}")
    return list(row)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]


def read_signals(
    conn: Any,
    sources: Sequence[WatchedSource],
    *,
    alone: Collection[str] = (),
    on_statement: Callable[[str], None] | None = None,
) -> PollOutcome:
    """Poll ``sources`` on ``conn``: one statement per group (``poll_groups``), a failed group asked name by name.

    ``on_statement`` is called with the function of each statement sent (the poll's cost, for logs and tests).
    """
    reads: dict[str, SignalRead] = {}
    statements = 0
    pending = poll_groups(sources, alone)  # each group, then (when it fails) its members one by one
    while pending:
        group = pending.pop(0)
        kind = group[0].kind
        statements += 1
        if on_statement is not None:
            on_statement(kind.function)
        try:
            values = _execute(conn, kind, group)
        except Exception as exc:  # noqa: BLE001 - sorted below: the statement's fault or the connection's
            if not is_statement_error(exc):
                why = _describe(exc)
                left = [m for g in [group, *pending] for m in g]
                reads.update({m.key: SignalRead(key=m.key, error=why) for m in left})
                return PollOutcome(reads=reads, statements=statements, broken=True)
            if len(group) == 1:
                reads[group[0].key] = SignalRead(key=group[0].key, error=f"{group[0].name}: {_describe(exc)}")
            else:
                log.info("a poll of %d sources failed (%s): asking each alone", len(group), _describe(exc))
                pending[:0] = [[m] for m in group]
            continue
        for member, value in zip(group, values, strict=True):
            try:
                reads[member.key] = SignalRead(key=member.key, value=normalize(kind, value))
            except (TypeError, ValueError) as exc:
                reads[member.key] = SignalRead(key=member.key, error=f"{member.name}: {exc}")
    return PollOutcome(reads=reads, statements=statements)


def read_signal(conn: Any, kind: SignalKind, name: TableName) -> str:
    """The signal of one source now (one statement); raises when Snowflake cannot answer."""
    [value] = _execute(conn, kind, [WatchedSource(key=str(name), kind=kind, name=name)])
    return normalize(kind, value)
