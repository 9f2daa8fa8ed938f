"""Load a planned window: extract it from Snowflake and commit it to Iceberg, once.

If this run already committed this window (a retry after the commit),
nothing is appended. If another run moved the watermark since the plan,
the load refuses (``ConcurrentCommitError``). The commit asserts the snapshot
it was built on, and snowberg tables disable pyiceberg's rebase-and-retry,
so two runs can never both commit the same window.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from snowberg.config.table_config import TableConfig, WriteMode
from snowberg.core import faults
from snowberg.core.progress import Progress
from snowberg.core.window import Window
from snowberg.iceberg import state
from snowberg.iceberg.tables import begin_write, load_table_or_none
from snowberg.load.plan import BACKFILL, FULL_REFRESH, INCREMENTAL, describe_window
from snowberg.load.slices import check_same_columns, check_unique_in_source, slice_windows
from snowberg.mapping.types import MappedColumn, MappingOptions, cast_batch, map_columns
from snowberg.snowflake.source import SourceQuery, fetch_batches, result_columns

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)


class DuplicateKeyError(ValueError):
    pass


def mapping_options(cfg: TableConfig) -> MappingOptions:
    return MappingOptions(
        number_as_long=frozenset(c.upper() for c in cfg.number_as_long),
        timestamp_nanos=cfg.timestamp_nanos,
        geo_format=cfg.geo_format,
    )


@dataclass
class LoadResult:
    status: str  # committed | already_committed | nothing_new | dry_run
    rows: int
    bytes: int
    data_files: int
    snapshot_id: int | None
    watermark: str | None
    seconds: float
    window: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _snapshot_props(cfg: TableConfig, w: Window, rows: int) -> dict[str, str]:
    return {
        state.WATERMARK: w.new_watermark or "",
        state.CURSOR_KIND: w.cursor_kind or "",
        state.RUN_ID: w.run_id,
        state.MODE: w.mode,
        state.WINDOW_LOW: w.low or "",
        state.WINDOW_HIGH: w.high or "",
        state.ROWS: str(rows),
        state.VERSION: "1",
    }


def load_window(
    cfg: TableConfig, conn: Any, catalog: Catalog, w: Window, *, logger: logging.Logger | None = None
) -> LoadResult:
    """Extract the planned window and commit it to Iceberg, once."""
    lg = logger or log
    started = time.monotonic()
    table = load_table_or_none(catalog, cfg)
    done = state.find_run_commit(table, w.run_id, w.mode, w.high)
    if done is not None:
        lg.info("run %s already committed this window in snapshot %s: appending nothing", w.run_id, done.snapshot_id)
        return LoadResult(
            "already_committed", 0, 0, 0, done.snapshot_id, w.new_watermark, time.monotonic() - started, w.to_dict()
        )
    if w.mode == BACKFILL:
        w = _carry_watermark(table, w)
    _check_base(table, w)
    if w.dry_run:
        lg.info("dry run: would load %s rows for window %s", w.rows_in_window, describe_window(w))
        return LoadResult("dry_run", 0, 0, 0, None, w.base_watermark, time.monotonic() - started, w.to_dict())
    if w.rows_in_window == 0 and w.mode == INCREMENTAL:
        lg.info("nothing new in window %s: no query, no data file, no commit", describe_window(w))
        return LoadResult("nothing_new", 0, 0, 0, None, w.base_watermark, time.monotonic() - started, w.to_dict())

    sq = SourceQuery(cfg)
    parts = slice_windows(w)  # [w] unless plan_slices cut a large window by cursor value
    # A sliced first load replaces nothing: check key uniqueness in Snowflake instead of holding every key.
    sliced_first_load = len(parts) > 1 and _merges(cfg, w) and (table is None or table.current_snapshot() is None)
    if sliced_first_load:
        check_unique_in_source(cfg, conn, w)
    sql, params = sq.extract_sql(parts[0])
    opts = mapping_options(cfg)
    cur = conn.cursor()
    try:
        lg.info("extracting %s%s", describe_window(w), f" in {len(parts)} slices" if len(parts) > 1 else "")
        cur.execute(sql, params)
        source_columns = result_columns(cur)
        columns = map_columns(source_columns, opts)
        table, tx, target_schema, schema_changed = begin_write(catalog, cfg, table, columns)
        progress = Progress(f"{cfg.name}: fetched", lg)
        keys = KeyCollector(cfg) if _merges(cfg, w) and not sliced_first_load else None

        def batches(i: int) -> Iterator[pa.RecordBatch]:
            if i:  # each further slice is its own query, run once the previous one is written
                s_sql, s_params = sq.extract_sql(parts[i])
                cur.execute(s_sql, s_params)
                check_same_columns(source_columns, result_columns(cur), f"{cfg.name} slice {i + 1}/{len(parts)}")
            for raw in fetch_batches(cur):
                b = cast_batch(raw, columns, target_schema, opts)
                if keys is not None:
                    keys.add(b)
                progress.add(b.num_rows, b.nbytes)
                yield b

        # One write per slice: memory is bounded by the slice, not the window.
        data_files = [
            f
            for i in range(len(parts))
            for f in _write_data_files(table, tx, target_schema, batches(i), cfg.batch_rows)
        ]
    finally:
        cur.close()
    lg.info("%s: %s", cfg.name, progress.summary())
    faults.crash_point("after_extract")

    if progress.rows == 0 and w.mode == INCREMENTAL and not schema_changed:
        lg.info("window held no rows at extract time: no commit")
        return LoadResult("nothing_new", 0, 0, 0, None, w.base_watermark, time.monotonic() - started, w.to_dict())

    snap = commit_window(tx, cfg, w, keys, data_files, progress.rows, lg)
    return LoadResult(
        "committed",
        progress.rows,
        progress.bytes,
        len(data_files),
        snap.snapshot_id,
        w.new_watermark,
        time.monotonic() - started,
        w.to_dict(),
    )


def commit_window(
    tx: Any,
    cfg: TableConfig,
    w: Window,
    keys: KeyCollector | None,
    data_files: list[Any] | Any,
    rows: int,
    lg: logging.Logger,
) -> Any:
    """The one commit of a run: what the rows replace (copy-on-write), the new data files, the state.

    Shared by the single-task load, the mapped slices and the push-down unload.
    """
    props = _snapshot_props(cfg, w, rows)
    _delete_replaced(tx, cfg, w, keys, props)
    with tx.update_snapshot(snapshot_properties=props).fast_append() as fa:
        for f in data_files:
            fa.append_data_file(f)
    faults.crash_point("before_commit")
    committed = tx.commit_transaction()
    faults.crash_point("after_commit")
    snap = committed.current_snapshot()
    assert snap is not None
    lg.info(
        "%s: committed snapshot %s: %s rows in %d data files, watermark %s",
        cfg.name,
        snap.snapshot_id,
        f"{rows:,}",
        len(data_files),
        w.new_watermark,
    )
    return snap


def cast_fetched(
    cur: Any, columns: list[MappedColumn], schema: pa.Schema, opts: MappingOptions, progress: Progress
) -> Iterator[pa.RecordBatch]:
    """The current result's batches, cast to the table's schema, counted as they pass."""
    for raw in fetch_batches(cur):
        b = cast_batch(raw, columns, schema, opts)
        progress.add(b.num_rows, b.nbytes)
        yield b


def _merges(cfg: TableConfig, w: Window) -> bool:
    return cfg.effective_write_mode is WriteMode.MERGE and w.mode != FULL_REFRESH


def _carry_watermark(table: Table | None, w: Window) -> Window:
    """A backfill records the table's watermark as it is now, not as it was at plan time.

    Backfill runs do not count toward a DAG's max_active_runs, so an
    incremental run may commit between a backfill's plan and its load. The
    backfill must then neither fail nor put the old watermark back: it carries
    the current one. Its commit still asserts the snapshot read here.
    """
    st = state.read_state(table)
    now_wm = st.watermark if st else None
    if now_wm == w.base_watermark:
        return w
    d = w.to_dict()
    d.update(base_watermark=now_wm, new_watermark=now_wm, base_snapshot_id=st.snapshot_id if st else None)
    return Window.from_dict(d)


def _check_base(table: Table | None, w: Window) -> None:
    """Refuse when another run moved the watermark since this window was planned.

    A backfill commit does not move the watermark, so an incremental run
    planned before it still loads (on top of it); two incremental runs of
    the same window cannot both pass this check and the commit assertion.
    """
    st = state.read_state(table)
    now_wm = st.watermark if st else None
    if now_wm != w.base_watermark:
        raise state.ConcurrentCommitError(
            f"the table's watermark moved from {w.base_watermark!r} to {now_wm!r} since run {w.run_id} was planned "
            f"(committed by run {st.run_id if st else None!r}); re-plan the run"
        )


class KeyCollector:
    """Primary-key values of the rows being loaded (for the merge delete)."""

    def __init__(self, cfg: TableConfig) -> None:
        self.columns = [c.lower() for c in cfg.primary_key]
        self.chunks: list[pa.Table] = []

    def add(self, batch: pa.RecordBatch) -> None:
        import pyarrow as pa

        self.chunks.append(pa.Table.from_batches([batch]).select(self.columns))

    def table(self) -> pa.Table:
        import pyarrow as pa

        return pa.concat_tables(self.chunks) if self.chunks else pa.table({c: [] for c in self.columns})

    def check_unique(self) -> pa.Table:
        t = self.table()
        grouped = t.group_by(self.columns).aggregate([([], "count_all")])
        if grouped.num_rows != t.num_rows:
            import pyarrow.compute as pc

            dup = grouped.filter(pc.greater(grouped["count_all"], 1)).slice(0, 3).to_pylist()
            raise DuplicateKeyError(
                f"primary key {self.columns} is not unique in the window (e.g. {dup}); nothing was written. "
                "Fix primary_key in the config or de-duplicate in a custom query."
            )
        return t


def _delete_replaced(tx: Any, cfg: TableConfig, w: Window, keys: KeyCollector | None, props: dict[str, str]) -> None:
    """Remove what the new rows replace, as copy-on-write (no equality deletes: Snowflake cannot read them)."""
    from pyiceberg import expressions

    # pyiceberg's expression classes are typed as pydantic models; their
    # positional constructors are the documented API.
    ex: Any = expressions
    AlwaysTrue, And, EqualTo, GreaterThanOrEqual, In, LessThan, Or = (
        ex.AlwaysTrue,
        ex.And,
        ex.EqualTo,
        ex.GreaterThanOrEqual,
        ex.In,
        ex.LessThan,
        ex.Or,
    )

    expr: Any = None
    if w.mode == FULL_REFRESH:
        expr = AlwaysTrue()
    else:
        if w.mode == BACKFILL and w.cursor_column:
            c = w.cursor_column.lower()
            upper = ex.LessThanOrEqual if w.high_inclusive else LessThan  # inclusive when clamped to the watermark
            expr = And(GreaterThanOrEqual(c, _literal(w.cursor_kind, w.low)), upper(c, _literal(w.cursor_kind, w.high)))
        if keys is not None:
            kt = keys.check_unique()
            # No snapshot yet (a first load): nothing to replace, so no key expression (it is O(rows) Python objects).
            if kt.num_rows and tx.table_metadata.current_snapshot() is not None:
                if len(keys.columns) == 1:
                    kexpr: Any = In(keys.columns[0], set(kt.column(0).to_pylist()))
                else:
                    kexpr = (
                        Or(*[And(*[EqualTo(k, v) for k, v in row.items()]) for row in kt.to_pylist()])
                        if kt.num_rows > 1
                        else And(*[EqualTo(k, v) for k, v in kt.to_pylist()[0].items()])
                    )
                expr = kexpr if expr is None else Or(expr, kexpr)
    if expr is None or tx.table_metadata.current_snapshot() is None:
        return
    tx.delete(delete_filter=expr, snapshot_properties=props)


def _literal(kind: str | None, text: str | None) -> Any:
    from snowberg.core.cursor import CursorKind

    if kind is None or text is None:
        raise ValueError("backfill window without a cursor")
    return CursorKind(kind).iceberg_literal(text)


def _write_data_files(
    table: Table, tx: Any, schema: pa.Schema, batches: Iterator[pa.RecordBatch], batch_rows: int
) -> Iterator[Any]:
    """Write Parquet data files for the transaction, in bounded memory.

    We call pyiceberg's ``_dataframe_to_data_files`` (the function behind
    ``Table.append``) instead of ``append`` itself because ``append`` makes one
    snapshot per call and cannot stream into a partitioned table; a run must be
    a single snapshot whatever the table's partitioning, with memory bounded
    by ``batch_rows``.
    """
    import pyarrow as pa
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    write_uuid = uuid.uuid4()
    import itertools

    counter = itertools.count(0)
    if tx.table_metadata.spec().is_unpartitioned():
        reader = pa.RecordBatchReader.from_batches(schema, batches)
        yield from _dataframe_to_data_files(tx.table_metadata, reader, table.io, write_uuid=write_uuid, counter=counter)
        return
    buf: list[pa.RecordBatch] = []
    n = 0
    for b in batches:
        buf.append(b)
        n += b.num_rows
        if n >= batch_rows:
            yield from _dataframe_to_data_files(
                tx.table_metadata, pa.Table.from_batches(buf, schema), table.io, write_uuid=write_uuid, counter=counter
            )
            buf, n = [], 0
    if buf:
        yield from _dataframe_to_data_files(
            tx.table_metadata, pa.Table.from_batches(buf, schema), table.io, write_uuid=write_uuid, counter=counter
        )
