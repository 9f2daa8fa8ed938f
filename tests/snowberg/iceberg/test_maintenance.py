"""Maintenance on real SQLite-catalog tables: expiry, compaction, orphan files — and the state survives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from maint_harness import rows_of, small_table, state_props

from lakes import LakeBackend, lake_fixtures
from snowberg.iceberg import gate, state
from snowberg.iceberg import maintenance as m

FAR_FUTURE = datetime.now(UTC) + timedelta(days=30)

lake, lake_services = lake_fixtures()  # the lakes of tests/lakes (object storage from moto)


def test_expiry_keeps_min_count_tags_and_the_chain_to_the_state_snapshot(catalog: Any) -> None:
    t = small_table(catalog, 12)
    snaps = list(t.snapshots())
    tagged = snaps[1].snapshot_id
    t.manage_snapshots().create_tag(tagged, "audit").commit()
    # Another engine appends twice after the last snowberg commit: those carry no state.
    t = catalog.load_table("ns.t")
    for _ in range(2):
        t.append(pa.table({"id": pa.array([999], pa.int64()), "grp": pa.array([0], pa.int64()), "note": ["x"]}))
    t = catalog.load_table("ns.t")
    st_before = state.read_state(t)
    r = m.expire_snapshots(t, older_than=timedelta(0), min_snapshots=1, now=FAR_FUTURE)
    t = catalog.load_table("ns.t")
    kept = {s.snapshot_id for s in t.snapshots()}
    assert tagged in kept and t.metadata.refs["audit"].snapshot_id == tagged
    assert st_before is not None and st_before.snapshot_id in kept
    assert len(kept) == 4  # head, the other engine's first append, the state snapshot, the tag
    assert state.read_state(t) == st_before
    assert len(r.expired) == 14 - 4
    assert r.metadata_bytes_after < r.metadata_bytes_before
    assert len(rows_of(t)) == 12 * 10 + 2


def test_expiry_respects_retention_and_min_count(catalog: Any) -> None:
    t = small_table(catalog, 6)
    assert m.expire_snapshots(t, older_than=timedelta(days=1), min_snapshots=1).expired == []
    r = m.expire_snapshots(catalog.load_table("ns.t"), older_than=timedelta(0), min_snapshots=4, now=FAR_FUTURE)
    assert len(r.expired) == 2
    assert len(list(catalog.load_table("ns.t").snapshots())) == 4


def test_expiry_dry_run_changes_nothing(catalog: Any) -> None:
    t = small_table(catalog, 5)
    r = m.expire_snapshots(t, older_than=timedelta(0), min_snapshots=1, now=FAR_FUTURE, dry_run=True)
    assert len(r.expired) == 4 and len(list(catalog.load_table("ns.t").snapshots())) == 5


@pytest.mark.parametrize("partitioned", [False, True])
def test_compaction_rewrites_small_files_in_one_replace_commit_keeping_rows_and_state(
    catalog: Any, partitioned: bool
) -> None:
    t = small_table(catalog, 20, partitioned=partitioned)
    before_rows = rows_of(t)
    st = state.read_state(t)
    files_before = len(t.inspect.files())
    r = m.compact(t, target_size=64 * 1024 * 1024)
    t = catalog.load_table("ns.t")
    snap = t.current_snapshot()
    assert r.status == "committed" and snap.snapshot_id == r.snapshot_id
    assert snap.summary.operation.value == "replace"
    assert snap.parent_snapshot_id == r.base_snapshot_id
    assert rows_of(t) == before_rows
    assert r.rows_rewritten == len(before_rows)
    assert len(t.inspect.files()) == r.files_after == (3 if partitioned else 1) < files_before
    # One manifest now, listing only live files: it plans like a freshly written table.
    assert len(t.inspect.manifests()) == 1
    assert sorted(t.inspect.entries().column("status").to_pylist()) == [1] * r.files_after
    assert snap.summary.additional_properties["deleted-data-files"] == str(r.rewritten_files) == str(files_before)
    new_state = state.read_state(t)
    assert new_state is not None and st is not None
    assert (new_state.watermark, new_state.cursor_kind, new_state.run_id) == (st.watermark, st.cursor_kind, st.run_id)
    assert new_state.snapshot_id == snap.snapshot_id
    assert snap.summary.additional_properties[m.MAINTENANCE] == "compact"
    assert snap.summary.additional_properties[state.ROWS] == "0"
    assert int(snap.summary.additional_properties["total-records"]) == len(before_rows)
    # A second run finds nothing to do.
    assert m.compact(t, target_size=64 * 1024 * 1024).status == "nothing_to_do"


def test_compaction_leaves_files_near_the_target_alone(catalog: Any) -> None:
    t = small_table(catalog, 4)
    smallest = min(t.inspect.files()["file_size_in_bytes"].to_pylist())
    r = m.compact(t, target_size=smallest, small_file_ratio=0.5)
    assert r.status == "nothing_to_do" and catalog.load_table("ns.t").current_snapshot().summary.operation.value == (
        "append"
    )


def test_compaction_dry_run_lists_groups_and_commits_nothing(catalog: Any) -> None:
    t = small_table(catalog, 5, partitioned=True)
    head = t.current_snapshot().snapshot_id
    r = m.compact(t, target_size=1 << 26, dry_run=True)
    assert r.status == "dry_run" and len(r.groups) == 3 and r.rewritten_files == 15
    assert catalog.load_table("ns.t").current_snapshot().snapshot_id == head


def test_compaction_that_would_change_rows_fails_without_committing(catalog: Any, monkeypatch: Any) -> None:
    import itertools

    t = small_table(catalog, 5)
    head = t.current_snapshot().snapshot_id
    created = itertools.count()

    class Lossy(m.RowChecksum):
        """Every second checksum is a group's read-back: it "loses" a row."""

        def __init__(self) -> None:
            super().__init__()
            self.lossy = next(created) % 2 == 1

        def add(self, batch: Any) -> None:
            super().add(batch.slice(1) if self.lossy and batch.num_rows else batch)

    monkeypatch.setattr(m, "RowChecksum", Lossy)
    with pytest.raises(m.CompactionVerificationError, match="nothing committed"):
        m.compact(t, target_size=1 << 26)
    t = catalog.load_table("ns.t")
    assert t.current_snapshot().snapshot_id == head
    # The files it wrote were removed again: nothing for the orphan sweep.
    r = m.remove_orphan_files(t, older_than=timedelta(days=1), now=FAR_FUTURE, dry_run=True)
    assert [p for p in r.orphans if "/data/" in p] == []


