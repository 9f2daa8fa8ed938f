"""Snapshot freshness from Iceberg metadata alone.

Reads the table metadata (the snapshot log and summaries) and nothing else:
no manifest, no data file. Two measures:

* **hours since the last write** — the age of the newest snapshot on the main
  branch that changed data (``append``, ``overwrite``, ``delete``; a
  ``replace`` is compaction and brings no new rows);
* **watermark lag** — now minus the watermark snowberg committed in the
  snapshot summary (``snowberg.iceberg.state.read_state``), for timestamp and date
  cursors. It says how far behind the source the lake is, even when loads
  keep committing.

A table is stale when the age exceeds the SLA, when the watermark lag
exceeds its limit, when it has no snapshot at all, or when it does not exist.

Which age the SLA limits is the table's ``freshness_measure``:
``proven_current`` (the default) ages from the later of the last data
snapshot and the last run that proved the lake current without committing
(an idle run, ``snowberg.iceberg.current``), so a quiet source stays fresh
while a pipeline that stops running goes stale; ``last_data`` ages from the
last data snapshot alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from snowberg.config.check_settings import FreshnessMeasure
from snowberg.core.cursor import CURSOR_KINDS, CursorKind
from snowberg.core.durations import format_duration
from snowberg.iceberg import state
from snowberg.iceberg.current import CurrentProof

if TYPE_CHECKING:
    from pyiceberg.table import Table

DATA_OPERATIONS = ("append", "overwrite", "delete")


@dataclass(frozen=True, kw_only=True)
class Freshness:
    table: str
    checked_at: str
    exists: bool
    current_snapshot_id: int | None = None
    last_write_snapshot_id: int | None = None
    last_write_operation: str | None = None
    last_write_at: str | None = None
    hours_since_last_write: float | None = None
    watermark: str | None = None
    cursor_kind: str | None = None
    watermark_snapshot_id: int | None = None
    watermark_committed_at: str | None = None
    watermark_run_id: str | None = None
    watermark_lag_hours: float | None = None
    sla: str | None = None
    sla_hours: float | None = None
    max_watermark_lag: str | None = None
    max_watermark_lag_hours: float | None = None
    measure: str = FreshnessMeasure.LAST_DATA.value
    proven_current_at: str | None = None  # when a run last proved the lake current (commit or idle run)
    proven_by_run: str | None = None
    hours_since_proven_current: float | None = None
    fresh: bool = True
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Freshness:
        return cls(**d)

    @property
    def observed(self) -> str:
        """One line: what the check saw."""
        if not self.exists:
            return "table does not exist"
        if self.last_write_at is None:
            return "no data snapshot"
        parts = [f"last write {self.last_write_at} ({self.hours_since_last_write:.2f} h ago)"]
        if self.measure == FreshnessMeasure.PROVEN_CURRENT and self.proven_current_at is not None:
            parts.append(
                f"lake proven current {self.proven_current_at} ({self.hours_since_proven_current:.2f} h ago, "
                f"run {self.proven_by_run})"
            )
        if self.watermark is not None:
            lag = f", lag {self.watermark_lag_hours:.2f} h" if self.watermark_lag_hours is not None else ""
            parts.append(f"watermark {self.watermark}{lag}")
        return "; ".join(parts)

    @property
    def expected(self) -> str:
        parts = []
        if self.sla is not None and self.measure == FreshnessMeasure.PROVEN_CURRENT:
            parts.append(f"a run proving the lake current within {self.sla}")
        elif self.sla is not None:
            parts.append(f"a write within {self.sla}")
        if self.max_watermark_lag is not None:
            parts.append(f"watermark lag within {self.max_watermark_lag}")
        return " and ".join(parts) or "a data snapshot"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def _hours(td: timedelta) -> float:
    return round(td.total_seconds() / 3600, 4)


def _operation(snap: Any) -> str | None:
    summary = getattr(snap, "summary", None)
    op = getattr(summary, "operation", None)
    return getattr(op, "value", op) if op is not None else None


def last_data_snapshot(table: Table) -> Any | None:
    """The newest complete commit on main that changed data (skips ``replace`` and partial snapshots)."""
    for snap in state.commits(table):
        op = _operation(snap)
        if op is None or op in DATA_OPERATIONS:
            return snap
    return None


def watermark_time(kind: str | None, watermark: str | None, cursor_timezone: str = "UTC") -> datetime | None:
    """The watermark as an aware UTC datetime, for time-like cursors (else None).

    TIMESTAMP_NTZ and DATE watermarks are wall-clock values of the table's
    ``cursor.timezone``: read in UTC, a Los Angeles watermark would look
    7-8 hours staler than it is.
    """
    if not watermark or kind not in CURSOR_KINDS:
        return None
    return CursorKind(kind).as_instant(watermark, ZoneInfo(cursor_timezone))


def evaluate(
    table: Table | None,
    *,
    name: str,
    sla: timedelta | None = None,
    max_watermark_lag: timedelta | None = None,
    now: datetime | None = None,
    cursor_timezone: str = "UTC",
    measure: FreshnessMeasure | str = FreshnessMeasure.LAST_DATA,
    proof: CurrentProof | None = None,
) -> Freshness:
    """Measure ``table`` (already loaded; ``None`` when it does not exist).

    ``measure``: what ``sla`` limits (``FreshnessMeasure``). ``proof``: the
    last run's record that the lake was current (``snowberg.iceberg.current``),
    read by the caller: with ``proven_current`` the age runs from the later of
    it and the last data snapshot. A proof made on another watermark than the
    table's (a rollback since, say) does not count.
    """
    now = now or datetime.now(UTC)
    measure = FreshnessMeasure(measure)
    limits: dict[str, Any] = {
        "measure": measure.value,
        "sla": format_duration(sla) if sla is not None else None,
        "sla_hours": _hours(sla) if sla is not None else None,
        "max_watermark_lag": format_duration(max_watermark_lag) if max_watermark_lag is not None else None,
        "max_watermark_lag_hours": _hours(max_watermark_lag) if max_watermark_lag is not None else None,
    }
    checked_at = now.isoformat(timespec="seconds")
    if table is None:
        return Freshness(
            table=name,
            checked_at=checked_at,
            exists=False,
            fresh=False,
            reasons=[f"table {name} does not exist"],
            **limits,
        )

    reasons: list[str] = []
    current = table.current_snapshot()
    snap = last_data_snapshot(table)
    st = state.read_state(table)
    out: dict[str, Any] = {"current_snapshot_id": current.snapshot_id if current else None}
    if snap is None:
        reasons.append(f"table {name} has no data snapshot: nothing was ever written")
    else:
        written = datetime.fromtimestamp(snap.timestamp_ms / 1000, tz=UTC)
        age = now - written
        out.update(
            last_write_snapshot_id=snap.snapshot_id,
            last_write_operation=_operation(snap),
            last_write_at=_iso(snap.timestamp_ms),
            hours_since_last_write=_hours(age),
        )
        if measure is FreshnessMeasure.PROVEN_CURRENT:
            by: str | None
            if proof is not None and proof.holds_for(st) and proof.instant > written:
                proven, by = proof.instant, proof.run_id
            else:
                proven, by = written, (st.run_id if st is not None else None)
            proven_age = now - proven
            out.update(
                proven_current_at=proven.astimezone(UTC).isoformat(timespec="seconds"),
                proven_by_run=by,
                hours_since_proven_current=_hours(proven_age),
            )
            if sla is not None and proven_age > sla:
                reasons.append(
                    f"no run has proven the lake current since {out['proven_current_at']} (run {by}): "
                    f"{_hours(proven_age):.2f} h ago, over the SLA of {format_duration(sla)}; last write "
                    f"{_iso(snap.timestamp_ms)}. Is the load DAG paused, failing or stuck?"
                )
        elif sla is not None and age > sla:
            reasons.append(
                f"last write {_iso(snap.timestamp_ms)} is {_hours(age):.2f} h old, "
                f"over the SLA of {format_duration(sla)}"
            )

    if st is not None:
        out.update(
            watermark=st.watermark,
            cursor_kind=st.cursor_kind,
            watermark_snapshot_id=st.snapshot_id,
            watermark_committed_at=_iso(st.timestamp_ms),
            watermark_run_id=st.run_id,
        )
        try:
            wt = watermark_time(st.cursor_kind, st.watermark, cursor_timezone)
        except ValueError as exc:
            wt = None
            reasons.append(f"watermark {st.watermark!r} ({st.cursor_kind}) cannot be read: {exc}")
        if wt is not None:
            lag = now - wt
            out["watermark_lag_hours"] = _hours(lag)
            if max_watermark_lag is not None and lag > max_watermark_lag:
                reasons.append(
                    f"watermark {st.watermark} lags {_hours(lag):.2f} h behind now, over the limit of "
                    f"{format_duration(max_watermark_lag)}"
                )
    elif max_watermark_lag is not None:
        reasons.append(
            f"table {name} has no snowberg watermark, so its lag cannot be within {format_duration(max_watermark_lag)}"
        )

    return Freshness(
        table=name, checked_at=checked_at, exists=True, fresh=not reasons, reasons=reasons, **out, **limits
    )


def render(f: Freshness) -> str:
    rows = [
        ("table", f.table),
        ("status", "FRESH" if f.fresh else "STALE"),
        ("current snapshot", f.current_snapshot_id),
        (
            "last write",
            f"{f.last_write_at} ({f.last_write_operation}, snapshot {f.last_write_snapshot_id})"
            if f.last_write_at
            else "-",
        ),
        ("hours since last write", f"{f.hours_since_last_write:.2f}" if f.hours_since_last_write is not None else "-"),
        ("measure", f.measure),
        (
            "proven current",
            f"{f.proven_current_at} ({f.hours_since_proven_current:.2f} h ago, run {f.proven_by_run})"
            if f.proven_current_at
            else "-",
        ),
        ("SLA", f.sla or "-"),
        ("watermark", f"{f.watermark} ({f.cursor_kind})" if f.watermark is not None else "-"),
        (
            "watermark committed",
            f"{f.watermark_committed_at} (snapshot {f.watermark_snapshot_id}, run {f.watermark_run_id})"
            if f.watermark_committed_at
            else "-",
        ),
        ("watermark lag (h)", f"{f.watermark_lag_hours:.2f}" if f.watermark_lag_hours is not None else "-"),
        ("max watermark lag", f.max_watermark_lag or "-"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"snapshot freshness of {f.table} (metadata only)"]
    lines += [f"  {k.ljust(width)}  {v if v is not None else '-'}" for k, v in rows]
    lines += [f"  ! {r}" for r in f.reasons]
    return "\n".join(lines)
