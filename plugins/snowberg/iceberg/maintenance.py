"""Table maintenance that never loses snowberg's state: expire snapshots, compact, remove orphan files.

Tables loaded every hour grow a snapshot per run, small files from small
incremental windows, half-empty files left by copy-on-write merges, and
orphan files from killed runs. The three operations here undo that, each with
one rule that keeps the exactly-once invariant:

* **expire** never removes a snapshot a tag or branch keeps, nor any snapshot
  on the main branch from the head down to the one that carries the
  watermark (``state.read_state`` walks that chain: cutting it would lose the
  state);
* **compact** rewrites small data files (and folds delete files) in one
  ``replace`` commit that copies the current state into its summary, asserts
  the snapshot it was planned on and never rebases: a load committing at the
  same moment makes exactly one of the two fail, and its retry succeeds. The
  rows read and the rows written are compared (count and content checksum)
  before the commit; a difference fails the task with nothing committed;
* **orphans** only deletes files under the table location that no retained
  metadata references and that are older than a safety age of at least a day
  (a running load's fresh files are never touched), and never a file staged
  for a pending commit (mapped slices' staging folder and every file a staging
  manifest names), however old.

``MaintenanceSettings`` is the ``maintenance:`` section of a table config; it
imports nothing heavy, so DAG parsing stays cheap.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from snowberg.config.maintenance_settings import check_orphan_age
from snowberg.core import faults
from snowberg.iceberg import deletes, staging, state
from snowberg.iceberg.gate import refuse_rebase
from snowberg.iceberg.staging import ListedFile

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table

log = logging.getLogger(__name__)


TARGET_FILE_SIZE = "write.target-file-size-bytes"
DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024  # pyiceberg's and Iceberg's default
MAINTENANCE = state.MAINTENANCE


class CompactionVerificationError(RuntimeError):
    """The rewritten files do not hold exactly the rows they replace; nothing was committed."""


# ---------------------------------------------------------------- expiry


@dataclass(kw_only=True)
class ExpireResult:
    """What snapshot expiry removed and kept (``protected``: see ``protected_snapshot_ids``)."""

    expired: list[int]
    kept: int
    protected: list[int]
    metadata_bytes_before: int
    metadata_bytes_after: int
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def protected_snapshot_ids(table: Table) -> set[int]:
    """Snapshots expiry must keep: every ref's head, tags, and main's chain down to the state snapshot.

    ``state.read_state`` finds the watermark by walking parent links from
    main's head; a missing link ends the walk, so every snapshot between the
    head and the state snapshot is kept, not only the state snapshot itself.
    """
    keep = {ref.snapshot_id for ref in table.metadata.refs.values()}
    st = state.read_state(table)
    if st is not None:
        for snap in state.ancestors(table):
            keep.add(snap.snapshot_id)
            if snap.snapshot_id == st.snapshot_id:
                break
    return keep


def metadata_size(table: Table) -> int:
    """Size in bytes of the table's current metadata file (what every reader parses first)."""
    return int(len(table.io.new_input(table.metadata_location).open().read()))


def expire_snapshots(
    table: Table,
    *,
    older_than: timedelta,
    min_snapshots: int,
    now: datetime | None = None,
    dry_run: bool = False,
) -> ExpireResult:
    """Expire snapshots older than ``older_than`` beyond the newest ``min_snapshots``, never a protected one.

    The commit asserts main's head as it was when the protected set was
    computed, so a load landing in between fails the expiry (the next run
    retries) instead of invalidating what was protected.
    """
    from pyiceberg.table.update import AssertRefSnapshotId, RemoveSnapshotsUpdate

    now = now or datetime.now(UTC)
    cutoff_ms = int((now - older_than).timestamp() * 1000)
    protected = protected_snapshot_ids(table)
    newest_first = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms, reverse=True)
    keep_recent = {s.snapshot_id for s in newest_first[:min_snapshots]}
    expired = [
        s.snapshot_id
        for s in newest_first
        if s.timestamp_ms < cutoff_ms and s.snapshot_id not in protected and s.snapshot_id not in keep_recent
    ]
    before = metadata_size(table)
    log.info(
        "expire: %d snapshots, %d older than %s, %d protected (refs, tags, chain to the state snapshot): expiring %d%s",
        len(newest_first),
        sum(1 for s in newest_first if s.timestamp_ms < cutoff_ms),
        older_than,
        len(protected),
        len(expired),
        " (dry run)" if dry_run else "",
    )
    after = before
    if expired and not dry_run:
        head = table.metadata.current_snapshot_id
        tx = table.transaction()
        # pyiceberg's ExpireSnapshots builder stages no requirement; we stage the same
        # update with an assertion on main's head (Transaction._apply is how its own
        # builders stage updates).
        update: Any = RemoveSnapshotsUpdate
        assertion: Any = AssertRefSnapshotId  # pydantic models: their field aliases confuse mypy
        tx._apply((update(snapshot_ids=expired),), (assertion(snapshot_id=head, ref="main"),))
        committed = tx.commit_transaction()
        after = metadata_size(committed)
        log.info("expire: removed %d snapshots; metadata file %s → %s bytes", len(expired), before, after)
    return ExpireResult(
        expired=expired,
        kept=len(newest_first) - (0 if dry_run else len(expired)),
        protected=sorted(protected),
        metadata_bytes_before=before,
        metadata_bytes_after=after,
        dry_run=dry_run,
    )


