"""What changed in a source Iceberg table since the last synced snapshot.

The contract, stated once (docs/lake-to-snowflake.md repeats it):

* The unit of progress is a source snapshot id. A sync run covers the
  snapshots after the last synced one, up to the source's current snapshot
  when the run plans, and records that id with the rows it writes.
* **append** snapshots contribute the data files they added (read through
  pyiceberg's incremental append scan, one scan per snapshot so every row
  knows the snapshot that added it).
* **replace** snapshots (compaction, file rewrites) change no rows: skipped.
* **overwrite** and **delete** snapshots (and anything else, e.g. an append
  that carries delete files) change or remove rows the target already holds.
  An append-only copy cannot replay them, so the run either refuses
  (``on_rewrite: fail``, the default: a human decides) or reloads the whole
  table at the current snapshot (``on_rewrite: full_reload``: the target is
  emptied and refilled in the same commit/transaction).
* For a table with a key (``key_columns``, by default the source schema's
  Iceberg identifier fields), overwrite and delete snapshots made of data
  files and position delete files are **changes**, not rewrites: the run
  reads the rows of the data files added since the synced snapshot (live at
  the current one) and the keys of the rows removed since then (rows of
  removed data files, and rows newly hidden by position deletes), and the
  target applies them by key (``read_changes``). The cost follows the files
  the change touched, not the table. Equality deletes still count as
  rewrites.
* The first sync reads the table at its current snapshot (a full scan that
  honours delete files), never the history.
* If the last synced snapshot is no longer an ancestor of the current one
  (expired by maintenance, a rollback, the table was replaced — its UUID
  changed), incremental progress is impossible: refuse, or full reload.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from snowberg.iceberg.state import ancestors

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

log = logging.getLogger(__name__)


class OnRewrite(enum.StrEnum):
    """What a sync does when the source rewrote rows it cannot replay (``on_rewrite`` in syncs.yaml).

    fail:        refuse; nothing is written and a human decides
    full_reload: empty the target and refill it from the source's current snapshot, in one commit
    """

    FAIL = "fail"  # refuse: a human decides
    FULL_RELOAD = "full_reload"  # empty the target and refill it from the current snapshot, in one commit


class SyncMode(enum.StrEnum):
    """What one sync run reads from the source (recorded with the target's sync state)."""

    NOTHING_NEW = "nothing_new"  # the source's current snapshot is already synced
    INCREMENTAL = "incremental"  # the files added by append snapshots after the synced one
    CHANGES = "changes"  # rows and keys changed after the synced snapshot, applied by key
    INITIAL = "initial"  # the first sync: the whole source at its current snapshot
    FULL_RELOAD = "full_reload"  # the whole source at its current snapshot, replacing the target's rows


class StepAction(enum.StrEnum):
    """What an append-only sync does with one source snapshot (``classify``)."""

    LOAD = "load"  # an append: its added files are read
    SKIP = "skip"  # a replace (compaction): no row changed
    REWRITE = "rewrite"  # an overwrite, delete, or append with delete files: rows already synced changed


class SourceRewriteError(RuntimeError):
    """The source changed in a way an append-only sync cannot replay (and no full reload was allowed)."""


@dataclass(frozen=True, kw_only=True)
class SnapshotStep:
    snapshot_id: int
    operation: str
    action: StepAction
    added_records: int
    added_files: int
    note: str = ""


@dataclass(kw_only=True)
class ChangePlan:
    """The source snapshot range of one run, fixed when the run plans."""

    source_uuid: str
    mode: SyncMode
    from_snapshot_id: int | None  # last synced (exclusive)
    to_snapshot_id: int | None  # the source's current snapshot at plan time (inclusive)
    steps: list[SnapshotStep] = field(default_factory=list)
    reason: str = ""
    key_columns: list[str] = field(default_factory=list)  # "changes" plans: the row identity

    @property
    def load_steps(self) -> list[SnapshotStep]:
        return [s for s in self.steps if s.action == StepAction.LOAD]

    @property
    def expected_rows(self) -> int | None:
        """Rows the added files hold (incremental only; a full scan is counted while read)."""
        if self.mode != SyncMode.INCREMENTAL:
            return None
        return sum(s.added_records for s in self.load_steps)

    def describe(self) -> str:
        if self.mode == SyncMode.NOTHING_NEW:
            return f"nothing new (source at snapshot {self.to_snapshot_id}, already synced)"
        if self.mode in (SyncMode.INITIAL, SyncMode.FULL_RELOAD):
            return f"{self.mode} of the source at snapshot {self.to_snapshot_id}" + (
                f": {self.reason}" if self.reason else ""
            )
        if self.mode == SyncMode.CHANGES:
            return (
                f"changes by key {self.key_columns} in snapshots after {self.from_snapshot_id} up to "
                f"{self.to_snapshot_id} ({', '.join(f'{s.snapshot_id} {s.operation}' for s in self.steps)})"
            )
        loads = self.load_steps
        skips = [s for s in self.steps if s.action == StepAction.SKIP]
        return (
            f"snapshots after {self.from_snapshot_id} up to {self.to_snapshot_id}: {len(loads)} append(s) with "
            f"{self.expected_rows:,} rows in {sum(s.added_files for s in loads)} file(s)"
            + (
                f", {len(skips)} skipped ({', '.join(f'{s.snapshot_id} {s.operation}' for s in skips)})"
                if skips
                else ""
            )
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # Plain strings in XCom: readable by any deserialiser, equal to the members.
        d["mode"] = self.mode.value
        for step in d["steps"]:
            step["action"] = step["action"].value
        d["expected_rows"] = self.expected_rows
        return d


def _summary_int(snap: Snapshot, key: str) -> int:
    if snap.summary is None:
        return 0
    try:
        return int(snap.summary.additional_properties.get(key, "0") or 0)
    except ValueError:
        return 0


def _operation(snap: Snapshot) -> str:
    if snap.summary is None:
        return "unknown"
    op = snap.summary.operation
    return str(getattr(op, "value", op))


def ancestors_after(table: Table, last_id: int, to_id: int) -> list[Snapshot] | None:
    """Snapshots after ``last_id`` up to ``to_id`` (oldest first), or None if ``last_id`` is not an ancestor."""
    chain: list[Snapshot] = []
    for snap in ancestors(table, to_id):
        if snap.snapshot_id == last_id:
            chain.reverse()
            return chain
        chain.append(snap)
    return None


def classify(snap: Snapshot) -> SnapshotStep:
    """What an append-only sync does with one source snapshot."""
    op = _operation(snap)
    added_records = _summary_int(snap, "added-records")
    added_files = _summary_int(snap, "added-data-files")
    note = ""
    if op == "append":
        action = StepAction.LOAD
        if (
            _summary_int(snap, "added-delete-files")
            or _summary_int(snap, "added-position-deletes")
            or _summary_int(snap, "added-equality-deletes")
        ):
            action, note = StepAction.REWRITE, "append with delete files"
    elif op == "replace":
        action, note = StepAction.SKIP, "rewrite of existing rows (e.g. compaction): no row changes"
        added_records = added_files = 0
    else:
        action, note = StepAction.REWRITE, f"{op} snapshot changes or removes rows already synced"
    return SnapshotStep(
        snapshot_id=snap.snapshot_id,
        operation=op,
        action=action,
        added_records=added_records,
        added_files=added_files,
        note=note,
    )


def identifier_columns(table: Table) -> list[str]:
    """The source schema's Iceberg identifier fields (its row identity), by name."""
    schema = table.schema()
    return [schema.find_column_name(i) or "" for i in sorted(schema.identifier_field_ids)]


class KeyColumnsError(ValueError):
    """``key_columns`` names a column the source lacks, or one that cannot identify a row."""


def resolve_key_columns(table: Table, key_columns: Sequence[str] | None) -> list[str]:
    """The row identity a sync applies changes by, checked against the source's current schema.

    ``None``: the source's Iceberg identifier fields (snowberg merge tables
    declare their ``primary_key`` there; other writers may declare none, then
    there is no key). Given names are matched case-insensitively (syncs.yaml
    may say ``ORDER_ID`` for the lake's ``order_id``) and returned as the
    source spells them; a column the source lacks, or a nested or floating
    point one, fails before anything is read or written.
    """
    if key_columns is None:
        return identifier_columns(table)
    from pyiceberg.types import DoubleType, FloatType

    schema = table.schema()
    by_lower = {f.name.lower(): f for f in schema.fields}
    out: list[str] = []
    problems: list[str] = []
    for k in key_columns:
        f = by_lower.get(k.lower())
        if f is None:
            problems.append(f"{k!r} is not a column of the source")
        elif not f.field_type.is_primitive or isinstance(f.field_type, (DoubleType, FloatType)):
            problems.append(f"{k!r} is {f.field_type}, which cannot identify a row")
        else:
            out.append(f.name)
    if problems:
        raise KeyColumnsError(
            f"source table {'.'.join(table.name())}: key_columns: {'; '.join(problems)} (the source has "
            f"{', '.join(f.name for f in schema.fields)}). Nothing was written."
        )
    return out


def plan_changes(
    table: Table,
    last_synced: int | None,
    *,
    synced_uuid: str | None = None,
    on_rewrite: OnRewrite | str = OnRewrite.FAIL,
    key_columns: Sequence[str] = (),
) -> ChangePlan:
    """Fix what this run reads from the source (no data is read here, only metadata).

    With ``key_columns``, overwrite/delete snapshots become a ``changes``
    plan instead of a refusal or a full reload.
    """
    uuid = str(table.metadata.table_uuid)
    current = table.current_snapshot()
    to_id = current.snapshot_id if current is not None else None

    def full(reason: str) -> ChangePlan:
        if on_rewrite != OnRewrite.FULL_RELOAD:
            raise SourceRewriteError(
                f"source table {'.'.join(table.name())}: {reason}. An append-only sync cannot replay this. "
                "Set on_rewrite: full_reload to reload the whole table into the target (in one commit), "
                "or rebuild the target yourself and reset its sync state."
            )
        log.warning("full reload of the source at snapshot %s: %s", to_id, reason)
        return ChangePlan(
            source_uuid=uuid,
            mode=SyncMode.FULL_RELOAD,
            from_snapshot_id=last_synced,
            to_snapshot_id=to_id,
            steps=[],
            reason=reason,
        )

    if synced_uuid is not None and synced_uuid != uuid:
        return full(f"the table was replaced (its UUID is {uuid}, the target was synced from {synced_uuid})")
    if last_synced is None:
        if to_id is None:
            return ChangePlan(
                source_uuid=uuid,
                mode=SyncMode.NOTHING_NEW,
                from_snapshot_id=None,
                to_snapshot_id=None,
                steps=[],
                reason="the source has no snapshot yet",
            )
        return ChangePlan(
            source_uuid=uuid,
            mode=SyncMode.INITIAL,
            from_snapshot_id=None,
            to_snapshot_id=to_id,
            steps=[],
            reason="first sync: the source at its current snapshot",
        )
    if to_id == last_synced:
        return ChangePlan(
            source_uuid=uuid, mode=SyncMode.NOTHING_NEW, from_snapshot_id=last_synced, to_snapshot_id=to_id
        )
    if to_id is None:
        return full(f"the source has no current snapshot but snapshot {last_synced} was synced")
    chain = ancestors_after(table, last_synced, to_id)
    if chain is None:
        return full(
            f"the last synced snapshot {last_synced} is not an ancestor of the current snapshot {to_id} "
            "(expired by snapshot maintenance, or the table was rolled back)"
        )
    steps = [classify(s) for s in chain]
    rewrites = [s for s in steps if s.action == StepAction.REWRITE]
    if rewrites and key_columns and not any(_summary_int(s, "added-equality-deletes") for s in chain):
        return ChangePlan(
            source_uuid=uuid,
            mode=SyncMode.CHANGES,
            from_snapshot_id=last_synced,
            to_snapshot_id=to_id,
            steps=steps,
            key_columns=list(key_columns),
        )
    if rewrites:
        first = rewrites[0]
        return full(f"snapshot {first.snapshot_id} is an {first.operation} ({first.note})")
    return ChangePlan(
        source_uuid=uuid, mode=SyncMode.INCREMENTAL, from_snapshot_id=last_synced, to_snapshot_id=to_id, steps=steps
    )


def read_batches(
    table: Table, plan: ChangePlan, *, columns: Sequence[str] | None = None
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """``(source snapshot id, batch)`` pairs for the plan, in snapshot order, in bounded memory.

    Incremental plans read each append snapshot's added files through
    pyiceberg's incremental append scan (projected on the current schema);
    initial and full-reload plans scan the table at ``to_snapshot_id``.
    ``columns``: only these (the key check reads the key columns alone).
    """
    if plan.mode == SyncMode.NOTHING_NEW or plan.to_snapshot_id is None:
        return
    fields = tuple(columns) if columns is not None else ("*",)
    if plan.mode in (SyncMode.INITIAL, SyncMode.FULL_RELOAD):
        reader = table.scan(snapshot_id=plan.to_snapshot_id, selected_fields=fields).to_arrow_batch_reader()
        for batch in reader:
            yield plan.to_snapshot_id, batch
        return
    for step in plan.load_steps:
        for batch in append_scan(table, step.snapshot_id, selected_fields=fields).to_arrow_batch_reader():
            yield step.snapshot_id, batch


def append_scan(table: Table, snapshot_id: int, *, selected_fields: tuple[str, ...] = ("*",)) -> Any:
    """pyiceberg's incremental append scan of the data files one append snapshot added (``selected_fields``:
    the columns read, all by default)."""
    snap = table.snapshot_by_id(snapshot_id)
    assert snap is not None
    if snap.parent_snapshot_id is None:
        return table.incremental_append_scan(to_snapshot_id_inclusive=snapshot_id, selected_fields=selected_fields)
    return table.incremental_append_scan(
        from_snapshot_id_exclusive=snap.parent_snapshot_id,
        to_snapshot_id_inclusive=snapshot_id,
        selected_fields=selected_fields,
    )


@dataclass(kw_only=True)
class RowChanges:
    """What a ``changes`` plan applies to a keyed target: rows to (re)write, keys to remove.

    ``upserts`` are the rows live at the plan's last snapshot in data files
    added after the synced one, each with the snapshot that added its file;
    ``deleted_keys`` are the keys of rows live at the synced snapshot and
    gone at the last one, minus keys that ``upserts`` write again;
    ``removed_keys`` the keys of all those rows, one per row (the rows a
    keyed target must remove: ``sync.keys.check_removed``).
    """

    upserts: list[tuple[int, pa.RecordBatch]]
    deleted_keys: pa.Table
    removed_keys: pa.Table | None = None

    @property
    def upsert_rows(self) -> int:
        return sum(b.num_rows for _, b in self.upserts)

    @property
    def removed_rows(self) -> int:
        """Rows live at the synced snapshot and gone at the last one (each removed, or rewritten by ``upserts``)."""
        return self.removed_keys.num_rows if self.removed_keys is not None else self.deleted_keys.num_rows


def _live_files(table: Table, snapshot_id: int) -> dict[str, Any]:
    """``{data file path: FileScanTask}`` live at a snapshot (metadata only)."""
    return {t.file.file_path: t for t in table.scan(snapshot_id=snapshot_id).plan_files()}


def _added_by(table: Table, snapshot_id: int) -> dict[str, int]:
    """``{data file path: id of the snapshot that added it}`` for the files live at a snapshot."""
    from pyiceberg.manifest import ManifestContent

    snap = table.snapshot_by_id(snapshot_id)
    assert snap is not None
    out: dict[str, int] = {}
    for m in snap.manifests(table.io):
        if m.content != ManifestContent.DATA:
            continue
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True):
            out[e.data_file.file_path] = int(e.snapshot_id or snapshot_id)
    return out


def read_changes(table: Table, plan: ChangePlan, *, columns: Sequence[str] | None = None) -> RowChanges:
    """The rows and keys a ``changes`` plan applies; reads only the files the change touched.

    ``columns``: the upserted rows' columns to read (default: all; the
    visibility check reads the key columns alone).

    Unchanged data files are never opened, nor their delete files: a data file
    live at both ends with the same delete files did not change. A file that
    gained position deletes is read only for its key columns, only in the row
    groups holding the newly deleted positions (``iceberg.merge.read_columns_at``);
    each delete file is read once.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    from snowberg.iceberg.merge import deleted_positions, read_columns_at, read_columns_by_id

    assert plan.mode == SyncMode.CHANGES and plan.from_snapshot_id is not None and plan.to_snapshot_id is not None
    schema = table.schema()
    keys = plan.key_columns
    field_ids = [schema.find_field(k).field_id for k in keys]
    key_schema = pa.schema([pa.field(k, _arrow_type(schema.find_field(k).field_type)) for k in keys])
    before = _live_files(table, plan.from_snapshot_id)
    after = _live_files(table, plan.to_snapshot_id)
    added_by = _added_by(table, plan.to_snapshot_id)

    new_tasks = [t for p, t in after.items() if p not in before]
    projected = schema.select(*columns) if columns is not None else schema
    scan = ArrowScan(table.metadata, table.io, projected, AlwaysTrue())
    upserts: list[tuple[int, pa.RecordBatch]] = []
    for task in new_tasks:
        for b in scan.to_record_batches([task]):
            if b.num_rows:
                upserts.append((added_by.get(task.file.file_path, plan.to_snapshot_id), b))

    # Each position delete file is read once (columns file_path, pos), however many data files it names.
    delete_cache: dict[str, pa.Table] = {}

    def positions(path: str, delete_files: Any) -> pa.Array:
        return deleted_positions(table.io, path, delete_files, cache=delete_cache)

    mapping = table.metadata.name_mapping()  # files registered without field ids (push-down unload)
    removed: list[pa.Table] = []
    unchanged = 0
    for path, task in before.items():
        old_deletes = {d.file_path: d for d in task.delete_files}
        if path in after:
            new_deletes = [d for d in after[path].delete_files if d.file_path not in old_deletes]
            if not new_deletes:
                unchanged += 1  # same delete files at both ends: no row of this file changed
                continue
            newly = positions(path, new_deletes)
            if old_deletes and len(newly):
                gone_before = positions(path, old_deletes.values())
                newly = newly.filter(pc.invert(pc.is_in(newly, value_set=gone_before)))
            if len(newly) == 0:
                continue
            kt = read_columns_at(table.io, path, field_ids, keys, newly, name_mapping=mapping)
            if kt is not None:
                removed.append(kt)
        else:
            kt = read_columns_by_id(table.io, path, field_ids, keys, name_mapping=mapping)
            if kt is not None:
                gone_before = positions(path, old_deletes.values())
                live = pc.invert(pc.is_in(pa.array(range(kt.num_rows), pa.int64()), value_set=gone_before))
                removed.append(kt.filter(live))
    deleted = pa.concat_tables([t.cast(key_schema) for t in removed]) if removed else key_schema.empty_table()
    removed_keys = deleted
    if upserts and deleted.num_rows:
        written = pa.Table.from_batches([b.select(keys) for _, b in upserts]).cast(key_schema)
        deleted = deleted.join(written, keys=keys, join_type="left anti")
    log.info(
        "changes %s → %s: %d new data files (%s rows), %s keys removed; %d of %d files live before were unchanged",
        plan.from_snapshot_id,
        plan.to_snapshot_id,
        len(new_tasks),
        f"{sum(b.num_rows for _, b in upserts):,}",
        f"{deleted.num_rows:,}",
        unchanged,
        len(before),
    )
    return RowChanges(upserts=upserts, deleted_keys=deleted, removed_keys=removed_keys)


def _arrow_type(iceberg_type: Any) -> pa.DataType:
    from snowberg.iceberg.tables import arrow_type_for

    return arrow_type_for(iceberg_type)
