"""Scheduled runs, backfills and manual triggers with params, through a real Airflow 3 (REST API v2).

The expected rows always come from the source (the emulator) at assertion
time, never from constants: a window's rows are the source rows whose
UPDATED_AT falls in it.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from airflow_stack import AirflowStack, ApiClient, parse_ts, wait_runs_done
from e2e_data import DATABASE, SCHEMA, SOURCES, Lake, dag_id, day, ntz, query, source_ids

pytestmark = pytest.mark.slow


def lake_ids(lake: Lake, table: str) -> list[int]:
    return [int(r["order_id"]) for r in lake.rows(table)]


def lake_notes(lake: Lake, table: str) -> dict[int, str]:
    return {int(r["order_id"]): r["note"] for r in lake.rows(table)}


def mirrored_watermark(api: ApiClient, key: str) -> str | None:
    """The watermark in the table's Airflow Variable mirror."""
    raw = api.variable(key)
    return None if raw is None else json.loads(raw)["watermark"]


def metadata_commits(lake: Lake, table: str) -> int:
    """Catalog commits so far: one metadata file per commit (the log plus the current one)."""
    t = lake.table(table)
    return 0 if t is None else len(t.metadata.metadata_log) + 1


def fqn(table: str) -> str:
    return f"{DATABASE}.{SCHEMA}.{SOURCES[table]}"


def only_success(runs: list[dict[str, Any]], api: ApiClient, dag: str) -> None:
    bad = {r["dag_run_id"]: api.task_states(dag, r["dag_run_id"]) for r in runs if r["state"] != "success"}
    assert not bad, f"runs did not succeed: {bad}"


# ---------------------------------------------------------------------------
# 1. Scheduled runs


@pytest.mark.timeout(420)
def test_scheduled_runs_load_new_rows(local_stack: AirflowStack, api: ApiClient, snow: Any, lake: Lake) -> None:
    table, dag = "e2e_sched", dag_id("e2e_sched")
    api.set_paused(dag, False)

    # The first scheduled run (the latest minute, catchup off) loads every row.
    first = wait_runs_done(api, dag, count=1, run_type="scheduled", stack=local_stack, timeout=180)[0]
    only_success([first], api, dag)
    ids = lake_ids(lake, table)
    assert sorted(ids) == sorted(source_ids(snow, SOURCES[table]))
    wm1 = lake.watermark(table)
    assert wm1 is not None
    assert mirrored_watermark(api, f"snowberg__e2e__{table}__watermark") == wm1

    # The application changes 5 rows and adds 7: the next scheduled run must load exactly those.
    touched = {int(r[0]) for r in query(snow, f"SELECT ORDER_ID FROM {fqn(table)} WHERE MOD(ORDER_ID, 80) = 0")}
    assert len(touched) == 5
    now = ntz(datetime.now(UTC))
    query(
        snow,
        f"UPDATE {fqn(table)} SET NOTE = 'touched', UPDATED_AT = %(now)s::TIMESTAMP_NTZ WHERE MOD(ORDER_ID, 80) = 0",
        {"now": now},
    )
    query(
        snow,
        f"INSERT INTO {fqn(table)} SELECT 100000 + seq4(), 1.50, 'new', TRUE, CURRENT_DATE(), "
        f"%(now)s::TIMESTAMP_NTZ FROM TABLE(GENERATOR(ROWCOUNT => 7))",
        {"now": now},
    )
    # A run covers the change once it plans after UPDATED_AT + commit_lag (1 s, e2e_data.table_entry): one that
    # starts within that second plans too early now that a task starts in a fraction of a second (the worker
    # preload), loads nothing new and is rightly not the run this test waits for.
    changed_at = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()

    runs = wait_runs_done(
        api, dag, count=1, run_type="scheduled", started_after=changed_at, stack=local_stack, timeout=200
    )
    only_success(runs, api, dag)
    rows = lake.rows(table)
    ids = [int(r["order_id"]) for r in rows]
    assert not [k for k, n in Counter(ids).items() if n > 1], "duplicate keys in the lake"
    assert sorted(ids) == sorted(source_ids(snow, SOURCES[table]))
    notes = {int(r["order_id"]): r["note"] for r in rows}
    assert {i for i, n in notes.items() if n == "touched"} == touched
    assert {i for i, n in notes.items() if n == "new"} == set(range(100000, 100007))
    # The scheduled runs after the first committed exactly the 12 changed rows, once. (Which run saw
    # the change depends on when the scheduler started it relative to the UPDATE: a run that started
    # just before it may plan just after it. A merge-on-read commit is two snapshots of one run.)
    snaps = lake.snapshots(table)
    first_commit = max(i for i, s in enumerate(snaps) if s.get("snowberg.run-id") == first["dag_run_id"])
    by_run = {s["snowberg.run-id"]: s for s in snaps[first_commit + 1 :] if s.get("snowberg.run-id")}
    assert by_run and sum(int(s["snowberg.rows"]) for s in by_run.values()) == 12, by_run
    wm2 = lake.watermark(table)
    assert wm2 is not None and wm2 > wm1
    assert mirrored_watermark(api, f"snowberg__e2e__{table}__watermark") == wm2
    api.set_paused(dag, True)


