"""``stream:`` in a table config: names checked, the staging table defaulted, and what a stream table must also set."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from snowberg.config.stream_settings import STAGING_SUFFIX, StreamSource, stream_table_problems
from snowberg.config.table_config import ConfigError, parse_config


def test_the_staging_table_defaults_to_the_stream_name_with_the_suffix_next_to_it() -> None:
    s = StreamSource(name="shop.public.orders_stream")
    assert s.staging_name.table == "ORDERS_STREAM" + STAGING_SUFFIX
    assert (s.staging_name.database, s.staging_name.schema) == (s.stream_name.database, s.stream_name.schema)
    assert s.staging_name.quoted() == '"SHOP"."PUBLIC"."ORDERS_STREAM_SNOWBERG_STAGING"'


def test_a_default_staging_name_is_cut_to_snowflakes_255_characters() -> None:
    s = StreamSource(name="DB.S." + "X" * 250)
    assert len(s.staging_name.table) == 255 and s.staging_name.table.startswith("X" * 250)


def test_an_explicit_staging_table_is_used_as_given() -> None:
    s = StreamSource(name="DB.S.ORDERS_STREAM", staging_table="DB.STAGE.ORDERS_STAGING")
    assert s.staging_name.quoted() == '"DB"."STAGE"."ORDERS_STAGING"'


def test_the_tracked_table_is_on_table_else_the_configs_source_table() -> None:
    on_table = StreamSource(name="DB.S.ST", on_table="DB.S.T1").table_name("DB.S.T2")
    from_source = StreamSource(name="DB.S.ST").table_name("DB.S.T2")
    assert on_table is not None and on_table.quoted() == '"DB"."S"."T1"'
    assert from_source is not None and from_source.quoted() == '"DB"."S"."T2"'
    assert StreamSource(name="DB.S.ST").table_name(None) is None


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ({"name": "DB.S.ST", "on_table": "DB.S.st"}, "on_table and stream name the same object"),
        ({"name": "DB.S.ST", "staging_table": "db.s.st"}, "staging_table and stream name the same object"),
        ({"name": "DB.S.ST", "on_table": "DB.S.T", "staging_table": "DB.S.T"}, "on_table and staging_table"),
        ({"name": "ORDERS_STREAM"}, "expected database.schema.table"),
        ({"name": "DB.S.ST", "changelog_target": "changelog"}, "expected namespace.table"),
        ({"name": "DB.S.ST", "stale_alert_intervals": 0}, "greater than or equal to 1"),
        ({"name": "DB.S.ST", "stale_alert_intervals": 101}, "less than or equal to 100"),
    ],
)
def test_bad_stream_settings_are_refused_saying_why(doc: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        StreamSource.model_validate(doc)


def test_every_problem_of_a_stream_table_is_named_at_once() -> None:
    problems = stream_table_problems(
        StreamSource(name="DB.S.ST", create=True), primary_key=[], source_table=None, has_cursor=True
    )
    assert problems == [
        "give either 'cursor' (watermark loads) or 'stream' (change capture), not both",
        "a standard stream carries updates and deletes, applied by primary key: set primary_key "
        "(or stream.append_only: true)",
        "stream.create needs the tracked table: set stream.on_table or source.table",
    ]


def test_creating_a_stream_is_fine_with_on_table_and_no_source_table() -> None:
    s = StreamSource(name="DB.S.ST", create=True, on_table="DB.S.T")
    assert stream_table_problems(s, primary_key=["id"], source_table=None, has_cursor=False) == []


def test_a_table_config_with_a_stream_and_a_cursor_fails_naming_the_table() -> None:
    entry = {
        "name": "orders_cdc",
        "source": {"table": "DB.S.ORDERS"},
        "target": "shop.orders",
        "cursor": {"column": "updated_at"},
        "primary_key": ["order_id"],
        "stream": {"name": "DB.S.ORDERS_STREAM"},
    }
    with pytest.raises(ConfigError, match="table 'orders_cdc'.*give either 'cursor'.*or 'stream'"):
        parse_config({"tables": [entry]})
    del entry["cursor"]
    stream = parse_config({"tables": [entry]}).tables[0].stream
    assert stream is not None and stream.table_name("DB.S.ORDERS") is not None


def test_settings_validate_names_and_default_the_staging_table() -> None:
    s = StreamSource(name="db.src.orders_stream", create=True, on_table="db.src.orders")
    assert s.staging_name.quoted() == '"DB"."SRC"."ORDERS_STREAM_SNOWBERG_STAGING"'
    for bad in (
        {"name": "orders_stream"},
        {"name": "DB.SRC.S", "staging_table": "DB.SRC.S"},
        {"name": "DB.SRC.S", "changelog_target": "not valid"},
        {"name": "DB.SRC.S", "unknown": 1},
        {"name": "DB.SRC.S;DROP"},
    ):
        with pytest.raises(ValidationError):
            StreamSource.model_validate(bad)
    with pytest.raises(ValidationError):
        s.append_only = True  # type: ignore[misc]  # frozen


def test_stream_table_problems_for_the_table_config_validator() -> None:
    s = StreamSource(name="DB.SRC.S", create=True)
    assert stream_table_problems(s, primary_key=["id"], source_table="DB.SRC.T", has_cursor=False) == []
    probs = stream_table_problems(s, primary_key=[], source_table=None, has_cursor=True)
    assert len(probs) == 3 and "primary_key" in probs[1] and "on_table" in probs[2]
    assert (
        stream_table_problems(
            StreamSource(name="DB.SRC.S", append_only=True), primary_key=[], source_table=None, has_cursor=False
        )
        == []
    )
