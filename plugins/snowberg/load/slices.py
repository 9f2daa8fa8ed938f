"""Slices: a large window read as several smaller windows, by cursor value.

Why: the local emulator returns each query as one Arrow block, and even real
Snowflake hands a whole result to one worker. A window of 50M rows must not
become one query result, one Arrow table or one task. So a window with more
than ``max_rows_per_slice`` rows is cut into contiguous cursor ranges at plan
time, and each range is its own extract query:

    window (low, high]  →  (low, b1] (b1, b2] … (bn-1, high]

Correctness does not depend on where the boundaries fall: consecutive slices
share a boundary (one side exclusive, the other inclusive), the first slice
keeps the window's lower bound and NULL-cursor rows, the last keeps its upper
bound, so every row of the window is in exactly one slice. Only the balance
depends on the boundaries; they come from ``APPROX_PERCENTILE`` on the cursor
(one cheap aggregate in Snowflake, issued only when the window is big), or
from the min/max the plan query already returned (``method="range"``). Rows
tied on one cursor value cannot be split: a slice holding a big tie is as big
as the tie (logged).

Two ways to use slices, both ending in ONE Iceberg commit with the watermark:

* in one task (``load.load_window``): the slices are extracted one after the
  other and each is written to its own data files, so memory is bounded by
  the slice, not the window;
* across workers (``operators/scale.py``): ``prepare_slices`` → one mapped
  task per slice running ``write_slice`` (data files + a staging manifest,
  nothing committed) → ``commit_slices`` appends all files in a single commit.
"""

from __future__ import annotations

import logging
import math
import re
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from snowberg.config.table_config import TableConfig
from snowberg.core.cursor import CursorKind, format_cursor_value, parse_cursor_value
from snowberg.core.window import Window
from snowberg.snowflake.source import SourceQuery

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from snowberg.mapping.types import SnowflakeColumn

log = logging.getLogger(__name__)

DEFAULT_MAX_ROWS_PER_SLICE = 250_000
SLICE_BOUNDS = "slice_bounds"  # Window.extra key: the inner boundaries, as cursor text
SLICE_METHODS = ("quantiles", "range")


def max_rows_per_slice(cfg: TableConfig) -> int:
    """``max_rows_per_slice`` from the table config, or the default.

    Read with ``getattr`` so this works before the field exists on
    ``TableConfig`` (the lead adds it); a value below 1 means the default.
    """
    value = getattr(cfg, "max_rows_per_slice", None)
    return int(value) if value and int(value) > 0 else DEFAULT_MAX_ROWS_PER_SLICE


# ---------------------------------------------------------------------------
# Boundaries


def numeric_cursor_sql(kind: str, cursor_sql: str) -> str:
    """The cursor as a number APPROX_PERCENTILE can digest (UTC microseconds, days, or itself)."""
    return CursorKind(kind).numeric_sql(cursor_sql)


def cursor_from_numeric(kind: str, scale: int, value: Any) -> str:
    """Inverse of ``numeric_cursor_sql``: a cursor value as text (floored to the cursor's resolution)."""
    return CursorKind(kind).from_numeric(value, scale)


def _rows_only(w: Window) -> Window:
    """The window without its NULL-cursor rows (quantiles are over cursor values)."""
    return replace(w, include_nulls=False)


def quantile_sql(sq: SourceQuery, w: Window, n_slices: int) -> tuple[str, dict[str, Any]]:
    """One aggregate: the n-1 inner quantiles of the cursor within the window."""
    if sq.cursor_sql is None or w.cursor_kind is None:
        raise ValueError("slicing needs a cursor column")
    if n_slices < 2:
        raise ValueError("n_slices must be at least 2")
    num = numeric_cursor_sql(w.cursor_kind, sq.cursor_sql)
    where, params = sq.predicate(_rows_only(w))
    exprs = ", ".join(f"APPROX_PERCENTILE({num}, {k / n_slices:.6f}) AS q{k}" for k in range(1, n_slices))
    # Identifiers are validated and quoted by SourceQuery; values are bind parameters.
    return f"SELECT {exprs} FROM {sq.from_clause} WHERE {where}", params  # noqa: S608


