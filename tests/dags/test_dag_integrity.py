"""Every DAG file imports cleanly, fast, offline, and carries what operators of it need."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

DAGS = Path(__file__).resolve().parents[2] / "dags"
DAG_FILES = sorted(p for p in DAGS.glob("*.py") if not p.name.startswith("_"))


class NetworkBlocked(RuntimeError):
    pass


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise NetworkBlocked(f"network access at DAG parse time: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


@pytest.fixture(scope="module")
def warm_airflow() -> None:
    # Importing Airflow itself is not the DAG's cost; pay it once.
    import airflow.sdk
    from airflow.dag_processing.dagbag import DagBag  # noqa: F401

    # The first Asset a process builds makes Airflow discover the providers' asset URI
    # handlers (importing the Amazon provider's S3 hook, boto3): Airflow's cost, once per
    # process, whichever DAG file happens to be parsed first.
    airflow.sdk.Asset(uri="s3://warm/up")


@pytest.mark.parametrize("path", DAG_FILES, ids=[p.name for p in DAG_FILES])
def test_dag_file_imports_offline_under_a_second_per_dag(path: Path, no_network: None, warm_airflow: None) -> None:
    from airflow.dag_processing.dagbag import DagBag

    started = time.perf_counter()
    bag = DagBag(dag_folder=str(path))
    elapsed = time.perf_counter() - started
    assert not bag.import_errors, bag.import_errors
    assert bag.dags, f"{path.name} defines no DAG"
    per_dag = elapsed / len(bag.dags)
    assert per_dag < 1.0, f"{path.name}: {per_dag:.2f} s per DAG"


def _all_dags() -> list[Any]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert not bag.import_errors, bag.import_errors
    return list(bag.dags.values())


def test_every_dag_has_tags_retries_owner_and_docs() -> None:
    dags = _all_dags()
    assert dags
    for dag in dags:
        assert dag.tags, f"{dag.dag_id}: no tags"
        assert dag.doc_md and len(dag.doc_md) > 40, f"{dag.dag_id}: no doc_md"
        assert dag.default_args.get("retries", 0) >= 1, f"{dag.dag_id}: no retries in default_args"
        for task in dag.tasks:
            # A check may opt out of retries on purpose (a breach should alert at once).
            assert task.retries >= 1 or "check" in task.task_id or "staleness" in task.task_id, (
                f"{dag.dag_id}.{task.task_id}: no retries"
            )
            assert task.owner and task.owner != "airflow", f"{dag.dag_id}.{task.task_id}: default owner"


def test_table_dags_wire_plan_load_publish() -> None:
    dags = {d.dag_id: d for d in _all_dags()}
    dag = dags["snowberg_demo_orders"]
    assert dag.max_active_runs == 1
    assert {t.task_id for t in dag.tasks} >= {"plan", "load", "publish"}
    assert dag.get_task("load").upstream_task_ids == {"plan"}
    assert "publish" in dag.get_task("load").downstream_task_ids
    assert set(dag.params) >= {"window_start", "window_end", "full_refresh", "dry_run"}


def test_bad_entry_gets_a_dag_that_fails_with_its_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.dag_processing.dagbag import DagBag

    bad = tmp_path / "tables.yaml"
    bad.write_text(
        "tables:\n  - {name: broken, source: {table: D.S.T}, target: n.t, cursor: {column: u}, "
        "partition_by: ['week(u)']}\n"
    )
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(bad))
    bag = DagBag(dag_folder=str(DAGS / "snowberg_tables.py"))
    assert not bag.import_errors, bag.import_errors
    err = bag.dags["snowberg_broken"].get_task("config_error").error
    assert "table 'broken'" in err and "field 'partition_by.0'" in err and "bad partition transform" in err


def _tables_bag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str) -> Any:
    """The DAG file parsed with the tables config ``config`` (YAML text); it must import cleanly."""
    from airflow.dag_processing.dagbag import DagBag

    cfg = tmp_path / "tables.yaml"
    cfg.write_text(config)
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(cfg))
    bag = DagBag(dag_folder=str(DAGS / "snowberg_tables.py"))
    assert not bag.import_errors, bag.import_errors
    return bag


def test_stream_tables_get_a_capture_dag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bag = _tables_bag(
        tmp_path,
        monkeypatch,
        "tables:\n"
        "  - {name: cdc, source: {table: D.S.T}, target: n.cdc, primary_key: [id], "
        "stream: {name: D.S.T_STREAM, create: true}}\n",
    )
    dag = bag.dags["snowberg_cdc"]
    assert {"consume", "load", "cleanup", "stream_staleness"} <= {t.task_id for t in dag.tasks}
    assert "recover_stale_stream" in dag.params
    assert "snowberg_cdc__checks" in bag.dags


def test_scale_out_and_unload_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.dag_processing.dagbag import DagBag

    cfg = tmp_path / "tables.yaml"
    cfg.write_text(
        "tables:\n"
        "  - {name: big, source: {table: D.S.T}, target: n.big, cursor: {column: u}, scale_out: true,\n"
        "     max_parallel_slices: 4, unload: {stage: D.S.LAKE_STAGE, stage_url: 's3://lake/unload/'}}\n"
        "  - {name: bad, source: {table: D.S.T}, target: n.bad, cursor: {column: u}, "
        "unload: {stage: 'x;y', stage_url: s}}\n"
    )
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(cfg))
    bag = DagBag(dag_folder=str(DAGS / "snowberg_tables.py"))
    assert not bag.import_errors, bag.import_errors
    assert "table 'bad': field 'unload.stage'" in bag.dags["snowberg_bad"].get_task("config_error").error
    cfg.write_text(cfg.read_text().split("  - {name: bad")[0])
    bag = DagBag(dag_folder=str(DAGS / "snowberg_tables.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["snowberg_big"]
    assert {"plan", "plan_slices", "load_slice", "commit", "publish"} <= {t.task_id for t in dag.tasks}
    assert "commit" in dag.get_task("publish").upstream_task_ids
    unload = bag.dags["snowberg_big__unload"]
    assert unload.schedule is None or str(unload.timetable.summary) in ("None", "")
    assert [t.task_id for t in unload.topological_sort()] == ["plan", "unload", "publish"]


def test_watched_tables_parse_offline_with_their_watcher_and_keep_manual_runs_and_the_trigger_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: None, warm_airflow: None
) -> None:
    """A watched table, a watched cursor-less table and a watched stream table (docs/event-driven.md)."""
    bag = _tables_bag(
        tmp_path,
        monkeypatch,
        "defaults: {watch: {poll_interval: 30s}}\n"
        "tables:\n"
        "  - {name: orders, source: {table: D.S.ORDERS}, target: n.orders, cursor: {column: u}, primary_key: [id]}\n"
        "  - {name: dim, source: {table: D.S.DIM}, target: n.dim, watch: {poll_interval: 30s, max_interval: null}}\n"
        "  - {name: cdc, source: {table: D.S.T}, target: n.cdc, primary_key: [id], stream: {name: D.S.T_STREAM}}\n"
        "  - {name: hourly, source: {table: D.S.H}, target: n.hourly, cursor: {column: u}, schedule: '@hourly'}\n",
    )
    for name in ("orders", "dim", "cdc"):
        dag = bag.dags[f"snowberg_{name}"]
        [asset] = dag.timetable.asset_condition.objects
        [watcher] = asset.watchers
        assert watcher.trigger.shared_stream_key() == ("snowberg-watch", "snowflake_default", 30.0)
        assert dag.max_active_runs == 1
    # The trigger form (window, full refresh, dry run) is the same as on a scheduled table's DAG.
    assert set(bag.dags["snowberg_orders"].params) == set(bag.dags["snowberg_hourly"].params)
    assert "Watch" in (bag.dags["snowberg_orders"].doc_md or "")
    assert type(bag.dags["snowberg_hourly"].timetable).__name__ == "CronDataIntervalTimetable"