# ---------------------------------------------------------------- compaction


@dataclass(kw_only=True)
class CompactionResult:
    """What a compaction rewrote, or why it did nothing."""

    status: str  # committed | nothing_to_do | dry_run
    files_before: int
    files_after: int
    rewritten_files: int
    delete_files_removed: int
    written_files: int
    rows_rewritten: int
    checksum: str | None
    snapshot_id: int | None
    base_snapshot_id: int | None
    target_file_size: int
    seconds: float
    groups: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def content_checksum(batches: Iterable[pa.RecordBatch]) -> tuple[int, str]:
    """(rows, checksum) of a set of rows, independent of row order and file layout.

    The sum (mod 2**64) of a 64-bit BLAKE2 hash of each row's values: equal for
    the same multiset of rows, however they are split into files or ordered.
    A duplicated or lost row changes it. (Arrow has no row-hash kernel, hence
    this small loop; it runs over the rewritten files only.)
    """
    total = 0
    rows = 0
    for b in batches:
        for row in b.to_pylist():
            h = hashlib.blake2b(repr(tuple(row.values())).encode(), digest_size=8).digest()
            total = (total + int.from_bytes(h, "big")) % (1 << 64)
            rows += 1
    return rows, f"{total:016x}"


def carried_state_props(table: Table, operation: str) -> dict[str, str]:
    """The state a maintenance commit carries (``state.current_state_props``): no row loaded, the operation named."""
    props = state.current_state_props(table)
    if props:
        props[state.ROWS] = "0"
    props[MAINTENANCE] = operation
    return props


def _partition_label(spec: Any, partition: Any) -> str:
    if spec is None or not spec.fields:
        return "<unpartitioned>"
    return ", ".join(f"{pf.name}={partition[i]}" for i, pf in enumerate(spec.fields))


def target_file_size(table: Table, override: int | None = None) -> int:
    """The size compaction aims for: ``override``, else the table's ``write.target-file-size-bytes``."""
    if override:
        return override
    return int(table.properties.get(TARGET_FILE_SIZE, DEFAULT_TARGET_FILE_SIZE))


