"""Load a planned window: extract it from Snowflake and commit it to Iceberg, once.

The exactly-once rules (already committed? → carry the watermark → base
check → dry run → nothing new, and the one commit) live in the commit gate,
``snowberg.iceberg.gate``; this module reads the rows and writes the data
files between the gate's two halves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from snowberg.config.table_config import TableConfig, WriteMode
from snowberg.core import faults
from snowberg.core.progress import Progress
from snowberg.core.results import LoadResult, Status
from snowberg.core.window import Window
from snowberg.iceberg import gate
from snowberg.iceberg.identity import identity_properties
from snowberg.iceberg.keys import DuplicateKeyError, KeyCollector, check_keys_not_null
from snowberg.iceberg.tables import begin_write, load_table_or_none
from snowberg.iceberg.write import write_data_files
from snowberg.load.plan import describe_window
from snowberg.load.slices import check_same_columns, check_unique_in_source, slice_windows
from snowberg.mapping.cast import cast_batch
from snowberg.mapping.rules import MappedColumn, MappingOptions, map_columns
from snowberg.snowflake.source import SourceQuery, fetch_batches, result_columns

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

__all__ = ["DuplicateKeyError", "LoadResult", "cast_fetched", "key_columns", "load_window", "mapping_options"]


def mapping_options(cfg: TableConfig) -> MappingOptions:
    """The type-mapping opt-ins of ``cfg`` (column names upper-cased as Snowflake reports them)."""
    return MappingOptions(
        number_as_long=frozenset(c.upper() for c in cfg.number_as_long),
        timestamp_nanos=cfg.timestamp_nanos,
        geo_format=cfg.geo_format,
    )


def key_columns(cfg: TableConfig) -> list[str]:
    """The key columns every written row must fill (merge tables): checked per batch, before it is written."""
    return [c.lower() for c in cfg.primary_key] if cfg.effective_write_mode is WriteMode.MERGE else []


def rereads_held(table: Table, cfg: TableConfig, w: Window, paths: Sequence[str]) -> bool:
    """Do the Parquet files another task wrote for ``w`` hold only rows the lake already has?

    The mapped slices and the push-down unload write their data files before
    the commit task runs, so a window that only re-reads (``gate.rereads_only``:
    the lookback range, NULL cursors) is checked here, from those files: the
    commit then adds nothing, like the single-task load. The files are small
    (a lookback's rows), and read only for such windows.
    """
    if not gate.rereads_only(w):
        return False
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = [f.name for f in table.schema().fields]
    parts = []
    for path in paths:
        with table.io.new_input(path).open() as f:
            t = pq.read_table(f)
        parts.append(t.select([n for n in names if n in t.column_names]))
    rows = pa.concat_tables(parts, promote_options="permissive") if parts else pa.table({})
    return gate.holds_rows(table, w, rows, keys=key_columns(cfg))


def stopped(adm: gate.Admission, started: float) -> LoadResult:
    """The result of a run the gate stopped before any row was read."""
    w = adm.window
    return LoadResult(
        status=adm.status or Status.NOTHING_NEW,
        snapshot_id=adm.snapshot_id,
        watermark=w.new_watermark if adm.status is Status.ALREADY_COMMITTED else w.base_watermark,
        seconds=time.monotonic() - started,
        window=w.to_dict(),
        rows_planned=w.rows_in_window,
    )


def load_window(cfg: TableConfig, conn: Any, catalog: Catalog, w: Window) -> LoadResult:
    """Extract the planned window and commit it to Iceberg, once."""
    started = time.monotonic()
    table = load_table_or_none(catalog, cfg)
    adm = gate.admit(table, w)
    if not adm.go:
        return stopped(adm, started)
    w = adm.window

    sq = SourceQuery(cfg)
    parts = slice_windows(w)  # [w] unless plan_slices cut a large window by cursor value
    merging = gate.merges(cfg, w)
    # A sliced first load replaces nothing: check key uniqueness in Snowflake instead of holding every key.
    sliced_first_load = len(parts) > 1 and merging and (table is None or table.current_snapshot() is None)
    if sliced_first_load:
        check_unique_in_source(cfg, conn, w)
    # Every row the plan saw is at or below the previous watermark: the window only re-reads the
    # lookback and NULL cursors. Hold those rows and write nothing if the lake has them all.
    recheck = len(parts) == 1 and gate.rereads_only(w)
    sql, params = sq.extract_sql(parts[0])
    opts = mapping_options(cfg)
    must_have_keys = key_columns(cfg)
    cur = conn.cursor()
    try:
        log.info("extracting %s%s", describe_window(w), f" in {len(parts)} slices" if len(parts) > 1 else "")
        cur.execute(sql, params)
        source_columns = result_columns(cur)
        columns = map_columns(source_columns, opts)
        table, tx, target_schema, schema_changed = begin_write(catalog, cfg, table, columns)
        progress = Progress(f"{cfg.name}: fetched", log)
        keys = KeyCollector(cfg.primary_key, cfg.name) if merging and not sliced_first_load else None

        def batches(i: int) -> Iterator[pa.RecordBatch]:
            if i:  # each further slice is its own query, run once the previous one is written
                s_sql, s_params = sq.extract_sql(parts[i])
                cur.execute(s_sql, s_params)
                check_same_columns(source_columns, result_columns(cur), f"{cfg.name} slice {i + 1}/{len(parts)}")
            for raw in fetch_batches(cur):
                b = cast_batch(raw, columns, target_schema, opts)
                check_keys_not_null(b, must_have_keys, cfg.name)  # before the batch reaches a data file
                if keys is not None:
                    keys.add(b)
                progress.add(b.num_rows, b.nbytes)
                yield b

        sources: list[Iterator[pa.RecordBatch]] = [batches(i) for i in range(len(parts))]
        if recheck and not schema_changed:
            import pyarrow as pa

            held = list(sources[0])
            if gate.holds_rows(table, w, pa.Table.from_batches(held, target_schema), keys=key_columns(cfg)):
                log.info(
                    "%s: the %s rows re-read by the lookback are all in the lake already: no data file, no commit",
                    cfg.name,
                    f"{progress.rows:,}",
                )
                return stopped(gate.Admission(window=w, status=Status.NOTHING_NEW), started)
            sources = [iter(held)]
        # One write per slice: memory is bounded by the slice, not the window.
        data_files = [f for src in sources for f in write_data_files(table, tx, target_schema, src, cfg.batch_rows)]
    finally:
        cur.close()
    log.info("%s: %s", cfg.name, progress.summary())
    faults.crash_point("after_extract")

    if progress.rows == 0 and w.mode == gate.INCREMENTAL and not schema_changed:
        log.info("window held no rows at extract time: no commit")
        return stopped(gate.Admission(window=w, status=Status.NOTHING_NEW), started)

    counts = gate.run_counts(cfg.name, w, extracted=progress.rows, committed=progress.rows)
    replaced = gate.replaced_by_window(cfg, w, keys, tx.table_metadata.current_snapshot() is not None)
    snap = gate.commit(
        table,
        tx,
        state_props=gate.window_state(w),
        summary=counts,
        replaced=replaced,
        data_files=data_files,
        properties=identity_properties(cfg),
        dag_id=w.dag_id,
    )
    log.info(
        "%s: committed snapshot %s: %s rows in %d data files, watermark %s",
        cfg.name,
        snap.snapshot_id,
        f"{progress.rows:,}",
        len(data_files),
        w.new_watermark,
    )
    return LoadResult(
        status=Status.COMMITTED,
        rows=progress.rows,
        bytes=progress.bytes,
        data_files=len(data_files),
        snapshot_id=snap.snapshot_id,
        watermark=w.new_watermark,
        seconds=time.monotonic() - started,
        window=w.to_dict(),
        rows_planned=w.rows_in_window,
        rows_extracted=progress.rows,
    )


def cast_fetched(
    cur: Any, columns: list[MappedColumn], schema: pa.Schema, opts: MappingOptions, progress: Progress
) -> Iterator[pa.RecordBatch]:
    """The current result's batches, cast to the table's schema, counted as they pass."""
    for raw in fetch_batches(cur):
        b = cast_batch(raw, columns, schema, opts)
        progress.add(b.num_rows, b.nbytes)
        yield b
