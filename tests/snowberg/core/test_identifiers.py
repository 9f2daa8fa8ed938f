"""Identifiers are matched whole: nothing after the name, not even a trailing newline.

Python's ``$`` matches before a final ``\\n``, and a YAML ``|`` block ends
every value with one, so a pattern anchored with ``^…$`` lets ``shop.bad\\n``
through. Every identifier field of tables.yaml and syncs.yaml is checked here.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from snowberg.config.table_config import ConfigError, parse_config
from snowberg.core.identifiers import (
    IcebergName,
    IdentifierError,
    TableName,
    clip,
    quote_identifier,
    validate_iceberg_identifier,
    validate_identifier,
)
from snowberg.sync.config import SyncConfigError, parse_syncs


@pytest.mark.parametrize(
    "check",
    [
        lambda: validate_identifier("orders\n"),
        lambda: validate_iceberg_identifier("orders\n"),
        lambda: quote_identifier("orders\n"),
        lambda: TableName.parse("DB.SHOP.ORDERS\n"),
        lambda: IcebergName.parse("shop.bad\n"),
    ],
)
def test_trailing_newline_is_not_an_identifier(check: Any) -> None:
    with pytest.raises(IdentifierError):
        check()


def test_long_names_are_cut_in_the_error() -> None:
    with pytest.raises(IdentifierError) as exc:
        validate_identifier("x" * 10_000 + "!", "cursor column")
    assert len(str(exc.value)) < 300 and "cursor column" in str(exc.value) and "10001 characters" in str(exc.value)


def test_clip_keeps_short_values_and_cuts_long_ones() -> None:
    assert clip("abc") == "'abc'"
    cut = clip("y" * 500)
    assert len(cut) < 120 and cut.endswith("(500 characters)")


TABLE: dict[str, Any] = {
    "name": "orders",
    "source": {"table": "DB.SHOP.ORDERS"},
    "target": "shop.orders",
    "cursor": {"column": "updated_at"},
    "primary_key": ["order_id"],
    "number_as_long": ["amount"],
    "partition_by": ["day(updated_at)"],
    "external_volume": "lake_volume",
    "unload": {"stage": "DB.SHOP.STAGE", "stage_url": "s3://bucket/unload"},
}

STREAM_TABLE: dict[str, Any] = {
    "name": "orders_cdc",
    "source": {"table": "DB.SHOP.ORDERS"},
    "target": "shop.orders_cdc",
    "primary_key": ["order_id"],
    "stream": {"name": "DB.SHOP.ORDERS_STREAM", "staging_table": "DB.SHOP.STAGING", "changelog_target": "shop.log"},
}


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for p in parents:
        doc = doc[p]
    doc[last] = value


@pytest.mark.parametrize(
    ("base", "path", "value"),
    [
        (TABLE, "name", "orders\n"),
        (TABLE, "target", "shop.bad\n"),
        (TABLE, "source.table", "DB.SHOP.ORDERS\n"),
        (TABLE, "cursor.column", "updated_at\n"),
        (TABLE, "primary_key", ["order_id\n"]),
        (TABLE, "number_as_long", ["amount\n"]),
        (TABLE, "partition_by", ["identity(région)"]),
        (TABLE, "external_volume", "lake_volume\n"),
        (TABLE, "unload.stage", "DB.SHOP.STAGE\n"),
        (TABLE, "snowflake_conn_id", "snowflake_default\n"),
        (TABLE, "catalog", "lake\n"),
        (TABLE, "alerts", {"slack_webhook_conn_id": "slack\n"}),
        (TABLE, "alerts", {"email": ["oncall@example.com\n"]}),
        (TABLE, "alerts", {"webhook_url": "https://hooks.example.com/x\n"}),
        (TABLE, "alerts", {"sns_topic_arn": "arn:aws:sns:eu-west-1:123456789012:lake\n"}),
        (STREAM_TABLE, "stream.name", "DB.SHOP.ORDERS_STREAM\n"),
        (STREAM_TABLE, "stream.staging_table", "DB.SHOP.STAGING\n"),
        (STREAM_TABLE, "stream.changelog_target", "shop.log\n"),
    ],
)
def test_table_config_fields_refuse_a_trailing_newline(base: dict[str, Any], path: str, value: Any) -> None:
    entry = copy.deepcopy(base)
    _set(entry, path, value)
    parse_config({"tables": [copy.deepcopy(base)]})  # the entry without the newline is valid
    with pytest.raises(ConfigError) as exc:
        parse_config({"tables": [entry]}, source="tables.yaml")
    assert "table 'orders" in str(exc.value) and path.split(".")[0] in str(exc.value)


SYNC: dict[str, Any] = {
    "name": "menu_to_native",
    "source": {"catalog": "lake", "table": "shop.menu"},
    "target": {
        "kind": "native",
        "snowflake_conn_id": "snowflake_default",
        "table": "DB.SHOP.MENU",
        "state_table": "DB.SHOP.STATE",
        "lineage_column": "SRC_SNAPSHOT",
    },
    "check": {"snowflake_conn_id": "snowflake_default", "table": "DB.SHOP.MENU"},
}
ICEBERG_SYNC: dict[str, Any] = {
    "name": "orders_to_horizon",
    "source": {"catalog": "lake", "table": "shop.orders"},
    "target": {"kind": "iceberg", "catalog": "horizon", "table": "SHOP.ORDERS"},
    "check": {"snowflake_conn_id": "horizon", "table": "DB.SHOP.ORDERS"},
}


@pytest.mark.parametrize(
    ("base", "path", "value"),
    [
        (SYNC, "name", "menu\n"),
        (SYNC, "source.catalog", "lake\n"),
        (SYNC, "source.table", "shop.menu\n"),
        (SYNC, "target.snowflake_conn_id", "snowflake_default\n"),
        (SYNC, "target.table", "DB.SHOP.MENU\n"),
        (SYNC, "target.state_table", "DB.SHOP.STATE\n"),
        (SYNC, "target.lineage_column", "SRC_SNAPSHOT\n"),
        (SYNC, "check.table", "DB.SHOP.MENU\n"),
        (ICEBERG_SYNC, "target.catalog", "horizon\n"),
        (ICEBERG_SYNC, "target.table", "SHOP.ORDERS\n"),
    ],
)
def test_sync_config_fields_refuse_a_trailing_newline(base: dict[str, Any], path: str, value: Any) -> None:
    entry = copy.deepcopy(base)
    _set(entry, path, value)
    parse_syncs({"syncs": [copy.deepcopy(base)]})
    with pytest.raises(SyncConfigError) as exc:
        parse_syncs({"syncs": [entry]}, source="syncs.yaml")
    assert path.split(".")[0] in str(exc.value)
