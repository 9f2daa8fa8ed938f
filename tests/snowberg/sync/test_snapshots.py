"""Which source snapshots a run reads: appends only; rewrites refused or reloaded."""

from __future__ import annotations

from typing import Any

import pytest
from l2s_data import orders, orders_schema

from snowberg.sync.snapshots import SourceRewriteError, plan_changes, read_batches


def _ids(table, plan) -> list[int]:
    return sorted(i for _, b in read_batches(table, plan) for i in b.column("order_id").to_pylist())


def test_first_sync_reads_the_current_snapshot_then_only_new_appends(lake) -> None:
    t = lake.create_table("shop.orders", schema=orders_schema())
    assert plan_changes(t, None).mode == "nothing_new"  # no snapshot yet
    t.append(orders([1, 2]))
    t.append(orders([3]))
    first = plan_changes(t, None)
    assert first.mode == "initial" and first.to_snapshot_id == t.current_snapshot().snapshot_id
    assert _ids(t, first) == [1, 2, 3]

    last = first.to_snapshot_id
    assert plan_changes(t, last).mode == "nothing_new"
    t.append(orders([4]))
    a = t.current_snapshot().snapshot_id
    t.append(orders([5, 6]))
    b = t.current_snapshot().snapshot_id
    plan = plan_changes(t, last)
    assert plan.mode == "incremental" and (plan.from_snapshot_id, plan.to_snapshot_id) == (last, b)
    assert [s.snapshot_id for s in plan.load_steps] == [a, b]
    assert plan.expected_rows == 3
    pairs = [(snap, i) for snap, batch in read_batches(t, plan) for i in batch.column("order_id").to_pylist()]
    assert sorted(pairs) == sorted([(a, 4), (b, 5), (b, 6)])  # each row knows the snapshot that added it


def test_compaction_is_skipped_but_overwrite_and_delete_are_refused(lake) -> None:
    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders([1, 2]))
    last = t.current_snapshot().snapshot_id
    t.append(orders([3]))
    t.delete("order_id = 1")
    with pytest.raises(SourceRewriteError, match=r"is an (delete|overwrite).*on_rewrite: full_reload"):
        plan_changes(t, last)
    reload = plan_changes(t, last, on_rewrite="full_reload")
    assert reload.mode == "full_reload" and _ids(t, reload) == [2, 3]

    t2 = lake.create_table("shop.o2", schema=orders_schema())
    t2.append(orders([1]))
    base = t2.current_snapshot().snapshot_id
    t2.overwrite(orders([7]))
    with pytest.raises(SourceRewriteError):
        plan_changes(t2, base)


def compact(table, monkeypatch) -> None:
    """Rewrite every data file of ``table`` into one new file, committed as a ``replace`` snapshot.

    That is what Spark's ``rewrite_data_files`` (or Snowflake's own
    compaction) writes. pyiceberg 0.12 has no replace writer and refuses to
    summarise one, so the summary is computed as for an overwrite and then
    labelled ``replace``.
    """
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.table.snapshots import Operation, Summary
    from pyiceberg.table.update import snapshot as snapshot_mod
    from pyiceberg.table.update.snapshot import _OverwriteFiles

    summarise = snapshot_mod.update_snapshot_summaries

    def as_replace(summary, previous_summary=None):
        out = summarise(Summary(Operation.OVERWRITE, **summary.additional_properties), previous_summary)
        return Summary(Operation.REPLACE, **out.additional_properties)

    monkeypatch.setattr(snapshot_mod, "update_snapshot_summaries", as_replace)

    old = [task.file for task in table.scan().plan_files()]
    data = table.scan().to_arrow()
    with table.transaction() as tx:
        new = list(_dataframe_to_data_files(tx.table_metadata, data, table.io))
        with _OverwriteFiles(operation=Operation.REPLACE, transaction=tx, io=table.io) as rewrite:
            for f in old:
                rewrite.delete_data_file(f)
            for f in new:
                rewrite.append_data_file(f)