def compact(
    table: Table,
    *,
    target_size: int | None = None,
    small_file_ratio: float = 0.75,
    min_input_files: int = 2,
    dry_run: bool = False,
) -> CompactionResult:
    """Rewrite small data files (per partition) into files near the target size, in one REPLACE commit.

    A partition's files are rewritten when it has at least ``min_input_files``
    files under ``small_file_ratio × target`` (or any file with delete files
    attached, whose deletes are folded in). The rows read from the old files
    (deletes applied) and the rows read back from the new files must have the
    same count and content checksum, else nothing is committed.
    """
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files
    from pyiceberg.table import FileScanTask

    started = time.monotonic()
    refuse_rebase(table)
    base = table.current_snapshot()
    target = target_file_size(table, target_size)
    if base is None:
        return CompactionResult(
            status="nothing_to_do",
            files_before=0,
            files_after=0,
            rewritten_files=0,
            delete_files_removed=0,
            written_files=0,
            rows_rewritten=0,
            checksum=None,
            snapshot_id=None,
            base_snapshot_id=None,
            target_file_size=target,
            seconds=0.0,
        )
    threshold = int(target * small_file_ratio)
    tasks = list(table.scan(snapshot_id=base.snapshot_id).plan_files())
    files_before = len(tasks)
    groups: dict[tuple[int, Any], list[Any]] = {}
    for t in tasks:
        part: Any = t.file.partition
        key = (t.file.spec_id, tuple(part) if part is not None else ())
        groups.setdefault(key, []).append(t)
    picked: dict[tuple[int, Any], list[Any]] = {}
    for key, ts in groups.items():
        small = [t for t in ts if t.file.file_size_in_bytes < threshold or t.delete_files]
        if len(small) >= min_input_files or any(t.delete_files for t in small):
            picked[key] = small
    # A delete file goes only when every data file it applies to is rewritten.
    users: dict[str, list[Any]] = {}
    for t in tasks:
        for d in t.delete_files:
            users.setdefault(d.file_path, []).append(t)
    picked_paths = {t.file.file_path for ts in picked.values() for t in ts}
    delete_files = {
        d.file_path: d
        for ts in picked.values()
        for t in ts
        for d in t.delete_files
        if all(u.file.file_path in picked_paths for u in users[d.file_path])
    }
    # Delete files whose data files are all gone (left by a copy-on-write removal before the gate dropped them).
    dangling = deletes.dangling_delete_files(table.io, base)
    delete_files.update((d.file_path, d) for d in dangling)
    n_in = sum(len(ts) for ts in picked.values())
    specs = table.specs()
    log.info(
        "compact: %d data files in %d partitions; %d partitions hold %d files under %s bytes (target %s); "
        "%d delete files of removed data files%s",
        files_before,
        len(groups),
        len(picked),
        n_in,
        f"{threshold:,}",
        f"{target:,}",
        len(dangling),
        " (dry run)" if dry_run else "",
    )
    group_info = [
        {
            "partition": _partition_label(specs.get(k[0]), ts[0].file.partition),
            "files": len(ts),
            "bytes": sum(t.file.file_size_in_bytes for t in ts),
        }
        for k, ts in picked.items()
    ]
    if not (picked or dangling) or dry_run:
        return CompactionResult(
            status="dry_run" if dry_run and (picked or dangling) else "nothing_to_do",
            files_before=files_before,
            files_after=files_before,
            rewritten_files=n_in,
            delete_files_removed=len(delete_files),
            written_files=0,
            rows_rewritten=0,
            checksum=None,
            snapshot_id=None,
            base_snapshot_id=base.snapshot_id,
            target_file_size=target,
            seconds=time.monotonic() - started,
            groups=group_info,
        )

    md = table.metadata
    if TARGET_FILE_SIZE not in md.properties or target_size:
        md = md.model_copy(update={"properties": {**md.properties, TARGET_FILE_SIZE: str(target)}})
    schema = md.schema()
    write_uuid = uuid.uuid4()
    counter = itertools.count(0)
    written: list[Any] = []
    rows_total = 0
    sum_in = sum_out = 0
    try:
        for i, (_key, ts) in enumerate(picked.items(), 1):
            data = ArrowScan(md, table.io, schema, AlwaysTrue()).to_table(ts)
            rows_in, ck_in = content_checksum(data.to_batches())
            new_files = list(_dataframe_to_data_files(md, data, table.io, write_uuid=write_uuid, counter=counter))
            for f in new_files:
                f.spec_id = md.default_spec_id  # set by the manifest writer otherwise; the read-back needs it
            written.extend(new_files)
            back = ArrowScan(md, table.io, schema, AlwaysTrue()).to_table([FileScanTask(f) for f in new_files])
            rows_out, ck_out = content_checksum(back.to_batches())
            if (rows_in, ck_in) != (rows_out, ck_out):
                raise CompactionVerificationError(
                    f"partition {group_info[i - 1]['partition']}: read {rows_in} rows (checksum {ck_in}) from "
                    f"{len(ts)} files, the rewritten files hold {rows_out} rows (checksum {ck_out}); nothing committed"
                )
            rows_total += rows_in
            sum_in = (sum_in + int(ck_in, 16)) % (1 << 64)
            sum_out = (sum_out + int(ck_out, 16)) % (1 << 64)
            log.info(
                "compact: partition %d/%d (%s): %d files → %d files, %s rows, checksum %s",
                i,
                len(picked),
                group_info[i - 1]["partition"],
                len(ts),
                len(new_files),
                f"{rows_in:,}",
                ck_in,
            )
            faults.crash_point("compact_after_write")
        tx = table.transaction()
        producer = deletes.replace_producer(tx, table.io, carried_state_props(table, "compact"))
        for ts in picked.values():
            for t in ts:
                producer.delete_data_file(t.file)
        for d in delete_files.values():
            producer.delete_data_file(d)
        for f in written:
            producer.append_data_file(f)
        producer.commit()
        faults.crash_point("compact_before_commit")
        committed = tx.commit_transaction()
    except BaseException:
        _delete_quietly(table, [f.file_path for f in written])
        raise
    snap = committed.current_snapshot()
    assert snap is not None
    files_after = files_before - n_in + len(written)
    log.info(
        "compact: committed replace snapshot %s on %s: %d files → %d (%d rewritten into %d, %d delete files folded); "
        "%s rows, checksum %016x; state kept (watermark %s)",
        snap.snapshot_id,
        base.snapshot_id,
        files_before,
        files_after,
        n_in,
        len(written),
        len(delete_files),
        f"{rows_total:,}",
        sum_out,
        (
            state.read_state(committed)
            or state.TableState(watermark=None, cursor_kind=None, snapshot_id=0, run_id=None, mode=None, timestamp_ms=0)
        ).watermark,
    )
    return CompactionResult(
        status="committed",
        files_before=files_before,
        files_after=files_after,
        rewritten_files=n_in,
        delete_files_removed=len(delete_files),
        written_files=len(written),
        rows_rewritten=rows_total,
        checksum=f"{sum_out:016x}",
        snapshot_id=snap.snapshot_id,
        base_snapshot_id=base.snapshot_id,
        target_file_size=target,
        seconds=time.monotonic() - started,
        groups=group_info,
    )


