"""One shared poll of watched sources, between two polls: what it read, what it fired, what failed.

``SourceChangeTrigger`` (``snowberg.airflow.watch_trigger``) runs one ``WatchLoop`` per shared stream
(a Snowflake connection and a poll interval) in the triggerer, and calls ``poll`` from a worker
thread every interval: the connector is synchronous, and the triggerer's event loop must never wait
for Snowflake or for a Variable.

A poll:

1. reads the signal of every watched source that is due (``snowberg.snowflake.change_signal``: one
   statement per database, one for the streams);
2. for a source whose signal moved, or whose table waits for a run, reads the table's run record
   and decides (``snowberg.iceberg.watch_state.assess``); an unchanged, current table costs a
   dictionary lookup and nothing else;
3. fires a table's trigger once per change (``Assessment.token``), and again when nothing recorded
   progress after ``stall_after`` (a run that failed before it planned, say);
4. records what it found in the connection's poll record, at most every ``PROOF_EVERY`` (or a quarter
   of the shortest ``freshness_sla`` of its tables, whichever is shorter; never more often than it polls)
   unless a table's status changed.

What this memory holds only spares reads and events: what was loaded comes from the run records, so
a new loop (a restarted triggerer, a trigger moved elsewhere) fires for every table that waits.

A source whose signal cannot be read is logged with its table and connection and retried with a
doubling backoff (capped at ``BACKOFF_CAP``); from the ``ALERT_AFTER``-th failure in a row on, it
sends a ``watch_failure`` alert through the table's channels, again every ``ALERT_REPEAT`` while it
lasts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from snowberg.core.durations import format_duration
from snowberg.core.identifiers import TableName
from snowberg.iceberg.state import VariableStore
from snowberg.iceberg.watch_state import (
    PROOF_EVERY,
    Assessment,
    PollEntry,
    WatchRecord,
    WatchState,
    assess,
    read_poll_record,
    read_watch,
    write_poll_record,
)
from snowberg.snowflake.change_signal import PollOutcome, SignalKind, SignalRead, WatchedSource, read_signals

log = logging.getLogger(__name__)

STALL_AFTER = timedelta(minutes=30)  # at least; and at least 10 polls
BACKOFF_CAP = timedelta(minutes=10)  # at least; and at least one poll
ALERT_AFTER = 3  # failed reads in a row
ALERT_REPEAT = timedelta(hours=6)


@dataclass(frozen=True, kw_only=True)
class WatchTarget:
    """One watched table, as its trigger describes it."""

    dag_id: str  # the load DAG: the key of everything per table here
    table: str  # the config's name
    target: str  # the Iceberg table
    kind: SignalKind
    source: str  # the table/view, or the stream, ``database.schema.name``
    alerts: Mapping[str, Any] | None = None  # the table's ``alerts`` section
    freshness_sla: timedelta | None = None  # the table's: its proof is written at least four times within it

    def watched(self) -> WatchedSource:
        return WatchedSource(key=self.dag_id, kind=self.kind, name=TableName.parse(self.source))


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What one poll tells one table's trigger: fire an event (with ``payload``) or not."""

    fire: bool
    payload: dict[str, Any]


@dataclass(kw_only=True)
class _Memory:
    """Per table, between polls (see the module doc: nothing here is the truth about the lake)."""

    source: WatchedSource | None = None  # the target's, parsed once
    signal: str | None = None
    assessment: Assessment | None = None
    record: WatchRecord | None = None
    polled_at: datetime | None = None
    current_at: datetime | None = None
    changed_at: datetime | None = None
    fired_token: str | None = None
    fired_at: datetime | None = None
    failures: int = 0
    failing_since: datetime | None = None
    error: str | None = None
    next_attempt: datetime | None = None
    alerted_at: datetime | None = None
    first_run_checked: bool = False


def _status(m: _Memory) -> tuple[Any, ...]:
    """What the poll record says of a table beyond times: a change of it is written at once."""
    a = m.assessment
    state = WatchState.FAILING if m.failures else (a.state if a is not None else WatchState.PENDING)
    return (state, m.error, m.changed_at, m.record.run_id if m.record else None, a.due if a else None)


def utc_now() -> datetime:
    return datetime.now(UTC)


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


