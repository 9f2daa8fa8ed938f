"""A keyed lake → Snowflake sync killed at each step of applying a change (``os._exit``, as a killed worker
dies) applies it exactly once: before the target's commit nothing changed; after it, the retry finds
nothing new. Both targets: native (one Snowflake transaction) and Iceberg (one commit through the gate).
The native target for each way rows travel: bound INSERTs, Parquet the worker PUTs and COPYs, and the
lake's own files COPYed from a stage over the lake."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowberg" / "sync"))
import l2s_services  # noqa: E402
from l2s_data import orders, orders_schema  # noqa: E402

connection = l2s_services.connection
snowflake = l2s_services.snowflake
lake = l2s_services.lake

CHILD = r"""
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
from snowberg.core.identifiers import IcebergName, TableName
a = json.loads(sys.argv[1])
src = SqlCatalog("lake", uri=a["lake_uri"], warehouse=a["lake_wh"]).load_table("shop.orders")
if a["kind"] == "native":
    from snowberg.local.stack import FakesnowServer
    from snowberg.sync.copy_load import CopyPaths
    from snowberg.sync.copy_sql import LakeStage
    from snowberg.sync.native import load_native
    srv = FakesnowServer.__new__(FakesnowServer); srv.port = a["port"]
    conn = srv.connect(database=a["db"], schema="SHOP")
    stage = LakeStage(**a["stage"]) if a.get("stage") else None
    copy = CopyPaths(lake_stage=stage, copy_min_rows=0) if a.get("path", "insert") != "insert" else None
    load_native(src, conn, target=TableName.parse(a["target"]), source_label="lake:shop.orders", run_id=a["run_id"],
                copy=copy)
else:
    from snowberg.sync.horizon import sync_iceberg
    tgt = SqlCatalog("target", uri=a["tgt_uri"], warehouse=a["tgt_wh"])
    sync_iceberg(src, tgt, IcebergName.parse("SHOP.ORDERS"), source_label="lake:shop.orders", run_id=a["run_id"])
