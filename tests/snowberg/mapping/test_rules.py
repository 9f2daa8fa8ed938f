"""The mapping table, row by row, and the lossless casts behind it."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg import types as it

from snowberg.mapping.cast import cast_array
from snowberg.mapping.columns import LossyConversionError, SnowflakeColumn, TypeMappingError, UnsupportedTypeError
from snowberg.mapping.docs import render_markdown
from snowberg.mapping.evolution import can_hold, can_widen
from snowberg.mapping.rules import TYPE_RULES, MappingOptions, map_columns, rule_for

OPTS = MappingOptions(number_as_long=frozenset({"ID"}))

EXPECTED_ICEBERG = {
    "long": it.LongType(),
    "double": it.DoubleType(),
    "string": it.StringType(),
    "binary": it.BinaryType(),
    "boolean": it.BooleanType(),
    "date": it.DateType(),
    "time": it.TimeType(),
    "timestamp": it.TimestampType(),
    "timestamptz": it.TimestamptzType(),
}


@pytest.mark.parametrize(
    ("rule", "col"),
    [(r, c) for r in TYPE_RULES for c in r.examples],
    ids=[f"{r.snowflake}:{c.sql_type}" for r in TYPE_RULES for c in r.examples],
)
def test_every_rule_maps_its_examples(rule: object, col: SnowflakeColumn) -> None:
    assert rule_for(col, OPTS) is rule
    target = rule.target(col)  # type: ignore[attr-defined]
    iceberg = rule.iceberg  # type: ignore[attr-defined]
    if iceberg in EXPECTED_ICEBERG:
        assert target == EXPECTED_ICEBERG[iceberg]
    elif iceberg.startswith("decimal"):
        assert target == it.DecimalType(col.precision or 38, col.scale or 0)
    elif iceberg == "list<int>":
        assert isinstance(target, it.ListType) and target.element_type == it.IntegerType()
    elif iceberg == "list<float>":
        assert isinstance(target, it.ListType) and target.element_type == it.FloatType()
    else:
        pytest.fail(f"rule target {iceberg} not covered by this test")


def test_every_rule_has_an_example() -> None:
    assert all(r.examples for r in TYPE_RULES)


@pytest.mark.parametrize("p", range(1, 39))
@pytest.mark.parametrize("s", [0, 1, 2, 9, 18, 37])
def test_number_every_precision_and_scale(p: int, s: int) -> None:
    if s > p:
        return
    t = rule_for(SnowflakeColumn(name="N", type="NUMBER", precision=p, scale=s)).target(
        SnowflakeColumn(name="N", type="NUMBER", precision=p, scale=s)
    )
    if s == 0 and p <= 18:
        assert t == it.LongType()
    else:
        assert t == it.DecimalType(p, s)


def test_number_38_0_stays_decimal_unless_opted_in() -> None:
    col = SnowflakeColumn(name="ORDER_ID", type="NUMBER", precision=38, scale=0)
    assert map_columns([col])[0].iceberg_type == it.DecimalType(38, 0)
    opted = map_columns([col], MappingOptions(number_as_long=frozenset({"ORDER_ID"})))[0]
    assert opted.iceberg_type == it.LongType()
    # range check: a value beyond 64 bits fails, naming column and types
    big = pa.array([Decimal(2**63)], pa.decimal128(38, 0))
    with pytest.raises(LossyConversionError, match=r"'ORDER_ID'.*NUMBER\(38,0\).*long"):
        cast_array(big, opted, MappingOptions())
    ok = pa.array([Decimal(2**63 - 1), None], pa.decimal128(38, 0))
    assert cast_array(ok, opted, MappingOptions()).to_pylist() == [2**63 - 1, None]


@pytest.mark.parametrize("arrow", [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.decimal128(38, 0)])
def test_number_38_0_any_chunk_width_gives_decimal(arrow: pa.DataType) -> None:
    col = map_columns([SnowflakeColumn(name="ID", type="NUMBER", precision=38, scale=0)])[0]
    out = cast_array(pa.array([1, 2, None]).cast(arrow), col, MappingOptions())
    assert out.type == pa.decimal128(38, 0)
    assert out.to_pylist() == [Decimal(1), Decimal(2), None]


def test_scaled_number_refuses_float_batch() -> None:
    col = map_columns([SnowflakeColumn(name="PRICE", type="NUMBER", precision=10, scale=2)])[0]
    with pytest.raises(LossyConversionError, match=r"'PRICE'.*NUMBER\(10,2\).*decimal\(10, 2\).*float"):
        cast_array(pa.array([1.25]), col, MappingOptions())


def test_decimal_overflow_fails() -> None:
    col = map_columns([SnowflakeColumn(name="P", type="NUMBER", precision=5, scale=2)])[0]
    with pytest.raises(LossyConversionError, match="'P'"):
        cast_array(pa.array([Decimal("12345.67")], pa.decimal128(10, 2)), col, MappingOptions())


NS = pa.array([1_700_000_000_123_456_789], pa.timestamp("ns"))
US = pa.array([1_700_000_000_123_456_000], pa.timestamp("ns"))


def test_nanoseconds_fail_loudly_by_default() -> None:
    col = map_columns([SnowflakeColumn(name="TS", type="TIMESTAMP_NTZ", scale=9)])[0]
    with pytest.raises(LossyConversionError, match=r"'TS'.*TIMESTAMP_NTZ\(9\).*timestamp.*nanoseconds"):
        cast_array(NS, col, MappingOptions())
    # a ns column whose values are whole microseconds is exact
    assert cast_array(US, col, MappingOptions()).to_pylist() == [datetime(2023, 11, 14, 22, 13, 20, 123456)]


def test_nanoseconds_truncate_opt_in() -> None:
    col = map_columns([SnowflakeColumn(name="TS", type="TIMESTAMP_NTZ", scale=9)])[0]
    out = cast_array(NS, col, MappingOptions(timestamp_nanos="truncate"))
    assert out.type == pa.timestamp("us")
    assert out.to_pylist() == [datetime(2023, 11, 14, 22, 13, 20, 123456)]


def test_naive_stays_naive_and_tz_becomes_utc() -> None:
    ntz = map_columns([SnowflakeColumn(name="A", type="TIMESTAMP_NTZ", scale=6)])[0]
    tz = map_columns([SnowflakeColumn(name="B", type="TIMESTAMP_TZ", scale=6)])[0]
    ltz = map_columns([SnowflakeColumn(name="C", type="TIMESTAMP_LTZ", scale=3)])[0]
    assert ntz.iceberg_type == it.TimestampType()
    assert tz.iceberg_type == ltz.iceberg_type == it.TimestamptzType()
    berlin = pa.array([datetime(2026, 1, 1, 12, 0, tzinfo=UTC)], pa.timestamp("ns", tz="Europe/Berlin"))
    out = cast_array(berlin, tz, MappingOptions())
    assert out.type == pa.timestamp("us", tz="UTC")
    assert out.to_pylist()[0] == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    with pytest.raises(LossyConversionError, match="naive"):
        cast_array(berlin, ntz, MappingOptions())


def test_time_nanos() -> None:
    col = map_columns([SnowflakeColumn(name="T", type="TIME", scale=9)])[0]
    exact = pa.array([time(12, 0, 0, 5)], pa.time64("us")).cast(pa.time64("ns"))
    assert cast_array(exact, col, MappingOptions()).to_pylist() == [time(12, 0, 0, 5)]
    lossy = pa.array([43_200_000_000_001], pa.time64("ns"))
    with pytest.raises(LossyConversionError, match="'T'"):
        cast_array(lossy, col, MappingOptions())


def test_other_types_cast_exactly() -> None:
    cases = [
        (SnowflakeColumn(name="F", type="FLOAT"), pa.array([1.5, float("inf"), None]), [1.5, float("inf"), None]),
        (SnowflakeColumn(name="S", type="TEXT", length=10), pa.array(["é", None]), ["é", None]),
        (SnowflakeColumn(name="B", type="BINARY"), pa.array([b"\x00\xff"]), [b"\x00\xff"]),
        (SnowflakeColumn(name="O", type="BOOLEAN"), pa.array([True, None]), [True, None]),
        (SnowflakeColumn(name="D", type="DATE"), pa.array([date(2026, 1, 2)], pa.date64()), [date(2026, 1, 2)]),
        (SnowflakeColumn(name="V", type="VARIANT"), pa.array(['{\n  "a": 1\n}']), ['{\n  "a": 1\n}']),
        (
            SnowflakeColumn(name="G", type="GEOGRAPHY"),
            pa.array(['{"type":"Point","coordinates":[1,2]}']),
            ['{"type":"Point","coordinates":[1,2]}'],
        ),
        (
            SnowflakeColumn(name="VEC", type="VECTOR", vector_element="FLOAT", vector_dimension=2),
            pa.array([[1.5, 2.5]], pa.list_(pa.float32(), 2)),
            [[1.5, 2.5]],
        ),
        (
            SnowflakeColumn(name="VI", type="VECTOR", vector_element="INT", vector_dimension=2),
            pa.array([[1, 2]], pa.list_(pa.int32(), 2)),
            [[1, 2]],
        ),
    ]
    for col, arr, expected in cases:
        mc = map_columns([col])[0]
        out = cast_array(arr, mc, MappingOptions())
        assert out.to_pylist() == expected, col


@pytest.mark.parametrize("t", ["MAP", "FILE", "INTERVAL_DAY_TIME"])
def test_unsupported_types_fail_naming_column(t: str) -> None:
    with pytest.raises(UnsupportedTypeError, match=f"column 'X': Snowflake type {t}"):
        map_columns([SnowflakeColumn(name="X", type=t)])


def test_unknown_type_code_fails() -> None:
    class MD:
        name, type_code, precision, scale, internal_size, is_nullable = "Q", 99, None, None, None, True

    with pytest.raises(UnsupportedTypeError, match="'Q'.*type code 99"):
        SnowflakeColumn.from_metadata(MD())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NUMBER(38,0)", ("NUMBER", 38, 0)),
        ("INT", ("NUMBER", 38, 0)),
        ("NUMBER(10,2)", ("NUMBER", 10, 2)),
        ("VARCHAR(16777216)", ("TEXT", None, None)),
        ("TIMESTAMP_NTZ(9)", ("TIMESTAMP_NTZ", None, 9)),
        ("TIMESTAMP_TZ(3)", ("TIMESTAMP_TZ", None, 3)),
        ("DOUBLE", ("FLOAT", None, None)),
        ("OBJECT(a INT)", ("STRUCTURED_OBJECT", None, None)),
    ],
)
def test_parse_describe_types(text: str, expected: tuple[object, ...]) -> None:
    c = SnowflakeColumn.parse("C", text)
    assert (c.type, c.precision, c.scale) == expected


def test_vector_parse() -> None:
    c = SnowflakeColumn.parse("V", "VECTOR(FLOAT, 256)")
    assert (c.vector_element, c.vector_dimension) == ("FLOAT", 256)


def test_colliding_names_fail() -> None:
    with pytest.raises(TypeMappingError, match="both map to Iceberg column 'a'"):
        map_columns([SnowflakeColumn(name="A", type="FLOAT"), SnowflakeColumn(name="a", type="FLOAT")])


def test_widening_rules() -> None:
    assert can_widen(it.IntegerType(), it.LongType())
    assert can_widen(it.DecimalType(10, 2), it.DecimalType(12, 2))
    assert not can_widen(it.DecimalType(10, 2), it.DecimalType(12, 3))
    assert not can_widen(it.StringType(), it.LongType())
    assert can_hold(it.DecimalType(38, 0), it.LongType())
    assert not can_hold(it.LongType(), it.DecimalType(38, 0))


def test_docs_are_rendered_from_the_table() -> None:
    doc = Path(__file__).resolve().parents[3] / "docs" / "type-mapping.md"
    assert doc.read_text() == render_markdown(), "run `snowberg docs` to regenerate docs/type-mapping.md"
    for r in TYPE_RULES:
        assert f"| {r.snowflake} | {r.iceberg} |" in doc.read_text()
