"""Proposed entries appended as text: every existing byte kept, the new entries indented as the file's own."""

from __future__ import annotations

import pytest
import yaml

from snowberg.config.discovered import (
    DiscoveredColumn,
    DiscoveredTable,
    DiscoveryError,
    ObjectKind,
    Proposal,
    append_entries,
    check_written,
    config_identifier,
    cursor_candidates,
    existing_entries,
    ignored_tables,
    plan_discovery,
    propose,
    render_entry,
)


def table(name: str = "ORDERS", *cols: DiscoveredColumn) -> DiscoveredTable:
    return DiscoveredTable(
        database="DB",
        schema="S",
        name=name,
        kind=ObjectKind.TABLE,
        table_type="BASE TABLE",
        row_count=10,
        bytes=100,
        columns=cols or (DiscoveredColumn(name="ID", data_type="NUMBER", precision=10, scale=0),),
    )


def proposal(name: str = "orders") -> Proposal:
    return propose(table(name.upper()), name=name, namespace="s")


EXISTING = """\
# our tables; keep this comment
tables:
- name: legacy        # hand-written
  source: {table: DB.S.LEGACY}
  target: s.legacy
  description: |
    Loaded since 2019.

# defaults come after the list here
defaults:
  owner: finance
"""


def test_new_entries_go_after_the_last_entry_with_its_indentation_and_nothing_else_moves() -> None:
    out = append_entries(EXISTING, [proposal()])
    head, _, tail = EXISTING.partition("\n# defaults come after the list here")
    assert out.startswith(head + "\n") and out.endswith("\n# defaults come after the list here" + tail)
    added = out[len(head) + 1 : len(out) - len(tail) - len("\n# defaults come after the list here")]
    assert added.startswith("- name: orders  # discovered: DB.S.ORDERS") and "\n  source: {table: DB.S.ORDERS}" in added
    data = yaml.safe_load(out)
    assert [e["name"] for e in data["tables"]] == ["legacy", "orders"]
    assert data["tables"][0]["description"] == "Loaded since 2019.\n" and data["defaults"] == {"owner": "finance"}
    check_written(out, [proposal()], source="t.yaml")


def test_an_empty_file_gets_a_header_and_a_list_and_a_file_without_tables_gets_the_key() -> None:
    new = append_entries("", [proposal()])
    assert new.startswith("# Written by `snowberg discover`") and yaml.safe_load(new)["tables"][0]["name"] == "orders"
    only_defaults = "defaults:\n  owner: x\n"
    out = append_entries(only_defaults, [proposal()])
    assert out.startswith(only_defaults) and yaml.safe_load(out)["tables"][0]["target"] == "s.orders"


def test_a_flow_style_list_is_refused_rather_than_rewritten() -> None:
    with pytest.raises(DiscoveryError, match="flow-style"):
        append_entries("tables: [{name: a, source: {table: D.S.A}, target: s.a}]\n", [proposal()])


def test_an_entry_the_files_defaults_would_break_is_refused_and_nothing_is_written() -> None:
    text = "defaults:\n  write_mode: merge\ntables:\n"
    text += "  - {name: a, source: {table: D.S.A}, target: s.a, primary_key: [id]}\n"
    out = append_entries(text, [proposal()])
    with pytest.raises(DiscoveryError, match="write_mode 'merge' needs primary_key.*nothing written"):
        check_written(out, [proposal()], source="t.yaml")


def test_names_the_config_can_write_and_cursor_names() -> None:
    assert config_identifier("UPDATED_AT") == "updated_at" and config_identifier("updatedAt") == "updatedAt"
    assert config_identifier("lower") is None and config_identifier("HAS SPACE") is None
    ts = DiscoveredColumn(name="CREATED_AT", data_type="TIMESTAMP_NTZ")
    upd = DiscoveredColumn(name="lastModified", data_type="TIMESTAMP_TZ")
    price = DiscoveredColumn(name="PRICE_CHANGE", data_type="NUMBER", precision=10, scale=0)
    seq = DiscoveredColumn(name="CHANGE_SEQ", data_type="NUMBER", precision=38, scale=0)
    amount = DiscoveredColumn(name="MODIFIED_AMOUNT", data_type="NUMBER", precision=10, scale=2)
    day = DiscoveredColumn(name="UPDATED_ON", data_type="DATE")
    t = table("T", ts, upd, price, seq, amount, day)
    assert [c.name for c in cursor_candidates(t)] == ["lastModified", "CHANGE_SEQ", "UPDATED_ON"]


@pytest.mark.parametrize(
    "text", ["tables:\n", "tables:  # none yet\n\ndefaults:\n  owner: x\n", "defaults:\n  owner: x\ntables:"]
)
def test_an_empty_tables_key_gets_the_entries_under_it(text: str) -> None:
    out = append_entries(text, [proposal()])
    data = yaml.safe_load(out)
    assert [e["name"] for e in data["tables"]] == ["orders"] and data.get("defaults", {"owner": "x"}) == {"owner": "x"}
    kept = [ln for ln in out.splitlines() if not ln.startswith("    ") and not ln.startswith("  - ")]
    assert kept == text.splitlines()  # the file's own lines, in order, none changed


def test_the_example_project_config_takes_discovered_entries_and_validates() -> None:
    """``snowberg init``'s include/tables.yaml (with its defaults) + discovered entries validate."""
    from pathlib import Path

    import snowberg

    example = (Path(snowberg.__file__).parent / "examples" / "include" / "tables.yaml").read_text()
    out = append_entries(example, [proposal("lines")])
    block = render_entry(proposal("lines"), dash_indent=2, key_indent=4)
    assert block in out and out.replace(block, "", 1) == example  # one block inserted, every other byte kept
    check_written(out, [proposal("lines")], source="tables.yaml")


def test_a_table_whose_entry_a_person_deleted_stays_out_when_the_file_says_ignore() -> None:
    text = (
        "tables:\n  # snowberg discover: ignore DB.S.OLD_STUFF\n  - {name: a, source: {table: DB.S.A}, target: s.a}\n"
    )
    tables = [table("A"), table("OLD_STUFF"), table("NEW_ONE")]
    plan = plan_discovery(
        tables,
        database="DB",
        schema="S",
        existing=existing_entries(text),
        selected=["A", "OLD_STUFF", "NEW_ONE"],
        namespace="s",
        ignored=ignored_tables(text),
    )
    assert [p.name for p in plan.added] == ["new_one"] and plan.kept == ["DB.S.A"]
    assert plan.skipped == [("DB.S.OLD_STUFF", "ignored by a '# snowberg discover: ignore' line of the config")]


def test_a_table_without_visible_columns_is_skipped_with_the_reason() -> None:
    bare = DiscoveredTable(database="DB", schema="S", name="HIDDEN", kind=ObjectKind.TABLE, table_type="BASE TABLE")
    plan = plan_discovery([bare], database="DB", schema="S", existing=[], selected=["HIDDEN"], namespace="s")
    assert not plan.added and plan.skipped == [("DB.S.HIDDEN", "no columns visible to this role")]
