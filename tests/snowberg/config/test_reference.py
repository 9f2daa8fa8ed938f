"""The configuration reference and the JSON Schemas are the models' own, and the checked-in copies are current."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError

from snowberg.config.reference import attribute_docs, enum_meanings, file_schema, render_reference, sections
from snowberg.config.validate import TABLES
from snowberg.core.durations import parse_duration
from snowberg.sync.specs import SPECS, SYNCS

REPO = Path(__file__).resolve().parents[3]


def all_models() -> list[type[BaseModel]]:
    return list(dict.fromkeys(s.model for spec in SPECS for s in sections(spec.model, spec.list_key)))


def test_every_field_of_every_config_model_has_a_description() -> None:
    """A field without a docstring under it would reach the reference and the editors with no meaning."""
    missing = [
        f"{m.__module__}.{m.__qualname__}.{name}"
        for m in all_models()
        for name in m.model_fields
        if not attribute_docs(m).get(name)
    ]
    assert missing == [], "write a docstring under each of these fields: " + ", ".join(missing)


def test_attribute_docs_reads_the_string_under_each_field_and_nothing_else() -> None:
    class Example(BaseModel):
        """Class docstring."""

        a: int = 1
        """About a,
        on two lines."""
        b: int = 2  # a comment is not a description
        c: str = "x"
        """About c."""

    assert attribute_docs(Example) == {"a": "About a,\non two lines.", "c": "About c."}


def test_every_closed_set_value_has_a_meaning_in_the_reference() -> None:
    text = render_reference(SPECS)
    closed = text.split("## Closed sets", 1)[1]
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", closed, re.MULTILINE)
    assert rows and all(meaning.strip() for _, meaning in rows), [v for v, m in rows if not m.strip()]
    from snowberg.config.table_config import NullCursorPolicy

    assert enum_meanings(NullCursorPolicy)["include"].startswith("load them on every run; requires a primary key")


def section_rows(text: str, title: str) -> dict[str, tuple[str, str, str]]:
    body = text.split(f"### {title}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    return {m[0]: (m[1], m[2], m[3]) for m in re.findall(r"^\| `(\w+)` \| (.*?) \| (.*?) \| (.*) \|$", body, re.M)}


def test_the_reference_lists_every_field_of_every_section_with_its_default() -> None:
    text = render_reference(SPECS)
    for spec in SPECS:
        for s in sections(spec.model, f"{spec.list_key}[]"):
            if f"### {s.title}\n" not in text:  # a model shown once (alerts: under tables, linked from syncs)
                assert s.model in {x.model for x in sections(TABLES.model, "tables[]")}, s.title
                continue
            rows = section_rows(text, s.title)
            assert list(rows) == list(s.model.model_fields), s.title
            for name, f in s.model.model_fields.items():
                _, default, _ = rows[name]
                expected = f.get_default(call_default_factory=True)
                if f.is_required():
                    assert default == "required"
                elif expected is None:
                    assert default == "—"
                elif isinstance(expected, timedelta):
                    assert parse_duration(default.strip("`")) == expected, (s.title, name)
                elif isinstance(expected, bool):
                    assert default == f"`{str(expected).lower()}`"
                elif isinstance(expected, (int, float)) and "size" not in rows[name][0]:
                    assert float(default.strip("`")) == expected, (s.title, name)


def test_the_reference_says_what_the_issue_found_undocumented() -> None:
    """Shallow defaults, stream.create's default and the daily maintenance DAG of every table."""
    text = render_reference(SPECS)
    assert "into every entry **per top-level key**" in text
    assert section_rows(text, "`tables[].stream`")["create"][1] == "`false`"
    maintenance = section_rows(text, "`tables[].maintenance`")
    assert maintenance["enabled"][1] == "`true`" and maintenance["schedule"][1] == "`@daily`"
    assert "built for every table unless disabled" in section_rows(text, "`tables[]`")["maintenance"][2]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.file)
