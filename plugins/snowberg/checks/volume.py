"""Volume verification: does the lake hold what Snowflake holds, up to the committed watermark?

``verify`` compares one table's source and lake rows whose cursor is at or
below the watermark of the table's last snowberg commit:

1. per cursor day, the row count and a checksum of (key, cursor) on both sides
   (one Snowflake query, aggregation pushed down; one scan of the lake's key
   and cursor columns);
2. where a day differs, key-hash buckets are checksummed and bisected
   (``snowberg.checks.hashdiff``) until the differing rows are few enough to
   compare one by one;
3. keys only in the lake are looked up in the source (one query): a key whose
   source row moved above the watermark is a pending update (the next load
   brings it), a key gone from the source is a hard delete (``deletes:``).

Merge tables hold one row per key; append tables hold every version, so the
lake side keeps each key's newest version. Tables without a key (or with
``volume.count_only``) compare counts per day only: equal for merge tables,
the lake at least the source for append tables (older versions stay).

Nothing here writes, except ``commit_hard_deletes`` (``deletes: propagate``).
"""

# SQL here is built from validated, quoted identifiers and fixed fragments; every value is bound.
# ruff: noqa: S608

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from snowberg.checks import hashdiff as hd
from snowberg.config.table_config import NullCursorPolicy, TableConfig, WriteMode
from snowberg.config.volume_settings import DeletePolicy, VolumeSettings
from snowberg.core.cursor import parse_cursor_value
from snowberg.iceberg import gate, state

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

ROWS_DELETED = state.PREFIX + "rows-deleted"
PROPAGATE_MODE = "propagate-deletes"


@dataclass(kw_only=True)
class VolumeReport:
    """What the check found; ``ok`` is False when the sides differ in a way that is not pending."""

    table: str
    lake_table: str
    watermark: str | None
    write_mode: str
    count_only: bool
    source_rows: int = 0
    lake_rows: int = 0
    lake_versions: int | None = None  # append tables: every version in the lake
    differing_days: dict[str, tuple[int, int]] = field(default_factory=dict)
    differences: list[hd.KeyDiff] = field(default_factory=list)  # real mismatches (reported)
    deleted_in_source: list[hd.KeyDiff] = field(default_factory=list)
    pending: int = 0  # lake rows whose source row moved above the watermark
    truncated: bool = False
    snowflake_queries: int = 0
    source_rows_fetched: int = 0  # rows downloaded from Snowflake for the row-level comparison
    lake_counts_from_metadata: bool = False  # count-only: lake counts read from manifests, no data file opened
    seconds: float = 0.0
    propagated: int = 0  # rows removed by deletes: propagate
    note: str = ""

    @property
    def ok(self) -> bool:
        if self.count_only:
            return not self.differing_days
        # Truncated with every examined difference a pending update (a busy table checked long after its
        # load) is inconclusive, not a mismatch: it is logged and noted, the task passes.
        return not self.differences and not (self.truncated and not self.pending)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "lake_table": self.lake_table,
            "watermark": self.watermark,
            "write_mode": self.write_mode,
            "count_only": self.count_only,
            "ok": self.ok,
            "source_rows": self.source_rows,
            "lake_rows": self.lake_rows,
            "lake_versions": self.lake_versions,
            "differing_days": {d: {"source": s, "lake": lk} for d, (s, lk) in self.differing_days.items()},
            "differences": [d.to_dict() for d in self.differences],
            "deleted_in_source": [d.to_dict() for d in self.deleted_in_source],
            "pending": self.pending,
            "truncated": self.truncated,
            "snowflake_queries": self.snowflake_queries,
            "source_rows_fetched": self.source_rows_fetched,
            "lake_counts_from_metadata": self.lake_counts_from_metadata,
            "seconds": round(self.seconds, 3),
            "propagated": self.propagated,
            "note": self.note,
        }

    def summary_line(self) -> str:
        return f"source {self.source_rows:,} rows, lake {self.lake_rows:,} rows up to watermark {self.watermark}"


def render(report: VolumeReport, max_keys: int = 20) -> str:
    lines = [f"volume check of {report.table} ({report.lake_table}): {'OK' if report.ok else 'MISMATCH'}"]
    lines.append(f"  {report.summary_line()}")
    if report.lake_versions is not None:
        lines.append(f"  lake versions (append table): {report.lake_versions:,}")
    for d, (s, lk) in list(report.differing_days.items())[:20]:
        lines.append(f"  day {d or '(all)'}: source {s:,}, lake {lk:,}")
    for kd in report.differences[:max_keys]:
        lines.append(
            f"  {kd.kind.value}: key {kd.key} source cursor {kd.source_cursor} lake cursor {kd.lake_cursor}"
            + (f" ({kd.note})" if kd.note else "")
        )
    if report.deleted_in_source:
        lines.append(f"  deleted in source: {len(report.deleted_in_source)} key(s)")
    if report.pending:
        lines.append(f"  pending (updated in the source after the watermark): {report.pending}")
    if report.truncated:
        lines.append("  more differences than were narrowed down: the list is incomplete")
    if report.note:
        lines.append(f"  note: {report.note}")
    lines.append(f"  {report.snowflake_queries} Snowflake queries, {report.seconds:.2f}s")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Reading the lake


