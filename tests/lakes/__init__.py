"""The lakes snowberg is tested on: one place that builds each backend, for every suite that wants them all.

A *lake* is a catalog plus its storage, reached the way users reach it: an
Airflow connection (``AIRFLOW_CONN_<ID>``, JSON) whose id a table config names
as its ``catalog``. Nothing else carries a setting: the fixture removes every
``AWS_*`` variable and points the AWS credentials and config files at paths
that do not exist, so a code path that opens storage any way but through the
catalog's own FileIO (``table.io``) fails instead of finding keys elsewhere.

==================  =========================================================
``file_sqlite``     pyiceberg SQL catalog on SQLite, ``file://`` warehouse
                    (the embedded default); ``conn_type: sqlite``
``s3_postgres``     pyiceberg SQL catalog on PostgreSQL (127.0.0.1:5432, a
                    database of the session's own, dropped after), S3 on
                    moto; ``conn_type: postgres``, S3 keys in ``extra``
``glue_s3``         AWS Glue + S3 (moto); ``conn_type: aws``: keys in
                    login/password, ``endpoint_url``, ``region_name`` and
                    ``warehouse`` in ``extra``
``rest_s3``         an Iceberg REST catalog (the Horizon-shaped stand-in of
                    ``tests/snowberg/sync/l2s_rest_catalog.py``) whose tables
                    live on S3; ``conn_type: iceberg`` with an OAuth2 client
                    secret. The client holds no storage setting at all: the
                    endpoint and short-lived STS keys come only as vended
                    credentials in the load-table response
==================  =========================================================

moto checks every request's signature (``tests/lakes/moto.py``): wrong or
missing keys are refused as AWS refuses them.

Use::

    from lakes import LakeBackend, lake_fixtures

    lake, lake_services = lake_fixtures()  # bound in the test module (or a conftest) so pytest finds them

    @pytest.mark.parametrize("lake", list(LakeBackend), indirect=True)
    def test_something(lake): ...

``lake`` yields a :class:`Lake`: ``conn_id`` and ``connection`` (what to put in
a table config and in ``AIRFLOW_CONN_<ID>``; the fixture has set it),
``catalog()`` (the catalog, opened in the test process as a task opens it),
``namespace`` (a namespace of this test's own), and for the object-storage
lakes ``moto``/``bucket`` (and ``rest`` for the REST catalog) to break things on
purpose. Without parametrization the fixture gives ``file_sqlite``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

from lakes.moto import REGION, MotoServer

_SYNC_TESTS = Path(__file__).resolve().parents[1] / "snowberg" / "sync"

PG_DSN = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
REST_PAT = "lake-rest-client-secret-0123456789"  # the OAuth2 client secret of the REST catalog connection
REST_ROLE = "LAKE_WRITER"
REST_WAREHOUSE = "LAKEHOUSE"


class LakeBackend(StrEnum):
    FILE_SQLITE = "file_sqlite"
    S3_POSTGRES = "s3_postgres"
    GLUE_S3 = "glue_s3"
    REST_S3 = "rest_s3"

    @property
    def on_s3(self) -> bool:
        return self is not LakeBackend.FILE_SQLITE


class LakeServices:
    """What the lakes of a test session share, started on first use: moto's server and a PostgreSQL database."""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self._moto: MotoServer | None = None
        self._pg_database: str | None = None

    @property
    def moto(self) -> MotoServer:
        if self._moto is None:
            self._moto = MotoServer(self.work_dir).start()
        return self._moto

    @property
    def pg_database(self) -> str:
        """A PostgreSQL database of this session's own (the catalog tables of every ``s3_postgres`` lake)."""
        if self._pg_database is None:
            import psycopg2

            name = f"snowberg_lakes_{uuid.uuid4().hex[:12]}"
            conn = psycopg2.connect(dbname="postgres", **PG_DSN)
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
            conn.close()
            self._pg_database = name
        return self._pg_database

    def close(self) -> None:
        if self._moto is not None:
            self._moto.stop()
            self._moto = None
        if self._pg_database is not None:
            import psycopg2

            conn = psycopg2.connect(dbname="postgres", **PG_DSN)
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'DROP DATABASE IF EXISTS "{self._pg_database}" WITH (FORCE)')
            conn.close()
            self._pg_database = None