def _load_like_snowberg(t: Any, i: int) -> Any:
    """A load: opened on the head it read, commits with the state, no rebase."""
    gate.refuse_rebase(t)
    tx = t.transaction()
    data = pa.table({"id": pa.array([10_000 + i], pa.int64()), "grp": pa.array([1], pa.int64()), "note": ["late"]})
    tx.append(data, snapshot_properties=state_props(100 + i, run_id=f"late{i}"))
    return tx


def test_a_load_committing_during_compaction_fails_the_compaction_and_its_retry_succeeds(catalog: Any) -> None:
    from pyiceberg.exceptions import CommitFailedException

    t = small_table(catalog, 6)
    stale = catalog.load_table("ns.t")
    _load_like_snowberg(catalog.load_table("ns.t"), 1).commit_transaction()
    with pytest.raises(CommitFailedException):
        m.compact(stale, target_size=1 << 26)
    t = catalog.load_table("ns.t")
    assert t.current_snapshot().summary.additional_properties[state.RUN_ID] == "late1"
    r = m.compact(t, target_size=1 << 26)  # the retry plans on the new head
    t = catalog.load_table("ns.t")
    assert r.status == "committed" and len(rows_of(t)) == 61
    assert state.read_state(t).watermark == "101"


def test_compaction_committing_during_a_load_fails_the_load_and_its_retry_succeeds(catalog: Any) -> None:
    from pyiceberg.exceptions import CommitFailedException

    t = small_table(catalog, 6)
    tx = _load_like_snowberg(catalog.load_table("ns.t"), 2)
    m.compact(catalog.load_table("ns.t"), target_size=1 << 26)
    with pytest.raises(CommitFailedException):
        tx.commit_transaction()
    _load_like_snowberg(catalog.load_table("ns.t"), 2).commit_transaction()
    t = catalog.load_table("ns.t")
    assert len(rows_of(t)) == 61 and state.read_state(t).watermark == "102"


def test_orphan_files_dry_run_lists_then_removal_deletes_only_old_unreferenced_files(catalog: Any) -> None:
    t = small_table(catalog, 3)
    loc = Path(t.location().removeprefix("file://"))
    stray = loc / "data" / "00000-killed-run.parquet"
    stray.write_bytes(b"not referenced")
    old = datetime.now(UTC) - timedelta(days=10)
    os.utime(stray, (old.timestamp(), old.timestamp()))
    fresh = loc / "data" / "00001-running-load.parquet"
    fresh.write_bytes(b"a load is writing this")
    r = m.remove_orphan_files(t, older_than=timedelta(days=3), dry_run=True)
    assert r.orphans == [f"file://{stray}"] and r.too_young == 1 and stray.exists()
    r = m.remove_orphan_files(t, older_than=timedelta(days=3))
    assert r.deleted == 1 and not stray.exists() and fresh.exists()
    assert len(rows_of(catalog.load_table("ns.t"))) == 30


