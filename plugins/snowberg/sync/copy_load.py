"""Rows into a native target by ``COPY`` from Parquet: the lake's own files, or files the worker ``PUT``s.

``load_native`` (``sync.native``) keeps its transaction and its state
update; this module decides, before the transaction, how the run's rows
travel, and runs the COPY statements inside it (``CopyPaths.stage`` →
``StagedCopy.copy``). Three paths, chosen per file:

1. **The lake's files, read by Snowflake** (``lake_stage``: an external stage
   over the lake's storage). A data file the run must load whole — no delete
   file applies to it, it lies under the stage's URL, every column is a
   scalar COPY casts exactly (``copy_sql.raw_copy_problem``) — is named in
   ``COPY … FILES = (…)``; the worker reads its Parquet footer (the names
   the file's columns were written with) and no row. ``INITIAL`` and
   ``FULL_RELOAD`` runs pass ``FORCE = TRUE`` (the target's load metadata
   remembers files an earlier sync loaded, for 64 days); incremental runs do
   not, and a file COPY reports as already loaded fails the run.
2. **Files the worker writes** (rows Snowflake cannot read where they are: a
   file with position deletes — they must not load, and COPY cannot skip rows
   by position —, a lake without a stage, nested or uuid columns, the rows of
   a keyed change): read with pyiceberg (which applies delete files), written
   as Parquet in files of at most ``file_rows`` rows, ``PUT`` into a
   temporary stage of the run's session (it disappears with the session, so a
   killed run leaves nothing behind) and loaded by one COPY of the run's
   folder (``PURGE = TRUE``: the stage is emptied as it is loaded). Memory
   is bounded by one lake data file's rows (files are read one at a time).
   Nested values are written as the JSON text the ``INSERT`` path binds
   (``native.sql_value``) and parsed by ``PARSE_JSON``, uuids as canonical
   text.
3. **Bound INSERTs**, as before, when the worker's rows are fewer than
   ``copy_min_rows`` (a PUT and a COPY cost a fixed overhead that a few rows
   do not repay; ``bench.sync`` measures the crossover).

Staging (footers, PUTs) runs before ``BEGIN``: nothing is in the target
until the COPYs run inside the transaction, with the deletes and the state
update, so exactly once is the transaction's, as for INSERTs.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from snowberg.core import faults
from snowberg.core.identifiers import TableName, quote_identifier, validate_identifier
from snowberg.sync.copy_sql import (
    DEFAULT_COPY_MIN_ROWS,
    MAX_FILES_PER_COPY,
    CopyLoadError,
    LakeStage,
    check_copied,
    copy_sql,
    parse_copy_result,
    raw_copy_problem,
    stage_location,
)
from snowberg.sync.ddl import TargetColumn
from snowberg.sync.native import sql_value
from snowberg.sync.snapshots import ChangePlan, RowChanges, SyncMode, append_scan

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

DEFAULT_FILE_ROWS = 1_000_000  # rows per Parquet file the worker writes and PUTs
LINEAGE_FIELD = "__snowberg_lineage"  # the worker's files carry each row's source snapshot in this field


class LoadPath:
    """How rows reached the target (recorded in the result as ``load_path``)."""

    STAGE_COPY = "stage_copy"  # the lake's files, COPYed from the lake stage
    PUT_COPY = "put_copy"  # Parquet the worker wrote, PUT and COPYed
    INSERT = "insert"  # bound INSERT statements


@dataclass(kw_only=True)
class StagedCopy:
    """What one run loads by COPY (statements ready, files staged) and what is left for INSERTs."""

    statements: list[tuple[str, dict[str, int], str]] = field(default_factory=list)  # (sql, {file: rows}, path)
    rows_by_snapshot: dict[str, int] = field(default_factory=dict)  # rows the COPYs load, by lineage
    insert_batches: Iterable[tuple[int, pa.RecordBatch]] = ()
    insert_rows: int = 0
    paths: list[str] = field(default_factory=list)
    target: TableName | None = None

    def copy(self, cur: Any) -> int:
        """Run the COPYs (inside the run's transaction), checking every file's answer; return the rows."""
        assert self.target is not None
        total = 0
        for sql, expected, path in self.statements:
            log.info(
                "%s: COPY of %d file(s), %s rows (%s)", self.target, len(expected), f"{sum(expected.values()):,}", path
            )
            cur.execute(sql)
            copied = parse_copy_result(cur.fetchall(), cur.description)
            total += check_copied(expected, copied, self.target)
        faults.crash_point("sync_after_copy")
        return total

    @property
    def load_path(self) -> str:
        return "+".join(self.paths) or LoadPath.INSERT


@dataclass(frozen=True, kw_only=True)
class CopyPaths:
    """The COPY paths of a native sync: pass as ``load_native(..., copy=CopyPaths(...))``.

    ``lake_stage``: an external stage over the lake's storage (None: the
    worker stages every row); ``copy_min_rows``: fewer worker rows than this
    go as bound INSERTs; ``file_rows``: rows per Parquet file the worker PUTs.
    """

    lake_stage: LakeStage | None = None
    copy_min_rows: int = DEFAULT_COPY_MIN_ROWS
    file_rows: int = DEFAULT_FILE_ROWS

    def __post_init__(self) -> None:
        if self.copy_min_rows < 0 or self.file_rows < 1:
            raise ValueError("copy_min_rows must be ≥ 0 and file_rows ≥ 1")

    def stage(
        self,
        cur: Any,
        *,
        source: Table,
        plan: ChangePlan,
        columns: Sequence[TargetColumn],
        target: TableName,
        lineage_column: str | None,
        changes: RowChanges | None,
    ) -> StagedCopy:
        """Decide each row's path and stage what COPY will load (before the run's transaction)."""
        utc_session(cur)
        target_schema_session(cur, target)
        staged = StagedCopy(target=target)
        worker: Iterable[tuple[int, pa.RecordBatch]]
        if changes is not None:
            worker, worker_rows = changes.upserts, changes.upsert_rows
        elif self.lake_stage is not None:
            worker, worker_rows = self._plan_lake_files(source, plan, columns, target, lineage_column, staged)
        else:
            # File by file: pyiceberg's batch reader over a whole scan reads ahead every file of it,
            # so its memory would follow the table; one file at a time bounds it by the largest file.
            tasks = list(scan_tasks(source, plan))
            worker, worker_rows = _read_tasks(source, tasks), sum(t.file.record_count for _, t in tasks)
        if worker_rows and worker_rows >= self.copy_min_rows:
            if self._put_worker_rows(cur, worker, columns, source.schema(), target, lineage_column, staged):
                worker, worker_rows = (), 0
        if worker_rows:
            staged.paths.append(LoadPath.INSERT)
        staged.insert_batches, staged.insert_rows = worker, worker_rows
        faults.crash_point("sync_before_copy")
        return staged

    # ------------------------------------------------------------------ the lake's files

    def _plan_lake_files(
        self,
        source: Table,
        plan: ChangePlan,
        columns: Sequence[TargetColumn],
        target: TableName,
        lineage_column: str | None,
        staged: StagedCopy,
    ) -> tuple[Iterator[tuple[int, pa.RecordBatch]], int]:
        """COPY statements for the files Snowflake can load as they are; the other files' rows for the worker."""
        assert self.lake_stage is not None
        tasks = list(scan_tasks(source, plan))
        schema = source.schema()
        problems = {f.name: p for f in schema.fields if (p := raw_copy_problem(f.field_type)) is not None}
        if problems:
            log.info(
                "%s: the lake's files go through the worker (%s)",
                target,
                "; ".join(f"column {k}: {v}" for k, v in problems.items()),
            )
            return _read_tasks(source, tasks), sum(t.file.record_count for _, t in tasks)
        mapping = source.metadata.name_mapping()
        groups: dict[tuple[int, tuple[tuple[str, str | None], ...]], dict[str, int]] = {}
        worker_tasks: list[tuple[int, Any]] = []
        reasons: dict[str, int] = {}
        for lineage, task in tasks:
            why, rel, fields = self._raw_file(source, task, columns, mapping)
            if why is not None or rel is None or fields is None:
                reasons[why or "?"] = reasons.get(why or "?", 0) + 1
                worker_tasks.append((lineage, task))
                continue
            groups.setdefault((lineage, tuple(sorted(fields.items()))), {})[rel] = int(task.file.record_count)
        for why, n in reasons.items():
            log.info("%s: %d file(s) go through the worker: %s", target, n, why)
        force = plan.mode in (SyncMode.INITIAL, SyncMode.FULL_RELOAD)
        for (lineage, signature), files in groups.items():
            names = list(files)
            for lo in range(0, len(names), MAX_FILES_PER_COPY):
                chunk = {n: files[n] for n in names[lo : lo + MAX_FILES_PER_COPY]}
                sql = copy_sql(
                    target,
                    columns,
                    dict(signature),
                    location=self.lake_stage.location,
                    lineage_column=lineage_column,
                    lineage=lineage,
                    files=list(chunk),
                    force=force,
                )
                staged.statements.append((sql, chunk, LoadPath.STAGE_COPY))
            staged.rows_by_snapshot[str(lineage)] = staged.rows_by_snapshot.get(str(lineage), 0) + sum(files.values())
        if groups:
            staged.paths.append(LoadPath.STAGE_COPY)
        return _read_tasks(source, worker_tasks), sum(t.file.record_count for _, t in worker_tasks)

    def _raw_file(
        self, source: Table, task: Any, columns: Sequence[TargetColumn], mapping: Any
    ) -> tuple[str | None, str | None, dict[str, str | None] | None]:
        """(why not, path relative to the stage, {column: the file's field}) for one lake file."""
        import pyarrow.parquet as pq
        from pyiceberg.manifest import FileFormat

        from snowberg.iceberg.merge import field_names_by_id

        assert self.lake_stage is not None
        if task.delete_files:
            return "delete files apply to them (the worker reads them with their deletes)", None, None
        if task.file.file_format != FileFormat.PARQUET:
            return f"{task.file.file_format} files", None, None
        rel = self.lake_stage.relative(task.file.file_path)
        if rel is None:
            return f"outside the stage URL {self.lake_stage.stage_url} (or a name FILES cannot hold)", None, None
        with source.io.new_input(task.file.file_path).open() as f:
            by_id = field_names_by_id(pq.read_schema(f), mapping)
        schema = source.schema()
        fields: dict[str, str | None] = {}
        for c in columns:
            name = by_id.get(schema.find_field(c.source_name).field_id)
            if name is not None:
                try:
                    validate_identifier(name, "Parquet field")
                except ValueError:
                    return f"a column name COPY cannot address ({name!r})", None, None
            fields[c.source_name] = name
        return None, rel, fields

    # ------------------------------------------------------------------ the worker's files

    def _put_worker_rows(
        self,
        cur: Any,
        batches: Iterable[tuple[int, pa.RecordBatch]],
        columns: Sequence[TargetColumn],
        source_schema: Any,
        target: TableName,
        lineage_column: str | None,
        staged: StagedCopy,
    ) -> bool:
        """Write the rows as Parquet, PUT them into a temporary stage, prepare their COPY. False: no stage."""
        stage = TableName(
            database=target.database, schema=target.schema, table=f"SNOWBERG_SYNC_{uuid.uuid4().hex[:12].upper()}"
        )
        try:
            cur.execute(f"CREATE TEMPORARY STAGE {stage.quoted()}")
        except Exception as exc:  # a role without CREATE STAGE on the schema: INSERTs still work
            log.warning(
                "%s: cannot create a temporary stage in %s.%s (%s); the rows go as INSERTs. "
                "GRANT CREATE STAGE ON SCHEMA %s.%s to the sync's role to load them by COPY.",
                target,
                target.database,
                target.schema,
                exc,
                target.database,
                target.schema,
            )
            return False
        folder = "rows"
        lineage_field = LINEAGE_FIELD
        while any(c.source_name == lineage_field for c in columns):
            lineage_field += "_"
        files: dict[str, int] = {}
        tmp = tempfile.mkdtemp(prefix="snowberg-put-")
        try:
            schema = upload_schema(columns, source_schema, lineage_field)
            for path, rows, by_snap in write_parquet_files(batches, columns, schema, tmp, self.file_rows):
                put_file(cur, path, stage_location(str(stage), folder))
                files[f"{folder}/{os.path.basename(path)}"] = rows
                for k, v in by_snap.items():
                    staged.rows_by_snapshot[k] = staged.rows_by_snapshot.get(k, 0) + v
                os.remove(path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if files:
            fields: dict[str, str | None] = {c.source_name: c.source_name for c in columns}
            sql = copy_sql(
                target,
                columns,
                fields,
                location=stage_location(str(stage), folder),
                lineage_column=lineage_column,
                lineage=lineage_field,
                json_text=True,
                purge=True,
            )
            staged.statements.append((sql, files, LoadPath.PUT_COPY))
            staged.paths.append(LoadPath.PUT_COPY)
        return True


_UTC = {"UTC", "ETC/UTC", "GMT", "ETC/GMT", "UCT", "ZULU"}


def target_schema_session(cur: Any, target: TableName) -> None:
    """Make the target's schema the session's current schema (``USE SCHEMA``), before the transaction.

    Every name a sync sends is qualified, so Snowflake needs no current schema, and no later statement
    of the run depends on it. The emulator does: its COPY reads its load history in the session's current
    database and refuses a session without one. A connection need not name a database or schema (the
    local stack's does not), and one metadata statement makes both agree. ``USE`` needs only the USAGE on
    the schema that writing to the target needs anyway.
    """
    cur.execute(f"USE SCHEMA {quote_identifier(target.database)}.{quote_identifier(target.schema)}")


def utc_session(cur: Any) -> None:
    """Make the session's ``TIMEZONE`` UTC if it is not already.

    TIMESTAMP_TZ values are cast from the file's UTC instant, and the session's
    time zone gives them their offset: in UTC, the ``+00:00`` the INSERT path
    writes. snowberg's hook pins the session (``snowflake.session``); a caller's
    own connection may not, so it is checked here rather than assumed.
    """
    cur.execute("SHOW PARAMETERS LIKE 'TIMEZONE' IN SESSION")
    rows = cur.fetchall()
    names = [str(d[0]).lower() for d in (cur.description or [])]
    value = str(rows[0][names.index("value")]) if rows and "value" in names else ""
    if value.upper() not in _UTC:
        log.info("session TIMEZONE is %r: setting it to UTC for the COPY", value)
        cur.execute("ALTER SESSION SET TIMEZONE = 'UTC'")


def scan_tasks(source: Table, plan: ChangePlan) -> Iterator[tuple[int, Any]]:
    """``(lineage, FileScanTask)`` for the data files an initial, reload or incremental plan reads whole.

    The same files ``snapshots.read_batches`` reads, with the snapshot each row is attributed to.
    """
    if plan.to_snapshot_id is None or plan.mode in (SyncMode.NOTHING_NEW, SyncMode.CHANGES):
        return
    if plan.mode in (SyncMode.INITIAL, SyncMode.FULL_RELOAD):
        for task in source.scan(snapshot_id=plan.to_snapshot_id).plan_files():
            yield plan.to_snapshot_id, task
        return
    for step in plan.load_steps:
        for task in append_scan(source, step.snapshot_id).plan_files():
            yield step.snapshot_id, task


def _read_tasks(source: Table, tasks: Sequence[tuple[int, Any]]) -> Iterator[tuple[int, pa.RecordBatch]]:
    """The rows of the given files as pyiceberg reads them (delete files applied), one batch at a time."""
    if not tasks:
        return
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    scan = ArrowScan(source.metadata, source.io, source.schema(), AlwaysTrue())
    for lineage, task in tasks:
        for batch in scan.to_record_batches([task]):
            if batch.num_rows:
                yield lineage, batch


def upload_schema(columns: Sequence[TargetColumn], source_schema: Any, lineage_field: str) -> pa.Schema:
    """The Arrow schema of the worker's files: the lake's types, nested and uuid columns as text."""
    import pyarrow as pa

    from snowberg.iceberg.tables import arrow_type_for

    fields = []
    for c in columns:
        t = source_schema.find_field(c.source_name).field_type
        fields.append(pa.field(c.source_name, pa.string() if _as_text(c, t) else arrow_type_for(t)))
    fields.append(pa.field(lineage_field, pa.int64()))
    return pa.schema(fields)


def _as_text(col: TargetColumn, iceberg_type: Any) -> bool:
    from pyiceberg.types import UUIDType

    return col.semi_structured or isinstance(iceberg_type, UUIDType)


def upload_batch(
    batch: pa.RecordBatch, columns: Sequence[TargetColumn], schema: pa.Schema, lineage: int
) -> pa.RecordBatch:
    """One batch as the worker writes it: every column in ``schema``'s type, the lineage beside it.

    Nested and uuid values become the text the INSERT path binds (``native.sql_value``): the same
    JSON for the same value on every path. Other columns keep their Arrow type (no per-row work).
    """
    import pyarrow as pa

    names = set(batch.schema.names)
    arrays = []
    for c, f in zip(columns, schema, strict=False):
        if c.source_name not in names:
            arrays.append(pa.nulls(batch.num_rows, type=f.type))
            continue
        arr = batch.column(c.source_name)
        if pa.types.is_string(f.type) and not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
            arrays.append(pa.array([sql_value(v, c) for v in arr.to_pylist()], pa.string()))
        else:
            arrays.append(arr.cast(f.type))
    arrays.append(pa.array([lineage] * batch.num_rows, pa.int64()))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def write_parquet_files(
    batches: Iterable[tuple[int, pa.RecordBatch]],
    columns: Sequence[TargetColumn],
    schema: pa.Schema,
    folder: str,
    file_rows: int,
) -> Iterator[tuple[str, int, dict[str, int]]]:
    """Parquet files of at most ``file_rows`` rows in ``schema`` (``upload_schema``): ``(path, rows, {lineage:
    rows})`` as each is closed. One batch in memory at a time (and the writer's open row group)."""
    import pyarrow.parquet as pq

    writer: Any = None
    path, rows, n = "", 0, 0
    by_snap: dict[str, int] = {}
    try:
        for lineage, batch in batches:
            if writer is None:
                n += 1
                path = os.path.join(folder, f"part-{n:05d}-{uuid.uuid4().hex[:8]}.parquet")
                writer = pq.ParquetWriter(path, schema, compression="snappy")
                rows, by_snap = 0, {}
            writer.write_batch(upload_batch(batch, columns, schema, lineage))
            rows += batch.num_rows
            by_snap[str(lineage)] = by_snap.get(str(lineage), 0) + batch.num_rows
            if rows >= file_rows:
                writer.close()
                writer = None
                yield path, rows, by_snap
        if writer is not None:
            writer.close()
            writer = None
            yield path, rows, by_snap
    finally:
        if writer is not None:
            writer.close()


_LOCAL_PATH = re.compile(r"[A-Za-z0-9_./=+-]+")


def put_file(cur: Any, path: str, location: str) -> None:
    """``PUT`` one local file into ``location`` as it is (Parquet is compressed already); check the answer."""
    if not _LOCAL_PATH.fullmatch(path):
        raise CopyLoadError(f"local file {path!r} cannot be named in PUT")
    cur.execute(f"PUT 'file://{path}' {location} AUTO_COMPRESS = FALSE OVERWRITE = TRUE")
    rows = cur.fetchall()
    names = [str(d[0]).lower() for d in (cur.description or [])]
    status = [str(r[names.index("status")]).upper() for r in rows] if "status" in names else []
    if status != ["UPLOADED"]:
        raise CopyLoadError(f"PUT of {os.path.basename(path)} into {location} answered {rows!r}")
