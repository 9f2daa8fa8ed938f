"""The configs a project's DAG files read, found by reading the files, resolved as the builders resolve them."""

from __future__ import annotations

from pathlib import Path

import pytest

from snowberg.config.dag_files import dag_file_configs
from snowberg.config.examples import write_examples
from snowberg.config.locations import ConfigFile


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for kind in ConfigFile:
        monkeypatch.delenv(kind.env_var, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_example_projects_dag_files_read_the_configs_beside_them(project: Path) -> None:
    write_examples(project / "p", force=False)
    uses = dag_file_configs(project / "p" / "dags")
    found = {(u.dag_file.name, u.builder, u.kind, u.path) for u in uses}
    include = project / "p" / "include"
    assert found == {
        ("snowberg_demo_summary.py", "build_summary_dags", ConfigFile.SUMMARY, include / "demo_summary.yaml"),
        ("snowberg_demo_summary.py", "build_summary_dags", ConfigFile.TABLES, include / "tables.yaml"),
        ("snowberg_syncs.py", "build_sync_dags", ConfigFile.SYNCS, include / "syncs.yaml"),
        ("snowberg_tables.py", "build_dags", ConfigFile.TABLES, include / "tables.yaml"),
    }
    assert not [u for u in uses if u.problem or u.note]


def test_a_missing_config_a_computed_path_and_the_environment(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dags = project / "dags"
    dags.mkdir()
    (dags / "a.py").write_text(
        "import os\nfrom snowberg.airflow.sync_dags import build_sync_dags\n"
        "build_sync_dags(config=os.environ['X'])\n"
        "build_sync_dags(None, dag_file=__file__)\n"
    )
    (dags / "broken.py").write_text("def (:\n")  # Airflow reports it; not a config problem
    uses = dag_file_configs(dags)
    assert [(u.line, u.note is not None, u.problem is not None) for u in uses] == [(3, True, False), (4, False, True)]
    assert uses[0].note == "build_sync_dags's syncs.yaml is computed at parse time: not checked here"
    assert uses[1].problem is not None and uses[1].problem.startswith("build_sync_dags finds no syncs.yaml: ")
    monkeypatch.setenv("SNOWBERG_SYNCS_CONFIG", str(project / "s.yaml"))
    (project / "s.yaml").write_text("syncs: []\n")
    assert dag_file_configs(dags)[1].path == project / "s.yaml"
