"""Volume verification: does the lake hold what Snowflake holds?

Watermark tables (a ``cursor``) are compared up to the watermark of the
table's last snowberg commit, over the scope ``checks.volume_scope`` plans
(the whole table, or the cursor ranges that changed since the last check):

1. per cursor day, the row count and a checksum of (key, cursor) on both sides
   (one Snowflake query, aggregation pushed down with the scope's cursor
   ranges; on the lake, pyiceberg plans the scan with the same ranges, so data
   files are skipped by partition and column statistics before any is opened,
   and DuckDB aggregates the rest as it streams past, file by file);
2. where a day differs, key-hash buckets are checksummed and bisected
   (``snowberg.checks.hashdiff``) until the differing rows are few enough to
   compare one by one; each level reads only the differing days, pushed down
   as cursor ranges on both sides;
3. keys only in the lake are looked up in the source (one query): a key whose
   source row moved above the watermark is a pending update (the next load
   brings it), a key gone from the source is a hard delete (``deletes:``).

Merge tables hold one row per key; append tables hold every version, so the
lake side keeps each key's newest version. Tables without a key (or with
``volume.count_only``) compare counts per day only: equal for merge tables,
the lake at least the source for append tables (older versions stay). Lake
counts come from the manifests where a data file has no delete file and its
column statistics put all of its rows in one day of the scope.

Stream tables and tables without a cursor are compared by counts (per day of
``volume.day_column``, else for the whole table) against the source as of the
point the lake holds: the stream's consumed offset, or the full refresh's
commit, through Snowflake time travel (``AT(TIMESTAMP => …)``).

A check that cannot compare says why: ``VolumeCheckSkipped`` (no lake
commit yet, an inconclusive result) or ``VolumeSourceError`` (the source
cannot be read); never a silent pass.

Nothing here writes, except ``commit_hard_deletes`` (``deletes: propagate``),
and only from a consistent report.
"""

# SQL here is built from validated, quoted identifiers and fixed fragments; every value is bound.
# ruff: noqa: S608

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from snowberg.checks import hashdiff as hd
from snowberg.checks import volume_scope as vs
from snowberg.config.table_config import NullCursorPolicy, TableConfig, WriteMode
from snowberg.config.volume_settings import DeletePolicy, VolumeSettings
from snowberg.core.cursor import CursorKind
from snowberg.iceberg import gate, state

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

ROWS_DELETED = state.ROWS_DELETED
PROPAGATE_MODE = vs.PROPAGATE_MODE
ALL_ROWS = hd.NULL_DAY  # the one count group of a table compared as a whole (no day column)


class VolumeCheckSkipped(Exception):
    """The check cannot compare now (nothing loaded yet, or an inconclusive result); the message says why."""


class VolumeSourceError(RuntimeError):
    """The Snowflake source cannot be read (missing, no privilege, outside its time-travel retention)."""


class Refusal(StrEnum):
    """Why a report's hard deletes are not propagated."""

    OTHER_DIFFERENCES = "other_differences"  # the report has differences besides the hard deletes
    INCONCLUSIVE = "inconclusive"
    UNACCOUNTED = "unaccounted"  # incomplete, and the lake's surplus of rows does not cover the deletes found


@dataclass(kw_only=True)
class Propagation:
    """What ``deletes: propagate`` did with the keys gone from the source."""

    requested: int = 0  # keys found deleted in the source
    removed: int = 0  # lake rows removed (every version of those keys in scope)
    not_removed: list[dict[str, str]] = field(default_factory=list)
    reason: str = ""  # why keys were not removed (empty: all were)
    refused: Refusal | None = None  # set when nothing was propagated because of the report itself

    def to_dict(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "removed": self.removed,
            "not_removed": self.not_removed,
            "reason": self.reason,
            "refused": self.refused.value if self.refused else None,
        }


@dataclass(kw_only=True)
class VolumeReport:
    """What the check found; ``ok`` is False when the sides differ in a way that is not pending."""

    table: str
    lake_table: str
    watermark: str | None
    write_mode: str
    count_only: bool
    snapshot_id: int | None = None  # the lake snapshot compared
    verification: str = vs.ScopeKind.FULL.value
    ranges: list[str] = field(default_factory=list)  # incremental: the cursor ranges compared
    scope_reason: str = ""
    as_of: str | None = None  # the source was read as of this instant (time travel)
    source_rows: int = 0
    lake_rows: int = 0
    lake_versions: int | None = None  # append tables: every version in the lake
    differing_days: dict[str, tuple[int, int]] = field(default_factory=dict)
    differences: list[hd.KeyDiff] = field(default_factory=list)  # real mismatches (reported)
    deleted_in_source: list[hd.KeyDiff] = field(default_factory=list)
    pending: int = 0  # lake rows whose source row moved above the watermark
    truncated: bool = False
    truncated_by: hd.Truncation | None = None  # the budget that ran out (truncated reports)
    inconclusive: bool = False  # compared, but the result neither passes nor fails (see ``note``)
    snowflake_queries: int = 0
    source_rows_scanned: int = 0  # rows the pushed-down predicates selected, summed over the queries
    source_key_lookups: int = 0  # queries by key (unbounded by cursor: Snowflake prunes them by key range)
    source_rows_fetched: int = 0  # rows downloaded from Snowflake for the row-level comparison
    lake_files_total: int | None = None  # data files in the compared snapshot
    lake_files_read: int = 0  # data files opened (summed over the lake-side scans)
    lake_rows_read: int = 0
    lake_counts_from_metadata: bool = False  # count-only: every lake count read from manifests
    lake_files_counted_from_metadata: int = 0
    source_seconds: float = 0.0  # in Snowflake's queries (the first overlaps the lake side's)
    lake_seconds: float = 0.0  # planning, reading and aggregating the lake side
    seconds: float = 0.0
    propagated: int = 0  # rows removed by deletes: propagate
    propagation: Propagation | None = None
    open_ranges: list[hd.Range] = field(default_factory=list)  # the differing days, to verify again next time
    advice: str = ""  # what the user can do about a report that does not pass (run_check)
    key_columns: tuple[hd.Column, ...] = ()
    note: str = ""

    @property
    def ok(self) -> bool:
        if self.inconclusive:
            return False
        if self.count_only:
            return not self.differing_days
        return not self.differences and not self.truncated

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "lake_table": self.lake_table,
            "watermark": self.watermark,
            "write_mode": self.write_mode,
            "count_only": self.count_only,
            "ok": self.ok,
            "inconclusive": self.inconclusive,
            "snapshot_id": None if self.snapshot_id is None else str(self.snapshot_id),
            "verification": self.verification,
            "ranges": self.ranges,
            "scope_reason": self.scope_reason,
            "as_of": self.as_of,
            "source_rows": self.source_rows,
            "lake_rows": self.lake_rows,
            "lake_versions": self.lake_versions,
            "differing_days": {d: {"source": s, "lake": lk} for d, (s, lk) in self.differing_days.items()},
            "differences": [d.to_dict() for d in self.differences],
            "deleted_in_source": [d.to_dict() for d in self.deleted_in_source],
            "pending": self.pending,
            "truncated": self.truncated,
            "truncated_by": self.truncated_by.value if self.truncated_by else None,
            "snowflake_queries": self.snowflake_queries,
            "source_rows_scanned": self.source_rows_scanned,
            "source_key_lookups": self.source_key_lookups,
            "source_rows_fetched": self.source_rows_fetched,
            "lake_files_total": self.lake_files_total,
            "lake_files_read": self.lake_files_read,
            "lake_rows_read": self.lake_rows_read,
            "lake_counts_from_metadata": self.lake_counts_from_metadata,
            "lake_files_counted_from_metadata": self.lake_files_counted_from_metadata,
            "source_seconds": round(self.source_seconds, 3),
            "lake_seconds": round(self.lake_seconds, 3),
            "seconds": round(self.seconds, 3),
            "propagated": self.propagated,
            "propagation": self.propagation.to_dict() if self.propagation else None,
            "note": self.note,
            "advice": self.advice,
        }

    def scope_line(self) -> str:
        if self.verification == vs.ScopeKind.INCREMENTAL.value:
            return f"incremental, cursor in {' ∪ '.join(self.ranges)} ({self.scope_reason})"
        return f"{self.verification} ({self.scope_reason})" if self.scope_reason else self.verification

    def summary_line(self) -> str:
        upto = f" up to watermark {self.watermark}" if self.watermark else ""
        asof = f" (source as of {self.as_of})" if self.as_of else ""
        return f"source {self.source_rows:,} rows, lake {self.lake_rows:,} rows{upto}{asof}"

    def add_note(self, text: str) -> None:
        self.note = f"{self.note}; {text}" if self.note else text


