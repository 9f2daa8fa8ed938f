"""Watermark state: committed in the Iceberg snapshot summary, mirrored to a Variable.

The table is the source of truth. Every snowberg commit writes its state as
snapshot summary properties (``snowberg.*``) in the same commit as the data,
so state and rows can never disagree. The Airflow Variable is a convenience
mirror for humans and dashboards: written only after the commit is read back,
rebuilt from the table when it lags, and a loud failure when it is ahead of
the table (the table lost commits: a restore or rollback someone must look at).

Snapshot expiry (by snowberg, Spark, Snowflake or any other engine) can
remove every snowberg snapshot once other engines have committed after it.
So the commit gate also writes the state into table properties
(``snowberg.state.*``) in the same atomic commit. The snapshot walk stays
authoritative (a rollback to an older snapshot reads that snapshot's state);
the properties are read only when the walk finds no snowberg snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from snowberg.core.cursor import parse_cursor_value

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

PREFIX = "snowberg."
WATERMARK = PREFIX + "watermark"
CURSOR_KIND = PREFIX + "cursor-kind"
RUN_ID = PREFIX + "run-id"
MODE = PREFIX + "mode"
WINDOW_LOW = PREFIX + "window-low"
WINDOW_HIGH = PREFIX + "window-high"
ROWS = PREFIX + "rows"
ROWS_PLANNED = PREFIX + "rows-planned"
ROWS_EXTRACTED = PREFIX + "rows-extracted"
ROWS_DELETED = PREFIX + "rows-deleted"
VERSION = PREFIX + "version"
MAINTENANCE = PREFIX + "maintenance"  # marks a maintenance commit that only carries the state (value: the operation)

# Table properties holding the state of the newest snowberg commit (expiry-proof copy).
STATE_PROPERTY_PREFIX = PREFIX + "state."


def state_property(key: str) -> str:
    """The table property that holds summary key ``key`` (``snowberg.watermark`` → ``snowberg.state.watermark``)."""
    if not key.startswith(PREFIX):
        raise ValueError(f"state key {key!r} must start with {PREFIX!r}")
    return STATE_PROPERTY_PREFIX + key[len(PREFIX) :]


def property_state(table: Table) -> dict[str, str]:
    """The state the last snowberg commit wrote into table properties, keyed like the snapshot summary."""
    n = len(STATE_PROPERTY_PREFIX)
    return {PREFIX + k[n:]: v for k, v in table.metadata.properties.items() if k.startswith(STATE_PROPERTY_PREFIX)}


def current_state_props(table: Table) -> dict[str, str]:
    """The snowberg summary properties of the table's current state, for a commit that must keep it.

    A commit that changes no watermark (compaction, propagated source deletes)
    becomes the newest snapshot on main, so it carries the same state. The
    state comes from the snapshot that holds it or, when snapshot expiry took
    that snapshot, from the table properties the same commit wrote.
    """
    st = read_state(table)
    if st is None:
        return {}
    if st.from_properties:
        return property_state(table)
    snap = table.snapshot_by_id(st.snapshot_id)
    return _props(snap) if snap is not None else property_state(table)


class StateError(RuntimeError):
    """Table state and its mirror disagree in a way that needs a human."""


class ConcurrentCommitError(RuntimeError):
    """Another run committed to the table since this run was planned."""


@dataclass(frozen=True, kw_only=True)
class TableState:
    """The watermark state of the newest snowberg commit, from its snapshot summary (or the table properties)."""

    watermark: str | None
    cursor_kind: str | None
    snapshot_id: int
    run_id: str | None
    mode: str | None
    timestamp_ms: int
    # True when the snapshots were expired and the state came from the table properties;
    # snapshot_id is then the table's current snapshot (the state's own snapshot is gone).
    from_properties: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ancestors(table: Table, snapshot_id: int | None = None) -> Iterator[Snapshot]:
    """A snapshot and its ancestors, newest first, as far as they are retained.

    From ``snapshot_id``, or from the main branch's current snapshot when it
    is None. The one walk up the parent chain: readers of snowberg's state, of
    a sync's state and of a rollback point all take their snapshots from it.
    """
    snap = table.current_snapshot() if snapshot_id is None else table.snapshot_by_id(snapshot_id)
    while snap is not None:
        yield snap
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None


def _props(snap: Snapshot) -> dict[str, str]:
    summary = snap.summary
    if summary is None:
        return {}
    return {k: v for k, v in summary.additional_properties.items() if k.startswith(PREFIX)}


def has_snowberg_snapshot(table: Table, key: str) -> bool:
    """Does any snapshot on the main branch carry ``key`` (else the properties are the only copy of the state)?"""
    return any(key in _props(snap) for snap in ancestors(table))


def run_commits(table: Table) -> Iterator[Snapshot]:
    """Each snowberg run's commit on main, newest first: one snapshot per run.

    A merge-on-read run stages a delete snapshot and an append snapshot that
    both carry its state (the newest stands for the run); maintenance commits
    that only carry the state forward (compaction) are not runs.
    """
    seen: set[str] = set()
    for snap in ancestors(table):
        props = _props(snap)
        if WATERMARK not in props or MAINTENANCE in props:
            continue
        run_id = props.get(RUN_ID)
        if run_id is not None:
            if run_id in seen:
                continue
            seen.add(run_id)
        yield snap


def read_state(table: Table | None) -> TableState | None:
    """The newest snowberg state on the table's main branch (other writers' snapshots are skipped).

    When no snapshot on the branch carries a watermark (expired by some
    engine), the copy in the table properties is used.
    """
    if table is None:
        return None
    for snap in ancestors(table):
        props = _props(snap)
        if WATERMARK in props:
            return TableState(
                watermark=props[WATERMARK] or None,
                cursor_kind=props.get(CURSOR_KIND) or None,
                snapshot_id=snap.snapshot_id,
                run_id=props.get(RUN_ID),
                mode=props.get(MODE),
                timestamp_ms=snap.timestamp_ms,
            )
    props = property_state(table)
    current = table.current_snapshot()
    if WATERMARK in props and current is not None:
        return TableState(
            watermark=props[WATERMARK] or None,
            cursor_kind=props.get(CURSOR_KIND) or None,
            snapshot_id=current.snapshot_id,
            run_id=props.get(RUN_ID),
            mode=props.get(MODE),
            timestamp_ms=current.timestamp_ms,
            from_properties=True,
        )
    return None


def find_run_commit(table: Table | None, run_id: str, mode: str, window_high: str | None) -> Snapshot | None:
    """The snapshot this run already committed for this window, if any (retries append nothing)."""
    return find_commit(table, {RUN_ID: run_id, MODE: mode, WINDOW_HIGH: window_high or ""})


def _matches(props: Mapping[str, str], identity: Mapping[str, str]) -> bool:
    # A missing key and an empty value are the same (older commits wrote "" for "none").
    return all((props.get(k) or "") == (v or "") for k, v in identity.items())


def find_commit(table: Table | None, identity: Mapping[str, str]) -> Snapshot | None:
    """The commit on the main branch whose summary carries every ``identity`` item, if any.

    A writer names its commit by a few summary keys (a load: run id, mode and
    window high; a CHANGES backfill: its window). When the snapshots were
    expired (no snapshot on the branch carries any snowberg key any more), the
    state copy in the table properties still identifies the last commit; the
    current snapshot is returned for it. After a rollback older snowberg
    snapshots remain, so the properties are not consulted.
    """
    if table is None:
        return None
    any_snowberg = False
    for snap in ancestors(table):
        props = _props(snap)
        if _matches(props, identity):
            return snap
        any_snowberg = any_snowberg or any(k in props for k in identity)
    if not any_snowberg:
        props = property_state(table)
        if props and _matches(props, identity):
            return table.current_snapshot()
    return None


class VariableStore(Protocol):
    """Where the watermark mirror lives: Airflow Variables in a task; the CLI and tests bring their own."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...


