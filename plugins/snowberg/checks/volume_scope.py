"""What a volume check verifies: the whole table, or what changed since the last verified snapshot.

A full verification compares every row up to the watermark; its cost
follows the table. An incremental check compares only the cursor ranges that
changed since the last check that ran (the *verified record*):

* the range from the recorded watermark minus a late-arrival margin up to the
  current watermark — it holds every incremental window committed since;
* the window of every backfill committed since (``[low, high]``);
* the cursor range covered by the data files another engine's commit added
  or removed (from the manifests' column statistics);
* the days that differed at the last check (``open_ranges``), so a
  difference keeps alerting until it is repaired.

Anything whose rows cannot be located by the cursor makes the check a full
one, with the reason in its report: a full refresh or a first load since the
record, another engine's commit without column statistics or with delete
files, a rollback past the recorded snapshot (it is no longer an ancestor of
the current one) or its expiry, a lost or unreadable record, a change of the
cursor kind. Compactions (``replace``), snowberg's maintenance commits and its
own propagated deletes move no rows between cursor ranges and add nothing to
the scope. A full verification also runs when ``volume.full_schedule`` has
ticked since the last one, and when started by hand.

Rows that change in the source below the recorded watermark without any
commit (a hard delete, a row inserted with an old cursor beyond the margin)
are outside every incremental scope: the next full verification finds them.

The record lives in an Airflow Variable (``VariableStore``), not in the
table: a check runs hourly and must not add an Iceberg commit each time, and
the Variable is readable by every DAG of the table and deletable by a person
who wants the next check to be full. It is written after every check that
compared (passed or not) and is only ever a shortcut: a missing, unreadable or
inconsistent record means a full verification, never a skipped one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from snowberg.checks.hashdiff import Range
from snowberg.config.table_config import TableConfig
from snowberg.config.volume_settings import VolumeSettings
from snowberg.core.cursor import CursorKind
from snowberg.iceberg import state

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

log = logging.getLogger(__name__)

PROPAGATE_MODE = "propagate-deletes"  # snowberg.mode of the commit that removes hard-deleted rows
# On the earlier snapshots of a commit that stages several (a merge's removal, then its append): the commit's
# last snapshot carries the state and the window for all of them (the commit gate writes this key).
PARTIAL_OF = state.PARTIAL_OF
MAX_RANGES = 16  # more ranges than this are verified as their hull (one range): the SQL stays small
_INCREMENTAL, _BACKFILL = "incremental", "backfill"


class ScopeKind(StrEnum):
    """Whether a check compares the whole table or only what changed."""

    FULL = "full"
    INCREMENTAL = "incremental"


@dataclass(frozen=True, kw_only=True)
class VerificationScope:
    """What one check compares; ``ranges`` are cursor ranges (empty for a full verification)."""

    kind: ScopeKind
    reason: str
    ranges: tuple[Range, ...] = ()

    def describe(self) -> str:
        if self.kind is ScopeKind.FULL:
            return f"full verification ({self.reason})"
        return f"incremental: cursor in {' ∪ '.join(r.describe() for r in self.ranges)} ({self.reason})"


class RecordError(ValueError):
    """The verified record cannot be read; the check falls back to a full verification."""


@dataclass(frozen=True, kw_only=True)
class VerifiedRecord:
    """The last check that compared: the snapshot and watermark it read, when, and what still differed."""

    snapshot_id: int
    watermark: str | None
    cursor_kind: str | None
    verified_at: str  # ISO 8601, UTC
    full_at: str | None = None  # the last full verification (ISO 8601, UTC)
    open_ranges: tuple[Range, ...] = ()
    version: int = 1

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "snapshot_id": str(self.snapshot_id),  # 19 digits: text, so no JSON reader rounds it
                "watermark": self.watermark,
                "cursor_kind": self.cursor_kind,
                "verified_at": self.verified_at,
                "full_at": self.full_at,
                "open_ranges": [r.to_dict() for r in self.open_ranges],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, raw: str) -> VerifiedRecord:
        try:
            d = json.loads(raw)
            if int(d.get("version", 0)) != 1:
                raise RecordError(f"unknown record version {d.get('version')!r}")
            return cls(
                snapshot_id=int(d["snapshot_id"]),
                watermark=d.get("watermark"),
                cursor_kind=d.get("cursor_kind"),
                verified_at=str(d["verified_at"]),
                full_at=d.get("full_at"),
                open_ranges=tuple(Range.from_dict(r) for r in d.get("open_ranges") or ()),
            )
        except RecordError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RecordError(f"not a volume-check record: {raw[:200]!r}") from exc


def record_key(cfg: TableConfig) -> str:
    """The Airflow Variable holding a table's verified record (beside its watermark mirror)."""
    return cfg.iceberg_name.variable_key("volume_verified")


