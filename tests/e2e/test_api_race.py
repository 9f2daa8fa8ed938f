"""A backfill and the scheduled run of the same table, at the same time, in a real Airflow 3.

Airflow 3 does not count backfill runs toward a DAG's ``max_active_runs``
(each backfill has its own limit; see ``SchedulerJobRunner._start_queued_dagruns``),
so ``max_active_runs=1`` alone does not keep a backfill away from the
scheduled run. What keeps them apart:

* the DAG factory sets ``max_active_tis_per_dag=1`` on the load task, which
  the scheduler counts across every run of the DAG, backfills included: one
  load of a table at a time;
* a backfill load carries the table's current watermark (an incremental run
  may have committed since the backfill was planned) and never moves it;
  an incremental load refuses when the watermark moved since its plan;
* every commit asserts the snapshot it was built on, and snowberg tables
  disable pyiceberg's commit retry.

A backfill needs a watermark to clamp to (a backfill of a table nothing has
loaded yet is refused), so the table gets its first load before the race,
through the library, the way a first scheduled run would load it.

This test shows the first point in Airflow (runs overlapped, loads did not)
and the outcome (every run succeeded, one copy per row, watermark from the
incremental runs only). ``test_race_guards.py`` shows the other two
deterministically.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from itertools import combinations
from typing import Any

import pytest
from airflow_stack import AirflowStack, ApiClient, overlaps, wait_runs_done
from e2e_data import DATABASE, SCHEMA, SOURCES, Lake, dag_id, day, ntz, query, source_ids, table_entry

pytestmark = pytest.mark.slow


@pytest.mark.timeout(420)
def test_backfill_and_scheduled_run_of_one_table_do_not_race(
    local_stack: AirflowStack, api: ApiClient, snow: Any, lake: Lake
) -> None:
    table, dag = "e2e_race", dag_id("e2e_race")
    src = f"{DATABASE}.{SCHEMA}.{SOURCES[table]}"
    first_watermark = _first_load(table, snow, lake)
    api.set_paused(dag, False)

    # As soon as the scheduled run is running, start a 2-day backfill (2 runs
    # at once). Once the scheduled run has planned, rows change in the source
    # and a manual incremental run is queued behind it: it must load them.
    sched = api.wait_for(
        "the scheduled run to start",
        lambda: [r for r in api.runs(dag, run_type="scheduled") if r["state"] == "running"],
        timeout=120,
        every=0.5,
        stack=local_stack,
    )[0]
    api.create_backfill(dag, day(0).isoformat(), day(1).isoformat(), max_active_runs=2)
    api.wait_for(
        "the scheduled run's plan",
        lambda: api.task_states(dag, sched["dag_run_id"]).get("plan") == "success",
        timeout=120,
        every=0.5,
        stack=local_stack,
    )
    query(
        snow,
        f"UPDATE {src} SET NOTE = 'late', UPDATED_AT = %(now)s::TIMESTAMP_NTZ WHERE MOD(ORDER_ID, 50) = 0",
        {"now": ntz(datetime.now(UTC))},
    )
    manual = api.trigger(dag)

    runs = wait_runs_done(api, dag, count=4, stack=local_stack, timeout=300)
    bad = {r["dag_run_id"]: api.task_states(dag, r["dag_run_id"]) for r in runs if r["state"] != "success"}
    assert not bad, f"runs failed: {bad}"
    by_type: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_type.setdefault(r["run_type"], []).append(r)
    assert len(by_type["backfill"]) == 2 and len(by_type["scheduled"]) == 1 and len(by_type["manual"]) == 1

    # Airflow ran backfill runs side by side with the non-backfill runs ...
    incremental = by_type["scheduled"] + by_type["manual"]
    assert any(overlaps(b, i) for b in by_type["backfill"] for i in incremental), runs
    # ... but never two loads of the table at once.
    loads = []
    for r in runs:
        ti = next(t for t in api.task_instances(dag, r["dag_run_id"]) if t["task_id"] == "load")
        loads.append(ti)
    clashes = [(a["run_id"], b["run_id"]) for a, b in combinations(loads, 2) if overlaps(a, b)]
    assert not clashes, f"loads of one table overlapped: {clashes}"

    # One copy of each row, the late updates included.
    rows = lake.rows(table)
    ids = [int(r["order_id"]) for r in rows]
    assert len(ids) == len(set(ids))
    assert set(ids) == source_ids(snow, SOURCES[table])
    late = {int(r[0]) for r in query(snow, f"SELECT ORDER_ID FROM {src} WHERE NOTE = 'late'")}
    assert {int(r["order_id"]) for r in rows if r["note"] == "late"} == late
    # The watermark is the manual (last incremental) run's, and only incremental commits moved it.
    plan = api.xcom(dag, manual["dag_run_id"], "plan")
    assert plan["rows_in_window"] == len(late) > 0
    assert [s for s in lake.snapshots(table) if s.get("snowberg.run-id") == manual["dag_run_id"]]
    assert lake.watermark(table) == plan["new_watermark"]
    wms = [s["snowberg.watermark"] for s in lake.snapshots(table) if "snowberg.watermark" in s]
    assert wms == sorted(wms), f"the watermark went backwards: {wms}"
    # A backfill commit carries whatever watermark the table had (none yet, or an incremental run's).
    carried = {api.xcom(dag, r["dag_run_id"], "plan")["new_watermark"] for r in incremental} | {first_watermark}
    # (the commit's last snapshot carries it; the earlier, partial ones of a merge carry none)
    backfills = [s for s in lake.snapshots(table) if s.get("snowberg.mode") == "backfill"]
    assert {s["snowberg.watermark"] for s in backfills if "snowberg.partial-of" not in s} <= carried
    assert all("snowberg.watermark" not in s for s in backfills if "snowberg.partial-of" in s)
    var = api.variable(f"snowberg__e2e__{table}__watermark")
    assert var is not None and json.loads(var)["watermark"] == plan["new_watermark"]
    api.set_paused(dag, True)


def _first_load(table: str, snow: Any, lake: Lake) -> str:
    """Load the table once through snowberg's library (what its first scheduled run would do)."""
    from snowberg.config.table_config import TableConfig
    from snowberg.iceberg.tables import load_table_or_none
    from snowberg.load.extract import load_window
    from snowberg.load.plan import plan_run

    cfg = TableConfig.model_validate(table_entry(table, schedule="@daily", source_table=SOURCES[table]))
    catalog = lake.catalog()
    w = plan_run(cfg, snow, load_table_or_none(catalog, cfg), run_id="first_load")
    result = load_window(cfg, snow, catalog, w)
    assert result.status == "committed" and w.new_watermark
    return w.new_watermark