@pytest.fixture(scope="session")
def lake_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LakeServices]:
    services = LakeServices(tmp_path_factory.mktemp("lake-services"))
    try:
        yield services
    finally:
        services.close()


def scrub_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS setting outside the Airflow connection: no ``AWS_*`` variable, no credentials or config file."""
    for var in [v for v in os.environ if v.startswith("AWS_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-such-aws-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-such-aws-config"))
    # Without keys the AWS SDKs would also ask the EC2 instance metadata service; there is none here.
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def connection_env_var(conn_id: str) -> str:
    return f"AIRFLOW_CONN_{conn_id.upper()}"


@dataclass
class Lake:
    """One lake of one test. See the module doc."""

    backend: LakeBackend
    conn_id: str
    connection: dict[str, Any]  # the Airflow connection, as its AIRFLOW_CONN_<ID> JSON holds it
    namespace: str
    warehouse: str
    monkeypatch: pytest.MonkeyPatch = field(repr=False)
    moto: MotoServer | None = None
    bucket: str | None = None
    rest: Any = None  # the REST catalog stand-in (HorizonLikeServer) of a rest_s3 lake

    @property
    def env_var(self) -> str:
        return connection_env_var(self.conn_id)

    def connection_json(self, connection: dict[str, Any] | None = None) -> str:
        return json.dumps(self.connection if connection is None else connection)

    def use_connection(self, connection: dict[str, Any]) -> None:
        """Replace the Airflow connection the tasks read (to break it on purpose); ``restore_connection`` undoes it."""
        self.monkeypatch.setenv(self.env_var, self.connection_json(connection))

    def restore_connection(self) -> None:
        self.monkeypatch.setenv(self.env_var, self.connection_json())

    def altered(self, **changes: Any) -> dict[str, Any]:
        """A copy of the connection with top-level fields changed; ``extra`` entries merge (None removes one)."""
        conn = copy.deepcopy(self.connection)
        extra = changes.pop("extra", None)
        conn.update(changes)
        if extra is not None:
            merged = {**conn.get("extra", {}), **extra}
            conn["extra"] = {k: v for k, v in merged.items() if v is not None}
        return conn

    def catalog(self) -> Any:
        """The catalog, opened through snowberg's ``open_catalog`` from the (good) connection, as a task opens it."""
        from snowberg.iceberg.catalogs import open_catalog

        with _env(self.env_var, self.connection_json()):
            return open_catalog(self.conn_id)

    def table(self, name: str) -> Any:
        return self.catalog().load_table(f"{self.namespace}.{name}")

    def storage_keys(self, prefix: str = "") -> list[str]:
        """Object keys under the bucket (object-storage lakes), or file paths under the warehouse."""
        if self.moto is not None and self.bucket is not None:
            return self.moto.keys(self.bucket, prefix)
        root = Path(self.warehouse.removeprefix("file://"))
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@contextlib.contextmanager
def _env(var: str, value: str) -> Iterator[None]:
    old = os.environ.get(var)
    os.environ[var] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = old


WAREHOUSE_PREFIX = {LakeBackend.S3_POSTGRES: "warehouse", LakeBackend.GLUE_S3: "glue", LakeBackend.REST_S3: "rest"}


def connection_for(
    backend: LakeBackend,
    *,
    warehouse: str,
    endpoint: str = "",
    key_id: str = "",
    secret: str = "",
    catalog_db: str = "",
    catalog_uri: str = "",
) -> dict[str, Any]:
    """The Airflow connection of a lake, as users write it (docs/lakes.md shows these; a test compares them).

    ``catalog_db``: the SQLite file (file_sqlite) or the PostgreSQL database
    (s3_postgres); ``catalog_uri``: the REST catalog's URI.
    """
    if backend is LakeBackend.FILE_SQLITE:
        return {"conn_type": "sqlite", "host": catalog_db, "extra": {"warehouse": warehouse}}
    if backend is LakeBackend.S3_POSTGRES:
        return {
            "conn_type": "postgres",
            "host": PG_DSN["host"],
            "port": PG_DSN["port"],
            "login": PG_DSN["user"],
            "schema": catalog_db,
            "extra": {
                "warehouse": warehouse,
                "s3.endpoint": endpoint,
                "s3.access-key-id": key_id,
                "s3.secret-access-key": secret,
                "s3.region": REGION,
            },
        }
    if backend is LakeBackend.GLUE_S3:
        return {
            "conn_type": "aws",
            "login": key_id,
            "password": secret,
            "extra": {"region_name": REGION, "endpoint_url": endpoint, "warehouse": warehouse},
        }
    return {
        "conn_type": "iceberg",
        "host": catalog_uri,
        "login": "snowberg",
        "password": REST_PAT,
        "extra": {
            "warehouse": REST_WAREHOUSE,
            "scope": f"session:role:{REST_ROLE}",
            "header.X-Iceberg-Access-Delegation": "vended-credentials",
        },
    }


