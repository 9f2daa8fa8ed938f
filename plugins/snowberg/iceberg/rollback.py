"""Undo a bad load: move main back to an earlier snapshot — and the watermark with it — and tag snapshots.

The watermark lives in the snapshot summaries, so rolling main back to a
snapshot also rolls the state back: ``state.read_state`` walks from the new
head and finds the state that snapshot carried. What rollback must add:

* the Airflow Variable mirror follows (else the next run would refuse: the
  mirror would be "ahead of the table");
* table properties ``snowberg.state.*``, where a table mirrors its state there,
  are set to the rolled-back values in the same commit;
* the commit asserts main's head as planned, so a load landing in between
  fails the rollback instead of being silently undone.

The next scheduled run then plans from the rolled-back watermark and reloads
that window once, like any other window.

Tags are Iceberg tag refs: expiry never removes a tagged snapshot.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from snowberg.iceberg import state
from snowberg.iceberg.deletes import live_rows
from snowberg.iceberg.gate import refuse_rebase
from snowberg.iceberg.maintenance import MAINTENANCE

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

log = logging.getLogger(__name__)

STATE_PROPERTY_PREFIX = state.PREFIX + "state."
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")


class RollbackError(ValueError):
    """The rollback target is unknown, ambiguous or unsafe; nothing was changed."""


@dataclass(kw_only=True)
class RollbackPlan:
    """What a rollback does (or would do): the target snapshot, the watermark and rows before and after."""

    table: str
    how: str
    current_snapshot_id: int | None
    target_snapshot_id: int
    watermark_now: str | None
    watermark_after: str | None
    state_snapshot_after: int | None
    rows_now: int | None
    rows_after: int | None
    undone: list[dict[str, Any]] = field(default_factory=list)
    target_is_ancestor: bool = True
    dry_run: bool = False
    committed: bool = False
    variable: str | None = None
    variable_value: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """The plan for a person: snapshots, watermark, rows and the runs it undoes."""
        lines = [
            f"{'would roll back' if self.dry_run else 'rolled back'} {self.table} ({self.how}): "
            f"snapshot {self.current_snapshot_id} → {self.target_snapshot_id}",
            f"  watermark {self.watermark_now!r} → {self.watermark_after!r}",
            f"  rows {self.rows_now} → {self.rows_after}",
        ]
        if not self.target_is_ancestor:
            lines.append("  (the target is not an ancestor of the current head: a roll *forward* to another history)")
        for u in self.undone:
            lines.append(
                f"  undoes snapshot {u['snapshot_id']} ({u['operation']}, run {u['run_id']}, "
                f"{u['rows']} rows, {u['committed_at']})"
            )
        if self.variable:
            lines.append(
                f"  Variable {self.variable} {'would be' if self.dry_run else 'is'} set to {self.variable_value}"
            )
        return "\n".join(lines)


def _summary(snap: Snapshot) -> dict[str, str]:
    return dict(snap.summary.additional_properties) if snap.summary is not None else {}


def chain(table: Table, snapshot_id: int) -> list[Snapshot]:
    """``snapshot_id`` and its ancestors, newest first (as far as retained)."""
    return list(state.ancestors(table, snapshot_id))


def state_at(table: Table, snapshot_id: int) -> state.TableState | None:
    """The snowberg state a reader would see if main's head were ``snapshot_id``."""
    for snap in chain(table, snapshot_id):
        p = _summary(snap)
        if state.WATERMARK in p:
            return state.TableState(
                watermark=p[state.WATERMARK] or None,
                cursor_kind=p.get(state.CURSOR_KIND) or None,
                snapshot_id=snap.snapshot_id,
                run_id=p.get(state.RUN_ID),
                mode=p.get(state.MODE),
                timestamp_ms=snap.timestamp_ms,
            )
    return None


def resolve_target(
    table: Table, *, to_snapshot: int | None = None, before_run: str | None = None, to_tag: str | None = None
) -> tuple[int, str]:
    """The snapshot id a rollback goes to, and how it was named."""
    given = [x for x in (to_snapshot, before_run, to_tag) if x not in (None, "")]
    if len(given) != 1:
        raise RollbackError("give exactly one of --to-snapshot, --before-run, --to-tag")
    if to_snapshot not in (None, ""):
        sid = int(to_snapshot)  # type: ignore[arg-type]
        if table.snapshot_by_id(sid) is None:
            raise RollbackError(f"snapshot {sid} is not in the table (expired, or a typo?)")
        return sid, f"to snapshot {sid}"
    if to_tag:
        ref = table.metadata.refs.get(to_tag)
        if ref is None or ref.snapshot_ref_type.value != "tag":
            raise RollbackError(f"no tag {to_tag[:80]!r} on the table (tags: {sorted(list_tags(table)) or 'none'})")
        return ref.snapshot_id, f"to tag {to_tag}"
    assert before_run is not None
    head = table.current_snapshot()
    runs = [
        s
        for s in (chain(table, head.snapshot_id) if head else [])
        if _summary(s).get(state.RUN_ID) == before_run and MAINTENANCE not in _summary(s)
    ]
    if not runs:
        raise RollbackError(f"no commit of run {before_run[:80]!r} on the table's main branch")
    first = runs[-1]  # the run's oldest commit on main
    if first.parent_snapshot_id is None or table.snapshot_by_id(first.parent_snapshot_id) is None:
        raise RollbackError(
            f"run {before_run[:80]!r} made the table's first retained snapshot: nothing to roll back to "
            "(use a full refresh to rebuild)"
        )
    return first.parent_snapshot_id, f"before run {before_run}"


