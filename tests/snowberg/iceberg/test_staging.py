"""Staged runs: which staging folders a run may still commit, judged from the table's state, and the sweep of the rest.

Runs are staged by hand here (a data file, a staging manifest naming it, a
run record), on small tables written like snowberg writes them; the mapped
slices that stage for real are ``tests/snowberg/load/test_mapped.py``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from maint_harness import rows_of, small_table, state_props

from snowberg.iceberg import maintenance as m
from snowberg.iceberg import staging, state
from snowberg.iceberg.staging import RunRecord, Verdict

AGE = timedelta(days=3)
FAR_FUTURE = datetime.now(UTC) + timedelta(days=30)
SOON = datetime.now(UTC) + timedelta(days=1)  # within the orphan age of anything the test commits


def stage(
    t: Any,
    run_id: str,
    *,
    base: str | None,
    base_run: str | None = None,
    mode: str = "incremental",
    high: str = "4",
    watermarked: bool = True,
    record: bool = True,
) -> tuple[str, str]:
    """Stage one run on ``t`` as mapped slices do: a data file, a staging manifest naming it, the run record.

    Returns (the staging folder, the data file's path).
    """
    from snowberg.iceberg.write import write_data_files

    batch = pa.record_batch({"id": pa.array([7], pa.int64()), "grp": pa.array([1], pa.int64()), "note": ["x"]})
    [data] = list(write_data_files(t, t.transaction(), batch.schema, iter([batch]), 1000))
    folder = staging.staging_location(t, run_id)
    staging.write_staging_manifest(t, f"{folder}/slice-00000-a.avro", [data])
    if record:
        identity = {state.RUN_ID: run_id, state.MODE: mode, state.WINDOW_HIGH: high}
        staging.write_run_record(
            t,
            RunRecord(
                run_id=run_id,
                dag_id="snowberg_t",
                mode=mode,
                identity=identity,
                base_watermark=base,
                base_run_id=base_run,
                watermarked=watermarked,
            ),
        )
    return folder, data.file_path


def commit(t: Any, i: int, run_id: str | None = None) -> Any:
    """A snowberg-like commit of run ``run_id`` (default ``run<i>``) moving the watermark to ``i``."""
    row = pa.table({"id": pa.array([1000 + i], pa.int64()), "grp": pa.array([0], pa.int64()), "note": ["c"]})
    t.append(row, snapshot_properties={**state_props(i, run_id), state.DAG_ID: "snowberg_t"})
    return t.refresh()


def runs_of(t: Any) -> dict[str | None, staging.StagedRun]:
    listed = list(staging.list_files(t.io, t.location()))
    return {r.record.run_id if r.record else None: r for r in staging.staged_runs(t, listed)}


def in_folder(t: Any, folder: str) -> set[str]:
    return {f.path for f in staging.list_files(t.io, folder)}


def test_a_run_planned_on_the_current_state_may_commit_and_is_kept_whatever_its_age(catalog: Any) -> None:
    t = small_table(catalog, 3)
    folder, data = stage(t, "p", base="3")
    assert runs_of(t)["p"].judgement.verdict is Verdict.PENDING
    r = m.remove_orphan_files(t, older_than=AGE, now=FAR_FUTURE + timedelta(days=365))
    assert not ({data} | in_folder(t, folder)) & set(r.orphans)
    assert r.staged_kept == 3 and [(s["run_id"], s["verdict"], s["removed"]) for s in r.staging] == [
        ("p", "pending", False)
    ]
    # A compaction or another engine's append carries or keeps the watermark: the run may still commit.
    t.append(pa.table({"id": pa.array([5], pa.int64()), "grp": pa.array([0], pa.int64()), "note": ["other"]}))
    assert runs_of(t.refresh())["p"].judgement.verdict is Verdict.PENDING


def test_an_overtaken_run_is_removed_once_that_is_older_than_the_orphan_age(catalog: Any) -> None:
    t = small_table(catalog, 3)
    folder, data = stage(t, "o", base="3")
    staged = {data} | in_folder(t, folder)
    t = commit(t, 4)  # another run moved the watermark: the gate refuses "o" from now on
    run = runs_of(t)["o"]
    assert run.judgement.verdict is Verdict.OVERTAKEN and "run4" in run.judgement.why
    assert run.judgement.since == datetime.fromtimestamp(t.current_snapshot().timestamp_ms / 1000, tz=UTC)
    kept = m.remove_orphan_files(t, older_than=AGE, now=SOON)
    assert not staged & set(kept.orphans) and kept.staged_kept == 3
    dry = m.remove_orphan_files(t, older_than=AGE, now=FAR_FUTURE, dry_run=True)
    assert staged <= set(dry.orphans) and [s["removed"] for s in dry.staging] == [False]
    gone = m.remove_orphan_files(t, older_than=AGE, now=FAR_FUTURE)
    assert staged <= set(gone.orphans) and gone.orphans[-1].endswith("/run.json")  # the record goes last
    assert [s["removed"] for s in gone.staging] == [True] and in_folder(t, folder) == set()
    assert not Path(data.removeprefix("file://")).exists() and len(rows_of(catalog.load_table("ns.t"))) == 31


def test_a_later_attempt_of_the_same_dag_run_supersedes_the_earlier(catalog: Any) -> None:
    t = small_table(catalog, 3)
    old_folder, old_data = stage(t, "scheduled__1", base="3")
    new_folder, new_data = stage(t, "scheduled__1#clear1", base="3")
    runs = runs_of(t)
    assert runs["scheduled__1"].judgement.verdict is Verdict.SUPERSEDED
    assert runs["scheduled__1#clear1"].judgement.verdict is Verdict.PENDING
    r = m.remove_orphan_files(t, older_than=AGE, now=FAR_FUTURE)
    assert {old_data} | in_folder(t, old_folder) <= set(r.orphans)
    assert not ({new_data} | in_folder(t, new_folder)) & set(r.orphans)
    # Also once the later attempt committed and removed its own staging.
    t2 = small_table(catalog, 3, name="ns.t2")
    stage(t2, "scheduled__2", base="3")
    t2 = commit(t2, 3, run_id="scheduled__2#clear2")  # the watermark did not move: only the attempt tells
    assert runs_of(t2)["scheduled__2"].judgement.verdict is Verdict.SUPERSEDED


def test_a_committed_runs_left_over_staging_goes_and_its_committed_files_stay(catalog: Any) -> None:
    t = small_table(catalog, 3)
    folder, data = stage(t, "c", base="3", high="4")
    t = commit(t, 4, run_id="c")  # the commit landed; the task died before removing the folder
    assert runs_of(t)["c"].judgement.verdict is Verdict.COMMITTED
    r = m.remove_orphan_files(t, older_than=AGE, now=FAR_FUTURE)
    assert in_folder(t, folder) == set() and data in r.orphans  # a slice attempt the commit did not use
    assert len(rows_of(catalog.load_table("ns.t"))) == 31


def test_a_backfill_is_never_overtaken(catalog: Any) -> None:
    """The gate lets a backfill commit on any watermark (it carries the table's): its staging is kept."""
    t = small_table(catalog, 3)
    stage(t, "b", base="1", mode="backfill", high="2")
    t = commit(t, 4)
    assert runs_of(t)["b"].judgement.verdict is Verdict.PENDING


def test_a_full_refresh_without_a_cursor_is_overtaken_by_another_runs_commit(catalog: Any) -> None:
    t = small_table(catalog, 3)
    stage(t, "f", base=None, base_run="run3", mode="full_refresh", high="", watermarked=False)
    t = commit(t, 3, run_id="run3")  # a commit carrying the same state (a compaction): still pending
    assert runs_of(t)["f"].judgement.verdict is Verdict.PENDING
    t = commit(t, 4)
    assert runs_of(t)["f"].judgement.verdict is Verdict.OVERTAKEN


def test_a_folder_without_a_readable_run_record_is_kept(catalog: Any) -> None:
    """Staged before run records existed, or its record is being written: nothing says it cannot commit."""
    t = small_table(catalog, 3)
    folder, data = stage(t, "legacy", base="3", record=False)
    t = commit(t, 4)
    half = Path(staging.staging_location(t, "torn").removeprefix("file://"))
    half.mkdir(parents=True)
    (half / "run.json").write_text('{"run_id": "to')
    listed = list(staging.list_files(t.io, t.location()))
    assert [r.judgement.verdict for r in staging.staged_runs(t, listed)] == [Verdict.UNKNOWN, Verdict.UNKNOWN]
    r = m.remove_orphan_files(t, older_than=AGE, now=FAR_FUTURE)
    assert not ({data} | in_folder(t, folder)) & set(r.orphans)


def test_without_modification_times_the_tables_time_decides(catalog: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Object storage whose listing gives no times: an abandoned run still goes (the table dates the evidence);
    a pending run and any other file of unknown age stay."""
    t = small_table(catalog, 3)
    gone_folder, gone_data = stage(t, "o", base="3")
    gone = {gone_data} | in_folder(t, gone_folder)
    t = commit(t, 4)
    kept_folder, kept_data = stage(t, "p", base="4")
    stray = Path(t.location().removeprefix("file://")) / "data" / "stray.parquet"
    stray.write_bytes(b"unreferenced")
    real = staging.list_files

    def no_times(io: Any, location: str) -> Any:
        for f in real(io, location):
            yield staging.ListedFile(path=f.path, modified=None, size=f.size)

    monkeypatch.setattr(staging, "list_files", no_times)
    soon = m.remove_orphan_files(t, older_than=AGE, now=SOON)
    assert soon.orphans == []
    r = m.remove_orphan_files(t, older_than=AGE, now=FAR_FUTURE)
    assert set(r.orphans) == gone
    assert not Path(gone_data.removeprefix("file://")).exists() and stray.exists()
    assert Path(kept_data.removeprefix("file://")).exists() and in_folder(t, kept_folder)


def test_a_folder_written_to_after_the_cutoff_is_kept(catalog: Any) -> None:
    """A task of the abandoned attempt still writing (a zombie): nothing in the folder may be younger than the age."""
    t = small_table(catalog, 3)
    folder, data = stage(t, "o", base="3")
    t = commit(t, 4)
    late = Path(folder.removeprefix("file://")) / "slice-00001-b.avro"
    late.write_bytes(b"Obj\x01 being written")
    future = (FAR_FUTURE - timedelta(days=1)).timestamp()
    os.utime(late, (future, future))
    r = m.remove_orphan_files(t, older_than=AGE, now=FAR_FUTURE)
    assert not ({data} | in_folder(t, folder)) & set(r.orphans)
    assert [s["verdict"] for s in r.staging] == ["overtaken"] and r.data_files_held == 0


def test_inspect_lists_staged_runs_with_their_verdict(catalog: Any) -> None:
    from snowberg.iceberg import inspect

    t = small_table(catalog, 3)
    stage(t, "o", base="3")
    t = commit(t, 4)
    stage(t, "p", base="4")
    rows = inspect.metadata_rows(t, "staging")
    assert [(r["run_id"], r["verdict"], r["files"], r["data_files"]) for r in rows] == [
        ("o", "overtaken", 2, 1),
        ("p", "pending", 2, 1),
    ]
    assert all(r["bytes"] > 0 for r in rows) and "run4" in rows[0]["why"]
    text = inspect.render_metadata(rows, "staging")
    assert "overtaken" in text and "pending" in text
    assert '"verdict": "overtaken"' in inspect.to_json(rows)


# ---------------------------------------------------------------- one folder per run, and a commit removes only its own

LONG = "backfill__2026-11-30T00:00:00+00:00__" + "x" * 40  # longer than the folder name's readable prefix


def test_run_ids_sharing_a_long_prefix_get_separate_staging_folders(catalog: Any) -> None:
    """The folder name keeps a readable prefix of the run id and a hash of all of it: two runs whose ids differ
    only past the prefix never share a folder (the sweep would judge one run by the other's record)."""
    t = small_table(catalog, 3)
    a, b = f"{LONG}#clear1", f"{LONG}#clear2"
    assert staging.staging_location(t, a) != staging.staging_location(t, b)
    assert staging.staging_location(t, a) == staging.staging_location(t, a)  # a run finds its folder again
    stage(t, a, base="3", mode="backfill")
    stage(t, f"{LONG}-other", base="3", mode="backfill")
    runs = runs_of(t)
    assert set(runs) == {a, f"{LONG}-other"} and all(len(r.files) == 2 for r in runs.values())


def test_a_commit_removes_only_its_own_runs_staging(catalog: Any) -> None:
    t = small_table(catalog, 3)
    mine, _ = stage(t, f"{LONG}-mine", base="3")
    other, other_data = stage(t, f"{LONG}-other", base="3")
    next_run, _ = stage(t, "run", base="3")  # a run id that is a prefix of another's folder name
    stage(t, "run2", base="3")
    assert staging.remove_run_staging(t, f"{LONG}-mine") == 2
    assert in_folder(t, mine) == set()
    assert len(in_folder(t, other)) == 2 and Path(other_data.removeprefix("file://")).exists()
    assert staging.remove_run_staging(t, "run") == 2
    assert in_folder(t, next_run) == set() and len(runs_of(t)["run2"].files) == 2


def test_without_modification_times_a_staging_manifest_being_written_holds_the_files_and_unknown_ages_stay(
    catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Object storage whose listing gives no times: a pending run's staging manifest that cannot be read yet may
    be being written and name any file, so the data file an abandoned run named is held this time (the
    abandoned folder itself goes); a file of unknown age that nothing dates is never deleted."""
    t = small_table(catalog, 3)
    gone_folder, gone_data = stage(t, "o", base="3")
    t = commit(t, 4)
    kept_folder, kept_data = stage(t, "p", base="4")
    partial = Path(kept_folder.removeprefix("file://")) / "slice-00001-b.avro"
    partial.write_bytes(b"Obj\x01 being written")
    stray = Path(t.location().removeprefix("file://")) / "data" / "stray.parquet"
    stray.write_bytes(b"unreferenced")
    abandoned_folder = in_folder(t, gone_folder)  # its manifest and record
    real = staging.list_files

    def no_times(io: Any, location: str) -> Any:
        for f in real(io, location):
            yield staging.ListedFile(path=f.path, modified=None, size=f.size)

    monkeypatch.setattr(staging, "list_files", no_times)
    r = m.remove_orphan_files(t, older_than=AGE, now=FAR_FUTURE)
    assert r.data_files_held == 1 and set(r.orphans) == abandoned_folder
    assert Path(gone_data.removeprefix("file://")).exists() and stray.exists()
    assert Path(kept_data.removeprefix("file://")).exists() and partial.exists()
    assert [(s["run_id"], s["removed"]) for s in r.staging] == [("o", True), ("p", False)]


def test_a_run_staged_long_ago_and_abandoned_just_now_is_kept_for_the_orphan_age(catalog: Any) -> None:
    """Old files are not enough: the table must have shown the run abandoned for the orphan age (a rollback in
    that time could make its commit possible again)."""
    t = small_table(catalog, 3)
    folder, data = stage(t, "o", base="3")
    old = (datetime.now(UTC) - timedelta(days=10)).timestamp()
    for path in in_folder(t, folder) | {data}:
        os.utime(path.removeprefix("file://"), (old, old))
    t = commit(t, 4)
    r = m.remove_orphan_files(t, older_than=AGE)
    assert not ({data} | in_folder(t, folder)) & set(r.orphans)
    assert [(s["verdict"], s["removed"]) for s in r.staging] == [("overtaken", False)]
