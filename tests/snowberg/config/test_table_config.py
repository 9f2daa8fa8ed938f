"""A bad table config fails the DAG import with a message naming the table and the field."""

from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from snowberg.config.table_config import ConfigError, NullCursorPolicy, WriteMode, load_config, parse_config

GOOD: dict[str, Any] = {
    "tables": [
        {
            "name": "orders",
            "source": {"table": "DB.SHOP.ORDERS"},
            "target": "shop.orders",
            "cursor": {"column": "updated_at", "lookback": "10m", "commit_lag": "PT30S", "null_policy": "exclude"},
            "primary_key": ["order_id"],
            "partition_by": [
                "day(updated_at)",
                "bucket[16](order_id)",
                "truncate[4](status)",
                "identity(region)",
                "region",
            ],
            "schedule": "@hourly",
            "freshness_sla": "2h",
        }
    ]
}


def test_good_config_parses_every_field() -> None:
    t = parse_config(GOOD).tables[0]
    assert t.cursor is not None
    assert t.cursor.lookback == timedelta(minutes=10)
    assert t.cursor.commit_lag == timedelta(seconds=30)
    assert t.cursor.null_policy is NullCursorPolicy.EXCLUDE
    assert t.effective_write_mode is WriteMode.MERGE
    assert [(p.column, p.transform) for p in t.partition_by] == [
        ("updated_at", "day"),
        ("order_id", "bucket[16]"),
        ("status", "truncate[4]"),
        ("region", "identity"),
        ("region", "identity"),
    ]
    assert t.freshness_sla == timedelta(hours=2)
    assert t.dag_id == "snowberg_orders"
    assert t.variable_key == "snowberg__shop__orders__watermark"


def _bad(mutate: Any) -> str:
    cfg = copy.deepcopy(GOOD)
    mutate(cfg["tables"][0])
    with pytest.raises(ConfigError) as exc:
        parse_config(cfg, source="tables.yaml")
    return str(exc.value)


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda t: t.update(colour="blue"), "colour", "unknown key"),
        (lambda t: t["cursor"].update(colum="x"), "cursor.colum", "unknown key"),
        (lambda t: t.update(target="shop.orders; drop table x"), "target", "invalid"),
        (lambda t: t.update(target="orders"), "target", "namespace.table"),
        (lambda t: t["source"].update(table="DB.SHOP.ORD ERS"), "source.table", "invalid"),
        (lambda t: t["source"].update(table='DB.SHOP."X";--'), "source.table", "invalid"),
        (lambda t: t["cursor"].update(column="updated_at OR 1=1"), "cursor.column", "invalid"),
        (lambda t: t.update(primary_key=["id;"]), "primary_key", "invalid"),
        (lambda t: t.update(partition_by=["week(updated_at)"]), "partition_by.0", "bad partition transform"),
        (lambda t: t.update(partition_by=["bucket(order_id)"]), "partition_by.0", "bad partition transform"),
        (lambda t: t.update(partition_by=["bucket[0](order_id)"]), "partition_by.0", "positive"),
        (lambda t: t.pop("target"), "target", "Field required"),
        (lambda t: t.pop("source"), "source", "Field required"),
        (lambda t: t["cursor"].pop("column"), "cursor.column", "Field required"),
        (lambda t: t["cursor"].update(lookback="soon"), "cursor.lookback", "not a duration"),
        (lambda t: t["cursor"].update(null_policy="ignore"), "cursor.null_policy", "raise"),
        (lambda t: t.update(freshness_sla="-"), "freshness_sla", "not a duration"),
        (lambda t: t["source"].update(query="SELECT 1"), "source", "exactly one"),
        (lambda t: t.update(source={"query": "DELETE FROM x"}), "source.query", "SELECT"),
        (lambda t: t.update(source={"query": "SELECT 1; DROP TABLE x"}), "source.query", "single statement"),
        (lambda t: t.update(primary_key=[]), "<entry>", "without primary_key"),
        (lambda t: t.update(name="Orders-1"), "name", "lower-case"),
    ],
)
def test_bad_config_names_table_and_field(mutate: Any, field: str, words: str) -> None:
    msg = _bad(mutate)
    assert "table 'orders'" in msg or "table 'Orders-1'" in msg
    assert f"field '{field}'" in msg
    assert words in msg


def test_null_include_needs_primary_key() -> None:
    msg = _bad(lambda t: (t.update(primary_key=[]), t["cursor"].update(lookback=0, null_policy="include")))
    assert "null_policy 'include'" in msg and "without primary_key" in msg


@pytest.mark.parametrize(
    ("cursor", "words"),
    [
        ({"lookback": "10m", "null_policy": "raise"}, "cursor.lookback"),
        ({"lookback": 0, "null_policy": "include"}, "cursor.null_policy 'include'"),
    ],
)
def test_append_with_a_primary_key_refuses_rereads(cursor: dict[str, Any], words: str) -> None:
    """A key does not make re-read rows merge when write_mode says append: each run would append them again."""
    msg = _bad(lambda t: (t.update(write_mode="append"), t["cursor"].update(**cursor)))
    assert "table 'orders'" in msg and words in msg and "write_mode 'append'" in msg


