"""Lake → native Snowflake table on the emulator: types, exactly once, rewrites, and the load + check operators."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from l2s_data import orders, orders_schema, remove_orders

from snowberg.core.identifiers import TableName
from snowberg.sync import native
from snowberg.sync.native import ConcurrentSyncError, load_native
from snowberg.sync.snapshots import SourceRewriteError
from snowberg.sync.visibility import VisibilityError, check_native

pytestmark = pytest.mark.slow


def _target(database: str, name: str = "ORDERS") -> TableName:
    return TableName(database=database, schema="SHOP", table=name)


def _load(src: Any, conn: Any, database: str, run_id: str, **kw: Any):
    return load_native(src, conn, target=_target(database), source_label="lake:shop.orders", run_id=run_id, **kw)


def _rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        cur.close()


def _ids(conn: Any, database: str) -> list[int]:
    return [r[0] for r in _rows(conn, f'SELECT "ORDER_ID" FROM {_target(database).quoted()} ORDER BY 1')]


def _state(conn: Any, database: str) -> tuple[Any, ...]:
    (row,) = _rows(
        conn,
        f'SELECT "SOURCE_SNAPSHOT_ID", "MODE", "ROWS_LOADED", "RUN_ID" FROM "{database}"."SHOP"."SNOWBERG_SYNC_STATE"',
    )
    return row


def test_every_type_lands_with_its_mapped_snowflake_type(lake, snowflake) -> None:
    import pyarrow as pa

    _, conn, db = snowflake
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("qty", pa.int32()),
            ("name", pa.string()),
            ("price", pa.decimal128(12, 3)),
            ("ratio", pa.float64()),
            ("score", pa.float32()),
            ("ok", pa.bool_()),
            ("day", pa.date32()),
            ("at_time", pa.time64("us")),
            ("local_ts", pa.timestamp("us")),
            ("utc_ts", pa.timestamp("us", tz="UTC")),
            ("raw", pa.binary()),
            ("tags", pa.list_(pa.string())),
            ("attrs", pa.struct([("k", pa.string()), ("n", pa.int64()), ("d", pa.decimal128(5, 2))])),
            ("props", pa.map_(pa.string(), pa.int64())),
        ]
    )
    src = lake.create_table("shop.all_types", schema=schema)
    row = {
        "id": 9_007_199_254_740_993,
        "qty": -2_147_483_648,
        "name": 'it\'s "quoted" \\ ünïcode',
        "price": Decimal("123456789.125"),
        "ratio": 0.1,
        "score": 1.5,
        "ok": False,
        "day": dt.date(2026, 2, 28),
        "at_time": dt.time(23, 59, 59, 999999),
        "local_ts": dt.datetime(2026, 1, 2, 3, 4, 5, 6),
        "utc_ts": dt.datetime(2026, 1, 2, 3, 4, 5, 7, tzinfo=dt.UTC),
        "raw": b"\x00\xffsnow",
        "tags": ["a", "b"],
        "attrs": {"k": "v", "n": 7, "d": Decimal("1.50")},
        "props": [("x", 1), ("y", 2)],
    }
    nulls = {k: None for k in row} | {"id": 2, "local_ts": row["local_ts"], "utc_ts": row["utc_ts"]}
    src.append(pa.Table.from_pylist([row, nulls], schema=schema))
    target = TableName(database=db, schema="SHOP", table="ALL_TYPES")
    result = load_native(src, conn, target=target, source_label="lake:shop.all_types", run_id="r1")
    assert (result.status, result.mode, result.rows) == ("committed", "initial", 2)

    described = {r[0]: r[1] for r in _rows(conn, f"DESCRIBE TABLE {target.quoted()}")}
    assert described == {  # the emulator reports its widest precisions for TIME/TIMESTAMP/BINARY/ARRAY
        "ID": "NUMBER(19,0)",
        "QTY": "NUMBER(10,0)",
        "NAME": "VARCHAR(16777216)",
        "PRICE": "NUMBER(12,3)",
        "RATIO": "FLOAT",
        "SCORE": "FLOAT",
        "OK": "BOOLEAN",
        "DAY": "DATE",
        "AT_TIME": "TIME(9)",
        "LOCAL_TS": "TIMESTAMP_NTZ(9)",
        "UTC_TS": "TIMESTAMP_TZ(9)",
        "RAW": "BINARY(8388608)",
        "TAGS": "VARIANT",
        "ATTRS": "VARIANT",
        "PROPS": "VARIANT",
        "_SNOWBERG_SOURCE_SNAPSHOT_ID": "NUMBER(19,0)",
    }
    got = _rows(conn, f'SELECT * FROM {target.quoted()} ORDER BY "ID" DESC')
    first = dict(zip(described, got[0], strict=True))
    assert first["ID"] == row["id"] and first["QTY"] == row["qty"] and first["NAME"] == row["name"]
    assert first["PRICE"] == row["price"] and first["RATIO"] == 0.1 and first["SCORE"] == 1.5 and first["OK"] is False
    assert first["DAY"] == row["day"] and first["AT_TIME"] == row["at_time"] and first["LOCAL_TS"] == row["local_ts"]
    assert first["UTC_TS"] == row["utc_ts"] and bytes(first["RAW"]) == row["raw"]
    assert json.loads(first["TAGS"]) == ["a", "b"]
    assert json.loads(first["ATTRS"]) == {"k": "v", "n": 7, "d": "1.50"}  # decimals in JSON stay exact text
    assert json.loads(first["PROPS"]) == {"x": 1, "y": 2}
    assert first["_SNOWBERG_SOURCE_SNAPSHOT_ID"] == src.current_snapshot().snapshot_id
    second = dict(zip(described, got[1], strict=True))
    assert all(second[c] is None for c in ("QTY", "NAME", "PRICE", "RATIO", "OK", "DAY", "RAW", "TAGS", "ATTRS"))


def test_incremental_loads_are_exactly_once(lake, snowflake) -> None:
    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2]))
    first = _load(src, conn, db, "r1")
    assert (first.status, first.mode, first.rows) == ("committed", "initial", 2)
    assert _load(src, conn, db, "r1-retry").status == "nothing_new"
    src.append(orders([3]))
    a = src.current_snapshot().snapshot_id
    src.append(orders([4, 5]))
    b = src.current_snapshot().snapshot_id
    r = _load(src, conn, db, "r2", insert_batch_rows=1)  # one INSERT per row, all in one transaction
    assert (r.status, r.mode, r.rows, r.rows_by_snapshot) == ("committed", "incremental", 3, {str(a): 1, str(b): 2})
    assert _ids(conn, db) == [1, 2, 3, 4, 5]
    assert _state(conn, db) == (b, "incremental", 3, "r2")
    assert check_native(conn, r.to_dict())["status"] == "visible"
    assert _load(src, conn, db, "r3").status == "nothing_new"
    assert _ids(conn, db) == [1, 2, 3, 4, 5]


def test_failure_before_commit_leaves_nothing_and_the_retry_loads_once(lake, snowflake, monkeypatch) -> None:
    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1]))
    _load(src, conn, db, "r1")
    src.append(orders([2, 3]))
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:before_commit")
    with pytest.raises(RuntimeError, match="injected failure at before_commit"):
        _load(src, conn, db, "r2")
    assert _ids(conn, db) == [1]  # the INSERTs were rolled back with the state update
    assert _state(conn, db)[3] == "r1"
    monkeypatch.delenv("SNOWBERG_FAULT")
    r = _load(src, conn, db, "r2-try2")
    assert (r.status, r.rows) == ("committed", 2) and _ids(conn, db) == [1, 2, 3]


def test_failure_after_commit_then_retry_appends_nothing(lake, snowflake, monkeypatch) -> None:
    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2]))
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:after_commit")
    with pytest.raises(RuntimeError, match="after_commit"):
        _load(src, conn, db, "r1")
    monkeypatch.delenv("SNOWBERG_FAULT")
    assert _load(src, conn, db, "r1-retry").status == "nothing_new"
    assert _ids(conn, db) == [1, 2]


def test_a_run_planned_from_a_stale_state_rolls_back(lake, snowflake, monkeypatch) -> None:
    """Two runs plan from the same state; the second to reach the guarded UPDATE writes nothing."""
    conn_id, conn, db = snowflake
    from snowberg.snowflake.hook import snowflake_hook

    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1]))
    _load(src, conn, db, "r1")
    src.append(orders([2, 3]))

    real_prepare = native.prepare_target
    other = snowflake_hook(conn_id).get_conn()
    ran: list[Any] = []

    def other_run_first(*args: Any, **kw: Any) -> bool:
        if not ran:
            ran.append(None)
            monkeypatch.setattr(native, "prepare_target", real_prepare)
            ran[0] = _load(src, other, db, "other-run")
        return real_prepare(*args, **kw)

    monkeypatch.setattr(native, "prepare_target", other_run_first)
    try:
        with pytest.raises(ConcurrentSyncError, match="moved since run my-run planned"):
            _load(src, conn, db, "my-run")
    finally:
        other.close()
    assert ran[0].status == "committed"
    assert _ids(conn, db) == [1, 2, 3]
    assert _state(conn, db)[3] == "other-run"


def test_source_rewrites_are_refused_or_fully_reloaded(lake, snowflake) -> None:
    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))
    _load(src, conn, db, "r1")
    src.delete("order_id = 2")
    with pytest.raises(SourceRewriteError, match="on_rewrite: full_reload"):
        _load(src, conn, db, "r2")
    assert _ids(conn, db) == [1, 2, 3]
    r = _load(src, conn, db, "r3", on_rewrite="full_reload")
    assert (r.mode, r.rows) == ("full_reload", 2) and _ids(conn, db) == [1, 3]
    assert check_native(conn, r.to_dict())["rows_checked"] == 2


def test_keyed_source_changes_are_merged_by_key_not_reloaded(lake, snowflake) -> None:
    """A merge-on-read merge and a delete at the source reach the target as a delete-by-key + insert of the change."""
    import pyarrow as pa

    from snowberg.iceberg.merge import write_position_deletes

    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))
    src.append(orders([4, 5]))
    _load(src, conn, db, "r1")
    tx = src.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([2, 4, 6], pa.int64())}), {}, io=src.io)
    new = orders([2, 4, 6])
    tx.append(new.set_column(1, "customer", pa.array(["v2", "v2", "v2"])))
    src = tx.commit_transaction()
    src.delete("order_id = 5")
    with pytest.raises(SourceRewriteError):
        _load(src, conn, db, "r2-no-key")  # without a key the change is still a rewrite
    r = _load(src, conn, db, "r2", insert_batch_rows=2, key_columns=["order_id"])
    assert (r.status, r.mode, r.rows) == ("committed", "changes", 3)  # only the three new versions are sent
    got = _rows(conn, f'SELECT "ORDER_ID", "CUSTOMER" FROM {_target(db).quoted()} ORDER BY 1')
    assert got == [(1, "customer '1'"), (2, "v2"), (3, "customer '3'"), (4, "v2"), (6, "v2")]
    assert _state(conn, db) == (src.current_snapshot().snapshot_id, "changes", 3, "r2")
    assert _load(src, conn, db, "r3", key_columns=["order_id"]).status == "nothing_new"


def test_new_source_columns_are_added_and_old_rows_stay(lake, snowflake) -> None:
    import pyarrow as pa
    from pyiceberg.types import StringType

    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1]))
    _load(src, conn, db, "r1")
    with src.update_schema() as upd:
        upd.add_column("channel", StringType())
    src.append(orders([2]).append_column("channel", pa.array(["web"])))
    r = _load(src, conn, db, "r2")
    assert r.rows == 1
    assert _rows(conn, f'SELECT "ORDER_ID", "CHANNEL" FROM {_target(db).quoted()} ORDER BY 1') == [
        (1, None),
        (2, "web"),
    ]


def test_a_populated_target_without_state_is_not_appended_to(lake, snowflake) -> None:
    _, conn, db = snowflake
    cur = conn.cursor()
    cur.execute(f'CREATE TABLE {_target(db).quoted()} ("ORDER_ID" NUMBER(19,0), "CUSTOMER" VARCHAR)')
    cur.execute(f"INSERT INTO {_target(db).quoted()} VALUES (99, 'typed by hand')")
    cur.close()
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1]))
    with pytest.raises(SourceRewriteError, match="already holds 1 rows but has no sync state"):
        _load(src, conn, db, "r1")
    assert _ids(conn, db) == [99]
    r = _load(src, conn, db, "r2", on_rewrite="full_reload")
    assert r.mode == "full_reload" and _ids(conn, db) == [1]


def _lake_connection(connection: Any, lake: Any) -> None:
    """The lake catalog as the Airflow connection ``lake`` (the operators open it by id)."""
    connection(
        "lake",
        {
            "conn_type": "sqlite",
            "host": lake.properties["uri"].removeprefix("sqlite:///"),
            "extra": {"warehouse": lake.properties["warehouse"]},
        },
    )


def test_operators_load_then_check(lake, snowflake, connection) -> None:
    from snowberg.airflow.operators.lake_to_snowflake import (
        IcebergToSnowflakeNativeOperator,
        SnowflakeVisibilityCheckOperator,
    )

    conn_id, conn, db = snowflake
    _lake_connection(connection, lake)
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2]))
    load = IcebergToSnowflakeNativeOperator(
        task_id="sync",
        source_catalog="lake",
        source_table="shop.orders",
        snowflake_conn_id=conn_id,
        target_table=f"{db}.SHOP.ORDERS",
    )
    out = load.execute({"run_id": "manual__1"})
    assert json.loads(json.dumps(out)) == out and out["rows"] == 2
    check = SnowflakeVisibilityCheckOperator(
        task_id="check_visible", kind="native", snowflake_conn_id=conn_id, table=f"{db}.SHOP.ORDERS", sync_result=out
    )
    assert check.execute({})["status"] == "visible"
    cur = conn.cursor()
    cur.execute(f'DELETE FROM "{db}"."SHOP"."ORDERS"')
    cur.close()
    with pytest.raises(VisibilityError):
        check.execute({})


# ---------------------------------------------------------------------------
# Keys that are not keys (key_columns other than the source's identifier fields are verified)


def _with(t: Any, column: str, values: list[Any]) -> Any:
    import pyarrow as pa

    i = t.schema.get_field_index(column)
    return t.set_column(i, column, pa.array(values, t.schema.field(column).type))


def _target_exists(conn: Any, db: str) -> bool:
    return native.existing_columns(conn.cursor(), _target(db)) is not None


def test_a_key_with_nulls_fails_the_first_keyed_sync_before_any_write(lake, snowflake) -> None:
    """Source keys [1, NULL, 3]. Before: the sync loaded them; two copy-on-write deletes (order 1, then order 3)
    left three NULL-key rows in the target for one source row (``t.k = d.k`` never matches NULL), and the
    visibility check said ``visible``. Now the first keyed sync refuses, naming the column and the count."""
    from snowberg.sync.keys import KeyViolationError

    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(_with(orders([1, 2, 3]), "order_id", [1, None, 3]))
    with pytest.raises(KeyViolationError, match=r"order_id is NULL in 1 row\(s\)"):
        _load(src, conn, db, "r1", key_columns=["order_id"])
    assert not _target_exists(conn, db)  # nothing written
    # the same source without a key loads (a keyed change is what a NULL key breaks)
    assert _load(src, conn, db, "r2", key_columns=[]).rows == 3


def test_a_key_shared_by_two_rows_fails_the_first_keyed_sync(lake, snowflake) -> None:
    """``key_columns: [customer]`` with orders 1 and 3 both for customer c. Before: deleting order 3 at the
    source also deleted order 1 from the target, and the check said ``visible``."""
    from snowberg.sync.keys import KeyViolationError

    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(_with(orders([1, 2, 3]), "customer", ["c", "d", "c"]))
    with pytest.raises(KeyViolationError, match=r"1 value\(s\) of customer are held by more than one row \(2 rows\)"):
        _load(src, conn, db, "r1", key_columns=["customer"])
    assert not _target_exists(conn, db)


@pytest.mark.parametrize("strategy", ["copy_on_write", "merge_on_read"])
def test_key_verified_once_then_per_change(lake, snowflake, monkeypatch, strategy) -> None:
    """The first keyed sync verifies the whole source and records the key with the sync state; later syncs
    check their change only (a NULL or a repeated key in it fails before any write), and changing
    key_columns verifies the whole source again."""

    from snowberg.sync import keys
    from snowberg.sync.keys import KeyViolationError

    _, conn, db = snowflake
    whole: list[int] = []
    real = keys.verify_source
    monkeypatch.setattr(keys, "verify_source", lambda t, s, k, label: whole.append(s) or real(t, s, k, label))
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))
    _load(src, conn, db, "r1", key_columns=["order_id"])
    assert len(whole) == 1
    assert json.loads(_rows(conn, f'SELECT "KEY_COLUMNS" FROM "{db}"."SHOP"."SNOWBERG_SYNC_STATE"')[0][0]) == [
        "order_id"
    ]
    src.append(orders([4]))
    assert _load(src, conn, db, "r2", key_columns=["order_id"]).mode == "incremental"
    src = remove_orders(src, [2], strategy)
    assert _load(src, conn, db, "r3", key_columns=["order_id"]).mode == "changes"
    assert len(whole) == 1 and _ids(conn, db) == [1, 3, 4]  # the change only

    state = _state(conn, db)
    src.append(_with(orders([5, 6]), "order_id", [5, None]))  # a NULL key in an append
    with pytest.raises(KeyViolationError, match=r"the rows the change appends: order_id is NULL in 1 row"):
        _load(src, conn, db, "r4", key_columns=["order_id"])
    src.append(orders([7, 7]))  # a key twice in one change
    with pytest.raises(KeyViolationError, match=r"order_id are held by more than one row"):
        _load(src, conn, db, "r5", key_columns=["order_id"])
    assert _state(conn, db) == state and _ids(conn, db) == [1, 3, 4]
    assert len(whole) == 1

    # a new key: verified over the whole source again (customer names are unique here, the NULL order_id is not
    # in this key)
    src2 = lake.create_table("shop.orders2", schema=orders_schema())
    src2.append(orders([1, 2]))
    t2 = TableName(database=db, schema="SHOP", table="ORDERS2")
    load_native(src2, conn, target=t2, source_label="lake:shop.orders2", run_id="a1", key_columns=["order_id"])
    src2.append(orders([3]))
    load_native(src2, conn, target=t2, source_label="lake:shop.orders2", run_id="a2", key_columns=["customer"])
    assert len(whole) == 3


@pytest.mark.parametrize("strategy", ["copy_on_write", "merge_on_read"])
def test_change_sharing_an_untouched_key_rolls_back(lake, snowflake, monkeypatch, strategy) -> None:
    """An append gave customer c a second row after the key was verified (each change holds c once). Removing
    one of c's rows at the source would remove both from the target: the rows the target's DELETE matched are
    not the rows the source removed, so the transaction rolls back."""

    from snowberg.sync.keys import KeyViolationError

    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(_with(orders([1, 2]), "customer", ["c", "d"]))
    _load(src, conn, db, "r1", key_columns=["customer"])
    src.append(_with(orders([3]), "customer", ["c"]))  # customer c again, in its own file
    _load(src, conn, db, "r2", key_columns=["customer"])  # an append: the target mirrors the source
    assert _ids(conn, db) == [1, 2, 3]
    src = remove_orders(src, [3], strategy)  # copy-on-write drops order 3's file
    state = _state(conn, db)
    with pytest.raises(KeyViolationError, match=r"1 removed or rewritten row\(s\).*matched 2 target row\(s\)"):
        _load(src, conn, db, "r3", key_columns=["customer"])
    assert _ids(conn, db) == [1, 2, 3] and _state(conn, db) == state  # rolled back: order 1 is still there


def test_the_check_operator_compares_a_keyed_change_with_the_source(lake, snowflake, connection) -> None:
    """Given the sync's source (as the sync DAG passes it), the check re-reads the change's touched keys."""
    from snowberg.airflow.operators.lake_to_snowflake import SnowflakeVisibilityCheckOperator

    conn_id, conn, db = snowflake
    _lake_connection(connection, lake)
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))
    _load(src, conn, db, "r1", key_columns=["order_id"])
    src.delete("order_id = 2")
    out = json.loads(json.dumps(_load(src, conn, db, "r2", key_columns=["order_id"]).to_dict()))  # through XCom
    check = SnowflakeVisibilityCheckOperator(
        task_id="check_visible",
        kind="native",
        snowflake_conn_id=conn_id,
        table=f"{db}.SHOP.ORDERS",
        sync_result=out,
        source_catalog="lake",
        source_table="shop.orders",
    )
    done = check.execute({})
    assert done["status"] == "visible" and done["source_rows"] == 2 and done["keys_checked"] == 3
    cur = conn.cursor()
    cur.execute(f'UPDATE {_target(db).quoted()} SET "ORDER_ID" = 2 WHERE "ORDER_ID" = 3')  # same count
    cur.close()
    with pytest.raises(VisibilityError, match="the change touched differ"):
        check.execute({})
