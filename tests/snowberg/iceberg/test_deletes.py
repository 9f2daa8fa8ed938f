"""Position delete files against their data files: the live-row count, dangling delete files, removing them.

The merge writes file-scoped delete files (one data file each); other engines
write delete files that name several data files. Both are covered: the
second kind is written here the way the Iceberg spec lays it out (sorted
``file_path``, ``pos``; different path bounds).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from maint_harness import rows_of, small_table, state_props

from snowberg.iceberg import deletes, gate


def _data_files(t: Any) -> list[Any]:
    """The data files in the order of the ids they hold (small_table writes ids 0..9, 10..19, …)."""
    return sorted((task.file for task in t.scan().plan_files()), key=lambda f: _ids(f.file_path)[0])


def _ids(path: str) -> list[int]:
    return pq.read_table(path.removeprefix("file://")).column("id").to_pylist()


def _shared_delete_file(t: Any, positions: dict[str, list[int]], props: dict[str, str]) -> None:
    """Commit one position delete file naming several data files (as Spark writes them) with the merge's producer."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    from snowberg.iceberg.merge import position_delete_producer

    paths = sorted(p for p, pos in positions.items() for _ in pos)
    pos = [p for path in sorted(positions) for p in sorted(positions[path])]
    table = pa.table(
        {"file_path": pa.array(paths, pa.string()), "pos": pa.array(pos, pa.int64())},
        schema=pa.schema(
            [
                pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": str(deletes.DELETE_FILE_PATH_ID)}),
                pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": str(deletes.DELETE_POS_ID)}),
            ]
        ),
    )
    location = f"{t.location()}/data/shared-deletes.parquet"
    with t.io.new_output(location).create(overwrite=True) as out:
        pq.write_table(table, out)
    f = DataFile.from_args(
        _table_format_version=2,
        content=DataFileContent.POSITION_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=len(pos),
        file_size_in_bytes=len(t.io.new_input(location)),
        lower_bounds={deletes.DELETE_FILE_PATH_ID: paths[0].encode()},
        upper_bounds={deletes.DELETE_FILE_PATH_ID: paths[-1].encode()},
        spec_id=0,
    )
    tx = t.transaction()
    position_delete_producer(tx, t.io, props, [f]).commit()
    tx.commit_transaction()


def test_live_rows_is_zero_without_snapshots_and_unknown_for_a_missing_snapshot(catalog: Any) -> None:
    t = small_table(catalog, 0)
    assert deletes.live_rows(t) == 0 and deletes.live_rows(t, 123) is None


def test_live_rows_reads_the_summary_when_there_is_no_delete_file(catalog: Any, monkeypatch: Any) -> None:
    t = small_table(catalog, 3)

    def no_manifests(*a: Any, **k: Any) -> Any:
        raise AssertionError("the manifests were read")

    monkeypatch.setattr(deletes.LiveFiles, "read", no_manifests)
    assert deletes.live_rows(t) == 30
    assert deletes.live_rows(t, t.snapshots()[0].snapshot_id) == 10


def test_a_delete_file_naming_several_data_files_counts_only_for_the_live_ones(catalog: Any) -> None:
    """Remove one of the two data files a shared delete file names: the count subtracts only the live file's
    positions, the shared file stays (it still hides a row), and the table reads the same rows."""
    from pyiceberg.expressions import LessThan

    t = small_table(catalog, 3)  # ids 0..29, files of 10
    f0, f1, _ = (f.file_path for f in _data_files(t))
    first = {r["id"]: r for r in rows_of(t)}
    ids0, ids1 = _ids(f0), _ids(f1)
    _shared_delete_file(t, {f0: [0, 1], f1: [5]}, state_props(4))
    t = catalog.load_table("ns.t")
    hidden = {ids0[0], ids0[1], ids1[5]}
    assert {r["id"] for r in rows_of(t)} == set(first) - hidden
    assert deletes.live_rows(t) == 27
    assert deletes.delete_targets(t.io, _delete_file(t)) == {f0: 2, f1: 1}  # read: its path bounds differ

    # The rows of f0 go (a backfill-like removal): its delete file also names f1, so it stays.
    tx = t.transaction()
    gate.remove_replaced(tx, gate.Replacement(rows=LessThan("id", 10)), state_props(5), io=t.io)
    tx.commit_transaction()
    t = catalog.load_table("ns.t")
    assert t.inspect.delete_files().num_rows == 1
    assert deletes.live_rows(t) == 19 == len(rows_of(t))
    assert deletes.dangling_delete_files(t.io, t.current_snapshot()) == []

    # Then f1's rows go too: now it hides nothing and the removal drops it in the same commit.
    tx = t.transaction()
    gate.remove_replaced(tx, gate.Replacement(rows=LessThan("id", 20)), state_props(6), io=t.io)
    tx.commit_transaction()
    t = catalog.load_table("ns.t")
    assert t.inspect.delete_files().num_rows == 0 and deletes.live_rows(t) == 10 == len(rows_of(t))
    summary = t.current_snapshot().summary.additional_properties
    assert summary["total-position-deletes"] == "0" and summary[gate.state.WATERMARK] == "6"


