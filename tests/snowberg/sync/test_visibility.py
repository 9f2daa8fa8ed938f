"""After a sync: Snowflake's own SQL must show the rows (native targets and Snowflake-managed Iceberg targets)."""

from __future__ import annotations

from typing import Any

import pytest
from l2s_data import orders, orders_schema

from snowberg.core.identifiers import TableName
from snowberg.sync.native import load_native
from snowberg.sync.snapshots import SourceRewriteError
from snowberg.sync.visibility import VisibilityError, check_iceberg, check_native, snowflake_count

pytestmark = pytest.mark.slow


def _target(database: str, name: str = "ORDERS") -> TableName:
    return TableName(database=database, schema="SHOP", table=name)


def _load(src: Any, conn: Any, database: str, run_id: str, **kw: Any):
    return load_native(src, conn, target=_target(database), source_label="lake:shop.orders", run_id=run_id, **kw)


def test_visibility_check_fails_when_rows_or_state_are_missing(lake, snowflake) -> None:
    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))
    result = _load(src, conn, db, "r1").to_dict()
    check_native(conn, result)
    cur = conn.cursor()
    cur.execute(f'DELETE FROM {_target(db).quoted()} WHERE "ORDER_ID" = 2')
    with pytest.raises(VisibilityError, match=r"expected 3, found 2"):
        check_native(conn, result)
    cur.execute(
        f'INSERT INTO {_target(db).quoted()} ("ORDER_ID", "_SNOWBERG_SOURCE_SNAPSHOT_ID") VALUES (2, %(s)s)',
        {"s": result["to_snapshot_id"]},
    )
    check_native(conn, result)
    cur.execute(f'UPDATE "{db}"."SHOP"."SNOWBERG_SYNC_STATE" SET "SOURCE_SNAPSHOT_ID" = 1')
    with pytest.raises(VisibilityError, match="synced to source snapshot 1"):
        check_native(conn, result)
    cur.close()
    with pytest.raises(SourceRewriteError, match="1 is not an ancestor"):  # a state the load cannot place
        _load(src, conn, db, "r2")


def test_iceberg_visibility_check_compares_snowflake_count_with_the_catalog(snowflake) -> None:
    """The Horizon check is Snowflake SQL; on the emulator a native table stands in for the Iceberg table."""
    _, conn, db = snowflake
    t = TableName(database=db, schema="SHOP", table="ICEBERG_VIEW")
    cur = conn.cursor()
    cur.execute(f'CREATE TABLE {t.quoted()} ("X" NUMBER)')
    cur.execute(f"INSERT INTO {t.quoted()} VALUES (1), (2), (3)")
    cur.close()
    assert check_iceberg(conn, t, {"target_total_rows": 3, "target_snapshot_id": 7})["rows"] == 3
    assert check_iceberg(conn, t, {"target_total_rows": 2}, current_rows=lambda: 3)["rows"] == 3  # a later commit
    with pytest.raises(VisibilityError, match="Snowflake returns 3 rows.*holds \\[4\\]"):
        check_iceberg(conn, t, {"target_total_rows": 4}, timeout=0.5, interval=0.2)


def test_without_a_lineage_column_the_native_check_counts_the_loaded_rows(lake, snowflake) -> None:
    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))
    result = _load(src, conn, db, "r1", lineage_column=None).to_dict()
    assert result["lineage_column"] is None
    summary = check_native(conn, result)
    assert summary == {
        "target": f"{db}.SHOP.ORDERS",
        "snapshot": result["to_snapshot_id"],
        "rows_checked": 3,
        "status": "visible",
    }
    cur = conn.cursor()
    cur.execute(f'DELETE FROM {_target(db).quoted()} WHERE "ORDER_ID" = 3')
    cur.close()
    assert snowflake_count(conn, _target(db)) == 2
    with pytest.raises(VisibilityError, match=r"2 rows in Snowflake, fewer than the 3 just loaded"):
        check_native(conn, result)


def test_an_iceberg_target_of_unknown_row_count_is_not_checked(snowflake) -> None:
    _, conn, db = snowflake
    t = _target(db, "NO_SUCH_TABLE")  # never queried: nothing to compare with
    assert check_iceberg(conn, t, {"target_total_rows": None}, current_rows=lambda: None) == {
        "target": str(t),
        "status": "unknown",
    }
