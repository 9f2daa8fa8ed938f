"""The checked string fields config models share: table names, connection ids and identifiers.

A table config, a stream setting, an alert setting and a sync config name the same kinds of
things; typing a field ``SnowflakeTableRef`` or ``ConnectionRef`` makes them refuse the same
mistakes with the same words, and keeps the check in one place. Each type is ``str`` (or
``list[str]``) to pydantic's JSON schema, which the UI and the docs derive from, plus an
``AfterValidator`` running the checks of ``snowberg.core.identifiers``; the value is kept as written.

For an identifier whose error should name its role (``cursor column``, ``lineage column``), annotate
the field with ``identifier(what)``: ``column: Annotated[str, identifier("cursor column")]``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from snowberg.core.identifiers import IcebergName, TableName, validate_identifier, validate_ref


def _snowflake_table(value: str) -> str:
    TableName.parse(value)
    return value


def _iceberg_table(value: str) -> str:
    IcebergName.parse(value)
    return value


def identifier(what: str) -> AfterValidator:
    """A validator refusing anything but a plain Snowflake identifier; the error calls the value ``what``."""

    def check(value: str) -> str:
        return validate_identifier(value, what)

    return AfterValidator(check)


def identifiers(what: str) -> AfterValidator:
    """``identifier`` for every string of a list, failing on the first bad one (the error names the field)."""

    def check(values: list[str]) -> list[str]:
        for value in values:
            validate_identifier(value, what)
        return values

    return AfterValidator(check)


def reference(what: str) -> AfterValidator:
    """A validator for an Airflow connection id or pyiceberg catalog name; the error calls the value ``what``."""

    def check(value: str) -> str:
        return validate_ref(value, what)

    return AfterValidator(check)


SnowflakeTableRef = Annotated[str, AfterValidator(_snowflake_table)]
"""A Snowflake table (or stream) ``database.schema.table``, each part a plain identifier."""

IcebergTableRef = Annotated[str, AfterValidator(_iceberg_table)]
"""An Iceberg table ``namespace.table``."""

ConnectionRef = Annotated[str, reference("connection id or catalog name")]
"""A field that may name an Airflow connection or a pyiceberg catalog (``snowflake_conn_id``, ``catalog``)."""

ConnectionId = Annotated[str, reference("connection id")]
"""An Airflow connection id (the alert channels' connections)."""

PoolName = Annotated[str, reference("pool name")]
"""An Airflow pool (letters, digits, ``_``, ``.``, ``-``)."""

ColumnNames = Annotated[list[str], identifiers("column")]
"""Source column names such as ``primary_key``."""

ExternalVolumeName = Annotated[str, identifier("external volume")]
"""A Snowflake external volume."""
