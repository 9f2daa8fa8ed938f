"""Table health from metadata: files, rows, statistics coverage, partition skew, small files, properties."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from snowberg.checks import health
from snowberg.config.check_settings import HealthThresholds


def test_report_counts_from_manifests(orders: Any, lake: Any) -> None:
    lake.append(orders, lake.batch([20, 21]), run_id="r2")
    r = health.collect(orders, name="lake.orders")
    assert r.snapshots == 2 and r.operations == {"append": 2}
    assert r.data_files == 2 and r.delete_files == 0
    assert r.rows == 12 == r.manifest_added_rows + r.manifest_existing_rows
    assert r.manifests == 2 and r.delete_manifests == 0
    assert r.total_bytes > 0 and r.avg_file_bytes == r.total_bytes // 2
    assert r.small_files == 2 and r.small_file_ratio == 1.0  # every test file is under 32 MiB
    assert r.partition_spec == "unpartitioned" and r.partitions == 1 and r.partition_skew == 1.0
    assert r.stats_coverage == 1.0
    assert [c.column for c in r.columns] == ["id", "region", "amount", "updated_at"]
    amount = next(c for c in r.columns if c.column == "amount")
    assert amount.with_null_counts == 2 and amount.coverage == 1.0
    assert r.properties == dict(orders.properties)
    assert r.healthy and r.breaches == []
    d = r.to_dict()
    assert d["healthy"] is True and d["columns"][0]["coverage"] == 1.0


def test_report_counts_position_delete_files_and_the_rows_they_delete(orders: Any, lake: Any) -> None:
    """A merge-on-read commit adds one delete manifest; its files and deleted rows are counted, apart from data."""
    import pyarrow as pa

    from snowberg.iceberg.merge import write_position_deletes

    lake.append(orders, lake.batch([20, 21, 22]), run_id="r2")
    tx = orders.transaction()
    keys = pa.table({"id": pa.array([1, 2, 21], pa.int64())})
    write_position_deletes(tx, keys, {"snowberg.run-id": "m"}, io=orders.io)
    t = tx.commit_transaction()
    r = health.collect(t, name="lake.orders")
    assert (r.delete_manifests, r.delete_files, r.deleted_rows_in_delete_files) == (1, 2, 3)
    assert (r.data_files, r.rows) == (2, 13)  # data files are untouched: rows are counted before deletes
    assert r.live_rows == 10 == len(t.scan().to_arrow())
    assert re.search(r"rows deleted by delete files\s+3\b", health.render(r))


def test_all_null_column_needs_no_bounds(catalog: Any, lake: Any) -> None:
    import pyarrow as pa

    t = catalog.create_table("lake.nulls", schema=lake.schema())
    data = lake.batch([3, 6])  # amount is None for multiples of 3: an all-null column in this file
    assert data.column("amount").null_count == 2
    t.append(data)
    r = health.collect(t, name="lake.nulls")
    amount = next(c for c in r.columns if c.column == "amount")
    assert amount.with_lower_bounds == 0 and amount.with_null_counts == 1
    assert amount.coverage == 1.0
    assert isinstance(pa, object)


def test_partition_skew_and_render(partitioned: Any) -> None:
    r = health.collect(partitioned, name="lake.sales", thresholds=HealthThresholds(max_partition_skew=3))
    assert r.partitions == 2
    assert r.max_files_per_partition == 4 and r.min_files_per_partition == 1 and r.partition_skew == 4.0
    assert r.top_partitions[0] == ("region=eu", 4)
    assert r.partition_spec == "identity(region)"
    assert [b.metric for b in r.breaches] == ["partition_skew"]
    text = health.render(r)
    for needle in (
        "UNHEALTHY",
        "partition skew (max / min)",
        "region=eu",
        "column statistics",
        "table properties",
        "! partition_skew",
    ):
        assert needle in text, needle


def test_missing_statistics_lower_coverage(catalog: Any, lake: Any) -> None:
    t = catalog.create_table(
        "lake.nostats", schema=lake.schema(), properties={"write.metadata.metrics.default": "none"}
    )
    lake.append(t, lake.batch([1, 2]))
    with t.transaction() as tx:
        tx.set_properties({"write.metadata.metrics.default": "full"})
    lake.append(t, lake.batch([4, 5]), run_id="r2")
    r = health.collect(t, name="lake.nostats", thresholds=HealthThresholds(min_stats_coverage=0.9))
    assert r.data_files == 2
    assert r.stats_coverage == 0.5
    assert all(c.covered == 1 for c in r.columns)
    assert [b.metric for b in r.breaches] == ["stats_coverage"]
    assert "50%" in r.breaches[0].message and "write.metadata.metrics" in r.breaches[0].message


def test_thresholds_for_files_snapshots_and_age(orders: Any, lake: Any) -> None:
    lake.append(orders, lake.batch([30]), run_id="r2")
    th = HealthThresholds(
        max_small_file_ratio=0.5, small_file_size="1MiB", max_snapshots=1, max_delete_files=0, max_snapshot_age="1h"
    )
    r = health.collect(orders, name="lake.orders", thresholds=th, now=datetime.now(UTC) + timedelta(hours=2))
    assert {b.metric for b in r.breaches} == {"small_file_ratio", "snapshots", "oldest_snapshot_age_hours"}
    assert r.small_file_size == 1024 * 1024
    assert r.limits["max_snapshot_age"] == "1h"


def test_empty_table(catalog: Any, lake: Any) -> None:
    t = catalog.create_table("lake.empty", schema=lake.schema())
    r = health.collect(t, name="lake.empty", thresholds=HealthThresholds(min_stats_coverage=1, max_small_file_ratio=0))
    assert r.data_files == 0 and r.snapshots == 0 and r.current_snapshot_id is None
    assert r.healthy  # nothing to judge
    assert "HEALTHY" in health.render(r)
