"""Service fixtures shared by the lake → Snowflake tests and the scenarios built on them.

* ``connection``: defines an Airflow connection for one test, the way
  deployments do without a metadata DB (``AIRFLOW_CONN_<ID>``, JSON);
* ``snowflake``: an Airflow connection to the session's fakesnow server and a
  fresh database (needs a ``fakesnow_server`` fixture: ``tests/conftest.py``);
* ``moto_endpoint`` / ``s3_bucket``: S3 and Glue over HTTP (moto's threaded
  server) and a bucket of the test's own;
* ``lake``: a pyiceberg SQL catalog on SQLite in the test's tmp dir, with
  namespace ``shop``.

Import the fixtures into a conftest or test module to use them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, conn: dict[str, Any]) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
    return conn_id


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, dict[str, Any]], str]:
    """``connection(conn_id, {...})`` defines an Airflow connection for this test."""
    return lambda conn_id, conn: set_connection(monkeypatch, conn_id, conn)


@pytest.fixture
def snowflake(
    fakesnow_server: Any, connection: Callable[[str, dict[str, Any]], str], request: pytest.FixtureRequest
) -> Iterator[tuple[str, Any, str]]:
    """``(conn_id, connection, database)``: an Airflow connection to the emulator and a fresh database."""
    from snowberg.local.stack import snowflake_connection_uri
    from snowberg.snowflake.hook import snowflake_hook

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


@pytest.fixture
def lake(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    wh = tmp_path / "lake"
    wh.mkdir()
    cat = SqlCatalog("lake", uri=f"sqlite:///{wh / 'catalog.db'}", warehouse=f"file://{wh}")
    cat.create_namespace("shop")
    return cat
