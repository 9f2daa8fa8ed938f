"""What a watched table's runs recorded about its source, and whether a change waits for a run.

The triggerer polls each watched source's change signal (``snowberg.snowflake.change_signal``);
whether a signal means "start the load" is decided here (``assess``) from what the table's runs
recorded, never from the trigger's memory: a triggerer restart, or a trigger moved to another
triggerer, loses no change (docs/event-driven.md).

Two records, both Airflow Variables (readable from the triggerer, any task and the UI, like the
watermark mirror and the freshness proof of ``snowberg.iceberg.current``):

``snowberg__<namespace>__<table>__watch`` (``WatchRecord``), written by the table's runs:

* ``running`` when a run has read the source's signal and fixed what it loads (the plan, before its
  query; a stream run once its consume committed): the signal it saw;
* ``done`` when that run's rows are in the lake (publish after the commit; an idle plan; a stream
  cleanup): the signal it covered, the lake's watermark, and ``due`` when rows lay beyond its window
  (``commit_lag``, a writer's clock ahead of ``cursor.timezone``, today's rows of a DATE cursor): the
  instant from which a run covers them.

A busy run writes it twice, an idle run once, a poll never. A slower run never moves it back
(``record_watch``).

``snowberg__watch__<connection id>`` (``PollEntry`` per table), written by the triggerer: when each
watched table of the connection was last polled, last found current, its last change seen, whether a
change waits, its poll failures. One Variable per connection, merged per table and written at most
every ``PROOF_EVERY`` unless a table's status changes: a quiet watched table costs no write of its
own. The freshness check counts its "found current" (``poll_proof``), and the UI shows it
(``watch_status``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from snowberg.config.check_settings import FreshnessMeasure
from snowberg.config.table_config import TableConfig
from snowberg.core.durations import format_duration
from snowberg.core.identifiers import IcebergName
from snowberg.iceberg.current import CurrentProof, proof_for
from snowberg.iceberg.state import VariableStore
from snowberg.snowflake.change_signal import SignalKind

log = logging.getLogger(__name__)

# The poll record is written at least this often while nothing changes (a quiet table's proof of currency).
PROOF_EVERY = timedelta(minutes=5)
# A table whose poll entry has not been written for this long left the triggerer (unwatched, dropped): pruned.
FORGET_AFTER = timedelta(days=7)


class RunPhase(StrEnum):
    """Where the run that last observed the source is."""

    RUNNING = "running"  # it read the signal and fixed what it loads; its rows are not in the lake yet
    DONE = "done"  # its rows are in the lake (or there were none)


class WatchState(StrEnum):
    """A watched table as the triggerer sees it."""

    CURRENT = "current"  # the lake holds what the source holds (up to the window's lag)
    WAITING = "waiting"  # rows lie beyond the last run's window; a run covers them from ``due`` on
    LOADING = "loading"  # a run is loading the last change
    PENDING = "pending"  # a change no run covers: the load must run
    FAILING = "failing"  # the source's signal cannot be read


@dataclass(frozen=True, kw_only=True)
class WatchRecord:
    """The run that last observed a watched source (see the module doc)."""

    phase: RunPhase
    signal: str | None  # the source's signal when the run read it (None: not read, e.g. a stream run)
    observed_at: str  # ISO 8601 with a zone: when the run read the source; orders the records
    run_id: str
    dag_id: str
    due: str | None = None  # ISO 8601: rows beyond the window are covered by a run from then on
    watermark: str | None = None  # the lake's watermark after the run (done)
    snapshot_id: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "phase", RunPhase(self.phase))

    @property
    def observed(self) -> datetime:
        return datetime.fromisoformat(self.observed_at)

    @property
    def due_at(self) -> datetime | None:
        return datetime.fromisoformat(self.due) if self.due else None


def record_key(target: str) -> str:
    """The Variable of Iceberg table ``target``'s watch record."""
    return IcebergName.parse(target).variable_key("watch")


def read_watch(target: str, variables: VariableStore) -> WatchRecord | None:
    """The recorded ``WatchRecord`` of ``target``; None when there is none or it cannot be read (logged)."""
    key = record_key(target)
    raw = variables.get(key)
    if not raw:
        return None
    try:
        rec = WatchRecord(**json.loads(raw))
        rec.observed  # noqa: B018 - parses observed_at: a broken value is refused here
        rec.due_at  # noqa: B018
    except (TypeError, ValueError) as exc:
        log.warning("Variable %s does not hold a watch record (%s): ignored", key, exc)
        return None
    return rec


