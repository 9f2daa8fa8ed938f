"""``columns`` through Airflow's own runner (``dag.test``): the DAG factory passes the section to every task that
reads the source, the hook sets the salt from its Airflow Variable, and the salt stays out of the task logs."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest

from snowberg.config.table_config import parse_config

SALT = "salt-Very-Secret-91c2"


@pytest.fixture
def hashed_table(sfdb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str, catalog_env: Any) -> Any:
    import yaml

    sfdb.sql(
        f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), EMAIL VARCHAR, SSN VARCHAR, UPDATED_AT TIMESTAMP_NTZ)"
    )
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} VALUES (1, 'ann@example.org', '111-22-3333', '2026-01-01 00:00:01'), "
        "(2, 'bob@example.org', '444-55-6666', '2026-01-01 00:00:02')"
    )
    monkeypatch.setenv("AIRFLOW_CONN_SF_COLS", sfdb.airflow_connection())
    catalog_env("colscat")
    entry = {
        "name": f"cols_{sfdb.name.lower()}",
        "source": {"table": sfdb.table("SRC")},
        "target": f"cols.{sfdb.name.lower()}",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "columns": {"exclude": ["ssn"], "hash": ["email"]},
        "snowflake_conn_id": "sf_cols",
        "catalog": "colscat",
        "retries": 0,
    }
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(Path(__file__).resolve().parents[4] / "dags" / "snowberg_tables.py", dags)
    (tmp_path / "tables.yaml").write_text(yaml.safe_dump({"tables": [entry]}))
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(tmp_path / "tables.yaml"))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    return parse_config({"tables": [entry]}).tables[0]


def _dag(cfg: Any) -> Any:
    import os

    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    return bag.dags[cfg.dag_id]


@pytest.mark.slow
def test_a_dag_run_loads_hashed_and_without_excluded_columns_and_never_logs_the_salt(
    hashed_table: Any,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from snowberg.iceberg.catalogs import open_catalog

    cfg = hashed_table
    caplog.set_level("DEBUG")
    monkeypatch.delenv("AIRFLOW_VAR_SNOWBERG_HASH_SALT", raising=False)
    failed = _dag(cfg).test()
    assert failed.state == "failed"
    assert "Airflow Variable 'snowberg_hash_salt' is missing" in "".join(capfd.readouterr()) + caplog.text

    monkeypatch.setenv("AIRFLOW_VAR_SNOWBERG_HASH_SALT", SALT)
    caplog.clear()
    dr = _dag(cfg).test()
    assert dr.state == "success"
    out = capfd.readouterr()
    assert SALT not in out.out + out.err + caplog.text
    rows = open_catalog("colscat").load_table(cfg.target).scan().to_arrow().to_pylist()
    assert sorted(r["email"] for r in rows) == sorted(
        hashlib.sha256(f"{e}{SALT}".encode()).hexdigest() for e in ("ann@example.org", "bob@example.org")
    )
    assert all("ssn" not in r for r in rows)