"""


def keyed_source(lake: Any) -> Any:
    """A source shaped like a snowberg merge table: ``order_id`` is a required identifier field."""

    src = lake.create_table("shop.orders", schema=orders_schema())
    with src.update_schema(allow_incompatible_changes=True) as upd:
        upd.update_column("order_id", required=True)
        upd.set_identifier_fields("order_id")
    src.append(orders(list(range(1, 21))).cast(SCHEMA()))
    src.append(orders(list(range(21, 41))).cast(SCHEMA()))
    return lake.load_table("shop.orders")


def SCHEMA() -> Any:  # noqa: N802 - reads as the constant it is
    import pyarrow as pa

    return pa.schema([f.with_nullable(f.name != "order_id") for f in orders_schema()])


def change(lake: Any) -> Any:
    """A merge-on-read update of keys 3 and 25, a new key 99, then a delete of key 30 (two snapshots)."""
    import pyarrow as pa

    from snowberg.iceberg.merge import write_position_deletes

    src = lake.load_table("shop.orders")
    tx = src.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([3, 25, 99], pa.int64())}), {}, io=src.io)
    new = orders([3, 25, 99])
    tx.append(new.set_column(1, "customer", pa.array(["v2"] * 3)).cast(SCHEMA()))
    src = tx.commit_transaction()
    src.delete("order_id = 30")
    return lake.load_table("shop.orders")


def source_rows(src: Any) -> list[tuple[int, str]]:
    a = src.scan().to_arrow()
    return sorted(zip(a.column("order_id").to_pylist(), a.column("customer").to_pylist(), strict=True))


def run_child(args: dict[str, Any], fault: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["SNOWBERG_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)], env=env, text=True, capture_output=True, timeout=300
    )


@pytest.mark.parametrize(
    ("path", "fault"),
    [("insert", f) for f in ("sync_after_read", "sync_after_deletes", "before_commit", "after_commit")]
    # The change's rows by PUT + COPY, killed inside the transaction after the COPY (the other points are the
    # same code as for a first sync or an append: test_native_copy_killed_at_each_step).
    + [("put_copy", "sync_after_copy")],
)
def test_native_killed_at_each_step(lake, snowflake, path, fault) -> None:
    """Native target: killed after the change is read, after the DELETE by key, before and after COMMIT.

    Inside the open transaction (after the DELETE, before COMMIT) the child fails with ``raise:`` instead of
    dying: it rolls back, as Snowflake rolls back the transaction of a session that ends. A killed client's
    session on the emulator (fakesnow) keeps its transaction and locks open, and the retry waits on them,
    which is the emulator's limit, not Snowflake's behaviour. (A short name: the database is named after it.)"""
    from snowberg.core.identifiers import TableName
    from snowberg.sync.copy_load import CopyPaths
    from snowberg.sync.native import load_native, state_for

    _, conn, db = snowflake
    target = TableName.parse(f"{db}.SHOP.ORDERS")
    src = keyed_source(lake)
    first = load_native(src, conn, target=target, source_label="lake:shop.orders", run_id="r1")
    assert (first.mode, first.rows) == ("initial", 40)
    src = change(lake)
    args = native_args(lake, conn, db, target, run_id="r2", path=path)
    in_tx = fault in IN_TRANSACTION
    res = run_child(args, f"raise:{fault}" if in_tx else fault)
    assert res.returncode == (1 if in_tx else 137), res.stderr[-3000:]
    assert f"injected {'failure' if in_tx else 'crash'} at {fault}" in res.stderr
    st = state_for(conn, target)
    committed = fault == "after_commit"
    assert st is not None
    assert st.source_snapshot_id == (src.current_snapshot().snapshot_id if committed else first.to_snapshot_id)

    copy = CopyPaths(copy_min_rows=0) if path != "insert" else None
    retry = load_native(src, conn, target=target, source_label="lake:shop.orders", run_id="r2-retry", copy=copy)
    assert retry.status == ("nothing_new" if committed else "committed")
    # every key once, in its last version: the change applied exactly once
    assert _native_target_rows(conn, target) == source_rows(src)
    assert load_native(src, conn, target=target, source_label="lake:shop.orders", run_id="r3").status == "nothing_new"


def native_args(lake: Any, conn: Any, db: str, target: Any, **extra: Any) -> dict[str, Any]:
    """What the child needs to run a native sync against the same lake and emulator."""
    return {
        "kind": "native",
        "lake_uri": lake.properties["uri"],
        "lake_wh": lake.properties["warehouse"],
        "port": l2s_services_port(conn),
        "db": db,
        "target": str(target),
        **extra,
    }


IN_TRANSACTION = ("sync_after_deletes", "sync_after_copy", "before_commit")


def _native_target_rows(conn: Any, target: Any) -> list[tuple[int, str]]:
    cur = conn.cursor()
    cur.execute(f'SELECT "ORDER_ID", "CUSTOMER" FROM {target.quoted()} ORDER BY 1')
    got = [(int(k), c) for k, c in cur.fetchall()]
    cur.close()
    return got


@pytest.mark.slow
@pytest.mark.parametrize("path", ["stage_copy", "put_copy"])
@pytest.mark.parametrize("fault", ["sync_before_copy", "sync_after_copy", "after_commit"])
def test_native_copy_killed_at_each_step(lake, snowflake, path, fault) -> None:
    """A first sync and an append loaded by COPY, killed before the COPY (files staged), after it (inside the
    transaction, before the state update: rolled back) and after the commit: neither rows nor state, or both.
    The retry of an append after a rollback loads the lake's files again without FORCE (the load metadata
    went with the transaction); after a commit it finds nothing new."""
    from snowberg.core.identifiers import TableName
    from snowberg.sync.copy_load import CopyPaths
    from snowberg.sync.copy_sql import LakeStage
    from snowberg.sync.native import default_state_table, load_native, state_for, state_table_ddl

    _, conn, db = snowflake
    target = TableName.parse(f"{db}.SHOP.ORDERS")
    url = lake.properties["warehouse"].rstrip("/") + "/"
    stage = {"stage": f"{db}.SHOP.LAKE", "stage_url": url} if path == "stage_copy" else None
    if stage:
        cur = conn.cursor()
        cur.execute(f"CREATE STAGE {db}.SHOP.LAKE URL = '{url}'")
        cur.close()
    copy = CopyPaths(lake_stage=LakeStage(**stage) if stage else None, copy_min_rows=0)
    cur = conn.cursor()
    cur.execute(state_table_ddl(default_state_table(target)))  # so that "no state yet" reads as None
    cur.close()
    src = keyed_source(lake)
    args = native_args(lake, conn, db, target, path=path, stage=stage)
    for run, ids in (("initial", None), ("append", list(range(41, 61)))):
        if ids:
            src.append(orders(ids).cast(SCHEMA()))
            src = lake.load_table("shop.orders")
        before = state_for(conn, target)
        in_tx = fault in IN_TRANSACTION
        res = run_child({**args, "run_id": f"{run}-1"}, f"raise:{fault}" if in_tx else fault)
        assert res.returncode == (1 if in_tx else 137), res.stderr[-3000:]
        committed = fault == "after_commit"
        st = state_for(conn, target)
        assert (st.source_snapshot_id if st else None) == (
            src.current_snapshot().snapshot_id if committed else (before.source_snapshot_id if before else None)
        )
        retry = load_native(src, conn, target=target, source_label="lake:shop.orders", run_id=f"{run}-2", copy=copy)
        assert retry.status == ("nothing_new" if committed else "committed")
        if not committed:
            assert retry.load_path == path
        assert _native_target_rows(conn, target) == source_rows(src)  # every row once


def l2s_services_port(conn: Any) -> int:
    """The emulator's port, from the open connection (the child connects to the same server)."""
    return int(conn.port)


