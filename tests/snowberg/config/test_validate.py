"""``snowberg validate`` offline: every problem of a config at once, each with its file, line, entry and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from snowberg.config.table_config import ConfigError, parse_config
from snowberg.config.validate import TABLES, Issue, Severity, validate_files, validate_text
from snowberg.sync.specs import SPECS


def found(text: str, **kw: Any) -> list[tuple[int | None, str | None, str | None, str]]:
    """(line, entry name, field, message) of every finding, in line order."""
    result = validate_text(text, source="t.yaml", specs=SPECS, **kw)
    issues = sorted(result.issues, key=lambda i: i.line or 0)
    return [(i.line, i.name, i.field, i.message) for i in issues]


BROKEN = """\
defaults:
  catalog: lake
  retries: 99
tables:
  - name: orders
    source: {table: SALES.SHOP.ORDERS}
    target: shop.orders
    cursor:
      column: updated_at
      timezone: Mars/Olympus
    primary_key: [order_id]
  - name: Bad-Name
    source: {table: SALES.SHOP.X, query: "SELECT 1"}
    target: shop.x
    partition_by: ["day(a)", "zz(a)"]
    colour: red
  - name: menu
    retries: 1
    source: {table: SALES.SHOP.MENU}
    target: shop.menu
    cursor: {column: updated_at, lookback: 1h}
