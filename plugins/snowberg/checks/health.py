"""Table health from metadata: snapshots, manifests, statistics, partitions, properties.

Everything comes from the table metadata file and the manifest files of the
current snapshot (Avro, small); no data file is opened. The report covers:

* snapshot history: retained snapshots, operations, oldest/newest commit;
* data files, delete files, rows and bytes (from manifest entries), the
  manifests' own added/existing row counts, and the live rows (data rows
  minus the position deletes that apply to live data files:
  ``iceberg.deletes.live_rows``, the count rollback and the sync use too);
* column-statistics coverage: per top-level primitive column, the share of
  data files carrying a null count and lower/upper bounds (an all-null
  column in a file needs no bounds);
* partition skew: files per partition, max/min;
* small files: files under ``small_file_size`` over all data files;
* table properties.

``HealthThresholds`` turns chosen metrics into limits (``breaches``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from snowberg.config.check_settings import HealthThresholds
from snowberg.core.durations import format_duration

if TYPE_CHECKING:
    from pyiceberg.table import Table


@dataclass(frozen=True, kw_only=True)
class ColumnStats:
    column: str
    type: str
    files: int  # data files counted
    with_null_counts: int
    with_lower_bounds: int
    with_upper_bounds: int
    covered: int  # null count and (bounds, or all values null)

    @property
    def coverage(self) -> float:
        return round(self.covered / self.files, 4) if self.files else 1.0


@dataclass(frozen=True, kw_only=True)
class Breach:
    metric: str
    observed: Any
    limit: Any
    message: str


@dataclass(frozen=True, kw_only=True)
class HealthReport:
    table: str
    checked_at: str
    format_version: int
    location: str
    current_snapshot_id: int | None
    snapshots: int
    operations: dict[str, int]
    oldest_snapshot_at: str | None
    newest_snapshot_at: str | None
    oldest_snapshot_age_hours: float | None
    manifests: int
    delete_manifests: int
    manifest_added_rows: int
    manifest_existing_rows: int
    data_files: int
    delete_files: int
    rows: int
    deleted_rows_in_delete_files: int
    live_rows: int | None
    total_bytes: int
    avg_file_bytes: int
    small_file_size: int
    small_files: int
    small_file_ratio: float
    partition_spec: str
    partitions: int
    max_files_per_partition: int
    min_files_per_partition: int
    partition_skew: float | None
    top_partitions: list[tuple[str, int]]
    stats_coverage: float
    columns: list[ColumnStats]
    properties: dict[str, str]
    limits: dict[str, Any] = field(default_factory=dict)
    breaches: list[Breach] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.breaches

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for c, col in zip(d["columns"], self.columns, strict=True):
            c["coverage"] = col.coverage
        d["top_partitions"] = [list(p) for p in self.top_partitions]
        d["healthy"] = self.healthy
        return d


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def _partition_key(spec: Any, partition: Any) -> str:
    if spec is None or not spec.fields:
        return "<unpartitioned>"
    values = []
    for i, pf in enumerate(spec.fields):
        try:
            v = partition[i]
        except (IndexError, TypeError):
            v = None
        values.append(f"{pf.name}={v}")
    return ", ".join(values)


def collect(
    table: Table, *, name: str, thresholds: HealthThresholds | None = None, now: datetime | None = None
) -> HealthReport:
    """Build the report from the metadata of ``table``'s current snapshot."""
    from pyiceberg.manifest import DataFileContent, ManifestContent

    from snowberg.iceberg.deletes import live_rows

    th = thresholds or HealthThresholds()
    now = now or datetime.now(UTC)
    md = table.metadata
    snaps = list(md.snapshots)
    ops: Counter[str] = Counter()
    for s in snaps:
        op = getattr(getattr(s, "summary", None), "operation", None)
        ops[str(getattr(op, "value", op) or "unknown")] += 1
    oldest = min((s.timestamp_ms for s in snaps), default=None)
    newest = max((s.timestamp_ms for s in snaps), default=None)

    schema = table.schema()
    prim = [f for f in schema.fields if f.field_type.is_primitive]
    specs = table.specs()
    current = table.current_snapshot()

    manifests = delete_manifests = m_added = m_existing = 0
    data_files = delete_files = rows = deleted_rows = total_bytes = small = 0
    per_partition: Counter[str] = Counter()
    nulls = Counter[int]()
    lowers = Counter[int]()
    uppers = Counter[int]()
    covered = Counter[int]()

    if current is not None:
        for mf in current.manifests(table.io):
            if mf.content == ManifestContent.DELETES:
                delete_manifests += 1
            else:
                manifests += 1
                m_added += mf.added_rows_count or 0
                m_existing += mf.existing_rows_count or 0
            for entry in mf.fetch_manifest_entry(table.io, discard_deleted=True):
                df = entry.data_file
                if df.content != DataFileContent.DATA:
                    delete_files += 1
                    deleted_rows += df.record_count or 0
                    continue
                data_files += 1
                rows += df.record_count or 0
                size = df.file_size_in_bytes or 0
                total_bytes += size
                if size < th.small_file_size:
                    small += 1
                spec = specs.get(df.spec_id) if df.spec_id is not None else table.spec()
                per_partition[_partition_key(spec, df.partition)] += 1
                nvc = df.null_value_counts or {}
                lo = df.lower_bounds or {}
                up = df.upper_bounds or {}
                for f in prim:
                    fid = f.field_id
                    has_null = fid in nvc
                    has_lo, has_up = fid in lo, fid in up
                    nulls[fid] += has_null
                    lowers[fid] += has_lo
                    uppers[fid] += has_up
                    all_null = has_null and df.record_count is not None and nvc[fid] >= df.record_count
                    covered[fid] += has_null and ((has_lo and has_up) or all_null)

    columns = [
        ColumnStats(
            column=f.name,
            type=str(f.field_type),
            files=data_files,
            with_null_counts=nulls[f.field_id],
            with_lower_bounds=lowers[f.field_id],
            with_upper_bounds=uppers[f.field_id],
            covered=covered[f.field_id],
        )
        for f in prim
    ]
    pairs = data_files * len(prim)
    coverage = round(sum(c.covered for c in columns) / pairs, 4) if pairs else 1.0
    counts = list(per_partition.values())
    max_pp = max(counts, default=0)
    min_pp = min(counts, default=0)
    skew = round(max_pp / min_pp, 4) if min_pp else None
    spec = table.spec()
    spec_text = (
        ", ".join(f"{pf.transform}({schema.find_column_name(pf.source_id)})" for pf in spec.fields) or "unpartitioned"
    )
    small_ratio = round(small / data_files, 4) if data_files else 0.0

    report = HealthReport(
        table=name,
        checked_at=now.isoformat(timespec="seconds"),
        format_version=md.format_version,
        location=table.location(),
        current_snapshot_id=current.snapshot_id if current else None,
        snapshots=len(snaps),
        operations=dict(sorted(ops.items())),
        oldest_snapshot_at=_iso(oldest) if oldest is not None else None,
        newest_snapshot_at=_iso(newest) if newest is not None else None,
        oldest_snapshot_age_hours=round((now.timestamp() * 1000 - oldest) / 3_600_000, 4)
        if oldest is not None
        else None,
        manifests=manifests,
        delete_manifests=delete_manifests,
        manifest_added_rows=m_added,
        manifest_existing_rows=m_existing,
        data_files=data_files,
        delete_files=delete_files,
        rows=rows,
        deleted_rows_in_delete_files=deleted_rows,
        live_rows=live_rows(table),
        total_bytes=total_bytes,
        avg_file_bytes=total_bytes // data_files if data_files else 0,
        small_file_size=th.small_file_size,
        small_files=small,
        small_file_ratio=small_ratio,
        partition_spec=spec_text,
        partitions=len(per_partition),
        max_files_per_partition=max_pp,
        min_files_per_partition=min_pp,
        partition_skew=skew,
        top_partitions=per_partition.most_common(5),
        stats_coverage=coverage,
        columns=columns,
        properties=dict(sorted(table.properties.items())),
        limits={k: (format_duration(v) if isinstance(v, timedelta) else v) for k, v in th.limits().items()},
    )
    return _with_breaches(report, th)


