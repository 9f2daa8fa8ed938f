"""The columns a load reads: ``columns.exclude`` left out and ``columns.hash`` hashed, inside Snowflake's SELECT.

Every statement that reads the source (the plan, the extract, the slices'
quantiles, the volume check, ``validate --connect``) reads it through
``SourceQuery.from_clause``; with a ``columns`` section that is a subquery

    (SELECT * EXCLUDE ("SSN") REPLACE (SHA2(TO_VARCHAR("EMAIL") || $SNOWBERG_HASH_SALT, 256) AS "EMAIL")
     FROM "DB"."S"."CUSTOMERS") AS snowberg_src

(Snowflake's ``EXCLUDE`` and ``REPLACE`` of ``SELECT *``,
https://docs.snowflake.com/en/sql-reference/sql/select), so an excluded
column never reaches the result, a hashed one reaches it only as 64 hex
characters, and the volume check compares the same hashes the lake holds.
NULL stays NULL (``||`` with NULL is NULL).

The salt is a session variable, set once per connection (``set_salt``,
a bound value) before the first query, so the SQL of every statement stays
free of it. Snowflake session variables hold at most 256 bytes
(https://docs.snowflake.com/en/sql-reference/session-variables). The
connector binds ``pyformat`` values into the statement's text on the client,
so the ``SET`` statement's text in Snowflake's query history holds the salt:
who may read the loading role's query history may read the salt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from snowberg.config.table_config import ColumnSettings
from snowberg.core.identifiers import quote_identifier

# The session variable holding the salt (Snowflake reads ``$SNOWBERG_HASH_SALT``).
SALT_VARIABLE = "SNOWBERG_HASH_SALT"
SALT_MAX_BYTES = 256


class HashSaltError(ValueError):
    """The salt of ``columns.hash`` is missing or unusable; the message names the Airflow Variable."""


# The hashed column's type as a staging table stores it (SHA2(…, 256) gives 64 hex characters).
HASH_LENGTH = 64


def hash_sql(column: str, qualifier: str = "") -> str:
    """The SQL that replaces ``column``: SHA-256 of its text and the salt, as 64 lower-case hex characters.

    ``qualifier``: a table alias with its dot (``"s."``) when the column must be qualified.
    """
    return f"SHA2(TO_VARCHAR({qualifier}{quote_identifier(column, 'column')}) || ${SALT_VARIABLE}, 256)"


def stored_names(columns: Iterable[str]) -> set[str]:
    """The config's column names as Snowflake stores them (the rule of ``quote_identifier``)."""
    return {quote_identifier(c, "column")[1:-1] for c in columns}


def select_list(names: Sequence[str], columns: ColumnSettings, qualifier: str = "") -> list[str]:
    """The select list for stored column ``names``: excluded ones left out, hashed ones hashed (under their name).

    For statements that name their columns (the stream's consume, the CHANGES read) rather than ``SELECT *``.
    """
    excluded, hashed = stored_names(columns.exclude), stored_names(columns.hash)
    out = []
    for n in names:
        if n in excluded:
            continue
        col = f"{qualifier}{quote_identifier(n, 'column')}"
        out.append(f"{hash_sql(n, qualifier)} AS {quote_identifier(n, 'column')}" if n in hashed else col)
    return out


def projected(base: str, columns: ColumnSettings) -> str:
    """``base`` (a quoted table, or an aliased subquery) as the load reads it: a subquery aliased ``snowberg_src``.

    Unchanged (``base`` itself) without excluded or hashed columns.
    """
    if not columns.exclude and not columns.hash:
        return base
    select = "SELECT *"
    if columns.exclude:
        select += f" EXCLUDE ({', '.join(quote_identifier(c, 'column') for c in columns.exclude)})"
    if columns.hash:
        replaced = [f"{hash_sql(c)} AS {quote_identifier(c, 'column')}" for c in columns.hash]
        select += f" REPLACE ({', '.join(replaced)})"
    return f"({select} FROM {base}) AS snowberg_src"


def check_salt(salt: str | None, variable: str) -> str:
    """The salt, or ``HashSaltError`` naming the Airflow Variable that should hold it."""
    if not salt:
        raise HashSaltError(
            f"columns.hash needs a salt: the Airflow Variable {variable!r} is missing or empty. Set it to a long "
            f"random secret (at most {SALT_MAX_BYTES} bytes), e.g. `airflow variables set {variable} <secret>`, or "
            "name another Variable with columns.hash_salt. Changing it later changes every hash: reload the table."
        )
    if len(salt.encode()) > SALT_MAX_BYTES:
        raise HashSaltError(
            f"the salt in Airflow Variable {variable!r} is longer than Snowflake's {SALT_MAX_BYTES}-byte limit "
            "of a session variable"
        )
    return salt


def set_salt(conn: Any, salt: str) -> None:
    """Set the session's salt (bound, never in the SQL text snowberg builds); before any query of the source."""
    cur = conn.cursor()
    try:
        cur.execute(f"SET {SALT_VARIABLE} = %(salt)s", {"salt": salt})
    finally:
        cur.close()