def test_replace_snapshots_change_no_rows_and_are_skipped(lake, monkeypatch) -> None:
    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders([1]))
    last = t.current_snapshot().snapshot_id
    t.append(orders([2]))
    added = t.current_snapshot().snapshot_id
    compact(t, monkeypatch)
    assert t.current_snapshot().summary.operation.value == "replace"
    plan = plan_changes(t, last)
    assert plan.mode == "incremental"
    assert [(s.snapshot_id, s.action) for s in plan.steps] == [
        (added, "load"),
        (t.current_snapshot().snapshot_id, "skip"),
    ]
    assert _ids(t, plan) == [2]  # the compacted file (holding 1 and 2 again) is not re-read


def test_expired_or_foreign_state_is_refused(lake) -> None:
    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders([1]))
    with pytest.raises(SourceRewriteError, match="not an ancestor"):
        plan_changes(t, 123456789)
    with pytest.raises(SourceRewriteError, match="was replaced"):
        plan_changes(t, t.current_snapshot().snapshot_id, synced_uuid="00000000-0000-0000-0000-000000000000")
    assert plan_changes(t, 123456789, on_rewrite="full_reload").mode == "full_reload"


def _state(t, snapshot_id) -> dict[int, str]:
    a = t.scan(snapshot_id=snapshot_id).to_arrow()
    return dict(zip(a.column("order_id").to_pylist(), a.column("customer").to_pylist(), strict=True))


def _apply(before: dict[int, str], changes) -> dict[int, str]:
    out = dict(before)
    for k in changes.deleted_keys.column("order_id").to_pylist():
        del out[k]
    for _, b in changes.upserts:
        out.update(zip(b.column("order_id").to_pylist(), b.column("customer").to_pylist(), strict=True))
    return out


def _renamed(ids: list[int], note: str):
    import pyarrow as pa

    t = orders(ids)
    return t.set_column(1, "customer", pa.array([f"{note}{i}" for i in ids]))


def test_keyed_merge_on_read_changes_are_read_from_the_touched_files_only(lake) -> None:
    import pyarrow as pa

    from snowberg.iceberg.merge import write_position_deletes
    from snowberg.sync.snapshots import read_changes

    t = lake.create_table("shop.orders", schema=orders_schema())
    for lo in (0, 100, 200):
        t.append(orders(list(range(lo, lo + 100))))
    last = t.current_snapshot().snapshot_id
    # a merge run: keys 5 and 150 get new versions, key 999 is new
    tx = t.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([5, 150, 999], pa.int64())}), {}, io=t.io)
    tx.append(_renamed([5, 150, 999], "v2-"))
    t = tx.commit_transaction()
    # a plain delete of key 201 (merge-on-read as well)
    tx = t.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([201], pa.int64())}), {}, io=t.io)
    t = tx.commit_transaction()

    with pytest.raises(SourceRewriteError):
        plan_changes(t, last)  # without a key: still a rewrite
    plan = plan_changes(t, last, key_columns=["order_id"])
    assert plan.mode == "changes" and plan.to_snapshot_id == t.current_snapshot().snapshot_id
    ch = read_changes(t, plan)
    assert ch.upsert_rows == 3  # only the merge's new file, never the three untouched-but-deleted-from files
    assert ch.deleted_keys.column("order_id").to_pylist() == [201]  # 5 and 150 are rewritten by the upsert
    assert _apply(_state(t, last), ch) == _state(t, plan.to_snapshot_id)


def test_keyed_copy_on_write_changes_apply_to_the_same_rows(lake) -> None:
    from snowberg.sync.snapshots import read_changes

    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders(list(range(10))))
    t.append(orders(list(range(10, 20))))
    last = t.current_snapshot().snapshot_id
    t.delete("order_id = 3 or order_id = 12")  # rewrites both files
    t.append(_renamed([12], "v2-"))
    plan = plan_changes(t, last, key_columns=["order_id"])
    ch = read_changes(t, plan)
    assert sorted(ch.deleted_keys.column("order_id").to_pylist()) == [3]
    assert _apply(_state(t, last), ch) == _state(t, plan.to_snapshot_id)


def test_the_default_key_is_the_tables_iceberg_identifier_fields(lake) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    from snowberg.sync.snapshots import identifier_columns

    schema = Schema(
        NestedField(1, "order_id", LongType(), required=True),
        NestedField(2, "customer", StringType(), required=False),
        identifier_field_ids=[1],
    )
    assert identifier_columns(lake.create_table("shop.keyed", schema=schema)) == ["order_id"]
    assert identifier_columns(lake.create_table("shop.plain", schema=orders_schema())) == []