def _lake_literal(kind: str, text: str) -> Any:
    v = parse_cursor_value(kind, text)
    return v.isoformat() if hasattr(v, "isoformat") else v


def read_lake_columns(
    table: Table, columns: Sequence[str], cursor: str | None, kind: str | None, watermark: str | None, nulls: bool
) -> pa.Table:
    """The key and cursor columns of the rows at or below the watermark (one scan, pruned by file stats)."""
    from pyiceberg import expressions

    ex: Any = expressions  # positional constructors are pyiceberg's documented API
    row_filter: Any = ex.AlwaysTrue()
    if cursor is not None and watermark is not None and kind is not None:
        row_filter = ex.LessThanOrEqual(cursor, _lake_literal(kind, watermark))
        if nulls:
            row_filter = ex.Or(row_filter, ex.IsNull(cursor))
    return table.scan(row_filter=row_filter, selected_fields=tuple(columns)).to_arrow()


def metadata_day_counts(
    table: Table, cursor: str, kind: str | None, watermark: str | None, include_nulls: bool
) -> dict[str, int] | None:
    """Rows per cursor day from the manifests alone, or None where that would not be exact.

    Exact when the table is partitioned by ``day(cursor)``, the current
    snapshot has no delete files, every data file carries that partition, and
    every file's cursor upper bound is at or below the watermark (so no file
    holds rows outside the compared scope).
    """
    from pyiceberg.transforms import DayTransform

    if table.current_snapshot() is None:
        return {}
    field = table.schema().find_field(cursor)
    day_fields = [
        f for f in table.spec().fields if f.source_id == field.field_id and isinstance(f.transform, DayTransform)
    ]
    if not day_fields:
        return None
    part = day_fields[0].name
    wm = parse_cursor_value(kind, watermark) if (kind and watermark) else None
    files = table.inspect.files().select(["content", "partition", "record_count", "readable_metrics"]).to_pylist()
    out: dict[str, int] = {}
    for f in files:
        if f["content"] != 0 or part not in (f["partition"] or {}):
            return None
        upper = ((f["readable_metrics"] or {}).get(cursor) or {}).get("upper_bound")
        if wm is not None and (upper is None or upper > wm):
            return None
        day = f["partition"][part]
        if day is None and not include_nulls:
            continue
        key = hd.day_text(day)
        out[key] = out.get(key, 0) + int(f["record_count"])
    return out


# ---------------------------------------------------------------------------
# The comparison


def _describe(cur: Any, from_clause: str, cols: Sequence[str]) -> list[Any]:
    from snowberg.core.identifiers import quote_identifier
    from snowberg.snowflake.source import result_columns

    cur.execute(f"SELECT {', '.join(quote_identifier(c, 'column') for c in cols)} FROM {from_clause} LIMIT 0")
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


def verify(
    cfg: TableConfig,
    table: Table,
    conn: Any,
    *,
    settings: VolumeSettings | None = None,
    dialect: hd.HashDialect = hd.HashDialect.SNOWFLAKE,
) -> VolumeReport:
    """Compare source and lake up to the committed watermark (read-only on both sides)."""
    from snowberg.snowflake.source import SourceQuery

    t0 = time.monotonic()
    settings = settings or cfg.volume
    st = state.read_state(table)
    report = VolumeReport(
        table=cfg.name,
        lake_table=cfg.target,
        watermark=st.watermark if st else None,
        write_mode=cfg.effective_write_mode.value,
        count_only=settings.count_only or not cfg.primary_key,
    )
    if st is None:
        report.note = "no snowberg commit yet: nothing to compare"
        return report
    if not cfg.primary_key and not settings.count_only:
        report.note = "no primary_key: counts per cursor day only (count-only mode)"
    sq = SourceQuery(cfg)
    cur = _CountedCursor(conn.cursor())
    try:
        key_names = list(cfg.primary_key) if not report.count_only else []
        cursor_name = cfg.cursor.column if cfg.cursor else None
        described = _describe(cur, sq.from_clause, key_names + ([cursor_name] if cursor_name else []))
        keys = tuple(
            hd.Column(name=n, kind=hd.value_kind(c.type, c.scale, table=cfg.name, column=n))
            for n, c in zip(key_names, described, strict=False)
        )
        cursor_col = None
        scale = 0
        if cursor_name:
            cdesc = described[-1]
            cursor_col = hd.Column(
                name=cursor_name, kind=hd.value_kind(cdesc.type, cdesc.scale, table=cfg.name, column=cursor_name)
            )
            scale = cdesc.scale or 0
        spec = hd.Spec(
            table=cfg.name,
            keys=keys,
            cursor=cursor_col,
            cursor_kind=st.cursor_kind,
            cursor_scale=scale,
            watermark=st.watermark if cursor_col else None,
            include_null_cursor=cfg.cursor is not None and cfg.cursor.null_policy is NullCursorPolicy.INCLUDE,
            digits_per_level=settings.digits_per_level,
            leaf_rows=settings.leaf_rows,
            max_queries=settings.max_queries,
            max_keys=settings.max_reported_keys,
            strict=settings.strict_checksums,
        )
        if report.count_only:
            _count_only(cfg, table, cur, sq, spec, dialect, report)
        else:
            _keyed(cfg, table, cur, sq, spec, settings, dialect, report)
    finally:
        report.snowflake_queries = cur.queries
        cur.cur.close()
    report.seconds = time.monotonic() - t0
    return report