def read_record(store: state.VariableStore | None, key: str) -> tuple[VerifiedRecord | None, str]:
    """The record, or None with the reason it is not usable (the check is then full)."""
    if store is None:
        return None, "no record store"
    raw = store.get(key)
    if raw is None:
        return None, f"no verified record (Variable {key!r}): a first check, or the record was lost"
    try:
        return VerifiedRecord.from_json(raw), ""
    except RecordError as exc:
        log.warning("volume check: Variable %s is unreadable (%s): verifying the whole table", key, exc)
        return None, f"the verified record (Variable {key!r}) is unreadable: {exc}"


# ---------------------------------------------------------------------------
# Cursor values, bounds and ranges


def _parse(kind: CursorKind, text: str) -> Any:
    return kind.parse_value(text)


def _range_key(kind: CursorKind, r: Range) -> tuple[Any, Any]:
    lo = _parse(kind, r.low) if r.low is not None else None
    hi = _parse(kind, r.high) if r.high is not None else None
    return lo, hi


def merge_ranges(kind: CursorKind, ranges: Iterable[Range], limit: int = MAX_RANGES) -> tuple[Range, ...]:
    """Overlapping or touching ranges merged (a superset is harmless: it is only verified again), sorted.

    More than ``limit`` ranges become their hull, so the pushed-down
    predicate stays a handful of comparisons.
    """
    items = sorted(ranges, key=lambda r: (r.low is not None, _range_key(kind, r)[0] or 0))
    out: list[Range] = []
    for r in items:
        if out:
            last = out[-1]
            _, last_hi = _range_key(kind, last)
            lo, hi = _range_key(kind, r)
            if last_hi is None or lo is None or lo <= last_hi:
                if last_hi is None or (hi is not None and hi <= last_hi):
                    high, high_inc = last.high, last.high_inclusive
                    if hi is not None and last_hi is not None and hi == last_hi:
                        high_inc = last.high_inclusive or r.high_inclusive
                else:
                    high, high_inc = r.high, r.high_inclusive
                low_inc = last.low_inclusive or (r.low == last.low and r.low_inclusive)
                out[-1] = Range(low=last.low, high=high, low_inclusive=low_inc, high_inclusive=high_inc)
                continue
        out.append(r)
    if len(out) > limit:
        highs = [_range_key(kind, r)[1] for r in out]
        top = out[-1] if None in highs else max(out, key=lambda r: _range_key(kind, r)[1])
        out = [Range(low=out[0].low, high=top.high, low_inclusive=out[0].low_inclusive, high_inclusive=True)]
    return tuple(out)


def hull(kind: CursorKind, ranges: Sequence[Range]) -> tuple[Range, ...]:
    """One range holding all of ``ranges`` (append tables: a key's versions must not fall in a gap)."""
    merged = merge_ranges(kind, ranges, limit=1) if ranges else ()
    return merged


_EPOCH = datetime(1970, 1, 1)


