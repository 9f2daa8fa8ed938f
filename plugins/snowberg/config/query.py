"""A custom source query must be exactly one SELECT.

The query is spliced into the extract as ``(<query>) AS snowberg_src``, so a
second statement would run with the load's role, and a trailing line comment
would swallow the closing parenthesis. Telling a second statement from a
``;`` inside a string literal, a quoted identifier, a comment or a ``$$``
string needs a tokenizer; ``sqlparse`` (already installed with Airflow's SQL
provider) is a well-kept one whose lexer knows all four.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from snowberg.core.identifiers import clip

if TYPE_CHECKING:
    from sqlparse.sql import Token


def _meaningless(tok: Token) -> bool:
    from sqlparse import tokens as T

    return tok.is_whitespace or tok.ttype in T.Comment or (tok.ttype is T.Punctuation and tok.value == ";")


@lru_cache(maxsize=4096)
def single_select(text: str) -> str:
    """``text`` as one SELECT (or WITH … SELECT), without trailing ``;``, comments and whitespace.

    Raises ``ValueError`` for a second statement, an unterminated quote or a
    statement that is not a SELECT. Cached by text: a DAG file validates each
    table's config once per operator that takes the source, and tokenizing
    was the larger part of parsing a thousand tables.
    """
    # Imported here: a load task validates its config on every run, and most sources are tables, not queries.
    import sqlparse
    from sqlparse import tokens as T

    statements = []
    for stmt in sqlparse.parse(text):
        tokens = list(stmt.flatten())
        if any(t.ttype is T.Error for t in tokens):
            bad = next(t for t in tokens if t.ttype is T.Error)
            raise ValueError(f"query has an unterminated quote ({bad.value!r}); it must be a single SELECT statement")
        if not all(_meaningless(t) for t in tokens):
            statements.append(tokens)
    if len(statements) > 1:
        second = "".join(t.value for t in statements[1]).strip()
        raise ValueError(f"query must be a single statement; a second one starts at {clip(second, 40)}")
    if not statements:
        raise ValueError("query must be a single SELECT (or WITH … SELECT) statement; it is empty")
    tokens = statements[0]
    first = next(t for t in tokens if not _meaningless(t))
    if first.normalized.upper() not in ("SELECT", "WITH"):
        raise ValueError(f"query must be a single SELECT (or WITH … SELECT) statement, not {clip(first.value, 40)}")
    last = max(i for i, t in enumerate(tokens) if not _meaningless(t))
    start = tokens.index(first)
    return "".join(t.value for t in tokens[start : last + 1])