def record_watch(target: str, rec: WatchRecord, variables: VariableStore) -> None:
    """Record ``rec`` unless the Variable holds a later observation (a slower run must not move it back)."""
    key = record_key(target)
    earlier = read_watch(target, variables)
    if earlier is not None and earlier.observed > rec.observed:
        log.info("%s already records run %s, which observed the source later: kept", key, earlier.run_id)
        return
    variables.set(key, json.dumps(asdict(rec), sort_keys=True))
    log.info("%s: run %s %s (signal %s%s)", key, rec.run_id, rec.phase.value, rec.signal, _due_text(rec.due))


def record_run(
    target: str,
    variables: VariableStore,
    *,
    phase: RunPhase,
    run_id: str,
    dag_id: str,
    observed_at: str,
    signal: str | None,
    due: str | None = None,
    watermark: str | None = None,
    snapshot_id: int | None = None,
) -> None:
    """A run has read the source (``signal`` at ``observed_at``): record it ``running`` until its rows are in the
    lake (``finish_run``), or ``done`` at once when it found nothing to load (with the lake's watermark)."""
    rec = WatchRecord(
        phase=phase,
        signal=signal,
        observed_at=observed_at,
        run_id=run_id,
        dag_id=dag_id,
        due=due,
        watermark=watermark,
        snapshot_id=snapshot_id,
    )
    record_watch(target, rec, variables)


def finish_run(
    target: str, variables: VariableStore, *, run_id: str, watermark: str | None, snapshot_id: int | None
) -> bool:
    """Run ``run_id``'s rows are in the lake: turn its ``running`` record ``done``; False when it is not the record.

    Another run's record (a later observation) is left as it is: that run finishes it.
    """
    rec = read_watch(target, variables)
    if rec is None or rec.run_id != run_id:
        log.info("%s: the watch record is not run %s's: left as it is", record_key(target), run_id)
        return False
    if rec.phase is not RunPhase.DONE:
        done = replace(rec, phase=RunPhase.DONE, watermark=watermark, snapshot_id=snapshot_id)
        record_watch(target, done, variables)
    return True


def _due_text(due: str | None) -> str:
    return f", rows beyond the window due {due}" if due else ""


@dataclass(frozen=True, kw_only=True)
class Assessment:
    """What a poll makes of a table: its state, why, and for ``PENDING`` the token of the change to run for.

    Two polls that find the same change give the same ``token``: the trigger fires once per token.
    """

    state: WatchState
    reason: str
    token: str | None = None
    due: datetime | None = None


def assess(
    kind: SignalKind, signal: str, record: WatchRecord | None, *, now: datetime, stall_after: timedelta
) -> Assessment:
    """Does ``signal`` (the source now) wait for a run, given the table's ``record``?

    A table (token) is pending when its token differs from the one the last run saw, or when rows
    beyond that run's window have become due; a stream when it holds change data that no running run
    consumed. A run that began more than ``stall_after`` ago and recorded nothing since (failed,
    killed, stuck) leaves its change pending again.
    """
    if record is None:
        return Assessment(
            state=WatchState.PENDING,
            reason="no run has recorded what it loaded of this source yet",
            token=f"first:{signal}",
        )
    if record.phase is RunPhase.RUNNING and now - record.observed > stall_after:
        return Assessment(
            state=WatchState.PENDING,
            reason=f"run {record.run_id} began at {record.observed_at} and has not finished "
            f"(after {format_duration(stall_after)}): failed, killed or stuck",
            token=f"stalled:{record.run_id}",
        )
    if kind is SignalKind.STREAM:
        if signal == "true":
            return Assessment(
                state=WatchState.PENDING,
                reason="the stream holds change data",
                token=f"data:{record.run_id}:{record.phase.value}",
            )
    elif signal != record.signal:
        return Assessment(
            state=WatchState.PENDING,
            reason=f"the source changed since run {record.run_id} read it (change token {record.signal} → {signal})",
            token=f"change:{signal}",
        )
    if record.phase is RunPhase.RUNNING:
        return Assessment(state=WatchState.LOADING, reason=f"run {record.run_id} is loading the last change")
    due = record.due_at
    if due is not None and now >= due:
        return Assessment(
            state=WatchState.PENDING,
            reason=f"rows beyond run {record.run_id}'s window are due since {record.due}",
            token=f"due:{record.run_id}",
        )
    if due is not None:
        return Assessment(
            state=WatchState.WAITING,
            reason=f"rows beyond run {record.run_id}'s window are due at {record.due}",
            due=due,
        )
    return Assessment(state=WatchState.CURRENT, reason=f"unchanged since run {record.run_id}")