def range_bounds(w: Window, n_slices: int) -> list[str]:
    """Equal-width boundaries between the window's min and max cursor (from the plan query; no extra query)."""
    kind = w.cursor_kind
    lo, hi = w.extra.get("min_cursor"), w.extra.get("max_cursor")
    if kind is None or lo is None or hi is None or n_slices < 2:
        return []
    lo_v, hi_v = kind.parse_value(kind.format_value(lo)), kind.parse_value(kind.format_value(hi))
    return [kind.between(lo_v, hi_v, Decimal(k) / Decimal(n_slices), w.cursor_scale) for k in range(1, n_slices)]


def clean_bounds(w: Window, candidates: Sequence[str | None]) -> list[str]:
    """Sorted, distinct boundaries strictly inside the window (others would make empty slices).

    Boundaries below the window's smallest cursor or at/above its largest
    (as the plan query saw them, in ``w.extra``) would also only make slices
    that are empty at plan time; rows arriving later still land in the last
    slice, which always reaches the window's upper bound.
    """
    kind = w.cursor_kind
    if kind is None:
        return []

    def bound(text: Any) -> Any:
        return None if text is None else parse_cursor_value(kind, format_cursor_value(kind, text))

    lo, hi = bound(w.low), bound(w.high)
    seen_min, seen_max = bound(w.extra.get("min_cursor")), bound(w.extra.get("max_cursor"))
    seen: dict[Any, str] = {}
    for text in candidates:
        if text is None:
            continue
        v = parse_cursor_value(kind, text)
        if (lo is not None and v <= lo) or (hi is not None and v >= hi):
            continue
        if (seen_min is not None and v < seen_min) or (seen_max is not None and v >= seen_max):
            continue
        seen.setdefault(v, format_cursor_value(kind, v))
    return [seen[v] for v in sorted(seen)]


def with_slices(w: Window, bounds: Sequence[str]) -> Window:
    extra = dict(w.extra)
    if bounds:
        extra[SLICE_BOUNDS] = list(bounds)
    else:
        extra.pop(SLICE_BOUNDS, None)
    return replace(w, extra=extra)


def plan_slices(
    cfg: TableConfig,
    conn: Any,
    w: Window,
    *,
    max_rows: int | None = None,
    method: str = "quantiles",
    logger: logging.Logger | None = None,
) -> Window:
    """Fix the slice boundaries of a planned window (stored in ``w.extra``; retries reuse them).

    No query when the window is small, has no cursor or is a dry run: a run
    with nothing new still costs only the plan query.
    """
    lg = logger or log
    limit = max_rows or max_rows_per_slice(cfg)
    rows = w.rows_in_window or 0
    if w.cursor_kind is None or w.dry_run or rows <= limit:
        return with_slices(w, [])
    if method not in SLICE_METHODS:
        raise ValueError(f"slice method must be one of {SLICE_METHODS}, got {method!r}")
    n = math.ceil(rows / limit)
    if method == "range":
        candidates: list[str | None] = list(range_bounds(w, n))
    else:
        sql, params = quantile_sql(SourceQuery(cfg), w, n)
        cur = conn.cursor()
        try:
            cur.execute(sql, params)
            row = cur.fetchone() or ()
        finally:
            cur.close()
        candidates = [None if v is None else cursor_from_numeric(w.cursor_kind, w.cursor_scale, v) for v in row]
    bounds = clean_bounds(w, candidates)
    if len(bounds) + 1 < n:
        lg.warning(
            "%s: wanted %d slices of ≤%s rows but the cursor has only %d distinct boundaries in the window "
            "(rows tied on one cursor value stay in one slice)",
            cfg.name,
            n,
            f"{limit:,}",
            len(bounds) + 1,
        )
    lg.info(
        "%s: %s rows in the window → %d slices by %s (≤%s rows each planned)",
        cfg.name,
        f"{rows:,}",
        len(bounds) + 1,
        method,
        f"{limit:,}",
    )
    return with_slices(w, bounds)


