"""The SQL of loading a native target with ``COPY INTO <table>`` from Parquet, and the check of COPY's answer.

Two sources of Parquet, one statement shape::

    COPY INTO <target> (<columns>, <lineage>)
      FROM (SELECT $1:"<field>"::<type>, …, <lineage> FROM @<stage>[/<folder>/])
      [FILES = ('<path>', …)]
      FILE_FORMAT = (TYPE = PARQUET USE_VECTORIZED_SCANNER = TRUE BINARY_AS_TEXT = FALSE USE_LOGICAL_TYPE = TRUE)
      [FORCE = TRUE]

* the lake's own data files, through an external stage over the lake's storage
  (``LakeStage``; ``FILES`` names them relative to the stage);
* files the worker wrote and ``PUT`` into a temporary stage (every file of the
  run's folder; no ``FILES``).

Why a transformation ``SELECT`` and not ``MATCH_BY_COLUMN_NAME``: Snowflake
refuses the two together (behaviour change 2024_02: "match_by_column_name is
not supported with copy transform"), and every load needs the transformation
for the lineage column (a constant per source snapshot), for semi-structured
columns (``PARSE_JSON`` of the JSON text snowberg writes, exactly as the
``INSERT`` path binds it) and for explicit casts to the mapped type (the same
``sql_type`` the ``INSERT`` path casts to), so that every path lands the same
values. ``TIMESTAMP_TZ`` columns are cast from the file's UTC instant in a
session whose ``TIMEZONE`` is UTC (the loader sets it), which gives the
``+00:00`` offset the ``INSERT`` path writes.

Checking the answer: COPY returns one row per file it loaded (``FILE``,
``STATUS``, ``ROWS_PARSED``, ``ROWS_LOADED``, …). A file it skips because its
load metadata says it was loaded in the last 64 days is not listed at all
(``Copy executed with 0 files processed.`` when none is left); the emulator
lists it as ``LOAD_SKIPPED``. Either way the run fails naming the file, as it
does for a file listed twice or loaded with another row count than the lake's
manifest (or the worker's file) holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from snowberg.core.identifiers import TableName, quote_identifier, validate_identifier
from snowberg.sync.ddl import TargetColumn

if TYPE_CHECKING:
    from pyiceberg.types import IcebergType

DEFAULT_COPY_MIN_ROWS = 200  # bench.sync --crossover: below ~100–500 rows (by shape) bound INSERTs beat PUT + COPY
MAX_FILES_PER_COPY = 1_000  # Snowflake's limit on the FILES list of one COPY
FILE_FORMAT = "TYPE = PARQUET USE_VECTORIZED_SCANNER = TRUE BINARY_AS_TEXT = FALSE USE_LOGICAL_TYPE = TRUE"
# A lake path COPY may name in FILES: what Iceberg writers put in paths (partition values are URL-encoded).
_FILE_PATH = re.compile(r"[A-Za-z0-9_.=%+-]+(/[A-Za-z0-9_.=%+-]+)*")


class CopyLoadError(RuntimeError):
    """COPY did not load exactly the files and rows the run sent; the transaction is rolled back."""


@dataclass(frozen=True, kw_only=True)
class LakeStage:
    """A Snowflake stage over the lake's storage: COPY reads the lake's data files where they are.

    stage:     a named external stage ``DB.SCHEMA.STAGE`` (validated, quoted)
    stage_url: the stage's URL as the lake addresses its files (``s3://lake/warehouse/``);
               ``DESC STAGE`` shows it
    """

    stage: str
    stage_url: str

    def __post_init__(self) -> None:
        try:
            TableName.parse(self.stage)
        except ValueError as exc:
            raise ValueError(f"invalid stage name {self.stage!r} (expected DB.SCHEMA.STAGE): {exc}") from None
        if not re.match(r"^[a-z][a-z0-9+.-]*://", self.stage_url):
            raise ValueError(f"stage_url {self.stage_url!r} must be a URL of the lake's storage (s3://…, file://…)")

    @property
    def location(self) -> str:
        return stage_location(self.stage)

    def relative(self, path: str) -> str | None:
        """``path`` relative to the stage (what ``FILES`` names), or None when the stage cannot name it."""
        base = self.stage_url.rstrip("/") + "/"
        if not path.startswith(base):
            return None
        rel = path[len(base) :]
        return rel if safe_path(rel) else None


def safe_path(path: str) -> bool:
    """A relative path SQL may quote as it is: safe characters, no ``.`` or ``..`` segment."""
    return bool(_FILE_PATH.fullmatch(path)) and not any(p in (".", "..") for p in path.split("/"))


def stage_location(stage: str, folder: str = "") -> str:
    """``@"DB"."SCHEMA"."STAGE"[/folder/]`` (the name validated and quoted, the folder checked)."""
    loc = "@" + TableName.parse(stage).quoted()
    if folder:
        if not safe_path(folder):
            raise ValueError(f"stage folder {folder!r}: use letters, digits, '_', '.', '=', '-' and '/'")
        loc += f"/{folder}/"
    return loc


def raw_copy_problem(t: IcebergType) -> str | None:
    """Why COPY cannot load the lake's Parquet of this Iceberg type as it is (None: it can).

    Scalars COPY casts exactly. Nested values are loaded as JSON text the
    worker writes (decimals as exact text, timestamps ISO-8601, binary hex,
    as the ``INSERT`` path binds them); Snowflake's own Parquet reader renders
    nested values its own way, so those columns go through the worker. UUIDs
    are 16 bytes in Parquet and canonical text in Snowflake; nanosecond
    timestamps are Iceberg v3, which the stage path does not claim.
    """
    from pyiceberg import types as it

    if isinstance(t, (it.ListType, it.MapType, it.StructType)):
        return f"{t} is nested (loaded as snowberg's JSON, written by the worker)"
    if isinstance(t, it.UUIDType):
        return "uuid is 16 bytes in Parquet and text in Snowflake"
    if not isinstance(
        t,
        (
            it.BooleanType,
            it.IntegerType,
            it.LongType,
            it.FloatType,
            it.DoubleType,
            it.DecimalType,
            it.DateType,
            it.TimeType,
            it.TimestampType,
            it.TimestamptzType,
            it.StringType,
            it.BinaryType,
            it.FixedType,
        ),
    ):
        return f"{t} is not a type the stage path loads"
    return None


def column_expression(col: TargetColumn, field: str | None, *, json_text: bool) -> str:
    """The transformation's item for one target column: the Parquet field cast to the mapped type.

    ``field``: the Parquet field name (None: the file lacks the column, e.g. an
    older file of a column added later, and the item is a typed NULL).
    ``json_text``: the field holds JSON text (the worker's nested columns).
    """
    if field is None:
        return f"CAST(NULL AS {col.sql_type})"
    ref = f"$1:{quote_identifier_exact(field)}"
    if col.semi_structured:
        if not json_text:
            raise ValueError(f"column {col.name}: nested values are loaded from JSON text only")
        return f"PARSE_JSON({ref})"
    return f"{ref}::{col.sql_type}"


def quote_identifier_exact(name: str) -> str:
    """A Parquet field name as a ``$1:"name"`` path key: validated, case kept (the path is case-sensitive)."""
    validate_identifier(name, "Parquet field")
    return f'"{name}"'


def copy_sql(
    target: TableName,
    columns: Sequence[TargetColumn],
    fields: Mapping[str, str | None],
    *,
    location: str,
    lineage_column: str | None,
    lineage: int | str | None,
    files: Sequence[str] = (),
    json_text: bool = False,
    force: bool = False,
    purge: bool = False,
) -> str:
    """One ``COPY INTO <table> FROM (SELECT …)`` statement.

    ``fields``: ``{source column: Parquet field (None: absent)}``;
    ``lineage``: the source snapshot id as a constant (the lake's files), or
    the Parquet field holding it (the worker's files); ``files``: names
    relative to ``location`` (empty: every file under it); ``force``: load
    files the target's load metadata says it loaded; ``purge``: remove the
    files once loaded (the worker's own files).
    """
    names = [c.quoted for c in columns]
    items = [column_expression(c, fields.get(c.source_name), json_text=json_text) for c in columns]
    if lineage_column:
        names.append(quote_identifier(lineage_column, "lineage column"))
        if isinstance(lineage, int) and not isinstance(lineage, bool):
            items.append(f"{int(lineage)}::NUMBER(19,0)")
        elif isinstance(lineage, str):
            items.append(f"$1:{quote_identifier_exact(lineage)}::NUMBER(19,0)")
        else:
            raise ValueError("a lineage column needs the snapshot id or the field holding it")
    if len(files) > MAX_FILES_PER_COPY:
        raise ValueError(f"COPY names at most {MAX_FILES_PER_COPY} files, got {len(files)}")
    for f in files:
        if not safe_path(f):
            raise ValueError(f"file name {f!r} cannot be named in FILES")
    # Every part is validated above: quoted identifiers, checked file names, an int lineage.
    sql = f"COPY INTO {target.quoted()} ({', '.join(names)}) FROM (SELECT {', '.join(items)} FROM {location})"  # noqa: S608
    if files:
        sql += " FILES = (" + ", ".join(f"'{f}'" for f in files) + ")"
    sql += f" FILE_FORMAT = ({FILE_FORMAT})"
    if force:
        sql += " FORCE = TRUE"
    if purge:
        sql += " PURGE = TRUE"
    return sql


@dataclass(frozen=True, kw_only=True)
class CopiedFile:
    """One row of COPY's answer."""

    file: str
    status: str
    rows_loaded: int
    first_error: str | None = None


def parse_copy_result(rows: Sequence[Sequence[Any]], description: Sequence[Any] | None) -> list[CopiedFile]:
    """COPY's rows by column name (``file``, ``status``, ``rows_loaded``, ``first_error``; any case).

    The single ``status`` row of a COPY that processed no file yields no entry.
    """
    names = [str(d[0]).lower() for d in (description or [])]
    if "file" not in names:
        return []
    at = {k: names.index(k) for k in ("file", "status", "rows_loaded", "first_error") if k in names}
    out = []
    for r in rows:
        err = r[at["first_error"]] if "first_error" in at else None
        out.append(
            CopiedFile(
                file=str(r[at["file"]]),
                status=str(r[at["status"]]).upper() if "status" in at else "",
                rows_loaded=int(r[at["rows_loaded"]] or 0) if "rows_loaded" in at else 0,
                first_error=str(err) if err is not None else None,
            )
        )
    return out


def _matches(reported: str, name: str) -> bool:
    """COPY reports a lake file by its URL and a staged file by its path in the stage; ``name`` is relative."""
    return reported == name or reported.endswith("/" + name)


def check_copied(expected: Mapping[str, int], copied: Sequence[CopiedFile], target: TableName) -> int:
    """Every expected file loaded exactly once with its row count, nothing else; return the rows loaded.

    ``expected``: ``{file name relative to the COPY's location: rows it holds}``.
    """
    problems: list[str] = []
    seen: dict[str, int] = {}
    total = 0
    for c in copied:
        name = next((n for n in expected if _matches(c.file, n)), None)
        if name is None:
            problems.append(f"{c.file}: not a file this run sent")
            continue
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            problems.append(f"{name}: loaded twice")
        if c.status == "LOAD_SKIPPED":
            problems.append(f"{name}: skipped as already loaded ({c.first_error or 'load metadata'})")
        elif c.status != "LOADED":
            problems.append(f"{name}: {c.status} ({c.first_error or 'no error given'})")
        elif c.rows_loaded != expected[name]:
            problems.append(f"{name}: loaded {c.rows_loaded:,} rows, the file holds {expected[name]:,}")
        else:
            total += c.rows_loaded
    missing = [n for n in expected if n not in seen]
    for n in missing:
        problems.append(
            f"{n}: not loaded (COPY skips a file its load metadata says was loaded into {target} in the last "
            "64 days: the target holds rows its sync state does not account for)"
        )
    if problems:
        shown = problems[:20] + ([f"… and {len(problems) - 20} more"] if len(problems) > 20 else [])
        raise CopyLoadError(
            f"COPY into {target} did not load what this run sent; rolled back, nothing written:\n  "
            + "\n  ".join(shown)
        )
    return total
