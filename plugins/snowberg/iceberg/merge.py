"""Remove the rows a run replaces: merge-on-read position deletes, or copy-on-write.

A keyed (merge) run appends the new versions of its rows and must hide the
earlier versions of the same keys, in the same commit. Two strategies
(``TableConfig.merge_strategy``):

merge_on_read (default)
    Position delete files, written to the Iceberg v2 spec, one per data file
    that holds replaced keys. Candidate files are pruned by the key column's
    min/max statistics; only the key columns of the candidates are read, one
    file at a time, so the cost follows the files the change touches, not the
    table, and memory follows one file's key column. Snowflake reads position
    deletes on externally managed v2 tables; equality deletes are never
    written (Snowflake cannot read them).

copy_on_write
    pyiceberg's ``delete(In(keys))``: every data file holding a replaced key is
    rewritten. pyiceberg evaluates every data file once the window has more
    than 200 keys, so its cost grows with the table (docs/performance.md).

Backfill ranges and full refreshes are removed copy-on-write in both
strategies: a cursor-range predicate is pruned by pyiceberg's file metrics.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from snowberg.iceberg.deletes import DELETE_FILE_PATH_ID, DELETE_POS_ID, delete_manifest_writer

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Transaction
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.name_mapping import NameMapping

log = logging.getLogger(__name__)
# Shared snapshot summary property (the commit gate's state module will own the name).
DELETED_ROWS = "snowberg.rows-deleted"


class KeyTypeError(ValueError):
    """The primary key's type in the lake table cannot be compared with the window's keys."""


def write_position_deletes(tx: Transaction, key_table: pa.Table, props: dict[str, str], *, io: FileIO) -> int:
    """Add position delete files for every live row whose key is in ``key_table``; return the row count.

    The files go into one snapshot of their own in the transaction (operation
    ``delete``), before the run's append: Iceberg applies a position delete to
    data files of the same or an older sequence number, so the run's new rows
    are never hidden by it.

    ``io`` is the table's own FileIO (``table.io`` of the table ``tx`` was
    opened on): it carries what the catalog knows and the table properties do
    not, such as an S3 endpoint and keys from an Airflow connection or the
    credentials a REST catalog vended for this table. A FileIO rebuilt from
    the table properties would reach the wrong endpoint without credentials.
    pyiceberg's ``Transaction`` keeps its table private, so the caller, which
    holds the table, passes it.
    """
    meta = tx.table_metadata
    schema = meta.schema()
    field_ids = [_key_field_id(schema, c) for c in key_table.column_names]
    key_table = _unify_key_types(key_table, schema, field_ids)
    bounds = KeyBounds(key_table.column(0), schema.find_field(field_ids[0]).field_type)

    from pyiceberg.table import DataScan

    tasks = list(DataScan(table_metadata=meta, io=io).plan_files())
    # Each candidate file is matched against only the window's keys inside its bounds (a small hash set).
    candidates = []
    for t in tasks:
        mask = bounds.inside(t.file.lower_bounds.get(field_ids[0]), t.file.upper_bounds.get(field_ids[0]))
        if mask is not None:
            candidates.append((t, mask))
    write_id = uuid.uuid4()
    name_mapping = meta.name_mapping()

    def one_file(i: int) -> DataFile | None:
        task, mask = candidates[i]
        path = task.file.file_path
        positions = _replaced_positions(io, path, field_ids, key_table.filter(mask), name_mapping)
        if positions is None or len(positions) == 0:
            return None
        positions = _not_yet_deleted(io, path, positions, task.delete_files)
        if len(positions) == 0:
            return None
        return _write_delete_file(meta, io, task.file, positions, write_id, i)

    # One candidate file per thread (Arrow's reads, is_in and writes release the GIL): memory is a few files'
    # key columns at a time, whatever the table's size.
    from pyiceberg.utils.concurrent import ExecutorFactory

    results = ExecutorFactory.get_or_create().map(one_file, range(len(candidates)))
    delete_files = [f for f in results if f is not None]
    deleted = sum(f.record_count for f in delete_files)
    log.info(
        "merge-on-read: %d of %d data files may hold the %s replaced keys; %s rows deleted in %d delete files",
        len(candidates),
        len(tasks),
        f"{key_table.num_rows:,}",
        f"{deleted:,}",
        len(delete_files),
    )
    if delete_files:
        producer = position_delete_producer(tx, io, {**props, DELETED_ROWS: str(deleted)}, delete_files)
        producer.commit()
    return deleted


class KeyBounds:
    """Does a file's [lower, upper] key range hold any of the window's keys? (min/max pruning)"""

    def __init__(self, keys: pa.ChunkedArray, iceberg_type: Any) -> None:
        import pyarrow.compute as pc

        self.keys = keys.combine_chunks() if hasattr(keys, "combine_chunks") else keys
        self.type = iceberg_type
        self.arrow_type = self.keys.type
        mm = pc.min_max(self.keys)
        self.lo, self.hi = mm["min"], mm["max"]

    def _scalar(self, raw: bytes | None) -> Any:
        import pyarrow as pa
        from pyiceberg.conversions import from_bytes

        if raw is None:
            return None
        try:
            return pa.scalar(from_bytes(self.type, raw)).cast(self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError, ValueError):
            return None  # a bound we cannot compare: keep the file as a candidate

    def inside(self, lower: bytes | None, upper: bytes | None) -> pa.Array | None:
        """Mask of the window's keys inside the file's bounds; None when none is (the file is pruned)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        lo, hi = self._scalar(lower), self._scalar(upper)
        if lo is None or hi is None:
            return pa.array([True] * len(self.keys))
        if pc.less(hi, self.lo).as_py() or pc.greater(lo, self.hi).as_py():
            return None
        mask = pc.and_(pc.greater_equal(self.keys, lo), pc.less_equal(self.keys, hi))
        return mask if pc.any(mask).as_py() else None