def render(report: VolumeReport, max_keys: int = 20) -> str:
    lines = [
        f"volume check of {report.table} ({report.lake_table}): "
        + ("INCONCLUSIVE" if report.inconclusive else "OK" if report.ok else "MISMATCH")
    ]
    lines.append(f"  scope: {report.scope_line()}")
    lines.append(f"  {report.summary_line()}")
    if report.lake_versions is not None:
        lines.append(f"  lake versions (append table): {report.lake_versions:,}")
    for d, (s, lk) in list(report.differing_days.items())[:20]:
        lines.append(f"  day {_day_label(d)}: source {s:,}, lake {lk:,}")
    for kd in report.differences[:max_keys]:
        lines.append(
            f"  {kd.kind.value}: key {kd.key} source cursor {kd.source_cursor} lake cursor {kd.lake_cursor}"
            + (f" ({kd.note})" if kd.note else "")
        )
    if report.deleted_in_source:
        lines.append(f"  deleted in source: {len(report.deleted_in_source)} key(s)")
    if report.propagation is not None:
        p = report.propagation
        lines.append(
            f"  deletes propagated: {p.removed} row(s) removed"
            + (f"; NOT removed: {p.not_removed[:max_keys]} ({p.reason})" if p.not_removed else "")
        )
    if report.pending:
        lines.append(f"  pending (updated in the source after the watermark): {report.pending}")
    if report.truncated:
        lines.append("  more differences than were narrowed down: the list is incomplete")
    if report.advice:
        lines.append(f"  what to do: {report.advice}")
    if report.note:
        lines.append(f"  note: {report.note}")
    total = f" of {report.lake_files_total:,}" if report.lake_files_total is not None else ""
    lines.append(
        f"  Snowflake: {report.snowflake_queries} queries over {report.source_rows_scanned:,} rows in scope"
        + (f" + {report.source_key_lookups} key lookup(s)" if report.source_key_lookups else "")
        + f"; lake: {report.lake_files_read:,} data file read(s){total}, {report.lake_rows_read:,} rows"
        + (f", {report.lake_files_counted_from_metadata:,} counted from manifests" if report.count_only else "")
        + f"; {report.seconds:.2f}s (Snowflake {report.source_seconds:.2f}s, lake {report.lake_seconds:.2f}s)"
    )
    return "\n".join(lines)


def _day_label(day: str) -> str:
    return "(all)" if day in (hd.NULL_DAY, "") else day


# ---------------------------------------------------------------------------
# Reading the lake: planned with the scope's filter, streamed one data file at a time


def _iceberg_range(col: str, kind: CursorKind, r: hd.Range) -> Any:
    from pyiceberg import expressions

    ex: Any = expressions  # positional constructors are pyiceberg's documented API
    parts = []
    if r.low is not None:
        parts.append((ex.GreaterThanOrEqual if r.low_inclusive else ex.GreaterThan)(col, kind.iceberg_literal(r.low)))
    if r.high is not None:
        parts.append((ex.LessThanOrEqual if r.high_inclusive else ex.LessThan)(col, kind.iceberg_literal(r.high)))
    if not parts:
        return ex.NotNull(col)
    return parts[0] if len(parts) == 1 else ex.And(*parts)


def _any(exprs: Sequence[Any]) -> Any:
    from pyiceberg import expressions

    ex: Any = expressions
    if not exprs:
        return ex.AlwaysFalse()
    return exprs[0] if len(exprs) == 1 else ex.Or(*exprs)


def _range_kind(spec: hd.Spec) -> CursorKind:
    assert spec.cursor is not None
    return CursorKind(spec.cursor_kind) if spec.cursor_kind else hd.kind_of(spec.cursor)