class AirflowVariables:
    """``VariableStore`` on Airflow Variables (task-side SDK)."""

    def get(self, key: str) -> str | None:
        from airflow.sdk import Variable

        return Variable.get(key, default=None)

    def set(self, key: str, value: str) -> None:
        from airflow.sdk import Variable

        Variable.set(key, value)


def mirror_value(state: TableState) -> str:
    """The JSON the Variable mirror holds for ``state`` (what ``reconcile`` compares with the table)."""
    return json.dumps(
        {
            "watermark": state.watermark,
            "cursor_kind": state.cursor_kind,
            "snapshot_id": state.snapshot_id,
            "run_id": state.run_id,
        },
        sort_keys=True,
    )


def reconcile(key: str, state: TableState | None, variables: VariableStore, table: Table | None) -> str:
    """Bring the Variable in line with the table; return what was done.

    * no Variable, or the table ahead of it (a crash after the commit) → adopt the table's
    * the Variable ahead of the table → ``StateError``: the table lost commits
    """
    raw = variables.get(key)
    if raw is None:
        if state is not None:
            variables.set(key, mirror_value(state))
            return "adopted table state (Variable was missing)"
        return "fresh table"
    try:
        mirror = json.loads(raw)
        mirror_snapshot = int(mirror["snapshot_id"])
        mirror_wm = mirror.get("watermark")
    except (ValueError, KeyError, TypeError) as exc:
        raise StateError(
            f"Variable {key!r} holds {raw!r}, not a snowberg watermark mirror; delete it to re-sync"
        ) from exc
    if state is None:
        raise StateError(
            f"Variable {key!r} says watermark {mirror_wm!r} (snapshot {mirror_snapshot}) but the Iceberg table "
            "has no snowberg commit: was it dropped or rolled back? Delete the Variable to start from the table."
        )
    if mirror_snapshot == state.snapshot_id:
        return "in sync"
    if state.from_properties and mirror_wm == state.watermark and mirror.get("run_id") == state.run_id:
        # The mirrored snapshot was expired; the table properties carry the same state.
        variables.set(key, mirror_value(state))
        return f"adopted table state (snapshot {mirror_snapshot} was expired; state read from table properties)"
    known = table is not None and table.snapshot_by_id(mirror_snapshot) is not None
    kind = state.cursor_kind
    ahead = False
    if mirror_wm is not None and state.watermark is not None and kind:
        ahead = parse_cursor_value(kind, mirror_wm) > parse_cursor_value(kind, state.watermark)
    elif mirror_wm is not None and state.watermark is None:
        ahead = True
    if ahead or not known:
        raise StateError(
            f"Variable {key!r} is ahead of the table: it says watermark {mirror_wm!r} (snapshot {mirror_snapshot}), "
            f"the table's last snowberg commit is snapshot {state.snapshot_id} with watermark {state.watermark!r}. "
            "The table lost commits (restore, rollback or snapshot expiry?). Check the table, then delete the "
            "Variable to re-sync from it."
        )
    variables.set(key, mirror_value(state))
    return f"adopted table state (snapshot {state.snapshot_id}; Variable had {mirror_snapshot})"
