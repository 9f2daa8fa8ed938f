"""Snowflake and Iceberg identifier validation and quoting.

Identifiers cannot be bind parameters, so every identifier that reaches SQL is
first validated against a strict pattern and then double-quoted. Values never
go through this module: they are always bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Unquoted Snowflake identifiers: letter or underscore, then letters, digits,
# underscores or dollar signs, at most 255 characters. We accept only this
# shape (not arbitrary quoted identifiers) so that nothing typed into a config
# file or a trigger form can smuggle SQL through an identifier. Every pattern
# here is applied with ``fullmatch``: ``$`` also matches before a final
# newline, and a YAML ``|`` block ends each value with one.
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,254}", re.ASCII)
_ICEBERG_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}", re.ASCII)
# Airflow connection ids and pyiceberg catalog names.
_REF = re.compile(r"[A-Za-z0-9_.\-]{1,250}", re.ASCII)
CLIP_CHARS = 80


def clip(value: object, limit: int = CLIP_CHARS) -> str:
    """``repr(value)`` cut to about ``limit`` characters, for error messages.

    A config value or a source column name can be kilobytes long; an error
    that echoes it whole buries the message (and fills the task log).
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, str | bytes | list | tuple | dict) else ""
    return text[:limit] + "…" + size


class IdentifierError(ValueError):
    """An identifier failed validation."""


def validate_identifier(name: str, what: str = "identifier") -> str:
    """Return ``name`` if it is a safe Snowflake identifier, else raise."""
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        raise IdentifierError(
            f"invalid {what} {clip(name)}: expected letters, digits, '_' or '$', starting with a letter or '_'"
        )
    return name


def validate_ref(name: str, what: str = "connection id") -> str:
    """Return ``name`` if it is a valid Airflow connection id or catalog name, else raise."""
    if not isinstance(name, str) or not _REF.fullmatch(name):
        raise IdentifierError(f"invalid {what} {clip(name)}: expected letters, digits, '_', '.' or '-'")
    return name


def quote_identifier(name: str, what: str = "identifier") -> str:
    """Validate and double-quote one identifier.

    Unquoted Snowflake identifiers are stored upper-case, so a config that says
    ``orders`` means the object ``ORDERS``; we upper-case names that are all
    lower-case to keep that meaning while still quoting (quoting keeps mixed
    case names exact).
    """
    validate_identifier(name, what)
    if name == name.lower():
        name = name.upper()
    return f'"{name}"'


def validate_iceberg_identifier(name: str, what: str = "identifier") -> str:
    """Return ``name`` if it is a safe Iceberg namespace or table name, else raise (unlike Snowflake's, no ``$``)."""
    if not isinstance(name, str) or not _ICEBERG_IDENT.fullmatch(name):
        raise IdentifierError(
            f"invalid {what} {clip(name)}: expected letters, digits or '_', starting with a letter or '_'"
        )
    return name


@dataclass(frozen=True, kw_only=True)
class TableName:
    """A fully qualified Snowflake table name ``database.schema.table``."""

    database: str
    schema: str
    table: str

    @classmethod
    def parse(cls, text: str) -> TableName:
        """Split and validate ``database.schema.table``; every part must be a plain identifier (no quoting)."""
        parts = text.split(".") if isinstance(text, str) else []
        if len(parts) != 3:
            raise IdentifierError(f"invalid table name {clip(text)}: expected database.schema.table")
        for part, what in zip(parts, ("database", "schema", "table"), strict=True):
            validate_identifier(part, what)
        return cls(database=parts[0], schema=parts[1], table=parts[2])

    def quoted(self) -> str:
        """The name as SQL: each part validated and double-quoted (see ``quote_identifier``)."""
        return ".".join(quote_identifier(p) for p in (self.database, self.schema, self.table))

    def __str__(self) -> str:
        return f"{self.database}.{self.schema}.{self.table}"


@dataclass(frozen=True, kw_only=True)
class IcebergName:
    """An Iceberg ``namespace.table`` identifier."""

    namespace: str
    table: str

    @classmethod
    def parse(cls, text: str) -> IcebergName:
        """Split and validate ``namespace.table``."""
        parts = text.split(".") if isinstance(text, str) else []
        if len(parts) != 2:
            raise IdentifierError(f"invalid Iceberg table {clip(text)}: expected namespace.table")
        for part, what in zip(parts, ("namespace", "table"), strict=True):
            validate_iceberg_identifier(part, what)
        return cls(namespace=parts[0], table=parts[1])

    def variable_key(self, what: str) -> str:
        """The Airflow Variable holding ``what`` of this table (``snowberg__<namespace>__<table>__<what>``).

        One naming rule for every record snowberg keeps beside a table (the watermark mirror, the stream
        batch, the volume check's verified record, the freshness proof), so they sort together in the UI.
        """
        return f"snowberg__{self.namespace}__{self.table}__{what}"

    def __str__(self) -> str:
        return f"{self.namespace}.{self.table}"
