"""Mapped slices: one window written by many workers, committed once.

``prepare_slices`` (one task) passes the commit gate, makes the table ready
and plans the slices; ``write_slice`` (one mapped task per slice) extracts
its slice and writes data files plus a staging manifest, committing nothing;
``commit_slices`` (one task) passes the gate again and appends every slice's
files in ONE commit carrying the window's watermark.

The commit requires a result from every planned slice. A slice task marked
success by hand pushes no result; committing without it would move the
watermark over rows nobody wrote, and they would never be read again. So a
missing slice fails the commit and nothing is committed.

Staging manifests are Iceberg's own serialisation of DataFile metadata
(stats, partition values, sizes), written next to the table's metadata but
never referenced by it (``iceberg.staging``). The commit reads them back and
appends their files, then removes the run's staging folder. Before the
slices write, ``prepare_slices`` puts the run's record into that folder:
the state the run was planned on and what names its commit. While the run
may still commit, the orphan sweep keeps the staging folder and every file
a staging manifest names, however old: the commit of a slice cleared and
retried may come days later. Once the table shows the run can no longer
commit (committed, superseded by a later attempt, or overtaken by another
run's commit: ``iceberg.staging.judge``) for longer than the orphan age, the
sweep removes them. A staged file that is gone anyway fails the commit (the
gate checks every file it adds right before committing).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from snowberg.config.table_config import TableConfig
from snowberg.core.progress import Progress
from snowberg.core.results import LoadResult, Status
from snowberg.core.window import Window
from snowberg.iceberg import gate, staging, state
from snowberg.iceberg.identity import identity_properties
from snowberg.iceberg.keys import KeyCollector, check_keys_not_null
from snowberg.iceberg.tables import (
    arrow_schema,
    ensure_table,
    load_table_or_none,
    plan_schema_changes,
)
from snowberg.iceberg.write import write_data_files
from snowberg.load.extract import key_columns, mapping_options, rereads_held, stopped
from snowberg.load.plan import describe_window
from snowberg.load.slices import SliceMethod, check_unique_in_source, plan_slices, slice_windows
from snowberg.mapping.cast import cast_batch
from snowberg.mapping.rules import map_columns
from snowberg.snowflake.source import SourceQuery, fetch_batches, result_columns

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)


class MissingSliceError(RuntimeError):
    """A planned slice handed no result to the commit; nothing was committed."""


@dataclass(frozen=True, kw_only=True)
class SliceTask:
    """What one mapped task needs (an XCom: JSON only)."""

    index: int
    count: int
    window: dict[str, Any]  # the slice's own Window
    run_id: str
    schema_id: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SliceTask:
        return cls(**d)


@dataclass(frozen=True, kw_only=True)
class SliceResult:
    """What one mapped task hands to the commit (an XCom: JSON only)."""

    index: int
    count: int  # how many slices the run planned: the commit needs every one
    manifest_path: str | None  # staging manifest listing the slice's data files (None: no rows)
    manifest_length: int
    spec_id: int
    schema_id: int
    rows: int
    bytes: int
    data_files: int
    keys_path: str | None  # primary-key values of the slice (merge tables with existing data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SliceResult:
        return cls(**d)


def prepare_slices(
    cfg: TableConfig,
    conn: Any,
    catalog: Catalog,
    w: Window,
    *,
    max_rows: int | None = None,
    method: SliceMethod | str = SliceMethod.QUANTILES,
) -> list[dict[str, Any]]:
    """Plan the slices of a window and make the table ready for them; one dict per mapped task.

    An empty list means nothing to extract (nothing new, a dry run, or this
    run already committed): the mapped tasks are skipped. The table is
    created, or its schema evolved, here, before any slice writes: slices
    write against one schema id, and the commit refuses if it moved.
    """
    table = load_table_or_none(catalog, cfg)
    adm = gate.admit(table, w)
    if not adm.go:
        return []
    w = adm.window

    sq = SourceQuery(cfg)
    cur = conn.cursor()
    try:
        # Compile-only describe of the result columns (LIMIT 0 reads no rows).
        cur.execute(f"SELECT * FROM {sq.from_clause} LIMIT 0")  # noqa: S608 - quoted identifiers only
        columns = map_columns(result_columns(cur), mapping_options(cfg))
    finally:
        cur.close()
    table = ensure_table(catalog, cfg, table, columns)
    if gate.merges(cfg, w) and table.current_snapshot() is None:
        # The slices collect keys only when there is something to replace; the
        # first load checks the key's uniqueness in Snowflake instead (no
        # worker ever holds every key of a big window).
        check_unique_in_source(cfg, conn, w)
    planned = plan_slices(cfg, conn, w, max_rows=max_rows, method=method)
    parts = slice_windows(planned)
    schema_id = table.metadata.current_schema_id
    staging.write_run_record(table, run_record(table, w))
    log.info("%s: %d slice task(s) for window %s (schema id %d)", cfg.name, len(parts), describe_window(w), schema_id)
    return [
        SliceTask(index=i, count=len(parts), window=p.to_dict(), run_id=w.run_id, schema_id=schema_id).to_dict()
        for i, p in enumerate(parts)
    ]


def run_record(table: Table, w: Window) -> staging.RunRecord:
    """What the orphan sweep needs to tell whether this run may still commit (``iceberg.staging.judge``)."""
    st = state.read_state(table)
    return staging.RunRecord(
        run_id=w.run_id,
        dag_id=w.dag_id,
        mode=w.mode,
        identity=gate.window_identity(w),
        base_watermark=w.base_watermark,
        base_run_id=st.run_id if st else None,
        watermarked=w.cursor_kind is not None,
    )


def write_slice(cfg: TableConfig, conn: Any, catalog: Catalog, task: SliceTask | dict[str, Any]) -> dict[str, Any]:
    """Extract one slice and write its data files and a staging manifest. Commits nothing.

    A retried slice writes new files under new names; the commit uses only
    the files named by the attempt that succeeded (its XCom).
    """
    t = task if isinstance(task, SliceTask) else SliceTask.from_dict(task)
    sw = Window.from_dict(t.window)
    n = cfg.iceberg_name
    table = catalog.load_table((n.namespace, n.table))
    meta = table.metadata
    if meta.current_schema_id != t.schema_id:
        raise RuntimeError(
            f"slice {t.index}: the table's schema changed since the slices were planned "
            f"(schema id {t.schema_id} → {meta.current_schema_id}); re-run the DAG run to re-plan"
        )
    opts = mapping_options(cfg)
    target_schema = arrow_schema(meta.schema())
    sql, params = SourceQuery(cfg).extract_sql(sw)
    keys = KeyCollector(cfg.primary_key, cfg.name) if gate.merges(cfg, sw) and meta.current_snapshot() else None
    must_have_keys = key_columns(cfg)
    progress = Progress(f"{cfg.name} slice {t.index + 1}/{t.count}", log)
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        columns = map_columns(result_columns(cur), opts)
        _check_fits(meta.schema(), columns, t.index)

        def batches() -> Iterator[pa.RecordBatch]:
            for raw in fetch_batches(cur):
                b = cast_batch(raw, columns, target_schema, opts)
                check_keys_not_null(b, must_have_keys, cfg.name)
                if keys is not None:
                    keys.add(b)
                progress.add(b.num_rows, b.nbytes)
                yield b

        tx = table.transaction()
        data_files = list(write_data_files(table, tx, target_schema, batches(), cfg.batch_rows))
    finally:
        cur.close()
    log.info("%s", progress.summary())
    stage = staging.staging_location(table, t.run_id)
    tag = f"slice-{t.index:05d}-{uuid.uuid4().hex[:12]}"
    manifest_path, manifest_length = (None, 0)
    if data_files:
        manifest_path, manifest_length = staging.write_staging_manifest(table, f"{stage}/{tag}.avro", data_files)
    keys_path = None
    if keys is not None and progress.rows:
        keys_path = _write_keys(table, f"{stage}/{tag}-keys.parquet", keys.table())
    return SliceResult(
        index=t.index,
        count=t.count,
        manifest_path=manifest_path,
        manifest_length=manifest_length,
        spec_id=meta.default_spec_id,
        schema_id=t.schema_id,
        rows=progress.rows,
        bytes=progress.bytes,
        data_files=len(data_files),
        keys_path=keys_path,
    ).to_dict()


def _check_fits(schema: Any, columns: Sequence[Any], index: int) -> None:
    add, widen = plan_schema_changes(schema, columns)
    if add or widen:
        names = [c.name for c in add] + [c.name for c, _ in widen]
        raise RuntimeError(
            f"slice {index}: the source has columns the table cannot hold yet ({names}); the source changed "
            "after the slices were planned: re-run the DAG run to re-plan"
        )


def read_staging_manifest(table: Table, r: SliceResult) -> list[Any]:
    """The data files a slice task listed in its staging manifest (none if it wrote nothing).

    A manifest that is gone fails the commit with what to do: the slice must write its files again.
    """
    if r.manifest_path is None:
        return []
    try:
        return staging.read_staging_manifest(table.io, r.manifest_path, r.manifest_length, r.spec_id)
    except FileNotFoundError as e:
        raise MissingSliceError(
            f"the staging manifest of slice {r.index} ({r.manifest_path}) is gone: removed by hand or by an orphan "
            "sweep with a short orphan_age. Nothing was committed; clear the DAG run from its first task so the "
            "slices write their files again."
        ) from e


def _write_keys(table: Table, path: str, keys: Any) -> str:
    import pyarrow.parquet as pq

    with table.io.new_output(path).create(overwrite=True) as f:
        pq.write_table(keys, f)
    return path


def _read_keys(table: Table, path: str) -> Any:
    import pyarrow.parquet as pq

    with table.io.new_input(path).open() as f:
        return pq.read_table(f)


def check_every_slice(results: Sequence[SliceResult]) -> None:
    """Refuse to commit unless every planned slice handed in exactly one result."""
    if not results:
        raise MissingSliceError(
            "no slice handed in a result, but the window has rows to load: were the slice tasks marked success by "
            "hand? Nothing was committed; clear the slice tasks (or the DAG run) to write them."
        )
    counts = {r.count for r in results}
    if len(counts) != 1:
        raise MissingSliceError(f"slice results from different plans ({sorted(counts)} slices); re-run the DAG run")
    count = counts.pop()
    indices = [r.index for r in results]
    missing = sorted(set(range(count)) - set(indices))
    if missing or len(indices) != len(set(indices)):
        raise MissingSliceError(
            f"{len(missing)} of {count} slices handed in no result (slice index {missing[:10]}): a slice task marked "
            "success by hand wrote nothing. Nothing was committed; clear those slice tasks to write them."
            if missing
            else f"a slice handed in two results ({sorted(indices)}); re-run the DAG run"
        )


def commit_slices(
    cfg: TableConfig, catalog: Catalog, w: Window, results: Sequence[SliceResult | dict[str, Any]]
) -> dict[str, Any]:
    """Append every slice's data files in ONE Iceberg commit carrying the window's watermark.

    Exactly once: the gate (already committed → carry → base → dry run →
    nothing new) runs again here, every planned slice must have handed in its
    result, a data file already in the table is refused, and the commit
    asserts the snapshot it was built on. The slices' files are referenced
    only by this commit.
    """
    started = time.monotonic()
    rs = sorted(
        (r if isinstance(r, SliceResult) else SliceResult.from_dict(dict(r)) for r in results), key=lambda r: r.index
    )
    table = load_table_or_none(catalog, cfg)
    adm = gate.admit(table, w)
    if not adm.go:
        if adm.status is Status.ALREADY_COMMITTED and table is not None:
            staging.remove_run_staging(table, w.run_id)  # a retry after the commit landed: clean up what it left
        return stopped(adm, started).to_dict()
    w = adm.window
    check_every_slice(rs)
    if table is None:
        raise RuntimeError(f"table {cfg.target} does not exist; prepare_slices creates it before the slices write")
    rows = sum(r.rows for r in rs)
    if rows == 0 and w.mode == gate.INCREMENTAL:
        log.info("nothing new in window %s: no commit", describe_window(w))
        return stopped(gate.Admission(window=w, status=Status.NOTHING_NEW), started).to_dict()
    schema_ids = {r.schema_id for r in rs}
    if schema_ids != {table.metadata.current_schema_id}:
        raise RuntimeError(
            f"the slices were written with schema id(s) {sorted(schema_ids)} but the table is at "
            f"{table.metadata.current_schema_id}; re-run the DAG run to re-plan"
        )
    data_files = [f for r in rs for f in read_staging_manifest(table, r)]
    if rereads_held(table, cfg, w, [f.file_path for f in data_files]):
        log.info("%s: the %s rows re-read by the lookback are all in the lake already: no commit", cfg.name, rows)
        _delete_quietly(table, [f.file_path for f in data_files])
        _cleanup_staging(table, rs, w.run_id)
        return stopped(gate.Admission(window=w, status=Status.NOTHING_NEW), started).to_dict()
    keys = None
    key_paths = [r.keys_path for r in rs if r.keys_path]
    if key_paths:
        keys = KeyCollector(cfg.primary_key, cfg.name)
        for p in key_paths:
            keys.chunks.append(_read_keys(table, p))
    snap = commit_data_files(cfg, table, w, data_files, rows, keys=keys)
    _cleanup_staging(table, rs, w.run_id)
    return LoadResult(
        status=Status.COMMITTED,
        rows=rows,
        bytes=sum(r.bytes for r in rs),
        data_files=len(data_files),
        snapshot_id=snap,
        watermark=w.new_watermark,
        seconds=time.monotonic() - started,
        window=w.to_dict(),
        rows_planned=w.rows_in_window,
        rows_extracted=rows,
    ).to_dict()


def commit_data_files(
    cfg: TableConfig, table: Table, w: Window, data_files: Sequence[Any], rows: int, *, keys: Any = None
) -> int:
    """Commit already-written data files as the window's rows, through the gate. Returns the snapshot id."""
    gate.check_base(table, w)
    tx = table.transaction()
    counts = gate.run_counts(cfg.name, w, extracted=rows, committed=rows)
    replaced = gate.replaced_by_window(cfg, w, keys, table.current_snapshot() is not None)
    snap = gate.commit(
        table,
        tx,
        state_props=gate.window_state(w),
        summary=counts,
        replaced=replaced,
        properties=identity_properties(cfg),
        dag_id=w.dag_id,
        data_files=data_files,
        staged=True,
    )
    log.info(
        "%s: committed snapshot %s: %s rows in %d data files, watermark %s",
        cfg.name,
        snap.snapshot_id,
        f"{rows:,}",
        len(data_files),
        w.new_watermark,
    )
    return int(snap.snapshot_id)


def _cleanup_staging(table: Table, rs: Sequence[SliceResult], run_id: str) -> None:
    """Best effort: the run's staging folder is not part of the table once its files are committed.

    The whole folder goes, with the manifests of failed slice attempts: the files only those name become
    ordinary orphans (the sweep keeps every file a staging manifest names).
    """
    _delete_quietly(table, [p for r in rs for p in (r.manifest_path, r.keys_path) if p])
    staging.remove_run_staging(table, run_id)


def _delete_quietly(table: Table, paths: Sequence[str]) -> None:
    """Best effort: files no snapshot references (a leftover is swept by orphan removal)."""
    for p in paths:
        try:
            table.io.delete(p)
        except Exception as exc:  # noqa: BLE001 - a leftover unreferenced file is harmless
            log.debug("could not delete unreferenced file %s: %s", p, exc)