def bound_value(iceberg_type: Any, raw: bytes) -> Any:
    """A data file's lower/upper bound (Iceberg's single-value serialization) as a comparable cursor value."""
    from pyiceberg.conversions import from_bytes
    from pyiceberg.types import DateType, TimestampType, TimestamptzType

    v = from_bytes(iceberg_type, raw)
    if isinstance(iceberg_type, TimestamptzType):
        return (_EPOCH + timedelta(microseconds=int(v))).replace(tzinfo=UTC)
    if isinstance(iceberg_type, TimestampType):
        return _EPOCH + timedelta(microseconds=int(v))
    if isinstance(iceberg_type, DateType):
        return date(1970, 1, 1) + timedelta(days=int(v))
    return Decimal(v) if isinstance(v, int | Decimal) else v


def _files_range(table: Table, snap: Snapshot, cursor: str, kind: CursorKind) -> Range | None | str:
    """The cursor range of the data files ``snap`` added or removed: a Range, None (no data file), or why unknown."""
    from pyiceberg.manifest import DataFileContent, ManifestEntryStatus

    field_obj = table.schema().find_field(cursor)
    fid, ftype = field_obj.field_id, field_obj.field_type
    lows: list[Any] = []
    highs: list[Any] = []
    for m in snap.manifests(table.io):
        if m.added_snapshot_id != snap.snapshot_id:
            continue
        for e in m.fetch_manifest_entry(table.io, discard_deleted=False):
            if e.snapshot_id != snap.snapshot_id or e.status == ManifestEntryStatus.EXISTING:
                continue
            df = e.data_file
            if df.content != DataFileContent.DATA:
                return "it has delete files (the rows they hide are not located by the cursor's statistics)"
            lo, hi = (df.lower_bounds or {}).get(fid), (df.upper_bounds or {}).get(fid)
            if lo is None or hi is None:
                return f"data file {df.file_path} has no statistics for {cursor!r}"
            lows.append(bound_value(ftype, lo))
            highs.append(bound_value(ftype, hi))
    if not lows:
        return None
    return Range(
        low=kind.format_value(min(lows)),
        high=kind.format_value(max(highs)),
        low_inclusive=True,
        high_inclusive=True,
    )


# ---------------------------------------------------------------------------
# The plan


def full_due(schedule: str | None, last_full: str | None, now: datetime) -> bool:
    """Has ``schedule`` (cron or preset, UTC) ticked since the last full verification?"""
    if schedule is None:
        return False
    if last_full is None:
        return True
    from croniter import croniter  # Airflow's own cron dependency

    tick = croniter(schedule, now.astimezone(UTC)).get_prev(datetime)
    last = datetime.fromisoformat(last_full)
    last = last if last.tzinfo else last.replace(tzinfo=UTC)
    return bool(last < tick)


@dataclass(kw_only=True)
class _Walk:
    ranges: list[Range] = field(default_factory=list)
    full: str = ""  # why the changes cannot be located (non-empty: full verification)


def _changes_since(table: Table, record: VerifiedRecord, cursor: str, kind: CursorKind) -> _Walk:
    """The cursor ranges the commits after the recorded snapshot changed, newest first (see the module doc)."""
    walk = _Walk()
    since: list[Snapshot] = []
    for snap in state.ancestors(table):
        if snap.snapshot_id == record.snapshot_id:
            break
        since.append(snap)
    else:
        if table.snapshot_by_id(record.snapshot_id) is None:
            walk.full = f"the last verified snapshot {record.snapshot_id} is no longer in the table (expired)"
        else:
            walk.full = (
                f"the last verified snapshot {record.snapshot_id} is not an ancestor of the current one "
                "(the table was rolled back)"
            )
        return walk
    for snap in since:
        summary = snap.summary
        props = summary.additional_properties if summary is not None else {}
        operation = getattr(summary, "operation", None)
        op = str(getattr(operation, "value", operation) or "")
        if op == "replace" or state.MAINTENANCE in props or props.get(state.MODE) == PROPAGATE_MODE:
            continue  # a compaction rewrites files and keeps their rows; a propagation removes what a check found
        if PARTIAL_OF in props:
            continue  # part of a snowberg commit: its last snapshot (also walked) carries the window
        if state.WATERMARK in props:
            mode = props.get(state.MODE)
            low, high = props.get(state.WINDOW_LOW) or None, props.get(state.WINDOW_HIGH) or None
            if mode == _INCREMENTAL and low is not None and high is not None:
                walk.ranges.append(Range(low=low, high=high, low_inclusive=False, high_inclusive=True))
            elif mode == _BACKFILL and low is not None and high is not None:
                walk.ranges.append(Range(low=low, high=high, low_inclusive=True, high_inclusive=True))
            elif mode == _INCREMENTAL:
                walk.full = f"a first load since the last check (snapshot {snap.snapshot_id})"
            else:
                walk.full = f"a {mode or 'snowberg'} commit since the last check (snapshot {snap.snapshot_id})"
            if walk.full:
                return walk
            continue
        got = _files_range(table, snap, cursor, kind)
        if isinstance(got, str):
            walk.full = f"another engine's commit (snapshot {snap.snapshot_id}, {op or 'unknown'}): {got}"
            return walk
        if got is not None:
            walk.ranges.append(got)
    return walk


