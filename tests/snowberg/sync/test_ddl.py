"""Iceberg → Snowflake type mapping: every documented row, and the refusals."""

from __future__ import annotations

from typing import Any

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


# ---------------------------------------------------------------- CREATE ICEBERG TABLE for Snowflake-managed targets


def _lake_schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        DecimalType,
        DoubleType,
        IntegerType,
        ListType,
        LongType,
        MapType,
        NestedField,
        StringType,
        StructType,
        TimestampType,
        TimestamptzType,
    )

    return Schema(
        NestedField(1, "order_id", LongType()),
        NestedField(2, "qty", IntegerType()),
        NestedField(3, "total", DecimalType(12, 2)),
        NestedField(4, "rate", DoubleType()),
        NestedField(5, "channel", StringType()),
        NestedField(6, "placed_at", TimestamptzType()),
        NestedField(7, "updated_at", TimestampType()),
        NestedField(8, "tags", ListType(9, StringType())),
        NestedField(10, "attrs", MapType(11, StringType(), 12, LongType())),
        NestedField(13, "pickup", StructType(NestedField(14, "city", StringType()))),
    )


def test_create_iceberg_table_sql_maps_the_lake_schema_for_a_snowflake_managed_table() -> None:
    from snowberg.core.identifiers import TableName
    from snowberg.sync.ddl import create_iceberg_table_sql

    sql = create_iceberg_table_sql(
        TableName.parse("LAKEHOUSE.SHOP.ORDERS"),
        _lake_schema(),
        external_volume="SNOWBERG_VOLUME",
        base_location="shop/orders/",
    )
    assert sql == (
        'CREATE ICEBERG TABLE IF NOT EXISTS "LAKEHOUSE"."SHOP"."ORDERS" (\n'
        '    "ORDER_ID" long,\n    "QTY" int,\n    "TOTAL" decimal(12,2),\n    "RATE" double,\n'
        '    "CHANNEL" VARCHAR,\n    "PLACED_AT" TIMESTAMP_LTZ(6),\n    "UPDATED_AT" TIMESTAMP_NTZ(6),\n'
        '    "TAGS" ARRAY(VARCHAR),\n    "ATTRS" MAP(VARCHAR, long),\n    "PICKUP" OBJECT("CITY" VARCHAR)\n)\n'
        "  CATALOG = 'SNOWFLAKE'\n  EXTERNAL_VOLUME = 'SNOWBERG_VOLUME'\n  BASE_LOCATION = 'shop/orders/'"
    )


@pytest.mark.parametrize(
    ("volume", "location", "match"),
    [
        ("bad volume", "a/", "external volume"),
        ("V", "a/'; DROP TABLE x; --", "base_location"),
        ("V", "../up", "base_location"),
        # `$` in re.match matches before a trailing newline: the whole text must be checked (fullmatch).
        ("V", "shop/orders\n", "base_location"),
    ],
)
def test_create_iceberg_table_sql_refuses_unsafe_names_before_any_sql(volume: str, location: str, match: str) -> None:
    from snowberg.core.identifiers import TableName
    from snowberg.sync.ddl import create_iceberg_table_sql

    with pytest.raises(ValueError, match=match):
        create_iceberg_table_sql(
            TableName.parse("D.S.T"), _lake_schema(), external_volume=volume, base_location=location
        )


def test_uuid_columns_are_refused_by_name() -> None:
    from pyiceberg.types import UUIDType

    from snowberg.sync.ddl import UnsupportedIcebergTypeError, iceberg_table_type

    with pytest.raises(UnsupportedIcebergTypeError, match="'id'"):
        iceberg_table_type(UUIDType(), "id")


def test_the_emulator_accepts_the_create_iceberg_table_statement(sfdb: Any) -> None:
    """fakesnow takes the statement (it makes a plain table); a real account is the live lane's job."""
    from snowberg.core.identifiers import TableName
    from snowberg.sync.ddl import create_iceberg_table_sql

    sql = create_iceberg_table_sql(
        TableName.parse(f"{sfdb.name}.S.ORDERS_ICEBERG"), _lake_schema(), external_volume="V", base_location="x/"
    )
    sfdb.sql(sql)
    cols = [r[0] for r in sfdb.sql(f"DESCRIBE TABLE {sfdb.name}.S.ORDERS_ICEBERG")]
    assert cols == ["ORDER_ID", "QTY", "TOTAL", "RATE", "CHANNEL", "PLACED_AT", "UPDATED_AT", "TAGS", "ATTRS", "PICKUP"]


def test_a_sync_into_a_missing_snowflake_managed_table_creates_it_then_syncs(
    sfdb: Any, catalog: Any, monkeypatch: Any
) -> None:
    """The operator's creator runs the DDL through the Snowflake hook (on the emulator); the Horizon side is a
    SQL catalog here, where the test registers the table Snowflake would expose — then the sync commits into it."""
    import json

    import pyarrow as pa
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    from snowberg.airflow.operators.lake_to_snowflake import IcebergToSnowflakeIcebergOperator
    from snowberg.core.identifiers import IcebergName
    from snowberg.sync.horizon import sync_iceberg

    conn = {
        "conn_type": "snowflake",
        "login": "fake",
        "password": "snow",
        "extra": {"account": "fakesnow", "host": "127.0.0.1", "port": sfdb.server.port, "protocol": "http"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_SF_DDL", json.dumps(conn))
    catalog.create_namespace("lake")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "note", StringType()))
    source = catalog.create_table("lake.src", schema=schema)
    source.append(pa.table({"id": pa.array([1, 2], pa.int64()), "note": ["a", "b"]}))
    op = IcebergToSnowflakeIcebergOperator(
        task_id="sync",
        source_catalog="lake",
        source_table="lake.src",
        target_catalog="lake",
        target_table="SHOP.ORDERS",
        create_in_snowflake={
            "snowflake_conn_id": "sf_ddl",
            "table": f"{sfdb.name}.S.ORDERS",
            "external_volume": "SNOWBERG_VOLUME",
            "base_location": "shop/orders/",
        },
    )
    seen: list[Any] = []

    def create(lake_schema: Any) -> None:
        op._creator()(lake_schema)  # the DDL, sent to Snowflake (the emulator)
        seen.append(lake_schema)
        catalog.create_namespace_if_not_exists("SHOP")  # what Horizon then exposes
        catalog.create_table(
            "SHOP.ORDERS", schema=Schema(NestedField(1, "ID", LongType()), NestedField(2, "NOTE", StringType()))
        )

    r = sync_iceberg(
        catalog.load_table("lake.src"),
        catalog,
        IcebergName(namespace="SHOP", table="ORDERS"),
        source_label="lake.src",
        run_id="r1",
        create_in_snowflake=create,
    )
    assert r.status == "committed" and r.rows == 2 and len(seen) == 1
    assert [c[0] for c in sfdb.sql(f"DESCRIBE TABLE {sfdb.name}.S.ORDERS")] == ["ID", "NOTE"]
    assert sorted(catalog.load_table("SHOP.ORDERS").scan().to_arrow()["ID"].to_pylist()) == [1, 2]
    # The next run finds the table: no second CREATE.
    source.append(pa.table({"id": pa.array([3], pa.int64()), "note": ["c"]}))
    r2 = sync_iceberg(
        catalog.load_table("lake.src"),
        catalog,
        IcebergName(namespace="SHOP", table="ORDERS"),
        source_label="lake.src",
        run_id="r2",
        create_in_snowflake=create,
    )
    assert r2.rows == 1 and len(seen) == 1