def slice_windows(w: Window) -> list[Window]:
    """The slices of a window, in cursor order (``[w]`` when it was not sliced)."""
    bounds = list(w.extra.get(SLICE_BOUNDS) or [])
    if not bounds:
        return [w]
    edges: list[str | None] = [w.low, *bounds, w.high]
    n = len(edges) - 1
    out = []
    for i in range(n):
        extra = {k: v for k, v in w.extra.items() if k != SLICE_BOUNDS}
        extra.update({"slice_index": i, "slice_count": n})
        out.append(
            replace(
                w,
                low=edges[i],
                low_inclusive=w.low_inclusive if i == 0 else False,
                high=edges[i + 1],
                high_inclusive=w.high_inclusive if i == n - 1 else True,
                include_nulls=w.include_nulls and i == 0,
                rows_in_window=None,
                extra=extra,
            )
        )
    return out


def check_same_columns(first: Sequence[SnowflakeColumn], other: Sequence[SnowflakeColumn], where: str) -> None:
    """Every slice of a run must describe the same columns (a DDL change mid-run fails the run)."""
    if list(first) != list(other):
        a = [c.name + " " + c.sql_type for c in first]
        b = [c.name + " " + c.sql_type for c in other]
        raise RuntimeError(f"{where}: the source's columns changed during the run ({a} → {b}); re-run to re-plan")


# ---------------------------------------------------------------------------
# Across workers: prepare → write_slice (mapped) → commit_slices


STAGING_DIR = "snowberg-staging"


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class SliceResult:
    """What one mapped task hands to the commit (an XCom: JSON only)."""

    index: int
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


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:120]


def staging_location(table: Table, run_id: str) -> str:
    return f"{table.metadata.location.rstrip('/')}/metadata/{STAGING_DIR}/{_safe(run_id)}"


def prepare_slices(
    cfg: TableConfig,
    conn: Any,
    catalog: Catalog,
    w: Window,
    *,
    max_rows: int | None = None,
    method: str = "quantiles",
    logger: logging.Logger | None = None,
) -> list[dict[str, Any]]:
    """Plan the slices of a window and make the table ready for them; one dict per mapped task.

    An empty list means nothing to extract (nothing new, a dry run, or this
    run already committed): the mapped tasks are skipped. The table is
    created, or its schema evolved, here, before any slice writes: slices
    write against one schema id, and the commit refuses if it moved.
    """
    from snowberg.iceberg import state
    from snowberg.iceberg.tables import apply_schema_changes, create_table, load_table_or_none, plan_schema_changes
    from snowberg.load.extract import _carry_watermark, _check_base, _merges, mapping_options
    from snowberg.load.plan import BACKFILL, INCREMENTAL, describe_window
    from snowberg.mapping.types import map_columns
    from snowberg.snowflake.source import result_columns

    lg = logger or log
    table = load_table_or_none(catalog, cfg)
    if state.find_run_commit(table, w.run_id, w.mode, w.high) is not None:
        lg.info("run %s already committed this window: no slices", w.run_id)
        return []
    if w.mode == BACKFILL:
        w = _carry_watermark(table, w)
    _check_base(table, w)
    if w.dry_run:
        lg.info("dry run: would load %s rows for window %s", w.rows_in_window, describe_window(w))
        return []
    if w.rows_in_window == 0 and w.mode == INCREMENTAL:
        lg.info("nothing new in window %s: no slices", describe_window(w))
        return []

    sq = SourceQuery(cfg)
    cur = conn.cursor()
    try:
        # Compile-only describe of the result columns (LIMIT 0 reads no rows).
        cur.execute(f"SELECT * FROM {sq.from_clause} LIMIT 0")  # noqa: S608 - quoted identifiers only
        columns = map_columns(result_columns(cur), mapping_options(cfg))
    finally:
        cur.close()
    if table is None:
        table = create_table(catalog, cfg, columns)
    add, widen = plan_schema_changes(table.schema(), columns)
    if add or widen:
        tx = table.transaction()
        apply_schema_changes(tx, add, widen)
        table = tx.commit_transaction()
    if _merges(cfg, w) and table.current_snapshot() is None:
        # The slices collect keys only when there is something to replace; the
        # first load checks the key's uniqueness in Snowflake instead (no
        # worker ever holds every key of a big window).
        check_unique_in_source(cfg, conn, w)
    planned = plan_slices(cfg, conn, w, max_rows=max_rows, method=method, logger=lg)
    parts = slice_windows(planned)
    schema_id = table.metadata.current_schema_id
    lg.info("%s: %d slice task(s) for window %s (schema id %d)", cfg.name, len(parts), describe_window(w), schema_id)
    return [SliceTask(i, len(parts), p.to_dict(), w.run_id, schema_id).to_dict() for i, p in enumerate(parts)]


