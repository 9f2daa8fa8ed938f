"""Live lane of the visibility checks: a real Snowflake account (Horizon REST + SQL). Skipped without credentials.

Set (see docs/lake-to-snowflake.md, "Live tests"):

    SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT    orgname-accountname
    SNOWBERG_LIVE_SNOWFLAKE_USER       the PAT's user
    SNOWBERG_LIVE_SNOWFLAKE_PAT        programmatic access token (ROLE_RESTRICTION = the role below)
    SNOWBERG_LIVE_SNOWFLAKE_ROLE       e.g. SNOWBERG_SYNC
    SNOWBERG_LIVE_SNOWFLAKE_DATABASE   a database created with CATALOG = 'SNOWFLAKE' and an EXTERNAL_VOLUME
    SNOWBERG_LIVE_SNOWFLAKE_WAREHOUSE  compute warehouse for the SQL checks
    SNOWBERG_LIVE_SNOWFLAKE_SCHEMA     optional, default PUBLIC

Each test creates its own uniquely named table and drops it afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from l2s_data import orders, orders_schema

from snowberg.core.identifiers import IcebergName, TableName
from snowberg.iceberg.catalogs import open_catalog

REQUIRED = ("ACCOUNT", "USER", "PAT", "ROLE", "DATABASE", "WAREHOUSE")
ENV = {k: os.environ.get(f"SNOWBERG_LIVE_SNOWFLAKE_{k}") for k in (*REQUIRED, "SCHEMA")}

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not all(ENV[k] for k in REQUIRED),
        reason="live lane: set SNOWBERG_LIVE_SNOWFLAKE_{" + ",".join(REQUIRED) + "}",
    ),
]


@pytest.fixture
def live(connection) -> Iterator[tuple[str, Any, str]]:
    from snowberg.snowflake.hook import snowflake_hook

    conn_id = connection(
        "snowflake_live",
        {
            "conn_type": "snowflake",
            "login": ENV["USER"],
            "password": ENV["PAT"],
            "extra": {
                "account": ENV["ACCOUNT"],
                "role": ENV["ROLE"],
                "database": ENV["DATABASE"],
                "warehouse": ENV["WAREHOUSE"],
            },
        },
    )
    conn = snowflake_hook(conn_id).get_conn()
    schema = ENV["SCHEMA"] or "PUBLIC"
    try:
        yield conn_id, conn, schema
    finally:
        conn.close()


def test_live_horizon_sync_is_visible_in_snowflake_at_once(lake, live) -> None:
    from snowberg.sync.horizon import sync_iceberg
    from snowberg.sync.visibility import check_iceberg

    conn_id, conn, schema = live
    name = f"SNOWBERG_LIVE_{uuid.uuid4().hex[:8].upper()}"
    sql_name = TableName(database=ENV["DATABASE"] or "", schema=schema, table=name)
    cur = conn.cursor()
    # Iceberg types in the DDL, as the docs show: the lake's long stays long
    cur.execute(
        f"CREATE ICEBERG TABLE {sql_name.quoted()} (ORDER_ID long, CUSTOMER string, "
        "AMOUNT decimal(10,2), PLACED_AT timestamp_ltz(6))"
    )
    try:
        src = lake.create_table("shop.orders", schema=orders_schema())
        src.append(orders([1, 2]))
        horizon = open_catalog(conn_id)
        r1 = sync_iceberg(src, horizon, IcebergName(namespace=schema, table=name), source_label="live", run_id="live-1")
        assert (r1.status, r1.rows) == ("committed", 2)
        assert check_iceberg(conn, sql_name, r1.to_dict(), timeout=30)["rows"] == 2
        src.append(orders([3]))
        r2 = sync_iceberg(src, horizon, IcebergName(namespace=schema, table=name), source_label="live", run_id="live-2")
        assert (r2.mode, r2.rows) == ("incremental", 1)
        assert check_iceberg(conn, sql_name, r2.to_dict(), timeout=30)["rows"] == 3
        assert (
            sync_iceberg(
                src, horizon, IcebergName(namespace=schema, table=name), source_label="live", run_id="live-3"
            ).status
            == "nothing_new"
        )
        cur.execute(f'SELECT "ORDER_ID" FROM {sql_name.quoted()} ORDER BY 1')
        assert [int(r[0]) for r in cur.fetchall()] == [1, 2, 3]
    finally:
        cur.execute(f"DROP ICEBERG TABLE IF EXISTS {sql_name.quoted()}")
        cur.close()


def test_live_native_load_and_check(lake, live) -> None:
    from snowberg.sync.native import load_native
    from snowberg.sync.visibility import check_native

    _, conn, schema = live
    target = TableName(
        database=ENV["DATABASE"] or "", schema=schema, table=f"SNOWBERG_LIVE_NATIVE_{uuid.uuid4().hex[:8].upper()}"
    )
    state = TableName(database=target.database, schema=schema, table=f"{target.table}_STATE")
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2]))
    try:
        r = load_native(src, conn, target=target, state_table=state, source_label="live", run_id="live-1")
        check_native(conn, r.to_dict())
        src.append(orders([3]))
        r2 = load_native(src, conn, target=target, state_table=state, source_label="live", run_id="live-2")
        assert (r2.mode, r2.rows) == ("incremental", 1)
        check_native(conn, r2.to_dict())
    finally:
        cur = conn.cursor()
        cur.execute(f"DROP TABLE IF EXISTS {target.quoted()}")
        cur.execute(f"DROP TABLE IF EXISTS {state.quoted()}")
        cur.close()