def _key_field_id(schema: Any, column: str) -> int:
    try:
        return int(schema.find_field(column).field_id)
    except ValueError as e:
        raise KeyTypeError(f"primary key column {column!r} is not in the lake table; nothing was written") from e


def _unify_key_types(key_table: pa.Table, schema: Any, field_ids: list[int]) -> pa.Table:
    """Cast the window's keys to the table's key types (a widened key, e.g. int → long, stays comparable)."""
    import pyarrow as pa

    from snowberg.iceberg.tables import arrow_type_for

    cols = []
    for name, fid in zip(key_table.column_names, field_ids, strict=True):
        field = schema.find_field(fid)
        want = arrow_type_for(field.field_type)
        col = key_table.column(name)
        if col.type != want:
            try:
                col = col.cast(want)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise KeyTypeError(
                    f"primary key column {name!r}: the lake table has {field.field_type}, the window's keys are "
                    f"{col.type}; they cannot be compared. Nothing was written."
                ) from e
        cols.append(col)
    return pa.table(cols, names=key_table.column_names)


def _file_columns(pf: Any, field_ids: list[int], name_mapping: NameMapping | None = None) -> list[str] | None:
    """The data file's column names for the key field ids (files keep the names they were written with).

    A file without field ids (registered with ``add_files``: Snowflake's push-down unload) is read through
    the table's name mapping (``schema.name-mapping.default``, which ``add_files`` sets), as every Iceberg
    reader reads it; without one, it would look as if it predated the key and its rows were never replaced.
    """
    by_id = field_names_by_id(pf.schema_arrow, name_mapping)
    names = [by_id.get(i) for i in field_ids]
    return None if any(n is None for n in names) else [n for n in names if n is not None]


def field_names_by_id(file_schema: pa.Schema, name_mapping: NameMapping | None = None) -> dict[int, str]:
    """``{Iceberg field id: column name in the file}`` for a data file's top-level columns.

    Files keep the names they were written with (a later rename does not touch them); a file without
    field ids is read through the table's name mapping, as every Iceberg reader reads it.
    """
    by_id: dict[int, str] = {}
    for f in file_schema:
        fid = (f.metadata or {}).get(b"PARQUET:field_id")
        if fid is not None:
            by_id[int(fid)] = f.name
    if not by_id and name_mapping is not None:
        from pyiceberg.io.pyarrow import pyarrow_to_schema

        mapped = pyarrow_to_schema(file_schema, name_mapping=name_mapping, downcast_ns_timestamp_to_us=True)
        by_id = {f.field_id: f.name for f in mapped.fields}
    return by_id


