"""Table maintenance that never loses snowberg's state: expire snapshots, compact, remove orphan files.

Tables loaded every hour grow a snapshot per run, small files from small
incremental windows, half-empty files left by copy-on-write merges, and
orphan files from killed runs. The three operations here undo that, each with
one rule that keeps the exactly-once invariant:

* **expire** never removes a snapshot a tag or branch keeps, nor any snapshot
  on the main branch from the head down to the one that carries the
  watermark (``state.read_state`` walks that chain: cutting it would lose the
  state);
* **compact** rewrites small data files and files mostly hidden by position
  deletes (folding the deletes in), file group by file group — a group is at
  most the target file size of input, read file by file and batch by batch,
  written row group by row group, so memory never follows the table — in one
  ``replace`` commit that copies the current state into its summary, asserts
  the snapshot it was planned on and never rebases: a load committing at the
  same moment makes exactly one of the two fail, and its retry succeeds. The
  rows read and the rows written are compared per group (count and a streamed
  content checksum) before the commit; a difference fails the task with
  nothing committed;
* **orphans** only deletes files under the table location that no retained
  metadata references and that are older than a safety age of at least a day
  (a running load's fresh files are never touched), and never a file staged
  for a commit that may still come (mapped slices' staging folder and every
  file a staging manifest names), however old; the staging of a run the
  table shows can no longer commit goes once that is older than the safety
  age (``iceberg.staging``).

``MaintenanceSettings`` is the ``maintenance:`` section of a table config; it
imports nothing heavy, so DAG parsing stays cheap.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from snowberg.config.maintenance_settings import DEFAULT_DELETE_RATIO, check_orphan_age
from snowberg.core import faults
from snowberg.iceberg import deletes, staging, state
from snowberg.iceberg.gate import check_added_files_exist, refuse_rebase

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
    """What a compaction rewrote, or why it did nothing (``groups``: one entry per file group rewritten)."""

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


class RowChecksum:
    """An order-independent checksum of rows, fed one batch at a time: the row count and the sum (mod 2**64) of
    a 64-bit hash of each row's values.

    Equal for the same multiset of rows however they are split into files,
    batches or orders; a lost, duplicated or changed row changes it (barring
    a 64-bit collision). Why DuckDB (a runtime dependency of the volume
    checks): Arrow has no row-hash kernel, and DuckDB hashes a batch's rows in
    vectorised code over the Arrow buffers without copying them — a fraction
    of a second per million rows, the memory of one batch. Its
    ``hash(c0, …, cn)`` combines the columns in order; the outer ``hash(·, 1)``
    keeps a row whose columns all hash to 0 (zeros, false) in the sum.
    """

    def __init__(self) -> None:
        import duckdb

        self._con = duckdb.connect()
        self.rows = 0
        self.total = 0

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        names = [f"c{i}" for i in range(batch.num_columns)]  # DuckDB folds case: no two columns may clash
        self._con.register("batch_rows", batch.rename_columns(names))
        try:
            cols = ", ".join(names)
            ((n, s),) = self._con.execute(
                f"SELECT count(*), sum(hash(hash({cols}), 1::UTINYINT)) FROM batch_rows"  # noqa: S608 - c0…cn only
            ).fetchall()
        finally:
            self._con.unregister("batch_rows")
        self.rows += int(n)
        self.total = (self.total + int(s)) % (1 << 64)

    @property
    def hex(self) -> str:
        return f"{self.total:016x}"

    def close(self) -> None:
        self._con.close()


def content_checksum(batches: Iterable[pa.RecordBatch]) -> tuple[int, str]:
    """(rows, checksum) of a set of rows, independent of row order and file layout (see ``RowChecksum``)."""
    ck = RowChecksum()
    try:
        for b in batches:
            ck.add(b)
        return ck.rows, ck.hex
    finally:
        ck.close()


def carried_state_props(table: Table, operation: str) -> dict[str, str]:
    """The state a maintenance commit carries (``state.current_state_props``): no row loaded, the operation named."""
    props = state.current_state_props(table)
    if props:
        props[state.ROWS] = "0"
    props[MAINTENANCE] = operation
    props[state.COMMIT_ID] = uuid.uuid4().hex  # one snapshot: the commit's last
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


@dataclass(kw_only=True)
class FileGroup:
    """Data files of one partition rewritten together: at most ``target`` bytes of input, so about one output file."""

    spec_id: int
    partition: Any
    label: str
    tasks: list[Any]

    @property
    def bytes(self) -> int:
        return sum(int(t.file.file_size_in_bytes) for t in self.tasks)

    def describe(self) -> dict[str, Any]:
        return {"partition": self.label, "files": len(self.tasks), "bytes": self.bytes}


def _bins(tasks: list[Any], capacity: int) -> list[list[Any]]:
    """Bins of at most ``capacity`` bytes, largest files first, each filled before the next is opened.

    (Next fit, like Iceberg's bin packing with a look-back of one: linear in
    the files, where first fit would compare every file with every bin.)
    """
    bins: list[list[Any]] = []
    used = capacity + 1
    for t in sorted(tasks, key=lambda t: int(t.file.file_size_in_bytes), reverse=True):
        size = int(t.file.file_size_in_bytes)
        if used + size > capacity:
            bins.append([])
            used = 0
        bins[-1].append(t)
        used += size
    return bins


def plan_groups(
    table: Table,
    tasks: list[Any],
    *,
    target: int,
    small_file_ratio: float,
    min_input_files: int,
    delete_ratio: float,
) -> list[FileGroup]:
    """The file groups worth rewriting, partition by partition.

    A data file is a candidate when it is small (under ``small_file_ratio ×
    target``) or when its position deletes hide at least ``delete_ratio`` of
    its rows. A file with a few deletes is left alone: readers apply them, and
    rewriting it would read the whole table on every run of a merge-on-read
    table whose merges touch most files (Iceberg's rewrite_data_files has the
    same threshold, ``delete-ratio-threshold``). A partition is rewritten when
    it has ``min_input_files`` candidates or a candidate with deletes; its
    candidates are packed into groups of at most ``target`` bytes, and a
    group of one file without deletes is dropped (nothing to gain).
    """
    threshold = int(target * small_file_ratio)
    targets: dict[str, dict[str, int]] = {}

    def deleted_share(t: Any) -> float:
        if not t.delete_files:
            return 0.0
        n = 0
        for d in t.delete_files:
            if d.file_path not in targets:
                targets[d.file_path] = deletes.delete_targets(table.io, d)
            n += targets[d.file_path].get(t.file.file_path, 0)
        return n / max(int(t.file.record_count), 1)

    partitions: dict[tuple[int, Any], list[Any]] = {}
    for t in tasks:
        part: Any = t.file.partition
        partitions.setdefault((t.file.spec_id, tuple(part) if part is not None else ()), []).append(t)
    specs = table.specs()
    groups: list[FileGroup] = []
    for (spec_id, _), ts in partitions.items():
        cands = [t for t in ts if t.file.file_size_in_bytes < threshold or deleted_share(t) >= delete_ratio]
        if not (len(cands) >= min_input_files or any(t.delete_files for t in cands)):
            continue
        label = _partition_label(specs.get(spec_id), ts[0].file.partition)
        for members in _bins(cands, target):
            if len(members) == 1 and not members[0].delete_files:
                continue
            groups.append(FileGroup(spec_id=spec_id, partition=ts[0].file.partition, label=label, tasks=members))
    return groups


def read_live_rows(md: Any, io: Any, task: Any) -> Iterator[pa.RecordBatch]:
    """One data file's rows, its deletes applied, batch by batch in the table's current schema.

    pyiceberg's public ``ArrowScan.to_record_batches`` materialises each file
    in a worker thread before yielding; this calls the per-file generator it
    runs there, so memory is one batch, not one file.
    """
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _read_all_delete_files

    scan = ArrowScan(md, io, md.schema(), AlwaysTrue())
    yield from scan._record_batches_from_scan_tasks_and_deletes([task], _read_all_delete_files(io, [task]))


def _read_back(io: Any, path: str) -> Iterator[pa.RecordBatch]:
    """A file compaction just wrote, row group by row group (no read-ahead: memory is a row group, not the file).

    It holds the table's current schema in the table's column order, so its
    rows hash like the rows read from the old files (``RowChecksum`` hashes
    values by position; names and Arrow's string flavours do not matter).
    """
    import pyarrow.parquet as pq

    with io.new_input(path).open() as f:
        yield from pq.ParquetFile(f).iter_batches(batch_size=65_536, use_threads=False)


class _PartitionPath:
    """What a location provider needs of a partition key (``to_path``), for a partition value we already hold."""

    def __init__(self, spec: Any, partition: Any, schema: Any) -> None:
        self.spec, self.partition, self.schema = spec, partition, schema

    def to_path(self) -> str:
        return str(self.spec.partition_to_path(self.partition, self.schema))


# Rows are buffered into row groups of at most this many Arrow bytes (or the table's row-group row limit):
# the writer's memory, whatever the group's size.
ROW_GROUP_BYTES = 64 * 1024 * 1024


def _write_stream(md: Any, io: Any, group: FileGroup, batches: Iterator[pa.RecordBatch], name: str) -> list[Any]:
    """Write a group's rows as ONE data file in the group's partition, streaming row group by row group.

    pyiceberg's writer (``write_file``) builds each file's whole Arrow table
    before writing it, and its thread pool takes every file of a stream at
    once: a group would be in memory whole. Its Parquet writer takes several
    writes per file, so we call it directly with bounded buffers, and build
    the data file's metadata the way ``write_file`` does.
    """
    import pyarrow as pa
    from pyiceberg.io.fileformat import FileFormatFactory
    from pyiceberg.io.pyarrow import _to_requested_schema, pyarrow_to_schema
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.schema import sanitize_column_names
    from pyiceberg.table import DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE, TableProperties
    from pyiceberg.table.locations import load_location_provider
    from pyiceberg.utils.config import Config

    table_schema = md.schema()
    file_schema = sanitize_column_names(table_schema)
    downcast = Config().get_bool(DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE) or False
    model = FileFormatFactory.get(FileFormat.PARQUET)
    spec = md.specs()[group.spec_id]
    key: Any = _PartitionPath(spec, group.partition, table_schema) if spec.fields else None
    path = load_location_provider(md.location, md.properties).new_data_location(f"{name}.parquet", key)
    row_limit = int(
        md.properties.get(TableProperties.PARQUET_ROW_GROUP_LIMIT, TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT)
    )
    out = io.new_output(path)
    writer = None
    task_schema = None
    arrow_schema: pa.Schema | None = None  # of the first converted batch: files may differ (string, large_string)
    buf: list[pa.RecordBatch] = []
    rows = size = 0
    try:
        for b in batches:
            if b.num_rows == 0:
                continue
            if task_schema is None:
                task_schema = pyarrow_to_schema(
                    b.schema,
                    name_mapping=table_schema.name_mapping,
                    downcast_ns_timestamp_to_us=downcast,
                    format_version=md.format_version,
                )
            converted = _to_requested_schema(
                requested_schema=file_schema,
                file_schema=task_schema,
                batch=b,
                downcast_ns_timestamp_to_us=downcast,
                include_field_ids=True,
                format_model=model,
            )
            if arrow_schema is None:
                arrow_schema = converted.schema
            elif converted.schema != arrow_schema:
                converted = converted.cast(arrow_schema)
            buf.append(converted)
            rows += b.num_rows
            size += b.nbytes
            if rows >= row_limit or size >= ROW_GROUP_BYTES:
                writer = writer or model.create_writer(out, file_schema, md.properties)
                writer.write(pa.Table.from_batches(buf))
                buf, rows, size = [], 0, 0
        if buf:
            writer = writer or model.create_writer(out, file_schema, md.properties)
            writer.write(pa.Table.from_batches(buf))
            buf = []
        if writer is None:
            return []  # every row of the group was deleted
        stats = writer.close()
    except BaseException:
        if writer is not None:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the original error is what matters
                pass
            _delete_quietly_path(io, path)
        raise
    f = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=group.partition,
        file_size_in_bytes=len(out),
        sort_order_id=None,
        equality_ids=None,
        key_metadata=None,
        **stats.to_serialized_dict(),
    )
    f.spec_id = group.spec_id  # not a from_args field in pyiceberg 0.12 (the manifest writer sets it)
    return [f]


def _rewrite_group(
    md: Any, io: Any, group: FileGroup, write_uuid: uuid.UUID, counter: Any, written: list[Any]
) -> tuple[int, int, str]:
    """Rewrite one group and verify it: (files written, rows, checksum); an error when the rows differ.

    The new files are appended to ``written`` as soon as they exist, so the
    caller removes them whatever fails after.
    """
    import pyarrow as pa
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    ck_in, ck_out = RowChecksum(), RowChecksum()
    try:

        def rows_in() -> Iterator[pa.RecordBatch]:
            for t in group.tasks:
                for b in read_live_rows(md, io, t):
                    ck_in.add(b)
                    yield b

        if group.spec_id == md.default_spec_id:
            new_files = _write_stream(md, io, group, rows_in(), f"00000-{next(counter)}-{write_uuid}")
        else:
            # Files of an older partition spec are rewritten into the current one; pyiceberg splits the rows
            # by the new partition values, which needs the group in memory (at most ``target`` bytes of input).
            batches = [b for b in rows_in() if b.num_rows]
            data = pa.Table.from_batches(batches) if batches else None
            new_files = [] if data is None else list(_dataframe_to_data_files(md, data, io, write_uuid, counter))
            for f in new_files:
                f.spec_id = md.default_spec_id  # set by the manifest writer otherwise; the read-back needs it
        written.extend(new_files)
        for f in new_files:
            for b in _read_back(io, f.file_path):
                ck_out.add(b)
        if (ck_in.rows, ck_in.hex) != (ck_out.rows, ck_out.hex):
            raise CompactionVerificationError(
                f"partition {group.label}: read {ck_in.rows} rows (checksum {ck_in.hex}) from {len(group.tasks)} "
                f"files, the rewritten files hold {ck_out.rows} rows (checksum {ck_out.hex}); nothing committed"
            )
        return len(new_files), ck_out.rows, ck_out.hex
    finally:
        ck_in.close()
        ck_out.close()


def compact(
    table: Table,
    *,
    target_size: int | None = None,
    small_file_ratio: float = 0.75,
    min_input_files: int = 2,
    delete_ratio: float = DEFAULT_DELETE_RATIO,
    dry_run: bool = False,
) -> CompactionResult:
    """Rewrite small data files and files mostly deleted, file group by file group, in one REPLACE commit.

    Groups come from ``plan_groups``; each is read file by file (deletes
    applied), batch by batch, written as one file and read back: the rows
    read and the rows written must have the same count and checksum
    (``RowChecksum``), else nothing is committed. Memory is a batch and a row
    group, set by the target size, never by the table. Delete files whose data
    files are all rewritten go, and so do delete files whose data files are
    all gone (``iceberg.deletes``), even when no data file needs a rewrite.
    """
    started = time.monotonic()
    refuse_rebase(table)
    base = table.current_snapshot()
    target = target_file_size(table, target_size)

    def result(status: str, **kw: Any) -> CompactionResult:
        out: dict[str, Any] = {
            "files_before": 0,
            "files_after": 0,
            "rewritten_files": 0,
            "delete_files_removed": 0,
            "written_files": 0,
            "rows_rewritten": 0,
            "checksum": None,
            "snapshot_id": None,
            "base_snapshot_id": base.snapshot_id if base is not None else None,
            "groups": [],
            **kw,
        }
        return CompactionResult(status=status, target_file_size=target, seconds=time.monotonic() - started, **out)

    if base is None:
        return result("nothing_to_do")
    tasks = list(table.scan(snapshot_id=base.snapshot_id).plan_files())
    groups = plan_groups(
        table,
        tasks,
        target=target,
        small_file_ratio=small_file_ratio,
        min_input_files=min_input_files,
        delete_ratio=delete_ratio,
    )
    # A delete file goes only when every data file it applies to is rewritten.
    users: dict[str, list[str]] = {}
    for t in tasks:
        for d in t.delete_files:
            users.setdefault(d.file_path, []).append(t.file.file_path)
    picked = {t.file.file_path for g in groups for t in g.tasks}
    delete_files = {
        d.file_path: d
        for g in groups
        for t in g.tasks
        for d in t.delete_files
        if all(p in picked for p in users[d.file_path])
    }
    # Delete files whose data files are all gone (left by a copy-on-write removal before the gate dropped them).
    dangling = deletes.dangling_delete_files(table.io, base)
    delete_files.update((d.file_path, d) for d in dangling)
    n_in = len(picked)
    log.info(
        "compact: %d data files; %d file groups of up to %s bytes hold %d files to rewrite (small, or with "
        "deletes hiding %.0f%%+ of their rows); %d delete files of removed data files%s",
        len(tasks),
        len(groups),
        f"{target:,}",
        n_in,
        delete_ratio * 100,
        len(dangling),
        " (dry run)" if dry_run else "",
    )
    info = [g.describe() for g in groups]
    if not (groups or dangling) or dry_run:
        return result(
            "dry_run" if dry_run and (groups or dangling) else "nothing_to_do",
            files_before=len(tasks),
            files_after=len(tasks),
            rewritten_files=n_in,
            delete_files_removed=len(delete_files),
            groups=info,
        )

    md = table.metadata
    if TARGET_FILE_SIZE not in md.properties or target_size:
        md = md.model_copy(update={"properties": {**md.properties, TARGET_FILE_SIZE: str(target)}})
    write_uuid = uuid.uuid4()
    counter = itertools.count(0)
    written: list[Any] = []
    rows_total = checksum = 0
    try:
        for i, g in enumerate(groups, 1):
            n_out, rows, ck = _rewrite_group(md, table.io, g, write_uuid, counter, written)
            rows_total += rows
            checksum = (checksum + int(ck, 16)) % (1 << 64)
            log.info(
                "compact: group %d/%d (%s): %d files, %s bytes → %d file(s), %s rows, checksum %s",
                i,
                len(groups),
                g.label,
                len(g.tasks),
                f"{g.bytes:,}",
                n_out,
                f"{rows:,}",
                ck,
            )
            faults.crash_point("compact_after_write")
        tx = table.transaction()
        producer = deletes.replace_producer(tx, table.io, carried_state_props(table, "compact"))
        for g in groups:
            for t in g.tasks:
                producer.delete_data_file(t.file)
        for d in delete_files.values():
            producer.delete_data_file(d)
        for f in written:
            producer.append_data_file(f)
        producer.commit()
        faults.crash_point("compact_before_commit")
        check_added_files_exist(tx, table.io, base.snapshot_id)
        committed = tx.commit_transaction()
    except BaseException:
        _delete_quietly(table, [f.file_path for f in written])
        raise
    faults.crash_point("compact_after_commit")  # committed; the Variable has not followed yet
    snap = committed.current_snapshot()
    assert snap is not None
    files_after = len(tasks) - n_in + len(written)
    st = state.read_state(committed)
    log.info(
        "compact: committed replace snapshot %s on %s: %d files → %d (%d rewritten into %d, %d delete files "
        "removed); %s rows, checksum %016x; state kept (watermark %s)",
        snap.snapshot_id,
        base.snapshot_id,
        len(tasks),
        files_after,
        n_in,
        len(written),
        len(delete_files),
        f"{rows_total:,}",
        checksum,
        st.watermark if st is not None else None,
    )
    return result(
        "committed",
        files_before=len(tasks),
        files_after=files_after,
        rewritten_files=n_in,
        delete_files_removed=len(delete_files),
        written_files=len(written),
        rows_rewritten=rows_total,
        checksum=f"{checksum:016x}",
        snapshot_id=snap.snapshot_id,
        groups=info,
    )


def _delete_quietly(table: Table, paths: list[str]) -> None:
    """Remove files an aborted compaction wrote (what is left, orphan removal finds later)."""
    for p in paths:
        _delete_quietly_path(table.io, p)


def _delete_quietly_path(io: Any, path: str) -> None:
    try:
        io.delete(path)
    except FileNotFoundError:
        pass  # never written
    except Exception as exc:  # noqa: BLE001 - best effort; the orphan sweep is the backstop
        log.warning("compact: could not remove %s after the failed rewrite: %s", path, exc)


# ---------------------------------------------------------------- orphan files


@dataclass(kw_only=True)
class OrphanResult:
    """Files under the table location no snapshot references, and what was done with them.

    ``staged_kept``: files kept because a pending commit may need them (a staging folder and every file its
    staging manifests name); ``data_files_held``: unreferenced files kept this time because a staging manifest
    being written could not be read yet; ``staging``: every run's staging folder as the table judges it
    (``staging.StagedRun.row``), with ``removed`` telling whether this sweep removed it (abandoned for longer
    than the orphan age); ``staging_bytes_kept``: the bytes kept for pending commits.
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
    staging: list[dict[str, Any]] = field(default_factory=list)
    staging_bytes_kept: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    return {staging.path_key(p) for p in out}


def _held_by_a_write(runs: Iterable[staging.StagedRun], cutoff: datetime) -> bool:
    """Is a staging manifest of a kept run unreadable and maybe still being written (it could name any file)?

    One written before the cutoff was left by a slice that died (a slice hands its manifest to the commit only
    once it is complete): what it names is never committed.
    """
    hold = False
    for run in runs:
        for f in run.unreadable:
            if f.modified is None or f.modified > cutoff:
                hold = True
                log.warning(
                    "orphans: staging manifest %s cannot be read yet; it may be being written, so no unreferenced "
                    "data file is deleted this time",
                    f.path,
                )
            else:
                log.warning(
                    "orphans: staging manifest %s cannot be read and was last written %s: left by a slice that "
                    "died; the files it names are never committed. It is kept while its run may commit.",
                    f.path,
                    f.modified,
                )
    return hold


def _deletion_order(path: str) -> tuple[bool, bool, str]:
    """Data files first, then staging files, each run's record last: a sweep that dies half way leaves every
    folder it did not finish with its record, judged again by the next sweep."""
    return (staging.is_staged(path), staging.is_run_record(path), path)


def remove_orphan_files(
    table: Table,
    *,
    older_than: timedelta,
    now: datetime | None = None,
    dry_run: bool = False,
    allow_short_age: bool = False,
) -> OrphanResult:
    """Delete (or, in a dry run, list) unreferenced files under the table location older than ``older_than``.

    Never deleted, whatever their age: files retained metadata references, and
    the staging of a run that may still commit (``staging.staged_runs``: its
    staging folder and every file its staging manifests name). The staging of
    a run that can no longer commit goes once the table has shown that for
    longer than ``older_than`` (``StagedRun.removable``): its folder, and the
    data files only it named, aged by their own time or, where the listing
    gives none, by the table's. ``older_than`` below a day is refused unless
    ``allow_short_age`` (``maintenance.allow_short_orphan_age``): the write in
    flight is what a short age deletes. Any other file whose age cannot be
    read is kept.
    """
    check_orphan_age(older_than, allow_short_age)
    now = now or datetime.now(UTC)
    cutoff = now - older_than
    refs = referenced_files(table)
    listed = list(staging.list_files(table.io, table.location()))
    runs = staging.staged_runs(table, listed)
    gone = [r for r in runs if r.removable(cutoff)]
    kept = [r for r in runs if not r.removable(cutoff)]
    removed = set() if dry_run else {r.folder for r in gone}
    staged: set[str] = set().union(*(r.named for r in kept))
    hold = _held_by_a_write(kept, cutoff)
    in_gone = {staging.path_key(f.path) for r in gone for f in r.files}
    # A data file only an abandoned run named: its age, or the time the table showed the run abandoned.
    abandoned_at = {k: r.judgement.since for r in gone for k in r.named}
    metadata_dir = staging.path_key(f"{table.location().rstrip('/')}/metadata/")
    orphans: list[str] = []
    young = staged_kept = held = staged_bytes = 0
    for f in listed:
        key = staging.path_key(f.path)
        if key in refs:
            continue
        modified = f.modified or abandoned_at.get(key)
        if key in in_gone:
            orphans.append(f.path)
        elif staging.is_staged(f.path) or key in staged:
            staged_kept += 1
            staged_bytes += f.size or 0
        elif modified is None or modified > cutoff:
            young += 1
        elif hold and not key.startswith(metadata_dir):
            held += 1
        else:
            orphans.append(f.path)
    orphans.sort(key=_deletion_order)
    for p in orphans:
        log.info("orphan%s: %s", " (dry run, kept)" if dry_run else "", p)
    for r in runs:
        if r.judgement.verdict.abandoned:
            log.info(
                "orphans: staging of run %s is abandoned (%s: %s, since %s): %s",
                r.record.run_id if r.record else "?",
                r.judgement.verdict,
                r.judgement.why,
                r.judgement.since,
                "removed" if r.folder in removed else "kept until it is older than the orphan age",
            )
    deleted = 0
    if not dry_run:
        for p in orphans:
            table.io.delete(p)
            deleted += 1
    log.info(
        "orphans: %d files under %s, %d referenced, %d staged for a pending commit (kept), %d unreferenced but "
        "younger than %s (kept)%s, %d abandoned staging folder(s) removed, %d %s",
        len(listed),
        table.location(),
        len(refs),
        staged_kept,
        young,
        older_than,
        f", {held} held while a staging manifest is written" if held else "",
        len(removed),
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
        staging=[{**r.row(), "removed": r.folder in removed} for r in runs],
        staging_bytes_kept=staged_bytes,
    )
