"""Merge-on-read position deletes and copy-on-write, on a real SqlCatalog table.

The lake tables are built directly with pyiceberg (several data files, keys
ordered across files, as a cursor-ordered load leaves them); each merge then
goes through ``remove_replaced`` + the run's append in one transaction, as
``commit_window`` does.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakes import LakeBackend, lake_fixtures
from snowberg.config.table_config import MergeStrategy, TableConfig, parse_config
from snowberg.core.window import Window
from snowberg.iceberg import gate
from snowberg.iceberg.keys import DuplicateKeyError, KeyCollector
from snowberg.iceberg.merge import DELETE_FILE_PATH_ID, DELETE_POS_ID, KeyTypeError

lake, lake_services = lake_fixtures()  # the lakes of tests/lakes (object storage from moto)


def cfg(strategy: MergeStrategy = MergeStrategy.MERGE_ON_READ, keys: tuple[str, ...] = ("id",)) -> TableConfig:
    entry = {
        "name": "t",
        "source": {"table": "DB.S.SRC"},
        "target": "ns.t",
        "cursor": {"column": "updated_at"},
        "primary_key": list(keys),
        "merge_strategy": strategy.value,
    }
    return parse_config({"tables": [entry]}).tables[0]


def window(run_id: str) -> Window:
    return Window(
        run_id=run_id,
        mode="incremental",
        cursor_column="updated_at",
        cursor_kind="number",
        cursor_scale=0,
        low=None,
        low_inclusive=False,
        high="1",
        high_inclusive=True,
        include_nulls=False,
        base_watermark=None,
        base_snapshot_id=None,
        new_watermark="1",
    )


def rows(ids: list[int], version: int, region: list[str] | None = None) -> pa.Table:
    cols: dict[str, Any] = {
        "id": pa.array(ids, pa.int64()),
        "v": pa.array([version] * len(ids), pa.int64()),
    }
    if region is not None:
        cols["region"] = pa.array(region, pa.string())
    return pa.table(cols)


def make_table(catalog: Any, files: int = 4, per_file: int = 1000, region: bool = False) -> Any:
    catalog.create_namespace_if_not_exists("ns")
    first = rows(list(range(per_file)), 0, ["a"] * per_file if region else None)
    t = catalog.create_table("ns.t", schema=first.schema)
    for i in range(files):
        ids = list(range(i * per_file, (i + 1) * per_file))
        t.append(rows(ids, 0, ["a" if j % 2 else "b" for j in ids] if region else None))
    return catalog.load_table("ns.t")


def merge(catalog: Any, c: TableConfig, new: pa.Table, run_id: str = "r", props: dict[str, str] | None = None) -> Any:
    """What commit_window does: remove the replaced rows, append the new ones, one commit."""
    t = catalog.load_table("ns.t")
    keys = KeyCollector(c.primary_key, c.name)
    for b in new.to_batches():
        keys.add(b)
    tx = t.transaction()
    replaced = gate.replaced_by_window(c, window(run_id), keys, tx.table_metadata.current_snapshot() is not None)
    if replaced is not None:
        gate.remove_replaced(tx, replaced, props or {"snowberg.run-id": run_id}, io=t.io)
    tx.append(new)
    return tx.commit_transaction()


def as_dict(t: Any) -> dict[Any, int]:
    a = t.scan().to_arrow()
    key = [tuple(r) for r in zip(*[a.column(k).to_pylist() for k in a.column_names if k != "v"], strict=True)]
    return dict(zip(key if len(key[0]) > 1 else [k[0] for k in key], a.column("v").to_pylist(), strict=True))


def delete_entries(t: Any) -> list[Any]:
    return [
        e.data_file
        for m in t.current_snapshot().manifests(t.io)
        if m.content == 1
        for e in m.fetch_manifest_entry(t.io)
    ]


def test_merge_on_read_hides_replaced_rows_with_position_deletes_only_in_files_that_hold_them(catalog: Any) -> None:
    make_table(catalog)
    changed = [5, 999, 2500]  # files 0 and 2 only
    t = merge(catalog, cfg(), rows(changed, 1))
    got = as_dict(t)
    assert len(got) == 4000
    assert {k: v for k, v in got.items() if v == 1} == dict.fromkeys(changed, 1)
    deletes = delete_entries(t)
    assert len(deletes) == 2  # one per data file that held a replaced key
    assert sum(d.record_count for d in deletes) == 3
    summary = t.current_snapshot().summary
    assert summary["total-position-deletes"] == "3"
    assert summary["total-delete-files"] == "2"
    # no data file was rewritten: the 4 originals plus the run's one
    assert len(t.inspect.data_files()) == 5
    # the run's delete snapshot carries the run's state and the deleted row count, like its append
    delete_snap = t.snapshot_by_id(t.current_snapshot().parent_snapshot_id)
    assert delete_snap.summary.operation.value == "delete"
    assert delete_snap.summary["snowberg.run-id"] == "r" and delete_snap.summary["snowberg.rows-deleted"] == "3"


def test_position_delete_files_follow_the_iceberg_spec(catalog: Any) -> None:
    """Read back without pyiceberg's scan: Parquet with reserved field ids, one data file each, sorted positions."""
    make_table(catalog)
    t = merge(catalog, cfg(), rows([1200, 1003, 1001], 1))
    (d,) = delete_entries(t)
    assert d.content == 1  # POSITION_DELETES, never EQUALITY_DELETES (2)
    pf = pq.ParquetFile(d.file_path.removeprefix("file://"))
    ids = {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in pf.schema_arrow}
    assert ids == {"file_path": DELETE_FILE_PATH_ID, "pos": DELETE_POS_ID}
    dt = pf.read()
    assert dt.column("pos").to_pylist() == [1, 3, 200]
    (path,) = set(dt.column("file_path").to_pylist())
    data = pq.read_table(path.removeprefix("file://"))
    assert pc.take(data.column("id"), dt.column("pos")).to_pylist() == [1001, 1003, 1200]