def test_key_columns_are_checked_against_the_source_schema(lake) -> None:
    from snowberg.sync.snapshots import KeyColumnsError, resolve_key_columns

    t = lake.create_table("shop.keys", schema=orders_schema())
    assert resolve_key_columns(t, ["ORDER_ID"]) == ["order_id"]  # syncs.yaml may write Snowflake's spelling
    assert resolve_key_columns(t, None) == []  # no identifier fields declared: no key
    with pytest.raises(KeyColumnsError) as exc:
        resolve_key_columns(t, ["order_id", "region"])
    assert "'region' is not a column of the source" in str(exc.value) and "order_id, customer" in str(exc.value)


def test_position_deletes_become_keys_by_reading_only_the_positions_they_name(lake, monkeypatch) -> None:
    """A merge-on-read delete of two rows reads the key column of the row groups holding them, nothing else:
    no whole data file, no data file whose delete files did not change, each delete file once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from snowberg.iceberg.merge import write_position_deletes
    from snowberg.sync.snapshots import read_changes

    t = lake.create_table("shop.orders", schema=orders_schema(), properties={"write.parquet.row-group-limit": "100"})
    t.append(orders(list(range(0, 1000))))  # one file, 10 row groups of 100 rows
    t.append(orders(list(range(1000, 1100))))  # a file the change does not touch
    tx = t.transaction()  # an older merge-on-read delete in the first file, before the synced snapshot
    write_position_deletes(tx, pa.table({"order_id": pa.array([7], pa.int64())}), {}, io=t.io)
    t = tx.commit_transaction()
    last = t.current_snapshot().snapshot_id
    tx = t.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([150, 960], pa.int64())}), {}, io=t.io)
    t = tx.commit_transaction()

    opened: list[str] = []
    groups: list[list[int]] = []
    real_open, real_groups = t.io.new_input, pq.ParquetFile.read_row_groups

    def new_input(location: str):
        opened.append(location.rsplit("/", 1)[-1])
        return real_open(location)

    def read_row_groups(self, row_groups, *a, **kw):
        groups.append(list(row_groups))
        return real_groups(self, row_groups, *a, **kw)

    def no_full_read(self, *a, **kw):
        raise AssertionError("a whole data file was read")

    monkeypatch.setattr(t.io, "new_input", new_input)
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", read_row_groups)
    monkeypatch.setattr(pq.ParquetFile, "read", no_full_read)
    ch = read_changes(t, plan_changes(t, last, key_columns=["order_id"]))
    assert sorted(ch.deleted_keys.column("order_id").to_pylist()) == [150, 960]
    assert groups == [[1, 9]]  # the row groups of positions 150 and 960 only
    data_files = {
        task.file.file_path.rsplit("/", 1)[-1]: {d.file_path.rsplit("/", 1)[-1] for d in task.delete_files}
        for task in t.scan().plan_files()
    }
    parquet = [n for n in opened if n.endswith(".parquet")]
    first, second = sorted(data_files, key=lambda n: len(data_files[n]), reverse=True)
    assert first in parquet and second not in parquet  # the untouched second file is never opened
    assert parquet.count(first) == 1
    deletes = [n for n in parquet if n != first]
    assert set(deletes) == data_files[first] and len(deletes) == len(set(deletes))  # each delete file read once


# ---------------------------------------------------------------- keyed changes: what must stay a rewrite, what is live


def _keyed_schema(key_type: Any = None) -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    return Schema(
        NestedField(1, "order_id", key_type or LongType(), required=True),
        NestedField(2, "customer", StringType(), required=False),
        identifier_field_ids=[1],
    )


def _keyed_rows(ids: list[int]) -> Any:
    import pyarrow as pa

    return pa.table(
        {"order_id": pa.array(ids, pa.int64()), "customer": [f"c{i}" for i in ids]},
        schema=pa.schema([pa.field("order_id", pa.int64(), False), pa.field("customer", pa.string())]),
    )


def test_a_key_updated_merge_on_read_survives_a_later_copy_on_write_rewrite_of_its_old_file(lake) -> None:
    """Key 5 was updated merge-on-read before the synced snapshot (its old row hidden by a position delete, the
    new version in another file). A copy-on-write delete of key 7 then rewrites the old file: the removed file's
    rows that were already deleted (key 5's old version) are no removal. Counting them would delete key 5 from
    the target although its new version is live."""
    import pyarrow as pa

    from snowberg.iceberg.merge import write_position_deletes
    from snowberg.sync.snapshots import read_changes

    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders(list(range(10))))
    tx = t.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([5], pa.int64())}), {}, io=t.io)
    tx.append(_renamed([5], "v2-"))
    t = tx.commit_transaction()
    last = t.current_snapshot().snapshot_id
    t.delete("order_id = 7")  # copy-on-write: the first file goes, its live rows but 7 are written again
    t = lake.load_table("shop.orders")
    ch = read_changes(t, plan_changes(t, last, key_columns=["order_id"]))
    assert ch.deleted_keys.column("order_id").to_pylist() == [7]
    assert 5 not in ch.removed_keys.column("order_id").to_pylist()
    after = _apply(_state(t, last), ch)
    assert after == _state(t, t.current_snapshot().snapshot_id) and after[5] == "v2-5"


def _commit_delete_files(t: Any, files: list[Any], *, operation: Any = None) -> Any:
    """Commit ``files`` (delete files) in one snapshot with the merge's delete-file producer; ``operation``
    overrides the snapshot's operation (the producer writes ``delete``)."""
    from snowberg.iceberg.merge import position_delete_producer

    tx = t.transaction()
    producer = position_delete_producer(tx, t.io, {}, files)
    if operation is not None:
        producer._operation = operation  # noqa: SLF001 - the one way to label a snapshot another engine labels
    producer.commit()
    return tx.commit_transaction()


def _equality_delete_file(t: Any, key: str, values: list[int]) -> Any:
    """An equality delete file on ``key``, laid out as the Iceberg spec defines it ("Equality Delete Files": the
    equality field's column with its field id, ``equality_ids`` naming it), as Flink writes them; pyiceberg 0.12
    writes none."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    fid = t.schema().find_field(key).field_id
    data = pa.table({key: pa.array(values, pa.int64())}).cast(
        pa.schema([pa.field(key, pa.int64(), False, {b"PARQUET:field_id": str(fid)})])
    )
    location = f"{t.location()}/data/eq-deletes.parquet"
    with t.io.new_output(location).create(overwrite=True) as out:
        pq.write_table(data, out)
    return DataFile.from_args(
        _table_format_version=2,
        content=DataFileContent.EQUALITY_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=len(values),
        file_size_in_bytes=len(t.io.new_input(location)),
        equality_ids=[fid],
        spec_id=0,
    )


def test_equality_deletes_are_never_applied_as_keyed_changes(lake) -> None:
    """Another engine (Flink) removes key 3 with an equality delete file: which rows it hides is not in any
    file's positions, so a keyed run would miss the removal. It stays a rewrite: refused, or a full reload."""
    t = lake.create_table("shop.orders", schema=_keyed_schema())
    t.append(_keyed_rows([1, 2, 3]))
    last = t.current_snapshot().snapshot_id
    t = _commit_delete_files(t, [_equality_delete_file(t, "order_id", [3])])
    assert t.current_snapshot().summary.additional_properties["added-equality-deletes"] == "1"
    with pytest.raises(SourceRewriteError, match="is an delete"):
        plan_changes(t, last, key_columns=["order_id"])
    assert plan_changes(t, last, on_rewrite="full_reload", key_columns=["order_id"]).mode == "full_reload"


def test_an_append_snapshot_carrying_position_deletes_is_not_a_plain_append(lake) -> None:
    """A snapshot labelled ``append`` that adds position delete files hides rows already synced: loading only
    its added data files would keep the hidden rows in the target. Without a key it is refused; with one it is a
    keyed change that removes them."""
    import pyarrow as pa
    from pyiceberg.table.snapshots import Operation

    from snowberg.iceberg.merge import write_position_deletes
    from snowberg.sync.snapshots import read_changes

    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders([1, 2, 3]))
    last = t.current_snapshot().snapshot_id
    # The merge writes the position delete file for key 2 into a transaction that is never committed ...
    tx = t.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([2], pa.int64())}), {}, io=t.io)
    staged = tx.table_metadata.current_snapshot()
    assert staged is not None
    (own,) = {
        e.data_file
        for m in staged.manifests(t.io)
        if m.content.name == "DELETES"
        for e in m.fetch_manifest_entry(t.io, discard_deleted=True)
    }
    # ... and the file is committed in a snapshot labelled append.
    t = _commit_delete_files(t, [own], operation=Operation.APPEND)
    snap = t.current_snapshot()
    assert snap.summary.operation == Operation.APPEND
    assert int(snap.summary.additional_properties["added-position-deletes"]) == 1
    with pytest.raises(SourceRewriteError, match=r"is an append \(append with delete files\)"):
        plan_changes(t, last)
    plan = plan_changes(t, last, key_columns=["order_id"])
    assert plan.mode == "changes"
    ch = read_changes(t, plan)
    assert ch.deleted_keys.column("order_id").to_pylist() == [2]
    assert _apply(_state(t, last), ch) == _state(t, snap.snapshot_id) == {1: "customer '1'", 3: "customer '3'"}


