"""Native syncs by COPY on the emulator: the lake's files through a stage, the worker's files PUT, and INSERTs.

The emulator (fakesnow) runs ``COPY INTO <table>`` from Parquet with a transformation SELECT, ``PUT``
into a temporary stage, and an external stage whose URL is a local folder (the lake's warehouse here).
It cannot read an ``s3://`` stage (its DuckDB has no httpfs) nor hold NUMBER(38,0) values beyond
64 bits: those are the live lane's (``test_copy_live.py``).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from snowberg.core.identifiers import TableName
from snowberg.sync.copy_load import CopyPaths
from snowberg.sync.copy_sql import CopyLoadError, LakeStage
from snowberg.sync.native import load_native
from snowberg.sync.visibility import check_native

pytestmark = pytest.mark.slow


def _stage(conn: Any, db: str, lake: Any) -> LakeStage:
    """An external stage over the lake's warehouse (a local folder on the emulator)."""
    url = lake.properties["warehouse"].rstrip("/") + "/"
    cur = conn.cursor()
    cur.execute(f"CREATE STAGE IF NOT EXISTS {db}.SHOP.LAKE URL = '{url}'")
    cur.close()
    return LakeStage(stage=f"{db}.SHOP.LAKE", stage_url=url)


def _paths(conn: Any, db: str, lake: Any) -> dict[str, CopyPaths | None]:
    return {
        "insert": None,
        "put_copy": CopyPaths(copy_min_rows=0),
        "stage_copy": CopyPaths(lake_stage=_stage(conn, db, lake), copy_min_rows=0),
    }


def _rows(conn: Any, table: TableName) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    cur.execute(f'SELECT * FROM {table.quoted()} ORDER BY "ID"')
    out = [tuple(r) for r in cur.fetchall()]
    cur.close()
    return out


SCALARS: list[tuple[str, Any, Any, Any]] = []  # (name, arrow type, a value, another value)


def _scalars() -> list[tuple[str, Any, Any, Any]]:
    import pyarrow as pa

    return [
        ("qty", pa.int32(), -2_147_483_648, 7),
        ("big", pa.decimal128(38, 0), Decimal("9223372036854775807"), Decimal("-12")),  # emulator: 64 bits at most
        ("price", pa.decimal128(12, 3), Decimal("123456789.125"), Decimal("-0.001")),
        ("ratio", pa.float64(), float("nan"), float("-inf")),
        ("score", pa.float32(), 0.1, float("inf")),
        ("name", pa.string(), 'it\'s "ünïcode" ☃ \\', ""),
        ("raw", pa.binary(), b"\x00\xffsnow", b""),
        ("ok", pa.bool_(), True, False),
        ("day", pa.date32(), dt.date(2026, 2, 28), dt.date(1970, 1, 1)),
        ("at_time", pa.time64("us"), dt.time(23, 59, 59, 999_999), dt.time(0, 0)),
        ("local_ts", pa.timestamp("us"), dt.datetime(2026, 1, 2, 3, 4, 5, 6), dt.datetime(1999, 12, 31, 23, 59)),
        (
            "utc_ts",
            pa.timestamp("us", tz="UTC"),
            dt.datetime(2026, 1, 2, 3, 4, 5, 7, tzinfo=dt.UTC),
            dt.datetime(2000, 1, 1, tzinfo=dt.UTC),
        ),
        ("doc", pa.string(), '{"a": [1, 2.50, "x"], "b": null}', "[]"),  # a VARIANT the lake holds as JSON text
    ]


def _nested() -> list[tuple[str, Any, Any, Any]]:
    import pyarrow as pa

    return [
        ("tags", pa.list_(pa.string()), ["a", "b"], []),
        ("nums", pa.list_(pa.float64()), [1.5, float("nan")], None),
        (
            "attrs",
            pa.struct([("k", pa.string()), ("n", pa.int64()), ("d", pa.decimal128(5, 2)), ("at", pa.timestamp("us"))]),
            {"k": "v", "n": 7, "d": Decimal("1.50"), "at": dt.datetime(2026, 1, 1, 0, 0, 0, 1)},
            {"k": None, "n": None, "d": None, "at": None},
        ),
        ("props", pa.map_(pa.string(), pa.int64()), [("x", 1), ("y", 2)], []),
    ]


def _table(lake: Any, name: str, columns: list[tuple[str, Any, Any, Any]]) -> Any:
    import pyarrow as pa

    schema = pa.schema([("id", pa.int64()), *[(n, t) for n, t, _, _ in columns]])
    src = lake.create_table(f"shop.{name}", schema=schema)
    rows = [
        {"id": 1, **{n: a for n, _, a, _ in columns}},
        {"id": 2, **{n: b for n, _, _, b in columns}},
        {"id": 3, **{n: None for n, _, _, _ in columns}},
    ]
    src.append(pa.Table.from_pylist(rows, schema=schema))
    return src