def _with_breaches(r: HealthReport, th: HealthThresholds) -> HealthReport:
    out: list[Breach] = []
    if th.min_stats_coverage is not None and r.data_files and r.stats_coverage < th.min_stats_coverage:
        worst = sorted(r.columns, key=lambda c: c.coverage)[:3]
        out.append(
            Breach(
                metric="stats_coverage",
                observed=r.stats_coverage,
                limit=th.min_stats_coverage,
                message=f"column statistics cover {r.stats_coverage:.0%} of (file, column) pairs, "
                f"below {th.min_stats_coverage:.0%} "
                f"(lowest: {', '.join(f'{c.column} {c.coverage:.0%}' for c in worst)}); "
                "check write.metadata.metrics.* properties",
            )
        )
    if th.max_small_file_ratio is not None and r.data_files and r.small_file_ratio > th.max_small_file_ratio:
        out.append(
            Breach(
                metric="small_file_ratio",
                observed=r.small_file_ratio,
                limit=th.max_small_file_ratio,
                message=f"{r.small_files} of {r.data_files} data files are under {_size(th.small_file_size)} "
                f"({r.small_file_ratio:.0%} > {th.max_small_file_ratio:.0%}): compact the table (rewrite data files)",
            )
        )
    if th.max_partition_skew is not None and r.partition_skew is not None and r.partition_skew > th.max_partition_skew:
        out.append(
            Breach(
                metric="partition_skew",
                observed=r.partition_skew,
                limit=th.max_partition_skew,
                message=f"files per partition range {r.min_files_per_partition}..{r.max_files_per_partition} "
                f"(skew {r.partition_skew:g} > {th.max_partition_skew:g}); "
                f"busiest: {r.top_partitions[0][0] if r.top_partitions else '-'}",
            )
        )
    if th.max_snapshots is not None and r.snapshots > th.max_snapshots:
        out.append(
            Breach(
                metric="snapshots",
                observed=r.snapshots,
                limit=th.max_snapshots,
                message=f"{r.snapshots} snapshots retained (> {th.max_snapshots}): is snapshot expiry running?",
            )
        )
    if th.max_delete_files is not None and r.delete_files > th.max_delete_files:
        out.append(
            Breach(
                metric="delete_files",
                observed=r.delete_files,
                limit=th.max_delete_files,
                message=f"{r.delete_files} delete files (> {th.max_delete_files}): compact to apply them",
            )
        )
    if th.max_snapshot_age is not None and r.oldest_snapshot_age_hours is not None:
        limit_h = th.max_snapshot_age.total_seconds() / 3600
        if r.oldest_snapshot_age_hours > limit_h:
            out.append(
                Breach(
                    metric="oldest_snapshot_age_hours",
                    observed=r.oldest_snapshot_age_hours,
                    limit=round(limit_h, 4),
                    message=f"oldest retained snapshot is {r.oldest_snapshot_age_hours:.1f} h old "
                    f"(> {format_duration(th.max_snapshot_age)}): "
                    "is snapshot expiry running?",
                )
            )
    return HealthReport(**{**{f: getattr(r, f) for f in r.__dataclass_fields__}, "breaches": out})


