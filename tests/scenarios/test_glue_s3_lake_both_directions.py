"""A lake on AWS Glue + S3, end to end on moto's server (real boto3 and pyarrow S3 over HTTP), in both directions.

* an Airflow ``aws`` connection → pyiceberg GlueCatalog with S3 storage;
* Snowflake (emulator) → Iceberg on Glue/S3 with snowberg's watermark load,
  then Iceberg on Glue/S3 → a native Snowflake table with the lake sync;
* Glue/S3 lake → the Horizon-shaped REST catalog whose storage is S3 too, with
  the S3 credentials *vended* by the catalog (the client holds none).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowberg" / "sync"))
import l2s_services  # noqa: E402
from l2s_data import DATABASE, PAT, ROLE, orders, orders_schema  # noqa: E402

from snowberg.core.identifiers import IcebergName, TableName  # noqa: E402
from snowberg.iceberg.catalogs import open_catalog  # noqa: E402
from snowberg.sync.horizon import sync_iceberg  # noqa: E402
from snowberg.sync.native import load_native  # noqa: E402
from snowberg.sync.visibility import check_native  # noqa: E402

pytestmark = pytest.mark.slow

# The lake → Snowflake service fixtures (tests/snowberg/sync/l2s_services.py); the emulator is tests/conftest.py's.
connection = l2s_services.connection
snowflake = l2s_services.snowflake
moto_endpoint = l2s_services.moto_endpoint
s3_bucket = l2s_services.s3_bucket

KEY_ID, SECRET = "AKIAMOTOEXAMPLE", "moto-secret-access-key"


def _s3_keys(endpoint: str, bucket: str) -> list[str]:
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


@pytest.fixture
def ns(s3_bucket: str) -> str:
    """A Glue database of this test's own (Glue is one account-wide store on the shared moto server)."""
    return s3_bucket.replace("-", "_")


@pytest.fixture
def glue_conn(connection, moto_endpoint: str, s3_bucket: str) -> str:
    return connection(
        "glue_lake",
        {
            "conn_type": "aws",
            "login": KEY_ID,
            "password": SECRET,
            "extra": {"region_name": "us-east-1", "endpoint_url": moto_endpoint, "warehouse": f"s3://{s3_bucket}/lake"},
        },
    )


