"""Iceberg → Snowflake type mapping for native tables, and the DDL built from it.

The inverse of ``snowberg.mapping`` (rules.py) (Snowflake → Iceberg), following Snowflake's
own Iceberg type table where one exists. ``TYPE_TABLE`` at the end of this
module is the single statement of the mapping (the docs render it, the tests
walk it). Every Iceberg type has exactly one target and nothing is narrowed:
``long`` lands in ``NUMBER(19,0)``, ``timestamptz`` keeps microseconds in
``TIMESTAMP_TZ(6)``. Types without a mapping (``unknown``, ``variant``,
geometry and geography types of Iceberg v3) fail loudly, naming the
column.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from snowberg.core.identifiers import TableName, quote_identifier

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.types import IcebergType


class UnsupportedIcebergTypeError(TypeError):
    """An Iceberg column has no Snowflake mapping."""


@dataclass(frozen=True, kw_only=True)
class TargetColumn:
    """One source column as it lands in Snowflake."""

    source_name: str  # the Iceberg column name
    name: str  # the Snowflake column name (quoted form in ``quoted``)
    sql_type: str  # Snowflake DDL type
    semi_structured: bool  # loaded through PARSE_JSON

    @property
    def quoted(self) -> str:
        return quote_identifier(self.name, "column")

    @property
    def ddl(self) -> str:
        return f"{self.quoted} {self.sql_type}"


def snowflake_type(t: IcebergType, column: str = "?") -> str:
    """The Snowflake DDL type for an Iceberg type."""
    from pyiceberg import types as it

    simple: dict[type, str] = {
        it.BooleanType: "BOOLEAN",
        it.IntegerType: "NUMBER(10,0)",
        it.LongType: "NUMBER(19,0)",
        it.FloatType: "FLOAT",
        it.DoubleType: "FLOAT",
        it.DateType: "DATE",
        it.TimeType: "TIME(6)",
        it.TimestampType: "TIMESTAMP_NTZ(6)",
        it.TimestamptzType: "TIMESTAMP_TZ(6)",
        it.StringType: "VARCHAR",
        it.UUIDType: "VARCHAR(36)",
        it.BinaryType: "BINARY",
    }
    for cls, sql in simple.items():
        if type(t) is cls:
            return sql
    ns_types = {"TimestampNanoType": "TIMESTAMP_NTZ(9)", "TimestamptzNanoType": "TIMESTAMP_TZ(9)"}
    if type(t).__name__ in ns_types:
        return ns_types[type(t).__name__]
    if isinstance(t, it.DecimalType):  # Iceberg caps precision at 38, as Snowflake does
        return f"NUMBER({t.precision},{t.scale})"
    if isinstance(t, it.FixedType):
        return f"BINARY({len(t)})"
    if isinstance(t, it.ListType):
        return "ARRAY"
    if isinstance(t, (it.MapType, it.StructType)):
        return "OBJECT"
    raise UnsupportedIcebergTypeError(f"column {column!r}: Iceberg type {t} has no Snowflake mapping")


def target_columns(schema: Schema) -> list[TargetColumn]:
    """Snowflake columns for the top-level fields of an Iceberg schema (names validated; collisions refused)."""
    from pyiceberg import types as it

    out: list[TargetColumn] = []
    seen: dict[str, str] = {}
    for f in schema.fields:
        quoted = quote_identifier(f.name, "column")  # validates the name
        key = quoted.upper()
        if key in seen:
            raise UnsupportedIcebergTypeError(
                f"columns {seen[key]!r} and {f.name!r} both become Snowflake column {quoted}; rename one in the lake"
            )
        seen[key] = f.name
        sql = snowflake_type(f.field_type, f.name)
        out.append(
            TargetColumn(
                source_name=f.name,
                name=quoted.strip('"'),
                sql_type=sql,
                semi_structured=isinstance(f.field_type, (it.ListType, it.MapType, it.StructType)),
            )
        )
    return out


def create_table_sql(table: TableName, columns: Sequence[TargetColumn], lineage_column: str | None) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for a native target (identifiers validated and quoted)."""
    parts = [c.ddl for c in columns]
    if lineage_column:
        parts.append(f"{quote_identifier(lineage_column, 'lineage column')} NUMBER(19,0)")
    return f"CREATE TABLE IF NOT EXISTS {table.quoted()} (\n    " + ",\n    ".join(parts) + "\n)"