def test_the_scheduler_forks_its_workers_from_the_preloaded_forkserver(local_stack: AirflowStack) -> None:
    """The stack's LocalExecutor runs its tasks in workers forked from a forkserver that imported the preload.

    docs/airflow-deployment.md, "LocalExecutor: import the libraries once"; the previous test's runs went through
    these workers, so a preload that broke a task would have failed it.
    """
    import psutil

    sched = next(s for s in local_stack.services if s.name == "scheduler")
    assert sched.proc is not None
    assert "Set forkserver preload modules for scheduler: ['snowberg.airflow.worker_preload']" in (
        sched.log_path.read_text(errors="replace")
    )
    servers = [
        c for c in psutil.Process(sched.proc.pid).children() if "multiprocessing.forkserver" in " ".join(c.cmdline())
    ]
    assert len(servers) == 1, [c.cmdline() for c in psutil.Process(sched.proc.pid).children()]
    assert "snowberg.airflow.worker_preload" in " ".join(servers[0].cmdline())
    assert servers[0].children(), "no LocalExecutor worker was forked from the forkserver"


# ---------------------------------------------------------------------------
# 2. Backfills


@pytest.mark.timeout(600)
def test_backfill_reloads_exactly_its_window_once_and_keeps_the_watermark(
    local_stack: AirflowStack, api: ApiClient, snow: Any, lake: Lake
) -> None:
    table, dag = "e2e_backfill", dag_id("e2e_backfill")
    var = f"snowberg__e2e__{table}__watermark"
    api.set_paused(dag, False)
    sched = wait_runs_done(api, dag, count=1, run_type="scheduled", stack=local_stack)
    only_success(sched, api, dag)
    assert sorted(lake_ids(lake, table)) == sorted(source_ids(snow, SOURCES[table]))
    wm = lake.watermark(table)
    assert wm is not None and mirrored_watermark(api, var) == wm

    # Rows of days 1..5 change in the source without moving their cursor: an
    # incremental run cannot see that; only a reload of their window can.
    query(
        snow,
        f"UPDATE {fqn(table)} SET NOTE = 'v2' WHERE UPDATED_AT >= %(a)s::TIMESTAMP_NTZ "
        f"AND UPDATED_AT < %(b)s::TIMESTAMP_NTZ",
        {"a": ntz(day(1)), "b": ntz(day(6))},
    )
    commits_before = metadata_commits(lake, table)

    # Logical dates day 2..day 3 (inclusive, as in the UI's dialog): two daily runs.
    resp = api.create_backfill(dag, day(2).isoformat(), day(3).isoformat(), max_active_runs=2)
    backfill = resp.json()
    assert backfill["dag_run_conf"] is None  # what the UI dialog sends without "Override parameters"
    runs = wait_runs_done(api, dag, count=2, run_type="backfill", stack=local_stack)
    only_success(runs, api, dag)
    intervals = sorted((parse_ts(r["data_interval_start"]), parse_ts(r["data_interval_end"])) for r in runs)
    assert intervals == [(day(2), day(3)), (day(3), day(4))]

    window = source_ids(snow, SOURCES[table], day(2), day(4))
    assert window, "the seeded days must have rows"
    notes = lake_notes(lake, table)
    assert {i for i, n in notes.items() if n == "v2"} == window  # exactly the window was reloaded
    ids = lake_ids(lake, table)
    assert len(ids) == len(set(ids)) and set(ids) == source_ids(snow, SOURCES[table])
    # Each run committed its own day, in one catalog commit, and kept the watermark.
    snaps = lake.snapshots(table)
    for r in runs:
        mine = [s for s in snaps if s.get("snowberg.run-id") == r["dag_run_id"]]
        assert mine and {s["snowberg.mode"] for s in mine} == {"backfill"}
        # Only a commit's last snapshot carries the state; earlier ones of the same commit say they are partial.
        whole = [s for s in mine if "snowberg.partial-of" not in s]
        assert len(whole) == 1 and whole[0]["snowberg.watermark"] == wm
        assert all("snowberg.watermark" not in s for s in mine if "snowberg.partial-of" in s)
        start, end = parse_ts(r["data_interval_start"]), parse_ts(r["data_interval_end"])
        assert mine[-1]["snowberg.rows"] == str(len(source_ids(snow, SOURCES[table], start, end)))
    assert metadata_commits(lake, table) == commits_before + 2
    assert lake.watermark(table) == wm
    assert mirrored_watermark(api, var) == wm

    # The same backfill again ("reprocess completed runs"): Airflow clears the
    # same two runs; each re-plans and reloads its window — one copy per row.
    query(
        snow,
        f"UPDATE {fqn(table)} SET NOTE = 'v3' WHERE UPDATED_AT >= %(a)s::TIMESTAMP_NTZ "
        f"AND UPDATED_AT < %(b)s::TIMESTAMP_NTZ",
        {"a": ntz(day(1)), "b": ntz(day(6))},
    )
    api.finish_backfill(backfill["id"])
    assert api.backfill(backfill["id"])["completed_at"] is not None
    again = api.create_backfill(
        dag, day(2).isoformat(), day(3).isoformat(), max_active_runs=2, reprocess_behavior="completed"
    ).json()
    runs2 = wait_runs_done(api, dag, count=2, run_type="backfill", started_after=again["created_at"], stack=local_stack)
    only_success(runs2, api, dag)
    assert {r["dag_run_id"] for r in runs2} == {r["dag_run_id"] for r in runs}
    notes = lake_notes(lake, table)
    assert {i for i, n in notes.items() if n == "v3"} == window
    assert {i for i, n in notes.items() if n == "v2"} == set()
    ids = lake_ids(lake, table)
    assert len(ids) == len(set(ids)) and set(ids) == source_ids(snow, SOURCES[table])
    assert metadata_commits(lake, table) == commits_before + 4
    assert lake.watermark(table) == wm
    assert mirrored_watermark(api, var) == wm
    api.finish_backfill(again["id"])  # the browser test backfills this DAG next