def test_glue_catalog_from_an_airflow_connection_writes_to_s3(glue_conn, ns, moto_endpoint, s3_bucket) -> None:
    import boto3

    cat = open_catalog(glue_conn)
    assert type(cat).__name__ == "GlueCatalog"
    cat.create_namespace(ns)
    t = cat.create_table(f"{ns}.orders", schema=orders_schema())
    t.append(orders([1, 2]))
    assert sorted(open_catalog(glue_conn).load_table(f"{ns}.orders").scan().to_arrow()["order_id"].to_pylist()) == [
        1,
        2,
    ]
    keys = _s3_keys(moto_endpoint, s3_bucket)
    assert any(k.startswith(f"lake/{ns}.db/orders/data/") and k.endswith(".parquet") for k in keys)
    assert any(k.endswith(".metadata.json") for k in keys)
    glue = boto3.client(
        "glue",
        endpoint_url=moto_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    table = glue.get_table(DatabaseName=ns, Name="orders")["Table"]
    assert table["Parameters"]["table_type"].upper() == "ICEBERG"


def test_snowflake_to_glue_s3_and_back_to_a_native_table(glue_conn, ns, snowflake, moto_endpoint, s3_bucket) -> None:
    """Both directions on the local stack: emulator → (watermark load) → Glue/S3 → (lake sync) → emulator."""
    from snowberg.config.table_config import TableConfig
    from snowberg.load.extract import load_window
    from snowberg.load.plan import plan_run

    _, conn, db = snowflake
    cur = conn.cursor()
    cur.execute(
        f'CREATE TABLE "{db}"."SHOP"."ORDERS" ("ORDER_ID" NUMBER(19,0), "CUSTOMER" VARCHAR(40), '
        '"AMOUNT" NUMBER(10,2), "UPDATED_AT" TIMESTAMP_NTZ(6))'
    )
    cur.execute(f"""INSERT INTO "{db}"."SHOP"."ORDERS" VALUES
        (1, 'ann', 10.50, '2026-01-01 10:00:00'), (2, 'bob', 20.25, '2026-01-01 11:00:00')""")
    cfg = TableConfig(
        name="orders",
        source={"table": f"{db}.SHOP.ORDERS"},
        target=f"{ns}.orders",
        cursor={"column": "UPDATED_AT"},
        catalog=glue_conn,
        snowflake_conn_id="unused",
    )
    lake = open_catalog(glue_conn)
    lake.create_namespace_if_not_exists(ns)

    def snowflake_to_lake(run_id: str) -> None:
        from snowberg.iceberg.tables import load_table_or_none

        table = load_table_or_none(lake, cfg)
        window = plan_run(cfg, conn, table, run_id=run_id)
        load_window(cfg, conn, lake, window)

    snowflake_to_lake("in-1")
    target = TableName(database=db, schema="SHOP", table="ORDERS_BACK")
    back = load_native(
        lake.load_table(f"{ns}.orders"), conn, target=target, source_label=f"glue_lake:{ns}.orders", run_id="out-1"
    )
    assert (back.status, back.rows) == ("committed", 2)

    # a row written after the first load: its cursor is past the watermark (Snowflake's clock at that load)
    import datetime as dt
    import time

    time.sleep(0.01)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    cur.execute(
        f"""INSERT INTO "{db}"."SHOP"."ORDERS" VALUES (3, 'cy', 30.00, %(at)s)""", {"at": now.isoformat(sep=" ")}
    )
    time.sleep(0.01)
    snowflake_to_lake("in-2")
    back2 = load_native(
        lake.load_table(f"{ns}.orders"), conn, target=target, source_label=f"glue_lake:{ns}.orders", run_id="out-2"
    )
    assert (back2.mode, back2.rows) == ("incremental", 1)
    check_native(conn, back2.to_dict())
    cur.execute(f'SELECT "ORDER_ID", "CUSTOMER", "AMOUNT", "UPDATED_AT" FROM {target.quoted()} ORDER BY 1')
    got = cur.fetchall()
    cur.execute(f'SELECT "ORDER_ID", "CUSTOMER", "AMOUNT", "UPDATED_AT" FROM "{db}"."SHOP"."ORDERS" ORDER BY 1')
    assert [tuple(r) for r in got] == [tuple(r) for r in cur.fetchall()]
    cur.close()
    assert any(k.endswith(".parquet") for k in _s3_keys(moto_endpoint, s3_bucket))


def test_horizon_sync_with_vended_s3_credentials(
    glue_conn, ns, connection, moto_endpoint, s3_bucket, tmp_path, monkeypatch
) -> None:
    """The REST catalog's tables live on S3; the client gets S3 credentials only from the load-table response."""
    from l2s_rest_catalog import HorizonLikeServer
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import DecimalType, NestedField, StringType, TimestamptzType

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    vended = {
        "s3.access-key-id": "ASIAVENDED",
        "s3.secret-access-key": "vended-secret-key",
        "s3.session-token": "vended-token",
        "s3.endpoint": moto_endpoint,
        "s3.region": "us-east-1",
    }
    store = SqlCatalog(
        "horizon_store", uri=f"sqlite:///{tmp_path / 'h.db'}", warehouse=f"s3://{s3_bucket}/horizon", **vended
    )
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

    lake = open_catalog(glue_conn)
    lake.create_namespace(ns)
    src = lake.create_table(f"{ns}.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))

    with HorizonLikeServer(store, pat=PAT, role=ROLE, database=DATABASE, vended=vended) as srv:
        conn_id = connection(
            "horizon_s3",
            {
                "conn_type": "snowflake",
                "password": PAT,
                "extra": {"account": "myorg-myacct", "role": ROLE, "database": DATABASE, "catalog_uri": srv.uri},
            },
        )
        target_catalog = open_catalog(conn_id)
        assert not any(k.startswith("s3.") for k in target_catalog.properties)  # nothing but the PAT configured
        r = sync_iceberg(
            src,
            target_catalog,
            IcebergName(namespace="SHOP", table="ORDERS"),
            source_label=f"glue_lake:{ns}.orders",
            run_id="r1",
        )
        loads = [q for q in srv.requests if q.method == "GET" and q.path.endswith("/tables/ORDERS")]
        assert loads and all(q.headers["X-Iceberg-Access-Delegation"] == "vended-credentials" for q in loads)
        assert "vended-secret-key" not in json.dumps([dict(q.headers) for q in srv.requests])

    assert (r.status, r.rows, r.target_total_rows) == ("committed", 3, 3)
    rows = store.load_table(("SHOP", "ORDERS")).scan().to_arrow()
    assert sorted(int(x) for x in rows["ORDER_ID"].to_pylist()) == [1, 2, 3]
    keys = _s3_keys(moto_endpoint, s3_bucket)
    assert any(k.startswith("horizon/SHOP/ORDERS/data/") and k.endswith(".parquet") for k in keys), keys