@dataclass(frozen=True, kw_only=True)
class PollEntry:
    """One table in the triggerer's poll record (see the module doc); times are ISO 8601 with a zone."""

    table: str  # the config's name
    dag_id: str
    state: WatchState
    updated_at: str  # when this entry was written: the newer of two entries wins a merge
    polled_at: str | None = None  # the last poll that read its signal
    current_at: str | None = None  # the last poll that found the lake current
    changed_at: str | None = None  # when the last change was first seen
    reason: str | None = None
    due: str | None = None
    run_id: str | None = None  # the run whose record the last assessment rests on
    watermark: str | None = None  # that record's lake watermark (a proof only holds for it)
    snapshot_id: int | None = None
    error: str | None = None  # the last poll failure
    failing_since: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", WatchState(self.state))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PollEntry:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        # By hand, not ``asdict``: a poll record of a thousand tables is written whole (asdict deep-copies).
        d = {f: getattr(self, f) for f in _POLL_ENTRY_FIELDS}
        d["state"] = self.state.value
        return d


_POLL_ENTRY_FIELDS = tuple(f.name for f in fields(PollEntry))


def poll_record_key(snowflake_conn_id: str) -> str:
    """The Variable of the triggerer's poll record for the watched tables of one Snowflake connection."""
    return f"snowberg__watch__{snowflake_conn_id}"


def _poll_tables(snowflake_conn_id: str, variables: VariableStore) -> dict[str, dict[str, Any]]:
    """The raw entries of a connection's poll record, by target (entries that are no mapping are dropped)."""
    key = poll_record_key(snowflake_conn_id)
    raw = variables.get(key)
    if not raw:
        return {}
    try:
        tables = json.loads(raw)["tables"]
        return {str(t): e for t, e in tables.items() if isinstance(e, dict)}
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        log.warning("Variable %s does not hold a poll record (%s): ignored", key, exc)
        return {}


def read_poll_record(snowflake_conn_id: str, variables: VariableStore) -> dict[str, PollEntry]:
    """The poll record of a connection, by Iceberg target; empty when there is none or it cannot be read."""
    out = {}
    for target, e in _poll_tables(snowflake_conn_id, variables).items():
        try:
            out[target] = PollEntry.from_dict(e)
        except (TypeError, ValueError) as exc:
            log.warning(
                "poll record of %s: the entry of %s cannot be read (%s): ignored", snowflake_conn_id, target, exc
            )
    return out