def test_a_key_replaced_twice_is_deleted_once_per_version(catalog: Any) -> None:
    make_table(catalog)
    merge(catalog, cfg(), rows([10, 20], 1), run_id="a")
    t = merge(catalog, cfg(), rows([10, 30], 2), run_id="b")
    got = as_dict(t)
    assert (got[10], got[20], got[30], len(got)) == (2, 1, 2, 4000)
    # versions deleted: 10@0, 20@0 (run a); 10@1, 30@0 (run b); the old 10@0 position is not deleted again
    assert t.current_snapshot().summary["total-position-deletes"] == "4"


def test_copy_on_write_and_merge_on_read_give_the_same_rows(catalog: Any, tmp_path: Any) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    (tmp_path / "wh2").mkdir()
    other = SqlCatalog("o", uri=f"sqlite:///{tmp_path}/o.db", warehouse=f"file://{tmp_path}/wh2")
    new = rows(list(range(0, 4000, 7)), 1)  # > 200 keys, spread over every file
    make_table(catalog)
    make_table(other)
    a = merge(catalog, cfg(MergeStrategy.MERGE_ON_READ), new)
    b = merge(other, cfg(MergeStrategy.COPY_ON_WRITE), new)
    assert as_dict(a) == as_dict(b)
    assert delete_entries(b) == []


def test_composite_keys_on_a_partitioned_table(catalog: Any) -> None:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    catalog.create_namespace_if_not_exists("ns")
    schema = rows([1], 0, ["a"]).schema
    t = catalog.create_table("ns.t", schema=schema)
    with t.update_spec() as u:
        u.add_field("region", IdentityTransform(), "region")
    t = catalog.load_table("ns.t")
    assert isinstance(t.spec().fields[0], PartitionField) and t.spec() != PartitionSpec()
    t.append(rows(list(range(100)), 0, ["a"] * 50 + ["b"] * 50))
    c = cfg(keys=("id", "region"))
    t = merge(catalog, c, rows([1, 60, 70], 1, ["a", "b", "a"]))  # (70, a) is new
    got = as_dict(t)
    assert got[(1, "a")] == 1 and got[(60, "b")] == 1 and got[(70, "a")] == 1 and got[(70, "b")] == 0
    assert len(got) == 101
    deletes = delete_entries(t)
    assert sorted(d.partition[0] for d in deletes) == ["a", "b"]


def test_duplicate_keys_in_the_window_fail_before_any_write(catalog: Any) -> None:
    t = make_table(catalog, files=1)
    before = t.current_snapshot().snapshot_id
    with pytest.raises(DuplicateKeyError, match="not unique"):
        merge(catalog, cfg(), rows([3, 3], 1))
    assert catalog.load_table("ns.t").current_snapshot().snapshot_id == before


def test_keys_that_cannot_be_compared_with_the_table_key_fail_naming_the_column(catalog: Any) -> None:
    make_table(catalog, files=1)
    t = catalog.load_table("ns.t")
    keys = KeyCollector(cfg().primary_key, cfg().name)
    keys.add(pa.record_batch({"id": pa.array(["x1"]), "v": pa.array([1], pa.int64())}))
    tx = t.transaction()
    with pytest.raises(KeyTypeError, match="primary key column 'id'"):
        replaced = gate.replaced_by_window(cfg(), window("r"), keys, tx.table_metadata.current_snapshot() is not None)
        if replaced is not None:
            gate.remove_replaced(tx, replaced, {}, io=t.io)


def test_first_load_writes_no_deletes(catalog: Any) -> None:
    catalog.create_namespace_if_not_exists("ns")
    t = catalog.create_table("ns.t", schema=rows([1], 0).schema)
    t = merge(catalog, cfg(), rows([1, 2], 1))
    assert as_dict(t) == {1: 1, 2: 1}
    assert delete_entries(t) == []