# (Iceberg type text, Snowflake type, notes): the table in the docs, and what the tests walk.
TYPE_TABLE: tuple[tuple[str, str, str], ...] = (
    ("boolean", "BOOLEAN", ""),
    ("int", "NUMBER(10,0)", "every 32-bit value fits"),
    ("long", "NUMBER(19,0)", "every 64-bit value fits"),
    ("float", "FLOAT", "Snowflake FLOAT is a 64-bit double: exact"),
    ("double", "FLOAT", ""),
    ("decimal(p,s)", "NUMBER(p,s)", "p ≤ 38 (Iceberg's own limit)"),
    ("date", "DATE", ""),
    ("time", "TIME(6)", "microseconds"),
    ("timestamp", "TIMESTAMP_NTZ(6)", "microseconds, no zone"),
    ("timestamptz", "TIMESTAMP_TZ(6)", "the UTC instant, stored with offset +00:00"),
    ("timestamp_ns", "TIMESTAMP_NTZ(9)", "Iceberg v3"),
    ("timestamptz_ns", "TIMESTAMP_TZ(9)", "Iceberg v3"),
    ("string", "VARCHAR", "Snowflake's 16 MB limit applies"),
    ("uuid", "VARCHAR(36)", "canonical text form"),
    ("binary", "BINARY", "Snowflake's 8 MB limit applies"),
    ("fixed[n]", "BINARY(n)", ""),
    ("list<…>", "ARRAY", "loaded as JSON through PARSE_JSON"),
    ("map<…>", "OBJECT", "loaded as JSON through PARSE_JSON; keys become text"),
    ("struct<…>", "OBJECT", "loaded as JSON through PARSE_JSON"),
)


def render_markdown() -> str:
    """The mapping as a Markdown table (for docs/lake-to-snowflake.md)."""
    rows = [f"| `{i}` | `{s}` | {n} |" for i, s, n in TYPE_TABLE]
    return "\n".join(["| Iceberg | Snowflake | Notes |", "|---|---|---|", *rows])


# ---------------------------------------------------------------- Snowflake-managed Iceberg tables

_BASE_LOCATION = re.compile(r"[A-Za-z0-9_\-./=]{1,512}")


def iceberg_table_type(t: IcebergType, column: str = "?") -> str:
    """The column type for a Snowflake-managed Iceberg table (``CREATE ICEBERG TABLE``).

    Follows Snowflake's table of Iceberg data types: numeric columns of a
    Snowflake-managed table may be declared with Iceberg's own type names,
    which keeps them exact (``NUMBER(10,0)`` would not be an Iceberg ``int``);
    an Iceberg table holds no VARIANT and no TIMESTAMP_TZ, so nested types
    become structured types (``ARRAY(T)``, ``MAP(K, V)``, ``OBJECT(name T, …)``)
    and ``timestamptz`` becomes ``TIMESTAMP_LTZ``. A type Snowflake cannot
    create fails, naming the column.
    """
    from pyiceberg import types as it

    numeric: dict[type, str] = {
        it.IntegerType: "int",
        it.LongType: "long",
        it.FloatType: "float",
        it.DoubleType: "double",
    }
    if type(t) in numeric:
        return numeric[type(t)]
    if isinstance(t, it.DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, it.TimestamptzType):
        return "TIMESTAMP_LTZ(6)"
    if type(t).__name__ == "TimestamptzNanoType":
        return "TIMESTAMP_LTZ(9)"
    if isinstance(t, it.UUIDType):
        raise UnsupportedIcebergTypeError(
            f"column {column!r}: Snowflake cannot create an Iceberg uuid column; cast it to string in the lake"
        )
    if isinstance(t, it.ListType):
        return f"ARRAY({iceberg_table_type(t.element_type, column)})"
    if isinstance(t, it.MapType):
        return f"MAP({iceberg_table_type(t.key_type, column)}, {iceberg_table_type(t.value_type, column)})"
    if isinstance(t, it.StructType):
        fields = ", ".join(
            f"{quote_identifier(f.name, 'field')} {iceberg_table_type(f.field_type, f'{column}.{f.name}')}"
            for f in t.fields
        )
        return f"OBJECT({fields})"
    return snowflake_type(t, column)


def create_iceberg_table_sql(
    table: TableName, schema: Schema, *, external_volume: str, base_location: str, catalog: str = "SNOWFLAKE"
) -> str:
    """``CREATE ICEBERG TABLE IF NOT EXISTS`` for a Snowflake-managed Iceberg target.

    DDL takes no bind parameters, so every part is validated first: identifiers
    are quoted, the external volume is an identifier, the base location a path
    of safe characters. Columns come from the lake table's Iceberg schema.
    """
    from snowberg.core.identifiers import validate_identifier

    validate_identifier(external_volume, "external volume")
    validate_identifier(catalog, "catalog")
    if not _BASE_LOCATION.fullmatch(base_location) or ".." in base_location.split("/"):
        raise ValueError(
            f"table {table}: base_location {base_location[:80]!r} must be a relative path of letters, digits, "
            "'_', '-', '.', '/', '='"
        )
    cols = [
        f"{c.quoted} {iceberg_table_type(f.field_type, f.name)}"
        for c, f in zip(target_columns(schema), schema.fields, strict=True)
    ]
    return (
        f"CREATE ICEBERG TABLE IF NOT EXISTS {table.quoted()} (\n    "
        + ",\n    ".join(cols)
        + f"\n)\n  CATALOG = '{catalog.upper()}'\n  EXTERNAL_VOLUME = '{external_volume}'\n"
        + f"  BASE_LOCATION = '{base_location}'"
    )