@pytest.mark.parametrize("shape", ["scalars", "with_nested"])
def test_every_type_lands_the_same_through_stage_copy_put_copy_and_insert(lake, snowflake, shape) -> None:
    """Value for value the same on every path: NaN/±inf, unicode, binary, microseconds, UTC offsets, JSON."""
    _, conn, db = snowflake
    columns = _scalars() + (_nested() if shape == "with_nested" else [])
    src = _table(lake, shape, columns)
    got: dict[str, list[tuple[Any, ...]]] = {}
    for path, copy in _paths(conn, db, lake).items():
        target = TableName(database=db, schema="SHOP", table=f"{shape}_{path}".upper())
        r = load_native(src, conn, target=target, source_label="lake:t", run_id="r1", copy=copy)
        assert (r.status, r.mode, r.rows) == ("committed", "initial", 3)
        # Nested columns cannot be loaded from the lake's files as they are: the worker writes them.
        want = "put_copy" if (path == "stage_copy" and shape == "with_nested") else path
        assert r.load_path == want
        assert check_native(conn, r.to_dict())["status"] == "visible"
        got[path] = _rows(conn, target)
    assert repr(got["put_copy"]) == repr(got["insert"])  # repr: NaN == NaN
    assert repr(got["stage_copy"]) == repr(got["insert"])
    cur = conn.cursor()
    cur.execute(f'SELECT TO_VARCHAR("UTC_TS") FROM "{db}"."SHOP"."{shape.upper()}_STAGE_COPY" ORDER BY "ID"')
    assert [r[0] for r in cur.fetchall()][:2] == ["2026-01-02 03:04:05.000007+00", "2000-01-01 00:00:00+00"]
    cur.close()


def _orders(ids: list[int]) -> Any:
    from l2s_data import orders

    return orders(ids)


def test_stage_copy_is_exactly_once_incremental_and_reloads_with_force(lake, snowflake) -> None:
    from l2s_data import orders_schema

    _, conn, db = snowflake
    copy = CopyPaths(lake_stage=_stage(conn, db, lake), copy_min_rows=0)
    target = TableName(database=db, schema="SHOP", table="ORDERS")
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(_orders([1, 2]))
    first = load_native(src, conn, target=target, source_label="l", run_id="r1", copy=copy)
    assert (first.mode, first.rows, first.load_path) == ("initial", 2, "stage_copy")
    src.append(_orders([3]))
    a = src.current_snapshot().snapshot_id
    src.append(_orders([4, 5]))
    b = src.current_snapshot().snapshot_id
    r = load_native(src, conn, target=target, source_label="l", run_id="r2", copy=copy)
    assert (r.mode, r.rows, r.rows_by_snapshot, r.load_path) == ("incremental", 3, {str(a): 1, str(b): 2}, "stage_copy")
    assert check_native(conn, r.to_dict())["rows_checked"] == 3
    assert load_native(src, conn, target=target, source_label="l", run_id="r3", copy=copy).status == "nothing_new"
    # A reload loads files COPY loaded before (its load metadata keeps them 64 days): FORCE.
    src.delete("order_id = 2")
    src = lake.load_table("shop.orders")
    reload = load_native(
        src, conn, target=target, source_label="l", run_id="r4", copy=copy, key_columns=[], on_rewrite="full_reload"
    )
    assert (reload.mode, reload.rows) == ("full_reload", 4)
    assert [r[0] for r in _rows_by(conn, target)] == [1, 3, 4, 5]


def _rows_by(conn: Any, target: TableName) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    cur.execute(f'SELECT "ORDER_ID", "CUSTOMER" FROM {target.quoted()} ORDER BY 1')
    out = [tuple(r) for r in cur.fetchall()]
    cur.close()
    return out


