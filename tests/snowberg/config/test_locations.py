"""Configs are found from an argument, the environment or the deployment's include/, never the install location."""

from __future__ import annotations

from pathlib import Path

import pytest

from snowberg.config.locations import ConfigFile, ConfigNotFoundError, config_path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for kind in ConfigFile:
        monkeypatch.delenv(kind.env_var, raising=False)
    (tmp_path / "dags").mkdir()
    (tmp_path / "include").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return tmp_path


def test_an_explicit_path_wins_over_the_environment(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", "/from/env.yaml")
    assert config_path(ConfigFile.TABLES, "/given.yaml") == Path("/given.yaml")
    assert config_path(ConfigFile.TABLES) == Path("/from/env.yaml")


def test_each_config_has_its_own_variable(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNOWBERG_SYNCS_CONFIG", "/s.yaml")
    assert config_path(ConfigFile.SYNCS) == Path("/s.yaml")
    with pytest.raises(ConfigNotFoundError, match="SNOWBERG_TABLES_CONFIG"):
        config_path(ConfigFile.TABLES)


def test_include_beside_the_dag_files_folder_then_the_current_directory(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dag_file = project / "dags" / "snowberg_tables.py"
    (project / "include" / "tables.yaml").write_text("tables: []\n")
    assert config_path(ConfigFile.TABLES, dag_file=dag_file) == project / "include" / "tables.yaml"
    (project / "elsewhere" / "include").mkdir()
    (project / "elsewhere" / "include" / "syncs.yaml").write_text("syncs: []\n")
    assert config_path(ConfigFile.SYNCS, dag_file=dag_file) == project / "elsewhere" / "include" / "syncs.yaml"


def test_nothing_found_names_every_place_tried(project: Path) -> None:
    with pytest.raises(ConfigNotFoundError) as err:
        config_path(ConfigFile.SYNCS, dag_file=project / "dags" / "x.py")
    msg = str(err.value)
    assert "SNOWBERG_SYNCS_CONFIG" in msg
    assert str(project / "include" / "syncs.yaml") in msg and str(project / "elsewhere" / "include") in msg


def test_the_package_never_looks_beside_its_own_files(project: Path) -> None:
    import snowberg

    installed = Path(snowberg.__file__).resolve().parent
    with pytest.raises(ConfigNotFoundError) as err:
        config_path(ConfigFile.TABLES)
    assert str(installed) not in str(err.value)


def test_nothing_found_names_each_place_once_when_the_dag_files_project_is_the_current_directory(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow run from the project folder: include/ beside dags/ and ./include are one place, named once.

    Before the fix the message listed ``<project>/include/tables.yaml`` twice.
    """
    monkeypatch.chdir(project)
    with pytest.raises(ConfigNotFoundError) as err:
        config_path(ConfigFile.TABLES, dag_file=project / "dags" / "snowberg_tables.py")
    assert str(err.value).count(str(project / "include" / "tables.yaml")) == 1, str(err.value)
