"""docs/lakes.md promises which lakes are tested and how: every cell must name a test that exists.

The feature table's cells name tests by a short name and a parameter
(``LC[glue_s3]``); the short names are defined in the page. pytest collects the
named files, and every cell's node id must be among the collected ones; every
life-cycle step the table names must be a step the scenario runs. The
connection recipes must have the fields of the connections the tests use.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lakes import LakeBackend, connection_for

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "lakes.md"
LIFE_CYCLE = ROOT / "tests" / "scenarios" / "test_lake_life_cycle.py"

_SHORT = re.compile(r"^- `(?P<short>[A-Z][A-Z_0-9]*)` = `(?P<func>tests/[^`]+\.py::[A-Za-z_0-9]+)`$", re.M)
_CELL = re.compile(r"`(?P<short>[A-Z][A-Z_0-9]*)\[(?P<param>[a-z0-9_\-]+)\]`")


def _table_rows(text: str) -> list[list[str]]:
    """The rows of the backend × feature table (the one whose header has a ``step`` column)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| feature | step |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def named_tests(text: str) -> set[str]:
    shorts = {m["short"]: m["func"] for m in _SHORT.finditer(text)}
    ids = set()
    for row in _table_rows(text):
        for cell in row[2:]:
            found = list(_CELL.finditer(cell))
            assert found or cell.startswith("—"), f"cell {cell!r} names no test and gives no reason"
            for m in found:
                assert m["short"] in shorts, f"{m['short']} is not defined in the page"
                ids.add(f"{shorts[m['short']]}[{m['param']}]")
    return ids


def test_every_cell_names_a_test_that_exists() -> None:
    text = DOC.read_text()
    ids = named_tests(text)
    assert len(ids) >= 20
    files = sorted({i.split("::")[0] for i in ids})
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    collected = {line.strip() for line in out.stdout.splitlines() if "::" in line}
    assert collected, out.stdout[-3000:] + out.stderr[-3000:]
    missing = sorted(ids - collected)
    assert not missing, f"docs/lakes.md names tests that do not exist: {missing}"


def test_every_step_the_table_names_is_a_step_of_the_life_cycle() -> None:
    steps = set(re.findall(r'sc\.step\(\s*"([^"]+)"', LIFE_CYCLE.read_text()))
    for row in _table_rows(DOC.read_text()):
        step = row[1].strip("`")
        if step:
            assert step in steps, f"docs/lakes.md names step {step!r}; the scenario's steps are {sorted(steps)}"


def test_a_cell_naming_a_missing_test_is_caught() -> None:
    """The check itself: an undefined short name fails it."""
    bad = DOC.read_text().replace("`MERGE[glue_s3]`", "`NOPE[glue_s3]`")
    with pytest.raises(AssertionError, match="NOPE is not defined"):
        named_tests(bad)


def _recipes(text: str) -> dict[str, dict[str, object]]:
    out = {}
    for m in re.finditer(r"^`(?P<backend>[a-z0-9_]+)` — .*?```json\n(?P<json>.*?)```", text, re.M | re.S):
        out[m["backend"]] = json.loads(m["json"])
    return out


@pytest.mark.parametrize("backend", list(LakeBackend))
def test_each_recipe_has_the_fields_of_the_connection_its_tests_use(backend: LakeBackend) -> None:
    recipe = _recipes(DOC.read_text())[backend.value]
    used = connection_for(
        backend,
        warehouse="s3://bucket/prefix",
        endpoint="http://127.0.0.1:1",
        key_id="AKIA",
        secret="s",
        catalog_db="db",
        catalog_uri="http://127.0.0.1:1/polaris/api/catalog",
    )
    assert recipe["conn_type"] == used["conn_type"]
    assert set(recipe) == set(used)
    assert set(recipe["extra"]) == set(used["extra"])  # type: ignore[arg-type]