def test_key_columns_empty_turns_keyed_changes_off_even_with_identifier_fields(lake) -> None:
    from snowberg.sync.config import parse_syncs
    from snowberg.sync.snapshots import resolve_key_columns

    t = lake.create_table("shop.keyed", schema=_keyed_schema())
    t.append(_keyed_rows([1, 2]))
    last = t.current_snapshot().snapshot_id
    t.delete("order_id = 1")
    assert resolve_key_columns(t, None) == ["order_id"]  # unset: the identifier fields
    assert resolve_key_columns(t, []) == []  # []: no key, whatever the source declares
    with pytest.raises(SourceRewriteError):
        plan_changes(t, last, key_columns=resolve_key_columns(t, []))
    entry = {
        "name": "o",
        "source": {"catalog": "lake", "table": "shop.keyed"},
        "target": {"kind": "native", "table": "DB.S.ORDERS"},
        "key_columns": [],
    }
    assert parse_syncs({"syncs": [entry]}).syncs[0].key_columns == []


@pytest.mark.parametrize("key_type", ["float", "double"])
def test_floating_point_key_columns_are_refused(lake, key_type: str) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, FloatType, LongType, NestedField

    from snowberg.sync.snapshots import KeyColumnsError, resolve_key_columns

    schema = Schema(
        NestedField(1, "order_id", LongType(), required=True),
        NestedField(2, "score", FloatType() if key_type == "float" else DoubleType(), required=False),
    )
    t = lake.create_table("shop.scored", schema=schema)
    with pytest.raises(KeyColumnsError, match=rf"'score' is {key_type}, which cannot identify a row"):
        resolve_key_columns(t, ["order_id", "score"])