def _delete_file(t: Any) -> Any:
    (f,) = deletes.LiveFiles.read(t.io, t.current_snapshot()).position_deletes
    return f


def test_the_clean_up_snapshot_keeps_the_state_and_changes_no_row(catalog: Any) -> None:
    """The replace snapshot a removal adds carries the same snowberg properties as the removal (one commit)."""
    from pyiceberg.expressions import LessThan

    t = small_table(catalog, 2)
    tx = t.transaction()
    gate.remove_replaced(
        tx, gate.Replacement(keys=pa.table({"id": pa.array([3], pa.int64())})), state_props(3), io=t.io
    )
    tx.commit_transaction()
    t = catalog.load_table("ns.t")
    tx = t.transaction()
    gate.remove_replaced(tx, gate.Replacement(rows=LessThan("id", 10)), state_props(4, run_id="bf"), io=t.io)
    tx.commit_transaction()
    t = catalog.load_table("ns.t")
    head = t.current_snapshot()
    assert head.summary.operation.value == "replace"
    p = head.summary.additional_properties
    assert p[gate.state.RUN_ID] == "bf" and p["removed-position-delete-files"] == "1"
    assert deletes.live_rows(t) == 10 == len(rows_of(t))


@pytest.mark.parametrize(
    "dropped",
    [
        ("added-position-deletes", "total-position-deletes", "removed-position-deletes"),
        ("added-delete-files", "added-position-delete-files", "total-delete-files", "total-position-delete-files"),
    ],
    ids=["no-position-counts", "no-delete-file-counts"],
)
def test_a_summary_counting_delete_files_but_not_their_positions_is_not_taken_as_the_row_count(
    catalog: Any, monkeypatch: Any, dropped: tuple[str, ...]
) -> None:
    """The Iceberg spec makes every snapshot summary count optional ("Optional Snapshot Summary Fields",
    https://iceberg.apache.org/spec/#optional-snapshot-summary-fields): a writer may record its delete files
    (``total-delete-files``) without their positions (``total-position-deletes``), or the other way round.
    ``total-records`` still counts the hidden rows, so ``live_rows`` reads the delete files instead (health, the
    rollback preview and the sync's guard would over-count otherwise). The summaries are shaped from the spec by
    leaving pyiceberg's counts out, not recorded from another engine."""
    from pyiceberg.table.update import snapshot as snapshot_mod

    from snowberg.iceberg.merge import write_position_deletes

    t = small_table(catalog, 3)  # ids 0..29
    summarise = snapshot_mod.update_snapshot_summaries

    def without_position_counts(summary: Any, previous_summary: Any = None) -> Any:
        from pyiceberg.table.snapshots import Summary

        out = summarise(summary, previous_summary)
        props = {k: v for k, v in out.additional_properties.items() if k not in dropped}
        return Summary(out.operation, **props)

    monkeypatch.setattr(snapshot_mod, "update_snapshot_summaries", without_position_counts)
    tx = t.transaction()
    write_position_deletes(tx, pa.table({"id": pa.array([1, 2, 15], pa.int64())}), state_props(4), io=t.io)
    tx.commit_transaction()
    monkeypatch.setattr(snapshot_mod, "update_snapshot_summaries", summarise)
    t = catalog.load_table("ns.t")
    p = t.current_snapshot().summary.additional_properties
    assert p["total-records"] == "30" and not set(dropped) & set(p)
    assert deletes.live_rows(t) == 27 == len(rows_of(t))


def test_live_rows_is_unknown_with_equality_deletes(catalog: Any) -> None:
    """An equality delete file (another engine's; laid out as the Iceberg spec's "Equality Delete Files") hides
    rows no position names: the count cannot be known from metadata, so it is None, never the data rows."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    from snowberg.iceberg.merge import position_delete_producer

    t = small_table(catalog, 2)
    data = pa.table({"id": pa.array([3], pa.int64())}).cast(
        pa.schema([pa.field("id", pa.int64(), False, {b"PARQUET:field_id": "1"})])
    )
    location = f"{t.location()}/data/eq-deletes.parquet"
    with t.io.new_output(location).create(overwrite=True) as out:
        pq.write_table(data, out)
    f = DataFile.from_args(
        _table_format_version=2,
        content=DataFileContent.EQUALITY_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=1,
        file_size_in_bytes=len(t.io.new_input(location)),
        equality_ids=[1],
        spec_id=0,
    )
    tx = t.transaction()
    position_delete_producer(tx, t.io, {}, [f]).commit()
    tx.commit_transaction()
    t = catalog.load_table("ns.t")
    assert deletes.live_rows(t) is None
    assert deletes.live_rows(t, t.snapshots()[0].snapshot_id) == 10
