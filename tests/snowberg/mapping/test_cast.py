"""Casting fetched Arrow batches to the mapped types: exact, or refused naming the column and both types."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg import types as it

from snowberg.mapping.cast import cast_array, cast_batch
from snowberg.mapping.columns import LossyConversionError, SnowflakeColumn
from snowberg.mapping.rules import MappingOptions, map_columns


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


def test_a_decimal_wider_than_its_column_is_refused_naming_it() -> None:
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


def test_time_nanoseconds_are_kept_when_whole_microseconds_and_refused_otherwise() -> None:
    col = map_columns([SnowflakeColumn(name="T", type="TIME", scale=9)])[0]
    exact = pa.array([time(12, 0, 0, 5)], pa.time64("us")).cast(pa.time64("ns"))
    assert cast_array(exact, col, MappingOptions()).to_pylist() == [time(12, 0, 0, 5)]
    lossy = pa.array([43_200_000_000_001], pa.time64("ns"))
    with pytest.raises(LossyConversionError, match="'T'"):
        cast_array(lossy, col, MappingOptions())


def test_other_types_cast_exactly_to_their_mapped_type() -> None:
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


def test_an_all_null_batch_column_becomes_typed_nulls() -> None:
    col = map_columns([SnowflakeColumn(name="P", type="NUMBER", precision=10, scale=2)])[0]
    out = cast_array(pa.nulls(3), col, MappingOptions())
    assert out.type == pa.decimal128(10, 2) and out.to_pylist() == [None, None, None]


def test_a_chunked_column_is_cast_as_one_array() -> None:
    col = map_columns([SnowflakeColumn(name="N", type="NUMBER", precision=5, scale=0)])[0]
    out = cast_array(pa.chunked_array([[1, 2], [3]], pa.int8()), col, MappingOptions())
    assert isinstance(out, pa.Array) and out.type == pa.int64() and out.to_pylist() == [1, 2, 3]


@pytest.mark.parametrize(
    ("column", "arr", "words"),
    [
        (
            SnowflakeColumn(name="D", type="DATE"),
            pa.array(["2026-01-02"]),
            r"'D'.*DATE.*date.*cannot convert Arrow string",
        ),
        (
            SnowflakeColumn(name="N", type="NUMBER", precision=10, scale=0),
            pa.array(["7"]),
            r"'N'.*NUMBER\(10,0\).*long.*cannot convert Arrow string",
        ),
        (
            SnowflakeColumn(name="TS", type="TIMESTAMP_NTZ", scale=6),
            pa.array([date(2026, 1, 2)]),
            r"'TS'.*TIMESTAMP_NTZ\(6\).*cannot convert Arrow date32",
        ),
        (SnowflakeColumn(name="T", type="TIME", scale=6), pa.array([1]), r"'T'.*TIME\(6\).*cannot convert Arrow int64"),
    ],
)
def test_a_batch_of_the_wrong_kind_is_refused_naming_column_and_types(
    column: SnowflakeColumn, arr: pa.Array, words: str
) -> None:
    with pytest.raises(LossyConversionError, match=words):
        cast_array(arr, map_columns([column])[0], MappingOptions())


def test_cast_batch_matches_source_names_and_fills_columns_the_source_lacks_with_nulls() -> None:
    cols = map_columns(
        [SnowflakeColumn(name="ID", type="NUMBER", precision=10, scale=0), SnowflakeColumn(name="NOTE", type="TEXT")]
    )
    schema = pa.schema([("note", pa.large_string()), ("id", pa.int64()), ("added_later", pa.float64())])
    batch = pa.record_batch({"ID": pa.array([1, 2], pa.int16()), "NOTE": pa.array(["a", None])})
    out = cast_batch(batch, cols, schema, MappingOptions())
    assert out.schema == schema
    assert out.to_pydict() == {"note": ["a", None], "id": [1, 2], "added_later": [None, None]}


def test_cast_batch_refuses_a_lossy_column_and_names_it() -> None:
    cols = map_columns([SnowflakeColumn(name="PRICE", type="NUMBER", precision=4, scale=2)])
    schema = pa.schema([("price", pa.decimal128(4, 2))])
    batch = pa.record_batch({"PRICE": pa.array([Decimal("123.45")], pa.decimal128(10, 2))})
    with pytest.raises(LossyConversionError, match=r"'PRICE'.*NUMBER\(4,2\).*decimal\(4, 2\)"):
        cast_batch(batch, cols, schema, MappingOptions())
