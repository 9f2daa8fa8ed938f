"""Snowflake's description of a result column, and the mapping errors.

The target type of every column comes from Snowflake's own metadata for the
result (``cursor.description``: type code, precision, scale, vector
dimension) or from ``DESCRIBE TABLE`` text -- never from the Arrow width a
batch happens to carry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

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
    """A Snowflake type snowberg has no lossless Iceberg mapping for."""

    pass


class LossyConversionError(TypeMappingError):
    """A value that would change on its way to the lake; the message names the column and the types."""

    pass


class SchemaEvolutionError(TypeMappingError):
    """The source and the lake table's schema (or partitioning, or key) do not fit together."""

    pass


@dataclass(frozen=True, kw_only=True)
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
                return cls(name=name, type=t, precision=38, scale=0, nullable=nullable)
            p = int(args[0]) if args else 38
            s = int(args[1]) if len(args) > 1 else 0
            return cls(name=name, type=t, precision=p, scale=s, nullable=nullable)
        if t in ("TIME", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIMESTAMP_TZ"):
            return cls(name=name, type=t, scale=int(args[0]) if args else 9, nullable=nullable)
        if t in ("TEXT", "BINARY"):
            length = int(args[0]) if args else None
            if base in ("CHAR", "CHARACTER", "NCHAR") and not args:
                length = 1
            return cls(name=name, type=t, length=length, nullable=nullable)
        if t == "VECTOR":
            if len(args) != 2:
                raise UnsupportedTypeError(f"column {name!r}: cannot parse Snowflake type {text!r}")
            return cls(
                name=name, type=t, vector_element=args[0].upper(), vector_dimension=int(args[1]), nullable=nullable
            )
        if args and t in ("OBJECT", "ARRAY", "MAP"):
            # Structured types (OBJECT(a INT), ARRAY(INT), MAP(...)) are not semi-structured VARIANTs.
            return cls(name=name, type=f"STRUCTURED_{t}", nullable=nullable)
        return cls(name=name, type=t, nullable=nullable)
