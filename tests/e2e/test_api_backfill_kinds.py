"""Backfills of DATE and NUMBER cursors through a real Airflow 3 (REST API v2).

Each table's first scheduled run (started when the stack comes up) loads it
and sets the watermark; each test then backfills once. The expected rows come
from the source at assertion time.
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow_stack import AirflowStack, ApiClient, parse_ts, wait_runs_done
from e2e_data import DATABASE, SCHEMA, SOURCES, Lake, dag_id, day, query, source_ids

pytestmark = pytest.mark.slow


def fqn(table: str) -> str:
    return f"{DATABASE}.{SCHEMA}.{SOURCES[table]}"


def loaded(api: ApiClient, stack: AirflowStack, lake: Lake, snow: Any, table: str) -> str:
    """Wait for the first scheduled run; return the watermark it committed."""
    dag = dag_id(table)
    first = wait_runs_done(api, dag, count=1, run_type="scheduled", stack=stack)[0]
    assert first["state"] == "success", api.task_states(dag, first["dag_run_id"])
    assert sorted(int(r["order_id"]) for r in lake.rows(table)) == sorted(source_ids(snow, SOURCES[table]))
    wm = lake.watermark(table)
    assert wm is not None
    return wm


def notes(lake: Lake, table: str) -> dict[int, str]:
    return {int(r["order_id"]): r["note"] for r in lake.rows(table)}


@pytest.mark.timeout(420)
def test_date_cursor_backfill_from_the_backfill_dialog_reloads_whole_days(
    local_stack: AirflowStack, api: ApiClient, snow: Any, lake: Lake
) -> None:
    table, dag = "e2e_bf_date", dag_id("e2e_bf_date")
    wm = loaded(api, local_stack, lake, snow, table)
    query(snow, f"UPDATE {fqn(table)} SET NOTE = 'v2'")

    # What the UI's Backfill dialog sends for one day: no conf, the run's data interval is the window.
    api.create_backfill(dag, day(2).isoformat(), day(2).isoformat())
    (run,) = wait_runs_done(api, dag, count=1, run_type="backfill", stack=local_stack)
    assert run["state"] == "success", api.task_states(dag, run["dag_run_id"])
    assert (parse_ts(run["data_interval_start"]), parse_ts(run["data_interval_end"])) == (day(2), day(3))

    day_rows = {int(r[0]) for r in query(snow, f"SELECT ORDER_ID FROM {fqn(table)} WHERE ORDER_DATE = '2026-09-03'")}
    assert day_rows
    after = notes(lake, table)
    assert {i for i, n in after.items() if n == "v2"} == day_rows  # exactly that day
    assert sorted(after) == sorted(source_ids(snow, SOURCES[table]))  # one copy of every row
    assert lake.watermark(table) == wm
    api.set_paused(dag, True)


@pytest.mark.timeout(420)
def test_number_cursor_backfills_from_number_params_and_the_dialog_says_how(
    local_stack: AirflowStack, api: ApiClient, snow: Any, lake: Lake
) -> None:
    table, dag = "e2e_bf_number", dag_id("e2e_bf_number")
    wm = loaded(api, local_stack, lake, snow, table)
    query(snow, f"UPDATE {fqn(table)} SET NOTE = 'v2'")

    by_params = api.trigger(dag, {"number_start": "100", "number_end": "200"})
    run = api.wait_run(dag, by_params["dag_run_id"], stack=local_stack)
    assert run["state"] == "success", api.task_states(dag, run["dag_run_id"])
    after = notes(lake, table)
    assert {i for i, n in after.items() if n == "v2"} == set(range(100, 200))
    assert sorted(after) == sorted(source_ids(snow, SOURCES[table]))
    assert lake.watermark(table) == wm

    # A Backfill-dialog run carries dates, which cannot bound a NUMBER cursor: it fails before any SQL.
    snaps = len(lake.snapshots(table))
    api.create_backfill(dag, day(2).isoformat(), day(2).isoformat())
    (dialog,) = wait_runs_done(api, dag, count=1, run_type="backfill", stack=local_stack)
    assert dialog["state"] == "failed"
    states = api.task_states(dag, dialog["dag_run_id"])
    assert states.pop("plan") == "failed" and set(states.values()) == {"upstream_failed"}, states
    log = api.task_log(dag, dialog["dag_run_id"], "plan")
    assert "'order_id' is a NUMBER" in log and "number_start and number_end" in log, log[-3000:]
    assert "Snowflake Connector" not in log  # refused from the table's metadata, before connecting
    assert len(lake.snapshots(table)) == snaps
    api.set_paused(dag, True)