def duplicate_keys_sql(cfg: TableConfig, w: Window) -> tuple[str, dict[str, Any]]:
    """Up to three primary-key values that occur more than once in the window."""
    from snowberg.core.identifiers import quote_identifier

    sq = SourceQuery(cfg)
    keys = ", ".join(quote_identifier(k, "primary key column") for k in cfg.primary_key)
    where, params = sq.predicate(w)
    sql = (
        f"SELECT {keys}, COUNT(*) AS n FROM {sq.from_clause} WHERE {where} GROUP BY {keys} HAVING COUNT(*) > 1 LIMIT 3"  # noqa: S608
    )
    return sql, params


def check_unique_in_source(cfg: TableConfig, conn: Any, w: Window) -> None:
    from snowberg.load.extract import DuplicateKeyError

    sql, params = duplicate_keys_sql(cfg, w)
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        dup = cur.fetchall()
    finally:
        cur.close()
    if dup:
        raise DuplicateKeyError(
            f"primary key {[k.lower() for k in cfg.primary_key]} is not unique in the window (e.g. {dup}); nothing "
            "was written. Fix primary_key in the config or de-duplicate in a custom query."
        )


def write_slice(
    cfg: TableConfig,
    conn: Any,
    catalog: Catalog,
    task: SliceTask | dict[str, Any],
    *,
    logger: logging.Logger | None = None,
) -> dict[str, Any]:
    """Extract one slice and write its data files and a staging manifest. Commits nothing.

    A retried slice writes new files under new names; the commit uses only
    the files named by the attempt that succeeded (its XCom).
    """
    from snowberg.core.progress import Progress
    from snowberg.iceberg.tables import arrow_schema
    from snowberg.load.extract import KeyCollector, _merges, _write_data_files, mapping_options
    from snowberg.mapping.types import cast_batch, map_columns
    from snowberg.snowflake.source import fetch_batches, result_columns

    lg = logger or log
    t = task if isinstance(task, SliceTask) else SliceTask.from_dict(task)
    sw = Window.from_dict(t.window)
    table = _load(catalog, cfg)
    meta = table.metadata
    if meta.current_schema_id != t.schema_id:
        raise RuntimeError(
            f"slice {t.index}: the table's schema changed since the slices were planned "
            f"(schema id {t.schema_id} → {meta.current_schema_id}); re-run the DAG run to re-plan"
        )
    opts = mapping_options(cfg)
    target_schema = arrow_schema(meta.schema())
    sq = SourceQuery(cfg)
    sql, params = sq.extract_sql(sw)
    keys = KeyCollector(cfg) if _merges(cfg, sw) and meta.current_snapshot() is not None else None
    progress = Progress(f"{cfg.name} slice {t.index + 1}/{t.count}", lg)
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        columns = map_columns(result_columns(cur), opts)
        _check_fits(meta.schema(), columns, t.index)

        def batches() -> Any:
            for raw in fetch_batches(cur):
                b = cast_batch(raw, columns, target_schema, opts)
                if keys is not None:
                    keys.add(b)
                progress.add(b.num_rows, b.nbytes)
                yield b

        tx = table.transaction()
        data_files = list(_write_data_files(table, tx, target_schema, batches(), cfg.batch_rows))
    finally:
        cur.close()
    lg.info("%s", progress.summary())
    stage = staging_location(table, t.run_id)
    tag = f"slice-{t.index:05d}-{uuid.uuid4().hex[:12]}"
    manifest_path, manifest_length = (None, 0)
    if data_files:
        manifest_path, manifest_length = _write_staging_manifest(table, f"{stage}/{tag}.avro", data_files)
    keys_path = None
    if keys is not None and progress.rows:
        keys_path = _write_keys(table, f"{stage}/{tag}-keys.parquet", keys.table())
    return SliceResult(
        t.index,
        manifest_path,
        manifest_length,
        meta.default_spec_id,
        t.schema_id,
        progress.rows,
        progress.bytes,
        len(data_files),
        keys_path,
    ).to_dict()