def _replaced_positions(
    io: FileIO, path: str, field_ids: list[int], key_table: pa.Table, name_mapping: NameMapping | None
) -> pa.Array | None:
    """Row positions in one data file whose key is in the window (reads only the key columns)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    with io.new_input(path).open() as f:
        pf = pq.ParquetFile(f)
        names = _file_columns(pf, field_ids, name_mapping)
        if names is None:
            return None  # the key columns were added after this file: its keys are NULL, never replaced
        file_keys = pf.read(columns=names, use_threads=False)  # files are read in parallel already
    if len(names) == 1:
        col = file_keys.column(0)
        if col.type != key_table.column(0).type:
            col = col.cast(key_table.column(0).type)
        return pc.indices_nonzero(pc.fill_null(pc.is_in(col, value_set=key_table.column(0)), False))
    renamed = file_keys.rename_columns(key_table.column_names)
    renamed = pa.table(
        [c.cast(k.type) for c, k in zip(renamed.columns, key_table.columns, strict=True)], names=renamed.column_names
    )
    with_pos = renamed.append_column("__pos", pa.array(range(renamed.num_rows), pa.int64()))
    joined = with_pos.join(key_table, keys=key_table.column_names, join_type="inner")
    pos = joined.column("__pos").combine_chunks()
    return pc.take(pos, pc.sort_indices(pos))


def _not_yet_deleted(io: FileIO, path: str, positions: pa.Array, delete_files: set[DataFile]) -> pa.Array:
    """Drop positions an earlier delete file already removed (an old version of a key replaced again)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if not delete_files:
        return positions
    done = []
    for d in delete_files:
        with io.new_input(d.file_path).open() as f:
            t = pq.read_table(f, columns=["file_path", "pos"])
        done.append(t.filter(pc.equal(t.column("file_path"), path)).column("pos"))
    import pyarrow as pa

    already = pa.chunked_array([c for d in done for c in d.chunks], pa.int64())
    return positions.filter(pc.invert(pc.is_in(positions, value_set=already)))


