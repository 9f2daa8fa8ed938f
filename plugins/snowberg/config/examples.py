"""The example project shipped inside the package: two-line DAG files and ``include/*.yaml``.

A deployment installs snowberg as a wheel and needs its own ``dags/`` and
``include/`` (an Airflow or Astro project, an image, a Helm ConfigMap).
``snowberg init DIR`` writes them from here, so nobody copies files out of a
source checkout. The repository's own ``dags/`` and ``include/`` are the same
files (a test keeps them identical), so the quick start runs what users get.

Files are read with ``importlib.resources`` from the installed package: nothing
is located through a path of the source tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

FOLDERS = ("dags", "include")
SUFFIXES = {"dags": ".py", "include": ".yaml"}


class FileAction(StrEnum):
    """What ``write_examples`` did (or would do) with one file."""

    CREATE = "create"
    UNCHANGED = "unchanged"
    OVERWRITE = "overwrite"
    CONFLICT = "conflict"  # exists with other content, and overwriting was not asked for


@dataclass(frozen=True, kw_only=True)
class ExampleFile:
    relative: str  # e.g. "dags/snowberg_tables.py"
    action: FileAction


class ExampleConflictError(FileExistsError):
    """A file of the example project exists with other content; nothing was written."""


def example_files() -> dict[str, bytes]:
    """Every example file by its path relative to a project root (``dags/…``, ``include/…``)."""
    root: Traversable = files("snowberg") / "examples"
    out: dict[str, bytes] = {}
    for folder in FOLDERS:
        for item in sorted((root / folder).iterdir(), key=lambda t: t.name):
            if item.is_file() and item.name.endswith(SUFFIXES[folder]):
                out[f"{folder}/{item.name}"] = item.read_bytes()
    if not out:
        raise FileNotFoundError("snowberg's example project is missing from the installed package")
    return out


def plan_examples(project: Path, *, force: bool = False) -> list[ExampleFile]:
    """What writing the examples into ``project`` would do to each file."""
    plan = []
    for rel, content in example_files().items():
        path = project / rel
        if not path.exists():
            action = FileAction.CREATE
        elif path.is_file() and path.read_bytes() == content:
            action = FileAction.UNCHANGED
        else:
            action = FileAction.OVERWRITE if force else FileAction.CONFLICT
        plan.append(ExampleFile(relative=rel, action=action))
    return plan


def write_examples(project: Path, *, force: bool = False) -> list[ExampleFile]:
    """Write the example project into ``project``; refuse, writing nothing, when a file differs and not ``force``."""
    plan = plan_examples(project, force=force)
    conflicts = [f.relative for f in plan if f.action is FileAction.CONFLICT]
    if conflicts:
        raise ExampleConflictError(
            f"{project}: these files differ from the example project: {', '.join(conflicts)}; nothing written "
            "(--force overwrites them)"
        )
    content = example_files()
    for f in plan:
        if f.action in (FileAction.CREATE, FileAction.OVERWRITE):
            path = project / f.relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content[f.relative])
    return plan
