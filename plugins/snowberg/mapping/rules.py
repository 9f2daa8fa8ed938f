"""Snowflake -> Iceberg type rules: ``TYPE_RULES`` is the single mapping table.

Real Snowflake may send one NUMBER(38,0) column as int8 in one chunk and
decimal128 in the next; the mapping is decided from column metadata and does
not move. ``docs/type-mapping.md`` is rendered from this table and the
table-driven tests walk every rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from snowberg.mapping.columns import SnowflakeColumn, TypeMappingError, UnsupportedTypeError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.types import IcebergType


@dataclass(frozen=True, kw_only=True)
class MappingOptions:
    """Per-table opt-ins from the config (all default to the lossless choice)."""

    number_as_long: frozenset[str] = frozenset()  # upper-case Snowflake column names
    timestamp_nanos: str = "error"  # or "truncate"
    geo_format: str = "geojson"  # or "wkt"


def _iceberg(name: str) -> Callable[[SnowflakeColumn], IcebergType]:
    def build(col: SnowflakeColumn) -> IcebergType:
        from pyiceberg import types as it

        if name == "decimal":
            return it.DecimalType(col.precision or 38, col.scale or 0)
        if name == "list<int>":
            return it.ListType(element_id=1, element_type=it.IntegerType(), element_required=False)
        if name == "list<float>":
            return it.ListType(element_id=1, element_type=it.FloatType(), element_required=False)
        return {
            "long": it.LongType,
            "double": it.DoubleType,
            "string": it.StringType,
            "binary": it.BinaryType,
            "boolean": it.BooleanType,
            "date": it.DateType,
            "time": it.TimeType,
            "timestamp": it.TimestampType,
            "timestamptz": it.TimestamptzType,
        }[name]()

    return build


def _ts(col: SnowflakeColumn) -> bool:
    return col.type in ("TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIMESTAMP_TZ", "TIME")


@dataclass(frozen=True, kw_only=True)
class TypeRule:
    """One row of the mapping table."""

    snowflake: str  # how the docs show the source type
    iceberg: str  # how the docs show the target type
    values: str  # what happens to values
    matches: Callable[[SnowflakeColumn, MappingOptions], bool]
    target: Callable[[SnowflakeColumn], IcebergType]
    examples: tuple[SnowflakeColumn, ...] = field(default_factory=tuple)


_C = SnowflakeColumn


TYPE_RULES: tuple[TypeRule, ...] = (
    TypeRule(
        snowflake="NUMBER(p,0), p ≤ 18",
        iceberg="long",
        values="Exact: every value of 18 digits fits in a signed 64-bit integer.",
        matches=lambda c, o: c.type == "NUMBER" and c.scale == 0 and (c.precision or 38) <= 18,
        target=_iceberg("long"),
        examples=(
            _C(name="A", type="NUMBER", precision=18, scale=0),
            _C(name="B", type="NUMBER", precision=1, scale=0),
        ),
    ),
    TypeRule(
        snowflake="NUMBER(p,0), p ≥ 19, column listed in `number_as_long`",
        iceberg="long",
        values="Opt-in. Each value is range-checked; one outside the 64-bit range fails the run.",
        matches=lambda c, o: (
            c.type == "NUMBER" and c.scale == 0 and (c.precision or 38) > 18 and c.name.upper() in o.number_as_long
        ),
        target=_iceberg("long"),
        examples=(_C(name="ID", type="NUMBER", precision=38, scale=0),),
    ),
    TypeRule(
        snowflake="NUMBER(p,0), p ≥ 19 (INT, INTEGER, BIGINT are NUMBER(38,0))",
        iceberg="decimal(p,0)",
        values="Exact. Arrives as int8…int64 or decimal128 per chunk; all are cast to decimal(p,0).",
        matches=lambda c, o: c.type == "NUMBER" and c.scale == 0 and (c.precision or 38) > 18,
        target=_iceberg("decimal"),
        examples=(
            _C(name="A", type="NUMBER", precision=38, scale=0),
            _C(name="B", type="NUMBER", precision=19, scale=0),
        ),
    ),
    TypeRule(
        snowflake="NUMBER(p,s), s > 0",
        iceberg="decimal(p,s)",
        values="Exact. A batch that arrives as float is refused rather than rounded.",
        matches=lambda c, o: c.type == "NUMBER" and (c.scale or 0) > 0,
        target=_iceberg("decimal"),
        examples=(
            _C(name="A", type="NUMBER", precision=10, scale=2),
            _C(name="B", type="NUMBER", precision=38, scale=37),
        ),
    ),
    TypeRule(
        snowflake="FLOAT, FLOAT4, FLOAT8, DOUBLE, REAL",
        iceberg="double",
        values="Exact (Snowflake floats are 64-bit), NaN and ±inf kept.",
        matches=lambda c, o: c.type == "FLOAT",
        target=_iceberg("double"),
        examples=(_C(name="A", type="FLOAT"),),
    ),
    TypeRule(
        snowflake="VARCHAR(n), STRING, TEXT, CHAR(n)",
        iceberg="string",
        values="Exact.",
        matches=lambda c, o: c.type == "TEXT",
        target=_iceberg("string"),
        examples=(_C(name="A", type="TEXT", length=20), _C(name="B", type="TEXT", length=16777216)),
    ),
    TypeRule(
        snowflake="BINARY(n), VARBINARY",
        iceberg="binary",
        values="Exact.",
        matches=lambda c, o: c.type == "BINARY",
        target=_iceberg("binary"),
        examples=(_C(name="A", type="BINARY"),),
    ),
    TypeRule(
        snowflake="BOOLEAN",
        iceberg="boolean",
        values="Exact.",
        matches=lambda c, o: c.type == "BOOLEAN",
        target=_iceberg("boolean"),
        examples=(_C(name="A", type="BOOLEAN"),),
    ),
    TypeRule(
        snowflake="DATE",
        iceberg="date",
        values="Exact.",
        matches=lambda c, o: c.type == "DATE",
        target=_iceberg("date"),
        examples=(_C(name="A", type="DATE"),),
    ),
    TypeRule(
        snowflake="TIME(0–6)",
        iceberg="time",
        values="Exact (Iceberg time is microseconds).",
        matches=lambda c, o: c.type == "TIME" and (c.scale or 0) <= 6,
        target=_iceberg("time"),
        examples=(_C(name="A", type="TIME", scale=0), _C(name="B", type="TIME", scale=6)),
    ),
    TypeRule(
        snowflake="TIME(7–9)",
        iceberg="time",
        values="Microseconds. A value with non-zero digits below the microsecond fails the run, "
        "unless `timestamp_nanos: truncate` is set (then they are truncated).",
        matches=lambda c, o: c.type == "TIME",
        target=_iceberg("time"),
        examples=(_C(name="A", type="TIME", scale=9),),
    ),
    TypeRule(
        snowflake="TIMESTAMP_NTZ(0–6), DATETIME",
        iceberg="timestamp",
        values="Exact; stays naive (no time zone is invented).",
        matches=lambda c, o: c.type == "TIMESTAMP_NTZ" and (c.scale or 0) <= 6,
        target=_iceberg("timestamp"),
        examples=(_C(name="A", type="TIMESTAMP_NTZ", scale=0), _C(name="B", type="TIMESTAMP_NTZ", scale=6)),
    ),
    TypeRule(
        snowflake="TIMESTAMP_NTZ(7–9)",
        iceberg="timestamp",
        values="Naive, microseconds. Non-zero nanoseconds fail the run unless `timestamp_nanos: truncate`.",
        matches=lambda c, o: c.type == "TIMESTAMP_NTZ",
        target=_iceberg("timestamp"),
        examples=(_C(name="A", type="TIMESTAMP_NTZ", scale=9),),
    ),
    TypeRule(
        snowflake="TIMESTAMP_LTZ(0–6), TIMESTAMP_TZ(0–6)",
        iceberg="timestamptz",
        values="The same instant in UTC. TIMESTAMP_TZ's original offset is not kept (Iceberg stores instants).",
        matches=lambda c, o: c.type in ("TIMESTAMP_LTZ", "TIMESTAMP_TZ") and (c.scale or 0) <= 6,
        target=_iceberg("timestamptz"),
        examples=(_C(name="A", type="TIMESTAMP_LTZ", scale=3), _C(name="B", type="TIMESTAMP_TZ", scale=6)),
    ),
    TypeRule(
        snowflake="TIMESTAMP_LTZ(7–9), TIMESTAMP_TZ(7–9)",
        iceberg="timestamptz",
        values="UTC instant, microseconds. Non-zero nanoseconds fail the run unless `timestamp_nanos: truncate`.",
        matches=lambda c, o: c.type in ("TIMESTAMP_LTZ", "TIMESTAMP_TZ"),
        target=_iceberg("timestamptz"),
        examples=(_C(name="A", type="TIMESTAMP_LTZ", scale=9), _C(name="B", type="TIMESTAMP_TZ", scale=9)),
    ),
    TypeRule(
        snowflake="VARIANT, OBJECT, ARRAY (semi-structured)",
        iceberg="string",
        values="JSON text exactly as Snowflake serialises it.",
        matches=lambda c, o: c.type in ("VARIANT", "OBJECT", "ARRAY"),
        target=_iceberg("string"),
        examples=(_C(name="A", type="VARIANT"), _C(name="B", type="OBJECT"), _C(name="C", type="ARRAY")),
    ),
    TypeRule(
        snowflake="GEOGRAPHY, GEOMETRY",
        iceberg="string",
        values="GeoJSON text (session GEOGRAPHY/GEOMETRY_OUTPUT_FORMAT pinned), or WKT with `geo_format: wkt`.",
        matches=lambda c, o: c.type in ("GEOGRAPHY", "GEOMETRY"),
        target=_iceberg("string"),
        examples=(_C(name="A", type="GEOGRAPHY"), _C(name="B", type="GEOMETRY")),
    ),
    TypeRule(
        snowflake="VECTOR(INT, n)",
        iceberg="list<int>",
        values="Exact (32-bit elements).",
        matches=lambda c, o: c.type == "VECTOR" and c.vector_element == "INT",
        target=_iceberg("list<int>"),
        examples=(_C(name="A", type="VECTOR", vector_element="INT", vector_dimension=3),),
    ),
    TypeRule(
        snowflake="VECTOR(FLOAT, n)",
        iceberg="list<float>",
        values="Exact (32-bit elements).",
        matches=lambda c, o: c.type == "VECTOR" and c.vector_element == "FLOAT",
        target=_iceberg("list<float>"),
        examples=(_C(name="A", type="VECTOR", vector_element="FLOAT", vector_dimension=256),),
    ),
)


# Types we refuse, with the reason shown in the error and the docs.
UNSUPPORTED: dict[str, str] = {
    "MAP": "structured MAP has no lossless mapping yet; select it as VARIANT (col::VARIANT) in a custom query",
    "STRUCTURED_OBJECT": "structured OBJECT(...) — select it as VARIANT in a custom query",
    "STRUCTURED_ARRAY": "structured ARRAY(...) — select it as VARIANT in a custom query",
    "STRUCTURED_MAP": "structured MAP(...) — select it as VARIANT in a custom query",
    "FILE": "FILE values are stage references, not data",
    "INTERVAL_YEAR_MONTH": "Iceberg has no interval type",
    "INTERVAL_DAY_TIME": "Iceberg has no interval type",
}


def rule_for(col: SnowflakeColumn, options: MappingOptions | None = None) -> TypeRule:
    """The first rule of ``TYPE_RULES`` that takes ``col``; an unsupported type is refused with the reason."""
    options = options or MappingOptions()
    for rule in TYPE_RULES:
        if rule.matches(col, options):
            return rule
    reason = UNSUPPORTED.get(col.type, "no mapping is defined for it")
    raise UnsupportedTypeError(f"column {col.name!r}: Snowflake type {col.sql_type} is not supported: {reason}")


def iceberg_name(snowflake_name: str) -> str:
    """Iceberg column name for a Snowflake column: lower-cased."""
    return snowflake_name.lower()


@dataclass(frozen=True, kw_only=True)
class MappedColumn:
    """A source column with its Iceberg name and type, and the rule that chose them."""

    source: SnowflakeColumn
    name: str  # Iceberg column name
    iceberg_type: IcebergType
    rule: TypeRule

    @property
    def arrow_type(self) -> pa.DataType:
        return arrow_type_for(self.iceberg_type)


def map_columns(columns: Sequence[SnowflakeColumn], options: MappingOptions | None = None) -> list[MappedColumn]:
    """Map every source column, refusing two that would get the same Iceberg name."""
    options = options or MappingOptions()
    out: list[MappedColumn] = []
    seen: dict[str, str] = {}
    for col in columns:
        rule = rule_for(col, options)
        name = iceberg_name(col.name)
        if name in seen:
            raise TypeMappingError(
                f"columns {seen[name]!r} and {col.name!r} both map to Iceberg column {name!r}; "
                "rename one in a custom query"
            )
        seen[name] = col.name
        out.append(MappedColumn(source=col, name=name, iceberg_type=rule.target(col), rule=rule))
    return out


def arrow_type_for(t: IcebergType) -> pa.DataType:
    """The Arrow type batches are cast to for an Iceberg type (large strings and binaries, microseconds)."""
    import pyarrow as pa
    from pyiceberg import types as it

    if isinstance(t, it.DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, it.ListType):
        return pa.list_(arrow_type_for(t.element_type))
    simple: dict[type, pa.DataType] = {
        it.IntegerType: pa.int32(),
        it.LongType: pa.int64(),
        it.FloatType: pa.float32(),
        it.DoubleType: pa.float64(),
        it.StringType: pa.large_string(),
        it.BinaryType: pa.large_binary(),
        it.BooleanType: pa.bool_(),
        it.DateType: pa.date32(),
        it.TimeType: pa.time64("us"),
        it.TimestampType: pa.timestamp("us"),
        it.TimestamptzType: pa.timestamp("us", tz="UTC"),
    }
    for cls, at in simple.items():
        if type(t) is cls:
            return at
    raise UnsupportedTypeError(f"no Arrow type for Iceberg type {t}")
