"""Mapped slices: one window written by many workers, committed once.

What these prove
* At the library level: one commit for all slices; a retried slice's first
  files are never committed; a commit re-run after it landed appends nothing;
  a commit that failed is re-run once; a slice that handed in no result (a
  task marked success by hand) fails the commit with nothing committed; a file
  already in the table is refused; a schema change between plan and slice is
  refused; merges replace updated keys; nothing new → no slice tasks and no
  commit; a backfill commits after an incremental run without moving the
  watermark; a first load checks key uniqueness in Snowflake.
* In Airflow (slow): ``dag.test()`` of plan → plan_slices → load_slice
  (mapped) → commit → publish with one slice failing on its first try: only
  that slice is retried, and the table holds each row once; a second run with
  nothing new skips the (zero-length) mapped task, and its commit and publish
  succeed without a commit to the table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from orders_data import lake_rows, make_orders, plan_window, snowberg_snapshots, table_cfg

from snowberg.core.window import Window

REPO = Path(__file__).resolve().parents[3]


# ---------------------------------------------------------------------------
# mapped slices, library level


def _mapped(cfg: Any, conn: Any, catalog: Any, run_id: str, max_rows: int) -> tuple[Window, list[dict[str, Any]]]:
    from snowberg.load.mapped import prepare_slices

    w = plan_window(cfg, conn, catalog, run_id)
    return w, prepare_slices(cfg, conn, catalog, w, max_rows=max_rows)


def test_mapped_slices_commit_once_and_retries_append_nothing(sfdb: Any, catalog: Any, monkeypatch: Any) -> None:
    from snowberg.load.mapped import SliceResult, commit_slices, read_staging_manifest, write_slice

    src = make_orders(sfdb, 9_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w, tasks = _mapped(cfg, sfdb.conn, catalog, "m1", 3_000)
    assert len(tasks) >= 3 and catalog.load_table("shop.orders").current_snapshot() is None
    results = [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks]
    # slice 0 "fails after writing" and is retried: the first attempt's files must never be committed
    first_attempt = {
        f.file_path for f in read_staging_manifest(catalog.load_table("shop.orders"), SliceResult.from_dict(results[0]))
    }
    retried = write_slice(cfg, sfdb.conn, catalog, tasks[0])
    assert retried["manifest_path"] != results[0]["manifest_path"]
    results[0] = retried
    assert catalog.load_table("shop.orders").current_snapshot() is None  # slices commit nothing

    # the commit fails before it lands, then is re-run
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:before_commit")
    with pytest.raises(RuntimeError, match="injected failure"):
        commit_slices(cfg, catalog, w, results)
    monkeypatch.delenv("SNOWBERG_FAULT")
    assert catalog.load_table("shop.orders").current_snapshot() is None
    # lands, but the task dies right after: the re-run finds the commit
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:after_commit")
    with pytest.raises(RuntimeError, match="injected failure"):
        commit_slices(cfg, catalog, w, results)
    monkeypatch.delenv("SNOWBERG_FAULT")
    again = commit_slices(cfg, catalog, w, results)
    assert again["status"] == "already_committed"

    t = lake_rows(catalog)
    ids = t.column("order_id").to_pylist()
    assert len(ids) == 9_000 and len(set(ids)) == 9_000
    snaps = snowberg_snapshots(catalog)
    assert len(snaps) == 1 and snaps[0].summary.additional_properties["snowberg.watermark"] == w.new_watermark
    assert snaps[0].summary.additional_properties["snowberg.rows"] == "9000"
    committed = {f.file.file_path for f in catalog.load_table("shop.orders").scan().plan_files()}
    assert len(committed) == sum(r["data_files"] for r in results)
    assert first_attempt and not (first_attempt & committed)


def test_commit_requires_every_slice_and_commits_nothing_without_one(sfdb: Any, catalog: Any) -> None:
    """A slice task marked success by hand pushes no result: the commit fails and nothing is committed."""
    from snowberg.load.mapped import MissingSliceError, commit_slices, write_slice

    src = make_orders(sfdb, 6_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w, tasks = _mapped(cfg, sfdb.conn, catalog, "m1", 2_000)
    assert len(tasks) >= 3
    results = [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks]
    missing = results.pop(1)
    with pytest.raises(MissingSliceError, match=r"slice index \[1\]"):
        commit_slices(cfg, catalog, w, results)
    with pytest.raises(MissingSliceError, match="no slice handed in a result"):
        commit_slices(cfg, catalog, w, [])
    assert catalog.load_table("shop.orders").current_snapshot() is None
    # once the slice is written (its task cleared and re-run), the run commits every row once
    results.insert(1, missing)
    assert commit_slices(cfg, catalog, w, results)["rows"] == 6_000
    ids = lake_rows(catalog).column("order_id").to_pylist()
    assert len(ids) == len(set(ids)) == 6_000


def test_mapped_idle_runs_with_lookback_commit_nothing(sfdb: Any, catalog: Any) -> None:
    """The slices re-read the lookback range; rows the lake already holds make no commit and leave no file."""
    from snowberg.load.mapped import commit_slices, write_slice

    src = make_orders(sfdb, 3_000)
    cfg = table_cfg(src, number_as_long=["order_id"], cursor={"column": "updated_at", "lookback": "2d"})

    def run(run_id: str) -> tuple[Window, dict[str, Any]]:
        w, tasks = _mapped(cfg, sfdb.conn, catalog, run_id, 1_000)
        return w, commit_slices(cfg, catalog, w, [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks])

    _, r1 = run("m1")
    assert r1["status"] == "committed" and r1["rows"] == 3_000
    table = catalog.load_table("shop.orders")
    n_snaps, live_files = len(list(table.snapshots())), {f.file.file_path for f in table.scan().plan_files()}
    location = Path(table.metadata.location.removeprefix("file://"))
    files_before = sorted(p for p in location.rglob("*.parquet"))
    w2, r2 = run("m2")
    assert (w2.rows_in_window or 0) > 0  # the plan counts the lookback range ...
    assert r2["status"] == "nothing_new"  # ... but nothing in it is new
    table = catalog.load_table("shop.orders")
    assert len(list(table.snapshots())) == n_snaps
    assert {f.file.file_path for f in table.scan().plan_files()} == live_files
    assert sorted(p for p in location.rglob("*.parquet")) == files_before  # the slices' files are gone again
    # a late row inside the lookback is still loaded, once
    sfdb.sql(f"UPDATE {src} SET CHANNEL = 'late' WHERE ORDER_ID = 7")
    _, r3 = run("m3")
    assert r3["status"] == "committed"
    rows = lake_rows(catalog)
    ids = rows.column("order_id").to_pylist()
    assert len(ids) == len(set(ids)) == 3_000


def test_commit_refuses_files_already_in_the_table(sfdb: Any, catalog: Any) -> None:
    from snowberg.load.mapped import SliceResult, commit_data_files, read_staging_manifest, write_slice

    src = make_orders(sfdb, 2_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w, tasks = _mapped(cfg, sfdb.conn, catalog, "m1", 100_000)
    res = SliceResult.from_dict(write_slice(cfg, sfdb.conn, catalog, tasks[0]))
    table = catalog.load_table("shop.orders")
    files = read_staging_manifest(table, res)
    commit_data_files(cfg, table, w, files, res.rows)
    # the same files under another run id (e.g. a hand-made re-run): refused, nothing appended
    from dataclasses import replace

    w2 = replace(w, run_id="m2", base_watermark=w.new_watermark, base_snapshot_id=None)
    with pytest.raises(RuntimeError, match="already in the table"):
        commit_data_files(cfg, catalog.load_table("shop.orders"), w2, files, res.rows)
    assert lake_rows(catalog).num_rows == 2_000


def _staged_slices(sfdb: Any, catalog: Any) -> tuple[Any, Window, list[dict[str, Any]], set[str]]:
    """Run m1 plans 6,000 rows as 3 slices, which write their files: (config, window, results, staged data files)."""
    from snowberg.load.mapped import SliceResult, read_staging_manifest, write_slice

    src = make_orders(sfdb, 6_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w, tasks = _mapped(cfg, sfdb.conn, catalog, "m1", 2_000)
    results = [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks]
    table = catalog.load_table("shop.orders")
    staged = {f.file_path for r in results for f in read_staging_manifest(table, SliceResult.from_dict(r))}
    return cfg, w, results, staged


def test_a_slice_commit_days_after_an_orphan_sweep_still_finds_every_staged_file(sfdb: Any, catalog: Any) -> None:
    """A failed slice tells users to clear and retry it, so the commit may come days after the other slices wrote.

    The sweep in between (run with a clock four days ahead, the default ``orphan_age`` of 3 days) must keep the
    staging manifests, the key files and every data file a staging manifest names: none is referenced by the table
    yet, all look old. The delayed commit then lands and the table reads every row.
    """
    from datetime import UTC, datetime, timedelta

    from snowberg.iceberg import maintenance as m
    from snowberg.load.mapped import commit_slices

    cfg, w, results, staged = _staged_slices(sfdb, catalog)
    table = catalog.load_table("shop.orders")
    staging = {p for r in results for p in (r["manifest_path"], r["keys_path"]) if p}
    assert len(staged) >= 3 and staging

    swept = m.remove_orphan_files(table, older_than=timedelta(days=3), now=datetime.now(UTC) + timedelta(days=4))
    assert not (set(swept.orphans) & (staged | staging)), "the sweep deleted files a pending commit needs"
    assert swept.staged_kept >= len(staged) + len(staging)

    assert commit_slices(cfg, catalog, w, results)["rows"] == 6_000
    ids = lake_rows(catalog).column("order_id").to_pylist()
    assert len(ids) == len(set(ids)) == 6_000


def test_the_staging_of_a_run_that_can_no_longer_commit_is_swept_once_older_than_the_orphan_age(
    sfdb: Any, catalog: Any
) -> None:
    """Another run commits first: the slice commit is refused, and nothing will ever commit the staged files.

    The old sweep kept everything under the staging folder and every file a staging manifest names, whatever
    its age: a sweep with the clock a year ahead deleted none of them. Once the table's state shows the run
    cannot commit (here: another run moved the watermark it was planned on) and that is older than the
    orphan age, the sweep removes its staging folder and the data files only it named; before, it keeps them.
    """
    from datetime import UTC, datetime, timedelta

    from snowberg.iceberg import maintenance as m
    from snowberg.iceberg import staging
    from snowberg.iceberg.state import ConcurrentCommitError
    from snowberg.load.extract import load_window
    from snowberg.load.mapped import commit_slices

    cfg, w, results, staged = _staged_slices(sfdb, catalog)
    table = catalog.load_table("shop.orders")
    folder = staging.staging_location(table, "m1")
    in_folder = {f.path for f in staging.list_files(table.io, folder)}
    assert len(staged) >= 3 and len(in_folder) >= 3

    w2 = plan_window(cfg, sfdb.conn, catalog, "m2")  # planned on the same (empty) state …
    assert load_window(cfg, sfdb.conn, catalog, w2).status == "committed"  # … and committed first
    with pytest.raises(ConcurrentCommitError):
        commit_slices(cfg, catalog, w, results)

    table = catalog.load_table("shop.orders")
    soon = m.remove_orphan_files(table, older_than=timedelta(days=3), now=datetime.now(UTC) + timedelta(days=1))
    assert not (set(soon.orphans) & (staged | in_folder)), "removed before the orphan age"
    later = m.remove_orphan_files(table, older_than=timedelta(days=3), now=datetime.now(UTC) + timedelta(days=365))
    assert staged | in_folder <= set(later.orphans), f"kept {len((staged | in_folder) - set(later.orphans))}"
    assert list(staging.list_files(table.io, folder)) == []
    [run] = [r for r in later.staging if r["run_id"] == "m1"]
    assert (run["verdict"], run["removed"]) == ("overtaken", True) and "m2" in run["why"]
    ids = lake_rows(catalog).column("order_id").to_pylist()
    assert len(ids) == len(set(ids)) == 6_000


def test_a_slice_commit_refuses_staged_files_that_no_longer_exist(sfdb: Any, catalog: Any) -> None:
    """A staged data file (or a staging manifest) removed before the commit fails the run; nothing is committed.

    Committing it would put a reference to a missing file into the table: every later read would fail.
    """
    import os

    from snowberg.load.mapped import SliceResult, commit_slices, read_staging_manifest, write_slice

    src = make_orders(sfdb, 4_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w, tasks = _mapped(cfg, sfdb.conn, catalog, "m1", 2_000)
    results = [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks]
    table = catalog.load_table("shop.orders")
    gone = read_staging_manifest(table, SliceResult.from_dict(results[-1]))[0].file_path
    os.remove(gone.removeprefix("file://"))  # e.g. a sweep with a short orphan_age override
    with pytest.raises(RuntimeError, match=r"no longer exist.*Nothing was committed") as exc:
        commit_slices(cfg, catalog, w, results)
    assert gone in str(exc.value)
    assert catalog.load_table("shop.orders").current_snapshot() is None

    os.remove(results[0]["manifest_path"].removeprefix("file://"))
    with pytest.raises(RuntimeError, match=r"staging manifest of slice 0 .* is gone.*Nothing was committed"):
        commit_slices(cfg, catalog, w, results)
    assert catalog.load_table("shop.orders").current_snapshot() is None


def test_slice_refuses_a_schema_changed_after_planning(sfdb: Any, catalog: Any) -> None:
    from snowberg.load.mapped import write_slice

    src = make_orders(sfdb, 1_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    _, tasks = _mapped(cfg, sfdb.conn, catalog, "m1", 400)
    sfdb.sql(f"ALTER TABLE {src} ADD COLUMN NOTE VARCHAR(10)")
    with pytest.raises(RuntimeError, match="re-plan"):
        write_slice(cfg, sfdb.conn, catalog, tasks[0])


def test_mapped_merge_replaces_updated_keys_and_nothing_new_has_no_slices(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    from snowberg.load.mapped import commit_slices, write_slice
    from snowberg.load.publish import publish

    src = make_orders(sfdb, 6_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w, tasks = _mapped(cfg, sfdb.conn, catalog, "m1", 2_000)
    commit_slices(cfg, catalog, w, [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks])
    publish(cfg, catalog, w, variables)
    # 2,500 updates, microseconds apart (one UPDATE with one timestamp would be a single tie: one slice)
    sfdb.sql(
        f"UPDATE {src} SET AMOUNT = 0, UPDATED_AT = DATEADD(microsecond, -ORDER_ID, "
        "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)) WHERE ORDER_ID <= 2500"
    )
    time.sleep(0.01)
    w2, tasks2 = _mapped(cfg, sfdb.conn, catalog, "m2", 1_000)
    assert len(tasks2) >= 2
    results = [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks2]
    assert all(r["keys_path"] for r in results)
    out = commit_slices(cfg, catalog, w2, results)
    assert out["rows"] == 2_500
    publish(cfg, catalog, w2, variables)
    t = lake_rows(catalog)
    ids = t.column("order_id").to_pylist()
    assert len(ids) == 6_000 and len(set(ids)) == 6_000
    assert sum(1 for a in t.column("amount").to_pylist() if a == 0) == 2_500
    # nothing new: no slice task, the commit records nothing
    w3, tasks3 = _mapped(cfg, sfdb.conn, catalog, "m3", 1_000)
    assert tasks3 == []
    assert commit_slices(cfg, catalog, w3, [])["status"] == "nothing_new"
    # (a merge commit is one catalog commit holding two snapshots: the copy-on-write delete and the append)
    assert {s.summary.additional_properties["snowberg.run-id"] for s in snowberg_snapshots(catalog)} == {"m1", "m2"}


def test_mapped_first_load_checks_key_uniqueness_in_snowflake(sfdb: Any, catalog: Any) -> None:
    from snowberg.load.extract import DuplicateKeyError

    src = make_orders(sfdb, 1_000)
    sfdb.sql(f"UPDATE {src} SET ORDER_ID = 1 WHERE ORDER_ID <= 3")
    cfg = table_cfg(src, number_as_long=["order_id"])
    with pytest.raises(DuplicateKeyError, match="not unique"):
        _mapped(cfg, sfdb.conn, catalog, "m1", 400)


def test_mapped_backfill_commits_after_an_incremental_run_without_moving_the_watermark(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    from snowberg.load.extract import load_window
    from snowberg.load.mapped import commit_slices, prepare_slices, write_slice
    from snowberg.load.publish import publish

    src = make_orders(sfdb, 4_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w1 = plan_window(cfg, sfdb.conn, catalog, "r1")
    load_window(cfg, sfdb.conn, catalog, w1)
    publish(cfg, catalog, w1, variables)
    # a backfill of an old range is planned and its slices written …
    wb = plan_window(
        cfg, sfdb.conn, catalog, "b1", mode="backfill", start="2026-09-30 18:00:00", end="2026-09-30 23:00:00"
    )
    assert wb.rows_in_window and wb.rows_in_window > 1_000
    tasks = prepare_slices(cfg, sfdb.conn, catalog, wb, max_rows=700)
    assert len(tasks) >= 2
    results = [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks]
    # … while an incremental run commits
    sfdb.sql(
        f"UPDATE {src} SET AMOUNT = 0, "
        "UPDATED_AT = CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ) "
        "WHERE ORDER_ID <= 10"
    )
    time.sleep(0.01)
    w2 = plan_window(cfg, sfdb.conn, catalog, "r2")
    load_window(cfg, sfdb.conn, catalog, w2)
    out = commit_slices(cfg, catalog, wb, results)
    assert out["status"] == "committed" and out["rows"] == wb.rows_in_window
    snap = catalog.load_table("shop.orders").current_snapshot()
    assert snap.summary.additional_properties["snowberg.watermark"] == w2.new_watermark  # not moved back
    t = lake_rows(catalog)
    ids = t.column("order_id").to_pylist()
    assert len(ids) == 4_000 and len(set(ids)) == 4_000


# ---------------------------------------------------------------------------
# mapped slices in Airflow (slow): dag.test() with one slice failing once

DAG_SCRIPT = """
import json, os
from datetime import timedelta
import pendulum
from airflow.sdk import DAG
from snowberg.config.table_config import parse_config
from snowberg.airflow.operators.arguments import operator_arguments
from snowberg.airflow.operators.incremental import SnowbergPlanOperator, SnowbergPublishOperator
from snowberg.airflow.operators.scale import SnowbergSliceLoadOperator, sliced_load