def scope_filter(spec: hd.Spec) -> Any:
    """The Iceberg row filter of the compared rows: the same scope the Snowflake queries push down."""
    from pyiceberg import expressions

    ex: Any = expressions
    if spec.cursor is None or (spec.watermark is None and not spec.ranges):
        return ex.AlwaysTrue()
    c, kind = spec.cursor.lake, _range_kind(spec)
    parts = []
    if spec.watermark is not None and spec.cursor_kind is not None:
        parts.append(ex.LessThanOrEqual(c, kind.iceberg_literal(spec.watermark)))
    if spec.ranges:
        parts.append(_any([_iceberg_range(c, kind, r) for r in spec.ranges]))
    f = parts[0] if len(parts) == 1 else ex.And(*parts)
    if spec.include_null_cursor:
        f = ex.Or(f, ex.IsNull(c))
    return f


class LakeReader:
    """The lake side's reads (an ``hd.BatchSource``): pyiceberg plans, snowberg streams file by file.

    pyiceberg's scan planning evaluates the row filter against the manifests'
    partition summaries and each data file's column statistics, so files
    outside the compared ranges are never opened. Its ``to_arrow_batch_reader``
    reads up to a thread pool's worth of files at once and materialises each
    file's batches (apache/iceberg-python#3036), so memory would follow the
    table; here ``ArrowScan`` reads one planned file at a time (with its
    delete files) and the peak is one file's compared columns.
    """

    def __init__(self, table: Table, columns: Sequence[str], spec: hd.Spec) -> None:
        self.table = table
        self.columns = tuple(dict.fromkeys(columns))
        self.spec = spec
        self.base = scope_filter(spec)
        self.files_read = 0
        self.rows_read = 0
        self.scans = 0

    def filter_for(self, days: Sequence[str] | None) -> Any:
        from pyiceberg import expressions

        ex: Any = expressions
        if days is None or self.spec.cursor is None:
            return self.base
        c, kind = self.spec.cursor.lake, _range_kind(self.spec)
        alts = []
        for d in days:
            r = hd.day_range(self.spec.cursor, d)
            if r is not None:
                alts.append(_iceberg_range(c, kind, r))
            elif d == hd.NULL_DAY and self.spec.cursor_kind is not None and kind.is_time:
                alts.append(ex.IsNull(c))
            else:
                return self.base  # NUMBER cursors have one day group: the whole scope
        return ex.And(self.base, _any(alts))

    def plan(self, days: Sequence[str] | None = None) -> tuple[Any, list[Any]]:
        scan = self.table.scan(row_filter=self.filter_for(days), selected_fields=self.columns)
        return scan, list(scan.plan_files())  # one entry per data file: metadata, not rows

    def read(self, scan: Any, tasks: Sequence[Any]) -> pa.RecordBatchReader:
        import pyarrow as pa
        from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow

        projection = scan.projection()
        target = schema_to_pyarrow(projection, include_field_ids=False)
        self.scans += 1

        def batches() -> Any:
            for task in tasks:
                self.files_read += 1
                reader = ArrowScan(scan.table_metadata, scan.io, projection, scan.row_filter, scan.case_sensitive)
                for b in reader.to_record_batches([task]):
                    self.rows_read += b.num_rows
                    yield b

        return pa.RecordBatchReader.from_batches(target, batches()).cast(target)

    def __call__(self, days: Sequence[str] | None) -> pa.RecordBatchReader:
        scan, tasks = self.plan(days)
        return self.read(scan, tasks)


def _contains(kind: CursorKind, r: hd.Range, v: Any) -> bool:
    if r.low is not None:
        lo = kind.parse_value(r.low)
        if v < lo or (v == lo and not r.low_inclusive):
            return False
    if r.high is not None:
        hi = kind.parse_value(r.high)
        if v > hi or (v == hi and not r.high_inclusive):
            return False
    return True


def _day_of(v: Any) -> str:
    if isinstance(v, datetime):
        return (v.astimezone(UTC) if v.tzinfo else v).date().isoformat()
    if isinstance(v, date):
        return v.isoformat()
    return hd.NULL_DAY  # NUMBER cursors: one group


def _metadata_count(task: Any, field_id: int | None, field_type: Any, spec: hd.Spec) -> tuple[str, int] | None:
    """(day, rows) of a data file from its manifest entry alone, or None when its rows must be read.

    Exact when no delete file applies, the file holds no NULL in the column,
    and its lower and upper bounds are in the same compared range (at or
    below the watermark) and on the same day.
    """
    f = task.file
    if task.delete_files:
        return None
    if field_id is None:
        return ALL_ROWS, int(f.record_count)
    nulls = (f.null_value_counts or {}).get(field_id)
    lo_raw, hi_raw = (f.lower_bounds or {}).get(field_id), (f.upper_bounds or {}).get(field_id)
    if nulls is None or nulls > 0 or lo_raw is None or hi_raw is None:
        return None
    lo, hi = vs.bound_value(field_type, lo_raw), vs.bound_value(field_type, hi_raw)
    assert spec.cursor is not None
    kind = _range_kind(spec)
    if spec.watermark is not None and spec.cursor_kind is not None and hi > kind.parse_value(spec.watermark):
        return None
    if spec.ranges and not any(_contains(kind, r, lo) and _contains(kind, r, hi) for r in spec.ranges):
        return None
    day = _day_of(lo)
    return (day, int(f.record_count)) if day == _day_of(hi) else None


def lake_day_counts(
    table: Table, spec: hd.Spec, reader: LakeReader, report: VolumeReport, memory_mb: int
) -> dict[str, int]:
    """Lake rows per day of the scope: from the manifests where exact, the other files read (one column)."""
    scan, tasks = reader.plan(None)
    fid = ftype = None
    if spec.cursor is not None:
        fobj = table.schema().find_field(spec.cursor.lake)
        fid, ftype = fobj.field_id, fobj.field_type
    counts: dict[str, int] = {}
    rest = []
    for t in tasks:
        got = _metadata_count(t, fid, ftype, spec)
        if got is None:
            rest.append(t)
        else:
            counts[got[0]] = counts.get(got[0], 0) + got[1]
            report.lake_files_counted_from_metadata += 1
    report.lake_counts_from_metadata = not rest
    if rest:
        side = hd.LakeSide(lambda days: reader.read(scan, rest), spec, memory_limit_mb=memory_mb)
        try:
            for d, n in side.day_counts().items():
                counts[d] = counts.get(d, 0) + n
        finally:
            side.close()
    return counts


