"""The example project shipped in the package, ``snowberg init``, and the repo's own dags/ and include/."""

from __future__ import annotations

from pathlib import Path

import pytest

from snowberg.cli import main
from snowberg.config.examples import ExampleConflictError, FileAction, example_files, plan_examples, write_examples

REPO = Path(__file__).resolve().parents[3]


def test_the_repository_runs_the_example_project_the_package_ships() -> None:
    """dags/ and include/ of this repository are byte for byte the packaged examples: one copy cannot drift.

    To change a DAG file or an example config, edit both (or edit plugins/snowberg/examples/ and run
    ``snowberg init --force .`` from the repository root).
    """
    shipped = example_files()
    repo = {
        f"{folder}/{p.name}": p.read_bytes()
        for folder, pattern in (("dags", "*.py"), ("include", "*.yaml"))
        for p in sorted((REPO / folder).glob(pattern))
    }
    assert sorted(repo) == sorted(shipped)
    for rel, content in shipped.items():
        assert repo[rel] == content, f"{rel} differs from plugins/snowberg/examples/{rel}"
    assert plan_examples(REPO) and all(f.action is FileAction.UNCHANGED for f in plan_examples(REPO))


def test_the_dag_files_are_two_lines_calling_the_package() -> None:
    for rel, content in example_files().items():
        if rel.startswith("dags/"):
            lines = content.decode().splitlines()
            assert len(lines) == 3 and lines[1] == "", rel  # import, blank line, globals().update(build_…)
            assert lines[0].startswith("from snowberg.") and lines[2].startswith("globals().update(build_"), rel
            assert "dag_file=__file__" in lines[2], rel


def test_init_writes_the_project_then_leaves_it_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "proj")]) == 0
    written = {str(p.relative_to(tmp_path / "proj")): p.read_bytes() for p in (tmp_path / "proj").rglob("*.*")}
    assert written == example_files()
    assert "create" in capsys.readouterr().out
    assert main(["init", str(tmp_path / "proj")]) == 0
    out = capsys.readouterr().out
    assert out.count("unchanged") == len(written) and "create" not in out


def test_init_refuses_to_overwrite_an_edited_file_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "tables.yaml").write_text("tables: []\n")
    assert main(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "include/tables.yaml" in err and "--force" in err
    assert not (tmp_path / "dags").exists()  # all or nothing
    with pytest.raises(ExampleConflictError):
        write_examples(tmp_path)
    plan = write_examples(tmp_path, force=True)
    assert {f.relative: f.action for f in plan}["include/tables.yaml"] is FileAction.OVERWRITE
    assert (tmp_path / "include" / "tables.yaml").read_bytes() == example_files()["include/tables.yaml"]


def test_every_file_the_example_configs_name_exists_in_the_project_they_are_written_into(tmp_path: Path) -> None:
    """A deployed project has no snowberg checkout: what a comment names must be there (or be made by the command
    the comment gives, ``snowberg docs --root .``).

    Before the fix tables.yaml named docs/configuration.md and docs/streams.md, syncs.yaml docs/lake-to-snowflake.md:
    files of this repository that `snowberg init` never writes.
    """
    import re

    project = tmp_path / "proj"
    assert main(["init", str(project)]) == 0
    assert main(["docs", "--root", str(project)]) == 0
    named = {
        (rel, m)
        for rel, content in example_files().items()
        if rel.startswith("include/")
        for line in content.decode().splitlines()
        if "#" in line
        for m in re.findall(r"\b(?:docs|schemas|dags|include)/[\w.*/-]*\w", line.split("#", 1)[1])
    }
    assert named, "the examples name no file at all: this test would pass for nothing"
    missing = [(rel, m) for rel, m in sorted(named) if not list(project.glob(m))]
    assert missing == []
