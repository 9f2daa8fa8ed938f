"""The page's data from Airflow's metadata database and the lake, as the JSON endpoint serves it.

Runs, task instances and XComs are written straight into a migrated metadata database (the rows
Airflow's scheduler and tasks write), so the states the page must flag — a failed load, a load
retrying, a failed check with its result — are set exactly, without running DAGs.
"""

from __future__ import annotations

import threading
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
import yaml

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def add_run(session: Any, dag_id: str, run_id: str, state: str, start: datetime, end: datetime | None) -> int:
    from airflow.models import DagRun
    from sqlalchemy import insert, select

    session.execute(
        insert(DagRun.__table__).values(
            dag_id=dag_id,
            run_id=run_id,
            run_type="manual",
            state=state,
            start_date=start,
            end_date=end,
            run_after=start,
            queued_at=start,
        )
    )
    return int(session.scalar(select(DagRun.id).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)))


def add_task(
    session: Any,
    dag_id: str,
    run_id: str,
    task_id: str,
    state: str,
    start: datetime,
    seconds: float | None,
    *,
    try_number: int = 1,
) -> None:
    import uuid

    from airflow.models import TaskInstance
    from sqlalchemy import insert

    end = start + timedelta(seconds=seconds) if seconds is not None else None
    session.execute(
        insert(TaskInstance.__table__).values(
            id=uuid.uuid4(),
            dag_id=dag_id,
            run_id=run_id,
            task_id=task_id,
            map_index=-1,
            state=state,
            start_date=start,
            end_date=end,
            duration=seconds,
            try_number=try_number,
            max_tries=2,
            pool="default_pool",
            pool_slots=1,
            priority_weight=1,
        )
    )


def add_xcom(session: Any, run_pk: int, dag_id: str, run_id: str, task_id: str, key: str, value: Any) -> None:
    from airflow.models.xcom import XComModel
    from sqlalchemy import insert

    session.execute(
        insert(XComModel.__table__).values(
            dag_run_id=run_pk,
            dag_id=dag_id,
            run_id=run_id,
            task_id=task_id,
            map_index=-1,
            key=key,
            value=XComModel.serialize_value(value),
            timestamp=T0,
        )
    )


def commit(table: Any, rows: int, watermark: str, run_id: str) -> None:
    from snowberg.iceberg import state

    table.append(
        pa.table({"id": pa.array(range(rows), pa.int64())}),
        snapshot_properties={
            state.WATERMARK: watermark,
            state.CURSOR_KIND: "timestamp_ntz",
            state.RUN_ID: run_id,
            state.MODE: "incremental",
            state.ROWS: str(rows),
        },
    )


@pytest.fixture
def page_env(request: Any, tmp_path: Any, monkeypatch: Any, catalog_env: Any, airflow_db: str) -> Any:
    """Four tables in one catalog: healthy, failing load, failing check, retrying load; plus one missing."""
    from snowberg.airflow import ui_data
    from snowberg.iceberg.catalogs import open_catalog

    ui_data.clear_cache()
    catalog_env("pagecat")
    cat = open_catalog("pagecat")
    cat.create_namespace("pg")
    # Its tables (so its DAGs and runs) are the test's own in the session's shared metadata database.
    prefix = f"p{zlib.crc32(request.node.name.encode()) % 10**6}"
    names = ["healthy", "loadfail", "checkfail", "retrying"]
    for n in names:
        t = cat.create_table(("pg", n), schema=pa.schema([pa.field("id", pa.int64())]))
        commit(t, 5, "2026-12-01 09:00:00", f"{prefix}_run_{n}")
    entry = {"source": {"table": "DB.S.T"}, "catalog": "pagecat", "cursor": {"column": "u"}}
    cfg = {"tables": [{"name": f"{prefix}{n}", "target": f"pg.{n}", **entry} for n in [*names, "missing"]]}
    path = tmp_path / "tables.yaml"
    path.write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(path))
    monkeypatch.setenv("AIRFLOW__SNOWBERG__UI_CACHE_SECONDS", "0")
    yield prefix
    ui_data.clear_cache()


