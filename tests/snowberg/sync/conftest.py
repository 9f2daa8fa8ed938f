"""Fixtures for the lake → Snowflake tests: services are started by the tests and stopped after them.

* ``fakesnow``: the Snowflake emulator in server mode (a child process, shared
  by the session; every test gets its own database).
* ``moto``: S3 and Glue endpoints over HTTP (moto's threaded server).
* ``horizon``: the Horizon-shaped Iceberg REST catalog of ``rest_catalog.py``.
* ``lake``: a pyiceberg SQL catalog on SQLite in the test's tmp dir.

Airflow connections are given the way deployments give them without a
metadata DB: ``AIRFLOW_CONN_<ID>`` environment variables (JSON).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="snowberg-l2s-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

from l2s_data import DATABASE, PAT, ROLE


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, conn: dict[str, Any]) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
    return conn_id


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, dict[str, Any]], str]:
    """``connection(conn_id, {...})`` defines an Airflow connection for this test."""
    return lambda conn_id, conn: set_connection(monkeypatch, conn_id, conn)


@pytest.fixture
def lake(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    wh = tmp_path / "lake"
    wh.mkdir()
    cat = SqlCatalog("lake", uri=f"sqlite:///{wh / 'catalog.db'}", warehouse=f"file://{wh}")
    cat.create_namespace("shop")
    return cat


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


@pytest.fixture
def snowflake(
    fakesnow_server: Any, connection: Callable[[str, dict[str, Any]], str], request: pytest.FixtureRequest
) -> Iterator[tuple[str, Any, str]]:
    """``(conn_id, connection, database)``: an Airflow connection to the emulator and a fresh database."""
    from snowberg.local.stack import snowflake_connection_uri
    from snowberg.snowflake.source import snowflake_hook

    database = "L2S_" + re.sub(r"[^A-Za-z0-9]", "_", request.node.name)[:60].upper()
    conn_id = connection("snowflake_test", json.loads(snowflake_connection_uri(fakesnow_server.port, database)))
    conn = snowflake_hook(conn_id).get_conn()
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE IF NOT EXISTS {database}")
    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {database}.SHOP")
    cur.close()
    try:
        yield conn_id, conn, database
    finally:
        conn.close()


# ---------------------------------------------------------------------------
# AWS (moto)


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(moto_endpoint: str, request: pytest.FixtureRequest) -> str:
    import boto3

    name = "lake-" + re.sub(r"[^a-z0-9]", "-", request.node.name.lower())[:40].strip("-")
    boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=name)
    return name