def _load(catalog: Catalog, cfg: TableConfig) -> Table:
    n = cfg.iceberg_name
    return catalog.load_table((n.namespace, n.table))


def _check_fits(schema: Any, columns: Sequence[Any], index: int) -> None:
    from snowberg.iceberg.tables import plan_schema_changes

    add, widen = plan_schema_changes(schema, columns)
    if add or widen:
        names = [c.name for c in add] + [c.name for c, _ in widen]
        raise RuntimeError(
            f"slice {index}: the source has columns the table cannot hold yet ({names}); the source changed "
            "after the slices were planned: re-run the DAG run to re-plan"
        )


# Staging manifests: Iceberg's own serialisation of DataFile metadata (stats,
# partition values, sizes), written next to the table's metadata but never
# referenced by it. The commit reads them back and appends their data files.
_PLACEHOLDER_SNAPSHOT_ID = 0


def _write_staging_manifest(table: Table, path: str, data_files: Sequence[Any]) -> tuple[str, int]:
    from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, write_manifest

    meta = table.metadata
    out = table.io.new_output(path)
    writer = write_manifest(
        format_version=meta.format_version,
        spec=meta.spec(),
        schema=meta.schema(),
        output_file=out,
        snapshot_id=_PLACEHOLDER_SNAPSHOT_ID,
        avro_compression="deflate",
    )
    with writer:
        for f in data_files:
            writer.add(
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED, snapshot_id=_PLACEHOLDER_SNAPSHOT_ID, data_file=f
                )
            )
    mf = writer.to_manifest_file()
    return path, int(mf.manifest_length)


def read_staging_manifest(table: Table, r: SliceResult) -> list[Any]:
    from pyiceberg.manifest import ManifestContent, ManifestFile

    if r.manifest_path is None:
        return []
    mf = ManifestFile.from_args(
        manifest_path=r.manifest_path,
        manifest_length=r.manifest_length,
        partition_spec_id=r.spec_id,
        content=ManifestContent.DATA,
        sequence_number=0,
        min_sequence_number=0,
        added_snapshot_id=_PLACEHOLDER_SNAPSHOT_ID,
    )
    return [e.data_file for e in mf.fetch_manifest_entry(table.io, discard_deleted=True)]


def _write_keys(table: Table, path: str, keys: Any) -> str:
    import pyarrow.parquet as pq

    with table.io.new_output(path).create(overwrite=True) as f:
        pq.write_table(keys, f)
    return path


def _read_keys(table: Table, path: str) -> Any:
    import pyarrow.parquet as pq

    with table.io.new_input(path).open() as f:
        return pq.read_table(f)