def test_a_data_file_whose_delete_files_did_not_change_is_not_read(lake, monkeypatch) -> None:
    """Two data files, each with a position delete from before the synced snapshot; the change deletes a row of
    the first only. The second file and its delete file are never opened: the cost follows the change."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from snowberg.iceberg.merge import write_position_deletes
    from snowberg.sync.snapshots import read_changes

    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders(list(range(0, 10))))
    t.append(orders(list(range(10, 20))))
    tx = t.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([1, 11], pa.int64())}), {}, io=t.io)
    t = tx.commit_transaction()
    last = t.current_snapshot().snapshot_id
    (second,) = (
        task
        for task in t.scan().plan_files()
        if pq.read_table(task.file.file_path.removeprefix("file://")).column("order_id")[0].as_py() == 10
    )
    untouched = {second.file.file_path, *(d.file_path for d in second.delete_files)}
    assert len(untouched) == 2
    tx = t.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([5], pa.int64())}), {}, io=t.io)
    t = tx.commit_transaction()
    opened: list[str] = []
    real_open = t.io.new_input

    def new_input(location: str):
        opened.append(location)
        return real_open(location)

    monkeypatch.setattr(t.io, "new_input", new_input)
    ch = read_changes(t, plan_changes(t, last, key_columns=["order_id"]))
    assert ch.deleted_keys.column("order_id").to_pylist() == [5]
    assert opened and not untouched & set(opened)