def _write_delete_file(
    meta: TableMetadata, io: FileIO, data_file: DataFile, positions: pa.Array, write_id: uuid.UUID, n: int
) -> DataFile:
    """One position delete file for one data file, as the Iceberg spec lays it out (file_path, pos; sorted)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.table.locations import load_location_provider

    schema = pa.schema(
        [
            pa.field(
                "file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(DELETE_FILE_PATH_ID)}
            ),
            pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(DELETE_POS_ID)}),
        ]
    )
    positions = positions.cast(pa.int64())
    table = pa.table([pa.array([data_file.file_path] * len(positions), pa.string()), positions], schema=schema)
    location = load_location_provider(meta.location, meta.properties).new_data_location(
        f"{write_id}-deletes-{n:05d}.parquet"
    )
    with io.new_output(location).create(overwrite=True) as out:
        pq.write_table(table, out, compression="zstd")
    size = len(io.new_input(location))
    path_bytes = data_file.file_path.encode()
    lo, hi = int(positions[0].as_py()), int(positions[-1].as_py())
    return DataFile.from_args(
        _table_format_version=meta.format_version,
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=data_file.partition,
        record_count=len(positions),
        file_size_in_bytes=size,
        value_counts={DELETE_FILE_PATH_ID: len(positions), DELETE_POS_ID: len(positions)},
        null_value_counts={DELETE_FILE_PATH_ID: 0, DELETE_POS_ID: 0},
        # Equal path bounds make the file "file-scoped": readers (pyiceberg, Spark, Snowflake) apply it to that
        # data file only instead of to every file of the partition.
        lower_bounds={DELETE_FILE_PATH_ID: path_bytes, DELETE_POS_ID: lo.to_bytes(8, "little", signed=True)},
        upper_bounds={DELETE_FILE_PATH_ID: path_bytes, DELETE_POS_ID: hi.to_bytes(8, "little", signed=True)},
        spec_id=data_file.spec_id,
        sort_order_id=None,
    )


def _make_producer_class() -> type:
    """Built on first use so importing this module stays free of pyiceberg (DAG parsing imports config)."""
    from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, ManifestFile
    from pyiceberg.table.snapshots import Operation
    from pyiceberg.table.update.snapshot import _FastAppendFiles

    class Producer(_FastAppendFiles):
        """A snapshot that keeps every existing manifest and adds one delete manifest.

        Why our own producer: pyiceberg 0.12 reads position deletes, but its
        snapshot producers (append, overwrite, delete) write data manifests
        only. We subclass its fast append (so the manifest list, sequence
        number, summary totals and the ref assertion are pyiceberg's own) and
        add the one thing it lacks: a ``content=deletes`` manifest.
        """

        def __init__(self, tx: Any, io: Any, props: dict[str, str], delete_files: list[Any]) -> None:
            super().__init__(operation=Operation.DELETE, transaction=tx, io=io, snapshot_properties=props)
            self._delete_files = delete_files

        def _process_manifests(self, manifests: list[ManifestFile]) -> list[ManifestFile]:
            writer = delete_manifest_writer(
                self._transaction.table_metadata.spec(),
                self.schema(),
                self.new_manifest_output(),
                self._snapshot_id,
                self._compression,
            )
            with writer:
                for f in self._delete_files:
                    writer.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=f,
                        )
                    )
            return [writer.to_manifest_file(), *manifests]

        def _summary(self, snapshot_properties: Any = None) -> Any:
            # The summary collector counts delete files (added-position-deletes, total-position-deletes) when
            # they pass as added files; they are listed only while the summary is built, never in a data manifest.
            added = self._added_data_files
            self._added_data_files = [*added, *self._delete_files]
            try:
                return super()._summary(snapshot_properties or {})
            finally:
                self._added_data_files = added

    return Producer


_PRODUCER: type | None = None


def position_delete_producer(tx: Any, io: Any, props: dict[str, str], delete_files: list[Any]) -> Any:
    """The snapshot producer for position delete files (see ``_make_producer_class``)."""
    global _PRODUCER
    if _PRODUCER is None:
        _PRODUCER = _make_producer_class()
    return _PRODUCER(tx, io, props, delete_files)


def read_columns_by_id(
    io: FileIO, path: str, field_ids: list[int], names: list[str], *, name_mapping: NameMapping | None = None
) -> pa.Table | None:
    """Only the given columns of one data file, found by Iceberg field id, renamed to ``names``.

    None when the file predates one of the columns (its values are NULL there).
    Used by the merge and by syncs that must know which keys a change removed.
    ``name_mapping``: the table's (``TableMetadata.name_mapping()``), for files without field ids.
    """
    import pyarrow.parquet as pq

    with io.new_input(path).open() as f:
        pf = pq.ParquetFile(f)
        cols = _file_columns(pf, field_ids, name_mapping)
        if cols is None:
            return None
        return pf.read(columns=cols, use_threads=True).rename_columns(names)


def read_columns_at(
    io: FileIO,
    path: str,
    field_ids: list[int],
    names: list[str],
    positions: pa.Array,
    *,
    name_mapping: NameMapping | None = None,
) -> pa.Table | None:
    """The given columns of one data file at the given row positions (sorted, unique), in that order.

    Reads only the row groups that hold one of the positions, and only those
    columns: the footer says where each row group starts, so a position
    delete of a few rows costs those rows' row groups, never the whole file.
    None when the file predates one of the columns (as ``read_columns_by_id``).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    with io.new_input(path).open() as f:
        pf = pq.ParquetFile(f)
        cols = _file_columns(pf, field_ids, name_mapping)
        if cols is None:
            return None
        md = pf.metadata
        starts = np.cumsum([0] + [md.row_group(i).num_rows for i in range(md.num_row_groups)])
        pos = np.asarray(positions.to_numpy(zero_copy_only=False), dtype=np.int64)
        if len(pos) == 0:
            return pa.table({n: pa.array([], pf.schema_arrow.field(c).type) for n, c in zip(names, cols, strict=True)})
        if pos[-1] >= starts[-1] or pos[0] < 0:
            raise ValueError(f"position delete beyond the {starts[-1]} rows of data file {path}")
        groups = np.unique(np.searchsorted(starts, pos, side="right") - 1)
        part = pf.read_row_groups([int(g) for g in groups], columns=cols, use_threads=True)
        # offset of each chosen row group inside ``part``
        sizes = starts[groups + 1] - starts[groups]
        offsets = np.cumsum(np.concatenate([[0], sizes[:-1]]))
        g_of = np.searchsorted(starts, pos, side="right") - 1
        local = offsets[np.searchsorted(groups, g_of)] + (pos - starts[g_of])
        return part.take(pa.array(local, pa.int64())).rename_columns(names)


def deleted_positions(
    io: FileIO, path: str, delete_files: Any, *, cache: dict[str, pa.Table] | None = None
) -> pa.Array:
    """Row positions of data file ``path`` removed by the given position delete files (sorted, unique).

    ``cache`` (delete file path → its ``file_path``/``pos`` columns) lets a caller walking many data files
    read each delete file once, however many data files it names.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    cache = {} if cache is None else cache
    chunks: list[Any] = []
    for d in delete_files:
        t = cache.get(d.file_path)
        if t is None:
            with io.new_input(d.file_path).open() as f:
                t = cache[d.file_path] = pq.read_table(f, columns=["file_path", "pos"])
        chunks += t.filter(pc.equal(t.column("file_path"), path)).column("pos").chunks
    if not chunks:
        return pa.array([], pa.int64())
    u = pc.unique(pa.chunked_array(chunks, pa.int64()))
    return pc.take(u, pc.sort_indices(u))
