"""The stream settings of a table config (``snowberg.config.stream_settings``): no server needed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from snowberg.config.stream_settings import StreamSource


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
    from snowberg.config.stream_settings import stream_table_problems

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