def _rows(table: Table, snapshot_id: int | None) -> int | None:
    return 0 if snapshot_id is None else live_rows(table, snapshot_id)


def plan_rollback(
    table: Table,
    name: str,
    *,
    to_snapshot: int | None = None,
    before_run: str | None = None,
    to_tag: str | None = None,
) -> RollbackPlan:
    """Resolve the target and describe the rollback without changing the table.

    Refuses a target without snowberg state: rolling back to it would lose the watermark.
    """
    target, how = resolve_target(table, to_snapshot=to_snapshot, before_run=before_run, to_tag=to_tag)
    head = table.current_snapshot()
    now = state.read_state(table)
    after = state_at(table, target)
    if after is None:
        raise RollbackError(
            f"snapshot {target} carries no snowberg state (it predates the first load): rolling back to it would "
            "lose the watermark; use a full refresh to rebuild the table instead"
        )
    undone: list[dict[str, Any]] = []
    ancestor = True
    if head is not None:
        ids = [s.snapshot_id for s in chain(table, head.snapshot_id)]
        ancestor = target in ids
        for s in chain(table, head.snapshot_id):
            if s.snapshot_id == target:
                break
            p = _summary(s)
            undone.append(
                {
                    "snapshot_id": s.snapshot_id,
                    "operation": str(s.summary.operation.value) if s.summary is not None else "?",
                    "run_id": p.get(state.RUN_ID),
                    "rows": p.get(state.ROWS),
                    "committed_at": datetime.fromtimestamp(s.timestamp_ms / 1000, tz=UTC).isoformat(timespec="seconds"),
                }
            )
    return RollbackPlan(
        table=name,
        how=how,
        current_snapshot_id=head.snapshot_id if head else None,
        target_snapshot_id=target,
        watermark_now=now.watermark if now else None,
        watermark_after=after.watermark,
        state_snapshot_after=after.snapshot_id,
        rows_now=_rows(table, head.snapshot_id if head else None),
        rows_after=_rows(table, target),
        undone=undone if ancestor else [],
        target_is_ancestor=ancestor,
    )


def rollback(
    table: Table,
    name: str,
    *,
    variables: state.VariableStore | None,
    variable_key: str | None,
    to_snapshot: int | None = None,
    before_run: str | None = None,
    to_tag: str | None = None,
    dry_run: bool = False,
) -> RollbackPlan:
    """Move main to the target snapshot in one commit (state properties with it), then the Variable."""
    plan = plan_rollback(table, name, to_snapshot=to_snapshot, before_run=before_run, to_tag=to_tag)
    after = state_at(table, plan.target_snapshot_id)
    assert after is not None
    plan.variable = variable_key
    plan.variable_value = state.mirror_value(after) if variable_key else None
    plan.dry_run = dry_run
    if dry_run or plan.current_snapshot_id == plan.target_snapshot_id:
        log.info("%s", plan.describe())
        return plan
    from pyiceberg.table.update.snapshot import ManageSnapshots

    refuse_rebase(table)
    tx = table.transaction()
    # Stages main → target with an assertion on main's current head (one commit with the properties below).
    ManageSnapshots(tx).set_current_snapshot(snapshot_id=plan.target_snapshot_id)
    mirrored = {k for k in table.properties if k.startswith(STATE_PROPERTY_PREFIX)}
    if mirrored:
        target_snap = table.snapshot_by_id(after.snapshot_id)
        assert target_snap is not None
        summary = _summary(target_snap)
        updates = {
            k: summary[state.PREFIX + k[len(STATE_PROPERTY_PREFIX) :]]
            for k in mirrored
            if state.PREFIX + k[len(STATE_PROPERTY_PREFIX) :] in summary
        }
        if updates:
            tx.set_properties(updates)
    tx.commit_transaction()
    plan.committed = True
    if variables is not None and variable_key:
        variables.set(variable_key, state.mirror_value(after))
    log.info("%s", plan.describe())
    return plan


# ---------------------------------------------------------------- tags


def list_tags(table: Table) -> dict[str, int]:
    """``{tag name: snapshot id}`` of the table's tags (branches are left out)."""
    return {n: r.snapshot_id for n, r in table.metadata.refs.items() if r.snapshot_ref_type.value == "tag"}


def tag_snapshot(table: Table, tag: str, snapshot_id: int | None = None) -> int:
    """Tag ``snapshot_id`` (default: main's head). Re-tagging the same snapshot is a no-op; moving a tag is refused."""
    if not _TAG.match(tag or ""):
        raise RollbackError(f"invalid tag name {tag[:80]!r}: letters, digits, '_', '.', '-' (max 100)")
    if snapshot_id is None:
        head = table.current_snapshot()
        if head is None:
            raise RollbackError("the table has no snapshot to tag")
        snapshot_id = head.snapshot_id
    if table.snapshot_by_id(snapshot_id) is None:
        raise RollbackError(f"snapshot {snapshot_id} is not in the table")
    existing = table.metadata.refs.get(tag)
    if existing is not None:
        if existing.snapshot_ref_type.value == "tag" and existing.snapshot_id == snapshot_id:
            return snapshot_id
        raise RollbackError(f"ref {tag!r} already exists (snapshot {existing.snapshot_id}); pick another name")
    table.manage_snapshots().create_tag(snapshot_id, tag).commit()
    log.info("tagged snapshot %s as %r", snapshot_id, tag)
    return snapshot_id
