"""Push-down unload: Snowflake writes the Parquet, Iceberg registers it. No row passes through a worker.

For very large tables (an initial load or a full refresh of billions of
rows) the extract path is bounded by one worker's network and CPU. Here
Snowflake's own warehouse does the work::

    COPY INTO @<stage>/<table>/<run>/
      FROM (SELECT <columns, shaped for Iceberg> FROM <source> WHERE <window>)
      [PARTITION BY <the table's partition values>]
      FILE_FORMAT = (TYPE = PARQUET COMPRESSION = SNAPPY)
      HEADER = TRUE MAX_FILE_SIZE = … DETAILED_OUTPUT = TRUE INCLUDE_QUERY_ID = TRUE

The stage is an external stage whose URL is inside the lake's storage (the
table's data location, ideally), so the files are already where the lake
reads them. snowberg then reads each file's footer only (not its rows),
checks the file schema against the table's mapped Iceberg types, checks the
row counts against COPY's own report, and registers the files with pyiceberg
``add_files`` in ONE commit carrying the watermark (snapshot properties), the
same exactly-once contract as every snowberg load.

Shaping the Parquet. ``ENABLE_UNLOAD_PHYSICAL_TYPE_OPTIMIZATION = FALSE`` makes
the file schema follow the query's logical types instead of the values (the
default picks the smallest type that fits each unload, so two unloads of one
column could differ). Columns are aliased to their Iceberg names (lower
case), semi-structured values become JSON text (``TO_JSON``), geography
becomes GeoJSON/WKT text, and sub-microsecond timestamps are cast to
microseconds when the table allows truncation. Whatever Snowflake writes,
a file whose types are not exactly the table's (or an Iceberg-legal
promotion of them) is refused before anything is registered, naming the
column: the check, not an assumption, is what keeps the table readable.

When to use which path: see docs/performance.md.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from snowberg.config.table_config import TableConfig
from snowberg.core.identifiers import TableName
from snowberg.core.window import Window
from snowberg.iceberg.identity import identity_properties
from snowberg.snowflake.source import SourceQuery

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

    from snowberg.mapping.rules import MappedColumn

log = logging.getLogger(__name__)

DEFAULT_MAX_FILE_SIZE = 256 * 1024 * 1024  # bytes, Snowflake's MAX_FILE_SIZE (its default is 16 MB)
_PATH_PART = re.compile(r"[A-Za-z0-9_.=-]+")


class UnloadError(RuntimeError):
    """The unloaded files cannot be registered as they are; nothing was committed."""


@dataclass(frozen=True, kw_only=True)
class UnloadTarget:
    """Where Snowflake unloads, and where the lake sees the same files.

    stage:     a named external stage, ``DB.SCHEMA.STAGE`` (validated, quoted)
    stage_url: the stage's URL as the lake's FileIO addresses it
               (``s3://lake/warehouse/shop/orders/data``); check it with
               ``DESC STAGE`` — the live test does
    prefix:    folder under the stage for snowberg's unloads
    """

    stage: str
    stage_url: str
    prefix: str = "snowberg-unload"
    max_file_size: int = DEFAULT_MAX_FILE_SIZE

    def __post_init__(self) -> None:
        try:
            TableName.parse(self.stage)
        except ValueError as exc:
            raise ValueError(f"invalid stage name {self.stage!r} (expected DB.SCHEMA.STAGE): {exc}") from None
        for part in self.prefix.split("/"):
            if part in ("", ".", "..") or not _PATH_PART.fullmatch(part):
                raise ValueError(f"unload prefix {self.prefix!r}: use letters, digits, '_', '.', '=', '-' and '/'")
        if not re.match(r"^[a-z][a-z0-9+.-]*://", self.stage_url):
            raise ValueError(f"stage_url {self.stage_url!r} must be a URL the lake can read (s3://…, gs://…, file://…)")
        if not 1_000_000 <= self.max_file_size <= 5 * 1024**3:
            raise ValueError("max_file_size must be between 1 MB and 5 GB")

    def run_path(self, cfg: TableConfig, run_id: str, try_number: int = 1) -> str:
        """The folder of one attempt's files, relative to the stage.

        Keyed by a hash of the WHOLE run id (a readable prefix is kept for
        people) and by the try number: two runs whose ids share a long prefix,
        or a cleared run's new try, never write into (or clear) a folder whose
        files an earlier attempt may have registered.
        """
        digest = hashlib.sha256(run_id.encode()).hexdigest()[:16]
        readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id)[:60]
        return f"{self.prefix}/{cfg.name}/{readable}-{digest}/try-{int(try_number)}"

    def stage_location(self, cfg: TableConfig, run_id: str, try_number: int = 1) -> str:
        """The attempt's folder as ``COPY INTO @stage/...`` addresses it."""
        return f"@{TableName.parse(self.stage).quoted()}/{self.run_path(cfg, run_id, try_number)}/"

    def lake_folder(self, cfg: TableConfig, run_id: str, try_number: int = 1) -> str:
        """The attempt's folder as the lake's FileIO addresses it."""
        return f"{self.stage_url.rstrip('/')}/{self.run_path(cfg, run_id, try_number)}/"

    def lake_path(self, cfg: TableConfig, run_id: str, file_name: str, try_number: int = 1) -> str:
        """Where the lake reads a file COPY wrote; a name climbing out of the folder is refused."""
        name = file_name.lstrip("/")
        if ".." in name.split("/"):
            raise UnloadError(f"unexpected file name from COPY: {file_name!r}")
        return self.lake_folder(cfg, run_id, try_number) + name


@dataclass(frozen=True, kw_only=True)
class UnloadedFile:
    """One row of COPY's DETAILED_OUTPUT."""

    name: str  # relative to the COPY location
    size: int
    rows: int


# ---------------------------------------------------------------------------
# SQL


def column_expression(col: MappedColumn, cfg: TableConfig) -> str:
    """The SELECT item that makes Snowflake write this column the way the Iceberg table stores it."""
    src = col.source
    ref = '"' + src.name.replace('"', '""') + '"'  # result names are exact as Snowflake reports them
    alias = '"' + col.name.replace('"', '""') + '"'
    t = src.type
    if t in ("VARIANT", "OBJECT", "ARRAY"):
        expr = f"TO_JSON({ref})"
    elif t in ("GEOGRAPHY", "GEOMETRY"):
        expr = f"ST_ASWKT({ref})" if cfg.geo_format == "wkt" else f"TO_VARCHAR(ST_ASGEOJSON({ref}))"
    elif (
        t in ("TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIMESTAMP_TZ", "TIME")
        and (src.scale or 0) > 6
        and cfg.timestamp_nanos == "truncate"
    ):
        expr = f"CAST({ref} AS {t}(6))"
    else:
        expr = ref
    return f"{expr} AS {alias}"


_PARTITION_FORMATS = {"year": "YYYY", "month": "YYYY-MM", "day": "YYYY-MM-DD", "hour": "YYYY-MM-DD-HH24"}


def partition_by_sql(cfg: TableConfig, columns: Sequence[MappedColumn]) -> str | None:
    """A ``PARTITION BY`` expression giving each of the table's partitions its own files, or None.

    Partition values are not taken from the path: pyiceberg derives them from
    each file's column statistics and refuses a file that spans two
    partitions. The expression only has to keep partitions apart. Time
    transforms are computed in UTC (Iceberg's convention for timestamptz).
    """
    if not cfg.partition_by:
        return None
    by_name = {c.name: c for c in columns}
    parts = []
    for pf in cfg.partition_by:
        col = by_name.get(pf.column)
        if col is None:
            raise UnloadError(f"partition column {pf.column!r} is not a column of the source")
        ref = '"' + col.source.name.replace('"', '""') + '"'
        transform = pf.transform.split("[")[0]
        if col.source.type in ("TIMESTAMP_LTZ", "TIMESTAMP_TZ"):
            ref = f"CONVERT_TIMEZONE('UTC', {ref})"
        if transform == "identity":
            value = f"TO_VARCHAR({ref})"
        elif transform in _PARTITION_FORMATS:
            value = f"TO_VARCHAR({ref}, '{_PARTITION_FORMATS[transform]}')"
        else:
            raise UnloadError(
                f"partition transform {pf.transform}({pf.column}) cannot be reproduced by COPY … PARTITION BY; "
                "use the sliced extract path for this table"
            )
        parts.append(f"'{pf.name}=' || COALESCE({value}, '_null')")
    return " || '/' || ".join(parts)


def copy_sql(
    cfg: TableConfig, w: Window, columns: Sequence[MappedColumn], target: UnloadTarget, try_number: int = 1
) -> tuple[str, dict[str, Any]]:
    """The COPY INTO <location> statement for one window, and its bind parameters (the window's bounds)."""
    sq = SourceQuery(cfg)
    where, params = sq.predicate(w)
    projection = ", ".join(column_expression(c, cfg) for c in columns)
    partition = partition_by_sql(cfg, columns)
    # Identifiers are validated and quoted, the stage path is validated, the window's bounds are bind parameters.
    head = f"COPY INTO {target.stage_location(cfg, w.run_id, try_number)} "
    query = f"(SELECT {projection} FROM {sq.from_clause} WHERE {where})"  # noqa: S608
    partition_clause = f"PARTITION BY ({partition}) " if partition else ""
    options = (
        "FILE_FORMAT = (TYPE = PARQUET COMPRESSION = SNAPPY) "
        f"HEADER = TRUE MAX_FILE_SIZE = {int(target.max_file_size)} DETAILED_OUTPUT = TRUE INCLUDE_QUERY_ID = TRUE"
    )
    sql = f"{head}FROM {query} {partition_clause}{options}"
    return sql, params


SESSION_SQL = "ALTER SESSION SET ENABLE_UNLOAD_PHYSICAL_TYPE_OPTIMIZATION = FALSE"


def remove_sql(cfg: TableConfig, target: UnloadTarget, run_id: str, try_number: int = 1) -> str:
    """Clear a failed attempt's files (checked first: no snapshot references any of them)."""
    return f"REMOVE {target.stage_location(cfg, run_id, try_number)}"


def files_referenced_under(table: Table | None, folder: str) -> set[str]:
    """Data files under ``folder`` that ANY snapshot of the table references (not only the current one).

    A file an older snapshot references is still needed for time travel and
    rollback; removing it would break them.
    """
    if table is None:
        return set()
    found: set[str] = set()
    seen: set[str] = set()
    for snap in table.snapshots():
        for manifest in snap.manifests(table.io):
            if manifest.manifest_path in seen:
                continue
            seen.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                if entry.data_file.file_path.startswith(folder):
                    found.add(entry.data_file.file_path)
    return found


def parse_copy_output(rows: Sequence[Sequence[Any]], description: Sequence[Any] | None = None) -> list[UnloadedFile]:
    """COPY's DETAILED_OUTPUT rows: FILE_NAME, FILE_SIZE, ROW_COUNT (by name when a description is given)."""
    idx = {"FILE_NAME": 0, "FILE_SIZE": 1, "ROW_COUNT": 2}
    if description:
        names = [str(d[0]).upper() for d in description]
        if all(k in names for k in idx):
            idx = {k: names.index(k) for k in idx}
    return [
        UnloadedFile(name=str(r[idx["FILE_NAME"]]), size=int(r[idx["FILE_SIZE"]]), rows=int(r[idx["ROW_COUNT"]]))
        for r in rows
    ]


# ---------------------------------------------------------------------------
# Checking the files


def _arrow_ok(file_t: pa.DataType, table_t: pa.DataType) -> bool:
    """Is a file column of ``file_t`` readable as the table's type without rewriting (equal or a legal promotion)?"""
    import pyarrow as pa
    import pyarrow.types as pt

    if pt.is_decimal(table_t):
        return pt.is_decimal(file_t) and file_t.scale == table_t.scale and file_t.precision <= table_t.precision
    if table_t == pa.int64():
        return pt.is_integer(file_t) and pt.is_signed_integer(file_t)
    if table_t == pa.int32():
        return file_t in (pa.int8(), pa.int16(), pa.int32())
    if table_t == pa.float64():
        return file_t in (pa.float32(), pa.float64())
    if pt.is_large_string(table_t) or pt.is_string(table_t):
        return pt.is_string(file_t) or pt.is_large_string(file_t)
    if pt.is_large_binary(table_t) or pt.is_binary(table_t):
        return pt.is_binary(file_t) or pt.is_large_binary(file_t)
    if pt.is_timestamp(table_t):
        if not pt.is_timestamp(file_t) or file_t.unit != "us":
            return False
        utc = {"UTC", "Etc/UTC", "+00:00", "Z"}
        return (table_t.tz is None and file_t.tz is None) or (table_t.tz is not None and file_t.tz in utc)
    if pt.is_list(table_t) or pt.is_large_list(table_t):
        return (pt.is_list(file_t) or pt.is_large_list(file_t)) and _arrow_ok(file_t.value_type, table_t.value_type)
    return bool(file_t == table_t)


def schema_problems(table_schema: Schema, file_schema: pa.Schema) -> list[str]:
    """Why a Parquet file's schema cannot be registered as-is (empty: it can)."""
    from snowberg.iceberg.tables import arrow_schema

    problems = []
    target = arrow_schema(table_schema)
    for f in file_schema:
        if f.metadata and b"PARQUET:field_id" in f.metadata:
            problems.append(f"column {f.name!r} carries a Parquet field id (not a Snowflake unload file)")
            break
    have = {f.name: f.type for f in file_schema}
    want = {f.name: f.type for f in target}
    for name in sorted(set(have) - set(want)):
        problems.append(f"column {name!r} is in the file but not in the table")
    for name in sorted(set(want) - set(have)):
        problems.append(f"column {name!r} is in the table but not in the file")
    for name in [n for n in want if n in have]:
        if not _arrow_ok(have[name], want[name]):
            hint = ""
            if str(have[name]).startswith("decimal") and str(want[name]) == "int64":
                hint = (
                    " (Snowflake unloads NUMBER(p,0) as DECIMAL; the table maps it to long: "
                    "use the extract path for this table)"
                )
            elif str(have[name]).startswith(("timestamp[ns", "time64[ns")):
                hint = " (nanoseconds: set timestamp_nanos: truncate to unload microseconds)"
            problems.append(f"column {name!r}: the file has {have[name]}, the table needs {want[name]}{hint}")
    return problems


def read_footer(table: Table, path: str) -> Any:
    """The Parquet footer of ``path`` (schema, row groups, row count) without reading the data."""
    import pyarrow.parquet as pq

    with table.io.new_input(path).open() as f:
        return pq.read_metadata(f)


def check_files(table: Table, paths: Sequence[str], expected_rows: int | None) -> int:
    """Footer-only checks of every file; raise ``UnloadError`` listing every problem. Returns the row count."""
    problems: list[str] = []
    total = 0
    schema = table.schema()
    for p in paths:
        md = read_footer(table, p)
        total += md.num_rows
        for msg in schema_problems(schema, md.schema.to_arrow_schema()):
            problems.append(f"{p.rsplit('/', 1)[-1]}: {msg}")
    if expected_rows is not None and total != expected_rows:
        problems.append(f"the files hold {total:,} rows, COPY reported {expected_rows:,}")
    if problems:
        shown = problems[:20] + ([f"… and {len(problems) - 20} more"] if len(problems) > 20 else [])
        raise UnloadError("the unloaded files cannot be registered (nothing was committed):\n  " + "\n  ".join(shown))
    return total


# ---------------------------------------------------------------------------
# Registering


def register_files(
    cfg: TableConfig,
    catalog: Catalog,
    w: Window,
    paths: Sequence[str],
    *,
    expected_rows: int | None = None,
) -> dict[str, Any]:
    """Register Parquet files already in the lake as the window's rows: one commit, exactly once."""
    from snowberg.core.results import LoadResult, Status
    from snowberg.iceberg import gate
    from snowberg.iceberg.tables import load_table_or_none
    from snowberg.load.extract import stopped

    started = time.monotonic()
    table = load_table_or_none(catalog, cfg)
    if table is None:
        raise UnloadError(f"table {cfg.target} does not exist; unload_window creates it before unloading")
    adm = gate.admit(table, w)
    if adm.status is Status.ALREADY_COMMITTED:
        return stopped(adm, started).to_dict()
    w = adm.window
    _check_push_down_allowed(cfg, table, w)
    paths = list(paths)
    rows = check_files(table, paths, expected_rows)
    counts = gate.run_counts(cfg.name, w, extracted=expected_rows, committed=rows)
    replaced = gate.replaced_by_window(cfg, w, None, table.current_snapshot() is not None)
    snap = gate.commit(
        table,
        table.transaction(),
        state_props=gate.window_state(w),
        summary=counts,
        replaced=replaced,
        properties=identity_properties(cfg),
        dag_id=w.dag_id,
        file_paths=paths,
    )
    log.info(
        "%s: registered %d unloaded files (%s rows) in snapshot %s, watermark %s",
        cfg.name,
        len(paths),
        f"{rows:,}",
        snap.snapshot_id,
        w.new_watermark,
    )
    return LoadResult(
        status=Status.COMMITTED,
        rows=rows,
        data_files=len(paths),
        snapshot_id=snap.snapshot_id,
        watermark=w.new_watermark,
        seconds=time.monotonic() - started,
        window=w.to_dict(),
        rows_planned=w.rows_in_window,
        rows_extracted=expected_rows,
    ).to_dict()


def _check_push_down_allowed(cfg: TableConfig, table: Table, w: Window) -> None:
    """Merges need the keys of every unloaded row; push-down reads no rows, so it only loads what replaces nothing."""
    from snowberg.iceberg import gate

    if gate.merges(cfg, w) and table.current_snapshot() is not None:
        raise UnloadError(
            f"table {cfg.name!r} merges on {cfg.primary_key} and already holds data: a push-down unload cannot "
            "replace earlier versions of keys without reading them. Use push-down for the initial load or a "
            "full refresh, and the extract path (sliced) for incremental merges."
        )


def unload_window(
    cfg: TableConfig,
    conn: Any,
    catalog: Catalog,
    w: Window,
    target: UnloadTarget,
    *,
    try_number: int = 1,
) -> dict[str, Any]:
    """Unload the window with COPY INTO the stage, then register the files in one commit.

    ``try_number``: the task's try (Airflow's ``ti.try_number``); each try
    unloads into its own folder, so a retry never clears files of another.
    """
    from snowberg.iceberg import gate
    from snowberg.iceberg.tables import ensure_table, load_table_or_none
    from snowberg.load.extract import mapping_options, stopped
    from snowberg.load.plan import describe_window
    from snowberg.mapping.rules import map_columns
    from snowberg.snowflake.source import result_columns

    started = time.monotonic()
    table = load_table_or_none(catalog, cfg)
    adm = gate.admit(table, w)
    if not adm.go:
        return stopped(adm, started).to_dict()
    w = adm.window
    if table is not None:
        _check_push_down_allowed(cfg, table, w)

    folder = target.lake_folder(cfg, w.run_id, try_number)
    sq = SourceQuery(cfg)
    cur = conn.cursor()
    try:
        cur.execute(f"SELECT * FROM {sq.from_clause} LIMIT 0")  # noqa: S608 - quoted identifiers; compile only
        columns = map_columns(result_columns(cur), mapping_options(cfg))
        table = ensure_table(catalog, cfg, table, columns, identifier_fields=False)
        referenced = files_referenced_under(table, folder)
        if referenced:
            raise UnloadError(
                f"{len(referenced)} file(s) in the unload folder {folder} are referenced by snapshots of "
                f"{cfg.target} (e.g. {sorted(referenced)[0][-80:]}); refusing to clear it. Nothing was removed."
            )
        cur.execute(SESSION_SQL)
        cur.execute(remove_sql(cfg, target, w.run_id, try_number))
        sql, params = copy_sql(cfg, w, columns, target, try_number)
        log.info("unloading %s to %s", describe_window(w), target.stage_location(cfg, w.run_id, try_number))
        cur.execute(sql, params)
        files = parse_copy_output(cur.fetchall(), cur.description)
    finally:
        cur.close()
    expected = sum(f.rows for f in files)
    log.info(
        "%s: Snowflake unloaded %d files, %s rows, %.1f MB",
        cfg.name,
        len(files),
        f"{expected:,}",
        sum(f.size for f in files) / 1e6,
    )
    paths = [target.lake_path(cfg, w.run_id, f.name, try_number) for f in files if f.rows > 0]
    return register_files(cfg, catalog, w, paths, expected_rows=expected)
