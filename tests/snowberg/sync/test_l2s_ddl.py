"""Iceberg → Snowflake type mapping: every documented row, and the refusals."""

from __future__ import annotations

import pytest
from pyiceberg import types as it
from pyiceberg.schema import Schema

from snowberg.core.identifiers import IdentifierError, TableName
from snowberg.sync.ddl import (
    TYPE_TABLE,
    UnsupportedIcebergTypeError,
    create_table_sql,
    render_markdown,
    snowflake_type,
    target_columns,
)

EXAMPLES: dict[str, tuple[it.IcebergType, str]] = {
    "boolean": (it.BooleanType(), "BOOLEAN"),
    "int": (it.IntegerType(), "NUMBER(10,0)"),
    "long": (it.LongType(), "NUMBER(19,0)"),
    "float": (it.FloatType(), "FLOAT"),
    "double": (it.DoubleType(), "FLOAT"),
    "decimal(p,s)": (it.DecimalType(12, 3), "NUMBER(12,3)"),
    "date": (it.DateType(), "DATE"),
    "time": (it.TimeType(), "TIME(6)"),
    "timestamp": (it.TimestampType(), "TIMESTAMP_NTZ(6)"),
    "timestamptz": (it.TimestamptzType(), "TIMESTAMP_TZ(6)"),
    "string": (it.StringType(), "VARCHAR"),
    "uuid": (it.UUIDType(), "VARCHAR(36)"),
    "binary": (it.BinaryType(), "BINARY"),
    "fixed[n]": (it.FixedType(16), "BINARY(16)"),
    "list<…>": (it.ListType(1, it.StringType()), "ARRAY"),
    "map<…>": (it.MapType(1, it.StringType(), 2, it.LongType()), "OBJECT"),
    "struct<…>": (it.StructType(it.NestedField(1, "a", it.LongType())), "OBJECT"),
}
NANOS = {"timestamp_ns": "TimestampNanoType", "timestamptz_ns": "TimestamptzNanoType"}


@pytest.mark.parametrize("iceberg,snowflake,_notes", TYPE_TABLE, ids=[r[0] for r in TYPE_TABLE])
def test_every_documented_mapping_holds(iceberg: str, snowflake: str, _notes: str) -> None:
    if iceberg in NANOS:
        cls = getattr(it, NANOS[iceberg], None)
        if cls is None:
            pytest.skip(f"pyiceberg {__import__('pyiceberg').__version__} has no {NANOS[iceberg]}")
        assert snowflake_type(cls()) == snowflake
        return
    t, want = EXAMPLES[iceberg]
    assert snowflake_type(t) == want
    assert want.split("(")[0] == snowflake.split("(")[0]


@pytest.mark.parametrize("t", [it.UnknownType(), it.GeometryType()], ids=["unknown", "geometry"])
def test_types_without_a_mapping_are_refused_naming_the_column(t: it.IcebergType) -> None:
    with pytest.raises(UnsupportedIcebergTypeError, match=f"column 'c': Iceberg type {t} has no Snowflake mapping"):
        snowflake_type(t, "c")


def test_columns_and_ddl_are_validated_and_quoted() -> None:
    schema = Schema(
        it.NestedField(1, "order_id", it.LongType()),
        it.NestedField(2, "Amount", it.DecimalType(10, 2)),
        it.NestedField(3, "tags", it.ListType(4, it.StringType())),
    )
    cols = target_columns(schema)
    assert [(c.name, c.sql_type, c.semi_structured) for c in cols] == [
        ("ORDER_ID", "NUMBER(19,0)", False),
        ("Amount", "NUMBER(10,2)", False),
        ("TAGS", "ARRAY", True),
    ]
    sql = create_table_sql(TableName.parse("db.shop.orders"), cols, "_SNOWBERG_SOURCE_SNAPSHOT_ID")
    assert sql == (
        'CREATE TABLE IF NOT EXISTS "DB"."SHOP"."ORDERS" (\n'
        '    "ORDER_ID" NUMBER(19,0),\n    "Amount" NUMBER(10,2),\n    "TAGS" ARRAY,\n'
        '    "_SNOWBERG_SOURCE_SNAPSHOT_ID" NUMBER(19,0)\n)'
    )
    with pytest.raises(IdentifierError):
        target_columns(Schema(it.NestedField(1, 'x"; drop table t; --', it.LongType())))
    with pytest.raises(UnsupportedIcebergTypeError, match="both become"):
        target_columns(Schema(it.NestedField(1, "a", it.LongType()), it.NestedField(2, "A", it.LongType())))


def test_the_docs_show_the_table_the_code_uses() -> None:
    from pathlib import Path

    md = render_markdown()
    assert all(f"`{i}` | `{s}`" in md for i, s, _ in TYPE_TABLE)
    docs = (Path(__file__).resolve().parents[3] / "docs" / "lake-to-snowflake.md").read_text()
    assert md in docs, "docs/lake-to-snowflake.md: paste snowberg.sync.ddl.render_markdown() into the type table"
