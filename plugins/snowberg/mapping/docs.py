"""The mapping table rendered as Markdown for ``docs/type-mapping.md``."""

from __future__ import annotations

from snowberg.mapping.rules import TYPE_RULES, UNSUPPORTED


def render_markdown() -> str:
    """The mapping table as Markdown (``docs/type-mapping.md``)."""
    lines = [
        "# Snowflake → Iceberg type mapping",
        "",
        "Generated from `snowberg.mapping.rules.TYPE_RULES` by `python -m snowberg.cli docs`; do not edit by hand.",
        "The first matching row wins. Types come from Snowflake's column metadata for the query,",
        "never from the Arrow width of a batch.",
        "",
        "| Snowflake | Iceberg | Values |",
        "|---|---|---|",
    ]
    for r in TYPE_RULES:
        lines.append(f"| {r.snowflake} | {r.iceberg} | {r.values} |")
    lines += ["", "Refused (the run fails naming the column):", ""]
    for t, why in UNSUPPORTED.items():
        lines.append(f"- `{t}`: {why}")
    lines += [
        "",
        "Column names are lower-cased (`ORDER_ID` → `order_id`); two columns that collide fail the run.",
        "Schema changes: a new source column is added before the append; a type Iceberg can promote",
        "(int→long, float→double, decimal(p,s)→decimal(P,s) with P>p) is promoted; a narrower source",
        "type is written into the wider existing column; anything else fails naming both types, and",
        "nothing is written.",
        "",
    ]
    return "\n".join(lines)