cfg = parse_config({"tables": [json.loads(os.environ["E2E_TABLE"])]}).tables[0]

# Slice 1 fails on its first try. (dag.test() imports this file a second time to serialize the DAG: patch once.)
if not getattr(SnowbergSliceLoadOperator.execute, "flaky", False):
    _execute = SnowbergSliceLoadOperator.execute

    def flaky(self, context):
        ti = context["ti"]
        with open(os.environ["E2E_ATTEMPTS"], "a") as f:
            f.write(json.dumps([ti.map_index, ti.try_number]) + "\\n")
        if ti.map_index == 1 and ti.try_number == 1:
            raise RuntimeError("injected: slice 1 lost its worker")
        return _execute(self, context)

    flaky.flaky = True
    SnowbergSliceLoadOperator.execute = flaky

with DAG("snowberg_sliced", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
         default_args={"retries": 1, "retry_delay": timedelta(seconds=0)}) as dag:
    plan = SnowbergPlanOperator(task_id="plan", **operator_arguments(SnowbergPlanOperator, cfg))
    commit = sliced_load(cfg, plan, max_rows_per_slice=int(os.environ["E2E_SLICE_ROWS"]), max_parallel=2)
    publish = SnowbergPublishOperator(
        task_id="publish", window=plan.output, **operator_arguments(SnowbergPublishOperator, cfg)
    )
    commit >> publish

