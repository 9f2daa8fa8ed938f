"""Snowflake → Iceberg type mapping, decided from Snowflake's column metadata.

The target type of every column comes from Snowflake's own metadata for the
result (``cursor.description``: type code, precision, scale, vector
dimension) or from ``DESCRIBE TABLE`` text — never from the Arrow width a
batch happens to carry. Real Snowflake may send one NUMBER(38,0) column as
int8 in one chunk and decimal128 in the next; the mapping does not move.

``TYPE_RULES`` is the single mapping table. ``docs/type-mapping.md`` is
rendered from it (``python -m snowberg.cli docs``), and the table-driven
tests walk every rule. Every batch is cast to the mapped Arrow schema by
``cast_batch``; a value that would lose data raises ``LossyConversionError``
naming the column, its Snowflake type and the target type.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.types import IcebergType

# Snowflake's result type codes (snowflake.connector.constants.FIELD_TYPES
# order). Kept here so mapping does not import the connector.
TYPE_CODES: dict[int, str] = {
    0: "NUMBER",
    1: "FLOAT",
    2: "TEXT",
    3: "DATE",
    4: "TIMESTAMP_LTZ",  # TIMESTAMP: an alias whose meaning follows TIMESTAMP_TYPE_MAPPING; results report LTZ
    5: "VARIANT",
    6: "TIMESTAMP_LTZ",
    7: "TIMESTAMP_TZ",
    8: "TIMESTAMP_NTZ",
    9: "OBJECT",
    10: "ARRAY",
    11: "BINARY",
    12: "TIME",
    13: "BOOLEAN",
    14: "GEOGRAPHY",
    15: "GEOMETRY",
    16: "VECTOR",
    17: "MAP",
    18: "FILE",
    19: "INTERVAL_YEAR_MONTH",
    20: "INTERVAL_DAY_TIME",
}

# DESCRIBE TABLE spellings → canonical names.
_ALIASES = {
    "DECIMAL": "NUMBER",
    "NUMERIC": "NUMBER",
    "FIXED": "NUMBER",
    "INT": "NUMBER",
    "INTEGER": "NUMBER",
    "BIGINT": "NUMBER",
    "SMALLINT": "NUMBER",
    "TINYINT": "NUMBER",
    "BYTEINT": "NUMBER",
    "DOUBLE": "FLOAT",
    "DOUBLE PRECISION": "FLOAT",
    "REAL": "FLOAT",
    "FLOAT4": "FLOAT",
    "FLOAT8": "FLOAT",
    "VARCHAR": "TEXT",
    "STRING": "TEXT",
    "CHAR": "TEXT",
    "CHARACTER": "TEXT",
    "NCHAR": "TEXT",
    "NVARCHAR": "TEXT",
    "NVARCHAR2": "TEXT",
    "CHAR VARYING": "TEXT",
    "NCHAR VARYING": "TEXT",
    "VARBINARY": "BINARY",
    "DATETIME": "TIMESTAMP_NTZ",
    "TIMESTAMP": "TIMESTAMP_NTZ",  # default TIMESTAMP_TYPE_MAPPING
    "TIMESTAMPNTZ": "TIMESTAMP_NTZ",
    "TIMESTAMPLTZ": "TIMESTAMP_LTZ",
    "TIMESTAMPTZ": "TIMESTAMP_TZ",
}
_INTEGER_ALIASES = {"INT", "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "BYTEINT"}


class TypeMappingError(ValueError):
    """A Snowflake column has no lossless Iceberg mapping."""


class UnsupportedTypeError(TypeMappingError):
    pass


class LossyConversionError(TypeMappingError):
    pass


class SchemaEvolutionError(TypeMappingError):
    pass


@dataclass(frozen=True)
class SnowflakeColumn:
    """One column as Snowflake describes it."""

    name: str
    type: str  # canonical: NUMBER, FLOAT, TEXT, BINARY, BOOLEAN, DATE, TIME, TIMESTAMP_*, VARIANT, …
    precision: int | None = None
    scale: int | None = None
    length: int | None = None
    vector_element: str | None = None  # INT or FLOAT
    vector_dimension: int | None = None
    nullable: bool = True

    @property
    def sql_type(self) -> str:
        """The type as Snowflake spells it, for messages and docs."""
        t = self.type
        if t == "NUMBER":
            return f"NUMBER({self.precision},{self.scale})"
        if t in ("TIME", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIMESTAMP_TZ") and self.scale is not None:
            return f"{t}({self.scale})"
        if t == "TEXT" and self.length:
            return f"VARCHAR({self.length})"
        if t == "VECTOR":
            return f"VECTOR({self.vector_element}, {self.vector_dimension})"
        return t

    @classmethod
    def from_metadata(cls, md: Any) -> SnowflakeColumn:
        """Build from a connector ``ResultMetadata``/``ResultMetadataV2``."""
        code = md.type_code
        if code not in TYPE_CODES:
            raise UnsupportedTypeError(f"column {md.name!r}: unknown Snowflake type code {code}")
        t = TYPE_CODES[code]
        precision = md.precision
        scale = md.scale
        element = None
        dim = getattr(md, "vector_dimension", None)
        if t == "VECTOR":
            fields = getattr(md, "fields", None) or []
            element = "FLOAT" if fields and TYPE_CODES.get(fields[0].type_code) == "FLOAT" else "INT"
        if t == "NUMBER":
            precision = 38 if precision is None else precision
            scale = 0 if scale is None else scale
        if t in ("TIME", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIMESTAMP_TZ"):
            scale = 9 if scale is None else scale
        return cls(
            name=md.name,
            type=t,
            precision=precision,
            scale=scale,
            length=md.internal_size if t in ("TEXT", "BINARY") else None,
            vector_element=element,
            vector_dimension=dim,
            nullable=bool(md.is_nullable) if md.is_nullable is not None else True,
        )

    @classmethod
    def parse(cls, name: str, text: str, nullable: bool = True) -> SnowflakeColumn:
        """Parse a DESCRIBE TABLE type such as ``NUMBER(38,0)`` or ``VECTOR(FLOAT, 256)``."""
        m = re.match(r"^\s*([A-Za-z_ ]+?)\s*(?:\((.*)\))?\s*$", text)
        if not m:
            raise UnsupportedTypeError(f"column {name!r}: cannot parse Snowflake type {text!r}")
        base = " ".join(m.group(1).upper().split())
        args = [a.strip() for a in m.group(2).split(",")] if m.group(2) else []
        t = _ALIASES.get(base, base)
        if t == "NUMBER":
            if base in _INTEGER_ALIASES:
                return cls(name, t, 38, 0, nullable=nullable)
            p = int(args[0]) if args else 38
            s = int(args[1]) if len(args) > 1 else 0
            return cls(name, t, p, s, nullable=nullable)
        if t in ("TIME", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIMESTAMP_TZ"):
            return cls(name, t, scale=int(args[0]) if args else 9, nullable=nullable)
        if t in ("TEXT", "BINARY"):
            length = int(args[0]) if args else None
            if base in ("CHAR", "CHARACTER", "NCHAR") and not args:
                length = 1
            return cls(name, t, length=length, nullable=nullable)
        if t == "VECTOR":
            if len(args) != 2:
                raise UnsupportedTypeError(f"column {name!r}: cannot parse Snowflake type {text!r}")
            return cls(name, t, vector_element=args[0].upper(), vector_dimension=int(args[1]), nullable=nullable)
        if args and t in ("OBJECT", "ARRAY", "MAP"):
            # Structured types (OBJECT(a INT), ARRAY(INT), MAP(...)) are not semi-structured VARIANTs.
            return cls(name, f"STRUCTURED_{t}", nullable=nullable)
        return cls(name, t, nullable=nullable)


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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
        "NUMBER(p,0), p ≤ 18",
        "long",
        "Exact: every value of 18 digits fits in a signed 64-bit integer.",
        lambda c, o: c.type == "NUMBER" and c.scale == 0 and (c.precision or 38) <= 18,
        _iceberg("long"),
        (_C("A", "NUMBER", 18, 0), _C("B", "NUMBER", 1, 0)),
    ),
    TypeRule(
        "NUMBER(p,0), p ≥ 19, column listed in `number_as_long`",
        "long",
        "Opt-in. Each value is range-checked; one outside the 64-bit range fails the run.",
        lambda c, o: (
            c.type == "NUMBER" and c.scale == 0 and (c.precision or 38) > 18 and c.name.upper() in o.number_as_long
        ),
        _iceberg("long"),
        (_C("ID", "NUMBER", 38, 0),),
    ),
    TypeRule(
        "NUMBER(p,0), p ≥ 19 (INT, INTEGER, BIGINT are NUMBER(38,0))",
        "decimal(p,0)",
        "Exact. Arrives as int8…int64 or decimal128 per chunk; all are cast to decimal(p,0).",
        lambda c, o: c.type == "NUMBER" and c.scale == 0 and (c.precision or 38) > 18,
        _iceberg("decimal"),
        (_C("A", "NUMBER", 38, 0), _C("B", "NUMBER", 19, 0)),
    ),
    TypeRule(
        "NUMBER(p,s), s > 0",
        "decimal(p,s)",
        "Exact. A batch that arrives as float is refused rather than rounded.",
        lambda c, o: c.type == "NUMBER" and (c.scale or 0) > 0,
        _iceberg("decimal"),
        (_C("A", "NUMBER", 10, 2), _C("B", "NUMBER", 38, 37)),
    ),
    TypeRule(
        "FLOAT, FLOAT4, FLOAT8, DOUBLE, REAL",
        "double",
        "Exact (Snowflake floats are 64-bit), NaN and ±inf kept.",
        lambda c, o: c.type == "FLOAT",
        _iceberg("double"),
        (_C("A", "FLOAT"),),
    ),
    TypeRule(
        "VARCHAR(n), STRING, TEXT, CHAR(n)",
        "string",
        "Exact.",
        lambda c, o: c.type == "TEXT",
        _iceberg("string"),
        (_C("A", "TEXT", length=20), _C("B", "TEXT", length=16777216)),
    ),
    TypeRule(
        "BINARY(n), VARBINARY",
        "binary",
        "Exact.",
        lambda c, o: c.type == "BINARY",
        _iceberg("binary"),
        (_C("A", "BINARY"),),
    ),
    TypeRule(
        "BOOLEAN", "boolean", "Exact.", lambda c, o: c.type == "BOOLEAN", _iceberg("boolean"), (_C("A", "BOOLEAN"),)
    ),
    TypeRule("DATE", "date", "Exact.", lambda c, o: c.type == "DATE", _iceberg("date"), (_C("A", "DATE"),)),
    TypeRule(
        "TIME(0–6)",
        "time",
        "Exact (Iceberg time is microseconds).",
        lambda c, o: c.type == "TIME" and (c.scale or 0) <= 6,
        _iceberg("time"),
        (_C("A", "TIME", scale=0), _C("B", "TIME", scale=6)),
    ),
    TypeRule(
        "TIME(7–9)",
        "time",
        "Microseconds. A value with non-zero digits below the microsecond fails the run, "
        "unless `timestamp_nanos: truncate` is set (then they are truncated).",
        lambda c, o: c.type == "TIME",
        _iceberg("time"),
        (_C("A", "TIME", scale=9),),
    ),
    TypeRule(
        "TIMESTAMP_NTZ(0–6), DATETIME",
        "timestamp",
        "Exact; stays naive (no time zone is invented).",
        lambda c, o: c.type == "TIMESTAMP_NTZ" and (c.scale or 0) <= 6,
        _iceberg("timestamp"),
        (_C("A", "TIMESTAMP_NTZ", scale=0), _C("B", "TIMESTAMP_NTZ", scale=6)),
    ),
    TypeRule(
        "TIMESTAMP_NTZ(7–9)",
        "timestamp",
        "Naive, microseconds. Non-zero nanoseconds fail the run unless `timestamp_nanos: truncate`.",
        lambda c, o: c.type == "TIMESTAMP_NTZ",
        _iceberg("timestamp"),
        (_C("A", "TIMESTAMP_NTZ", scale=9),),
    ),
    TypeRule(
        "TIMESTAMP_LTZ(0–6), TIMESTAMP_TZ(0–6)",
        "timestamptz",
        "The same instant in UTC. TIMESTAMP_TZ's original offset is not kept (Iceberg stores instants).",
        lambda c, o: c.type in ("TIMESTAMP_LTZ", "TIMESTAMP_TZ") and (c.scale or 0) <= 6,
        _iceberg("timestamptz"),
        (_C("A", "TIMESTAMP_LTZ", scale=3), _C("B", "TIMESTAMP_TZ", scale=6)),
    ),
    TypeRule(
        "TIMESTAMP_LTZ(7–9), TIMESTAMP_TZ(7–9)",
        "timestamptz",
        "UTC instant, microseconds. Non-zero nanoseconds fail the run unless `timestamp_nanos: truncate`.",
        lambda c, o: c.type in ("TIMESTAMP_LTZ", "TIMESTAMP_TZ"),
        _iceberg("timestamptz"),
        (_C("A", "TIMESTAMP_LTZ", scale=9), _C("B", "TIMESTAMP_TZ", scale=9)),
    ),
    TypeRule(
        "VARIANT, OBJECT, ARRAY (semi-structured)",
        "string",
        "JSON text exactly as Snowflake serialises it.",
        lambda c, o: c.type in ("VARIANT", "OBJECT", "ARRAY"),
        _iceberg("string"),
        (_C("A", "VARIANT"), _C("B", "OBJECT"), _C("C", "ARRAY")),
    ),
    TypeRule(
        "GEOGRAPHY, GEOMETRY",
        "string",
        "GeoJSON text (session GEOGRAPHY/GEOMETRY_OUTPUT_FORMAT pinned), or WKT with `geo_format: wkt`.",
        lambda c, o: c.type in ("GEOGRAPHY", "GEOMETRY"),
        _iceberg("string"),
        (_C("A", "GEOGRAPHY"), _C("B", "GEOMETRY")),
    ),
    TypeRule(
        "VECTOR(INT, n)",
        "list<int>",
        "Exact (32-bit elements).",
        lambda c, o: c.type == "VECTOR" and c.vector_element == "INT",
        _iceberg("list<int>"),
        (_C("A", "VECTOR", vector_element="INT", vector_dimension=3),),
    ),
    TypeRule(
        "VECTOR(FLOAT, n)",
        "list<float>",
        "Exact (32-bit elements).",
        lambda c, o: c.type == "VECTOR" and c.vector_element == "FLOAT",
        _iceberg("list<float>"),
        (_C("A", "VECTOR", vector_element="FLOAT", vector_dimension=256),),
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
    options = options or MappingOptions()
    for rule in TYPE_RULES:
        if rule.matches(col, options):
            return rule
    reason = UNSUPPORTED.get(col.type, "no mapping is defined for it")
    raise UnsupportedTypeError(f"column {col.name!r}: Snowflake type {col.sql_type} is not supported: {reason}")


def iceberg_name(snowflake_name: str) -> str:
    """Iceberg column name for a Snowflake column: lower-cased."""
    return snowflake_name.lower()


@dataclass(frozen=True)
class MappedColumn:
    source: SnowflakeColumn
    name: str  # Iceberg column name
    iceberg_type: IcebergType
    rule: TypeRule

    @property
    def arrow_type(self) -> pa.DataType:
        return arrow_type_for(self.iceberg_type)


def map_columns(columns: Sequence[SnowflakeColumn], options: MappingOptions | None = None) -> list[MappedColumn]:
    options = options or MappingOptions()
    out: list[MappedColumn] = []
    seen: dict[str, str] = {}
    for col in columns:
        rule = rule_for(col, options)
        name = iceberg_name(col.name)
        if name in seen:
            raise TypeMappingError(
                f"columns {seen[name]!r} and {col.name!r} both map to Iceberg column {name!r}; rename one in a custom query"
            )
        seen[name] = col.name
        out.append(MappedColumn(col, name, rule.target(col), rule))
    return out


def arrow_type_for(t: IcebergType) -> pa.DataType:
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


# ---------------------------------------------------------------------------
# Casting batches


def _lossy(col: MappedColumn, detail: str) -> LossyConversionError:
    return LossyConversionError(
        f"column {col.source.name!r}: Snowflake {col.source.sql_type} → Iceberg {col.iceberg_type}: {detail}"
    )


def cast_array(
    arr: pa.Array | pa.ChunkedArray, col: MappedColumn, options: MappingOptions, target: pa.DataType | None = None
) -> pa.Array:
    """Cast one column to its mapped Arrow type, refusing any lossy step."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    target = target if target is not None else col.arrow_type
    src = arr.type
    if src.equals(target):
        return arr
    if pa.types.is_null(src):
        return pa.nulls(len(arr), type=target)

    if pa.types.is_timestamp(target) or pa.types.is_time(target):
        return _cast_temporal(arr, col, options, target)
    if pa.types.is_decimal(target) or pa.types.is_integer(target):
        if pa.types.is_floating(src):
            raise _lossy(col, f"a batch arrived as {src}; refusing to round floats into {target}")
        if not (pa.types.is_integer(src) or pa.types.is_decimal(src)):
            raise _lossy(col, f"cannot convert Arrow {src}")
    if pa.types.is_date(target) and not pa.types.is_date(src):
        raise _lossy(col, f"cannot convert Arrow {src}")
    if pa.types.is_list(target) and (
        pa.types.is_fixed_size_list(src) or pa.types.is_list(src) or pa.types.is_large_list(src)
    ):
        try:
            return pc.cast(arr, target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise _lossy(col, str(exc)) from None
    try:
        return pc.cast(arr, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _lossy(col, f"{exc}") from None


def _cast_temporal(arr: pa.Array, col: MappedColumn, options: MappingOptions, target: pa.DataType) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    src = arr.type
    if pa.types.is_timestamp(target):
        if not pa.types.is_timestamp(src):
            raise _lossy(col, f"cannot convert Arrow {src}")
        if (src.tz is None) != (target.tz is None):
            raise _lossy(col, f"batch carries {src}, expected {'naive' if target.tz is None else 'UTC'} timestamps")
        unit_ns = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[src.unit]
    else:
        if not pa.types.is_time(src):
            raise _lossy(col, f"cannot convert Arrow {src}")
        unit_ns = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[src.unit]
    if unit_ns == 1:
        # Iceberg (v2) stores microseconds. A safe cast refuses to drop
        # non-zero nanoseconds; we name the first such value.
        us_type = pa.timestamp("us", tz=src.tz) if pa.types.is_timestamp(src) else pa.time64("us")
        truncated = pc.cast(arr, us_type, safe=False)
        lost = pc.not_equal(pc.cast(truncated, src), arr)
        if pc.any(lost).as_py():
            if options.timestamp_nanos != "truncate":
                bad = arr.filter(lost)[0]
                raise _lossy(
                    col,
                    f"value {bad} has non-zero nanoseconds and Iceberg stores microseconds; "
                    "set timestamp_nanos: truncate to accept truncation",
                )
        arr = truncated
        src = us_type
    if pa.types.is_timestamp(target) and target.tz is not None:
        arr = pc.cast(arr, pa.timestamp(src.unit, tz="UTC"))
    try:
        return pc.cast(arr, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _lossy(col, str(exc)) from None


def cast_batch(
    batch: pa.RecordBatch, columns: Sequence[MappedColumn], schema: pa.Schema, options: MappingOptions
) -> pa.RecordBatch:
    """Cast a fetched batch to ``schema`` (the Iceberg table's Arrow schema).

    Columns present in the table but not in the source become nulls; source
    columns are matched by Snowflake name.
    """
    import pyarrow as pa

    by_name = {c.name: c for c in columns}
    arrays = []
    src_names = {n: i for i, n in enumerate(batch.schema.names)}
    for f in schema:
        col = by_name.get(f.name)
        if col is None or col.source.name not in src_names:
            arrays.append(pa.nulls(batch.num_rows, type=f.type))
            continue
        arrays.append(cast_array(batch.column(src_names[col.source.name]), col, options, target=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# ---------------------------------------------------------------------------
# Schema evolution rules


def can_hold(existing: IcebergType, new: IcebergType) -> bool:
    """True if values of ``new`` fit ``existing`` losslessly (write as ``existing``)."""
    from pyiceberg import types as it

    if existing == new:
        return True
    if isinstance(existing, it.LongType) and isinstance(new, it.IntegerType):
        return True
    if isinstance(existing, it.DoubleType) and isinstance(new, it.FloatType):
        return True
    if isinstance(existing, it.DecimalType):
        if isinstance(new, it.DecimalType):
            return existing.scale == new.scale and existing.precision >= new.precision
        if isinstance(new, it.LongType):
            return existing.scale == 0 and existing.precision >= 19
    return False


def can_widen(existing: IcebergType, new: IcebergType) -> bool:
    """True if Iceberg allows promoting ``existing`` to ``new`` (spec: type promotion)."""
    from pyiceberg import types as it

    if isinstance(existing, it.IntegerType) and isinstance(new, it.LongType):
        return True
    if isinstance(existing, it.FloatType) and isinstance(new, it.DoubleType):
        return True
    if isinstance(existing, it.DecimalType) and isinstance(new, it.DecimalType):
        return existing.scale == new.scale and new.precision > existing.precision
    return False


def render_markdown() -> str:
    """The mapping table as Markdown (``docs/type-mapping.md``)."""
    lines = [
        "# Snowflake → Iceberg type mapping",
        "",
        "Generated from `snowberg.mapping.types.TYPE_RULES` by `python -m snowberg.cli docs`; do not edit by hand.",
        "The first matching row wins. Types come from Snowflake's column metadata for the query,",
        "never from the Arrow width of a batch.",
        "",
        "| Snowflake | Iceberg | Values |",
        "|---|---|---|",
    ]
    for r in TYPE_RULES:
        lines.append(f"| {r.snowflake} | {r.iceberg} | {r.values} |")
    lines += ["", "Refused (the run fails naming the column):", ""]
    for t, why in UNSUPPORTED.items():
        lines.append(f"- `{t}`: {why}")
    lines += [
        "",
        "Column names are lower-cased (`ORDER_ID` → `order_id`); two columns that collide fail the run.",
        "Schema changes: a new source column is added before the append; a type Iceberg can promote",
        "(int→long, float→double, decimal(p,s)→decimal(P,s) with P>p) is promoted; a narrower source",
        "type is written into the wider existing column; anything else fails naming both types, and",
        "nothing is written.",
        "",
    ]
    return "\n".join(lines)