def test_the_checked_in_generated_files_are_current(spec: Any) -> None:
    from snowberg.cli import generated_files

    for rel, render in generated_files().items():
        assert (REPO / rel).read_text() == render(), f"run `snowberg docs` to regenerate {rel}"
    assert json.loads((REPO / spec.schema_file).read_text()) == file_schema(spec)


@cache
def validator(spec: Any) -> Draft202012Validator:
    schema = file_schema(spec)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_the_schemas_accept_the_shipped_configs() -> None:
    for spec in SPECS:
        data = yaml.safe_load((REPO / "include" / spec.file).read_text())
        errors = [e.message for e in validator(spec).iter_errors(data)]
        assert errors == [], (spec.file, errors)


TABLE = {"name": "a", "source": {"table": "D.S.T"}, "target": "n.a"}
SYNC = {"name": "s", "source": {"catalog": "lake", "table": "n.a"}, "target": {"kind": "native", "table": "D.S.T"}}


@pytest.mark.parametrize(
    ("spec", "entry", "valid"),
    [
        (TABLES, TABLE, True),
        (TABLES, {**TABLE, "primary_key": ["id"], "cursor": {"column": "u", "lookback": "1h", "commit_lag": 5}}, True),
        (TABLES, {**TABLE, "partition_by": ["day(u)", {"column": "k", "transform": "bucket[4]"}]}, True),
        (TABLES, {**TABLE, "health": {"small_file_size": "32MiB"}, "retry_delay": 90}, True),
        (TABLES, {**TABLE, "colour": "red"}, False),
        (TABLES, {**TABLE, "cursor": {"column": "u", "lookbak": "1h"}}, False),
        (TABLES, {**TABLE, "merge_strategy": "copy-on-write"}, False),
        (TABLES, {**TABLE, "retries": 21}, False),
        (TABLES, {**TABLE, "stream": {"name": "D.S.X", "create": "yes please"}}, False),
        (TABLES, {"source": {"table": "D.S.T"}, "target": "n.a"}, False),
        (SYNCS, SYNC, True),
        (SYNCS, {**SYNC, "target": {"kind": "native", "table": "D.S.T", "key_columns": ["id"]}}, False),
        (SYNCS, {**SYNC, "key_columns": ["id", "region"]}, True),
        (SYNCS, {**SYNC, "key_columns": "id"}, False),
        (SYNCS, {**SYNC, "target": {"kind": "parquet", "table": "D.S.T"}}, False),
        (SYNCS, {**SYNC, "on_rewrite": "reload"}, False),
    ],
)
def test_the_schema_and_the_model_agree_on_keys_types_and_closed_sets(
    spec: Any, entry: dict[str, Any], valid: bool
) -> None:
    doc = {spec.list_key: [entry]}
    schema_ok = validator(spec).is_valid(doc)
    try:
        spec.model.model_validate(entry)
        model_ok = True
    except ValidationError:
        model_ok = False
    assert (schema_ok, model_ok) == (valid, valid)


def test_defaults_in_the_schema_take_any_entry_field_and_nothing_else() -> None:
    v = validator(TABLES)
    assert v.is_valid({"defaults": {"catalog": "glue", "retries": 3}, "tables": [TABLE]})
    assert not v.is_valid({"defaults": {"catalogue": "glue"}, "tables": [TABLE]})
    assert not v.is_valid({"defaults": {}, "tables": []})
    assert not v.is_valid({"tables": [TABLE], "other": 1})


def test_each_schema_field_carries_the_models_description() -> None:
    schema = file_schema(TABLES)
    cursor = schema["$defs"]["Cursor"]["properties"]["timezone"]
    assert cursor["description"].startswith("The IANA zone whose wall clock writes a TIMESTAMP_NTZ cursor")
    assert "``" not in json.dumps(schema)  # RST literals become Markdown code spans for the editors