if __name__ == "__main__":  # dag.test() parses this file again to serialize the DAG
    first = dag.test()
    second = dag.test()  # nothing new: the run ends after the plan; every later task is skipped
    states = {ti.task_id: str(ti.state) for ti in second.get_task_instances()}
    print("E2E_RESULT " + json.dumps({"state": str(first.state), "second": str(second.state), "second_tis": states}))
"""


@pytest.mark.slow
def test_dag_mapped_slices_retry_alone_and_commit_once(fakesnow_server: Any, sfdb: Any, tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    from snowberg.local.stack import snowflake_connection_uri

    src = make_orders(sfdb, 6_000)
    home = tmp_path / "airflow-home"
    home.mkdir()
    (tmp_path / "wh").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYICEBERG", "SNOWBERG_FAULT"))}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(tmp_path / "dags"),
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        AIRFLOW_CONN_SNOWFLAKE_DEFAULT=snowflake_connection_uri(fakesnow_server.port, database=sfdb.name),
        PYICEBERG_CATALOG__LAKE__TYPE="sql",
        PYICEBERG_CATALOG__LAKE__URI=f"sqlite:///{tmp_path}/lake.db",
        PYICEBERG_CATALOG__LAKE__WAREHOUSE=f"file://{tmp_path}/wh",
        E2E_TABLE=json.dumps(
            {
                "name": "orders",
                "source": {"table": src},
                "target": "shop.orders",
                "cursor": {"column": "updated_at"},
                "primary_key": ["order_id"],
                "number_as_long": ["order_id"],
            }
        ),
        E2E_SLICE_ROWS="2000",
        E2E_ATTEMPTS=str(tmp_path / "attempts.jsonl"),
    )
    (tmp_path / "dags").mkdir()
    script = tmp_path / "dags" / "sliced_dag.py"
    script.write_text(DAG_SCRIPT)
    airflow = str(Path(sys.executable).with_name("airflow"))
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    t = time.monotonic()
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - t
    (tmp_path / "dag-test.log").write_text(run.stdout + run.stderr)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("E2E_RESULT ")), None)
    assert line, run.stdout[-3000:] + run.stderr[-6000:]
    res = json.loads(line[len("E2E_RESULT ") :])
    attempts = [json.loads(x) for x in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    print(f"dag.test() of the mapped-slice DAG: {elapsed:.1f}s; slice attempts (map index, try) {attempts}")
    assert res["state"].endswith("success"), res
    assert res["second"].endswith("success"), res
    # An idle run ends after the plan (no slice plan, slice, commit or publish task starts).
    second_tis = res["second_tis"]
    assert second_tis.pop("plan").endswith("success"), res
    assert second_tis and all(state.endswith("skipped") for state in second_tis.values()), res
    tries: dict[int, list[int]] = {}
    for idx, n in attempts:
        tries.setdefault(idx, []).append(n)
    assert len(tries) >= 3
    assert tries[1] == [1, 2]  # the failed slice ran again…
    assert all(v == [1] for k, v in tries.items() if k != 1)  # …and only it

    cat = SqlCatalog("lake", uri=f"sqlite:///{tmp_path}/lake.db", warehouse=f"file://{tmp_path}/wh")
    t_ = cat.load_table("shop.orders")
    ids = t_.scan().to_arrow().column("order_id").to_pylist()
    assert len(ids) == 6_000 and len(set(ids)) == 6_000
    snaps = [s for s in t_.snapshots() if s.summary and "snowberg.watermark" in s.summary.additional_properties]
    assert len(snaps) == 1  # the second run committed nothing