def commit_slices(
    cfg: TableConfig,
    catalog: Catalog,
    w: Window,
    results: Sequence[SliceResult | dict[str, Any]],
    *,
    logger: logging.Logger | None = None,
) -> dict[str, Any]:
    """Append every slice's data files in ONE Iceberg commit carrying the window's watermark.

    Exactly once: a run that already committed appends nothing; a watermark
    moved by another run refuses; a data file already in the table refuses
    (no file is ever appended twice); the commit asserts the snapshot it was
    built on. The slices' files are referenced only by this commit.
    """
    import time

    from snowberg.load.extract import KeyCollector, LoadResult, _carry_watermark
    from snowberg.load.plan import BACKFILL, describe_window

    lg = logger or log
    started = time.monotonic()
    rs = sorted(
        (r if isinstance(r, SliceResult) else SliceResult.from_dict(dict(r)) for r in results), key=lambda r: r.index
    )
    from snowberg.iceberg import state
    from snowberg.iceberg.tables import load_table_or_none

    table = load_table_or_none(catalog, cfg)
    done = state.find_run_commit(table, w.run_id, w.mode, w.high)
    if done is not None:
        lg.info("run %s already committed this window in snapshot %s: appending nothing", w.run_id, done.snapshot_id)
        return LoadResult(
            "already_committed", 0, 0, 0, done.snapshot_id, w.new_watermark, time.monotonic() - started, w.to_dict()
        ).to_dict()
    if w.dry_run:
        return LoadResult("dry_run", 0, 0, 0, None, w.base_watermark, time.monotonic() - started, w.to_dict()).to_dict()
    if w.mode == BACKFILL:
        w = _carry_watermark(table, w)  # an incremental run may have committed since the backfill was planned
    rows = sum(r.rows for r in rs)
    if table is None or (rows == 0 and w.mode == "incremental"):
        lg.info("nothing new in window %s: no commit", describe_window(w))
        return LoadResult(
            "nothing_new", 0, 0, 0, None, w.base_watermark, time.monotonic() - started, w.to_dict()
        ).to_dict()
    schema_ids = {r.schema_id for r in rs}
    if schema_ids and schema_ids != {table.metadata.current_schema_id}:
        raise RuntimeError(
            f"the slices were written with schema id(s) {sorted(schema_ids)} but the table is at "
            f"{table.metadata.current_schema_id}; re-run the DAG run to re-plan"
        )
    data_files = [f for r in rs for f in read_staging_manifest(table, r)]
    keys = None
    key_paths = [r.keys_path for r in rs if r.keys_path]
    if key_paths:
        keys = KeyCollector(cfg)
        for p in key_paths:
            keys.chunks.append(_read_keys(table, p))
    snap = commit_data_files(cfg, table, w, data_files, rows, keys=keys, logger=lg)
    _cleanup_staging(table, rs)
    return LoadResult(
        "committed",
        rows,
        sum(r.bytes for r in rs),
        len(data_files),
        snap,
        w.new_watermark,
        time.monotonic() - started,
        w.to_dict(),
    ).to_dict()


def commit_data_files(
    cfg: TableConfig,
    table: Table,
    w: Window,
    data_files: Sequence[Any],
    rows: int,
    *,
    keys: Any = None,
    logger: logging.Logger | None = None,
) -> int:
    """The single commit shared by the mapped slices and the push-down unload. Returns the snapshot id."""
    from snowberg.load.extract import _check_base, commit_window

    lg = logger or log
    _check_base(table, w)
    paths = [f.file_path for f in data_files]
    if len(paths) != len(set(paths)):
        raise RuntimeError("the same data file is listed twice; refusing to commit")
    already = _referenced(table, paths)
    if already:
        raise RuntimeError(
            f"{len(already)} data file(s) are already in the table (e.g. {sorted(already)[:2]}); refusing to append them again"
        )
    tx = table.transaction()
    snap = commit_window(tx, cfg, w, keys, data_files, rows, lg)
    return int(snap.snapshot_id)


def _referenced(table: Table, paths: Sequence[str]) -> set[str]:
    """Which of ``paths`` the table's current snapshot already references (pyiceberg's add_files check)."""
    snap = table.current_snapshot()
    if snap is None or not paths:
        return set()
    wanted = set(paths)
    found: set[str] = set()
    for manifest in snap.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.data_file.file_path in wanted:
                found.add(entry.data_file.file_path)
    return found


def _cleanup_staging(table: Table, rs: Sequence[SliceResult]) -> None:
    """Best effort: the staging manifests and key files are not part of the table."""
    for r in rs:
        for p in (r.manifest_path, r.keys_path):
            if p:
                try:
                    table.io.delete(p)
                except Exception as exc:  # noqa: BLE001 - a leftover staging file is harmless
                    log.debug("could not delete staging file %s: %s", p, exc)
