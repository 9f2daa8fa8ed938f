"""README.md and docs/*.md cite only config fields, run params and CLI flags the code has (tests/docs/citations.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from citations import ALLOWED, REPO, check_repository, check_text


def problems(text: str) -> list[tuple[str, str]]:
    return [(p.citation, p.why) for p in check_text(text, "doc.md")]


def test_the_docs_cite_only_what_the_code_has() -> None:
    found = check_repository()
    assert found == [], "\n".join(map(str, found))


def test_every_allowed_exception_is_still_cited() -> None:
    text = "\n".join(p.read_text() for p in [REPO / "README.md", *(REPO / "docs").glob("*.md")])
    assert [c for c in ALLOWED if f"`{c}`" not in text] == []


# -- the contradictions issue 21 found, as they were written, are caught -----------------------------------

OLD_PARAMS_TABLE = """\
Each table DAG has four typed params, shown in the **Trigger** form:

| param | type | meaning |
| --- | --- | --- |
| `window_start` | date-time (UTC) or empty | reload rows whose cursor is `>=` this instant |
| `window_end` | date-time (UTC) or empty | … and `<` this instant |
| `full_refresh` | boolean | replace the whole Iceberg table with the source, in one commit |
| `dry_run` | boolean | plan and count the window's rows; write nothing |
"""


def test_a_params_table_missing_params_of_the_load_dag_is_caught() -> None:
    assert problems(OLD_PARAMS_TABLE) == [
        ("number_end, number_start", "the table lists the load DAG's params but not these")
    ]
    assert problems(OLD_PARAMS_TABLE.replace("`dry_run`", "`dryrun`")) == [
        ("dryrun", "not a run param of any snowberg DAG"),
        ("dry_run, number_end, number_start", "the table lists the load DAG's params but not these"),
    ]


def test_a_sync_example_with_key_columns_in_the_wrong_place_is_caught() -> None:
    """``key_columns`` is a field of the sync, not of its target; an example that nests it would fail."""
    text = (
        "```yaml\nsyncs:\n  - name: orders_native\n    source: {catalog: lake, table: shop.orders}\n"
        "    target: {kind: native, table: ANALYTICS.SHOP.ORDERS}\n    key_columns: [order_id]\n```\n"
    )
    assert problems(text) == []
    fragment = "```yaml\n    target:\n      kind: native\n      table: A.B.C\n      key_columns: [id]\n```\n"
    assert problems(fragment) == [("entry.target.key_columns", "not a config field")]


def test_a_settings_table_with_a_wrong_default_or_an_unknown_field_is_caught() -> None:
    doc = (REPO / "docs" / "maintenance.md").read_text()
    assert "| `orphan_age` | `3d` |" in doc
    broken = doc.replace("| `orphan_age` | `3d` |", "| `orphan_age` | `7d` |").replace(
        "| `min_snapshots` |", "| `min_snapshot` |"
    )
    assert problems(broken) == [
        ("min_snapshot", "not a config field"),
        ("orphan_age", "the docs give the default '7d', the model '3d'"),
    ]


def test_config_paths_values_and_cli_flags_in_code_spans_are_checked() -> None:
    text = (
        "Set `cursor.time_zone`, or `stream.create: yes`, or `merge_strategy: copy-on-write`; "
        "`maintenance.enabled: false` and `cursor.timezone` are fine, `snowberg.watermark` is no config path.\n"
        "Run `snowberg validate --strict` or `snowberg lint`; `--connect` exists, `--fast` does not.\n"
        "```bash\nsnowberg docs --check --out docs/x.md\n```\n"
    )
    assert problems(text) == [
        ("snowberg docs --out", "not an option of snowberg docs"),
        ("cursor.time_zone", "no config field cursor.time_zone"),
        ("stream.create: yes", "'yes' is not a value of stream.create (false | true)"),
        (
            "merge_strategy: copy-on-write",
            "'copy-on-write' is not a value of merge_strategy (copy_on_write | merge_on_read)",
        ),
        ("snowberg validate --strict", "not an option of snowberg validate"),
        ("snowberg lint", "not a snowberg command"),
        ("--fast", "not an option of any snowberg command"),
    ]


def test_a_yaml_example_with_an_unknown_key_or_a_value_outside_a_closed_set_is_caught() -> None:
    doc = (REPO / "docs" / "streams.md").read_text()
    broken = doc.replace("      append_only: false", "      append_onyl: false", 1).replace(
        "    primary_key: [order_id]", "    write_mode: upsert\n    primary_key: [order_id]", 1
    )
    assert problems(broken) == [
        ("tables[0].write_mode", "Input should be 'merge' or 'append'"),
        ("tables[0].stream.append_onyl", "not a config field"),
    ]


# -- what docs/configuration.md shows about defaults and DAGs -------------------------------------------------


def _yaml_block(doc: str, after: str) -> str:
    section = doc[doc.index(after) :]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


def test_the_defaults_example_merges_per_top_level_key_as_described() -> None:
    from snowberg.config.check_settings import AlertEvent
    from snowberg.config.table_config import parse_config

    doc = (REPO / "docs" / "configuration.md").read_text()
    cfg = parse_config(yaml.safe_load(_yaml_block(doc, "**`defaults` merge per top-level key")))
    orders, payments = cfg.tables
    assert orders.alerts is not None and orders.alerts.email == ["oncall@example.com"]
    assert [e.value for e in orders.alerts.events] == ["load_failure", "check_failure"]
    assert payments.alerts is not None and payments.alerts.email == [] and payments.alerts.webhook_url
    assert set(payments.alerts.events) == set(AlertEvent)  # every event: the defaults' events are gone too


@pytest.mark.parametrize("unload", [False, True])
def test_the_dags_table_names_the_dags_the_factory_builds(tmp_path: Path, unload: bool) -> None:
    from snowberg.airflow.dag_factory import build_dags

    doc = (REPO / "docs" / "configuration.md").read_text()
    section = doc[doc.index("## The DAGs of an entry") : doc.index("## Checking a config")]
    documented = {d.replace("<name>", "t") for d in re.findall(r"^\| `(snowberg_<name>[a-z_]*)`", section, re.M)}
    entry = "  - {name: t, source: {table: D.S.T}, target: n.t, cursor: {column: u}"
    entry += ', unload: {stage: D.S.ST, stage_url: "s3://b/p"}}\n' if unload else "}\n"
    (tmp_path / "tables.yaml").write_text("tables:\n" + entry)
    built = set(build_dags(tmp_path / "tables.yaml"))
    assert built == (documented if unload else documented - {"snowberg_t__unload"})
    daily = doc[doc.index("| `snowberg_<name>__maintenance`") :].split("\n", 1)[0]
    assert "**daily** by default" in daily