# ---------------------------------------------------------------------------
# The comparison


def _describe(cur: Any, from_clause: str, cols: Sequence[str], params: dict[str, Any], what: str) -> list[Any]:
    from snowberg.core.identifiers import quote_identifier
    from snowberg.snowflake.source import result_columns

    sel = ", ".join(quote_identifier(c, "column") for c in cols) if cols else "1 AS one"
    try:
        cur.execute(f"SELECT {sel} FROM {from_clause} LIMIT 0", params or None)
    except Exception as exc:
        raise VolumeSourceError(f"cannot read the source {what}: {type(exc).__name__}: {exc}") from exc
    return result_columns(cur)


class _CountedCursor:
    """Counts the statements run on a cursor (the query budget and the benchmark figures)."""

    def __init__(self, cur: Any) -> None:
        self.cur = cur
        self.queries = 0

    def execute(self, sql: str, params: Any = None) -> Any:
        self.queries += 1
        return self.cur.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cur, name)


def _total_files(table: Table) -> int | None:
    snap = table.current_snapshot()
    props = snap.summary.additional_properties if snap is not None and snap.summary is not None else {}
    try:
        return int(props["total-data-files"])
    except (KeyError, ValueError):
        return None


def verify(
    cfg: TableConfig,
    table: Table,
    conn: Any,
    *,
    settings: VolumeSettings | None = None,
    dialect: hd.HashDialect = hd.HashDialect.SNOWFLAKE,
    scope: vs.VerificationScope | None = None,
) -> VolumeReport:
    """Compare source and lake (read-only on both sides) over ``scope`` (None: the whole table).

    Raises ``VolumeCheckSkipped`` when there is nothing to compare yet and
    ``VolumeSourceError`` when the source cannot be read.
    """
    t0 = time.monotonic()
    settings = settings or cfg.volume
    if cfg.stream is not None or cfg.cursor is None:
        report = _verify_counts_as_of(cfg, table, conn, settings, dialect)
    else:
        report = _verify_watermark(cfg, table, conn, settings, dialect, scope)
    report.seconds = time.monotonic() - t0
    return report


def _new_report(cfg: TableConfig, table: Table, *, watermark: str | None, count_only: bool) -> VolumeReport:
    snap = table.current_snapshot()
    return VolumeReport(
        table=cfg.name,
        lake_table=cfg.target,
        watermark=watermark,
        write_mode=cfg.effective_write_mode.value,
        count_only=count_only,
        snapshot_id=snap.snapshot_id if snap is not None else None,
        lake_files_total=_total_files(table),
    )


def _verify_watermark(
    cfg: TableConfig,
    table: Table,
    conn: Any,
    settings: VolumeSettings,
    dialect: hd.HashDialect,
    scope: vs.VerificationScope | None,
) -> VolumeReport:
    from snowberg.snowflake.source import SourceQuery

    assert cfg.cursor is not None
    st = state.read_state(table)
    if st is None:
        raise VolumeCheckSkipped(f"{cfg.name}: {cfg.target} has no snowberg commit yet: nothing to compare")
    scope = scope or vs.VerificationScope(kind=vs.ScopeKind.FULL, reason="the whole table")
    report = _new_report(cfg, table, watermark=st.watermark, count_only=settings.count_only or not cfg.primary_key)
    report.verification, report.scope_reason = scope.kind.value, scope.reason
    if not cfg.primary_key and not settings.count_only:
        report.add_note("no primary_key: counts per cursor day only (count-only mode)")
    sq = SourceQuery(cfg)
    cur = _CountedCursor(conn.cursor())
    try:
        key_names = list(cfg.primary_key) if not report.count_only else []
        cursor_name = cfg.cursor.column
        described = _describe(cur, sq.from_clause, [*key_names, cursor_name], {}, cfg.source.table or "query")
        keys = tuple(
            hd.Column(name=n, kind=hd.value_kind(c.type, c.scale, table=cfg.name, column=n))
            for n, c in zip(key_names, described, strict=False)
        )
        cdesc = described[-1]
        cursor_col = hd.Column(
            name=cursor_name, kind=hd.value_kind(cdesc.type, cdesc.scale, table=cfg.name, column=cursor_name)
        )
        ranges = scope.ranges
        append = cfg.effective_write_mode is WriteMode.APPEND
        if ranges and append and keys and st.cursor_kind:
            # An append table keeps every version of a key: its newest one in scope must be its newest overall
            # up to the watermark, so the ranges become one (no version may fall in a gap between them).
            ranges = vs.hull(CursorKind(st.cursor_kind), ranges)
        report.ranges = [r.describe() for r in ranges]
        report.key_columns = keys
        spec = hd.Spec(
            table=cfg.name,
            keys=keys,
            cursor=cursor_col,
            cursor_kind=st.cursor_kind,
            cursor_scale=cdesc.scale or 0,
            watermark=st.watermark,
            ranges=ranges,
            include_null_cursor=cfg.cursor.null_policy is NullCursorPolicy.INCLUDE,
            digits_per_level=settings.digits_per_level,
            leaf_rows=settings.leaf_rows,
            max_queries=settings.max_queries,
            max_keys=settings.max_reported_keys,
            strict=settings.strict_checksums,
        )
        if report.count_only:
            _count_only(cfg, table, cur, sq.from_clause, {}, spec, dialect, settings, report)
        else:
            _keyed(cfg, table, cur, sq, spec, settings, dialect, report)
        report.open_ranges = _open_ranges(spec, report)
    finally:
        report.snowflake_queries = cur.queries
        cur.cur.close()
    return report


def _open_ranges(spec: hd.Spec, report: VolumeReport) -> list[hd.Range]:
    """The cursor ranges of the days that differed: the next incremental check verifies them again."""
    if spec.cursor is None:
        return []
    out: list[hd.Range] = []
    for day in report.differing_days:
        r = hd.day_range(spec.cursor, day)
        if r is not None:
            out.append(r)
        elif day != hd.NULL_DAY or hd.kind_of(spec.cursor) is CursorKind.NUMBER:
            # NUMBER cursors have one group: the whole compared scope differed
            return list(spec.ranges) or [hd.Range()]
    return out


def _lake_columns(spec: hd.Spec, *, with_keys: bool) -> list[str]:
    return ([k.lake for k in spec.keys] if with_keys else []) + ([spec.cursor.lake] if spec.cursor else [])


