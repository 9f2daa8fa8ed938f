"""The shared config fields: each refuses a bad value with the words the config models have always used."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from snowberg.config.fields import (
    ColumnNames,
    ConnectionId,
    ConnectionRef,
    ExternalVolumeName,
    IcebergTableRef,
    SnowflakeTableRef,
    identifier,
)

IDENT_RULE = "expected letters, digits, '_' or '$', starting with a letter or '_'"
REF_RULE = "expected letters, digits, '_', '.' or '-'"


def refusal(field_type: Any, value: object) -> str:
    """The one error message validating ``value`` as ``field_type`` gives."""
    with pytest.raises(ValidationError) as raised:
        TypeAdapter(field_type).validate_python(value)
    (error,) = raised.value.errors()
    return str(error["msg"])


@pytest.mark.parametrize(
    ("field_type", "bad", "message"),
    [
        (SnowflakeTableRef, "a.b", "invalid table name 'a.b': expected database.schema.table"),
        (SnowflakeTableRef, "db.sch.t;drop", f"invalid table 't;drop': {IDENT_RULE}"),
        (IcebergTableRef, "x;y", "invalid Iceberg table 'x;y': expected namespace.table"),
        (ConnectionRef, "has space", f"invalid connection id or catalog name 'has space': {REF_RULE}"),
        (ConnectionId, "x;y", f"invalid connection id 'x;y': {REF_RULE}"),
        (ExternalVolumeName, "a.b", f"invalid external volume 'a.b': {IDENT_RULE}"),
        (ColumnNames, ["ID", "ns.t-x", "x;"], f"invalid column 'ns.t-x': {IDENT_RULE}"),
        (Annotated[str, identifier("cursor column")], "1abc", f"invalid cursor column '1abc': {IDENT_RULE}"),
    ],
)
def test_each_field_refuses_a_bad_value_in_the_words_the_models_used(
    field_type: Any, bad: object, message: str
) -> None:
    assert refusal(field_type, bad) == f"Value error, {message}"


@pytest.mark.parametrize(
    ("field_type", "good"),
    [
        (SnowflakeTableRef, "analytics.public.orders"),
        (IcebergTableRef, "lake_ns.orders"),
        (ConnectionRef, "snowflake-prod.eu_1"),
        (ConnectionId, "smtp_default"),
        (ExternalVolumeName, "LAKE_VOL$1"),
        (ColumnNames, ["id", "UPDATED_AT"]),
    ],
)
def test_a_good_value_is_kept_as_written(field_type: Any, good: object) -> None:
    assert TypeAdapter(field_type).validate_python(good) == good


class Example(BaseModel):
    table: SnowflakeTableRef | None = None
    primary_key: ColumnNames = []


def test_an_optional_field_takes_none_and_a_list_error_names_the_field_not_an_index() -> None:
    assert Example(table=None).table is None
    with pytest.raises(ValidationError) as raised:
        Example(primary_key=["ok", "not ok"])
    assert [e["loc"] for e in raised.value.errors()] == [("primary_key",)]


def test_the_json_schema_is_that_of_plain_strings() -> None:
    props = Example.model_json_schema()["properties"]
    assert props["table"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert props["primary_key"]["items"] == {"type": "string"} and props["primary_key"]["type"] == "array"
