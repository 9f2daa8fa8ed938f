"""Primary keys of a run: NULL and duplicate keys refused before a write, the rest turned into a delete filter."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import pyarrow as pa
import pytest

from snowberg.iceberg.keys import DuplicateKeyError, KeyCollector, NullKeyError, check_keys_not_null, key_filter


def test_a_null_key_is_refused_naming_the_table_column_and_row_count() -> None:
    batch = pa.record_batch({"id": pa.array([1, None, None]), "region": pa.array(["a", "b", None])})
    with pytest.raises(NullKeyError, match=r"table 'orders': 2 row\(s\) have NULL in primary-key column 'id'"):
        check_keys_not_null(batch, ["id", "region"], "orders")  # the first key column with NULLs is named
    check_keys_not_null(batch.slice(0, 1), ["id", "region"], "orders")  # whole keys pass


def test_the_collector_keeps_only_the_key_columns_of_every_batch() -> None:
    keys = KeyCollector(["ID", "Region"], "orders")
    keys.add(pa.record_batch({"id": [1, 2], "region": ["a", "b"], "note": ["x", "y"]}))
    keys.add(pa.record_batch({"id": [3], "region": ["a"], "note": ["z"]}))
    assert keys.table().to_pydict() == {"id": [1, 2, 3], "region": ["a", "b", "a"]}
    assert keys.check_unique().num_rows == 3


def test_a_collector_that_saw_no_batch_gives_an_empty_key_table() -> None:
    t = KeyCollector(["id"], "orders").check_unique()
    assert t.column_names == ["id"] and t.num_rows == 0


def test_the_collector_refuses_a_batch_with_a_null_key() -> None:
    keys = KeyCollector(["id"], "orders")
    with pytest.raises(NullKeyError, match="1 row"):
        keys.add(pa.record_batch({"id": pa.array([None, 1], pa.int64())}))


def test_a_key_seen_twice_in_the_run_is_refused_with_an_example() -> None:
    keys = KeyCollector(["id", "region"], "orders")
    keys.add(pa.record_batch({"id": [1, 2], "region": ["a", "a"]}))
    keys.add(pa.record_batch({"id": [1, 1], "region": ["a", "b"]}))  # (1, a) again; (1, b) is another key
    with pytest.raises(DuplicateKeyError) as exc:
        keys.check_unique()
    msg = str(exc.value)
    assert "table 'orders': primary key ['id', 'region'] is not unique in the window" in msg
    assert "{'id': 1, 'region': 'a', 'count_all': 2}" in msg and "'b'" not in msg
    assert "nothing was written" in msg


def lake(catalog: Any, data: pa.Table) -> Any:
    catalog.create_namespace_if_not_exists("ns")
    t = catalog.create_table("ns.k", schema=data.schema)
    t.append(data)
    return t


def matched(table: Any, keys: pa.Table) -> list[dict[str, Any]]:
    rows = table.scan(row_filter=key_filter(keys)).to_arrow().to_pylist()
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def test_one_key_column_filters_exactly_the_given_keys_on_a_real_table(catalog: Any) -> None:
    t = lake(catalog, pa.table({"id": pa.array(range(10), pa.int64()), "v": pa.array(range(10), pa.int64())}))
    got = matched(t, pa.table({"id": pa.array([7, 2, 2, 42], pa.int64())}))
    assert got == [{"id": 2, "v": 2}, {"id": 7, "v": 7}]


def test_composite_keys_match_whole_keys_not_each_column_alone(catalog: Any) -> None:
    data = pa.table({"id": pa.array([1, 1, 2, 2], pa.int64()), "region": ["a", "b", "a", "b"]})
    t = lake(catalog, data)
    got = matched(t, pa.table({"id": pa.array([1, 2], pa.int64()), "region": ["a", "b"]}))
    assert got == [{"id": 1, "region": "a"}, {"id": 2, "region": "b"}]
    one = matched(t, pa.table({"id": pa.array([2], pa.int64()), "region": ["a"]}))
    assert one == [{"id": 2, "region": "a"}]


def test_date_and_timestamp_keys_filter_as_their_values(catalog: Any) -> None:
    days = [date(2026, 1, d) for d in (1, 2, 3)]
    stamps = [datetime(2026, 1, d, 12, 30, 0, 123456) for d in (1, 2, 3)]
    t = lake(catalog, pa.table({"day": pa.array(days), "at": pa.array(stamps, pa.timestamp("us"))}))
    assert matched(t, pa.table({"day": pa.array(days[1:2])})) == [{"day": days[1], "at": stamps[1]}]
    keys = pa.table({"day": pa.array(days[::2]), "at": pa.array(stamps[::2], pa.timestamp("us"))})
    assert matched(t, keys) == [{"day": days[0], "at": stamps[0]}, {"day": days[2], "at": stamps[2]}]
