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

One commit may stage several snapshots (a merge's removal, then its append;
a propagated delete's rewrite, then the snapshot that records the state).
Only the LAST snapshot of a commit carries the state and ``snowberg.commit-id``;
each earlier one carries ``snowberg.partial-of=<that commit id>`` and only who
wrote it (run id, DAG id, mode), never a watermark: with main left on it, the
table holds half a commit, so every reader of the state skips it (``commits``)
and rollbacks and tags refuse it. Commits written before this rule carry the
state on every snapshot they staged; such a snapshot is recognised as partial
by its child that continues the same commit (``continues``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from snowberg.core.cursor import parse_cursor_value
from snowberg.iceberg.identity import recorded_identity

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
# snowberg.mode of a column backfill's commit (load.column_backfill): part of a run, carrying its state forward
COLUMN_BACKFILL_MODE = "column-backfill"
DAG_ID = PREFIX + "dag-id"  # the DAG whose run wrote the commit: run ids (scheduled__<date>) repeat across DAGs
# A cursor-less table's full refresh: the source's INFORMATION_SCHEMA version it read (JSON); the next
# scheduled run skips the reload while Snowflake reports the same (snowberg.snowflake.source_version).
SOURCE_VERSION = PREFIX + "source-version"
# A load of a source with masking or row access policies its table allows (``on_policy: allow``): which ones,
# and the role that read it (snowberg.snowflake.policies).
POLICIES_ALLOWED = PREFIX + "policies-allowed"
# The plan's Window.extra key that carries it to the commit.
WINDOW_POLICIES_ALLOWED = "policies_allowed"
# Table properties set by ``rollback.rollback`` in its commit: the head it moved main away from, and the snapshot
# it moved main to. A Variable naming that head, or an ancestor of it above that target, was undone by snowberg,
# not lost (``undone_by_rollback``).
UNDONE_HEAD = PREFIX + "rollback.undone-head"
ROLLBACK_TARGET = PREFIX + "rollback.target"
COMMIT_ID = PREFIX + "commit-id"  # on the last snapshot of a commit: the commit's id
PARTIAL_OF = PREFIX + "partial-of"  # on every earlier snapshot of the commit: the id of the commit it is part of
# What a partial snapshot records besides PARTIAL_OF: who wrote its commit (for rollback --before-run and inspect).
PART_KEYS = (RUN_ID, DAG_ID, MODE)
# Facts of one commit, not of the state it leaves: a commit that carries the state forward does not copy them.
PER_COMMIT_KEYS = (COMMIT_ID, PARTIAL_OF)

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


def undone_property_state(table: Table, props: Mapping[str, str]) -> bool:
    """Was the commit that wrote the state copy ``props`` undone by a rollback (made outside snowberg)?

    The copy is read when no snapshot on main carries snowberg state. That is
    what snapshot expiry leaves — the commit's snapshot is gone, or kept off
    main's walk by a tag while the snapshots after it expired — and also what
    another engine's rollback below snowberg's first commit leaves: the commit's
    snapshot is still in the table, and main's head descends from a snapshot
    older than it. Table properties are not rolled back, so the copy then
    names a commit whose rows the table no longer holds: neither a state nor
    a commit (its retry would write nothing). Expiry never leaves main's walk
    holding a snapshot older than a retained snowberg commit that is off it.
    """
    if not props:
        return False
    on_main = list(ancestors(table))
    main_ids = {s.snapshot_id for s in on_main}
    oldest = min((_age(s) for s in on_main), default=None)
    for snap in table.metadata.snapshots:
        if snap.snapshot_id in main_ids or not _matches(_props(snap), props):
            continue
        if oldest is not None and oldest < _age(snap):
            return True
    return False


def _age(snap: Snapshot) -> tuple[int, int]:
    # Sequence numbers grow with every commit (format v2); v1 tables have none, so the commit time orders them.
    return (snap.sequence_number or 0, snap.timestamp_ms)


def usable_property_state(table: Table) -> dict[str, str]:
    """``property_state`` unless the commit that wrote it was undone (``undone_property_state``): then empty."""
    props = property_state(table)
    return {} if undone_property_state(table, props) else props


def current_state_props(table: Table) -> dict[str, str]:
    """The snowberg summary properties of the table's current state, for a commit that must keep it.

    A commit that changes no watermark (compaction, propagated source deletes)
    becomes the newest snapshot on main, so it carries the same state. The
    state comes from the snapshot that holds it or, when snapshot expiry took
    that snapshot, from the table properties the same commit wrote.
    The commit id is the carrying commit's own (the gate gives it one). The
    identity the table is loaded with now (``iceberg.identity``) goes with the
    state: a commit that carries the state changes no identity, and a rollback
    to it restores both together.
    """
    st = read_state(table)
    if st is None:
        return {}
    snap = None if st.from_properties else table.snapshot_by_id(st.snapshot_id)
    props = _props(snap) if snap is not None else property_state(table)
    for k in PER_COMMIT_KEYS:
        props.pop(k, None)
    return {**props, **recorded_identity(table.properties)}


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


def snowberg_props(snap: Snapshot) -> dict[str, str]:
    """The ``snowberg.*`` items of a snapshot's summary."""
    return _props(snap)


def children_index(table: Table) -> dict[int, list[Snapshot]]:
    """``{snapshot id: its child snapshots}`` over every retained snapshot (any branch, or none)."""
    out: dict[int, list[Snapshot]] = {}
    for snap in table.metadata.snapshots:
        if snap.parent_snapshot_id is not None:
            out.setdefault(snap.parent_snapshot_id, []).append(snap)
    return out


def continues(parent: Mapping[str, str], child: Mapping[str, str]) -> bool:
    """Is ``child`` the next snapshot of the same old-form commit as ``parent`` (both carry the whole state)?

    Old commits carried their state on every snapshot they staged, with no
    commit id. A snowberg run commits once (a retry that finds its commit
    writes nothing; a cleared run gets a new id), so a child with the same
    run id and the same value for every snowberg key both carry (the
    per-snapshot removal count aside) is the rest of its parent's commit. A
    maintenance commit carries a run's state on purpose and is not.
    """
    if any(k in parent or k in child for k in (COMMIT_ID, PARTIAL_OF, MAINTENANCE)):
        return False
    run = parent.get(RUN_ID)
    if not run or child.get(RUN_ID) != run:
        return False
    shared = (parent.keys() & child.keys()) - {ROWS_DELETED}
    return all(parent[k] == child[k] for k in shared)


def is_partial(table: Table, snap: Snapshot, children: Mapping[int, list[Snapshot]] | None = None) -> bool:
    """Is ``snap`` a snapshot of a commit other than its last (main left on it holds half a commit)?"""
    props = _props(snap)
    if PARTIAL_OF in props:
        return True
    if COMMIT_ID in props or RUN_ID not in props or MAINTENANCE in props:
        return False
    kids = (children if children is not None else children_index(table)).get(snap.snapshot_id, [])
    return any(continues(props, _props(k)) for k in kids)


def last_of_commit(table: Table, snap: Snapshot) -> Snapshot | None:
    """The last snapshot of the commit ``snap`` belongs to: ``snap`` itself unless it is partial.

    None when that last snapshot is no longer in the table (expired).
    """
    props = _props(snap)
    if PARTIAL_OF in props:
        commit_id = props[PARTIAL_OF]
        return next((s for s in table.metadata.snapshots if _props(s).get(COMMIT_ID) == commit_id), None)
    children = children_index(table)
    seen = {snap.snapshot_id}
    while True:
        p = _props(snap)
        nxt = [k for k in children.get(snap.snapshot_id, []) if continues(p, _props(k))]
        if not nxt or nxt[0].snapshot_id in seen:
            return snap
        snap = nxt[0]
        seen.add(snap.snapshot_id)


def commits(table: Table, snapshot_id: int | None = None) -> Iterator[Snapshot]:
    """``ancestors`` without the partial snapshots: the walk every reader of a commit's state takes.

    A head on a partial snapshot (a rollback made by another engine, or by
    an older snowberg) reads the state of the commit before it: the table
    holds part of the commit's rows, and the next run reloads that window.
    """
    children: dict[int, list[Snapshot]] | None = None
    for snap in ancestors(table, snapshot_id):
        props = _props(snap)
        if PARTIAL_OF in props:
            continue
        if COMMIT_ID not in props and RUN_ID in props and MAINTENANCE not in props:  # an old-form commit
            if children is None:
                children = children_index(table)
            if any(continues(props, _props(k)) for k in children.get(snap.snapshot_id, [])):
                continue
        yield snap


def has_snowberg_snapshot(table: Table, key: str) -> bool:
    """Does any snapshot on the main branch carry ``key`` (else the properties are the only copy of the state)?"""
    return any(key in _props(snap) for snap in ancestors(table))


def run_commits(table: Table) -> Iterator[Snapshot]:
    """Each snowberg run's commit on main, newest first: one snapshot per run.

    Partial snapshots (a merge's removal) are not commits; maintenance commits
    that only carry the state forward (compaction) are not runs, and neither is
    the column backfill a run commits after its load (same run id: the load's
    commit is the run's).
    """
    seen: set[str] = set()
    for snap in commits(table):
        props = _props(snap)
        if WATERMARK not in props or MAINTENANCE in props or props.get(MODE) == COLUMN_BACKFILL_MODE:
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
    st = state_at(table)
    if st is not None:
        return st
    props = usable_property_state(table)
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


def state_at(table: Table, snapshot_id: int | None = None) -> TableState | None:
    """The state a reader sees with main's head at ``snapshot_id`` (default: the head), from snapshots only.

    The newest complete commit at or below it that carries a watermark
    (partial snapshots skipped); None when none is retained.
    """
    for snap in commits(table, snapshot_id):
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
    snapshots remain, so the properties are not consulted; a rollback below
    snowberg's first commit leaves none, and the copy is then the undone
    commit's (``undone_property_state``): not consulted either. Partial snapshots
    are never a commit: a head left on one means the commit is not in the table.
    """
    if table is None:
        return None
    any_snowberg = False
    for snap in commits(table):
        props = _props(snap)
        if _matches(props, identity):
            return snap
        any_snowberg = any_snowberg or any(k in props for k in identity)
    if not any_snowberg:
        props = usable_property_state(table)
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


class MetadataDbVariables:
    """``VariableStore`` on Airflow's metadata database (``airflow.models``): the CLI and the UI page.

    Outside a task there is no task supervisor for the SDK's ``Variable`` to ask: processes with database
    access (the command line, the API server) read and write the table directly.
    """

    def get(self, key: str) -> str | None:
        from airflow.models import Variable

        return Variable.get(key, default_var=None)  # type: ignore[no-any-return]

    def set(self, key: str, value: str) -> None:
        from airflow.models import Variable

        Variable.set(key, value)


def undone_by_rollback(table: Table | None, snapshot_id: int) -> bool:
    """Did the last snowberg rollback undo ``snapshot_id``, and is main still where that rollback left it?

    A rollback snowberg committed records the head it undid (``UNDONE_HEAD``) and the snapshot it moved main
    to (``ROLLBACK_TARGET``): it undid that head and its ancestors down to, not including, the target. The
    record speaks for main only while main still holds the target: main below it (another engine's rollback,
    a catalog restored to older metadata) was moved by someone else, and a Variable ahead of the table is
    then for a person to look at, as after any rollback made outside snowberg. So is a record without a
    target (written before rollbacks recorded one): nothing tells the undone snapshots from the target.
    """
    if table is None:
        return False
    undone, target = table.properties.get(UNDONE_HEAD, ""), table.properties.get(ROLLBACK_TARGET, "")
    if not (undone.isdigit() and target.isdigit()):
        return False
    on_main = {s.snapshot_id for s in ancestors(table)}
    if snapshot_id in on_main or int(target) not in on_main:
        return False
    # With the target on main, so is every ancestor of it: what main lacks of the undone head's chain lies above it.
    return any(s.snapshot_id == snapshot_id for s in ancestors(table, int(undone)))


def follow_variable(table: Table, variable_key: str, variables: VariableStore) -> str:
    """Point the Variable mirror at the table's state after a commit that carried it forward; what was done.

    A commit that does not move the watermark (a compaction, a propagated delete) makes its own snapshot the
    newest one carrying the (same) state. Mirror it before expiry can remove the snapshot the Variable still
    names — else the next load would find the Variable pointing at a snapshot the table no longer has and
    refuse to run.
    """
    return reconcile(variable_key, read_state(table), variables, table)


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

    * no Variable, or the table ahead of it (a crash after the commit) → adopt the table's;
      the Variable naming an ancestor of the state's snapshot is behind, whatever the watermarks say
      (a full refresh may record a lower watermark, or one of another cursor column)
    * the Variable ahead of the table, or naming a snapshot the table no longer has → ``StateError``:
      the table lost commits
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
    # The mirrored snapshot below the state's: the table committed after it (a full refresh may move the
    # watermark back, or record another cursor column), so its state is the newer one whatever it says.
    behind = table is not None and any(s.snapshot_id == mirror_snapshot for s in ancestors(table, state.snapshot_id))
    kind = state.cursor_kind
    ahead = False
    if behind:
        ahead = False
    elif mirror_wm is not None and state.watermark is not None and kind:
        ahead = parse_cursor_value(kind, mirror_wm) > parse_cursor_value(kind, state.watermark)
    elif mirror_wm is not None and state.watermark is None:
        ahead = True
    if (ahead or not known) and undone_by_rollback(table, mirror_snapshot):
        # A run that read the table before a snowberg rollback committed wrote its state back after the
        # rollback moved the Variable: the rollback was meant, the table's state is the one to keep.
        variables.set(key, mirror_value(state))
        return f"adopted table state (snapshot {state.snapshot_id}; snapshot {mirror_snapshot} was rolled back)"
    if ahead or not known:
        raise StateError(
            f"Variable {key!r} is ahead of the table: it says watermark {mirror_wm!r} (snapshot {mirror_snapshot}), "
            f"the table's last snowberg commit is snapshot {state.snapshot_id} with watermark {state.watermark!r}. "
            "The table lost commits (restore, rollback or snapshot expiry?). Check the table, then delete the "
            "Variable to re-sync from it."
        )
    variables.set(key, mirror_value(state))
    return f"adopted table state (snapshot {state.snapshot_id}; Variable had {mirror_snapshot})"