def _check_lake_types(cfg: TableConfig, table: Table, cols: Sequence[hd.Column]) -> None:
    arrow = table.schema().as_arrow()
    for col in cols:
        try:
            t = arrow.field(col.lake).type
        except KeyError:
            raise hd.VolumeInputError(f"table {cfg.name!r}: column {col.name!r} is not in {cfg.target}") from None
        hd.check_lake_type(col.kind, t, table=cfg.name, column=col.name)


class _Prefetched:
    """A side whose level-0 sums were computed ahead (concurrently with the other side's)."""

    def __init__(self, side: Any, level0: dict[tuple[str, str], hd.Sums]) -> None:
        self.side = side
        self.name = side.name
        self.level0: dict[tuple[str, str], hd.Sums] | None = level0

    def sums(self, level: int, days: Any, prefixes: Any) -> dict[tuple[str, str], hd.Sums]:
        if level == 0 and days is None and self.level0 is not None:
            out, self.level0 = self.level0, None
            return out
        return dict(self.side.sums(level, days, prefixes))

    def rows(self, days: Any, level: int, prefixes: Any) -> list[hd.Row]:
        return list(self.side.rows(days, level, prefixes))


def _above(canon: str | None, watermark_canon: str) -> bool:
    """Is a canonical cursor text (integers since the epoch, or a number) above the watermark's?"""
    if canon is None:
        return False
    try:
        return Decimal(canon) > Decimal(watermark_canon)
    except InvalidOperation:
        return False


def _keyed(
    cfg: TableConfig,
    table: Table,
    cur: Any,
    sq: Any,
    spec: hd.Spec,
    settings: VolumeSettings,
    dialect: hd.HashDialect,
    report: VolumeReport,
) -> None:
    assert spec.cursor is not None
    _check_lake_types(cfg, table, [*spec.keys, spec.cursor])
    source = hd.SnowflakeSide(cur, hd.SnowflakeSql(spec, sq.from_clause, dialect))
    reader = LakeReader(table, _lake_columns(spec, with_keys=True), spec)
    append = cfg.effective_write_mode is WriteMode.APPEND
    lake_side = hd.LakeSide(reader, spec, latest_version_only=append, memory_limit_mb=settings.lake_memory_mb)
    try:
        # Snowflake aggregates while the lake is read: the wall time is the slower of the two, not their sum.
        with ThreadPoolExecutor(max_workers=1) as pool:
            s0 = pool.submit(source.sums, 0, None, None)
            lake = _Prefetched(lake_side, lake_side.sums(0, None, None))
            src = _Prefetched(source, s0.result())
        if append:
            report.lake_versions = reader.rows_read
        res = hd.hashdiff(src, lake, spec, source_queries=lambda: cur.queries)
    finally:
        lake_side.close()
    report.source_rows, report.lake_rows = res.source_rows, res.lake_rows
    report.differing_days = res.days
    report.truncated, report.truncated_by = res.truncated, res.truncated_by
    lake_only = [d for d in res.diffs if d.kind is hd.DiffKind.LAKE_ONLY]
    others = [d for d in res.diffs if d.kind is not hd.DiffKind.LAKE_ONLY]
    found: dict[tuple[str, ...], str | None] = {}
    looked_up: set[tuple[str, ...]] = set()
    for chunk in hd.lookup_chunks([d.canonical for d in lake_only]):
        if cur.queries >= spec.max_queries:
            break
        for r in source.lookup(chunk):
            found[r.key] = r.cursor
        looked_up.update(chunk)
    if len(looked_up) < len(lake_only):
        # Keys not looked up are neither differences nor deletes yet: the report is incomplete, and the next
        # check (or a larger volume.max_queries) looks them up.
        report.truncated = True
        report.truncated_by = report.truncated_by or hd.Truncation.QUERIES
        left = len(lake_only) - len(looked_up)
        report.add_note(f"{left} lake-only key(s) not looked up in the source (query budget)")
    wm_canon = hd.canonical(spec.cursor.kind, spec.watermark) if spec.watermark else None
    for d in lake_only:
        if d.canonical not in looked_up:
            continue
        if d.canonical in found:
            src_cursor = found[d.canonical]
            if wm_canon is not None and _above(src_cursor, wm_canon):
                report.pending += 1  # the source row moved above the watermark: the next load brings it
            else:
                # In the source with a cursor outside the compared ranges: the lake holds a version the source
                # does not (an incremental check sees only its ranges; a full one would pair the two rows).
                shown = hd.display(spec.cursor.kind, src_cursor)
                others.append(
                    replace(
                        d,
                        kind=hd.DiffKind.CURSOR_DIFFERS,
                        source_cursor=shown,
                        note="the source row has another cursor value, outside the compared ranges",
                    )
                )
        else:
            gone = replace(d, note="deleted in source")
            report.deleted_in_source.append(gone)
            if settings.deletes is DeletePolicy.DETECT:
                others.append(gone)
    others = [
        replace(d, note="missing from the lake (lost, or backdated below the watermark)")
        if d.kind is hd.DiffKind.SOURCE_ONLY and not d.note
        else d
        for d in others
    ]
    report.differences = others
    propagating = settings.deletes is DeletePolicy.PROPAGATE and bool(report.deleted_in_source)
    if report.truncated and report.pending and not others and not propagating:
        # (hard deletes among the examined differences make the report conclusive: propagate removes them)
        report.inconclusive = True
        report.add_note(
            "inconclusive: more buckets differ than were examined, and every examined difference is a row updated "
            "in the source after the watermark (pending the next load); run the check closer to a load"
        )
    report.source_rows_scanned = source.rows_scanned
    report.source_key_lookups = source.lookups
    report.source_rows_fetched = source.rows_fetched
    report.source_seconds, report.lake_seconds = source.seconds, lake_side.seconds
    report.lake_files_read, report.lake_rows_read = reader.files_read, reader.rows_read


