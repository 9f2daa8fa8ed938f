"""The pinned Snowflake session: snowberg's settings win, the connection's others stay."""

from __future__ import annotations

from typing import Any

from snowberg.config.table_config import TableConfig, parse_config
from snowberg.snowflake.session import PINNED_SESSION, session_parameters


def _cfg(**over: Any) -> TableConfig:
    entry = {"name": "orders", "source": {"table": "DB.S.ORDERS"}, "target": "n.t", **over}
    return parse_config({"tables": [entry]}).tables[0]


def test_the_pinned_settings_override_the_connections_and_its_other_settings_stay() -> None:
    existing = {"TIMEZONE": "America/Los_Angeles", "WEEK_START": 3, "ABORT_DETACHED_QUERY": True}
    params = session_parameters(None, existing)
    assert {k: params[k] for k in PINNED_SESSION} == PINNED_SESSION
    assert params["ABORT_DETACHED_QUERY"] is True
    assert existing["TIMEZONE"] == "America/Los_Angeles"  # the connection's own dict is not changed


def test_a_table_tags_its_queries_and_picks_the_geography_format() -> None:
    params = session_parameters(_cfg(geo_format="wkt"))
    assert params["QUERY_TAG"] == "snowberg:orders"
    assert params["GEOGRAPHY_OUTPUT_FORMAT"] == params["GEOMETRY_OUTPUT_FORMAT"] == "WKT"
    assert session_parameters(None)["GEOGRAPHY_OUTPUT_FORMAT"] == "GeoJSON"
    assert "QUERY_TAG" not in session_parameters(None)