def _unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def rest_catalog_server(store: Any, vended: dict[str, str]) -> Any:
    """The Horizon-shaped REST stand-in over ``store``, handing out ``vended`` as the only storage settings."""
    if str(_SYNC_TESTS) not in sys.path:
        sys.path.insert(0, str(_SYNC_TESTS))
    from l2s_rest_catalog import HorizonLikeServer

    return HorizonLikeServer(store, pat=REST_PAT, role=REST_ROLE, database=REST_WAREHOUSE, vended=vended)


@contextlib.contextmanager
def open_lake(
    backend: LakeBackend, services: LakeServices, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Lake]:
    """Build one lake, set its Airflow connection in the environment, and tear down what only it used."""
    scrub_aws_environment(monkeypatch, tmp_path)
    conn_id = f"lake_{backend.value}"
    namespace = _unique("lk_")
    server = None
    moto = bucket = None
    if backend is LakeBackend.FILE_SQLITE:
        wh = tmp_path / "lake-warehouse"
        wh.mkdir(exist_ok=True)
        warehouse = f"file://{wh}"
        connection = connection_for(backend, warehouse=warehouse, catalog_db=str(tmp_path / "lake-catalog.db"))
    else:
        moto = services.moto
        bucket = moto.create_bucket(_unique("lake-").replace("_", "-"))
        warehouse = f"s3://{bucket}/{WAREHOUSE_PREFIX[backend]}"
        if backend is LakeBackend.REST_S3:
            from pyiceberg.catalog.sql import SqlCatalog

            # The server's own catalog store reaches S3 with the writer's keys; clients get only vended ones.
            store = SqlCatalog(
                "rest_store",
                uri=f"sqlite:///{tmp_path / 'rest-store.db'}",
                warehouse=warehouse,
                **moto.writer_properties(),
            )
            server = rest_catalog_server(store, moto.vend()).start()
        connection = connection_for(
            backend,
            warehouse=warehouse,
            endpoint=moto.endpoint,
            key_id=moto.key_id,
            secret=moto.secret,
            catalog_db=services.pg_database if backend is LakeBackend.S3_POSTGRES else "",
            catalog_uri=server.uri if server is not None else "",
        )
    lake = Lake(
        backend=backend,
        conn_id=conn_id,
        connection=connection,
        namespace=namespace,
        warehouse=warehouse,
        monkeypatch=monkeypatch,
        moto=moto,
        bucket=bucket,
        rest=server,
    )
    monkeypatch.setenv(lake.env_var, lake.connection_json())
    lake.catalog().create_namespace(namespace)
    try:
        yield lake
    finally:
        if server is not None:
            server.stop()


def _lake(
    request: pytest.FixtureRequest, lake_services: LakeServices, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Lake]:
    """A lake of the backend given by indirect parametrization (default ``file_sqlite``); see the module doc."""
    backend = LakeBackend(getattr(request, "param", LakeBackend.FILE_SQLITE))
    with open_lake(backend, lake_services, tmp_path, monkeypatch) as lk:
        yield lk


lake = pytest.fixture(_lake, name="lake")


def lake_fixtures(name: str = "lake") -> tuple[Any, Any]:
    """``(lake, lake_services)``: the two fixtures, to bind by those names in a test module or conftest.

    ``name`` renames the lake fixture where ``lake`` is taken already (bind it to that name then).
    """
    return (lake if name == "lake" else pytest.fixture(_lake, name=name)), lake_services


__all__ = [
    "Lake",
    "LakeBackend",
    "LakeServices",
    "connection_env_var",
    "connection_for",
    "lake",
    "lake_fixtures",
    "lake_services",
    "open_lake",
    "rest_catalog_server",
    "scrub_aws_environment",
]
