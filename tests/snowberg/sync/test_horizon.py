"""The Horizon REST contract and the exactly-once sync into a Snowflake-managed Iceberg table.

The server (``l2s_rest_catalog.py``) answers like the Iceberg REST spec and
records every request, so these tests check what snowberg sends: the token
exchange (PAT as client secret, ``session:role:<ROLE>`` scope), the bearer
token and access-delegation header on every call, the warehouse/prefix, and
the commit request (requirements, snapshot summary with the source snapshot id).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from l2s_data import DATABASE, PAT, ROLE, orders, orders_schema, remove_orders

from snowberg.core.identifiers import IcebergName
from snowberg.iceberg.catalogs import open_catalog
from snowberg.sync.horizon import (
    MODE,
    SOURCE_SNAPSHOT,
    SOURCE_UUID,
    SchemaMismatchError,
    TargetStateError,
    read_target_state,
    sync_iceberg,
)
from snowberg.sync.snapshots import SourceRewriteError

TARGET = IcebergName(namespace="SHOP", table="ORDERS")


def _sync(source: Any, conn_id: str, run_id: str, **kw: Any):
    return sync_iceberg(source, open_catalog(conn_id), TARGET, source_label="lake:shop.orders", run_id=run_id, **kw)


def _target_rows(store: Any) -> list[tuple[int, str]]:
    t = store.load_table(("SHOP", "ORDERS"))
    return sorted((int(r["ORDER_ID"]), r["CUSTOMER"]) for r in t.scan().to_arrow().to_pylist())


def _expected(ids: list[int]) -> list[tuple[int, str]]:
    return [(i, f"customer '{i}'") for i in ids]


def test_token_exchange_headers_and_commit_request(lake, horizon, horizon_store, horizon_conn) -> None:
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))
    result = _sync(src, horizon_conn, "run-1")
    assert (result.status, result.mode, result.rows) == ("committed", "initial", 3)
    assert _target_rows(horizon_store) == _expected([1, 2, 3])

    # 1. token exchange: OAuth2 client credentials, the PAT as client secret, the role as scope
    tokens = horizon.calls("POST", "/v1/oauth/tokens")
    assert tokens, "no token request"
    for t in tokens:
        assert t.headers["Content-Type"] == "application/x-www-form-urlencoded"
        assert {k: v for k, v in t.form.items()} == {
            "grant_type": ["client_credentials"],
            "client_secret": [PAT],
            "scope": [f"session:role:{ROLE}"],
        }

    # 2. every other call: the issued bearer token (never the PAT), delegation header, warehouse/prefix
    others = [r for r in horizon.requests if not r.path.endswith("/oauth/tokens")]
    assert others
    for r in others:
        assert r.headers["Authorization"].removeprefix("Bearer ") in horizon.tokens, r.path
        assert r.headers["X-Iceberg-Access-Delegation"] == "vended-credentials", r.path
        assert PAT not in json.dumps(dict(r.headers)) and PAT.encode() not in r.body, r.path
    config = horizon.calls("GET", "/v1/config")
    assert [c.query for c in config] == [{"warehouse": [DATABASE]}]
    assert all(f"/v1/{DATABASE}/" in r.path for r in others if r is not config[0])

    # 3. the commit: guarded by the table UUID and the main branch's snapshot; state in the summary
    (commit,) = horizon.calls("POST", "/namespaces/SHOP/tables/ORDERS")
    body = commit.json
    assert body["identifier"] == {"namespace": ["SHOP"], "name": "ORDERS"}
    kinds = {r["type"]: r for r in body["requirements"]}
    assert kinds["assert-table-uuid"]["uuid"] == str(horizon_store.load_table(("SHOP", "ORDERS")).metadata.table_uuid)
    assert (
        kinds["assert-ref-snapshot-id"]["ref"] == "main" and kinds["assert-ref-snapshot-id"].get("snapshot-id") is None
    )
    add = next(u for u in body["updates"] if u["action"] == "add-snapshot")["snapshot"]
    assert add["summary"]["operation"] == "append"
    assert add["summary"][SOURCE_SNAPSHOT] == str(src.current_snapshot().snapshot_id)
    assert add["summary"][SOURCE_UUID] == str(src.metadata.table_uuid)
    assert add["summary"][MODE] == "initial" and add["summary"]["snowberg.sync.run-id"] == "run-1"
    assert any(u["action"] == "set-snapshot-ref" and u["ref-name"] == "main" for u in body["updates"])


def test_exactly_once_across_reruns_and_new_appends(lake, horizon, horizon_store, horizon_conn) -> None:
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2]))
    assert _sync(src, horizon_conn, "r1").status == "committed"
    again = _sync(src, horizon_conn, "r1-retry")
    assert again.status == "nothing_new" and len(horizon.calls("POST", "/tables/ORDERS")) == 1

    src.append(orders([3]))
    src.append(orders([4, 5]))
    r = _sync(src, horizon_conn, "r2")
    assert (r.status, r.mode, r.rows) == ("committed", "incremental", 3)
    assert sorted(r.rows_by_snapshot.values()) == [1, 2]
    assert _target_rows(horizon_store) == _expected([1, 2, 3, 4, 5])
    assert r.target_total_rows == 5
    state = read_target_state(horizon_store.load_table(("SHOP", "ORDERS")))
    assert state is not None and state.source_snapshot_id == src.current_snapshot().snapshot_id
    assert _sync(src, horizon_conn, "r3").status == "nothing_new"
    assert len(horizon.calls("POST", "/tables/ORDERS")) == 2


def test_a_concurrent_sync_of_the_same_range_is_not_duplicated(lake, horizon, horizon_store, horizon_conn) -> None:
    """Another run commits the same snapshots while ours is in flight: ours gets 409, re-plans, writes nothing."""
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2]))
    _sync(src, horizon_conn, "r1")
    src.append(orders([3, 4]))

    raced: list[Any] = []

    def other_run_commits_first(_req: Any) -> None:
        if raced:  # only the first commit request (ours) lets the other run in first
            return
        raced.append(None)
        raced[0] = _sync(src, horizon_conn, "other-run")

    horizon.before_commit = other_run_commits_first
    mine = _sync(src, horizon_conn, "my-run")
    assert raced and raced[0].status == "committed"
    assert (mine.status, mine.attempts) == ("nothing_new", 2)
    assert _target_rows(horizon_store) == _expected([1, 2, 3, 4])


def test_an_injected_conflict_is_retried_once_and_committed_once(lake, horizon, horizon_store, horizon_conn) -> None:
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1]))
    horizon.fail_next_commits = 1
    r = _sync(src, horizon_conn, "r1")
    assert (r.status, r.attempts) == ("committed", 2)
    assert _target_rows(horizon_store) == _expected([1])
    assert len(horizon.calls("POST", "/tables/ORDERS")) == 2


def test_target_with_rows_but_no_state_is_refused(lake, horizon, horizon_store, horizon_conn) -> None:
    import pyarrow as pa

    target = horizon_store.load_table(("SHOP", "ORDERS"))
    target.append(
        pa.Table.from_pylist(
            [{"ORDER_ID": 99, "CUSTOMER": "from spark", "AMOUNT": None, "PLACED_AT": None}],
            schema=target.schema().as_arrow(),
        )
    )
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1]))
    with pytest.raises(TargetStateError, match="holds rows but no snowberg sync state"):
        _sync(src, horizon_conn, "r1")
    assert _target_rows(horizon_store) == [(99, "from spark")]
    r = _sync(src, horizon_conn, "r2", on_rewrite="full_reload")
    assert (r.status, r.mode) == ("committed", "full_reload")
    assert _target_rows(horizon_store) == _expected([1])


def test_source_overwrite_is_refused_or_fully_reloaded(lake, horizon, horizon_store, horizon_conn) -> None:
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))
    _sync(src, horizon_conn, "r1")
    src.delete("order_id = 2")
    src.append(orders([4]))
    with pytest.raises(SourceRewriteError, match="is an (overwrite|delete)"):
        _sync(src, horizon_conn, "r2")
    assert _target_rows(horizon_store) == _expected([1, 2, 3])
    r = _sync(src, horizon_conn, "r3", on_rewrite="full_reload")
    assert (r.mode, r.rows, r.target_total_rows) == ("full_reload", 3, 3)
    assert _target_rows(horizon_store) == _expected([1, 3, 4])
    assert _sync(src, horizon_conn, "r4").status == "nothing_new"


def test_a_source_column_the_target_lacks_is_refused(lake, horizon, horizon_store, horizon_conn) -> None:
    from pyiceberg.types import StringType

    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1]))
    _sync(src, horizon_conn, "r1")
    with src.update_schema() as upd:
        upd.add_column("channel", StringType())
    src.append(orders([2]).append_column("channel", __import__("pyarrow").array(["web"])))
    with pytest.raises(SchemaMismatchError, match=r"\['channel'\] are not in the target"):
        _sync(src, horizon_conn, "r2")
    assert _target_rows(horizon_store) == _expected([1])


def test_wrong_pat_or_role_fails_at_the_token_exchange(horizon, connection) -> None:
    from pyiceberg.exceptions import OAuthError

    base = {
        "conn_type": "snowflake",
        "extra": {"account": "a", "role": ROLE, "database": DATABASE, "catalog_uri": horizon.uri},
    }
    connection("bad_pat", {**base, "password": "pat-wrong-0000000000"})
    with pytest.raises(OAuthError, match="invalid_client") as exc:
        open_catalog("bad_pat")
    assert "pat-wrong" not in str(exc.value)
    connection("bad_role", {**base, "password": PAT, "extra": {**base["extra"], "role": "OTHER_ROLE"}})
    with pytest.raises(OAuthError, match="invalid_scope"):
        open_catalog("bad_role")


def test_operator_runs_the_sync(lake, horizon, horizon_store, horizon_conn, connection, tmp_path) -> None:
    from snowberg.airflow.operators.lake_to_snowflake import IcebergToSnowflakeIcebergOperator

    connection(
        "lake",
        {
            "conn_type": "sqlite",
            "host": lake.properties["uri"].removeprefix("sqlite:///"),
            "extra": {"warehouse": lake.properties["warehouse"]},
        },
    )
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2]))
    op = IcebergToSnowflakeIcebergOperator(
        task_id="sync",
        source_catalog="lake",
        source_table="shop.orders",
        target_catalog=horizon_conn,
        target_table="SHOP.ORDERS",
    )
    out = op.execute({"run_id": "scheduled__1"})
    assert (out["status"], out["rows"], out["source"]) == ("committed", 2, "lake:shop.orders")
    assert json.loads(json.dumps(out)) == out  # an XCom-able dict
    assert _target_rows(horizon_store) == _expected([1, 2])


def test_keyed_source_changes_are_applied_to_the_iceberg_target_not_reloaded(
    lake, horizon, horizon_store, horizon_conn
) -> None:
    """A merge-on-read merge and a delete at the source reach the target as position deletes + the new rows only."""
    import pyarrow as pa

    from snowberg.iceberg import gate

    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))
    src.append(orders([4, 5]))
    _sync(src, horizon_conn, "r1")
    tx = src.transaction()
    gate.commit(
        src,
        tx,
        state_props={},
        replaced=gate.Replacement(keys=pa.table({"order_id": pa.array([2, 4, 6], pa.int64())})),
        data_files=[],
        crash_points=None,
        dag_id="",
    )
    src = lake.load_table("shop.orders")
    src.append(orders([2, 4, 6]).set_column(1, "customer", pa.array(["v2", "v2", "v2"])))
    src.delete("order_id = 5")
    with pytest.raises(SourceRewriteError):
        _sync(src, horizon_conn, "r2-no-key")  # without a key the change is still a rewrite
    before = horizon_store.load_table(("SHOP", "ORDERS")).current_snapshot().snapshot_id
    r = _sync(src, horizon_conn, "r2", key_columns=["order_id"])
    assert (r.status, r.mode, r.rows, r.target_total_rows) == ("committed", "changes", 3, 5)
    assert _target_rows(horizon_store) == [(1, "customer '1'"), (2, "v2"), (3, "customer '3'"), (4, "v2"), (6, "v2")]

    target = horizon_store.load_table(("SHOP", "ORDERS"))
    new_snaps = []
    snap = target.current_snapshot()
    while snap is not None and snap.snapshot_id != before:
        new_snaps.append(snap)
        snap = target.snapshot_by_id(snap.parent_snapshot_id)
    props = [s.summary.additional_properties for s in new_snaps]
    assert sum(int(p.get("added-records", 0)) for p in props) == 3  # only the upserted rows, no rewrite
    assert sum(int(p.get("deleted-records", 0)) for p in props) == 0  # no data file was rewritten or dropped
    assert sum(int(p.get("added-position-deletes", 0)) for p in props) == 3  # keys 2, 4, 5
    assert not any(int(p.get("added-equality-deletes", 0)) for p in props)
    state = read_target_state(target)
    assert state is not None and state.source_snapshot_id == src.current_snapshot().snapshot_id
    assert new_snaps[0].summary.additional_properties[MODE] == "changes"
    assert _sync(src, horizon_conn, "r3", key_columns=["order_id"]).status == "nothing_new"


def test_the_target_state_skips_a_partial_snapshot_left_as_head(catalog: Any) -> None:
    """A target whose head is the removal of a sync commit (another engine rolled back to it) reads the sync
    before: replaying from there is what makes the target whole again."""
    from snowberg.iceberg import state

    catalog.create_namespace("n")
    t = catalog.create_table("n.t", schema=orders_schema())
    t.append(orders([1]), snapshot_properties={SOURCE_SNAPSHOT: "11", SOURCE_UUID: "u", state.COMMIT_ID: "c1"})
    before = t.current_snapshot().snapshot_id
    t.append(orders([2]), snapshot_properties={state.PARTIAL_OF: "c2", state.RUN_ID: "r2"})
    st = read_target_state(catalog.load_table("n.t"))
    assert st is not None and st.source_snapshot_id == 11 and st.target_snapshot_id == before


# ---------------------------------------------------------------------------
# Keys that are not keys: the Iceberg target matches keys with pc.is_in, where a NULL matches every NULL


def _with(t: Any, column: str, values: list[Any]) -> Any:
    import pyarrow as pa

    i = t.schema.get_field_index(column)
    return t.set_column(i, column, pa.array(values, t.schema.field(column).type))


def _head(store: Any) -> Any:
    snap = store.load_table(("SHOP", "ORDERS")).current_snapshot()
    return snap.snapshot_id if snap else None


def test_a_key_with_nulls_or_shared_values_fails_the_iceberg_sync_before_any_write(
    lake, horizon, horizon_store, horizon_conn
) -> None:
    """Two NULL keys: the Iceberg target's ``is_in`` would remove both when one goes. Refused before any
    file is written, naming the column and the count; likewise a customer key held by two orders."""
    from snowberg.sync.keys import KeyViolationError

    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(_with(orders([1, 2, 3, 4]), "order_id", [1, None, None, 4]))
    with pytest.raises(KeyViolationError, match=r"order_id is NULL in 2 row\(s\)"):
        _sync(src, horizon_conn, "r1", key_columns=["order_id"])
    src2 = lake.create_table("shop.orders2", schema=orders_schema())
    src2.append(_with(orders([1, 2, 3]), "customer", ["c", "d", "c"]))
    with pytest.raises(KeyViolationError, match=r"customer are held by more than one row \(2 rows\)"):
        _sync(src2, horizon_conn, "r2", key_columns=["customer"])
    assert _head(horizon_store) is None and not horizon.calls("POST", "/tables/ORDERS")  # nothing committed


@pytest.mark.parametrize("strategy", ["copy_on_write", "merge_on_read"])
def test_an_iceberg_change_sharing_an_untouched_key_is_refused(
    lake, horizon, horizon_store, horizon_conn, monkeypatch, strategy
) -> None:
    """The key is verified once (recorded in the commit's summary); a later append gives customer c a second
    row; removing one of them would hide both in the target: the commit is refused."""

    from snowberg.sync import keys
    from snowberg.sync.horizon import KEY_COLUMNS
    from snowberg.sync.keys import KeyViolationError

    whole: list[int] = []
    real = keys.verify_source
    monkeypatch.setattr(keys, "verify_source", lambda t, s, k, label: whole.append(s) or real(t, s, k, label))
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(_with(orders([1, 2]), "customer", ["c", "d"]))
    _sync(src, horizon_conn, "r1", key_columns=["customer"])
    summary = horizon_store.load_table(("SHOP", "ORDERS")).current_snapshot().summary.additional_properties
    assert json.loads(summary[KEY_COLUMNS]) == ["customer"]
    src.append(_with(orders([3]), "customer", ["c"]))
    assert _sync(src, horizon_conn, "r2", key_columns=["customer"]).mode == "incremental"
    assert len(whole) == 1  # the append was checked alone
    src = remove_orders(src, [3], strategy)
    head = _head(horizon_store)
    with pytest.raises(KeyViolationError, match=r"matched 2 target row\(s\)"):
        _sync(src, horizon_conn, "r3", key_columns=["customer"])
    assert _head(horizon_store) == head and sorted(i for i, _ in _target_rows(horizon_store)) == [1, 2, 3]
    assert len(whole) == 1
