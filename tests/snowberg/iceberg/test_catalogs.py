"""``iceberg`` connections (the Apache Iceberg provider's type) as a table's ``catalog:``, on a SQL catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from snowberg.iceberg.catalogs import open_catalog


def test_an_iceberg_connection_with_a_sql_catalog_works_as_a_tables_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wh = tmp_path / "wh"
    wh.mkdir()
    conn = {
        "conn_type": "iceberg",
        "extra": {"type": "sql", "uri": f"sqlite:///{tmp_path / 'cat.db'}", "warehouse": f"file://{wh}"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_ICEBERG", json.dumps(conn))
    cat = open_catalog("lake_iceberg")
    assert type(cat).__name__ == "SqlCatalog" and cat.name == "lake_iceberg"
    cat.create_namespace("shop")
    # A second open (another task) sees what the first one created: the same catalog.
    assert ("shop",) in open_catalog("lake_iceberg").list_namespaces()


def test_a_table_config_accepts_the_connection_id_as_its_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snowberg.config.table_config import parse_config
    from snowberg.iceberg.catalogs import open_catalog as lake_catalog

    (tmp_path / "wh").mkdir()
    monkeypatch.setenv(
        "AIRFLOW_CONN_ICE",
        json.dumps(
            {
                "conn_type": "iceberg",
                "extra": {"type": "sql", "uri": f"sqlite:///{tmp_path / 'c.db'}", "warehouse": f"file://{tmp_path}/wh"},
            }
        ),
    )
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "t",
                    "source": {"table": "DB.S.T"},
                    "target": "n.t",
                    "catalog": "ice",
                    "cursor": {"column": "u"},
                }
            ]
        }
    ).tables[0]
    assert type(lake_catalog(cfg.catalog)).__name__ == "SqlCatalog"


def test_a_sql_catalog_created_by_another_process_at_the_same_time_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first tasks of several DAGs open a new SQLite catalog at once; one loses the CREATE TABLE race."""
    import pyiceberg.catalog as pc

    real = pc.load_catalog
    calls: list[str] = []

    def racing(name: str, **props: object) -> object:
        calls.append(name)
        if len(calls) == 1:
            real(name, **props)  # the other process created the tables just before us ...
            raise RuntimeError("(sqlite3.OperationalError) table iceberg_tables already exists")
        return real(name, **props)

    monkeypatch.setattr(pc, "load_catalog", racing)
    monkeypatch.setenv("PYICEBERG_CATALOG__RACE__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__RACE__URI", f"sqlite:///{tmp_path / 'c.db'}")
    monkeypatch.setenv("PYICEBERG_CATALOG__RACE__WAREHOUSE", f"file://{tmp_path}")
    cat = open_catalog("race")
    assert cat.list_namespaces() == [] and len(calls) == 2


def test_an_adls_sas_token_keyed_by_account_is_a_secret() -> None:
    """``adls.sas-token.<account>``: the last dotted part is the account name, not a secret-looking word."""
    from snowberg.iceberg.catalogs import redacted, secret_values

    props = {"adls.sas-token.myaccount": "sv=2024&sig=abc123", "adls.account-name": "myaccount"}
    assert secret_values(props) == ["sv=2024&sig=abc123"]
    assert redacted(props) == {"adls.sas-token.myaccount": "***", "adls.account-name": "myaccount"}
