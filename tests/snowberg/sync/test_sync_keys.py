"""Is a sync's key a key: NULLs and repeated values found and named, which checks a run's plan needs."""

from __future__ import annotations

from typing import Any

import pytest
from l2s_data import orders, orders_schema

from snowberg.sync import keys
from snowberg.sync.keys import KeyViolationError, key_problems, must_verify, verify_plan
from snowberg.sync.snapshots import RowChanges, plan_changes


def _table(**cols: list[Any]) -> Any:
    import pyarrow as pa

    return pa.table(cols)


def test_key_problems_name_the_column_and_the_count() -> None:
    assert key_problems(_table(k=[1, 2, 3]), ["k"]) == []
    assert key_problems(_table(k=[1, None, None, 3]), ["k"]) == ["k is NULL in 2 row(s)"]
    (dup,) = key_problems(_table(k=[1, 2, 2, 3, 3, 3]), ["k"])
    assert dup.startswith("2 value(s) of k are held by more than one row (5 rows), e.g. (k=2: 2 rows), (k=3: 3 rows)")
    # composite keys: a value is the tuple; a NULL in any column is named per column, and not a duplicate
    t = _table(a=["x", "x", "x", None], b=[1, 2, 1, None])
    assert key_problems(t, ["a", "b"]) == [
        "a is NULL in 1 row(s)",
        "b is NULL in 1 row(s)",
        "1 value(s) of a, b are held by more than one row (2 rows), e.g. (a='x', b=1: 2 rows)",
    ]
    assert key_problems(_table(a=["x", "x"], b=[1, 2]), ["a", "b"]) == []


def test_identifier_fields_are_taken_as_a_key_any_other_key_is_verified(lake) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    schema = Schema(
        NestedField(1, "order_id", LongType(), required=True),
        NestedField(2, "customer", StringType(), required=False),
        identifier_field_ids=[1],
    )
    t = lake.create_table("shop.keyed", schema=schema)
    assert not must_verify(t, ["order_id"]) and not must_verify(t, [])
    assert must_verify(t, ["customer"]) and must_verify(t, ["order_id", "customer"])
    assert must_verify(lake.create_table("shop.plain", schema=orders_schema()), ["order_id"])


def test_a_plan_checks_the_whole_source_once_per_key_then_its_appends(lake, monkeypatch) -> None:
    calls: list[str] = []
    real_source, real_appended = keys.verify_source, keys.verify_appended
    monkeypatch.setattr(keys, "verify_source", lambda *a: calls.append("source") or real_source(*a))
    monkeypatch.setattr(keys, "verify_appended", lambda *a: calls.append("appended") or real_appended(*a))
    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders([1, 2]))
    first = plan_changes(t, None)
    assert verify_plan(t, first, ["order_id"], None, "lake:shop.orders") == ["order_id"]
    assert calls == ["source"]
    t.append(orders([3]))
    nxt = plan_changes(t, first.to_snapshot_id)
    assert verify_plan(t, nxt, ["order_id"], ["order_id"], "l") == ["order_id"] and calls == ["source", "appended"]
    assert verify_plan(t, nxt, ["customer"], ["order_id"], "l") == ["customer"]  # another key: the whole source
    assert calls == ["source", "appended", "source"]
    assert verify_plan(t, nxt, [], ["order_id"], "l") is None and len(calls) == 3  # no key, nothing to verify


def test_an_append_repeating_a_key_is_refused_naming_it(lake) -> None:
    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders([1]))
    first = plan_changes(t, None)
    t.append(orders([2, 2]))
    with pytest.raises(
        KeyViolationError, match=r"the rows the change appends: 1 value\(s\) of order_id .*\(order_id=2"
    ):
        verify_plan(t, plan_changes(t, first.to_snapshot_id), ["order_id"], ["order_id"], "lake:shop.orders")


def test_the_rows_a_key_matched_must_be_the_rows_the_change_removed() -> None:
    import pyarrow as pa

    removed = _table(k=[1, 2])
    changes = RowChanges(upserts=[], deleted_keys=removed, removed_keys=removed)
    keys.check_removed(2, changes, ["k"], "DB.S.T", "l")
    with pytest.raises(KeyViolationError, match="matched 3 target row.*the key is not unique"):
        keys.check_removed(3, changes, ["k"], "DB.S.T", "l")
    with pytest.raises(KeyViolationError, match="matched 1 target row.*lacks rows the source removed"):
        keys.check_removed(1, changes, ["k"], "DB.S.T", "l")
    # a rewrite (copy-on-write): every row of the removed file counts, also the ones written again
    batch = pa.RecordBatch.from_pydict({"k": [2]})
    rewrite = RowChanges(upserts=[(7, batch)], deleted_keys=_table(k=[1]), removed_keys=removed)
    assert rewrite.removed_rows == 2
    keys.check_removed(2, rewrite, ["k"], "DB.S.T", "l")


@pytest.mark.parametrize("first", ["order_id", "customer"])
def test_a_large_source_is_verified_in_ranges_with_the_same_verdict(lake, first: str) -> None:
    """Checked in passes over ranges of the first key column (memory follows one range): NULLs and values
    repeated across data files are counted as in one pass."""
    t = lake.create_table("shop.orders", schema=orders_schema())
    for lo in range(0, 300, 100):
        t.append(orders(list(range(lo, lo + 100))))
    t.append(orders([5, 150, 299]))  # three values repeated, each in another file
    import pyarrow as pa

    nulls = orders([1000, 1001])
    t.append(nulls.set_column(nulls.schema.get_field_index(first), first, pa.nulls(2, nulls.schema.field(first).type)))
    snap = t.current_snapshot().snapshot_id
    key = [first, "amount"] if first == "customer" else [first]
    with pytest.raises(KeyViolationError) as one:
        keys.verify_source(t, snap, key, "l")
    with pytest.raises(KeyViolationError) as passes:
        keys.verify_source(t, snap, key, "l", rows_per_pass=40)
    msg = str(passes.value)
    assert f"{first} is NULL in 2 row(s)" in msg and "3 value(s)" in msg and "(6 rows)" in msg
    assert str(one.value).split(", e.g.")[0] == msg.split(", e.g.")[0]
    t.delete(f"order_id in (5, 150, 299, 1000, 1001) or {first} is null")
    assert keys.verify_source(t, t.current_snapshot().snapshot_id, key, "l", rows_per_pass=40) == 297
