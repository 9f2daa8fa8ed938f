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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from snowberg.core.identifiers import TableName, quote_identifier

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.types import IcebergType


class UnsupportedIcebergTypeError(TypeError):
    """An Iceberg column has no Snowflake mapping."""


@dataclass(frozen=True)
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
                f.name, quoted.strip('"'), sql, isinstance(f.field_type, (it.ListType, it.MapType, it.StructType))
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
