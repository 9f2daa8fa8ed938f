"""A custom source query is one SELECT: literals, comments and quoted names may hold ';'."""

from __future__ import annotations

import pytest

from snowberg.config.query import single_select
from snowberg.config.table_config import ConfigError, parse_config


@pytest.mark.parametrize(
    ("query", "cleaned"),
    [
        ("SELECT 'a;b' AS x FROM t", "SELECT 'a;b' AS x FROM t"),
        ("SELECT 'it''s;' AS x FROM t", "SELECT 'it''s;' AS x FROM t"),
        ("SELECT 'a\\';b' AS x FROM t", "SELECT 'a\\';b' AS x FROM t"),
        ('SELECT "odd;name" FROM t', 'SELECT "odd;name" FROM t'),
        ("SELECT $$a;b$$ AS x FROM t", "SELECT $$a;b$$ AS x FROM t"),
        ("SELECT 1 /* ; */ AS x FROM t", "SELECT 1 /* ; */ AS x FROM t"),
        ("SELECT 1 AS x -- why;\nFROM t", "SELECT 1 AS x -- why;\nFROM t"),
        ("WITH a AS (SELECT 1 AS x) SELECT x FROM a;", "WITH a AS (SELECT 1 AS x) SELECT x FROM a"),
        # A trailing comment would swallow the ')' the query is wrapped in: it is dropped.
        ("  select x from t ; -- done\n", "select x from t"),
        ("SELECT x FROM t -- done", "SELECT x FROM t"),
    ],
)
def test_one_select_with_semicolons_inside_is_accepted(query: str, cleaned: str) -> None:
    assert single_select(query) == cleaned


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("SELECT 1; DROP TABLE x", "single statement"),
        ("SELECT 'a;b' AS x; DELETE FROM t", "single statement"),
        ("WITH a AS (SELECT 1) SELECT * FROM a; DELETE FROM t", "single statement"),
        ("SELECT 'x; DROP TABLE t", "unterminated"),
        ('SELECT "x; DROP TABLE t', "unterminated"),
        ("DELETE FROM t", "SELECT"),
        ("-- only a comment", "SELECT"),
    ],
)
def test_second_statements_and_unterminated_quotes_are_refused(query: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        single_select(query)


def test_table_config_takes_a_literal_with_a_semicolon() -> None:
    entry = {"name": "q", "source": {"query": "SELECT id, 'a;b' AS tag FROM DB.S.T"}, "target": "s.q"}
    assert parse_config({"tables": [entry]}).tables[0].source.query == "SELECT id, 'a;b' AS tag FROM DB.S.T"


def test_table_config_error_names_the_field_and_cuts_the_query() -> None:
    entry = {"name": "q", "source": {"query": "SELECT 1; DROP TABLE x -- " + "y" * 10_000}, "target": "s.q"}
    with pytest.raises(ConfigError) as exc:
        parse_config({"tables": [entry]})
    msg = str(exc.value)
    assert "table 'q': field 'source.query'" in msg and "single statement" in msg and len(msg) < 600
