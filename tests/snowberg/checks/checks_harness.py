"""Fixtures for the checks and the check operators: Iceberg tables on a SQLite SqlCatalog, a moto S3 server,
a task context, a recorded Snowflake connection.

Imported by tests/snowberg/checks/conftest.py and tests/snowberg/airflow/operators/conftest.py, so the
library's tests and its operators' tests build the same tables.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Importing the operators imports Airflow: keep its home out of ~/airflow.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="snowberg-airflow-home-"))

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
VOL_FIXTURES = FIXTURES / "verify_external_volume"

SNOWBERG_PROPS = {
    "snowberg.watermark": "2026-01-01 00:00:00.000000",
    "snowberg.cursor-kind": "timestamp_ntz",
    "snowberg.run-id": "r1",
    "snowberg.mode": "incremental",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def catalog(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    cat = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("lake")
    return cat


@pytest.fixture
def use_catalog(monkeypatch: pytest.MonkeyPatch, catalog: Any) -> Any:
    """Operators open catalog "lake" through ``snowberg.iceberg.catalogs.open_catalog``: hand them ours."""
    import snowberg.iceberg.catalogs

    def _open(name: str) -> Any:
        assert name == "lake", name
        return catalog

    monkeypatch.setattr(snowberg.iceberg.catalogs, "open_catalog", _open)
    return catalog


def orders_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("region", pa.string()),
            pa.field("amount", pa.float64()),
            pa.field("updated_at", pa.timestamp("us")),
        ]
    )


def orders_batch(ids: list[int], region: str = "eu") -> Any:
    import datetime as dt

    import pyarrow as pa

    return pa.table(
        {
            "id": ids,
            "region": [region] * len(ids),
            "amount": [float(i) if i % 3 else None for i in ids],
            "updated_at": [dt.datetime(2026, 1, 1) + dt.timedelta(minutes=i) for i in ids],
        },
        schema=orders_schema(),
    )


def append(table: Any, data: Any, watermark: str | None = "2026-01-01 00:00:00.000000", run_id: str = "r1") -> None:
    props = dict(SNOWBERG_PROPS, **{"snowberg.run-id": run_id})
    if watermark is None:
        props = {}
    else:
        props["snowberg.watermark"] = watermark
    table.append(data, snapshot_properties=props)


@pytest.fixture
def orders(catalog: Any) -> Any:
    """``lake.orders`` with one snowberg commit."""
    t = catalog.create_table("lake.orders", schema=orders_schema())
    append(t, orders_batch(list(range(1, 11))))
    return t


class LakeHelpers:
    """What tests need to build tables (a fixture, so no test imports conftest)."""

    props = SNOWBERG_PROPS
    fixtures = FIXTURES
    schema = staticmethod(orders_schema)
    batch = staticmethod(orders_batch)
    append = staticmethod(append)


@pytest.fixture
def lake() -> type[LakeHelpers]:
    return LakeHelpers


class FakeTI:
    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}
        self.task_id = "check"
        self.dag_id = "snowberg_orders"
        self.run_id = "manual__2026-01-01T00:00:00+00:00"
        self.try_number = 1

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


@pytest.fixture
def context() -> dict[str, Any]:
    ti = FakeTI()
    return {"ti": ti, "task_instance": ti, "run_id": ti.run_id}


# ---------------------------------------------------------------------------
# moto as S3, in server mode (real HTTP), one per session


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.1)
    try:
        yield endpoint
    finally:
        server.stop()


S3_KEYS = {"s3.access-key-id": "testing", "s3.secret-access-key": "testing", "s3.region": "us-east-1"}


@pytest.fixture
def s3_bucket(moto_endpoint: str) -> str:
    import uuid

    import boto3

    name = f"lake-{uuid.uuid4().hex[:10]}"
    boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_props(moto_endpoint: str) -> dict[str, str]:
    return {"s3.endpoint": moto_endpoint, **S3_KEYS}


@pytest.fixture
def partitioned(catalog: Any, lake: Any) -> Any:
    """``lake.sales`` partitioned by region: eu gets 4 files, us 1."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    t = catalog.create_table("lake.sales", schema=lake.schema())
    region_id = t.schema().find_field("region").field_id
    with t.update_spec() as u:
        u.add_field("region", IdentityTransform(), "region")
    t = catalog.load_table("lake.sales")
    assert t.spec() == PartitionSpec(PartitionField(region_id, 1000, IdentityTransform(), "region"), spec_id=1)
    for i in range(4):
        lake.append(t, lake.batch([10 * i + 1, 10 * i + 2], region="eu"), run_id=f"eu{i}")
    lake.append(t, lake.batch([99], region="us"), run_id="us")
    return t


class RecordedCursor:
    """A Snowflake cursor that answers each SQL prefix with a recorded result (or raises it)."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.results = results
        self.executed: list[tuple[str, Any]] = []
        self._last: Any = None
        self.closed = False

    def execute(self, sql: str, params: Any = None) -> None:
        self.executed.append((sql, params))
        for prefix, result in self.results.items():
            if sql.startswith(prefix):
                if isinstance(result, Exception):
                    raise result
                self._last = result
                return
        raise AssertionError(f"unexpected SQL {sql!r}")

    def fetchone(self) -> Any:
        return self._last[0]

    def fetchall(self) -> Any:
        return self._last

    def close(self) -> None:
        self.closed = True


class RecordedConn:
    """A connection handing out one ``RecordedCursor``."""

    def __init__(self, cursor: RecordedCursor) -> None:
        self.cur = cursor
        self.closed = False

    def cursor(self) -> RecordedCursor:
        return self.cur

    def close(self) -> None:
        self.closed = True


def volume_output(name: str) -> str:
    """A SYSTEM$VERIFY_EXTERNAL_VOLUME output of tests/fixtures/verify_external_volume/ (written from the docs)."""
    return (VOL_FIXTURES / f"{name}.json").read_text()


def describe_rows(name: str) -> list[tuple[Any, ...]]:
    """The rows of a DESC EXTERNAL VOLUME fixture."""
    return [tuple(r) for r in json.loads(volume_output(name))["rows"]]