def _written_at(entry: Mapping[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(entry.get("updated_at")))
    except ValueError:
        return None


def write_poll_record(
    snowflake_conn_id: str, entries: Mapping[str, PollEntry], variables: VariableStore, *, now: datetime
) -> None:
    """Merge ``entries`` (by target) into the connection's poll record and write it.

    Per table the newer entry wins, so two triggerers polling different tables of one connection (or a
    moved trigger) never erase each other; an entry not written for ``FORGET_AFTER`` is dropped. A write
    lost to a concurrent one only makes a proof older: never a proof that did not happen. The other
    entries are carried as they were read (not rebuilt), so a write costs one JSON read and one dump.
    """
    merged = _poll_tables(snowflake_conn_id, variables)
    for target, entry in entries.items():
        old_at = _written_at(merged[target]) if target in merged else None
        if old_at is None or old_at <= datetime.fromisoformat(entry.updated_at):
            merged[target] = entry.to_dict()
    kept = {t: e for t, e in merged.items() if (at := _written_at(e)) is not None and now - at <= FORGET_AFTER}
    payload = {"updated_at": now.isoformat(), "tables": dict(sorted(kept.items()))}
    variables.set(poll_record_key(snowflake_conn_id), json.dumps(payload, sort_keys=True))


def poll_proof(target: str, snowflake_conn_id: str, variables: VariableStore) -> CurrentProof | None:
    """The triggerer's last proof that ``target``'s lake was current (a poll found it unchanged), if any.

    It holds for the watermark of the run record it rests on (``CurrentProof.holds_for``): a table
    rolled back since is not proven by it.
    """
    entry = read_poll_record(snowflake_conn_id, variables).get(target)
    if entry is None or entry.current_at is None:
        return None
    return CurrentProof(
        proven_at=entry.current_at,
        run_id=f"watch poll of {snowflake_conn_id}" + (f" on run {entry.run_id}" if entry.run_id else ""),
        dag_id=entry.dag_id,
        watermark=entry.watermark,
        snapshot_id=entry.snapshot_id,
    )


def freshness_proof(
    target: str, measure: FreshnessMeasure | str, variables: VariableStore, *, watch_conn_id: str | None = None
) -> CurrentProof | None:
    """What freshness ``measure`` ages from: the later of the runs' proof (``proof_for``) and, for a table
    watched through ``watch_conn_id``, the triggerer's (``poll_proof``): a quiet watched table is proven
    current by its polls, with no run at all.

    A poll record that cannot be read counts as no proof (logged): an alert too many, never one too few.
    """
    proof = proof_for(target, measure, variables)
    if watch_conn_id is None or FreshnessMeasure(measure) is not FreshnessMeasure.PROVEN_CURRENT:
        return proof
    try:
        polled = poll_proof(target, watch_conn_id, variables)
    except Exception as exc:  # noqa: BLE001 - as proof_for: any failure of the read falls back
        log.warning("cannot read the watch poll record of %s (%s: %s)", watch_conn_id, type(exc).__name__, exc)
        return proof
    found = [p for p in (proof, polled) if p is not None]
    return max(found, key=lambda p: p.instant) if found else None


@dataclass(frozen=True, kw_only=True)
class WatchStatus:
    """A table's watch as the UI shows it: how it is started, the last poll, the last change, a pending change.

    ``pending`` is true while a change seen by the triggerer is not in the lake yet (a run is due, is
    loading it, or rows wait beyond the last window); ``failing`` while its poll fails (``error``).
    """

    watched: bool
    mode: str  # "watch: poll every 1m, a run at least every 1d" or "schedule @hourly"
    poll_interval_s: float | None = None
    max_interval_s: float | None = None
    last_poll: str | None = None
    last_change_seen: str | None = None
    pending: bool = False
    state: str | None = None
    reason: str | None = None
    error: str | None = None
    failing_since: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def watch_mode(cfg: TableConfig) -> str:
    """How the table's load DAG is started, in words."""
    if cfg.watch is None:
        return f"schedule {cfg.schedule}" if cfg.schedule else "manual runs only"
    every = format_duration(cfg.watch.poll_interval)
    if cfg.watch.max_interval is None:
        return f"watch: poll every {every}, runs only on changes"
    return f"watch: poll every {every}, a run at least every {format_duration(cfg.watch.max_interval)}"


def watch_status(cfg: TableConfig, variables: VariableStore) -> WatchStatus:
    """The table's watch status from the triggerer's poll record (one Variable read per connection).

    For the UI page: it reads nothing but the poll record of the table's Snowflake connection, so a
    page of many tables costs one read per connection with a caching ``variables``.
    """
    if cfg.watch is None:
        return WatchStatus(watched=False, mode=watch_mode(cfg))
    entry = read_poll_record(cfg.snowflake_conn_id, variables).get(cfg.target)
    base = WatchStatus(
        watched=True,
        mode=watch_mode(cfg),
        poll_interval_s=cfg.watch.poll_interval.total_seconds(),
        max_interval_s=cfg.watch.max_interval.total_seconds() if cfg.watch.max_interval else None,
    )
    if entry is None:
        return replace(base, reason="not polled yet (is the triggerer running and the DAG unpaused?)")
    return replace(
        base,
        last_poll=entry.polled_at,
        last_change_seen=entry.changed_at,
        pending=entry.state in (WatchState.PENDING, WatchState.LOADING, WatchState.WAITING),
        state=entry.state.value,
        reason=entry.reason,
        error=entry.error,
        failing_since=entry.failing_since,
    )
