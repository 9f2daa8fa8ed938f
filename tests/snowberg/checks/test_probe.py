"""The lake storage probe on real storage: a local folder and S3 (moto in server mode)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from snowberg.checks import probe
from snowberg.checks.external_volume import FAILED, PASSED, SKIPPED


def _statuses(r: probe.ProbeResult) -> list[str]:
    return [s.status for s in r.steps]


def _s3_objects(endpoint: str, bucket: str, keys: dict[str, str] | None = None) -> list[str]:
    import boto3

    k = keys or {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **k)
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_local_folder_all_steps_pass_and_nothing_is_left(tmp_path: Path) -> None:
    from pyiceberg.io import load_file_io

    where = f"file://{tmp_path}/wh"
    r = probe.probe_location(load_file_io({}, where), where)
    assert r.ok, probe.render(r)
    assert _statuses(r) == [PASSED] * 4
    assert r.probe_path.startswith(f"{where}/_snowberg_probe/probe-")
    assert list((tmp_path / "wh" / "_snowberg_probe").iterdir()) == []
    assert "OK" in probe.render(r)


def test_s3_all_steps_pass(s3_bucket: str, s3_props: dict[str, str], moto_endpoint: str) -> None:
    from pyiceberg.io import load_file_io

    where = f"s3://{s3_bucket}/warehouse"
    io = load_file_io(s3_props, where)
    r = probe.probe_location(io, where)
    assert r.ok, probe.render(r)
    assert _statuses(r) == [PASSED] * 4
    assert r.file_io == "PyArrowFileIO"
    # the probe object was deleted (pyarrow may leave an empty "folder/" marker behind)
    assert [k for k in _s3_objects(moto_endpoint, s3_bucket) if not k.endswith("/")] == []


def test_s3_missing_bucket_fails_at_write(s3_props: dict[str, str]) -> None:
    from pyiceberg.io import load_file_io

    where = "s3://no-such-bucket-snowberg/warehouse"
    r = probe.probe_location(load_file_io(s3_props, where), where)
    assert not r.ok
    assert _statuses(r) == [FAILED, SKIPPED, SKIPPED, SKIPPED]
    w = r.steps[0]
    assert w.label == "write" and w.message
    assert w.cause is not None and "bucket does not exist" in w.cause
    assert "FAILED" in probe.render(r)


def test_s3_unreachable_endpoint_fails_at_write(s3_props: dict[str, str]) -> None:
    from pyiceberg.io import load_file_io

    props = dict(
        s3_props, **{"s3.endpoint": "http://127.0.0.1:9", "s3.connect-timeout": "2", "s3.request-timeout": "2"}
    )
    where = "s3://lake/warehouse"
    t0 = time.monotonic()
    r = probe.probe_location(load_file_io(props, where), where)
    assert time.monotonic() - t0 < 120
    assert r.steps[0].status == FAILED
    assert r.steps[0].cause is not None and "unreachable" in r.steps[0].cause


def test_writer_file_io_uses_table_io_and_location(catalog: Any, orders: Any) -> None:
    io, where = probe.writer_file_io(catalog, table=orders)
    assert io is orders.io
    assert where == orders.location()
    io2, where2 = probe.writer_file_io(catalog)
    assert where2 == catalog.properties["warehouse"]
    r = probe.probe_location(io2, where2)
    assert r.ok


def test_writer_file_io_s3_table_on_moto(tmp_path: Path, s3_bucket: str, s3_props: dict[str, str], lake: Any) -> None:
    """A SQL catalog whose warehouse is on S3: the probe uses the same properties as the writer."""
    from pyiceberg.catalog.sql import SqlCatalog

    cat = SqlCatalog("s3cat", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"s3://{s3_bucket}/wh", **s3_props)
    cat.create_namespace("lake")
    t = cat.create_table("lake.orders", schema=lake.schema())
    lake.append(t, lake.batch([1, 2, 3]))
    io, where = probe.writer_file_io(cat, table=cat.load_table("lake.orders"))
    assert where.startswith(f"s3://{s3_bucket}/wh/lake")
    r = probe.probe_location(io, where)
    assert r.ok, probe.render(r)


# ---------------------------------------------------------------------------
# moto with IAM enforced: a writer whose policy only allows reads


@pytest.fixture(scope="module")
def moto_with_iam(tmp_path_factory: pytest.TempPathFactory) -> Any:
    import socket

    import boto3

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("moto-iam") / "moto.log"
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="6", AWS_ACCESS_KEY_ID="admin", AWS_SECRET_ACCESS_KEY="admin")
    server = Path(sys.executable).with_name("moto_server")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()}") from None
                time.sleep(0.2)
        kw = {
            "endpoint_url": endpoint,
            "region_name": "us-east-1",
            "aws_access_key_id": "admin",
            "aws_secret_access_key": "admin",
        }
        # The first six calls are not authenticated: make the bucket and a read-only user.
        boto3.client("s3", **kw).create_bucket(Bucket="lake")
        iam = boto3.client("iam", **kw)
        iam.create_user(UserName="reader")
        policy = (
            '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetObject","s3:ListBucket"],'
            '"Resource":["arn:aws:s3:::lake","arn:aws:s3:::lake/*"]}]}'
        )
        iam.put_user_policy(UserName="reader", PolicyName="read-only", PolicyDocument=policy)
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        yield endpoint, key["AccessKeyId"], key["SecretAccessKey"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_s3_writer_without_put_permission(moto_with_iam: Any) -> None:
    from pyiceberg.io import load_file_io

    endpoint, key_id, secret = moto_with_iam
    props = {
        "s3.endpoint": endpoint,
        "s3.access-key-id": key_id,
        "s3.secret-access-key": secret,
        "s3.region": "us-east-1",
    }
    where = "s3://lake/warehouse"
    r = probe.probe_location(load_file_io(props, where), where)
    assert _statuses(r) == [FAILED, SKIPPED, SKIPPED, SKIPPED], probe.render(r)
    w = r.steps[0]
    assert w.message and ("AccessDenied" in w.message or "Access Denied" in w.message or "AWS Error" in w.message)
    assert w.cause is not None and "s3:PutObject" in w.cause


def test_s3_writer_with_bad_keys(moto_with_iam: Any) -> None:
    from pyiceberg.io import load_file_io

    endpoint, _, _ = moto_with_iam
    props = {
        "s3.endpoint": endpoint,
        "s3.access-key-id": "AKIAWRONG",
        "s3.secret-access-key": "nope",
        "s3.region": "us-east-1",
    }
    r = probe.probe_location(load_file_io(props, "s3://lake/w"), "s3://lake/w")
    assert r.steps[0].status == FAILED
    assert r.steps[0].cause is not None and ("credentials" in r.steps[0].cause or "s3:PutObject" in r.steps[0].cause)


# ---------------------------------------------------------------------------
# Every object-storage lake of tests/lakes: keys and endpoints only in the Airflow connection

from lakes import LakeBackend, lake_fixtures  # noqa: E402

backend_lake, lake_services = lake_fixtures("backend_lake")  # `lake` is the checks harness's own fixture here


@pytest.mark.slow
@pytest.mark.parametrize("backend_lake", [b for b in LakeBackend if b.on_s3], indirect=True)
def test_the_probe_uses_the_writers_credentials_from_the_airflow_connection(backend_lake: Any) -> None:
    """A table: its ``table.io`` (vended credentials included). No table: the catalog's own properties.

    Glue and SQL catalogs carry the connection's S3 endpoint and keys, so the
    warehouse can be probed; a REST catalog's ``warehouse`` is a name, not a
    location, and its storage credentials are vended per table: the probe
    asks for a table instead of writing to a local folder named like the
    warehouse.
    """
    import pyarrow as pa

    cat = backend_lake.catalog()
    t = cat.create_table(f"{backend_lake.namespace}.probed", schema=pa.schema([("id", pa.int64())]))
    io, where = probe.writer_file_io(cat, table=t)
    r = probe.probe_location(io, where)
    assert r.ok and where.startswith("s3://"), probe.render(r)
    if backend_lake.backend is LakeBackend.REST_S3:
        with pytest.raises(ValueError, match="not a storage location.*give a table"):
            probe.writer_file_io(cat)
        return
    io, where = probe.writer_file_io(cat)
    assert where == backend_lake.warehouse
    r = probe.probe_location(io, where)
    assert r.ok, probe.render(r)
