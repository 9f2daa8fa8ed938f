"""SnowflakeColumn: built from the connector's result metadata or parsed from DESCRIBE TABLE text."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from snowberg.mapping.columns import SnowflakeColumn, UnsupportedTypeError


@dataclass
class Metadata:
    """The fields of the connector's ``ResultMetadata`` that ``from_metadata`` reads."""

    name: str
    type_code: int
    precision: int | None = None
    scale: int | None = None
    internal_size: int | None = None
    is_nullable: bool | None = True
    vector_dimension: int | None = None
    fields: list[Any] = field(default_factory=list)


def test_an_unknown_type_code_is_refused_naming_the_column() -> None:
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
def test_describe_text_parses_to_the_canonical_type_precision_and_scale(
    text: str, expected: tuple[object, ...]
) -> None:
    c = SnowflakeColumn.parse("C", text)
    assert (c.type, c.precision, c.scale) == expected


def test_vector_text_gives_element_type_and_dimension() -> None:
    c = SnowflakeColumn.parse("V", "VECTOR(FLOAT, 256)")
    assert (c.vector_element, c.vector_dimension) == ("FLOAT", 256)


def test_metadata_without_precision_means_number_38_0_and_timestamps_default_to_nanoseconds() -> None:
    n = SnowflakeColumn.from_metadata(Metadata(name="N", type_code=0))
    ts = SnowflakeColumn.from_metadata(Metadata(name="TS", type_code=8))
    assert (n.type, n.precision, n.scale, n.sql_type) == ("NUMBER", 38, 0, "NUMBER(38,0)")
    assert (ts.type, ts.scale, ts.sql_type) == ("TIMESTAMP_NTZ", 9, "TIMESTAMP_NTZ(9)")


def test_metadata_keeps_text_length_nullability_and_the_vector_element() -> None:
    text = SnowflakeColumn.from_metadata(Metadata(name="S", type_code=2, internal_size=16, is_nullable=False))
    assert (text.type, text.length, text.nullable, text.sql_type) == ("TEXT", 16, False, "VARCHAR(16)")
    unknown_null = SnowflakeColumn.from_metadata(Metadata(name="S", type_code=2, is_nullable=None))
    assert unknown_null.nullable is True
    vec = SnowflakeColumn.from_metadata(
        Metadata(name="V", type_code=16, vector_dimension=3, fields=[Metadata(name="", type_code=1)])
    )
    assert (vec.vector_element, vec.vector_dimension, vec.sql_type) == ("FLOAT", 3, "VECTOR(FLOAT, 3)")
    int_vec = SnowflakeColumn.from_metadata(Metadata(name="V", type_code=16, vector_dimension=2))
    assert int_vec.vector_element == "INT"


def test_the_timestamp_type_code_reports_ltz() -> None:
    assert SnowflakeColumn.from_metadata(Metadata(name="T", type_code=4)).type == "TIMESTAMP_LTZ"


@pytest.mark.parametrize(
    ("text", "length"), [("CHAR", 1), ("CHARACTER", 1), ("CHAR(5)", 5), ("VARCHAR", None), ("BINARY(8)", 8)]
)
def test_char_without_a_length_is_one_character(text: str, length: int | None) -> None:
    assert SnowflakeColumn.parse("C", text).length == length


def test_describe_text_keeps_nullability_and_lowercase_spellings() -> None:
    c = SnowflakeColumn.parse("C", "  double precision ", nullable=False)
    assert (c.type, c.nullable) == ("FLOAT", False)
    assert SnowflakeColumn.parse("C", "timestamp").type == "TIMESTAMP_NTZ"


@pytest.mark.parametrize("text", ["VECTOR(FLOAT)", "NUMBER(10,2", "123"])
def test_unparsable_describe_text_is_refused_naming_column_and_text(text: str) -> None:
    with pytest.raises(UnsupportedTypeError, match=re.escape(f"column 'C': cannot parse Snowflake type '{text}'")):
        SnowflakeColumn.parse("C", text)
