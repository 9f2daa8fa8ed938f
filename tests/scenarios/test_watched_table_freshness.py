"""Freshness of a watched table (issue 27, item 4), through real DAG runs and the triggerer's poll.

* a quiet watched table stays green with no run at all after its first: the poll proves it current
  (the connection's poll record), and the checks DAG counts that proof;
* polls that keep failing (a revoked grant), or no poll at all (the triggerer stopped), turn it red
  within the SLA; a poll that reads again turns it green again.

The load DAG's plan reads the source's change token, which the emulator does not serve: that statement
is answered as Snowflake documents it (``documented_snowflake``), every other one by the emulator. The
triggerer's loop is the real ``WatchLoop`` of the DAG's own trigger, on Airflow's metadata database.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from table_dags import table_dags

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowberg" / "snowflake"))
from documented_snowflake import DocumentedSnowflake, TokensOver  # noqa: E402

SLA_SECONDS = 8
POLL = timedelta(seconds=1)


def _freshness(checks: Any) -> str:
    run = checks.test()
    return {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in run.get_task_instances()}["check_freshness"]


@contextmanager
def polling_in_the_background(poll_for: Any) -> Iterator[None]:
    """The poll keeps going in a thread while the block runs."""
    stop = threading.Event()

    def keep_polling() -> None:
        while not stop.is_set():
            poll_for(POLL.total_seconds())

    thread = threading.Thread(target=keep_polling, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def assert_events_queue_one_run(dag_id: str) -> None:
    """Events of the table's watcher (as the triggerer stores them: ``Trigger.submit_event`` registers an asset
    change per event) queue one run of the load DAG, with Airflow's own scheduler query; while a run is active
    (``max_active_runs=1``), the queued run waits behind it instead of being dropped."""
    from airflow.assets.manager import AssetManager
    from airflow.models.asset import AssetDagRunQueue, AssetModel
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from sqlalchemy import select, update

    with create_session() as session:
        session.execute(update(DagModel).where(DagModel.dag_id == dag_id).values(is_paused=False))
        asset = session.scalar(select(AssetModel).where(AssetModel.name == f"snowberg_source_{dag_id[9:]}"))
        assert asset is not None
        for n in range(3):
            extra = {"from_trigger": True, "payload": {"token": f"change:{n}"}}
            AssetManager.register_asset_change(asset=asset, extra=extra, session=session)
        session.flush()
        queued = session.scalars(select(AssetDagRunQueue).where(AssetDagRunQueue.target_dag_id == dag_id)).all()
        assert len(queued) == 1  # three events, one queued run
        run = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id)).first()
        assert run is not None
        run.state = DagRunState.RUNNING
        session.flush()
        _, asset_triggered = DagModel.dags_needing_dagruns(session=session)
        assert dag_id not in asset_triggered  # deferred behind the active run ...
        assert session.scalars(select(AssetDagRunQueue).where(AssetDagRunQueue.target_dag_id == dag_id)).all()
        run.state = DagRunState.SUCCESS
        session.flush()
        _, asset_triggered = DagModel.dags_needing_dagruns(session=session)
        assert dag_id in asset_triggered  # ... and due once it ended
        session.rollback()


@pytest.mark.slow
def test_a_quiet_watched_table_stays_green_without_runs_and_failing_or_stopped_polls_turn_it_red(
    sfdb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str, catalog_env: Any
) -> None:
    from snowberg.airflow.watch_loop import WatchLoop
    from snowberg.iceberg.state import MetadataDbVariables
    from snowberg.snowflake import hook

    src = sfdb.table("SRC")
    sfdb.sql(f"CREATE TABLE {src} (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(f"INSERT INTO {src} VALUES (1, '2026-01-01 00:00:01'::TIMESTAMP_NTZ), (2, '2026-01-01 00:00:02')")
    account = DocumentedSnowflake()
    account.table(src)
    real_get_conn = hook.SnowbergSnowflakeHook.get_conn
    monkeypatch.setattr(hook.SnowbergSnowflakeHook, "get_conn", lambda self: TokensOver(real_get_conn(self), account))
    monkeypatch.setenv("AIRFLOW_CONN_SF_WATCHED", sfdb.airflow_connection(password="pw"))
    catalog_env("watchcat")
    name = f"watched_{sfdb.name.lower()}"
    entry = {
        "name": name,
        "source": {"table": src},
        "target": f"watched.{sfdb.name.lower()}",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "snowflake_conn_id": "sf_watched",
        "catalog": "watchcat",
        "retries": 0,
        "freshness_sla": f"{SLA_SECONDS}s",
        "watch": {"poll_interval": "10s"},
    }
    bag = table_dags(tmp_path, monkeypatch, entry)
    load, checks = bag[f"snowberg_{name}"], bag[f"snowberg_{name}__checks"]
    target = load.timetable.asset_condition.objects[0].watchers[0].trigger.watch_target()
    loop = WatchLoop(
        snowflake_conn_id="sf_watched", poll_interval=POLL, variables=MetadataDbVariables(), connect=account.connect
    )

    def poll_for(seconds: float) -> list[Any]:
        fired = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            fired += [d for d in loop.poll([target]).values() if d.fire]
            time.sleep(POLL.total_seconds())
        return fired

    assert load.test().state == "success"  # the first run: the table's record says what it loaded
    assert poll_for(1) == []
    assert_events_queue_one_run(load.dag_id)

    # Quiet for longer than the SLA: no run, only polls (which go on while the checks DAG runs, as the
    # triggerer's would: on a loaded machine a checks run takes longer than the SLA). It stays green.
    assert poll_for(SLA_SECONDS + 2) == []
    with polling_in_the_background(poll_for):
        assert _freshness(checks) == "success"

    # The grant is revoked: polls fail (and alert), nothing proves the lake current any more.
    account.hidden.add(src.upper())
    poll_for(SLA_SECONDS + 2)
    assert _freshness(checks) == "failed"
    account.hidden.clear()
    loop.memory[load.dag_id].next_attempt = None  # no waiting out the backoff
    poll_for(1)
    with polling_in_the_background(poll_for):
        assert _freshness(checks) == "success"

    # The triggerer stops: no poll at all. Red within the SLA.
    time.sleep(SLA_SECONDS + 2)
    assert _freshness(checks) == "failed"
