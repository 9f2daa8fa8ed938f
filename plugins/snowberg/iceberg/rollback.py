"""Undo a bad load: move main back to an earlier snapshot — and the watermark with it — and tag snapshots.

The watermark lives in the snapshot summaries, so rolling main back to a
snapshot also rolls the state back: ``state.read_state`` walks from the new
head and finds the state that snapshot carried. What rollback must add:

* the Airflow Variable mirror follows (else the next run would refuse: the
  mirror would be "ahead of the table");
* table properties ``snowberg.state.*``, where a table mirrors its state there,
  are set to the rolled-back values in the same commit;
* the commit asserts main's head as planned, so a load landing in between
  fails the rollback instead of being silently undone;
* the commit records the head it undid (``state.UNDONE_HEAD``) and its
  target (``state.ROLLBACK_TARGET``): a run that read the table just before
  the rollback may write the undone state back into the Variable, and the
  next reconcile adopts the table instead of refusing a Variable "ahead of
  the table" — while main still holds the target (a rollback by another
  engine after this one is refused like any outside rollback).

The next scheduled run then plans from the rolled-back watermark and reloads
that window once, like any other window.

What a rollback refuses, before anything is written:

* a target that is not the last snapshot of a commit (a merge's removal
  snapshot, ``state.is_partial``): main there would hold half a commit while
  the watermark before it says nothing is missing — the error names the
  commit's last snapshot (or ``--before-run``) instead; tags refuse it too;
* ``--before-run`` with a run id more than one writer used: run ids such as
  ``scheduled__<date>`` repeat across DAGs (the load DAG, its ``__checks``
  DAG that propagates deletes), so commits are matched on the run id AND the
  DAG id (``dag_id``; the CLI defaults to the table's load DAG). Snapshots
  written before DAG ids were recorded match on the run id alone, and count
  as one writer per mode (a ``propagate`` commit is not a load): two writers
  left → refused, listing them;
* a target whose state was recorded with another identity (source, cursor
  column, primary key) is fine — the identity recorded with that state is
  restored in the same commit, so the next run of a changed config is refused
  by the identity check instead of reading a new column from an old column's
  watermark. A target written before commits recorded their identity, across
  a full refresh (which may have changed it), is refused naming the refresh.

Tags are Iceberg tag refs: expiry never removes a tagged snapshot.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from snowberg.config.run_params import TAG_PATTERN, RunParamError, parse_snapshot_id
from snowberg.iceberg import state
from snowberg.iceberg.deletes import live_rows
from snowberg.iceberg.gate import refuse_rebase
from snowberg.iceberg.identity import FIELD_NAMES, IDENTITY_KEYS, recorded_identity
from snowberg.iceberg.maintenance import MAINTENANCE

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

log = logging.getLogger(__name__)

STATE_PROPERTY_PREFIX = state.PREFIX + "state."
# Matched with fullmatch: ``$`` would also match before a trailing newline.
_TAG = re.compile(TAG_PATTERN)


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
    # Identity table properties the rollback sets back ({property: value after, None = removed}).
    identity_after: dict[str, str | None] = field(default_factory=dict)
    identity_now: dict[str, str] = field(default_factory=dict)
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
        for k, v in self.identity_after.items():
            lines.append(
                f"  restores {FIELD_NAMES.get(k, k)} {self.identity_now.get(k)!r} → {v!r} (recorded with that state)"
            )
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
    return state.state_at(table, snapshot_id)


def _snapshot_id(value: int | str, flag: str) -> int:
    try:
        sid = parse_snapshot_id(flag, value)
    except RunParamError as exc:
        raise RollbackError(str(exc)) from None
    assert sid is not None
    return sid


def refuse_partial(table: Table, snapshot_id: int, doing: str) -> None:
    """Refuse ``doing`` (a rollback to, a tag on) a snapshot that is not the last of its commit, naming that last."""
    snap = table.snapshot_by_id(snapshot_id)
    if snap is None or not state.is_partial(table, snap):
        return
    p = state.snowberg_props(snap)
    run = p.get(state.RUN_ID) or "?"
    dag = f" of DAG {p[state.DAG_ID]}" if p.get(state.DAG_ID) else ""
    op = snap.summary.operation.value if snap.summary is not None else "?"
    last = state.last_of_commit(table, snap)
    instead = (
        f"use snapshot {last.snapshot_id}, the commit's last (or --before-run {run} to undo the whole commit)"
        if last is not None
        else f"the commit's last snapshot is no longer in the table: use --before-run {run} to undo the whole commit"
    )
    raise RollbackError(
        f"refusing {doing} snapshot {snapshot_id}: it is an early snapshot ({op}) of the commit of run {run}{dag}, "
        f"not its last; with main there the table would hold part of that commit while its state says nothing "
        f"is missing. {instead}"
    )


def _writer(p: dict[str, str]) -> str:
    """Who wrote a commit, for matching run ids: its DAG, or (written before DAG ids were recorded) its mode."""
    if p.get(state.DAG_ID):
        return p[state.DAG_ID]
    return f"a {p.get(state.MODE) or 'snowberg'} commit written before DAG ids were recorded"


def _run_snapshots(table: Table, run_id: str, dag_id: str | None) -> list[Snapshot]:
    """The snapshots on main that run ``run_id`` (of DAG ``dag_id``, when given) wrote, newest first.

    Refuses a run id that more than one writer used (see the module doc).
    """
    head = table.current_snapshot()
    matches = [
        s
        for s in (chain(table, head.snapshot_id) if head else [])
        if _summary(s).get(state.RUN_ID) == run_id and MAINTENANCE not in _summary(s)
    ]
    if not matches:
        raise RollbackError(f"no commit of run {run_id[:80]!r} on the table's main branch")
    writers: dict[str, int] = {}
    for s in matches:
        w = _writer(state.snowberg_props(s))
        writers[w] = writers.get(w, 0) + 1
    if dag_id:
        mine = [s for s in matches if state.snowberg_props(s).get(state.DAG_ID) in (dag_id, None, "")]
        if not mine:
            raise RollbackError(
                f"no commit of run {run_id[:80]!r} of DAG {dag_id!r} on the table's main branch; that run id was "
                f"committed by {', '.join(sorted(writers))}: give that DAG with --dag-id"
            )
        matches = mine
        writers = {}
        for s in matches:
            w = _writer(state.snowberg_props(s))
            writers[w] = writers.get(w, 0) + 1
    if len(writers) > 1:
        listed = "; ".join(f"{w} ({n} snapshot{'s' if n > 1 else ''})" for w, n in sorted(writers.items()))
        raise RollbackError(
            f"run id {run_id[:80]!r} was committed by more than one writer: {listed}. Give the DAG with --dag-id "
            "(the rollback_dag_id param), or name the snapshot to go back to with --to-snapshot"
        )
    return matches


def resolve_target(
    table: Table,
    *,
    to_snapshot: int | str | None = None,
    before_run: str | None = None,
    to_tag: str | None = None,
    dag_id: str | None = None,
) -> tuple[int, str]:
    """The snapshot id a rollback goes to, and how it was named.

    ``dag_id`` narrows ``before_run`` to the commits of that DAG's run.
    """
    given = [x for x in (to_snapshot, before_run, to_tag) if x not in (None, "")]
    if len(given) != 1:
        raise RollbackError("give exactly one of --to-snapshot, --before-run, --to-tag")
    if to_snapshot not in (None, ""):
        sid = _snapshot_id(to_snapshot, "to_snapshot")  # type: ignore[arg-type]
        if table.snapshot_by_id(sid) is None:
            raise RollbackError(f"snapshot {sid} is not in the table (expired, or a typo?)")
        return sid, f"to snapshot {sid}"
    if to_tag:
        ref = table.metadata.refs.get(to_tag)
        if ref is None or ref.snapshot_ref_type.value != "tag":
            raise RollbackError(f"no tag {to_tag[:80]!r} on the table (tags: {sorted(list_tags(table)) or 'none'})")
        return ref.snapshot_id, f"to tag {to_tag}"
    assert before_run is not None
    runs = _run_snapshots(table, before_run, dag_id)
    first = runs[-1]  # the run's oldest snapshot on main (a partial one, when its commit staged several)
    if first.parent_snapshot_id is None or table.snapshot_by_id(first.parent_snapshot_id) is None:
        raise RollbackError(
            f"run {before_run[:80]!r} made the table's first retained snapshot: nothing to roll back to "
            "(use a full refresh to rebuild)"
        )
    dag = state.snowberg_props(first).get(state.DAG_ID)
    return first.parent_snapshot_id, f"before run {before_run}" + (f" of DAG {dag}" if dag else "")


def _rows(table: Table, snapshot_id: int | None) -> int | None:
    return 0 if snapshot_id is None else live_rows(table, snapshot_id)


def identity_after(
    table: Table, name: str, target: int, state_snapshot_id: int, crossed: list[Snapshot]
) -> dict[str, str | None]:
    """The identity properties a rollback to ``target`` sets back: ``{property: value (None: removed)}``.

    The identity recorded with the target's state (in its snapshot's summary)
    comes back with it. A state written before commits recorded it: the
    identity can only have changed by a full refresh (the identity check
    refuses every other run of a changed config), so crossing one is refused.
    """
    now = recorded_identity(table.properties)
    snap = table.snapshot_by_id(state_snapshot_id)
    then = recorded_identity(state.snowberg_props(snap)) if snap is not None else {}
    if then:
        return {k: then.get(k) for k in IDENTITY_KEYS if now.get(k) != then.get(k)}
    if not now:
        return {}
    for s in crossed:
        p = state.snowberg_props(s)
        if p.get(state.MODE) == "full_refresh":
            raise RollbackError(
                f"refusing to roll {name} back to snapshot {target}: that crosses the full refresh of run "
                f"{p.get(state.RUN_ID)!r} (snapshot {s.snapshot_id}), which may have recorded another source, "
                f"cursor column or primary key, and the state at the target (snapshot {state_snapshot_id}) was "
                "written before snowberg recorded the identity with each commit, so the one it was loaded with "
                "cannot be restored. Roll back to a snapshot after that refresh, or run a full refresh."
            )
    return {}


def plan_rollback(
    table: Table,
    name: str,
    *,
    to_snapshot: int | str | None = None,
    before_run: str | None = None,
    to_tag: str | None = None,
    dag_id: str | None = None,
) -> RollbackPlan:
    """Resolve the target and describe the rollback without changing the table.

    Refuses a target without snowberg state (rolling back to it would lose the
    watermark), one that is not the last snapshot of a commit, and one whose
    identity cannot be restored (see the module doc).
    """
    target, how = resolve_target(table, to_snapshot=to_snapshot, before_run=before_run, to_tag=to_tag, dag_id=dag_id)
    refuse_partial(table, target, "a rollback to")
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
    crossed: list[Snapshot] = []
    if head is not None:
        head_chain = chain(table, head.snapshot_id)
        target_chain = chain(table, target)
        ids = {s.snapshot_id for s in head_chain}
        target_ids = {s.snapshot_id for s in target_chain}
        ancestor = target in ids
        crossed = [s for s in head_chain if s.snapshot_id not in target_ids]
        crossed += [s for s in target_chain if s.snapshot_id not in ids]
        for s in head_chain:
            if s.snapshot_id == target:
                break
            p = _summary(s)
            undone.append(
                {
                    "snapshot_id": s.snapshot_id,
                    "operation": str(s.summary.operation.value) if s.summary is not None else "?",
                    "run_id": p.get(state.RUN_ID),
                    "dag_id": p.get(state.DAG_ID),
                    "rows": p.get(state.ROWS),
                    "committed_at": datetime.fromtimestamp(s.timestamp_ms / 1000, tz=UTC).isoformat(timespec="seconds"),
                }
            )
    ident = identity_after(table, name, target, after.snapshot_id, crossed)
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
        identity_after=ident,
        identity_now={k: v for k, v in recorded_identity(table.properties).items() if k in ident},
        target_is_ancestor=ancestor,
    )


def rollback(
    table: Table,
    name: str,
    *,
    variables: state.VariableStore | None,
    variable_key: str | None,
    to_snapshot: int | str | None = None,
    before_run: str | None = None,
    to_tag: str | None = None,
    dag_id: str | None = None,
    dry_run: bool = False,
) -> RollbackPlan:
    """Move main to the target snapshot in one commit (state and identity properties with it), then the Variable."""
    plan = plan_rollback(table, name, to_snapshot=to_snapshot, before_run=before_run, to_tag=to_tag, dag_id=dag_id)
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
    updates: dict[str, str] = {k: v for k, v in plan.identity_after.items() if v is not None}
    if plan.current_snapshot_id is not None:
        # A run that read the table before this commit may write the undone state back into the Variable;
        # recording the undone head and the target lets the next reconcile recognise that state as rolled back,
        # not lost, while main is where this rollback left it (``state.undone_by_rollback``).
        updates[state.UNDONE_HEAD] = str(plan.current_snapshot_id)
        updates[state.ROLLBACK_TARGET] = str(plan.target_snapshot_id)
    removed = [k for k, v in plan.identity_after.items() if v is None]
    mirrored = {k for k in table.properties if k.startswith(STATE_PROPERTY_PREFIX)}
    if mirrored:
        target_snap = table.snapshot_by_id(after.snapshot_id)
        assert target_snap is not None
        summary = _summary(target_snap)
        for k in mirrored:
            key = state.PREFIX + k[len(STATE_PROPERTY_PREFIX) :]
            if key in summary:
                updates[k] = summary[key]
            elif key in (state.DAG_ID, *state.PER_COMMIT_KEYS):
                removed.append(k)  # recorded by a later commit: the target's state has none
    if updates:
        tx.set_properties(updates)
    if removed:
        tx.remove_properties(*removed)
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


def tag_snapshot(table: Table, tag: str, snapshot_id: int | str | None = None) -> int:
    """Tag ``snapshot_id`` (default: main's head). Re-tagging the same snapshot is a no-op; moving a tag is refused.

    A snapshot that is not the last of its commit is refused (a tag is a rollback target).
    """
    if not _TAG.fullmatch(tag or ""):
        raise RollbackError(f"invalid tag name {tag[:80]!r}: letters, digits, '_', '.', '-' (max 100)")
    if snapshot_id is None or snapshot_id == "":
        head = table.current_snapshot()
        if head is None:
            raise RollbackError("the table has no snapshot to tag")
        sid = head.snapshot_id
    else:
        sid = _snapshot_id(snapshot_id, "tag_snapshot")
    if table.snapshot_by_id(sid) is None:
        raise RollbackError(f"snapshot {sid} is not in the table")
    refuse_partial(table, sid, "a tag on")
    existing = table.metadata.refs.get(tag)
    if existing is not None:
        if existing.snapshot_ref_type.value == "tag" and existing.snapshot_id == sid:
            return sid
        raise RollbackError(f"ref {tag!r} already exists (snapshot {existing.snapshot_id}); pick another name")
    table.manage_snapshots().create_tag(sid, tag).commit()
    log.info("tagged snapshot %s as %r", sid, tag)
    return sid