def _lake_side(cfg: TableConfig, table: Table, spec: hd.Spec, report: VolumeReport, *, with_keys: bool) -> hd.LakeSide:
    names = ([k.lake for k in spec.keys] if with_keys else []) + ([spec.cursor.lake] if spec.cursor else [])
    data = read_lake_columns(
        table,
        names,
        spec.cursor.lake if spec.cursor else None,
        spec.cursor_kind,
        spec.watermark,
        spec.include_null_cursor,
    )
    for col in ([*spec.keys] if with_keys else []) + ([spec.cursor] if spec.cursor else []):
        hd.check_lake_type(col.kind, data.schema.field(col.lake).type, table=cfg.name, column=col.name)
    append = cfg.effective_write_mode is WriteMode.APPEND
    if append:
        report.lake_versions = data.num_rows
    return hd.LakeSide(data, spec, latest_version_only=append and with_keys)


class _Prefetched:
    """A side whose level-0 sums were computed ahead (concurrently with the lake scan)."""

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
    source = hd.SnowflakeSide(cur, hd.SnowflakeSql(spec, sq.from_clause, dialect))
    # Snowflake aggregates while the lake is read: the wall time is the slower of the two, not their sum.
    with ThreadPoolExecutor(max_workers=1) as pool:
        s0 = pool.submit(source.sums, 0, None, None)
        lake_side = _lake_side(cfg, table, spec, report, with_keys=True)
        lake = _Prefetched(lake_side, lake_side.sums(0, None, None))  # also while Snowflake aggregates
        src = _Prefetched(source, s0.result())
    res = hd.hashdiff(src, lake, spec, source_queries=lambda: cur.queries)
    report.source_rows, report.lake_rows = res.source_rows, res.lake_rows
    report.source_rows_fetched = source.rows_fetched
    report.differing_days = res.days
    report.truncated = res.truncated
    lake_only = [d for d in res.diffs if d.kind is hd.DiffKind.LAKE_ONLY]
    others = [d for d in res.diffs if d.kind is not hd.DiffKind.LAKE_ONLY]
    found = {}
    if lake_only and cur.queries < spec.max_queries:
        for r in source.lookup([d.canonical for d in lake_only]):
            found[r.key] = r.cursor
    for d in lake_only:
        if d.canonical in found:
            report.pending += 1  # the source row exists above the watermark: the next load brings it
        elif cur.queries >= spec.max_queries and not found:
            others.append(replace(d, note="not looked up (query budget)"))
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
    if report.truncated and report.pending and not others:
        report.note = (
            "inconclusive: more buckets differ than were examined, and every examined difference is a row updated "
            "in the source after the watermark (pending the next load); run the check closer to a load"
        )