def _delete_quietly(table: Table, paths: list[str]) -> None:
    """Remove files an aborted compaction wrote (what is left, orphan removal finds later)."""
    for p in paths:
        try:
            table.io.delete(p)
        except Exception as exc:  # noqa: BLE001 - best effort; the orphan sweep is the backstop
            log.warning("compact: could not remove %s after the failed rewrite: %s", p, exc)


def follow_variable(table: Table, variable_key: str, variables: state.VariableStore) -> str:
    """Point the Variable mirror at the state snapshot after a maintenance commit.

    A compaction makes its own snapshot the newest one carrying the (same)
    state. Mirror it before expiry can remove the snapshot the Variable still
    names — else the next load would find the Variable pointing at a snapshot
    the table no longer has and refuse to run.
    """
    return state.reconcile(variable_key, state.read_state(table), variables, table)


# ---------------------------------------------------------------- orphan files


@dataclass(kw_only=True)
class OrphanResult:
    """Files under the table location no snapshot references, and what was done with them.

    ``staged_kept``: files kept because a pending commit may need them (the staging folder and every file a
    staging manifest names); ``data_files_held``: unreferenced files kept this time because a staging manifest
    being written could not be read yet.
    """

    orphans: list[str]
    too_young: int
    referenced: int
    scanned: int
    deleted: int
    dry_run: bool
    older_than: str
    staged_kept: int = 0
    data_files_held: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _strip(path: str) -> str:
    """A path without its scheme and authority, so ``file:///a`` and ``/a`` compare equal."""
    if "://" in path:
        path = path.split("://", 1)[1]
        if not path.startswith("/"):
            path = path.split("/", 1)[1] if "/" in path else ""
            return "/" + path
    return path