def _source_day_counts(
    cur: Any, from_clause: str, from_params: dict[str, Any], spec: hd.Spec, dialect: hd.HashDialect
) -> dict[str, int]:
    sql = hd.SnowflakeSql(spec, from_clause, dialect, from_params)
    where, params = sql.scope()
    day = hd.sf_day(spec.cursor) if spec.cursor else "CAST(NULL AS DATE)"
    try:
        cur.execute(f"SELECT {day} AS d, COUNT(*) FROM {from_clause} WHERE {where} GROUP BY d", params or None)
        return {hd.day_text(d): int(n) for d, n in cur.fetchall()}
    except Exception as exc:
        raise VolumeSourceError(f"cannot count the source rows: {type(exc).__name__}: {exc}") from exc


def _count_only(
    cfg: TableConfig,
    table: Table,
    cur: Any,
    from_clause: str,
    from_params: dict[str, Any],
    spec: hd.Spec,
    dialect: hd.HashDialect,
    settings: VolumeSettings,
    report: VolumeReport,
) -> None:
    """Counts per day: equal for merge tables; the lake at least the source for append tables."""
    if spec.cursor is not None:
        _check_lake_types(cfg, table, [spec.cursor])
    t0 = time.monotonic()
    src = _source_day_counts(cur, from_clause, from_params, spec, dialect)
    t1 = time.monotonic()
    columns = _lake_columns(spec, with_keys=False) or [table.schema().fields[0].name]
    reader = LakeReader(table, columns, spec)
    lake = lake_day_counts(table, spec, reader, report, settings.lake_memory_mb)
    report.source_seconds, report.lake_seconds = t1 - t0, time.monotonic() - t1
    report.source_rows, report.lake_rows = sum(src.values()), sum(lake.values())
    report.source_rows_scanned = report.source_rows
    report.lake_files_read, report.lake_rows_read = reader.files_read, reader.rows_read
    append = cfg.effective_write_mode is WriteMode.APPEND
    if append:
        report.lake_versions = report.lake_rows
    for d in sorted(set(src) | set(lake)):
        s, lk = src.get(d, 0), lake.get(d, 0)
        if (lk < s) if append else (lk != s):
            report.differing_days[d] = (s, lk)


# ---------------------------------------------------------------------------
# Stream and cursor-less tables: counts against the source as of what the lake holds


def _as_of(cfg: TableConfig, table: Table) -> tuple[str, int | None, str]:
    """(instant the lake holds the source as of, rows the last refresh committed or None, what it is)."""
    if cfg.stream is not None:
        from snowberg.streams.checkpoint import read_stream_state

        sst = read_stream_state(table)
        if sst is None:
            raise VolumeCheckSkipped(f"{cfg.name}: {cfg.target} has no stream batch applied yet: nothing to compare")
        if not sst.consumed_at:
            raise VolumeCheckSkipped(
                f"{cfg.name}: the stream commit (snapshot {sst.snapshot_id}) records no consumed offset, so the "
                "source cannot be read as of what the lake holds"
            )
        instant = datetime.fromisoformat(sst.consumed_at.replace("Z", "+00:00"))
        return _utc_text(instant), None, f"stream batch {sst.batch_id} consumed at"
    st = state.read_state(table)
    if st is None:
        raise VolumeCheckSkipped(f"{cfg.name}: {cfg.target} has no snowberg commit yet: nothing to compare")
    snap = table.snapshot_by_id(st.snapshot_id)
    props = snap.summary.additional_properties if snap is not None and snap.summary is not None else {}
    committed = int(props[state.ROWS]) if props.get(state.ROWS, "").isdigit() else None
    instant = datetime.fromtimestamp(st.timestamp_ms / 1000, tz=UTC)
    return _utc_text(instant), committed, f"the full refresh (run {st.run_id}) committed at"


def _utc_text(instant: datetime) -> str:
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)
    return instant.astimezone(UTC).isoformat(sep=" ", timespec="microseconds")


AS_OF = "AT(TIMESTAMP => TO_TIMESTAMP_LTZ(%(as_of)s))"


def as_of_clause(from_clause: str) -> str:
    """Snowflake time travel: the source table as of an instant (bound as ``as_of``)."""
    return f"{from_clause} {AS_OF}"


def _verify_counts_as_of(
    cfg: TableConfig, table: Table, conn: Any, settings: VolumeSettings, dialect: hd.HashDialect
) -> VolumeReport:
    """Counts per ``day_column`` day (or of the whole table) against the source as of what the lake holds."""
    from snowberg.snowflake.source import SourceQuery

    as_of, committed, what = _as_of(cfg, table)
    report = _new_report(cfg, table, watermark=None, count_only=True)
    report.verification = "count"
    sq = SourceQuery(cfg)
    from_clause, from_params = sq.from_clause, {}
    if cfg.source.table is None:
        report.add_note(f"a query source has no time travel: compared with the source now, not as of {what} {as_of}")
    elif dialect is hd.HashDialect.EMULATOR:
        report.add_note(f"the local emulator has no time travel: compared with the source now, not as of {as_of}")
    else:
        # On the table, under the projection of columns.exclude/hash.
        from_clause, from_params = sq.from_clause_at(AS_OF), {"as_of": as_of}
        report.as_of = as_of
    report.scope_reason = (
        f"counts {'per day of ' + settings.day_column if settings.day_column else 'of the whole table'}, "
        f"source as of {what} {as_of}"
    )
    cur = _CountedCursor(conn.cursor())
    try:
        cols = [settings.day_column] if settings.day_column else []
        described = _describe(cur, from_clause, cols, from_params, f"{cfg.source.table or 'query'} as of {as_of}")
        day_col = None
        if settings.day_column:
            d = described[0]
            kind = hd.value_kind(d.type, d.scale, table=cfg.name, column=settings.day_column)
            if kind not in (hd.ValueKind.DATE, hd.ValueKind.TIMESTAMP_NTZ, hd.ValueKind.TIMESTAMP_TZ):
                raise hd.VolumeInputError(
                    f"table {cfg.name!r}: volume.day_column {settings.day_column!r} is {d.type}: use a DATE or "
                    "TIMESTAMP column"
                )
            day_col = hd.Column(name=settings.day_column, kind=kind)
        spec = hd.Spec(table=cfg.name, keys=(), cursor=day_col, cursor_kind=None)
        _count_only(cfg, table, cur, from_clause, from_params, spec, dialect, settings, report)
    finally:
        report.snowflake_queries = cur.queries
        cur.cur.close()
    if report.differing_days and committed is not None and report.lake_rows == committed:
        # The lake holds exactly what the refresh committed: the source changed between the refresh's read and
        # its commit (time travel can only aim at the commit), so this result neither passes nor fails.
        report.inconclusive = True
        report.add_note(
            f"inconclusive: the lake holds the {committed:,} rows the last full refresh committed, and the source "
            f"as of that commit differs: it changed while the refresh ran; the next refresh's check decides"
        )
    return report


