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
import time
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

    # Quiet for longer than the SLA: no run, only polls. The checks DAG stays green.
    assert poll_for(SLA_SECONDS + 2) == []
    assert _freshness(checks) == "success"

    # The grant is revoked: polls fail (and alert), nothing proves the lake current any more.
    account.hidden.add(src.upper())
    poll_for(SLA_SECONDS + 2)
    assert _freshness(checks) == "failed"
    account.hidden.clear()
    loop.memory[load.dag_id].next_attempt = None  # no waiting out the backoff
    poll_for(1)
    assert _freshness(checks) == "success"

    # The triggerer stops: no poll at all. Red within the SLA.
    time.sleep(SLA_SECONDS + 2)
    assert _freshness(checks) == "failed"
