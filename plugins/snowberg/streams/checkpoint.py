"""The stream batch id, committed in the Iceberg snapshot summary with the data.

Same invariant as the watermark (``snowberg.iceberg.state``): the table is the truth.
The batch id in the newest snowberg stream commit says which staged batches
are already in the table; the consume step numbers new batches above it, the
load step applies only batches above it, the cleanup step deletes staged rows
only up to it. Backfill commits (``CHANGES``) do not carry it and are skipped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from snowberg.iceberg import state as core_state

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

BATCH_ID = core_state.PREFIX + "stream-batch-id"
BATCHES = core_state.PREFIX + "stream-batches"
STREAM = core_state.PREFIX + "stream"
REFRESH = core_state.PREFIX + "stream-refresh"
DELETED_KEYS = core_state.PREFIX + "stream-deleted-keys"
CONSUMED_AT = core_state.PREFIX + "stream-consumed-at"
GENERATION = core_state.PREFIX + "stream-created-on"
CHANGES_START = core_state.PREFIX + "changes-start"
CHANGES_END = core_state.PREFIX + "changes-end"

MODE_STREAM = "stream"
MODE_CHANGES = "stream_changes_backfill"


@dataclass(frozen=True, kw_only=True)
class StreamState:
    batch_id: int
    snapshot_id: int
    run_id: str | None
    consumed_at: str | None
    timestamp_ms: int
    generation: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _props(snap: Snapshot) -> dict[str, str]:
    return dict(snap.summary.additional_properties) if snap.summary is not None else {}


def _stream_state(props: dict[str, str], snapshot_id: int, timestamp_ms: int) -> StreamState:
    return StreamState(
        batch_id=int(props[BATCH_ID]),
        snapshot_id=snapshot_id,
        run_id=props.get(core_state.RUN_ID),
        consumed_at=props.get(CONSUMED_AT) or None,
        timestamp_ms=timestamp_ms,
        generation=props.get(GENERATION) or None,
    )


def read_stream_state(table: Table | None) -> StreamState | None:
    """The newest stream commit on the main branch (None: no batch applied yet).

    When every stream snapshot was expired (other engines committed after
    it), the copy the commit gate wrote into the table properties is used;
    its snapshot id is then the table's current snapshot.
    """
    if table is None:
        return None
    for snap in core_state.commits(table):  # partial snapshots (a commit's removal) are skipped
        p = _props(snap)
        if BATCH_ID in p:
            return _stream_state(p, snap.snapshot_id, snap.timestamp_ms)
    props = core_state.usable_property_state(table)
    current = table.current_snapshot()
    if BATCH_ID in props and current is not None:
        return _stream_state(props, current.snapshot_id, current.timestamp_ms)
    return None


def committed_batch(table: Table | None) -> int:
    """The last staged batch committed to the lake table (0 before the first)."""
    st = read_stream_state(table)
    return st.batch_id if st else 0


def changes_identity(start: str, end: str | None) -> dict[str, str]:
    """The summary keys naming a CHANGES backfill commit of exactly this window (``state.find_commit``)."""
    return {core_state.MODE: MODE_CHANGES, CHANGES_START: start, CHANGES_END: end or ""}