# ---------------------------------------------------------------------------
# deletes: propagate — the one commit this module makes


def refusal(report: VolumeReport) -> tuple[Refusal, str] | None:
    """Why the report's hard deletes must not be propagated, and how to say it (None: they may be).

    Only a consistent report propagates: every other compared row agrees (no
    other difference, not inconclusive). A report with other differences may
    be looking at the wrong rows (a changed key rendering, a shifted source)
    and removing rows on its word could lose data. An incomplete report (more
    differing buckets than one check narrows down) propagates the keys it
    narrowed down when nothing else differs in the buckets it examined and
    its counts account for them (the lake holds at least that many rows more
    than the source): each such key was looked up in the source by key and is
    gone, and every check makes progress, so deletes of any size end up
    propagated (a key rendering that changed would show source-only rows in
    the same buckets, and no surplus of lake rows).
    """
    if report.differences:
        return Refusal.OTHER_DIFFERENCES, f"the report has {len(report.differences)} other difference(s)"
    if report.inconclusive:
        return Refusal.INCONCLUSIVE, "the report is inconclusive"
    surplus = report.lake_rows - report.source_rows
    if report.truncated and surplus < len(report.deleted_in_source):
        return Refusal.UNACCOUNTED, (
            f"the report is incomplete (more differences than were narrowed down) and its counts do not account "
            f"for the {len(report.deleted_in_source)} key(s) found deleted (the lake holds {surplus:,} row(s) more "
            "than the source)"
        )
    return None


def propagation_refusal(report: VolumeReport) -> str:
    """``refusal``'s text (empty: the hard deletes may be propagated)."""
    r = refusal(report)
    return r[1] if r else ""


def advice(report: VolumeReport, settings: VolumeSettings) -> str:
    """What the user can do about a report that does not pass (empty when there is nothing to add)."""
    refused = report.propagation.refused if report.propagation is not None else None
    if refused is Refusal.OTHER_DIFFERENCES:
        return (
            "repair the other differences first (a backfill of their days, or a full_refresh run): the next check "
            "then propagates the hard deletes; or set volume.deletes: detect to stop propagating"
        )
    if refused is Refusal.UNACCOUNTED:
        return (
            "rows are missing from the lake besides the hard deletes: run a full verification with a larger budget "
            "(volume.max_reported_keys, volume.max_queries) to name them, and repair them (backfill or full_refresh)"
        )
    if not report.truncated:
        return ""
    budget = {
        hd.Truncation.QUERIES: f"raise volume.max_queries (this check spent {report.snowflake_queries})",
        hd.Truncation.ROWS: (
            "raise volume.max_reported_keys or volume.leaf_rows (one check fetches at most max_reported_keys × "
            f"leaf_rows = {settings.max_reported_keys * settings.leaf_rows:,} rows per side)"
        ),
        hd.Truncation.BUCKETS: f"more than {hd.MAX_BUCKETS:,} buckets differ in one level",
    }.get(report.truncated_by or hd.Truncation.QUERIES, "")
    if report.propagated:
        return (
            f"{report.propagated:,} hard-deleted row(s) removed by this check; more differ than one check narrows "
            f"down: the next check removes more (trigger the checks DAG to go on now); to need fewer checks, {budget}"
        )
    return f"more differences than one check narrows down: {budget}, or trigger the checks DAG again"


def _typed(field_type: Any, text: str) -> Any:
    t = str(field_type)
    if t in ("int", "long"):
        return int(text)
    if t.startswith("timestamp"):
        return text.replace(" ", "T")
    return text  # strings, decimals and dates bind from their canonical text


def commit_hard_deletes(
    table: Table,
    cfg: TableConfig,
    keys: Sequence[hd.KeyDiff],
    *,
    columns: Sequence[hd.Column],
    run_id: str,
    expected_snapshot_id: int,
    dag_id: str | None = None,
) -> Propagation:
    """Remove rows whose key is gone from the source, in the compared scope, in one commit.

    The scope is the check's: cursor at or below the watermark, and NULL
    cursors when ``cursor.null_policy`` is ``include`` (they were compared, so
    they are removed too). The commit goes through the gate: it carries the
    table's current snowberg state (the watermark is unchanged), no rebase on
    conflict, and the base snapshot asserted — the one the check compared.
    Rows above the watermark are never touched. Keys that matched no row in
    scope are returned as not removed, with the reason.

    ``dag_id`` names the DAG that propagated (the checks DAG): the gate records
    it with the run id, so ``rollback --before-run`` never mistakes this commit
    for the load DAG's run of the same id.
    """
    from pyiceberg import expressions

    ex: Any = expressions
    result = Propagation(requested=len(keys))
    if not keys:
        return result
    snap = table.current_snapshot()
    if snap is None or snap.snapshot_id != expected_snapshot_id:
        raise state.ConcurrentCommitError(
            f"{cfg.name}: the table moved from snapshot {expected_snapshot_id} to "
            f"{snap.snapshot_id if snap else None} since the volume check read it; deletes not propagated"
        )
    st = state.read_state(table)
    if st is None or st.watermark is None or cfg.cursor is None or not st.cursor_kind:
        raise ValueError(f"{cfg.name}: deletes: propagate needs a committed watermark and a cursor")
    key_cols = [c.lower() for c in cfg.primary_key]
    field_types = {f.name: f.field_type for f in table.schema().fields}
    shown = [d.key for d in keys]
    if len(key_cols) == 1:
        kexpr: Any = ex.In(key_cols[0], {_typed(field_types[key_cols[0]], k[cfg.primary_key[0]]) for k in shown})
    else:
        conj = [
            ex.And(
                *[ex.EqualTo(c, _typed(field_types[c], k[n])) for c, n in zip(key_cols, cfg.primary_key, strict=True)]
            )
            for k in shown
        ]
        kexpr = conj[0] if len(conj) == 1 else ex.Or(*conj)
    cursor = cfg.cursor.column.lower()
    in_scope: Any = ex.LessThanOrEqual(cursor, CursorKind(st.cursor_kind).iceberg_literal(st.watermark))
    if cfg.cursor.null_policy is NullCursorPolicy.INCLUDE:
        in_scope = ex.Or(in_scope, ex.IsNull(cursor))
    expr = ex.And(kexpr, in_scope)
    matched = table.scan(row_filter=expr, selected_fields=tuple(key_cols)).to_arrow()  # the deleted keys' rows
    present = hd.canonical_keys(matched, columns)
    result.not_removed = [d.key for d in keys if d.canonical not in present]
    if result.not_removed:
        result.reason = "no row of these keys in the compared scope (at or below the watermark) any more"
    if matched.num_rows == 0:
        return result
    # Through the one commit gate: the state (watermark unchanged) in the summary and
    # the table properties, no rebase on conflict, the base snapshot asserted.
    gate.commit(
        table,
        table.transaction(),
        state_props=state.current_state_props(table),
        summary={
            state.RUN_ID: run_id,
            state.MODE: PROPAGATE_MODE,
            state.ROWS: "0",
            ROWS_DELETED: str(matched.num_rows),
        },
        replaced=gate.Replacement(rows=expr),
        crash_points=None,
        dag_id=dag_id or "",
    )
    result.removed = matched.num_rows
    log.info("%s: removed %d row(s) deleted in the source (watermark %s kept)", cfg.name, result.removed, st.watermark)
    return result


