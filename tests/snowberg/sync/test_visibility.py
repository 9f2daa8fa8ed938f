"""After a sync: Snowflake's own SQL must show the rows (native targets and Snowflake-managed Iceberg targets)."""

from __future__ import annotations

from typing import Any

import pytest
from l2s_data import orders, orders_schema, remove_orders

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


# ---------------------------------------------------------------------------
# Keyed syncs: the target is compared with the source, not only with what the run wrote


def _keyed_change(lake: Any, conn: Any, db: str) -> tuple[Any, dict[str, Any]]:
    """Orders 1, 2, 3 synced by key order_id; order 3 deleted at the source (merge-on-read) and synced."""
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))
    _load(src, conn, db, "r1", key_columns=["order_id"])
    src = remove_orders(src, [3], "merge_on_read")
    result = _load(src, conn, db, "r2", key_columns=["order_id"]).to_dict()
    assert result["mode"] == "changes"
    return src, result


def _sql(conn: Any, text: str, params: Any = None) -> None:
    cur = conn.cursor()
    try:
        cur.execute(text, params)
    finally:
        cur.close()


def test_a_keyed_change_whose_target_lost_a_row_it_did_not_write_is_not_visible(lake, snowflake) -> None:
    """What the old apply did with ``key_columns: [customer]`` (deleting order 3 also deleted order 1 from the
    target): before, the check counted only the run's own lineage and said ``visible``."""
    _, conn, db = snowflake
    src, result = _keyed_change(lake, conn, db)
    assert check_native(conn, result)["status"] == "visible"
    _sql(conn, f'DELETE FROM {_target(db).quoted()} WHERE "ORDER_ID" = 1')
    with pytest.raises(VisibilityError, match=r"Snowflake returns 1 rows, the source holds 2 at snapshot"):
        check_native(conn, result)


def test_a_keyed_change_whose_target_holds_extra_null_key_rows_is_not_visible(lake, snowflake) -> None:
    """What the old apply did with source keys [1, NULL, 3] and copy-on-write deletes (``t.k = d.k`` never
    removes a NULL-key row, so each rewrite added one): before, the check said ``visible``."""
    _, conn, db = snowflake
    src, result = _keyed_change(lake, conn, db)
    first = src.history()[0].snapshot_id
    _sql(
        conn,
        f'INSERT INTO {_target(db).quoted()} ("ORDER_ID", "_SNOWBERG_SOURCE_SNAPSHOT_ID") VALUES (NULL, %(s)s)',
        {"s": first},
    )
    with pytest.raises(VisibilityError, match=r"Snowflake returns 3 rows, the source holds 2"):
        check_native(conn, result)


def test_rows_of_the_touched_keys_are_compared_even_when_the_count_agrees(lake, snowflake) -> None:
    """A lost untouched row and an extra row of a removed key cancel out in the count: the touched keys'
    rows, re-read from the source's change, still differ."""
    _, conn, db = snowflake
    src, result = _keyed_change(lake, conn, db)
    assert check_native(conn, result, source=src)["keys_checked"] == 1
    first = src.history()[0].snapshot_id
    _sql(conn, f'DELETE FROM {_target(db).quoted()} WHERE "ORDER_ID" = 2')
    _sql(
        conn,
        f'INSERT INTO {_target(db).quoted()} ("ORDER_ID", "_SNOWBERG_SOURCE_SNAPSHOT_ID") VALUES (3, %(s)s)',
        {"s": first},
    )
    check_native(conn, result)  # without the source: counts only, which agree
    with pytest.raises(
        VisibilityError,
        match=r"rows of 1 key\(s\) the change touched differ.*'order_id': 3.*"
        r"expected 0, found 1",
    ):
        check_native(conn, result, source=src)


def test_an_iceberg_targets_keyed_commit_is_compared_with_the_source(lake, snowflake) -> None:
    """The committed target must hold the source's rows; Snowflake's rows of the touched keys are compared
    (on the emulator a native table stands in for Snowflake's view of the Iceberg table)."""
    _, conn, db = snowflake
    src, native_result = _keyed_change(lake, conn, db)
    t = _target(db)  # the native target holds exactly what the Iceberg target would: it stands in for it
    result = {
        "mode": "changes",
        "target_total_rows": 2,
        "target_snapshot_id": 7,
        "source_uuid": native_result["source_uuid"],
        "from_snapshot_id": native_result["from_snapshot_id"],
        "to_snapshot_id": native_result["to_snapshot_id"],
        "key_columns": ["order_id"],
        "key_target_columns": ["ORDER_ID"],
        "source_rows": 2,
    }
    assert check_iceberg(conn, t, result, source=src)["keys_checked"] == 1
    with pytest.raises(VisibilityError, match=r"committed target snapshot 7 holds 3 rows, the source 2"):
        check_iceberg(conn, t, {**result, "target_total_rows": 3}, timeout=0.2, interval=0.1)
    _sql(conn, f'UPDATE {t.quoted()} SET "ORDER_ID" = 3 WHERE "ORDER_ID" = 2')  # same count, wrong rows
    with pytest.raises(VisibilityError, match=r"the change touched differ"):
        check_iceberg(conn, t, result, source=src, timeout=0.2, interval=0.1)
