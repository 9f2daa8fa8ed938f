"""The invariants of watched loads (docs/event-driven.md), each with the real plan, load and publish on the emulator
and the triggerer's poll (``WatchLoop``) between them.

The source's change token comes from ``documented_snowflake`` (answers written from Snowflake's documentation:
the emulator has no ``SYSTEM$LAST_CHANGE_COMMIT_TIME``); every other statement goes to the emulator. A run is
what the load DAG's tasks do, in order: plan (which records what it saw), load, publish. An event the loop
fires is what the triggerer would hand Airflow; Airflow turns the events queued for a DAG into one run
(``AssetDagRunQueue``), which a test does by running once.

(a) no row stays behind; (b) nothing is loaded twice; (c) a restarted or moved trigger loses no change;
(d) a failing poll is logged, retried with backoff and alerts.
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowflake"))
from documented_snowflake import DocumentedSnowflake, TokensOver  # noqa: E402

from snowberg.airflow.watch_loop import ALERT_AFTER, WatchLoop, WatchTarget  # noqa: E402
from snowberg.config.table_config import TableConfig, parse_config  # noqa: E402
from snowberg.iceberg.gate import nothing_new  # noqa: E402
from snowberg.iceberg.watch_state import RunPhase, WatchState, read_poll_record, read_watch, record_run  # noqa: E402
from snowberg.load.extract import load_window  # noqa: E402
from snowberg.load.plan import plan_run  # noqa: E402
from snowberg.load.publish import publish, reconcile_before_plan, record_watched_plan  # noqa: E402
from snowberg.snowflake.change_signal import SignalKind  # noqa: E402

INTERVAL = timedelta(seconds=30)


class Clock:
    """The loop's clock: real time (or ``base``) plus what a test skips ahead."""

    def __init__(self, base: datetime | None = None) -> None:
        self.base = base
        self.ahead = timedelta(0)

    def __call__(self) -> datetime:
        return (self.base or datetime.now(UTC)) + self.ahead