@pytest.fixture
def iceberg_target(tmp_path: Path) -> Any:
    """A target catalog holding a table shaped like one Snowflake created (upper-case names, NUMBER(38,0))."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import DecimalType, NestedField, StringType, TimestamptzType

    wh = tmp_path / "target"
    wh.mkdir()
    cat = SqlCatalog("target", uri=f"sqlite:///{wh / 'catalog.db'}", warehouse=f"file://{wh}")
    cat.create_namespace("SHOP")
    cat.create_table(
        ("SHOP", "ORDERS"),
        schema=Schema(
            NestedField(1, "ORDER_ID", DecimalType(38, 0), required=False),
            NestedField(2, "CUSTOMER", StringType(), required=False),
            NestedField(3, "AMOUNT", DecimalType(10, 2), required=False),
            NestedField(4, "PLACED_AT", TimestamptzType(), required=False),
        ),
        properties={"format-version": "2"},
    )
    return cat


@pytest.mark.parametrize("fault", ["sync_after_read", "sync_after_write", "sync_before_commit", "sync_after_commit"])
def test_iceberg_killed_at_each_step(lake, iceberg_target, fault) -> None:
    """Iceberg target: killed after the change is read, after its data files are written, before and after the
    commit (the position deletes for the changed keys are written inside the commit)."""
    from snowberg.core.identifiers import IcebergName
    from snowberg.sync.horizon import read_target_state, sync_iceberg

    name = IcebergName.parse("SHOP.ORDERS")
    src = keyed_source(lake)
    first = sync_iceberg(src, iceberg_target, name, source_label="lake:shop.orders", run_id="r1")
    assert (first.mode, first.rows) == ("initial", 40)
    src = change(lake)
    args = {
        "kind": "iceberg",
        "lake_uri": lake.properties["uri"],
        "lake_wh": lake.properties["warehouse"],
        "tgt_uri": iceberg_target.properties["uri"],
        "tgt_wh": iceberg_target.properties["warehouse"],
        "run_id": "r2",
    }
    res = run_child(args, fault)
    assert res.returncode == 137, res.stderr[-3000:]
    assert f"injected crash at {fault}" in res.stderr
    committed = fault == "sync_after_commit"
    st = read_target_state(iceberg_target.load_table(("SHOP", "ORDERS")))
    assert st is not None
    assert st.source_snapshot_id == (src.current_snapshot().snapshot_id if committed else first.to_snapshot_id)

    retry = sync_iceberg(src, iceberg_target, name, source_label="lake:shop.orders", run_id="r2-retry")
    assert retry.status == ("nothing_new" if committed else "committed")
    a = iceberg_target.load_table(("SHOP", "ORDERS")).scan().to_arrow()
    got = sorted(zip([int(k) for k in a.column("ORDER_ID").to_pylist()], a.column("CUSTOMER").to_pylist(), strict=True))
    assert got == source_rows(src)  # every key once, in its last version: the change applied exactly once
    again = sync_iceberg(src, iceberg_target, name, source_label="lake:shop.orders", run_id="r3")
    assert again.status == "nothing_new"