def _seed_runs(prefix: str) -> None:
    from airflow.utils.session import create_session

    with create_session() as s:
        for n in ("healthy", "loadfail", "checkfail", "retrying"):
            dag, run = f"snowberg_{prefix}{n}", f"{prefix}_run_{n}"
            add_run(s, dag, run, "success", T0, T0 + timedelta(seconds=11))
            add_task(s, dag, run, "plan", "success", T0, 1.0)
            add_task(s, dag, run, "load", "success", T0 + timedelta(seconds=2), 0.3)
        # The latest load runs: one failed, one retrying its load task.
        add_run(
            s,
            f"snowberg_{prefix}loadfail",
            f"{prefix}_late",
            "failed",
            T0 + timedelta(hours=1),
            T0 + timedelta(hours=1, minutes=1),
        )
        add_task(s, f"snowberg_{prefix}loadfail", f"{prefix}_late", "load", "failed", T0 + timedelta(hours=1), 5.0)
        add_run(s, f"snowberg_{prefix}retrying", f"{prefix}_late", "running", T0 + timedelta(hours=1), None)
        add_task(
            s, f"snowberg_{prefix}retrying", f"{prefix}_late", "load", "up_for_retry", T0 + timedelta(hours=1), None
        )
        # Checks: the failing table's volume check failed with its result; the healthy one passed.
        for n, state in (("healthy", "success"), ("checkfail", "failed")):
            dag = f"snowberg_{prefix}{n}__checks"
            pk = add_run(s, dag, f"{prefix}_chk", state, T0 + timedelta(hours=2), T0 + timedelta(hours=2, seconds=30))
            add_task(s, dag, f"{prefix}_chk", "check_volume", state, T0 + timedelta(hours=2), 3.0)
            result = (
                {"ok": True, "source_rows": 5, "lake_rows": 5}
                if state == "success"
                else {
                    "ok": False,
                    "source_rows": 7,
                    "lake_rows": 5,
                    "differing_days": {"2026-12-01": {"source": 7, "lake": 5}},
                    "differences": [{"key": "6", "kind": "missing_in_lake"}, {"key": "7", "kind": "missing_in_lake"}],
                }
            )
            add_xcom(
                s, pk, dag, f"{prefix}_chk", "check_volume", "return_value" if state == "success" else "result", result
            )


def test_the_json_says_per_table_what_needs_attention_why_and_links_the_run_and_the_log(
    page_env: Any, monkeypatch: Any
) -> None:
    from fastapi.testclient import TestClient

    from snowberg.airflow import ui

    p = page_env
    _seed_runs(p)

    class AuthManager:
        def get_authorized_dag_ids(self, *, user: Any, method: str, session: Any) -> set[str]:
            return {f"snowberg_{p}{n}" for n in ("healthy", "loadfail", "checkfail", "retrying", "missing")}

    monkeypatch.setattr("airflow.api_fastapi.app.get_auth_manager", lambda: AuthManager())
    app = ui.create_app()
    app.dependency_overrides[ui.current_user] = lambda: object()
    body = TestClient(app).get("/api/tables").json()
    by = {t["name"].removeprefix(p): t for t in body}
    # Attention first, most urgent kind first; the healthy table last.
    assert [t["name"] for t in body] == [p + n for n in ("loadfail", "retrying", "missing", "checkfail", "healthy")]
    assert [t["attention"] for t in body] == [
        "load failed",
        "load retrying",
        "table missing",
        "check failed: check_volume",
        None,
    ]
    late = by["loadfail"]["last_load_run"]
    assert late == {
        "run_id": f"{p}_late",
        "state": "failed",
        "start_date": "2026-12-01T11:00:00+00:00",
        "end_date": "2026-12-01T11:01:00+00:00",
        "url": f"/dags/snowberg_{p}loadfail/runs/{p}_late",
        "duration_seconds": 60.0,
        "retrying_task": None,
    }
    assert by["retrying"]["last_load_run"]["retrying_task"] == "load"
    assert by["retrying"]["attention_detail"] == f"task load of run {p}_late failed and is retrying"
    # The committing run is linked, and its whole duration stands beside the load task's.
    h = by["healthy"]
    assert h["committing_run"]["url"] == f"/dags/snowberg_{p}healthy/runs/{p}_run_healthy"
    assert (h["committing_run"]["duration_seconds"], h["load_task_seconds"]) == (11.0, 0.3)
    assert (h["rows"], h["live_rows"]) == (5, 5)
    assert h["watermark_kind"] == "timestamp_ntz" and h["watermark_zone"] == "UTC"
    [passed] = h["checks"]
    assert (passed["task_id"], passed["outcome"], passed["end_date"]) == (
        "check_volume",
        "passed",
        "2026-12-01T12:00:03+00:00",
    )
    assert passed["url"] == f"/dags/snowberg_{p}healthy__checks/runs/{p}_chk/tasks/check_volume"
    [failed] = by["checkfail"]["checks"]
    assert failed["outcome"] == "failed" and failed["state"] == "failed"
    assert failed["reason"] == (
        "source 7 rows, lake 5 rows; 1 differing day(s) (2026-12-01: source 7, lake 5); "
        "2 differing key(s): 6 missing_in_lake, 7 missing_in_lake"
    )
    assert by["checkfail"]["attention_detail"] == failed["reason"]
    assert by["missing"]["exists"] is False and by["missing"]["last_load_run"] is None
    assert all(t["as_of"] for t in body)


