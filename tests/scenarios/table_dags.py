"""The DAGs of one table entry as the dag-processor builds them: the repo's DAG file in a DAG folder of its own."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml


def table_dags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: dict[str, Any]) -> dict[str, Any]:
    """``dags/snowberg_tables.py`` parsed with a tables config of ``entry`` alone; the DAGs by id."""
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "dags" / "snowberg_tables.py", dags)
    (tmp_path / "tables.yaml").write_text(yaml.safe_dump({"tables": [entry]}))
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(tmp_path / "tables.yaml"))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(dags))
    assert not bag.import_errors, bag.import_errors
    return dict(bag.dags)