# ---------------------------------------------------------------------------
# One check: plan the scope, compare, propagate, record


@dataclass(kw_only=True)
class CheckOutcome:
    report: VolumeReport
    scope: vs.VerificationScope
    record_written: bool = False


def run_check(
    cfg: TableConfig,
    table: Table,
    conn: Any,
    *,
    settings: VolumeSettings | None = None,
    dialect: hd.HashDialect = hd.HashDialect.SNOWFLAKE,
    records: state.VariableStore | None = None,
    force_full: bool = False,
    now: datetime | None = None,
    run_id: str = "volume-check",
    dag_id: str | None = None,
) -> CheckOutcome:
    """Plan the scope from the verified record, compare, propagate hard deletes if asked, write the record.

    ``records``: where the verified record lives (the operator passes Airflow
    Variables); None makes every check a full one.
    """
    settings = settings or cfg.volume
    now = now or datetime.now(UTC)
    if cfg.stream is not None or cfg.cursor is None:
        report = verify(cfg, table, conn, settings=settings, dialect=dialect)
        return CheckOutcome(report=report, scope=vs.VerificationScope(kind=vs.ScopeKind.FULL, reason="counts"))
    st = state.read_state(table)
    key = vs.record_key(cfg)
    record, problem = vs.read_record(records, key)
    scope = vs.plan_scope(
        table,
        cfg,
        settings,
        record,
        record_problem=problem,
        watermark=st.watermark if st else None,
        cursor_kind=st.cursor_kind if st else None,
        now=now,
        force_full=force_full,
    )
    log.info("%s: volume check scope: %s", cfg.name, scope.describe())
    report = verify(cfg, table, conn, settings=settings, dialect=dialect, scope=scope)
    if settings.deletes is DeletePolicy.PROPAGATE and report.deleted_in_source:
        _propagate(cfg, table, report, run_id=run_id, dag_id=dag_id, variables=records)
    report.advice = advice(report, settings)
    if report.advice and report.propagated and report.truncated:
        report.add_note(report.advice)
    written = False
    if records is not None and report.snapshot_id is not None:
        rec = vs.next_record(
            record,
            scope,
            snapshot_id=report.snapshot_id,
            watermark=report.watermark,
            cursor_kind=st.cursor_kind if st else None,
            open_ranges=report.open_ranges,
            now=now,
        )
        records.set(key, rec.to_json())
        written = True
    return CheckOutcome(report=report, scope=scope, record_written=written)


def _propagate(
    cfg: TableConfig,
    table: Table,
    report: VolumeReport,
    *,
    run_id: str,
    dag_id: str | None,
    variables: state.VariableStore | None,
) -> None:
    keys = report.deleted_in_source
    refused = refusal(report)
    if refused is not None:
        kind, why = refused
        report.propagation = Propagation(
            requested=len(keys), not_removed=[d.key for d in keys], reason=f"not propagated: {why}", refused=kind
        )
        log.warning("%s: %d hard delete(s) not propagated: %s", cfg.name, len(keys), why)
        report.add_note(f"{len(keys)} hard delete(s) not propagated: {why}")
        return
    assert report.snapshot_id is not None
    try:
        p = commit_hard_deletes(
            table,
            cfg,
            keys,
            columns=report.key_columns,
            run_id=run_id,
            dag_id=dag_id,
            expected_snapshot_id=report.snapshot_id,
        )
    except state.ConcurrentCommitError as exc:
        p = Propagation(requested=len(keys), not_removed=[d.key for d in keys], reason=str(exc))
    report.propagation = p
    report.propagated = p.removed
    if p.removed and variables is not None:
        # The commit carries the state forward on a new snapshot: the watermark mirror follows it now, as after
        # every other commit (an expiry must not find the Variable naming the snapshot before it).
        action = state.follow_variable(table, cfg.variable_key, variables)  # the commit updated ``table``
        log.info("%s: Variable %s: %s", cfg.name, cfg.variable_key, action)
    if p.not_removed:
        # Still in the lake, gone from the source: a difference the check must not pass over.
        left = {tuple(sorted(k.items())) for k in p.not_removed}
        report.differences += [
            replace(d, note=f"deleted in source, not removed: {p.reason}")
            for d in keys
            if tuple(sorted(d.key.items())) in left
        ]
        log.warning("%s: %d hard delete(s) not removed: %s", cfg.name, len(p.not_removed), p.reason)


__all__ = [
    "ALL_ROWS",
    "PROPAGATE_MODE",
    "ROWS_DELETED",
    "CheckOutcome",
    "LakeReader",
    "Propagation",
    "Refusal",
    "VolumeCheckSkipped",
    "VolumeReport",
    "VolumeSourceError",
    "advice",
    "as_of_clause",
    "commit_hard_deletes",
    "lake_day_counts",
    "propagation_refusal",
    "refusal",
    "render",
    "run_check",
    "scope_filter",
    "verify",
]