# ---------------------------------------------------------------------------
# 3. Manual triggers with params


@pytest.mark.timeout(420)
def test_manual_trigger_params_do_what_they_say(
    local_stack: AirflowStack, api: ApiClient, snow: Any, lake: Lake
) -> None:
    table, dag = "e2e_params", dag_id("e2e_params")
    api.set_paused(dag, False)
    src = SOURCES[table]

    # full refresh: the whole source, in one commit (it also gives the window runs below a watermark:
    # a backfill of a table nothing has loaded yet is refused)
    full = api.trigger(dag, {"full_refresh": True})
    run = api.wait_run(dag, full["dag_run_id"], stack=local_stack)
    only_success([run], api, dag)
    assert sorted(lake_ids(lake, table)) == sorted(source_ids(snow, src))
    assert len([s for s in lake.snapshots(table) if s.get("snowberg.run-id") == full["dag_run_id"]]) == 1
    wm = lake.watermark(table)
    assert wm is not None

    # a window: exactly the rows of [day 3, day 5) reloaded in one commit that keeps the watermark
    win = api.trigger(dag, {"window_start": day(3).isoformat(), "window_end": day(5).isoformat()})
    # then a dry run of another window: plans and counts, writes nothing
    dry = api.trigger(dag, {"window_start": day(6).isoformat(), "window_end": day(8).isoformat(), "dry_run": True})
    runs = [api.wait_run(dag, r["dag_run_id"], stack=local_stack) for r in (win, dry)]
    only_success(runs, api, dag)
    ids = lake_ids(lake, table)
    assert len(ids) == len(set(ids)) and sorted(ids) == sorted(source_ids(snow, src))
    reloaded = [s for s in lake.snapshots(table) if s.get("snowberg.run-id") == win["dag_run_id"]]
    assert reloaded and reloaded[-1]["snowberg.rows"] == str(len(source_ids(snow, src, day(3), day(5))))
    assert lake.watermark(table) == wm
    plan = api.xcom(dag, dry["dag_run_id"], "plan")
    assert plan["dry_run"] is True and plan["mode"] == "backfill"
    assert plan["rows_in_window"] == len(source_ids(snow, src, day(6), day(8))) > 0
    assert all(s.get("snowberg.run-id") != dry["dag_run_id"] for s in lake.snapshots(table))
    api.set_paused(dag, True)