def _size(n: int) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(r: list[str]) -> str:
        return "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()

    return [fmt(cells[0]), "  " + "  ".join("-" * w for w in widths)] + [fmt(r) for r in cells[1:]]


def render(r: HealthReport) -> str:
    lines = [
        f"table health of {r.table}: {'HEALTHY' if r.healthy else 'UNHEALTHY'} (metadata only, {r.checked_at})",
        "",
    ]
    summary: list[list[Any]] = [
        ["location", r.location],
        ["format version", r.format_version],
        ["current snapshot", r.current_snapshot_id],
        ["snapshots retained", f"{r.snapshots} ({', '.join(f'{k} {v}' for k, v in r.operations.items()) or '-'})"],
        ["oldest / newest snapshot", f"{r.oldest_snapshot_at or '-'} / {r.newest_snapshot_at or '-'}"],
        ["manifests (data / delete)", f"{r.manifests} / {r.delete_manifests}"],
        ["data files", r.data_files],
        ["delete files", r.delete_files],
        ["rows deleted by delete files", r.deleted_rows_in_delete_files],
        ["rows (data files)", r.rows],
        ["live rows", "-" if r.live_rows is None else r.live_rows],
        ["rows (manifests added+existing)", r.manifest_added_rows + r.manifest_existing_rows],
        ["total size", _size(r.total_bytes)],
        ["average file size", _size(r.avg_file_bytes)],
        [f"small files (< {_size(r.small_file_size)})", f"{r.small_files} ({r.small_file_ratio:.0%})"],
        ["partition spec", r.partition_spec],
        ["partitions", r.partitions],
        ["files per partition (min / max)", f"{r.min_files_per_partition} / {r.max_files_per_partition}"],
        ["partition skew (max / min)", f"{r.partition_skew:g}" if r.partition_skew is not None else "-"],
        ["column statistics coverage", f"{r.stats_coverage:.0%}"],
    ]
    lines += _table(["metric", "value"], summary)
    if r.columns:
        lines += ["", "column statistics (data files with …)"]
        lines += _table(
            ["column", "type", "null counts", "lower bounds", "upper bounds", "coverage"],
            [
                [c.column, c.type, c.with_null_counts, c.with_lower_bounds, c.with_upper_bounds, f"{c.coverage:.0%}"]
                for c in r.columns
            ],
        )
    if r.partitions > 1:
        lines += ["", "busiest partitions"]
        lines += _table(["partition", "files"], [[p, n] for p, n in r.top_partitions])
    lines += ["", "table properties"]
    if r.properties:
        lines += _table(["property", "value"], [[k, v] for k, v in r.properties.items()])
    else:
        lines.append("  (none)")
    if r.limits:
        lines += [
            "",
            "limits: " + ", ".join(f"{k}={_size(v) if k == 'small_file_size' else v}" for k, v in r.limits.items()),
        ]
    for b in r.breaches:
        lines.append(f"  ! {b.metric}: {b.message}")
    return "\n".join(lines)
