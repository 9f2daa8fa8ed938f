"""Writing a run's data files on a real SQLite-catalog table: nothing is visible until the files are committed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from snowberg.iceberg.write import write_data_files

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
)
ARROW = pa.schema([("id", pa.int64()), ("region", pa.large_string())])


def make_table(catalog: Any, partitioned: bool, name: str = "ns.w") -> Any:
    catalog.create_namespace_if_not_exists("ns")
    spec = (
        PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
        if partitioned
        else PartitionSpec()
    )
    return catalog.create_table(name, schema=SCHEMA, partition_spec=spec)


def batches(n: int, size: int, consumed: list[int] | None = None) -> Iterator[pa.RecordBatch]:
    for b in range(n):
        ids = list(range(b * size, (b + 1) * size))
        if consumed is not None:
            consumed.append(b)
        yield pa.record_batch(
            [pa.array(ids, pa.int64()), pa.array(["eu" if i % 2 else "us" for i in ids], pa.large_string())],
            schema=ARROW,
        )


def parquet_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "wh").rglob("*.parquet"))


def test_written_files_are_referenced_by_nothing_until_the_commit_adds_them(catalog: Any, tmp_path: Path) -> None:
    t = make_table(catalog, partitioned=False)
    tx = t.transaction()
    files = list(write_data_files(t, tx, ARROW, batches(3, 100), batch_rows=1_000))
    assert files and sum(f.record_count for f in files) == 300
    assert {Path(f.file_path.removeprefix("file://")) for f in files} == set(parquet_files(tmp_path))
    assert catalog.load_table("ns.w").current_snapshot() is None  # on disk, but not in the table
    with tx.update_snapshot().fast_append() as fa:
        for f in files:
            fa.append_data_file(f)
    tx.commit_transaction()
    after = catalog.load_table("ns.w")
    assert len(list(after.snapshots())) == 1
    assert sorted(after.scan().to_arrow().column("id").to_pylist()) == list(range(300))


def test_a_partitioned_table_gets_files_per_partition_written_every_batch_rows(catalog: Any) -> None:
    t = make_table(catalog, partitioned=True)
    tx = t.transaction()
    consumed: list[int] = []
    out = write_data_files(t, tx, ARROW, batches(4, 50, consumed), batch_rows=100)
    first = next(out)
    assert consumed == [0, 1]  # the first 100 rows were flushed before the rest was read: memory stays bounded
    files = [first, *out]
    assert consumed == [0, 1, 2, 3]
    assert len(files) == 4  # two flushes x two regions
    assert sorted(f.partition[0] for f in files) == ["eu", "eu", "us", "us"]
    assert all(f.record_count == 50 for f in files)
    with tx.update_snapshot().fast_append() as fa:
        for f in files:
            fa.append_data_file(f)
    tx.commit_transaction()
    rows = catalog.load_table("ns.w").scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(200))
    assert all(r["region"] == ("eu" if r["id"] % 2 else "us") for r in rows)


def test_a_partial_last_buffer_is_written_too(catalog: Any) -> None:
    t = make_table(catalog, partitioned=True)
    files = list(write_data_files(t, t.transaction(), ARROW, batches(3, 40), batch_rows=100))
    assert sum(f.record_count for f in files) == 120


def test_no_batches_write_no_files(catalog: Any, tmp_path: Path) -> None:
    for partitioned, name in ((False, "ns.w"), (True, "ns.p")):
        t = make_table(catalog, partitioned, name)
        assert list(write_data_files(t, t.transaction(), ARROW, iter([]), batch_rows=100)) == []
    assert parquet_files(tmp_path) == []