def test_a_file_copy_skips_as_already_loaded_fails_the_run_naming_it(lake, snowflake) -> None:
    """The target holds a file's rows its state does not account for: COPY skips it, the run fails, nothing moves."""
    from l2s_data import orders_schema

    _, conn, db = snowflake
    stage = _stage(conn, db, lake)
    copy = CopyPaths(lake_stage=stage, copy_min_rows=0)
    target = TableName(database=db, schema="SHOP", table="ORDERS")
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(_orders([1]))
    load_native(src, conn, target=target, source_label="l", run_id="r1", copy=copy)
    src.append(_orders([2]))
    snap = src.current_snapshot()
    (task,) = src.incremental_append_scan(
        from_snapshot_id_exclusive=snap.parent_snapshot_id, to_snapshot_id_inclusive=snap.snapshot_id
    ).plan_files()
    rel = stage.relative(task.file.file_path)
    cur = conn.cursor()  # someone loaded the new file by hand
    cur.execute(
        f'COPY INTO {target.quoted()} ("ORDER_ID") FROM (SELECT $1:"order_id"::NUMBER(19,0) FROM '
        f"{stage.location}) FILES = ('{rel}') FILE_FORMAT = (TYPE = PARQUET)"
    )
    cur.close()
    with pytest.raises(CopyLoadError, match=rf"{rel}: (skipped as already loaded|not loaded)"):
        load_native(src, conn, target=target, source_label="l", run_id="r2", copy=copy)
    assert [r[0] for r in _rows_by(conn, target)] == [1, 2]  # the hand-loaded row only; the run wrote nothing


def test_position_deleted_rows_are_never_copied(lake, snowflake) -> None:
    """A lake file with position deletes is read by the worker (deletes applied), never COPYed whole."""
    import pyarrow as pa
    from l2s_data import orders_schema

    from snowberg.iceberg.merge import write_position_deletes

    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(_orders([1, 2, 3]))
    src.append(_orders([4, 5]))
    tx = src.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([2], pa.int64())}), {}, io=src.io)
    src = tx.commit_transaction()
    for threshold, worker in ((0, "put_copy"), (1_000, "insert")):
        target = TableName(database=db, schema="SHOP", table=f"ORDERS_{threshold}")
        copy = CopyPaths(lake_stage=_stage(conn, db, lake), copy_min_rows=threshold)
        r = load_native(src, conn, target=target, source_label="l", run_id="r1", copy=copy)
        assert (r.mode, r.rows, r.load_path) == ("initial", 4, f"stage_copy+{worker}")
        assert [k for k, _ in _rows_by(conn, target)] == [1, 3, 4, 5]
        assert check_native(conn, r.to_dict())["rows_checked"] == 4


def test_keyed_changes_by_put_copy_match_the_insert_path(lake, snowflake) -> None:
    import pyarrow as pa
    from l2s_data import orders_schema

    from snowberg.iceberg.merge import write_position_deletes

    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(_orders([1, 2, 3, 4, 5]))
    targets = {p: TableName(database=db, schema="SHOP", table=f"ORDERS_{p.upper()}") for p in ("insert", "put")}
    copies = {"insert": None, "put": CopyPaths(copy_min_rows=0)}
    for p, t in targets.items():
        load_native(src, conn, target=t, source_label="l", run_id="r1", copy=copies[p])
    tx = src.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([2, 4], pa.int64())}), {}, io=src.io)
    tx.append(_orders([2, 4, 6]).set_column(1, "customer", pa.array(["v2"] * 3)))
    src = tx.commit_transaction()
    src.delete("order_id = 5")
    src = lake.load_table("shop.orders")
    for p, t in targets.items():
        r = load_native(src, conn, target=t, source_label="l", run_id="r2", copy=copies[p], key_columns=["order_id"])
        assert (r.mode, r.load_path) == ("changes", "insert" if p == "insert" else "put_copy")
    assert _rows_by(conn, targets["put"]) == _rows_by(conn, targets["insert"])
    assert _rows_by(conn, targets["put"]) == [(1, "customer '1'"), (2, "v2"), (3, "customer '3'"), (4, "v2"), (6, "v2")]


@pytest.mark.parametrize("path", ["put_copy", "stage_copy"])
def test_copy_with_no_schema_in_the_session(lake, snowflake, fakesnow_server, path) -> None:
    """Every name a sync sends is qualified, so the connection need not name a database or schema.

    Snowflake needs neither for qualified names; the emulator's COPY does (it reads its load history in
    the session's database), which the sync's ``USE SCHEMA`` of the target satisfies on both.
    """
    from l2s_data import orders_schema
    from snowflake.connector import connect

    _, conn, db = snowflake
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(_orders(list(range(1, 8))))
    bare = connect(**fakesnow_server.connect_kwargs())  # no database, no schema
    try:
        target = TableName(database=db, schema="SHOP", table="ORDERS_BARE")
        copy = _paths(conn, db, lake)[path]
        r = load_native(src, bare, target=target, source_label="l", run_id="r1", copy=copy)
        assert (r.load_path, r.rows) == (path, 7)
    finally:
        bare.close()
    assert [k for k, _ in _rows_by(conn, target)] == list(range(1, 8))