class WatchLoop:
    """The state of one shared poll; ``poll`` is called from one thread at a time (see the module doc).

    :param snowflake_conn_id: the connection every watched source of this loop is read through.
    :param poll_interval: the interval the trigger calls ``poll`` at.
    :param variables: where run records are read and the poll record written (Airflow Variables).
    :param connect: opens a Snowflake connection (the loop keeps it open between polls).
    :param alert: sends a ``watch_failure`` alert (``snowberg.airflow.alerts.send_watch_failure``).
    :param now: the clock.
    """

    def __init__(
        self,
        *,
        snowflake_conn_id: str,
        poll_interval: timedelta,
        variables: VariableStore,
        connect: Callable[[], Any],
        alert: Callable[..., int] | None = None,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self.conn_id = snowflake_conn_id
        self.poll_interval = poll_interval
        self.variables = variables
        self.connect = connect
        self.alert = alert
        self.now = now
        self.stall_after = max(STALL_AFTER, 10 * poll_interval)
        self.backoff_cap = max(BACKOFF_CAP, poll_interval)
        self.proof_every = max(PROOF_EVERY, poll_interval)
        self.memory: dict[str, _Memory] = {}
        self.conn: Any = None
        self.last_written: datetime | None = None
        self.written: dict[str, tuple[Any, ...]] = {}
        self.statements = 0  # sent since the loop began (the cost of polling, for logs and benchmarks)
        self.polls = 0
        self._seeded = False
        # poll and close come from worker threads; the connector is not thread-safe: one at a time.
        self._lock = threading.Lock()

    # -- one poll -------------------------------------------------------------------------------

    def poll(self, targets: Sequence[WatchTarget]) -> dict[str, Decision]:
        """Read every due source of ``targets``, decide, record; the decisions by DAG id (fires only)."""
        with self._lock:
            return self._poll(targets)

    def _poll(self, targets: Sequence[WatchTarget]) -> dict[str, Decision]:
        now = self.now()
        self.polls += 1
        self._forget_all_but(targets)
        self._seed(targets)
        due = [t for t in targets if (self._mem(t).next_attempt or now) <= now]
        decisions: dict[str, Decision] = {}
        outcome = self._read(due)
        for t in due:
            read = outcome.reads.get(t.dag_id)
            if read is None or read.value is None:
                decision = self._failed(t, (read.error if read is not None else None) or "not read", now)
            else:
                decision = self._read_ok(t, read.value, now)
            if decision is not None:
                decisions[t.dag_id] = decision
        self._record(targets, now)
        return decisions

    def _read(self, due: Sequence[WatchTarget]) -> PollOutcome:
        if not due:
            return PollOutcome(reads={}, statements=0)
        if self.conn is None:
            try:
                self.conn = self.connect()
            except Exception as exc:  # noqa: BLE001 - every due source fails with it, and is retried
                why = f"cannot connect to Snowflake connection {self.conn_id!r}: {type(exc).__name__}: {exc}"[:500]
                return PollOutcome(
                    reads={t.dag_id: SignalRead(key=t.dag_id, error=why) for t in due}, statements=0, broken=True
                )
        alone = {t.dag_id for t in due if self._mem(t).failures}
        outcome = read_signals(self.conn, [self._source(t) for t in due], alone=alone)
        self.statements += outcome.statements
        if outcome.broken:
            self._close()
        return outcome

    def _read_ok(self, t: WatchTarget, signal: str, now: datetime) -> Decision | None:
        m = self._mem(t)
        if m.failures:
            log.info(
                "watch of table %s (%s, connection %s): its signal reads again after %d failed polls",
                t.table,
                t.source,
                self.conn_id,
                m.failures,
            )
        m.failures, m.failing_since, m.error, m.next_attempt = 0, None, None, None
        moved = m.signal is not None and signal != m.signal
        if moved:
            m.changed_at = now
        a = m.assessment
        if (
            a is None
            or signal != m.signal
            or a.state in (WatchState.PENDING, WatchState.LOADING)
            or (a.state is WatchState.WAITING and a.due is not None and now >= a.due)
        ):
            m.record = read_watch(t.target, self.variables)
            a = assess(t.kind, signal, m.record, now=now, stall_after=self.stall_after)
        m.signal, m.assessment, m.polled_at = signal, a, now
        if a.state in (WatchState.CURRENT, WatchState.WAITING):
            m.current_at = now
            return None
        if a.state is not WatchState.PENDING:
            return None
        if m.changed_at is None:
            m.changed_at = now
        assert a.token is not None
        if a.token == m.fired_token and m.fired_at is not None and now - m.fired_at < self.stall_after:
            return None  # fired already: the run it started (or queued) covers it
        return self._fire(t, m, a.token, a.reason, signal, now)

    def _fire(self, t: WatchTarget, m: _Memory, token: str, reason: str, signal: str | None, now: datetime) -> Decision:
        again = token == m.fired_token
        m.fired_token, m.fired_at = token, now
        (log.warning if again else log.info)(
            "watch of table %s (%s, connection %s): %s; %s the load",
            t.table,
            t.source,
            self.conn_id,
            reason,
            "nothing recorded progress, starting again" if again else "starting",
        )
        payload = {
            "table": t.table,
            "target": t.target,
            "source": t.source,
            "reason": reason,
            "token": token,
            "signal": signal,
            "seen_at": now.isoformat(),
        }
        return Decision(fire=True, payload=payload)

    def _failed(self, t: WatchTarget, why: str, now: datetime) -> Decision | None:
        m = self._mem(t)
        m.failures += 1
        m.failing_since = m.failing_since or now
        m.error = why
        wait = min(self.poll_interval * 2 ** (m.failures - 1), self.backoff_cap)
        m.next_attempt = now + wait
        log.warning(
            "watch of table %s (%s, connection %s): cannot read its change signal (%d in a row, since %s): %s; "
            "next try in %s",
            t.table,
            t.source,
            self.conn_id,
            m.failures,
            m.failing_since.isoformat(),
            why,
            format_duration(wait),
        )
        if m.failures >= ALERT_AFTER and (m.alerted_at is None or now - m.alerted_at >= ALERT_REPEAT):
            m.alerted_at = now
            self._alert(t, m, why)
        if not m.first_run_checked:
            # A table no run has recorded yet needs its first run whatever the poll says (a stream the run
            # creates, say); the run then loads, or fails and alerts with its own error.
            m.first_run_checked = True
            if read_watch(t.target, self.variables) is None:
                return self._fire(t, m, "first:unread", f"no run has loaded it yet (its signal: {why})", None, now)
        return None

    def _alert(self, t: WatchTarget, m: _Memory, why: str) -> None:
        details = {
            "source": t.source,
            "connection": self.conn_id,
            "failed polls in a row": m.failures,
            "failing since": _iso(m.failing_since),
            "last proven current": _iso(m.current_at) or "-",
        }
        if self.alert is None:
            log.error("watch of table %s: %s (%s)", t.table, why, details)
            return
        try:
            self.alert(table=t.table, dag_id=t.dag_id, alerts_config=t.alerts, error=why, details=details)
        except Exception:  # an alert that cannot be sent must not stop the poll
            log.exception("watch of table %s: the watch_failure alert could not be sent", t.table)

    # -- the poll record ------------------------------------------------------------------------

    def _entry(self, t: WatchTarget, now: datetime) -> PollEntry:
        m = self._mem(t)
        a = m.assessment
        rec = m.record
        return PollEntry(
            table=t.table,
            dag_id=t.dag_id,
            state=WatchState.FAILING if m.failures else (a.state if a is not None else WatchState.PENDING),
            updated_at=now.isoformat(),
            polled_at=_iso(m.polled_at),
            current_at=_iso(m.current_at),
            changed_at=_iso(m.changed_at),
            reason=m.error if m.failures else (a.reason if a is not None else None),
            due=_iso(a.due) if a is not None else None,
            run_id=rec.run_id if rec is not None else None,
            watermark=rec.watermark if rec is not None else None,
            snapshot_id=rec.snapshot_id if rec is not None else None,
            error=m.error,
            failing_since=_iso(m.failing_since),
        )

    def _record(self, targets: Sequence[WatchTarget], now: datetime) -> None:
        """Write the poll record when a table's status changed, else at most every ``proof_every``."""
        polled = [(t, m) for t in targets if (m := self._mem(t)).polled_at or m.failures]
        status = {t.dag_id: _status(m) for t, m in polled}
        slas = [t.freshness_sla / 4 for t in targets if t.freshness_sla is not None]
        every = max(min([self.proof_every, *slas]), self.poll_interval)
        stale = self.last_written is None or now - self.last_written >= every
        if not polled or (status == self.written and not stale):
            return
        entries = {t.target: self._entry(t, now) for t, _ in polled}
        try:
            write_poll_record(self.conn_id, entries, self.variables, now=now)
        except Exception:  # noqa: BLE001 - the poll goes on; the record is written on the next occasion
            log.exception("watch of connection %s: cannot write its poll record", self.conn_id)
            return
        self.last_written, self.written = now, status

    # -- memory ---------------------------------------------------------------------------------

    def _mem(self, t: WatchTarget) -> _Memory:
        m = self.memory.get(t.dag_id)
        if m is None:
            m = self.memory[t.dag_id] = _Memory()
        return m

    def _source(self, t: WatchTarget) -> WatchedSource:
        m = self._mem(t)
        if m.source is None:
            m.source = t.watched()
        return m.source

    def _forget_all_but(self, targets: Sequence[WatchTarget]) -> None:
        keep = {t.dag_id for t in targets}
        for gone in set(self.memory) - keep:
            del self.memory[gone]

    def _seed(self, targets: Sequence[WatchTarget]) -> None:
        """Once: the last change seen of each table, from the poll record (for the UI; decisions never read it)."""
        if self._seeded:
            return
        self._seeded = True
        try:
            known = read_poll_record(self.conn_id, self.variables)
        except Exception:  # noqa: BLE001 - a display value; the poll does not need it
            log.warning("watch of connection %s: cannot read its poll record", self.conn_id, exc_info=True)
            return
        for t in targets:
            entry = known.get(t.target)
            if entry is not None and entry.changed_at:
                self._mem(t).changed_at = datetime.fromisoformat(entry.changed_at)

    def close(self) -> None:
        """Close the Snowflake connection (the next poll opens another); waits for a poll under way."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a broken connection may not close cleanly
                log.debug("closing the watch connection failed", exc_info=True)
