"""What a watched table's runs record, what a poll makes of a signal with it, and the triggerer's poll record."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from snowberg.config.table_config import TableConfig
from snowberg.iceberg.current import CurrentProof, record_proof
from snowberg.iceberg.watch_state import (
    FORGET_AFTER,
    PollEntry,
    RunPhase,
    WatchRecord,
    WatchState,
    assess,
    finish_run,
    freshness_proof,
    poll_proof,
    read_poll_record,
    read_watch,
    record_key,
    record_run,
    watch_status,
    write_poll_record,
)
from snowberg.snowflake.change_signal import SignalKind

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
STALL = timedelta(minutes=30)


def rec(
    phase: RunPhase, signal: str | None = "100", *, at: datetime = T0, run: str = "r1", due: str | None = None
) -> Any:
    return WatchRecord(phase=phase, signal=signal, observed_at=at.isoformat(), run_id=run, dag_id="d", due=due)


def table(now: datetime, signal: str, record: Any) -> Any:
    return assess(SignalKind.TABLE, signal, record, now=now, stall_after=STALL)


def test_a_table_no_run_recorded_is_pending() -> None:
    a = table(T0, "100", None)
    assert a.state is WatchState.PENDING and a.token == "first:100"


def test_a_token_other_than_the_runs_is_a_change_and_the_same_change_gives_the_same_token() -> None:
    done = rec(RunPhase.DONE)
    assert table(T0, "100", done).state is WatchState.CURRENT
    first, again = table(T0, "200", done), table(T0 + timedelta(minutes=1), "200", done)
    assert first.state is WatchState.PENDING and first.token == again.token == "change:200"
    assert table(T0, "300", done).token == "change:300"


def test_a_running_run_covers_the_token_it_saw_but_not_a_later_one() -> None:
    running = rec(RunPhase.RUNNING, "200")
    assert table(T0 + timedelta(minutes=5), "200", running).state is WatchState.LOADING
    later = table(T0 + timedelta(minutes=5), "300", running)
    assert later.state is WatchState.PENDING and later.token == "change:300"


def test_a_run_that_never_finished_leaves_its_change_pending_after_the_stall_time() -> None:
    running = rec(RunPhase.RUNNING, "200")
    assert table(T0 + STALL - timedelta(seconds=1), "200", running).state is WatchState.LOADING
    stalled = table(T0 + STALL + timedelta(seconds=1), "200", running)
    assert stalled.state is WatchState.PENDING and stalled.token == "stalled:r1"


def test_rows_beyond_the_window_wait_until_due_and_then_are_pending() -> None:
    due = T0 + timedelta(minutes=6)
    done = rec(RunPhase.DONE, due=due.isoformat())
    waiting = table(T0 + timedelta(minutes=1), "100", done)
    assert waiting.state is WatchState.WAITING and waiting.due == due
    now_due = table(due, "100", done)
    assert now_due.state is WatchState.PENDING and now_due.token == "due:r1"


def test_a_stream_is_pending_while_it_holds_data_once_per_run_record() -> None:
    done = rec(RunPhase.DONE, "false")
    assert assess(SignalKind.STREAM, "false", done, now=T0, stall_after=STALL).state is WatchState.CURRENT
    a = assess(SignalKind.STREAM, "true", done, now=T0, stall_after=STALL)
    assert a.state is WatchState.PENDING and a.token == "data:r1:done"
    # The next run consumed (its record says so); data after that is a new token: another run.
    running = rec(RunPhase.RUNNING, None, run="r2")
    assert assess(SignalKind.STREAM, "false", running, now=T0, stall_after=STALL).state is WatchState.LOADING
    b = assess(SignalKind.STREAM, "true", running, now=T0, stall_after=STALL)
    assert b.state is WatchState.PENDING and b.token != a.token


def test_runs_write_running_then_done_and_a_slower_run_never_moves_the_record_back(variables: Any) -> None:
    record_run(
        "ns.t", variables, phase=RunPhase.RUNNING, run_id="r1", dag_id="d", observed_at=T0.isoformat(), signal="100"
    )
    assert read_watch("ns.t", variables) == rec(RunPhase.RUNNING)
    # A later run starts before r1 finishes: r1's finish leaves the later record alone.
    later = (T0 + timedelta(minutes=1)).isoformat()
    record_run("ns.t", variables, phase=RunPhase.RUNNING, run_id="r2", dag_id="d", observed_at=later, signal="200")
    assert not finish_run("ns.t", variables, run_id="r1", watermark="w1", snapshot_id=1)
    assert finish_run("ns.t", variables, run_id="r2", watermark="w2", snapshot_id=2)
    done = read_watch("ns.t", variables)
    assert done is not None and (done.phase, done.signal, done.watermark) == (RunPhase.DONE, "200", "w2")
    # An idle run observed earlier than the record: kept out.
    record_run(
        "ns.t",
        variables,
        phase=RunPhase.DONE,
        run_id="r0",
        dag_id="d",
        observed_at=T0.isoformat(),
        signal="1",
        watermark=None,
        snapshot_id=None,
    )
    assert read_watch("ns.t", variables) == done
    assert record_key("ns.t") == "snowberg__ns__t__watch"


def test_a_broken_record_reads_as_none(variables: Any) -> None:
    variables.set(record_key("ns.t"), "{not json")
    assert read_watch("ns.t", variables) is None


def entry(at: datetime, **over: Any) -> PollEntry:
    return PollEntry(table="t", dag_id="snowberg_t", state=WatchState.CURRENT, updated_at=at.isoformat(), **over)


def test_the_poll_record_merges_per_table_the_newer_entry_wins_and_old_ones_are_forgotten(variables: Any) -> None:
    write_poll_record("sf", {"ns.a": entry(T0, current_at=T0.isoformat())}, variables, now=T0)
    # Another triggerer (or a moved trigger) writes other tables, and an older entry for ns.a: kept out.
    other = {"ns.b": entry(T0), "ns.a": entry(T0 - timedelta(minutes=1), current_at="old")}
    write_poll_record("sf", other, variables, now=T0)
    merged = read_poll_record("sf", variables)
    assert set(merged) == {"ns.a", "ns.b"} and merged["ns.a"].current_at == T0.isoformat()
    later = T0 + FORGET_AFTER + timedelta(seconds=1)
    write_poll_record("sf", {"ns.b": entry(later)}, variables, now=later)
    assert set(read_poll_record("sf", variables)) == {"ns.b"}
    assert json.loads(variables["snowberg__watch__sf"])["tables"]["ns.b"]["state"] == "current"
    assert read_poll_record("other", variables) == {}


def test_the_poll_proof_is_what_freshness_ages_from_when_it_is_later_than_the_runs(variables: Any) -> None:
    record_proof("ns.t", CurrentProof(proven_at=T0.isoformat(), run_id="r1", dag_id="d", watermark="w"), variables)
    polled = T0 + timedelta(hours=2)
    write_poll_record(
        "sf", {"ns.t": entry(polled, current_at=polled.isoformat(), watermark="w", run_id="r1")}, variables, now=polled
    )
    p = poll_proof("ns.t", "sf", variables)
    assert p is not None and p.instant == polled and p.watermark == "w"
    best = freshness_proof("ns.t", "proven_current", variables, watch_conn_id="sf")
    assert best is not None and best.instant == polled
    # Unwatched (no connection given) or measured by last data: the poll record does not count.
    only_runs = freshness_proof("ns.t", "proven_current", variables)
    assert only_runs is not None and only_runs.instant == T0
    assert freshness_proof("ns.t", "last_data", variables, watch_conn_id="sf") is None


def cfg(**over: Any) -> TableConfig:
    return TableConfig.model_validate(
        {"name": "t", "source": {"table": "DB.S.T"}, "target": "ns.t", "snowflake_conn_id": "sf", **over}
    )


@pytest.mark.parametrize(
    ("state", "pending"),
    [(WatchState.CURRENT, False), (WatchState.PENDING, True), (WatchState.LOADING, True), (WatchState.WAITING, True)],
)
def test_watch_status_shows_the_mode_the_last_poll_the_last_change_and_a_pending_change(
    variables: Any, state: WatchState, pending: bool
) -> None:
    changed = T0 - timedelta(minutes=3)
    e = PollEntry(
        table="t",
        dag_id="snowberg_t",
        state=state,
        updated_at=T0.isoformat(),
        polled_at=T0.isoformat(),
        changed_at=changed.isoformat(),
        reason="why",
    )
    write_poll_record("sf", {"ns.t": e}, variables, now=T0)
    s = watch_status(cfg(watch={"poll_interval": "30s"}), variables)
    assert s.watched and s.mode == "watch: poll every 30s, a run at least every 1d"
    assert (s.last_poll, s.last_change_seen, s.pending, s.state) == (
        T0.isoformat(),
        changed.isoformat(),
        pending,
        state.value,
    )
    assert s.poll_interval_s == 30.0 and s.max_interval_s == 86400.0


def test_watch_status_of_a_table_not_polled_yet_or_not_watched(variables: Any) -> None:
    s = watch_status(cfg(watch={"max_interval": None}), variables)
    assert s.watched and s.last_poll is None and not s.pending and "not polled yet" in (s.reason or "")
    assert s.mode == "watch: poll every 1m, runs only on changes"
    off = watch_status(cfg(), variables)
    assert not off.watched and off.mode == "schedule @hourly"


def test_watch_status_shows_a_failing_poll(variables: Any) -> None:
    e = entry(T0, error="Object does not exist", failing_since=T0.isoformat())
    write_poll_record("sf", {"ns.t": PollEntry.from_dict({**e.to_dict(), "state": "failing"})}, variables, now=T0)
    s = watch_status(cfg(watch=True), variables)
    assert s.state == "failing" and s.error == "Object does not exist" and s.failing_since == T0.isoformat()