def _count_only(
    cfg: TableConfig, table: Table, cur: Any, sq: Any, spec: hd.Spec, dialect: hd.HashDialect, report: VolumeReport
) -> None:
    """Counts per cursor day: equal for merge tables; the lake at least the source for append tables."""
    where, params = hd.SnowflakeSql(spec, sq.from_clause, dialect).scope()
    day = hd.sf_day(spec.cursor) if spec.cursor else "CAST(NULL AS DATE)"
    cur.execute(f"SELECT {day} AS d, COUNT(*) FROM {sq.from_clause} WHERE {where} GROUP BY d", params or None)
    src = {hd.day_text(d): int(n) for d, n in cur.fetchall()}
    import duckdb

    names = [spec.cursor.lake] if spec.cursor else []
    lake = (
        metadata_day_counts(table, names[0], spec.cursor_kind, spec.watermark, spec.include_null_cursor)
        if names
        else None
    )
    report.lake_counts_from_metadata = lake is not None
    if lake is None:
        data = read_lake_columns(
            table,
            names or [table.schema().fields[0].name],
            names[0] if names else None,
            spec.cursor_kind,
            spec.watermark,
            spec.include_null_cursor,
        )
        con = duckdb.connect()
        con.register("lake_raw", hd.naive_utc(data))
        lday = hd.duck_day(spec.cursor) if spec.cursor else "CAST(NULL AS DATE)"
        query = f"SELECT {lday}, COUNT(*) FROM lake_raw GROUP BY 1"
        lake = {hd.day_text(d): int(n) for d, n in con.execute(query).fetchall()}
    report.source_rows, report.lake_rows = sum(src.values()), sum(lake.values())
    append = cfg.effective_write_mode is WriteMode.APPEND
    if append:
        report.lake_versions = report.lake_rows
    for d in sorted(set(src) | set(lake)):
        s, lk = src.get(d, 0), lake.get(d, 0)
        if (lk < s) if append else (lk != s):
            report.differing_days[d] = (s, lk)


# ---------------------------------------------------------------------------
# deletes: propagate — the one commit this module makes


def commit_hard_deletes(
    table: Table,
    cfg: TableConfig,
    keys: Sequence[dict[str, str]],
    *,
    run_id: str,
    expected_snapshot_id: int,
    dag_id: str = "",
) -> int:
    """Remove rows whose key is gone from the source, at or below the watermark, in one commit.

    The commit carries the table's current snowberg state (copied from the
    snapshot that holds it, so the watermark is unchanged), disables
    pyiceberg's commit retries (``commit.retry.num-retries=0``: a concurrent
    commit fails this one instead of being rebased under it) and asserts the
    base snapshot: the one the check compared. Rows above the watermark are
    never touched: the delete filter is ``key IN (...) AND cursor <= watermark``.
    Returns the number of rows removed.
    """
    from pyiceberg import expressions

    ex: Any = expressions
    if not keys:
        return 0
    snap = table.current_snapshot()
    if snap is None or snap.snapshot_id != expected_snapshot_id:
        raise state.ConcurrentCommitError(
            f"{cfg.name}: the table moved from snapshot {expected_snapshot_id} to "
            f"{snap.snapshot_id if snap else None} since the volume check read it; deletes not propagated"
        )
    st = state.read_state(table)
    if st is None or st.watermark is None or cfg.cursor is None:
        raise ValueError(f"{cfg.name}: deletes: propagate needs a committed watermark and a cursor")
    key_cols = [c.lower() for c in cfg.primary_key]
    field_types = {f.name: f.field_type for f in table.schema().fields}

    def typed(col: str, text: str) -> Any:
        t = str(field_types[col])
        if t in ("int", "long"):
            return int(text)
        if t.startswith("timestamp"):
            return text.replace(" ", "T")
        return text  # strings, decimals and dates bind from their canonical text

    if len(key_cols) == 1:
        kexpr: Any = ex.In(key_cols[0], {typed(key_cols[0], k[cfg.primary_key[0]]) for k in keys})
    else:
        conj = [
            ex.And(*[ex.EqualTo(c, typed(c, k[n])) for c, n in zip(key_cols, cfg.primary_key, strict=True)])
            for k in keys
        ]
        kexpr = conj[0] if len(conj) == 1 else ex.Or(*conj)
    cursor = cfg.cursor.column.lower()
    wm = _lake_literal(st.cursor_kind or "", st.watermark)
    expr = ex.And(kexpr, ex.LessThanOrEqual(cursor, wm))
    before = table.scan(row_filter=expr, selected_fields=(key_cols[0],)).to_arrow().num_rows
    if before == 0:
        return 0
    # Through the one commit gate: the state (watermark unchanged) in the summary and
    # the table properties, no rebase on conflict, the base snapshot asserted.
    gate.commit(
        table,
        table.transaction(),
        state_props=state.current_state_props(table),
        summary={state.RUN_ID: run_id, state.MODE: PROPAGATE_MODE, state.ROWS: "0", ROWS_DELETED: str(before)},
        replaced=gate.Replacement(rows=expr),
        crash_points=None,
        dag_id=dag_id,
    )
    log.info("%s: removed %d row(s) deleted in the source (watermark %s kept)", cfg.name, before, st.watermark)
    return before


__all__ = [
    "PROPAGATE_MODE",
    "ROWS_DELETED",
    "VolumeReport",
    "commit_hard_deletes",
    "metadata_day_counts",
    "read_lake_columns",
    "render",
    "verify",
]
