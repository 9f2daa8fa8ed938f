"""docs/type-mapping.md is rendered from the mapping table, never edited by hand."""

from __future__ import annotations

from pathlib import Path

from snowberg.mapping.docs import render_markdown
from snowberg.mapping.rules import TYPE_RULES


def test_the_checked_in_mapping_doc_is_the_rendered_table() -> None:
    doc = Path(__file__).resolve().parents[3] / "docs" / "type-mapping.md"
    assert doc.read_text() == render_markdown(), "run `snowberg docs` to regenerate docs/type-mapping.md"
    for r in TYPE_RULES:
        assert f"| {r.snowflake} | {r.iceberg} |" in doc.read_text()


def test_the_rendered_table_lists_every_rule_in_order_then_the_refused_types() -> None:
    from snowberg.mapping.rules import UNSUPPORTED

    doc = render_markdown()
    rows = [line for line in doc.splitlines() if line.startswith("| ") and not line.startswith("| Snowflake |")]
    assert rows == [f"| {r.snowflake} | {r.iceberg} | {r.values} |" for r in TYPE_RULES]
    refused = doc.split("Refused (the run fails naming the column):", 1)[1]
    for t, why in UNSUPPORTED.items():
        assert f"- `{t}`: {why}" in refused
