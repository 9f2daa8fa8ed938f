"""``watch:``: its defaults and bounds, the one rule with ``schedule`` (also across ``defaults``), and the sources
it refuses, each refusal named on the field ``watch``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from snowberg.config.table_config import parse_config_isolated
from snowberg.config.validate import TABLES, validate_text
from snowberg.config.watch_settings import WatchSettings


def table(name: str, **over: Any) -> dict[str, Any]:
    return {"name": name, "source": {"table": "DB.S.T"}, "target": f"n.{name}", **over}


def parsed(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The valid tables by name, and the errors of the broken ones by name."""
    cfg = parse_config_isolated(doc)
    return {t.name: t for t in cfg.tables}, {b.name: b.error for b in cfg.broken}


def test_watch_true_takes_the_defaults_and_a_watched_table_has_no_schedule() -> None:
    ok, broken = parsed({"tables": [table("a", watch=True), table("b", watch={}), table("c", watch=False)]})
    assert broken == {}
    for name in ("a", "b"):
        assert ok[name].watch == WatchSettings(poll_interval=timedelta(minutes=1), max_interval=timedelta(days=1))
        assert ok[name].schedule is None
    assert ok["c"].watch is None and ok["c"].schedule == "@hourly"


@pytest.mark.parametrize(
    ("watch", "words"),
    [
        ({"poll_interval": "9s"}, "poll_interval 9s is below 10s"),
        ({"poll_interval": "10m", "max_interval": "5m"}, "max_interval 5m is shorter than poll_interval 10m"),
        ({"every": "1m"}, "unknown key"),
    ],
)
def test_bad_intervals_are_refused(watch: dict[str, Any], words: str) -> None:
    _, broken = parsed({"tables": [table("a", watch=watch)]})
    assert words in broken["a"]


def test_max_interval_null_means_only_on_changes() -> None:
    ok, _ = parsed({"tables": [table("a", watch={"poll_interval": "10s", "max_interval": None})]})
    assert ok["a"].watch is not None and ok["a"].watch.max_interval is None


def test_watch_and_schedule_in_one_entry_are_refused_naming_both_on_the_watch_field() -> None:
    _, broken = parsed({"tables": [table("a", watch={}, schedule="@daily")]})
    assert "field 'watch'" in broken["a"]
    assert "watch and schedule ('@daily') are both set" in broken["a"]


def test_a_tables_own_watch_or_schedule_replaces_the_other_one_from_defaults() -> None:
    """The rule for defaults: an entry's own non-null ``watch`` drops the defaults' ``schedule`` and vice versa;
    both given in one place (the entry, or defaults) is refused."""
    ok, broken = parsed(
        {
            "defaults": {"schedule": "@daily"},
            "tables": [table("watched", watch={}), table("scheduled"), table("off", watch=None)],
        }
    )
    assert broken == {}
    assert ok["watched"].watch is not None and ok["watched"].schedule is None
    assert ok["scheduled"].schedule == "@daily" and ok["off"].schedule == "@daily"

    ok, broken = parsed(
        {
            "defaults": {"watch": {"poll_interval": "30s"}},
            "tables": [table("watched"), table("scheduled", schedule="0 3 * * *"), table("off", watch=None)],
        }
    )
    assert broken == {}
    assert ok["watched"].watch is not None and ok["watched"].watch.poll_interval == timedelta(seconds=30)
    assert ok["scheduled"].watch is None and ok["scheduled"].schedule == "0 3 * * *"
    assert ok["off"].watch is None and ok["off"].schedule == "@hourly"

    _, broken = parsed({"defaults": {"watch": {}, "schedule": "@daily"}, "tables": [table("both")]})
    assert "watch and schedule ('@daily') are both set" in broken["both"]


def test_validate_applies_the_same_defaults_rule_and_locates_the_conflict() -> None:
    text = (
        "defaults:\n"
        "  schedule: '@daily'\n"
        "tables:\n"
        "  - name: watched\n"
        "    source: {table: DB.S.T}\n"
        "    target: n.watched\n"
        "    watch: {}\n"
        "  - name: both\n"
        "    source: {table: DB.S.U}\n"
        "    target: n.both\n"
        "    watch: {}\n"
        "    schedule: '@hourly'\n"
    )
    result = validate_text(text, source="tables.yaml", specs=[TABLES])
    assert [(i.line, i.name, i.field) for i in result.issues] == [(11, "both", "watch")]


def test_a_query_source_is_refused_with_why_and_what_to_do() -> None:
    _, broken = parsed({"tables": [{"name": "q", "source": {"query": "SELECT 1 AS X"}, "target": "n.q", "watch": {}}]})
    assert "field 'watch'" in broken["q"]
    assert "a custom query is none" in broken["q"] and "Create a view with the query" in broken["q"]


def test_a_stream_table_can_be_watched() -> None:
    entry = table("cdc", primary_key=["id"], stream={"name": "DB.S.T_STREAM"}, watch=True)
    ok, broken = parsed({"tables": [entry]})
    assert broken == {} and ok["cdc"].watch is not None