def plan_scope(
    table: Table,
    cfg: TableConfig,
    settings: VolumeSettings,
    record: VerifiedRecord | None,
    *,
    record_problem: str = "",
    watermark: str | None,
    cursor_kind: str | None,
    now: datetime,
    force_full: bool = False,
) -> VerificationScope:
    """Full or incremental, and over which ranges (the module doc gives the rules)."""

    def full(reason: str) -> VerificationScope:
        return VerificationScope(kind=ScopeKind.FULL, reason=reason)

    if force_full:
        return full("started by hand (full_verification)")
    if not settings.incremental:
        return full("volume.incremental is off")
    if cfg.cursor is None or cursor_kind is None or watermark is None:
        return full("no cursor range to verify")
    if record is None:
        return full(record_problem or "no verified record")
    if full_due(settings.full_schedule, record.full_at, now):
        return full(f"full_schedule {settings.full_schedule!r} is due (last full verification {record.full_at})")
    if record.cursor_kind != cursor_kind or record.watermark is None:
        return full(f"the record's cursor kind {record.cursor_kind!r} is not the table's {cursor_kind!r}")
    kind = CursorKind(cursor_kind)
    walk = _changes_since(table, record, cfg.cursor.column.lower(), kind)
    if walk.full:
        return full(walk.full)
    low = record.watermark
    margin = max(settings.late_margin, cfg.cursor.lookback)
    if kind.is_time and margin > timedelta(0):
        low = kind.shift_value(record.watermark, margin)
    ranges = [Range(low=low, high=watermark, low_inclusive=False, high_inclusive=True), *walk.ranges]
    ranges += record.open_ranges
    merged = merge_ranges(kind, ranges)
    reason = f"changes since snapshot {record.snapshot_id} (watermark {record.watermark})"
    if record.open_ranges:
        reason += f", and {len(record.open_ranges)} range(s) that differed at the last check"
    return VerificationScope(kind=ScopeKind.INCREMENTAL, ranges=merged, reason=reason)


def next_record(
    previous: VerifiedRecord | None,
    scope: VerificationScope,
    *,
    snapshot_id: int,
    watermark: str | None,
    cursor_kind: str | None,
    open_ranges: Sequence[Range],
    now: datetime,
) -> VerifiedRecord:
    """The record after a check that compared: what it read, when, and the ranges still differing."""
    at = now.astimezone(UTC).isoformat(timespec="seconds")
    return VerifiedRecord(
        snapshot_id=snapshot_id,
        watermark=watermark,
        cursor_kind=cursor_kind,
        verified_at=at,
        full_at=at if scope.kind is ScopeKind.FULL else (previous.full_at if previous else None),
        open_ranges=tuple(open_ranges),
    )


__all__ = [
    "MAX_RANGES",
    "PROPAGATE_MODE",
    "RecordError",
    "ScopeKind",
    "VerificationScope",
    "VerifiedRecord",
    "bound_value",
    "full_due",
    "hull",
    "merge_ranges",
    "next_record",
    "plan_scope",
    "read_record",
    "record_key",
]