def test_append_without_rereads_is_fine_with_a_primary_key() -> None:
    cfg = copy.deepcopy(GOOD)
    cfg["tables"][0].update(write_mode="append")
    cfg["tables"][0]["cursor"].update(lookback=0)
    assert parse_config(cfg).tables[0].effective_write_mode is WriteMode.APPEND


def test_duplicate_targets_rejected() -> None:
    cfg = copy.deepcopy(GOOD)
    second = copy.deepcopy(cfg["tables"][0])
    second["name"] = "orders2"
    cfg["tables"].append(second)
    with pytest.raises(ConfigError, match="table 'orders2'.*duplicate"):
        parse_config(cfg)


def test_repo_config_is_valid() -> None:
    cfg = load_config(Path(__file__).resolve().parents[3] / "include" / "tables.yaml")
    assert {t.name for t in cfg.tables} >= {"demo_orders"}


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ({"defaults": ["x"], "tables": [GOOD["tables"][0]]}, "'defaults' must be a mapping"),
        ({"tables": [GOOD["tables"][0]], "tabels": []}, "unknown top-level key"),
        ({"tables": []}, "non-empty list"),
    ],
)
def test_a_broken_file_fails_as_a_whole_even_when_isolating_entries(doc: dict[str, Any], words: str) -> None:
    from snowberg.config.table_config import parse_config_isolated

    with pytest.raises(ConfigError, match=words):
        parse_config_isolated(doc)


def test_isolated_parse_keeps_good_entries_and_names_the_broken_one() -> None:
    from snowberg.config.table_config import parse_config_isolated

    good = copy.deepcopy(GOOD["tables"][0])
    bad = copy.deepcopy(good) | {"name": "refunds", "target": "shop.refunds", "colour": "blue"}
    out = parse_config_isolated({"tables": [good, bad]}, source="tables.yaml")
    assert [t.name for t in out.tables] == ["orders"]
    (b,) = out.broken
    assert b.name == "refunds" and b.index == 1 and "table 'refunds': field 'colour': unknown key" in b.error


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t.update(name="n" * 10_000),
        lambda t: t.update(target="shop." + "x" * 10_000 + "!"),
        lambda t: t["cursor"].update(column="c" * 10_000 + "!"),
        lambda t: t.update(primary_key=["k" * 10_000 + "!"]),
        lambda t: t.update(partition_by=["day(" + "p" * 10_000 + "!)"]),
    ],
)
def test_errors_cut_long_values(mutate: Any) -> None:
    msg = _bad(mutate)
    assert len(msg) < 1_000, msg[:200]


def test_on_column_added_defaults_to_null_and_takes_yaml_null_or_backfill() -> None:
    from snowberg.config.table_config import ColumnAddPolicy

    assert parse_config(GOOD).tables[0].on_column_added is ColumnAddPolicy.NULL
    for given, want in (
        (None, ColumnAddPolicy.NULL),
        ("null", ColumnAddPolicy.NULL),
        ("backfill", ColumnAddPolicy.BACKFILL),
    ):
        cfg = copy.deepcopy(GOOD)
        cfg["tables"][0]["on_column_added"] = given  # YAML's `null` arrives as None
        assert parse_config(cfg).tables[0].on_column_added is want
    cfg = copy.deepcopy(GOOD)
    cfg["defaults"] = {"on_column_added": "backfill"}
    assert parse_config(cfg).tables[0].on_column_added is ColumnAddPolicy.BACKFILL


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"primary_key": [], "cursor": {"column": "updated_at"}}, "needs primary_key"),
        ({"scale_out": True}, "scale_out"),
    ],
)
def test_backfill_of_added_columns_is_refused_where_it_cannot_run(change: dict[str, Any], words: str) -> None:
    msg = _bad(lambda t: t.update(on_column_added="backfill", **change))
    assert "table 'orders'" in msg and "on_column_added" in msg and words in msg


def test_backfill_of_added_columns_is_refused_for_a_stream_table() -> None:
    entry = {
        "name": "orders_cdc",
        "source": {"table": "SHOP.PUBLIC.ORDERS"},
        "target": "shop.orders_cdc",
        "primary_key": ["id"],
        "stream": {"name": "SHOP.PUBLIC.ORDERS_STREAM"},
    }
    assert parse_config({"tables": [entry]}).tables[0].stream is not None
    with pytest.raises(ConfigError) as exc:
        parse_config({"tables": [{**entry, "on_column_added": "backfill"}]})
    assert "on_column_added 'backfill' is not available with stream" in str(exc.value)


def test_backfill_of_added_columns_is_refused_for_a_bad_value() -> None:
    msg = _bad(lambda t: t.update(on_column_added="fill"))
    assert "on_column_added" in msg and "backfill" in msg