def test_switching_a_table_to_copy_on_write_keeps_earlier_position_deletes_applied(catalog: Any) -> None:
    make_table(catalog)
    merge(catalog, cfg(MergeStrategy.MERGE_ON_READ), rows([10, 1500], 1), run_id="a")
    t = merge(catalog, cfg(MergeStrategy.COPY_ON_WRITE), rows(list(range(0, 4000, 9)), 2), run_id="b")
    got = as_dict(t)
    assert len(got) == 4000
    assert got[10] == 1 and got[1500] == 1 and got[9] == 2 and got[11] == 0


def live_versions(t: Any, key: int) -> list[int]:
    """The versions of ``key`` a reader sees (more than one: a duplicate key)."""
    a = t.scan().to_arrow()
    return sorted(v for k, v in zip(a.column("id").to_pylist(), a.column("v").to_pylist(), strict=True) if k == key)


def test_a_key_on_a_file_bound_is_replaced_at_either_end_of_the_window(catalog: Any) -> None:
    """Min/max pruning keeps a file whose key range only touches the window's: the bounds are inclusive.

    File 0 holds 0..999 and file 3 holds 3000..3999. A window whose smallest key is 999 (file 0's upper
    bound) or whose largest key is 3000 (file 3's lower bound) must still hide the old version there;
    pruning that file would leave two live versions of the key.
    """
    make_table(catalog)
    merge(catalog, cfg(), rows([999, 1500], 1), run_id="a")  # smallest key == file 0's upper bound
    t = merge(catalog, cfg(), rows([2500, 3000], 2), run_id="b")  # largest key == file 3's lower bound
    assert (live_versions(t, 999), live_versions(t, 1500)) == ([1], [1])
    assert (live_versions(t, 2500), live_versions(t, 3000)) == ([2], [2])
    assert len(as_dict(t)) == 4000 and t.scan().to_arrow().num_rows == 4000


@pytest.mark.parametrize(
    "properties",
    [{"write.metadata.metrics.default": "none"}, {"write.metadata.metrics.column.id": "counts"}],
    ids=["no-metrics", "no-key-bounds"],
)
def test_data_files_without_key_statistics_are_candidates(catalog: Any, properties: dict[str, str]) -> None:
    """Files without lower/upper bounds for the key (metrics off, or written so by another engine) cannot be pruned.

    Iceberg makes column statistics optional (``write.metadata.metrics.*``); a file that has none may hold
    any key, so the merge reads its keys. Skipped, its old versions would stay live next to the new ones.
    """
    catalog.create_namespace_if_not_exists("ns")
    t = catalog.create_table("ns.t", schema=rows([0], 0).schema, properties=properties)
    for i in range(2):
        t.append(rows(list(range(i * 100, (i + 1) * 100)), 0))
    t = catalog.load_table("ns.t")
    files = [task.file for task in t.scan().plan_files()]
    assert len(files) == 2 and all(1 not in f.lower_bounds and 1 not in f.upper_bounds for f in files)
    t = merge(catalog, cfg(), rows([5, 150], 1))
    assert (live_versions(t, 5), live_versions(t, 150), live_versions(t, 6)) == ([1], [1], [0])
    assert t.scan().to_arrow().num_rows == 200
    assert sum(d.record_count for d in delete_entries(t)) == 2


# ---------------------------------------------------------------------------
# On object storage: the merge reads and writes through the table's own FileIO


@pytest.mark.slow
@pytest.mark.parametrize("lake", [b for b in LakeBackend if b.on_s3], indirect=True)
def test_merge_on_read_on_object_storage_uses_the_catalogs_file_io(lake: Any) -> None:
    """The S3 endpoint and keys exist only in the Airflow connection (no AWS variable, no credentials file).

    A FileIO rebuilt from the table's properties has neither: it goes to AWS's
    real endpoint without keys. The merge must read the candidate files and
    write its delete files with ``table.io`` (vended credentials included).
    """
    cat = lake.catalog()
    t = cat.create_table(f"{lake.namespace}.t", schema=rows([0], 0).schema)
    t.append(rows([1, 2, 3], 0))
    t = cat.load_table(f"{lake.namespace}.t")
    tx = t.transaction()
    keys = KeyCollector(["id"], "t")
    keys.add(rows([2, 4], 1).to_batches()[0])
    replaced = gate.replaced_by_window(cfg(), window("r"), keys, True)
    assert replaced is not None and replaced.keys is not None
    from snowberg.iceberg.write import write_data_files

    new = rows([2, 4], 1)
    files = list(write_data_files(t, tx, new.schema, iter(new.to_batches()), 1000))
    gate.commit(
        t, tx, state_props={"snowberg.run-id": "r"}, replaced=replaced, data_files=files, crash_points=None, dag_id="d"
    )
    t = cat.load_table(f"{lake.namespace}.t")
    assert as_dict(t) == {1: 0, 2: 1, 3: 0, 4: 1}
    assert [d.file_path.startswith("s3://") for d in delete_entries(t)] == [True]