def test_the_page_reads_the_metadata_database_in_a_fixed_number_of_queries(page_env: Any) -> None:
    """Five tables or fifty: the same queries (runs, tasks, committing runs, XComs, Variables)."""
    from airflow.utils.session import create_session
    from sqlalchemy import event

    from snowberg.airflow import ui_data

    _seed_runs(page_env)
    me = threading.get_ident()
    with create_session() as session:
        seen: list[str] = []
        engine = session.get_bind()

        # This thread's statements only: the engine is the process's, and a page served by an earlier test may
        # still be refreshing its cache in the background ("snowberg-ui-refresh", ui_data), on the same engine.
        def listener(*a: Any, **k: Any) -> None:
            if threading.get_ident() == me:
                seen.append(a[2])

        event.listen(engine, "before_cursor_execute", listener)
        try:
            tables = ui_data.collect(None, session, refresh=True)
        finally:
            event.remove(engine, "before_cursor_execute", listener)
    assert len(tables) == 5
    assert len([q for q in seen if q.lstrip().upper().startswith("SELECT")]) == 5, seen


@pytest.mark.slow
def test_in_a_real_browser_the_failing_tables_come_first_with_their_reasons_within_the_bound(
    page_env: Any, monkeypatch: Any, tmp_path: Any
) -> None:
    """Chromium opens the page over HTTP: a failed load, a retrying load, a silent catalog, a missing table and
    a failed check come first, each with its reason and its links; the healthy table last; within the bound.

    The page's app is served by uvicorn under ``/snowberg`` (as the api-server mounts it; the Airflow UI
    around it and its login: tests/e2e/test_ecosystem.py); the runs are rows in the metadata database,
    the lake a SQLite catalog, the silent catalog a REST address that accepts and never answers.
    """
    import os
    import socket
    import threading
    import time
    from pathlib import Path

    import uvicorn
    from fastapi import FastAPI
    from playwright.sync_api import sync_playwright

    from snowberg.airflow import ui

    chromium = os.environ.get("SNOWBERG_CHROMIUM", "/usr/bin/chromium")
    assert Path(chromium).exists(), f"{chromium} missing: run scripts/install-browser.sh"
    p = page_env
    _seed_runs(p)
    silent = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel's backlog), never answers
    monkeypatch.setenv("PYICEBERG_CATALOG__DEADCAT__TYPE", "rest")
    monkeypatch.setenv("PYICEBERG_CATALOG__DEADCAT__URI", f"http://127.0.0.1:{silent.getsockname()[1]}")
    monkeypatch.setenv("AIRFLOW__SNOWBERG__UI_CATALOG_TIMEOUT_SECONDS", "1")
    path = Path(os.environ["SNOWBERG_TABLES_CONFIG"])
    cfg = yaml.safe_load(path.read_text())
    dead = {"name": f"{p}silent", "target": "d.silent", "catalog": "deadcat"}
    cfg["tables"].append({**cfg["tables"][0], **dead})
    path.write_text(yaml.safe_dump(cfg))

    class AuthManager:
        def get_authorized_dag_ids(self, *, user: Any, method: str, session: Any) -> set[str]:
            return {t["name"] and f"snowberg_{t['name']}" for t in cfg["tables"]}

    monkeypatch.setattr("airflow.api_fastapi.app.get_auth_manager", lambda: AuthManager())
    page_app = ui.create_app()
    page_app.dependency_overrides[ui.current_user] = lambda: object()
    root = FastAPI()
    root.mount("/snowberg", page_app)
    server = uvicorn.Server(uvicorn.Config(root, host="127.0.0.1", port=0, log_level="warning"))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    shots = Path(__file__).resolve().parents[3] / "test-artifacts" / "ui"
    shots.mkdir(parents=True, exist_ok=True)
    try:
        while not server.started:
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
                headless=True,
            )
            try:
                page = browser.new_page(viewport={"width": 1300, "height": 1000})
                t0 = time.monotonic()
                page.goto(f"http://127.0.0.1:{port}/snowberg/", timeout=60_000)
                took = time.monotonic() - t0
                page.screenshot(path=str(shots / "attention-first.png"), full_page=True)
                # Bound: the first view of six tables (≤ 5 s) plus the silent catalog's timeout, once.
                assert took < 5 + 1, took
                assert page.locator("[data-field='summary']").inner_text().startswith("5 of 6 tables need attention")
                sections = page.locator("section.table")
                order = [sections.nth(i).get_attribute("data-attention") for i in range(sections.count())]
                assert order == [
                    "load failed",
                    "load retrying",
                    "catalog unreachable",
                    "table missing",
                    "check failed: check_volume",
                    "",
                ]
                texts = [sections.nth(i).locator("[data-field='attention']").inner_text() for i in range(5)]
                assert texts[0] == f"load failed: the latest load run {p}_late failed"
                assert f"task load of run {p}_late failed and is retrying" in texts[1]
                assert texts[2] == "catalog unreachable: catalog 'deadcat' did not answer within 1 s"
                assert "does not exist" in texts[3]
                assert "source 7 rows, lake 5 rows" in texts[4] and "6 missing_in_lake" in texts[4]
                failed = page.locator(f"section[data-table='{p}loadfail'] a[data-link='run']")
                assert failed.get_attribute("href") == f"/dags/snowberg_{p}loadfail/runs/{p}_late"
                log = page.locator(
                    f"section[data-table='{p}checkfail'] li[data-check='check_volume'] a[data-link='log']"
                )
                assert (
                    log.get_attribute("href") == f"/dags/snowberg_{p}checkfail__checks/runs/{p}_chk/tasks/check_volume"
                )
                item = page.locator(f"section[data-table='{p}checkfail'] li[data-check='check_volume']").inner_text()
                assert "failed" in item and "source 7 rows, lake 5 rows" in item
                silent_section = page.locator(f"section[data-table='{p}silent']").inner_text()
                assert "no SLA" not in silent_section and "cannot be judged" in silent_section
            finally:
                browser.close()
    finally:
        server.should_exit = True
        th.join(10)
        silent.close()