INJECTION = "2026-09-01'; DROP TABLE E2E.SHOP.PARAM_ORDERS; --"


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"window_start": INJECTION, "window_end": "2026-09-02T00:00:00Z"}, "is not a 'date-time'"),
        ({"window_start": "2026-09-01T00:00:00Z", "window_end": INJECTION}, "is not a 'date-time'"),
        ({"full_refresh": "true; DROP TABLE X"}, "is not of type 'boolean'"),
        ({"dry_run": "1 OR 1=1"}, "is not of type 'boolean'"),
        ({"window_start": "yesterday"}, "is not a 'date-time'"),
    ],
    ids=["start-injection", "end-injection", "full-refresh-injection", "dry-run-injection", "start-not-a-date"],
)
def test_bad_params_are_refused_by_the_api(api: ApiClient, conf: dict[str, Any], message: str) -> None:
    dag = dag_id("e2e_params")
    before = len(api.runs(dag))
    r = api.http.post(f"/dags/{dag}/dagRuns", json={"logical_date": None, "conf": conf})
    assert r.status_code == 400, r.text
    assert message in r.text
    assert len(api.runs(dag)) == before  # no run was created
    # The backfill dialog's "Override parameters" goes through the same schema.
    r = api.http.post(
        "/backfills",
        json={
            "dag_id": dag_id("e2e_backfill"),
            "from_date": "2026-09-01T00:00:00Z",
            "to_date": "2026-09-01T00:00:00Z",
            "dag_run_conf": conf,
        },
    )
    assert r.status_code in (400, 422), r.text
    assert message in r.text


@pytest.mark.timeout(300)
def test_inconsistent_windows_fail_before_any_sql(local_stack: AirflowStack, api: ApiClient, lake: Lake) -> None:
    """What a schema cannot say (end before start, a future window) fails the plan task first thing."""
    table, dag = "e2e_params", dag_id("e2e_params")
    api.set_paused(dag, False)
    future = datetime.now(UTC) + timedelta(days=3)
    cases = {
        "must be after window_start": {"window_start": day(5).isoformat(), "window_end": day(3).isoformat()},
        "is in the future": {"window_start": day(5).isoformat(), "window_end": future.isoformat()},
        "give both window_start and window_end": {"window_start": day(5).isoformat()},
    }
    snaps_before = len(lake.snapshots(table))
    started = {msg: api.trigger(dag, conf)["dag_run_id"] for msg, conf in cases.items()}
    for msg, run_id in started.items():
        run = api.wait_run(dag, run_id, stack=local_stack)
        assert run["state"] == "failed"
        states = api.task_states(dag, run_id)
        assert states.pop("plan") == "failed"
        assert set(states.values()) == {"upstream_failed"}, states  # load, publish and the checks never ran
        log = api.task_log(dag, run_id, "plan")
        assert "RunParamError" in log and msg in log, log[-3000:]
        # resolve_run is the first thing the plan does: no catalog, no Snowflake.
        assert "watermark mirror" not in log and "Snowflake Connector" not in log
    assert len(lake.snapshots(table)) == snaps_before
    # A backfill in the future is refused by Airflow itself.
    r = api.http.post(
        "/backfills",
        json={
            "dag_id": dag_id("e2e_backfill"),
            "from_date": future.isoformat(),
            "to_date": (future + timedelta(days=1)).isoformat(),
        },
    )
    assert r.status_code in (400, 422) and "future" in r.text, r.text
    api.set_paused(dag, True)
