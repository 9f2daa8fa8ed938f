"""Every operator that opens the lake names the Airflow connection when the lake refuses it.

The catalog here is a real one that cannot be reached: pyiceberg's SQL catalog on a PostgreSQL
address where nothing listens (port 1), as when a connection's host is wrong or the database is down.
Each operator must fail with ``LakeAccessError`` naming the connection and what to check — not with
the driver's traceback — and must not pass the password on.
"""

from __future__ import annotations

from typing import Any

import pytest

SECRET = "s3cr3t-pw"
TABLE = {"table_name": "orders", "source": {"table": "SHOP.PUBLIC.ORDERS"}, "target": "shop.orders"}


@pytest.fixture
def unreachable_lake(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PYICEBERG_CATALOG__DEADLAKE__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__DEADLAKE__URI", f"postgresql+psycopg2://snow:{SECRET}@127.0.0.1:1/lake")
    monkeypatch.setenv("PYICEBERG_CATALOG__DEADLAKE__WAREHOUSE", "file:///nonexistent")
    return "deadlake"


def operators(catalog: str) -> list[Any]:
    from snowberg.airflow.operators.freshness import SnapshotFreshnessOperator
    from snowberg.airflow.operators.health import TableHealthOperator
    from snowberg.airflow.operators.lake_to_snowflake import IcebergToSnowflakeNativeOperator
    from snowberg.airflow.operators.maintenance import SnowbergMaintenanceOperator
    from snowberg.airflow.operators.scale import (
        SnowbergSliceCommitOperator,
        SnowbergSliceLoadOperator,
        SnowbergSlicePlanOperator,
    )
    from snowberg.airflow.operators.volume import VolumeCheckOperator

    window = {"low": None, "high": "2026-01-01 00:00:00", "mode": "incremental"}
    return [
        SnowbergMaintenanceOperator(task_id="compact", step="compact", catalog=catalog, **TABLE),
        VolumeCheckOperator(task_id="volume", catalog=catalog, primary_key=["id"], **TABLE),
        TableHealthOperator(task_id="health", table="shop.orders", catalog=catalog),
        SnapshotFreshnessOperator(task_id="fresh", table="shop.orders", catalog=catalog, freshness_sla="1h"),
        SnowbergSlicePlanOperator(task_id="slices", window=window, catalog=catalog, **TABLE),
        SnowbergSliceLoadOperator(task_id="slice", slice_task={"index": 0}, catalog=catalog, **TABLE),
        SnowbergSliceCommitOperator(task_id="commit", window=window, slice_results=[], catalog=catalog, **TABLE),
        IcebergToSnowflakeNativeOperator(
            task_id="sync", source_catalog=catalog, source_table="shop.orders", target_table="DB.S.ORDERS"
        ),
    ]


@pytest.mark.parametrize("index", range(8))
def test_an_unreachable_lake_fails_the_task_naming_its_connection(
    unreachable_lake: str, context: dict[str, Any], index: int, request: pytest.FixtureRequest
) -> None:
    from snowberg.iceberg.catalogs import LakeAccessError

    op = operators(unreachable_lake)[index]
    if getattr(op, "snowflake_conn_id", None) and op.task_id.startswith("slice"):
        # The slice tasks open Snowflake first (the emulator here), then the lake.
        sfdb = request.getfixturevalue("sfdb")
        monkeypatch = request.getfixturevalue("monkeypatch")
        monkeypatch.setenv("AIRFLOW_CONN_SNOWFLAKE_DEFAULT", sfdb.airflow_connection())
    with pytest.raises(LakeAccessError) as caught:
        op.execute(context)
    text = str(caught.value)
    assert f"lake connection {unreachable_lake!r}" in text and "Check " in text, (op.task_id, text)
    assert SECRET not in text
