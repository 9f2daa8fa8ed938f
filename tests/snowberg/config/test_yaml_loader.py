"""Reading tables.yaml / syncs.yaml alike: defaults merged, the shape checked, errors naming entry and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from snowberg.config.table_config import ConfigError, load_config
from snowberg.config.yaml_loader import (
    entry_label,
    format_validation_error,
    merged_entries,
    read_yaml,
    validate_entries,
)


class BadFile(Exception):
    pass


class Thing(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    size: int = Field(default=1, ge=1)
    colour: str = "red"


class Things(BaseModel):
    things: list[Thing]


def test_defaults_apply_to_every_entry_and_an_entry_overrides_them(tmp_path: Path) -> None:
    p = tmp_path / "t.yaml"
    p.write_text(
        "defaults: {owner: team-x, retries: 5, catalog: glue}\n"
        "tables:\n"
        "  - {name: a, source: {table: D.S.A}, target: n.a, cursor: {column: u}}\n"
        "  - {name: b, source: {table: D.S.B}, target: n.b, cursor: {column: u}, retries: 1}\n"
    )
    a, b = load_config(p).tables
    assert (a.owner, a.retries, a.catalog) == ("team-x", 5, "glue")
    assert b.retries == 1


def test_a_file_that_is_not_yaml_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    p = tmp_path / "t.yaml"
    p.write_text("tables: [\n")
    with pytest.raises(ConfigError, match=f"{p}: not valid YAML"):
        load_config(p)


def test_read_yaml_returns_the_documents_data(tmp_path: Path) -> None:
    p = tmp_path / "x.yaml"
    p.write_text("things:\n  - {name: a, size: 2}\n")
    assert read_yaml(p, BadFile) == {"things": [{"name": "a", "size": 2}]}


def test_read_yaml_raises_the_callers_error_type(tmp_path: Path) -> None:
    p = tmp_path / "x.yaml"
    p.write_text("things: {a: [\n")
    with pytest.raises(BadFile, match=f"^{p}: not valid YAML"):
        read_yaml(p, BadFile)


def test_defaults_are_merged_under_each_entry_and_non_mappings_pass_through() -> None:
    data = {"defaults": {"colour": "blue", "size": 3}, "things": [{"name": "a"}, {"name": "b", "size": 9}, "odd"]}
    assert merged_entries(data, list_key="things", source="x.yaml", error=BadFile) == [
        {"colour": "blue", "size": 3, "name": "a"},
        {"colour": "blue", "size": 9, "name": "b"},
        "odd",
    ]


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (["a"], "x.yaml: expected a mapping with 'things'"),
        ({"things": [{"name": "a"}], "thing": []}, "x.yaml: unknown top-level key(s) ['thing']"),
        ({"defaults": "blue", "things": [{"name": "a"}]}, "x.yaml: 'defaults' must be a mapping"),
        ({"things": []}, "x.yaml: 'things' must be a non-empty list"),
        ({"things": {"name": "a"}}, "x.yaml: 'things' must be a non-empty list"),
        ({}, "x.yaml: 'things' must be a non-empty list"),
    ],
)
def test_a_file_of_the_wrong_shape_is_refused_before_any_entry(data: Any, words: str) -> None:
    with pytest.raises(BadFile) as exc:
        merged_entries(data, list_key="things", source="x.yaml", error=BadFile)
    assert str(exc.value) == words


def test_valid_entries_come_back_as_the_model() -> None:
    out = validate_entries(
        {"defaults": {"size": 2}, "things": [{"name": "a"}, {"name": "b", "colour": "green"}]},
        Things,
        list_key="things",
        entity="thing",
        source="x.yaml",
        error=BadFile,
    )
    assert [(t.name, t.size, t.colour) for t in out.things] == [("a", 2, "red"), ("b", 2, "green")]


def test_every_invalid_entry_is_named_with_its_field_in_one_error() -> None:
    with pytest.raises(BadFile) as exc:
        validate_entries(
            {"things": [{"name": "a", "size": 0}, {"size": 2}, {"name": "c", "shade": "dark"}]},
            Things,
            list_key="things",
            entity="thing",
            source="x.yaml",
            error=BadFile,
        )
    lines = str(exc.value).splitlines()
    assert lines[0] == "x.yaml: invalid snowberg things config:"
    assert lines[1:] == [
        "  thing 'a': field 'size': Input should be greater than or equal to 1",
        "  thing '#1': field 'name': Field required",
        "  thing 'c': field 'shade': unknown key",
    ]


def test_an_entry_is_labelled_by_its_name_cut_to_length_else_its_position() -> None:
    assert entry_label({"name": "orders"}, 3) == "orders"
    assert entry_label({"name": 7}, 3) == "#3"
    assert entry_label("not a mapping", 0) == "#0"
    long = entry_label({"name": "n" * 10_000}, 0)
    assert long.startswith("nnn") and len(long) < 200


def test_format_counts_positions_from_the_given_first_index_and_hides_internal_locations() -> None:
    class Wrapped(BaseModel):
        things: list[Thing]

    raw = [{"size": "big"}]
    with pytest.raises(ValidationError) as exc:
        Wrapped.model_validate({"things": raw})
    msg = format_validation_error(raw, exc.value, list_key="things", entity="thing", first_index=4)
    assert "thing '#4': field 'size': Input should be a valid integer" in msg
    assert "thing '#4': field 'name': Field required" in msg
    hidden = format_validation_error(raw, exc.value, list_key="things", entity="thing", hidden_locs={"size"})
    assert "field '<entry>': Input should be a valid integer" in hidden


def test_locate_yaml_records_the_line_of_every_key_and_list_item() -> None:
    from snowberg.config.yaml_loader import locate_yaml

    doc = locate_yaml(
        "# comment\n"
        "defaults: &base\n"
        "  owner: x\n"
        "  retries: 2\n"
        "tables:\n"
        "  - name: a\n"
        "    <<: *base\n"
        "    retries: 3\n"
        "    cursor:\n"
        "      column: u\n"
        "  - {name: b, target: n.b}\n"
    )
    assert doc.data["tables"][0] == {"owner": "x", "retries": 3, "name": "a", "cursor": {"column": "u"}}
    assert doc.lines[("tables", 0)] == 6 and doc.lines[("tables", 1)] == 11
    assert doc.lines[("tables", 0, "retries")] == 8  # the entry's own value wins over the merged one, as in the data
    assert doc.lines[("tables", 0, "owner")] == 3  # merged from the anchor: where it is written
    assert doc.lines[("tables", 0, "cursor", "column")] == 10 and doc.lines[("tables", 1, "target")] == 11
    assert doc.line_of(("tables", 0, "cursor", "lookback")) == 9  # not written: the nearest enclosing value
    assert doc.duplicates == []


def test_locate_yaml_finds_keys_written_twice_but_not_keys_overriding_a_merge() -> None:
    from snowberg.config.yaml_loader import DuplicateKey, locate_yaml

    doc = locate_yaml("a: &x {k: 1}\nb:\n  <<: *x\n  k: 2\n  j: 1\n  j: 2\n")
    assert doc.data == {"a": {"k": 1}, "b": {"k": 2, "j": 2}}
    assert doc.duplicates == [DuplicateKey(path=("b", "j"), first_line=5, line=6)]


def test_locate_yaml_of_an_empty_document_and_a_syntax_error() -> None:
    import yaml

    from snowberg.config.yaml_loader import locate_yaml

    assert locate_yaml("# nothing\n").data is None
    with pytest.raises(yaml.MarkedYAMLError) as exc:
        locate_yaml("a: [1,\nb: 2\n")
    assert exc.value.problem_mark is not None and exc.value.problem_mark.line + 1 == 3