def referenced_files(table: Table) -> set[str]:
    """Every file any retained metadata references: metadata files, manifest lists, manifests, data and deletes."""
    md = table.metadata
    out = {table.metadata_location}
    out.update(e.metadata_file for e in md.metadata_log)
    for stat in list(getattr(md, "statistics", []) or []) + list(getattr(md, "partition_statistics", []) or []):
        out.add(stat.statistics_path)
    seen_manifests: set[str] = set()
    for snap in md.snapshots:
        out.add(snap.manifest_list)
        for m in snap.manifests(table.io):
            out.add(m.manifest_path)
            if m.manifest_path in seen_manifests:
                continue
            seen_manifests.add(m.manifest_path)
            # A DELETED entry names a file live only in the parent; if the parent is retained,
            # its own manifests reference the file.
            for e in m.fetch_manifest_entry(table.io, discard_deleted=True):
                out.add(e.data_file.file_path)
    return {_strip(p) for p in out}


def _staged_names(table: Table, listed: list[ListedFile], cutoff: datetime) -> tuple[set[str], bool]:
    """The files staging manifests name, and whether an unreadable one may still be being written.

    A staging manifest that cannot be read and was written after the cutoff
    may be half-written by a slice right now: it could name any unreferenced
    data file, so the caller keeps them all this time. One written before the
    cutoff was left by a slice that died (a slice hands its manifest to the
    commit only once it is complete): what it names is never committed.
    """
    names: set[str] = set()
    hold = False
    for f in listed:
        if not staging.is_staging_manifest(f.path):
            continue
        try:
            names.update(_strip(d.file_path) for d in staging.read_staging_manifest(table.io, f.path))
        except Exception as exc:  # noqa: BLE001 - any unreadable manifest: decided by its age below
            if f.modified is None or f.modified > cutoff:
                hold = True
                log.warning(
                    "orphans: staging manifest %s cannot be read yet (%s); it may be being written, so no "
                    "unreferenced data file is deleted this time",
                    f.path,
                    exc,
                )
            else:
                log.warning(
                    "orphans: staging manifest %s cannot be read (%s) and was last written %s: left by a slice that "
                    "died; the files it names are never committed. It is kept (staging is never swept): delete it "
                    "by hand.",
                    f.path,
                    exc,
                    f.modified,
                )
    return names, hold


def remove_orphan_files(
    table: Table,
    *,
    older_than: timedelta,
    now: datetime | None = None,
    dry_run: bool = False,
    allow_short_age: bool = False,
) -> OrphanResult:
    """Delete (or, in a dry run, list) unreferenced files under the table location older than ``older_than``.

    Never deleted, whatever their age: files retained metadata references,
    the staging folder (``iceberg.staging``), and every file a staging manifest
    names (slices waiting for their commit). ``older_than`` below a day is
    refused unless ``allow_short_age`` (``maintenance.allow_short_orphan_age``):
    the write in flight is what a short age deletes. A file whose age cannot
    be read is kept.
    """
    check_orphan_age(older_than, allow_short_age)
    now = now or datetime.now(UTC)
    cutoff = now - older_than
    refs = referenced_files(table)
    listed = list(staging.list_files(table.io, table.location()))
    staged, hold = _staged_names(table, listed, cutoff)
    metadata_dir = _strip(f"{table.location().rstrip('/')}/metadata/")
    orphans: list[str] = []
    young = staged_kept = held = 0
    for f in listed:
        key = _strip(f.path)
        if key in refs:
            continue
        if staging.is_staged(f.path) or key in staged:
            staged_kept += 1
        elif f.modified is None or f.modified > cutoff:
            young += 1
        elif hold and not key.startswith(metadata_dir):
            held += 1
        else:
            orphans.append(f.path)
    orphans.sort()
    for p in orphans:
        log.info("orphan%s: %s", " (dry run, kept)" if dry_run else "", p)
    deleted = 0
    if not dry_run:
        for p in orphans:
            table.io.delete(p)
            deleted += 1
    log.info(
        "orphans: %d files under %s, %d referenced, %d staged for a pending commit (kept), %d unreferenced but "
        "younger than %s (kept)%s, %d %s",
        len(listed),
        table.location(),
        len(refs),
        staged_kept,
        young,
        older_than,
        f", {held} held while a staging manifest is written" if held else "",
        len(orphans),
        "listed (dry run)" if dry_run else "deleted",
    )
    return OrphanResult(
        orphans=orphans,
        too_young=young,
        referenced=len(refs),
        scanned=len(listed),
        deleted=deleted,
        dry_run=dry_run,
        older_than=str(older_than),
        staged_kept=staged_kept,
        data_files_held=held,
    )