class Watched:
    """One watched table: its source on the emulator (change token from the documented double), lake, Variables."""

    def __init__(self, sfdb: Any, catalog: Any, variables: Any, **over: Any) -> None:
        self.sfdb, self.catalog, self.variables = sfdb, catalog, variables
        self.src = sfdb.table("SRC")
        sfdb.sql(f"CREATE TABLE {self.src} (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
        self.account = DocumentedSnowflake()
        self.account.table(self.src)
        entry = {
            "name": "orders",
            "source": {"table": self.src},
            "target": "ns.orders",
            "cursor": {"column": "updated_at"},
            "primary_key": ["id"],
            "snowflake_conn_id": "sf",
            "watch": {"poll_interval": "30s"},
            **over,
        }
        self.cfg: TableConfig = parse_config({"tables": [entry]}).tables[0]
        self.conn = TokensOver(sfdb.conn, self.account)
        self.clock = Clock()
        self.alerts: list[dict[str, Any]] = []
        self.next_id = 1
        self.runs = 0

    def target(self) -> WatchTarget:
        return WatchTarget(
            dag_id=self.cfg.dag_id,
            table=self.cfg.name,
            target=self.cfg.target,
            kind=SignalKind.TABLE,
            source=self.src,
        )

    def loop(self) -> WatchLoop:
        """A triggerer's loop with nothing in memory (a new one: a restart, or the trigger moved)."""
        return WatchLoop(
            snowflake_conn_id="sf",
            poll_interval=INTERVAL,
            variables=self.variables,
            connect=self.account.connect,
            alert=lambda **kw: self.alerts.append(kw) or 1,
            now=self.clock,
        )

    def change(self, n: int = 1, at: datetime | None = None) -> None:
        """Insert ``n`` rows (cursor ``at``, else growing past instants) and move the change token as Snowflake does."""
        stamps = [at or datetime(2026, 1, 1) + timedelta(seconds=self.next_id + i) for i in range(n)]
        values = ", ".join(
            f"({self.next_id + i}, '{t:%Y-%m-%d %H:%M:%S.%f}'::TIMESTAMP_NTZ)" for i, t in enumerate(stamps)
        )
        self.sfdb.sql(f"INSERT INTO {self.src} VALUES {values}")
        self.next_id += n
        self.account.dml(self.src)

    def plan(self) -> Any:
        """The plan task: reconcile, plan (reading the token first), record what it saw."""
        self.runs += 1
        table, _ = reconcile_before_plan(self.cfg, self.catalog, self.variables)
        w = plan_run(self.cfg, self.conn, table, run_id=f"asset_triggered__{self.runs}", dag_id=self.cfg.dag_id)
        record_watched_plan(self.cfg.target, w, self.variables, idle=nothing_new(w))
        return w

    def finish(self, w: Any) -> None:
        """The load and publish tasks (an idle run skipped them)."""
        if nothing_new(w):
            return
        load_window(self.cfg, self.conn, self.catalog, w)
        publish(self.cfg, self.catalog, w, self.variables)

    def run(self) -> None:
        self.finish(self.plan())

    def lake_ids(self) -> list[int]:
        t = self.catalog.load_table(self.cfg.target)
        return sorted(int(r["id"]) for r in t.scan().to_arrow().to_pylist())

    def source_ids(self) -> list[int]:
        return sorted(int(r[0]) for r in self.sfdb.sql(f"SELECT ID FROM {self.src}"))


def fired(loop: WatchLoop, w: Watched) -> list[str]:
    """One poll: the tokens of the events it fired."""
    return [d.payload["token"] for d in loop.poll([w.target()]).values() if d.fire]


@pytest.fixture
def watched(sfdb: Any, catalog: Any, variables: Any) -> Watched:
    w = Watched(sfdb, catalog, variables)
    w.change(3)
    return w


# ---------------------------------------------------------------------------
# (a) No row stays behind


def test_a_seen_change_is_one_event_and_its_run_leaves_the_table_current(watched: Watched) -> None:
    loop = watched.loop()
    assert fired(loop, watched) == [f"first:{watched.account.token(watched.src)}"]  # never loaded: its first run
    watched.run()
    assert fired(loop, watched) == [] and loop.memory[watched.cfg.dag_id].assessment.state is WatchState.CURRENT

    watched.change(2)
    token = f"change:{watched.account.token(watched.src)}"
    assert fired(loop, watched) == [token]
    assert fired(loop, watched) == []  # the same change again: no second event before its run
    watched.run()
    assert fired(loop, watched) == []
    assert watched.lake_ids() == watched.source_ids() == [1, 2, 3, 4, 5]


def test_a_change_landing_while_a_run_runs_gets_another_run(watched: Watched) -> None:
    loop = watched.loop()
    assert fired(loop, watched)
    first = watched.plan()  # the run has read the token and fixed its window ...
    watched.change(2)  # ... when rows land
    assert fired(loop, watched) == [f"change:{watched.account.token(watched.src)}"]  # queued behind the run
    watched.finish(first)
    rec = read_watch(watched.cfg.target, watched.variables)
    assert rec is not None and rec.phase.value == "done" and rec.signal != watched.account.token(watched.src)
    assert fired(loop, watched) == []  # still pending, but its event is already queued: no second one
    assert loop.memory[watched.cfg.dag_id].assessment.state is WatchState.PENDING
    watched.run()  # the run Airflow starts for the queued event
    assert fired(loop, watched) == [] and loop.memory[watched.cfg.dag_id].assessment.state is WatchState.CURRENT
    assert watched.lake_ids() == watched.source_ids() == [1, 2, 3, 4, 5]


def test_a_row_beyond_the_window_keeps_the_table_pending_until_a_run_covers_it(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    w = Watched(sfdb, catalog, variables, cursor={"column": "updated_at", "commit_lag": "2s"})
    w.change(2)
    loop = w.loop()
    assert fired(loop, w) and (w.run() or True)
    # A row written now: within commit_lag, so beyond the next window's end.
    w.change(1, at=datetime.now(UTC).replace(tzinfo=None))
    assert fired(loop, w) == [f"change:{w.account.token(w.src)}"]
    w.run()
    assert w.lake_ids() == [1, 2]  # the new row waits beyond the window
    assert fired(loop, w) == [] and loop.memory[w.cfg.dag_id].assessment.state is WatchState.WAITING
    rec = read_watch(w.cfg.target, variables)
    assert rec is not None and rec.due is not None
    w.clock.ahead = datetime.fromisoformat(rec.due) - datetime.now(UTC)  # the loop's clock reaches the due time
    assert fired(loop, w) == [f"due:{rec.run_id}"]
    time.sleep(2.1)  # Snowflake's clock passes the lag too
    w.run()
    assert w.lake_ids() == w.source_ids() == [1, 2, 3]
    assert fired(loop, w) == [] and loop.memory[w.cfg.dag_id].assessment.state is WatchState.CURRENT


# ---------------------------------------------------------------------------
# (b) Nothing is loaded twice


def test_events_that_all_become_runs_still_load_each_row_once(watched: Watched) -> None:
    """Airflow coalesces the events queued for a DAG into one run; were each event its own run, the exactly-once
    gate (unchanged) makes the extra ones idle: no row twice, no snapshot."""
    loop = watched.loop()
    events = fired(loop, watched)
    watched.change(1)
    events += fired(loop, watched)
    assert len(events) == 2
    for _ in events:
        watched.run()
    snapshots = len(watched.catalog.load_table(watched.cfg.target).snapshots())
    watched.run()  # and one more for good measure
    assert len(watched.catalog.load_table(watched.cfg.target).snapshots()) == snapshots
    assert watched.lake_ids() == watched.source_ids() == [1, 2, 3, 4]


# ---------------------------------------------------------------------------
# (c) A triggerer restart, or a trigger moved to another triggerer, loses no change


def test_a_new_trigger_fires_for_a_change_the_old_one_saw_and_never_got_run(watched: Watched) -> None:
    first = watched.loop()
    assert fired(first, watched)
    watched.run()
    watched.change(2)
    assert fired(first, watched)  # the event is lost with the triggerer (killed before it was stored)
    del first
    moved = watched.loop()  # nothing in memory: what was loaded comes from the run records
    assert fired(moved, watched) == [f"change:{watched.account.token(watched.src)}"]
    watched.run()
    assert fired(moved, watched) == [] and watched.lake_ids() == watched.source_ids()
    # And a new trigger of a current table starts nothing.
    assert fired(watched.loop(), watched) == []


def test_a_run_that_began_and_never_finished_is_started_again_by_a_new_trigger(watched: Watched) -> None:
    assert fired(watched.loop(), watched)
    watched.plan()  # the run is killed after its plan: its record says running, its rows are not in the lake
    restarted = watched.loop()
    assert (
        fired(restarted, watched) == [] and restarted.memory[watched.cfg.dag_id].assessment.state is WatchState.LOADING
    )
    watched.clock.ahead = restarted.stall_after + timedelta(seconds=1)
    assert fired(restarted, watched) == [f"stalled:{read_watch(watched.cfg.target, watched.variables).run_id}"]
    watched.run()
    watched.clock.ahead = timedelta(0)
    assert fired(restarted, watched) == [] and watched.lake_ids() == watched.source_ids()


def test_a_run_that_failed_before_it_planned_gets_its_event_again_after_the_stall_time(watched: Watched) -> None:
    loop = watched.loop()
    [token] = fired(loop, watched)
    # Its run fails before the plan records anything (the lake unreachable, say): nothing shows progress.
    watched.clock.ahead = loop.stall_after - timedelta(seconds=1)
    assert fired(loop, watched) == []
    watched.clock.ahead = loop.stall_after + timedelta(seconds=1)
    assert fired(loop, watched) == [token]


# ---------------------------------------------------------------------------
# (d) A failing poll is logged with the table and the connection, retried with backoff, and alerts


def test_a_dropped_table_is_logged_retried_with_backoff_and_alerts_then_recovers(
    watched: Watched, caplog: pytest.LogCaptureFixture
) -> None:
    loop = watched.loop()
    assert fired(loop, watched)
    watched.run()
    assert fired(loop, watched) == []
    watched.account.hidden.add(watched.src.upper())  # dropped, or the grant revoked
    attempts = []
    with caplog.at_level(logging.WARNING, logger="snowberg.airflow.watch_loop"):
        for step in range(20):  # 20 poll intervals
            watched.clock.ahead = step * INTERVAL
            before = len(watched.account.statements)
            loop.poll([watched.target()])
            if len(watched.account.statements) > before:
                attempts.append(step)
    assert attempts == [0, 1, 3, 7, 15]  # retried after 1, 2, 4, 8 intervals: a doubling backoff
    assert "watch of table orders" in caplog.text and "connection sf" in caplog.text
    assert "does not exist or not authorized" in caplog.text
    assert len(watched.alerts) == 1 and watched.alerts[0]["table"] == "orders"  # on the 3rd failure, once
    assert watched.alerts[0]["details"]["failed polls in a row"] == ALERT_AFTER
    entry = read_poll_record("sf", watched.variables)[watched.cfg.target]
    assert entry.state is WatchState.FAILING and entry.error is not None and entry.failing_since is not None

    watched.account.hidden.clear()
    watched.clock.ahead = 31 * INTERVAL
    assert fired(loop, watched) == []
    entry = read_poll_record("sf", watched.variables)[watched.cfg.target]
    assert entry.state is WatchState.CURRENT and entry.error is None


def test_a_lost_network_fails_every_table_of_the_connection_and_the_next_poll_reconnects(watched: Watched) -> None:
    loop = watched.loop()
    assert fired(loop, watched)
    watched.run()
    watched.account.down = True
    assert fired(loop, watched) == []
    assert loop.conn is None and loop.memory[watched.cfg.dag_id].failures == 1
    watched.account.down = False
    watched.clock.ahead = INTERVAL
    assert fired(loop, watched) == [] and loop.memory[watched.cfg.dag_id].failures == 0
    assert watched.account.connections == 2


def test_a_table_no_run_loaded_yet_gets_its_first_run_even_if_its_signal_cannot_be_read(watched: Watched) -> None:
    """A stream the first run creates (``stream.create``), say: the run then loads, or fails with its own error."""
    watched.account.hidden.add(watched.src.upper())
    loop = watched.loop()
    assert fired(loop, watched) == ["first:unread"]
    watched.clock.ahead = INTERVAL
    assert fired(loop, watched) == []  # once


# ---------------------------------------------------------------------------
# The poll's own cost


@pytest.mark.parametrize("tables", [10, 1000])
def test_a_quiet_poll_reads_no_variable_and_sends_one_statement_per_database(tables: int, variables: Any) -> None:
    account = DocumentedSnowflake()
    targets = []
    for i in range(tables):
        src = f"DB{i % 2}.S.T{i}"
        account.table(src)
        targets.append(WatchTarget(dag_id=f"d{i}", table=f"t{i}", target=f"ns.t{i}", kind=SignalKind.TABLE, source=src))
    reads: list[str] = []

    class Counting(dict):  # type: ignore[type-arg]
        def get(self, key: str, default: Any = None) -> Any:
            reads.append(key)
            return super().get(key, default)

        def set(self, key: str, value: str) -> None:
            self[key] = value

    store = Counting()
    for t in targets:  # every table loaded up to its token now
        record_run(
            t.target,
            store,
            phase=RunPhase.DONE,
            run_id="r",
            dag_id=t.dag_id,
            observed_at="2026-12-01T00:00:00+00:00",
            signal=account.token(t.source),
            watermark=None,
            snapshot_id=None,
        )
    clock = Clock()
    loop = WatchLoop(
        snowflake_conn_id="sf", poll_interval=INTERVAL, variables=store, connect=account.connect, now=clock
    )
    assert loop.poll(targets) == {}  # the first poll reads every table's record once
    reads.clear()
    statements = len(account.statements)
    clock.ahead = INTERVAL
    loop.poll(targets)
    assert len(account.statements) - statements == 2  # two databases
    assert [k for k in reads if k.endswith("__watch")] == []  # no run record read for an unchanged table


@pytest.mark.parametrize(
    ("sla", "every"), [(None, timedelta(minutes=5)), (timedelta(minutes=2), timedelta(seconds=30))]
)
def test_the_poll_record_is_written_on_a_change_or_every_proof_interval_not_every_poll(
    variables: Any, sla: timedelta | None, every: timedelta
) -> None:
    """One write per connection per proof interval while nothing changes (5 minutes, or a quarter of the
    shortest freshness SLA of its tables): a quiet watched table costs no Variable write of its own."""
    account = DocumentedSnowflake()
    account.table("DB.S.T")
    target = WatchTarget(
        dag_id="d", table="t", target="ns.t", kind=SignalKind.TABLE, source="DB.S.T", freshness_sla=sla
    )
    record_run(
        "ns.t",
        variables,
        phase=RunPhase.DONE,
        run_id="r",
        dag_id="d",
        observed_at="2026-12-01T00:00:00+00:00",
        signal=account.token("DB.S.T"),
        watermark=None,
        snapshot_id=None,
    )
    writes: list[datetime] = []
    clock = Clock(base=datetime(2026, 12, 1, tzinfo=UTC))

    class Store(dict):  # type: ignore[type-arg]
        def set(self, key: str, value: str) -> None:
            if key.startswith("snowberg__watch__"):
                writes.append(clock())
            self[key] = value

    store = Store(variables)
    loop = WatchLoop(
        snowflake_conn_id="sf", poll_interval=timedelta(seconds=10), variables=store, connect=account.connect, now=clock
    )
    for step in range(60):  # ten minutes of polls every 10 s
        clock.ahead = step * timedelta(seconds=10)
        loop.poll([target])
    gaps = {b - a for a, b in zip(writes, writes[1:], strict=False)}
    assert gaps == {every}
    account.dml("DB.S.T")  # a change is written at once
    clock.ahead += timedelta(seconds=10)
    loop.poll([target])
    assert writes[-1] == clock()
    assert read_poll_record("sf", store)["ns.t"].state is WatchState.PENDING