"""


def test_every_error_of_every_entry_is_reported_with_its_line_entry_and_field() -> None:
    got = found(BROKEN)
    assert got == [
        (3, "orders", "retries", "Input should be less than or equal to 20 (the value comes from defaults)"),
        (3, "Bad-Name", "retries", "Input should be less than or equal to 20 (the value comes from defaults)"),
        (
            10,
            "orders",
            "cursor.timezone",
            "'Mars/Olympus' is not an IANA time zone name (for example 'America/Los_Angeles')",
        ),
        (12, "Bad-Name", "name", "name 'Bad-Name' must be lower-case letters, digits or '_' (it becomes the DAG id)"),
        (13, "Bad-Name", "source", "give exactly one of 'table' or 'query'"),
        (
            15,
            "Bad-Name",
            "partition_by.1",
            "bad partition transform 'zz(a)': use identity(col), year(col), month(col), day(col), hour(col), "
            "bucket[N](col) or truncate[W](col)",
        ),
        (16, "Bad-Name", "colour", "unknown key"),
        # A rule between fields (pydantic's model validator) names the entry; its line is the entry's first.
        (
            17,
            "menu",
            None,
            "cursor.lookback (rows of the lookback are re-read every run) needs a merge table (primary_key, write_mode "
            "merge): without primary_key they are appended again on each run; set cursor.lookback: 0 / null_policy "
            "raise|exclude, or merge on the key",
        ),
    ]


def test_the_dag_loader_stops_at_the_first_bad_entry_where_validate_lists_them_all() -> None:
    import yaml

    with pytest.raises(ConfigError) as exc:
        parse_config(yaml.safe_load(BROKEN))
    # The loader's message also covers every entry, but without lines; validate adds them.
    assert "t.yaml" not in str(exc.value) and "line" not in str(exc.value)
    assert len(found(BROKEN)) == 8


def test_a_key_written_twice_is_an_error_at_the_second_line() -> None:
    text = "tables:\n  - name: a\n    source: {table: D.S.T}\n    target: n.a\n    target: n.b\n"
    assert found(text) == [
        (5, "a", "target", "written twice in one mapping (first on line 4); YAML keeps this one and drops the first")
    ]


def test_a_section_that_replaces_a_defaults_section_is_a_warning_naming_the_dropped_keys() -> None:
    text = (
        "defaults:\n  alerts: {email: [a@example.com], events: [load_failure]}\n"
        "tables:\n"
        "  - name: a\n    source: {table: D.S.T}\n    target: n.a\n    alerts: {webhook_url: 'https://h.example.com/x'}\n"
        "  - name: b\n    source: {table: D.S.U}\n    target: n.b\n"
        "    alerts: {email: [b@example.com], events: [check_failure]}\n"
    )
    result = validate_text(text, source="t.yaml", specs=SPECS)
    assert [(i.line, i.name, i.field, i.severity) for i in result.issues] == [(7, "a", "alerts", Severity.WARNING)]
    assert "so the defaults' alerts.{email, events} do not apply to this entry" in result.issues[0].message


def test_a_warning_does_not_fail_the_report_and_an_error_does(tmp_path: Path) -> None:
    ok = tmp_path / "tables.yaml"
    ok.write_text(
        "defaults:\n  alerts: {email: [a@example.com]}\n"
        "tables:\n  - name: a\n    source: {table: D.S.T}\n    target: n.a\n    alerts: {sns_topic_arn: "
        "'arn:aws:sns:eu-west-1:123456789012:t'}\n"
    )
    report = validate_files([ok], specs=SPECS)
    assert report.ok and report.to_dict()["warnings"] == 1
    bad = tmp_path / "bad_tables.yaml"
    bad.write_text(ok.read_text().replace("target: n.a", "target: nodot"))
    assert not validate_files([ok, bad], specs=SPECS).ok


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tables: [\n  {name: a\n", [(3, None, None, "not valid YAML")]),
        ("- just\n- a list\n", [(1, None, None, "not a snowberg config: no top-level 'tables' or 'syncs' key")]),
        (
            "tables:\n  - {name: a, source: {table: D.S.T}, target: n.a}\nextra: 1\nmore: 2\n",
            [
                (3, None, "extra", "unknown top-level key (allowed: defaults, tables)"),
                (4, None, "more", "unknown top-level key (allowed: defaults, tables)"),
            ],
        ),
        ("defaults: [1]\ntables: []\n", [(1, None, "defaults", "must be a mapping"), (2, None, "tables", "must be")]),
        ("other: 1\n", [(1, None, None, "not a snowberg config: no top-level 'tables' or 'syncs' key")]),
    ],
)
def test_problems_of_the_file_itself_are_located(text: str, expected: list[tuple[Any, ...]]) -> None:
    got = found(text)
    assert len(got) == len(expected), got
    for (line, name, fld, msg), (e_line, e_name, e_field, e_msg) in zip(got, expected, strict=True):
        assert (line, name, fld) == (e_line, e_name, e_field) and msg.startswith(e_msg), (line, msg)


def test_a_file_named_like_a_config_without_its_key_is_read_as_that_kind(tmp_path: Path) -> None:
    p = tmp_path / "tables.yaml"
    p.write_text("defaults: {}\n")
    result = validate_files([p], specs=SPECS).files[0]
    assert result.spec is TABLES
    assert [(i.line, i.field, i.message) for i in result.issues] == [(1, "tables", "must be a non-empty list")]
    p.write_text("# a comment\n- a\n- list\n")
    result = validate_files([p], specs=SPECS).files[0]
    assert [(i.line, i.message) for i in result.issues] == [(2, "expected a mapping with 'tables'")]


def test_two_tables_of_one_name_or_target_and_a_changelog_on_a_target_clash() -> None:
    text = (
        "tables:\n"
        "  - {name: a, source: {table: D.S.A}, target: n.a}\n"
        "  - {name: a, source: {table: D.S.B}, target: n.b}\n"
        "  - {name: c, source: {table: D.S.C}, target: n.a, catalog: other}\n"
        "  - name: d\n    source: {table: D.S.D}\n    target: n.d\n    primary_key: [id]\n"
        "    stream: {name: D.S.D_STREAM, changelog_target: n.b}\n"
    )
    assert found(text) == [
        (3, "a", "name", "the name 'a' is also the name of entry #1"),
        (4, "c", "target", "n.a is also written by table 'a' (its target)"),
        (9, "d", "stream.changelog_target", "n.b is also written by table 'a' (its target)"),
    ]


def test_dag_ids_built_twice_across_files_name_both_places(tmp_path: Path) -> None:
    tables = tmp_path / "tables.yaml"
    tables.write_text(
        "tables:\n"
        "  - {name: orders, source: {table: D.S.O}, target: n.o}\n"
        "  - {name: orders__checks, source: {table: D.S.P}, target: n.p}\n"
        "  - {name: sync_menu, source: {table: D.S.M}, target: n.m}\n"
    )
    syncs = tmp_path / "syncs.yaml"
    syncs.write_text(
        "syncs:\n  - name: menu\n    source: {catalog: lake, table: n.m}\n    target: {kind: native, table: D.S.MENU}\n"
    )
    report = validate_files([tables, syncs], specs=SPECS)
    assert not report.ok
    got = [(Path(i.file).name, i.line, i.name, i.message) for i in report.all_issues]
    assert got == [
        (
            "tables.yaml",
            3,
            "orders__checks",
            f"DAG id snowberg_orders__checks is also built for table 'orders' ({tables}:2); "
            "Airflow would keep only one of them",
        ),
        (
            "syncs.yaml",
            2,
            "menu",
            f"DAG id snowberg_sync_menu is also built for table 'sync_menu' ({tables}:4); "
            "Airflow would keep only one of them",
        ),
    ]


def test_what_the_caller_checks_on_a_valid_entry_is_located_at_its_field() -> None:
    text = (
        "defaults: {schedule: nonsense}\n"
        "tables:\n  - name: a\n    source: {table: D.S.T}\n    target: n.a\n    maintenance:\n      schedule: bad\n"
    )

    def check(entry: Any) -> list[tuple[str | None, str]]:
        return [("schedule", "refused"), ("maintenance.schedule", "refused"), (None, "no DAG")]

    assert found(text, entry_check=check) == [
        (1, "a", "schedule", "refused (the value comes from defaults)"),
        (3, "a", None, "no DAG"),
        (7, "a", "maintenance.schedule", "refused"),
    ]


def test_json_output_carries_every_field_of_every_finding(tmp_path: Path) -> None:
    p = tmp_path / "tables.yaml"
    p.write_text(BROKEN)
    data = json.loads(validate_files([p], specs=SPECS).to_json())
    assert data["ok"] is False and data["errors"] == 8 and data["warnings"] == 0
    assert data["files"] == [{"path": str(p), "kind": "tables", "valid_entries": 0}]
    assert data["issues"][2] == {
        "file": str(p),
        "line": 10,
        "message": "'Mars/Olympus' is not an IANA time zone name (for example 'America/Los_Angeles')",
        "entity": "table",
        "name": "orders",
        "field": "cursor.timezone",
        "severity": "error",
    }


def test_text_output_is_one_line_per_finding_and_a_summary() -> None:
    issue = Issue(file="t.yaml", line=4, entity="table", name="a", field="target", message="bad")
    assert issue.render() == "t.yaml:4: table 'a': field 'target': bad"
    assert Issue(file="t.yaml", line=None, message="gone").render() == "t.yaml: gone"
    warning = Issue(file="t.yaml", line=2, field="x", message="hm", severity=Severity.WARNING)
    assert warning.render() == "t.yaml:2: field 'x': warning: hm"


def test_the_shipped_configs_are_valid() -> None:
    root = Path(__file__).resolve().parents[3] / "include"
    report = validate_files([root / "tables.yaml", root / "syncs.yaml"], specs=SPECS)
    assert report.ok and report.all_issues == [], report.render()
    assert [len(f.entries) for f in report.files] == [2, 2]


def test_an_unknown_key_names_the_allowed_key_it_resembles_at_its_own_level() -> None:
    """``schedul`` → ``schedule``; nested (``cursor.colum``) and under a tagged union (a native sync target).

    Before the fix every one of them was a bare "unknown key", in validate and in the DAG file's parse alike.
    """
    tables = (
        "tables:\n  - name: a\n    source: {table: D.S.T}\n    target: n.a\n    schedul: '@daily'\n"
        "    cursor: {colum: updated_at}\n    zzzzzz: 1\n"
    )
    assert [(f, m) for _, _, f, m in found(tables)] == [
        ("schedul", "unknown key (did you mean 'schedule'?)"),
        ("cursor.column", "Field required"),
        ("cursor.colum", "unknown key (did you mean 'column'?)"),
        ("zzzzzz", "unknown key"),
    ]
    syncs = "syncs:\n  - name: s\n    source: {catalog: lake, table: n.a}\n    target: {kind: native, tabel: D.S.T}\n"
    assert ("target.tabel", "unknown key (did you mean 'table'?)") in [(f, m) for _, _, f, m in found(syncs)]
    import yaml

    from snowberg.config.table_config import parse_config_isolated

    with pytest.raises(ConfigError, match=r"field 'schedul': unknown key \(did you mean 'schedule'\?\)"):
        parse_config(yaml.safe_load(tables))
    [broken] = parse_config_isolated(yaml.safe_load(tables)).broken
    assert "field 'cursor.colum': unknown key (did you mean 'column'?)" in broken.error
