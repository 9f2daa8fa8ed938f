"""The mutant list of scripts/mutants.py stays well-formed as the core changes (the script itself is not run here).

Every mutant's old text must occur exactly once in its module: when code moves
or is reworded, a mutant that no longer applies fails this test instead of
silently counting as "error" in the next mutation run.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mutants.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("snowberg_mutants_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


mutants = _load()


def test_every_mutant_applies_exactly_once_and_names_existing_tests() -> None:
    assert mutants.check_mutants() == []


def test_the_list_covers_every_guarded_module_with_enough_mutants() -> None:
    assert len(mutants.CORE_MUTANTS) >= 40 and len(mutants.LAST_ROUND_MUTANTS) >= 45
    assert {m.file for m in mutants.MUTANTS} == set(mutants.MODULES)
    assert {m.file for m in mutants.CORE_MUTANTS} == set(mutants.CORE)
    # every module of the last round has its own mutants (state.py's are new ones in a core module)
    assert {m.module for m in mutants.LAST_ROUND_MUTANTS} == set(mutants.LAST_ROUND) | {"iceberg/state.py"}


def test_a_mutant_whose_text_moved_or_repeats_is_reported(tmp_path: Path) -> None:
    good = mutants.MUTANTS[0]
    moved = mutants.Mutant(id="moved", file=good.file, old=good.old + "#gone", new="x", tests=good.tests, breaks="-")
    twice = mutants.Mutant(id="twice", file="load/plan.py", old="\n", new="", tests=good.tests, breaks="-")
    no_test = mutants.Mutant(
        id="no-test", file=good.file, old=good.old, new=good.new, tests=(f"{good.tests[0]}::test_nope",), breaks="-"
    )
    problems = mutants.check_mutants([moved, twice, no_test])
    assert [p.split(":")[0] for p in problems] == ["moved", "twice", "no-test"]
    assert "occurs 0 times" in problems[0] and "must be exactly once" in problems[1]


@pytest.mark.parametrize("m", mutants.MUTANTS, ids=lambda m: m.id)
def test_each_mutant_changes_its_module_and_still_parses(m: object) -> None:
    """A mutant that does not compile would be 'killed' by an import error, which proves nothing about the tests."""
    import ast

    text = (mutants.PACKAGE / m.file).read_text()  # type: ignore[attr-defined]
    mutated = text.replace(m.old, m.new)  # type: ignore[attr-defined]
    assert mutated != text
    ast.parse(mutated)
