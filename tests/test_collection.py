"""The suite can be collected in one process: no two test modules share an import name.

pytest imports a test file outside a package under its basename ("rootdir" import
mode), so ``sync/test_keys.py`` and ``iceberg/test_keys.py`` cannot both be
collected by one worker: the second fails with "import file mismatch". A run in
one order passes and a run in another errors, so this checks the names, not a run.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def import_name(path: Path) -> str:
    """The module name pytest gives a test file: dotted from the first folder upward without ``__init__.py``."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def test_no_two_test_modules_share_an_import_name() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        by_name[import_name(path)].append(str(path.relative_to(TESTS)))
    clashes = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"rename one of each (pytest collects only the first in a process): {clashes}"


def test_the_check_sees_a_clash(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "__init__.py").write_text("")
    assert import_name(tmp_path / "a" / "test_x.py") == "test_x"
    assert import_name(tmp_path / "b" / "test_x.py") == "b.test_x"