def test_a_watched_table_shows_its_mode_last_poll_last_change_and_a_pending_change(page_env: Any) -> None:
    """The triggerer's poll record, read with the page's one query for snowberg's Variables (27.9's UI part)."""
    import os
    from pathlib import Path

    from airflow.utils.session import create_session

    from snowberg.airflow import ui, ui_data
    from snowberg.iceberg.state import MetadataDbVariables
    from snowberg.iceberg.watch_state import PollEntry, WatchState, write_poll_record

    p = page_env
    path = Path(os.environ["SNOWBERG_TABLES_CONFIG"])
    cfg = yaml.safe_load(path.read_text())
    cfg["tables"][0]["watch"] = {"poll_interval": "30s", "max_interval": "1d"}
    cfg["tables"][0]["snowflake_conn_id"] = f"{p}_conn"
    path.write_text(yaml.safe_dump(cfg))
    entry = PollEntry(
        table=cfg["tables"][0]["name"],
        dag_id=f"snowberg_{cfg['tables'][0]['name']}",
        state=WatchState.PENDING,
        updated_at=(T0 + timedelta(minutes=5)).isoformat(),
        polled_at=(T0 + timedelta(minutes=5)).isoformat(),
        changed_at=(T0 + timedelta(minutes=4)).isoformat(),
        reason="the source changed after the last run's window",
    )
    write_poll_record(f"{p}_conn", {"pg.healthy": entry}, MetadataDbVariables(), now=T0 + timedelta(minutes=5))
    with create_session() as session:
        tables = ui_data.collect(None, session, refresh=True)
    [t] = [t for t in tables if t.name == cfg["tables"][0]["name"]]
    assert t.watch is not None
    assert t.watch["mode"] == "watch: poll every 30s, a run at least every 1d"
    assert (t.watch["pending"], t.watch["last_poll"], t.watch["last_change_seen"]) == (
        True,
        entry.polled_at,
        entry.changed_at,
    )
    html = ui.render_table(t)
    assert "a change is pending" in html and "2026-12-01 10:05:00 UTC" in html and "2026-12-01 10:04:00 UTC" in html
    [other] = [t for t in tables if t.name == f"{p}loadfail"]
    assert (
        other.watch is not None
        and other.watch["watched"] is False
        and "a change is pending" not in ui.render_table(other)
    )


def test_statuses_are_kept_then_served_while_a_background_thread_reads_them_again(
    page_env: Any, monkeypatch: Any
) -> None:
    import time

    from airflow.utils.session import create_session

    from snowberg.airflow import ui_data
    from snowberg.iceberg.catalogs import open_catalog

    p = page_env
    monkeypatch.setenv("AIRFLOW__SNOWBERG__UI_CACHE_SECONDS", "4")  # served stale up to 20 s

    def healthy_rows() -> int | None:
        with create_session() as session:
            return next(t.live_rows for t in ui_data.collect(None, session) if t.name == f"{p}healthy")

    assert healthy_rows() == 5
    commit(open_catalog("pagecat").load_table(("pg", "healthy")), 3, "2026-12-01 09:30:00", f"{p}_run_more")
    assert healthy_rows() == 5  # kept for the cache's lifetime
    time.sleep(4.5)
    assert healthy_rows() == 5  # past it: served at once while a thread reads again
    assert ui_data.wait_for_refresh(60)
    assert healthy_rows() == 8
