"""Fixtures for the lake → Snowflake tests: services are started by the tests and stopped after them.

* ``fakesnow_server``: the Snowflake emulator in server mode (a child process,
  shared by the session; every test gets its own database).
* ``horizon_store``, ``horizon``, ``horizon_conn``: the Horizon-shaped Iceberg
  REST catalog of ``l2s_rest_catalog.py`` and an Airflow connection to it.
* from ``l2s_services.py`` (shared with ``tests/scenarios`` and ``tests/dags``):
  ``connection``, ``snowflake`` (the emulator as an Airflow connection),
  ``moto_endpoint`` and ``s3_bucket`` (moto's S3 and Glue over HTTP), ``lake``
  (a pyiceberg SQL catalog on SQLite in the test's tmp dir).

Airflow connections are given the way deployments give them without a
metadata DB: ``AIRFLOW_CONN_<ID>`` environment variables (JSON).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="snowberg-l2s-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

import l2s_services
from l2s_data import DATABASE, PAT, ROLE

# The shared service fixtures, bound here so that pytest finds them by name for these tests.
connection = l2s_services.connection
snowflake = l2s_services.snowflake
moto_endpoint = l2s_services.moto_endpoint
s3_bucket = l2s_services.s3_bucket
lake = l2s_services.lake


@pytest.fixture
def horizon_store(tmp_path: Path) -> Any:
    """The REST server's own storage, with a target table shaped like one Snowflake created.

    Snowflake stores unquoted names upper-case and maps ``NUMBER(38,0)`` to
    Iceberg ``decimal(38,0)``: ``CREATE ICEBERG TABLE ORDERS (ORDER_ID NUMBER(38,0),
    CUSTOMER STRING, AMOUNT NUMBER(10,2), PLACED_AT TIMESTAMP_LTZ(6))``.
    """
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import DecimalType, NestedField, StringType, TimestamptzType

    wh = tmp_path / "horizon"
    wh.mkdir()
    store = SqlCatalog("horizon_store", uri=f"sqlite:///{wh / 'catalog.db'}", warehouse=f"file://{wh}")
    store.create_namespace("SHOP")
    store.create_table(
        ("SHOP", "ORDERS"),
        schema=Schema(
            NestedField(1, "ORDER_ID", DecimalType(38, 0), required=False),
            NestedField(2, "CUSTOMER", StringType(), required=False),
            NestedField(3, "AMOUNT", DecimalType(10, 2), required=False),
            NestedField(4, "PLACED_AT", TimestamptzType(), required=False),
        ),
        properties={"format-version": "2"},
    )
    return store


@pytest.fixture
def horizon(horizon_store: Any) -> Iterator[Any]:
    from l2s_rest_catalog import HorizonLikeServer

    with HorizonLikeServer(horizon_store, pat=PAT, role=ROLE, database=DATABASE) as srv:
        yield srv


@pytest.fixture
def horizon_conn(connection: Callable[[str, dict[str, Any]], str], horizon: Any) -> str:
    """An Airflow connection as users define it for Horizon (conn_type snowflake, PAT as password).

    ``extra.catalog_uri`` points the catalog at the local server instead of
    ``https://<account>.snowflakecomputing.com/polaris/api/catalog``.
    """
    return connection(
        "snowflake_horizon",
        {
            "conn_type": "snowflake",
            "login": "SYNC_USER",
            "password": PAT,
            "extra": {
                "account": "myorg-myacct",
                "role": ROLE,
                "database": DATABASE,
                "warehouse": "SYNC_WH",
                "catalog_uri": horizon.uri,
            },
        },
    )


# ---------------------------------------------------------------------------
# Snowflake emulator


@pytest.fixture(scope="session")
def fakesnow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from snowberg.local.stack import FakesnowServer

    server = FakesnowServer(tmp_path_factory.mktemp("fakesnow") / "db")
    server.start()
    try:
        yield server
    finally:
        server.stop()