def test_files_of_expired_snapshots_become_orphans_and_go_without_breaking_reads(catalog: Any) -> None:
    t = small_table(catalog, 8)
    m.compact(t, target_size=1 << 26)
    t = catalog.load_table("ns.t")
    m.expire_snapshots(t, older_than=timedelta(0), min_snapshots=1, now=FAR_FUTURE)
    t = catalog.load_table("ns.t")
    r = m.remove_orphan_files(t, older_than=timedelta(days=1), now=FAR_FUTURE)
    assert sum("/data/" in p for p in r.orphans) == 8  # the 8 small files the compaction replaced
    assert len(rows_of(catalog.load_table("ns.t"))) == 80


CHILD = r"""
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
from snowberg.iceberg import maintenance as m
a = json.loads(sys.argv[1])
t = SqlCatalog("lake", uri=a["uri"], warehouse=a["wh"]).load_table("ns.t")
print(json.dumps(m.compact(t, target_size=1 << 26).to_dict()))
"""


@pytest.mark.parametrize("point", ["compact_after_write", "compact_before_commit"])
def test_compaction_killed_midway_leaves_the_table_correct_and_its_files_are_swept_later(
    catalog: Any, point: str
) -> None:
    t = small_table(catalog, 6, partitioned=True)
    before = rows_of(t)
    head = t.current_snapshot().snapshot_id
    args = json.dumps({"uri": catalog.properties["uri"], "wh": catalog.properties["warehouse"]})
    env = {**os.environ, "SNOWBERG_FAULT": point}
    res = subprocess.run([sys.executable, "-c", CHILD, args], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 137, res.stderr[-2000:]
    t = catalog.load_table("ns.t")
    assert t.current_snapshot().snapshot_id == head and rows_of(t) == before
    swept = m.remove_orphan_files(t, older_than=timedelta(days=1), now=FAR_FUTURE)
    assert any("/data/" in p for p in swept.orphans)  # the killed run's rewritten files
    env.pop("SNOWBERG_FAULT")
    res = subprocess.run([sys.executable, "-c", CHILD, args], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    t = catalog.load_table("ns.t")
    assert rows_of(t) == before and t.current_snapshot().summary.operation.value == "replace"


def test_content_checksum_ignores_order_and_sees_a_duplicate() -> None:
    a = pa.table({"x": [1, 2, 3], "y": ["a", "b", "c"]})
    b = pa.table({"x": [3, 1, 2], "y": ["c", "a", "b"]})
    c = pa.table({"x": [1, 2, 3, 3], "y": ["a", "b", "c", "c"]})
    assert m.content_checksum(a.to_batches()) == m.content_checksum(b.to_batches())
    assert m.content_checksum(c.to_batches())[1] != m.content_checksum(a.to_batches())[1]


def test_expiry_compaction_and_orphan_removal_never_break_the_next_load(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    import time

    from maint_harness import DDL, NOW, insert, lake_pairs, load, source_rows, table_cfg

    sfdb.sql(DDL.format(t=sfdb.table("SRC")))
    insert(sfdb, range(1, 11), "2026-01-01 00:00:00")
    cfg = table_cfg(sfdb)
    load(cfg, sfdb, catalog, variables, "r0")
    for i in range(1, 4):
        sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET NOTE = 'v{i}', UPDATED_AT = {NOW} WHERE ID = {i}")
        insert(sfdb, range(10 * i + 1, 10 * i + 3), "now", note=f"n{i}")
        time.sleep(0.01)
        assert load(cfg, sfdb, catalog, variables, f"r{i}").status == "committed"
    t = catalog.load_table("ns.t")
    st = state.read_state(t)
    m.compact(t, target_size=1 << 26)
    assert "adopted" in state.follow_variable(catalog.load_table("ns.t"), cfg.variable_key, variables)
    m.expire_snapshots(catalog.load_table("ns.t"), older_than=timedelta(0), min_snapshots=1, now=FAR_FUTURE)
    m.remove_orphan_files(catalog.load_table("ns.t"), older_than=timedelta(days=1), now=FAR_FUTURE)
    t = catalog.load_table("ns.t")
    assert len(list(t.snapshots())) == 1 and state.read_state(t).watermark == st.watermark
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET NOTE = 'after', UPDATED_AT = {NOW} WHERE ID = 5")
    insert(sfdb, range(100, 103), "now", note="after")
    time.sleep(0.01)
    r = load(cfg, sfdb, catalog, variables, "r9")
    assert r.status == "committed" and r.rows == 4
    assert lake_pairs(catalog) == source_rows(sfdb)
    assert json.loads(variables[cfg.variable_key])["watermark"] == r.watermark


@pytest.mark.parametrize("partitioned", [False, True])
def test_compaction_folds_merge_on_read_position_deletes_back_into_data_files(catalog: Any, partitioned: bool) -> None:
    """A merge-on-read table (the default strategy) compacts into files with no delete file left, rows unchanged."""
    import pyarrow as pa

    from snowberg.iceberg import gate

    t = small_table(catalog, 6, partitioned=partitioned)
    # Replace keys spread over several data files, the way a merge run does: position deletes + the new rows.
    replaced = pa.table({"id": pa.array([3, 14, 25, 41, 57], pa.int64())})
    new = pa.table(
        {
            "id": replaced.column("id"),
            "grp": pa.array([i % 3 for i in replaced.column("id").to_pylist()], pa.int64()),
            "note": pa.array(["updated"] * replaced.num_rows, pa.string()),
        }
    )
    tx = t.transaction()
    gate.remove_replaced(tx, gate.Replacement(keys=replaced), state_props(7), io=t.io)
    tx.append(new, snapshot_properties=state_props(7))
    tx.commit_transaction()
    t = catalog.load_table("ns.t")
    before = rows_of(t)
    assert len(before) == 60 and sum(r["note"] == "updated" for r in before) == 5
    deletes_before = [f for f in t.inspect.delete_files().column("file_path").to_pylist()]
    assert deletes_before, "the merge wrote position delete files"

    r = m.compact(t, target_size=64 * 1024 * 1024)
    t = catalog.load_table("ns.t")
    assert r.status == "committed" and r.delete_files_removed == len(deletes_before)
    assert rows_of(t) == before
    assert t.inspect.delete_files().num_rows == 0
    assert state.read_state(t).watermark == "7"


# ---------------------------------------------------------------- orphan files a writer still needs


@pytest.mark.parametrize("age", [timedelta(0), timedelta(hours=23)])
def test_an_orphan_sweep_under_a_day_is_refused_unless_explicitly_allowed(catalog: Any, age: timedelta) -> None:
    """Like Iceberg's and Spark's remove_orphan_files: a short age deletes files a running write still needs."""
    t = small_table(catalog, 2)
    stray = Path(t.location().removeprefix("file://")) / "data" / "00000-killed-run.parquet"
    stray.write_bytes(b"not referenced")
    with pytest.raises(ValueError, match=r"at least 1 day.*allow_short_orphan_age: true"):
        m.remove_orphan_files(t, older_than=age)
    assert stray.exists()
    r = m.remove_orphan_files(t, older_than=age, now=FAR_FUTURE, allow_short_age=True)
    assert r.deleted == 1 and not stray.exists()


def test_a_sweep_between_a_loads_write_and_its_commit_fails_the_load_instead_of_committing_missing_files(
    sfdb: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: the sweep runs after a merge-on-read load wrote its data and delete files, before its commit.

    The sweep sees them as old (its clock is days ahead, as for a commit delayed that long) and unreferenced,
    and deletes them. The commit must then refuse — committing would reference missing files and every read of
    the table would fail — and leave the table as it was; the retry writes them again and commits.
    """
    import time

    from maint_harness import DDL, NOW, insert, lake_pairs, load, source_rows, table_cfg

    from snowberg.core import faults

    sfdb.sql(DDL.format(t=sfdb.table("SRC")))
    insert(sfdb, range(1, 21), "2026-01-01 00:00:00")
    cfg = table_cfg(sfdb)
    load(cfg, sfdb, catalog, variables, "r0")
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET NOTE = 'b', UPDATED_AT = {NOW} WHERE ID IN (3, 17)")
    insert(sfdb, range(21, 24), "now", note="new")
    time.sleep(0.01)
    head = catalog.load_table("ns.t").current_snapshot().snapshot_id
    real = faults.crash_point
    swept: list[m.OrphanResult] = []

    def sweep_first(name: str) -> None:
        if name == "before_commit" and not swept:
            t = catalog.load_table("ns.t")
            swept.append(m.remove_orphan_files(t, older_than=timedelta(days=3), now=FAR_FUTURE))
        real(name)

    monkeypatch.setattr(faults, "crash_point", sweep_first)
    with pytest.raises(RuntimeError, match=r"no longer exist.*Nothing was committed"):
        load(cfg, sfdb, catalog, variables, "r1")
    assert any("/data/" in p for p in swept[0].orphans)
    t = catalog.load_table("ns.t")
    assert t.current_snapshot().snapshot_id == head
    assert len(lake_pairs(catalog)) == 20  # the table still reads: nothing dangling was committed

    monkeypatch.setattr(faults, "crash_point", real)
    assert load(cfg, sfdb, catalog, variables, "r1").status == "committed"
    assert lake_pairs(catalog) == source_rows(sfdb)


def test_the_sweep_keeps_staging_and_what_a_staging_manifest_names_even_when_old(catalog: Any) -> None:
    """Files staged for a later commit (mapped slices) are never orphans: the staging folder, every data file a
    staging manifest names; an unreadable staging manifest that is still being written keeps every unreferenced
    data file for this sweep (it may name any of them)."""
    import pyarrow as pa

    from snowberg.iceberg import staging
    from snowberg.iceberg.write import write_data_files

    t = small_table(catalog, 2)
    tx = t.transaction()
    batch = pa.record_batch({"id": pa.array([7], pa.int64()), "grp": pa.array([1], pa.int64()), "note": ["x"]})
    files = list(write_data_files(t, tx, batch.schema, iter([batch]), 1000))
    folder = staging.staging_location(t, "manual__2026-12-01")
    manifest, _ = staging.write_staging_manifest(t, f"{folder}/slice-00000.avro", files)
    stray = Path(t.location().removeprefix("file://")) / "data" / "00000-killed-run.parquet"
    stray.write_bytes(b"not referenced")
    old = (datetime.now(UTC) - timedelta(days=10)).timestamp()
    os.utime(stray, (old, old))

    r = m.remove_orphan_files(t, older_than=timedelta(days=3), now=FAR_FUTURE, dry_run=True)
    assert r.orphans == [f"file://{stray}"]
    assert r.staged_kept == 2 and files[0].file_path not in r.orphans and manifest not in r.orphans

    # A staging manifest a slice is writing right now (fresh, unreadable yet): no data file goes this time.
    partial = Path(folder.removeprefix("file://")) / "slice-00001.avro"
    partial.write_bytes(b"Obj\x01 half written")
    r = m.remove_orphan_files(t, older_than=timedelta(days=3), dry_run=True)
    assert r.orphans == [] and r.data_files_held == 1
    # Left over by a slice killed long ago: no commit can use what it names (a slice hands its manifest to the
    # commit only once it is written), so the sweep goes on.
    os.utime(partial, (old, old))
    r = m.remove_orphan_files(t, older_than=timedelta(days=3))
    assert r.orphans == [f"file://{stray}"] and r.deleted == 1 and partial.exists()
    assert len(rows_of(catalog.load_table("ns.t"))) == 20


@pytest.fixture(scope="module")
def moto_s3() -> Any:
    """moto's S3 in server mode (real HTTP), for the sweep's listing and deletes on object storage."""
    import socket
    import time

    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_the_sweep_lists_and_deletes_on_object_storage_through_the_tables_own_fileio(
    moto_s3: str, tmp_path: Path
) -> None:
    """On S3 the sweep lists through the file system behind ``table.io`` and deletes the path it listed: a leftover
    goes, referenced and staged files stay, the table reads."""
    import uuid

    import boto3
    from pyiceberg.catalog.sql import SqlCatalog

    from snowberg.iceberg import staging

    bucket = f"lake-{uuid.uuid4().hex[:10]}"
    keys = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
    s3 = boto3.client("s3", endpoint_url=moto_s3, **keys)
    s3.create_bucket(Bucket=bucket)
    catalog = SqlCatalog(
        "lake",
        uri=f"sqlite:///{tmp_path}/c.db",
        warehouse=f"s3://{bucket}/wh",
        **{"s3.endpoint": moto_s3, "s3.access-key-id": "testing", "s3.secret-access-key": "testing"},
        **{"s3.region": "us-east-1"},
    )
    t = small_table(catalog, 3)
    prefix = t.location().removeprefix(f"s3://{bucket}/")
    s3.put_object(Bucket=bucket, Key=f"{prefix}/data/00000-killed-run.parquet", Body=b"x")
    staged = f"{prefix}/metadata/{staging.STAGING_DIR}/run-1/slice-00000-keys.parquet"
    s3.put_object(Bucket=bucket, Key=staged, Body=b"k")
    r = m.remove_orphan_files(t, older_than=timedelta(days=3), now=FAR_FUTURE)
    assert r.orphans == [f"s3://{bucket}/{prefix}/data/00000-killed-run.parquet"] and r.deleted == 1
    assert r.staged_kept == 1
    left = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
    assert f"{prefix}/data/00000-killed-run.parquet" not in left
    assert staged in left
    assert len(rows_of(catalog.load_table("ns.t"))) == 30


def test_the_sweep_lists_through_an_fsspec_fileio_too(tmp_path: Path) -> None:
    """A catalog configured with ``py-io-impl`` fsspec: the listing uses fsspec's file system (no second FileIO)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.io.fsspec import FsspecFileIO

    (tmp_path / "wh").mkdir()
    catalog = SqlCatalog(
        "lake",
        uri=f"sqlite:///{tmp_path}/c.db",
        warehouse=f"file://{tmp_path}/wh",
        **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"},
    )
    t = small_table(catalog, 3)
    assert isinstance(t.io, FsspecFileIO)
    stray = Path(t.location().removeprefix("file://")) / "data" / "00000-killed-run.parquet"
    stray.write_bytes(b"x")
    young = m.remove_orphan_files(t, older_than=timedelta(days=3), dry_run=True)
    assert young.orphans == [] and young.too_young == 1
    r = m.remove_orphan_files(t, older_than=timedelta(days=3), now=FAR_FUTURE)
    assert r.orphans == [f"file://{stray}"] and not stray.exists()
    assert len(rows_of(catalog.load_table("ns.t"))) == 30


# ---------------------------------------------------------------- delete files of removed data files


def _merge_on_read(t: Any, ids: list[int], i: int, note: str = "updated") -> None:
    """A merge run the way the gate commits it: position deletes for the replaced keys, then their new rows."""
    replaced = pa.table({"id": pa.array(ids, pa.int64())})
    new = pa.table(
        {
            "id": replaced.column("id"),
            "grp": pa.array([x % 3 for x in ids], pa.int64()),
            "note": pa.array([note] * len(ids), pa.string()),
        }
    )
    tx = t.transaction()
    gate.remove_replaced(tx, gate.Replacement(keys=replaced), state_props(i), io=t.io)
    tx.append(new, snapshot_properties=state_props(i))
    tx.commit_transaction()


def _commit_replacing(t: Any, rows_filter: Any, ids: list[int], i: int, run_id: str) -> Any:
    """A backfill, full refresh or propagated delete through the gate: rows matching the filter out, ``ids`` in."""
    from snowberg.iceberg.tables import arrow_schema
    from snowberg.iceberg.write import write_data_files

    tx = t.transaction()
    files: list[Any] = []
    if ids:
        schema = arrow_schema(t.schema())
        batch = pa.record_batch(
            [
                pa.array(ids, pa.int64()),
                pa.array([x % 3 for x in ids], pa.int64()),
                pa.array([f"row {x}" for x in ids], pa.string()),
            ],
            schema=schema,
        )
        files = list(write_data_files(t, tx, schema, iter([batch]), 10_000))
    return gate.commit(
        t,
        tx,
        state_props=state_props(i, run_id=run_id),
        replaced=gate.Replacement(rows=rows_filter),
        data_files=files,
        dag_id="",
    )


def test_a_backfill_range_on_a_merge_on_read_table_drops_the_delete_files_of_the_data_files_it_removed(
    catalog: Any,
) -> None:
    """The issue's case: a backfill removes a data file copy-on-write, its position delete file stays behind.

    Left behind, it made the live-row count wrong (49 for 50 rows: rollback plans, the sync's guard) and every
    compaction fail (a delete manifest it could only partly empty). The gate's commit now drops it, in the same
    commit, and the compaction runs.
    """
    from pyiceberg.expressions import LessThan

    from snowberg.iceberg import rollback

    t = small_table(catalog, 5)  # ids 0..49 in 5 files of 10
    _merge_on_read(t, [3, 14, 25, 41], 6)  # 4 delete files, one per data file, in one delete manifest
    t = catalog.load_table("ns.t")
    assert t.inspect.delete_files().num_rows == 4
    _commit_replacing(t, LessThan("id", 10), list(range(10)), 7, run_id="backfill")  # the file of ids 0..9 goes
    t = catalog.load_table("ns.t")
    before = rows_of(t)
    assert len(before) == 50 and {r["id"] for r in before} == set(range(50))

    assert rollback.plan_rollback(t, "t", before_run="backfill").rows_now == 50
    assert t.inspect.delete_files().num_rows == 3  # the removed file's delete file went with it
    r = m.compact(t, target_size=1 << 26)
    t = catalog.load_table("ns.t")
    assert r.status == "committed" and rows_of(t) == before and t.inspect.delete_files().num_rows == 0


def test_removing_every_row_of_a_merge_on_read_table_counts_zero_rows(catalog: Any) -> None:
    """Propagated deletes that empty the table: 0 rows, not minus the position deletes left behind."""
    from pyiceberg.expressions import AlwaysTrue

    from snowberg.iceberg import rollback

    t = small_table(catalog, 2)
    _merge_on_read(t, [3, 14], 3)
    _commit_replacing(catalog.load_table("ns.t"), AlwaysTrue(), [], 4, run_id="propagate")
    t = catalog.load_table("ns.t")
    assert rows_of(t) == []
    assert rollback.plan_rollback(t, "t", before_run="propagate").rows_now == 0
    # (pyiceberg's inspect.delete_files() fails on a snapshot without manifests: read the manifests directly)
    assert deletes_of(t) == set()


def test_compaction_drops_delete_files_an_older_version_left_dangling(catalog: Any) -> None:
    """Tables written before the fix hold delete files whose data files are gone: compaction removes them
    (with or without data files to rewrite), and the live-row count is right before and after."""
    from pyiceberg.expressions import LessThan, StartsWith

    from snowberg.iceberg import deletes

    t = small_table(catalog, 5)
    _merge_on_read(t, [3, 14, 25, 41], 6)
    t = catalog.load_table("ns.t")
    tx = t.transaction()
    tx.delete(LessThan("id", 20), snapshot_properties=state_props(7))  # what the gate did before: no clean-up
    tx.commit_transaction()
    t = catalog.load_table("ns.t")
    before = rows_of(t)
    assert len(before) == 30 and t.inspect.delete_files().num_rows == 4
    assert deletes.live_rows(t) == 30
    assert [f.file_path for f in deletes.dangling_delete_files(t.io, t.current_snapshot())] != []

    r = m.compact(t, target_size=1 << 26)
    t = catalog.load_table("ns.t")
    assert r.status == "committed" and r.delete_files_removed == 4
    assert rows_of(t) == before and t.inspect.delete_files().num_rows == 0 and deletes.live_rows(t) == 30

    # Only dangling delete files, nothing small to rewrite: the compaction still commits, removing them.
    t2 = small_table(catalog, 1, rows=40, name="ns.t2")
    _merge_on_read(t2, [3, 33], 2)
    t2 = catalog.load_table("ns.t2")
    tx = t2.transaction()
    tx.delete(StartsWith("note", "row"), snapshot_properties=state_props(3))  # drops the first file whole
    tx.commit_transaction()
    t2 = catalog.load_table("ns.t2")
    assert len(rows_of(t2)) == 2 and deletes.live_rows(t2) == 2
    r = m.compact(t2, target_size=1 << 26, min_input_files=2)
    t2 = catalog.load_table("ns.t2")
    assert r.status == "committed" and r.rewritten_files == 0 and r.delete_files_removed >= 1
    assert t2.inspect.delete_files().num_rows == 0 and len(rows_of(t2)) == 2


# ---------------------------------------------------------------- compaction in bounded memory


def test_compaction_rewrites_file_group_by_file_group_each_within_the_target(catalog: Any) -> None:
    """An unpartitioned table is not read as one whole: its small files are packed into groups of at most the
    target size, each read, written and verified on its own (memory follows a group, not the table)."""
    t = small_table(catalog, 20)
    before = rows_of(t)
    sizes = t.inspect.files().column("file_size_in_bytes").to_pylist()
    target = 5 * max(sizes)
    r = m.compact(t, target_size=target)
    t = catalog.load_table("ns.t")
    assert r.status == "committed" and rows_of(t) == before
    assert len(r.groups) >= 4 and all(g["bytes"] <= target for g in r.groups)
    assert sum(g["files"] for g in r.groups) == r.rewritten_files == 20
    assert r.written_files == len(r.groups) == len(t.inspect.files())
    assert r.rows_rewritten == 200


def test_a_file_with_few_deletes_is_left_alone_and_one_mostly_deleted_is_rewritten(catalog: Any) -> None:
    """A file counts for a rewrite when it is small or its deletes hide at least ``delete_ratio`` of its rows.

    Before, any file with a delete file counted as small: a merge-on-read table whose merges touch most files
    was read whole on every run.
    """
    t = small_table(catalog, 2, rows=100)  # two files of 100 rows: ids 0..99, 100..199
    target = min(t.inspect.files().column("file_size_in_bytes").to_pylist())
    big = {f.file_path for f in (task.file for task in t.scan().plan_files())}
    _merge_on_read(t, [5], 3)  # 1 % of the first file
    t = catalog.load_table("ns.t")
    r = m.compact(t, target_size=target, small_file_ratio=0.5)
    assert r.status == "nothing_to_do"

    _merge_on_read(catalog.load_table("ns.t"), list(range(100, 140)), 4)  # 40 % of the second file
    t = catalog.load_table("ns.t")
    before = rows_of(t)
    r = m.compact(t, target_size=target, small_file_ratio=0.5)
    t = catalog.load_table("ns.t")
    assert r.status == "committed" and rows_of(t) == before
    live = {task.file.file_path for task in t.scan().plan_files()}
    (first,) = big & live  # the first file stays, with its one delete
    assert t.inspect.delete_files().num_rows == 1 and deletes_of(t) == {first}


def deletes_of(t: Any) -> set[str]:
    from snowberg.iceberg import deletes

    return {
        p
        for d in deletes.LiveFiles.read(t.io, t.current_snapshot()).position_deletes
        for p in deletes.delete_targets(t.io, d)
    }


def test_compaction_verifies_and_keeps_every_column_type_value_for_value(catalog: Any) -> None:
    """The rows read from the old files (through pyiceberg's scan) and from the new file (row group by row group)
    must hash alike for every type snowberg writes, nulls included, or no compaction could ever commit."""
    import datetime as dt
    import decimal

    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        BooleanType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        ListType,
        LongType,
        NestedField,
        StringType,
        TimestampType,
        TimestamptzType,
        TimeType,
    )

    schema = Schema(
        NestedField(1, "id", DecimalType(38, 0), required=False),
        NestedField(2, "amount", DecimalType(10, 2), required=False),
        NestedField(3, "rate", DoubleType(), required=False),
        NestedField(4, "ratio", FloatType(), required=False),
        NestedField(5, "n", IntegerType(), required=False),
        NestedField(6, "big", LongType(), required=False),
        NestedField(7, "note", StringType(), required=False),
        NestedField(8, "flag", BooleanType(), required=False),
        NestedField(9, "day", DateType(), required=False),
        NestedField(10, "at", TimestampType(), required=False),
        NestedField(11, "at_tz", TimestamptzType(), required=False),
        NestedField(12, "clock", TimeType(), required=False),
        NestedField(13, "raw", BinaryType(), required=False),
        NestedField(14, "vec", ListType(15, FloatType(), element_required=False), required=False),
    )
    catalog.create_namespace("ns")
    t = catalog.create_table("ns.types", schema=schema, properties={"commit.retry.num-retries": "0"})
    arrow = t.schema().as_arrow()
    for i in range(4):
        rows = [
            {
                "id": decimal.Decimal(10**30 + i * 10 + j),
                "amount": decimal.Decimal(f"{i}{j}.5{j}"),
                "rate": (i + j) / 3,
                "ratio": float(j) / 4,
                "n": -j,
                "big": 2**40 + j,
                "note": f"row {i}-{j} é ✓",
                "flag": j % 2 == 0,
                "day": dt.date(2026, 1, 1 + j),
                "at": dt.datetime(2026, 1, 1, 12, j, 0, 123456),
                "at_tz": dt.datetime(2026, 1, 1, 12, j, tzinfo=dt.UTC),
                "clock": dt.time(12, j, 1, 500),
                "raw": bytes([i, j]),
                "vec": [float(j), 0.5],
            }
            for j in range(5)
        ] + [{k: None for k in arrow.names}]
        t.append(pa.Table.from_pylist(rows, schema=arrow), snapshot_properties=state_props(i + 1))
    t = catalog.load_table("ns.types")
    _merge_on_read_keys(t, pa.table({"id": pa.array([decimal.Decimal(10**30 + 12)], pa.decimal128(38, 0))}), 9)
    t = catalog.load_table("ns.types")
    before = sorted(map(repr, t.scan().to_arrow().to_pylist()))
    r = m.compact(t, target_size=1 << 26)
    t = catalog.load_table("ns.types")
    assert r.status == "committed" and r.rows_rewritten == 23 and r.written_files == 1
    assert sorted(map(repr, t.scan().to_arrow().to_pylist())) == before


def _merge_on_read_keys(t: Any, keys: Any, i: int) -> None:
    tx = t.transaction()
    gate.remove_replaced(tx, gate.Replacement(keys=keys), state_props(i), io=t.io)
    tx.commit_transaction()


@pytest.mark.slow
@pytest.mark.parametrize("lake", [b for b in LakeBackend if b.on_s3], indirect=True)
def test_orphan_files_on_object_storage_are_listed_and_deleted_by_their_own_paths(lake: Any) -> None:
    """S3 listings name objects ``bucket/key``: the orphan's path is ``s3://bucket/key``, not the bucket twice.

    Listing and deleting go through the table's FileIO (the REST lake's vended
    credentials included); referenced files are never touched.
    """
    cat = lake.catalog()
    t = cat.create_table(f"{lake.namespace}.t", schema=pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    t = cat.load_table(f"{lake.namespace}.t")
    stray = f"{t.location()}/data/00000-killed-run.parquet"
    with t.io.new_output(stray).create(overwrite=True) as f:
        f.write(b"not referenced")
    r = m.remove_orphan_files(t, older_than=timedelta(days=3), now=FAR_FUTURE, dry_run=True)
    assert r.orphans == [stray]
    r = m.remove_orphan_files(t, older_than=timedelta(days=3), now=FAR_FUTURE)
    assert r.deleted == 1 and not t.io.new_input(stray).exists()
    assert cat.load_table(f"{lake.namespace}.t").scan().to_arrow().num_rows == 3
