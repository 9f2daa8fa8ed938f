"""The page's data from Airflow's metadata database and the lake, as the JSON endpoint serves it.

Runs, task instances and XComs are written straight into a migrated metadata database (the rows
Airflow's scheduler and tasks write), so the states the page must flag — a failed load, a load
retrying, a failed check with its result — are set exactly, without running DAGs.
"""

from __future__ import annotations

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
    prefix = request.node.name.split("_")[2]  # its tables (so its runs) are the test's own in the shared database
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
        "run_id": "json_late",
        "state": "failed",
        "start_date": "2026-12-01T11:00:00+00:00",
        "end_date": "2026-12-01T11:01:00+00:00",
        "url": f"/dags/snowberg_{p}loadfail/runs/json_late",
        "duration_seconds": 60.0,
        "retrying_task": None,
    }
    assert by["retrying"]["last_load_run"]["retrying_task"] == "load"
    assert by["retrying"]["attention_detail"] == "task load of run json_late failed and is retrying"
    # The committing run is linked, and its whole duration stands beside the load task's.
    h = by["healthy"]
    assert h["committing_run"]["url"] == f"/dags/snowberg_{p}healthy/runs/json_run_healthy"
    assert (h["committing_run"]["duration_seconds"], h["load_task_seconds"]) == (11.0, 0.3)
    assert (h["rows"], h["live_rows"]) == (5, 5)
    assert h["watermark_kind"] == "timestamp_ntz" and h["watermark_zone"] == "UTC"
    [passed] = h["checks"]
    assert (passed["task_id"], passed["outcome"], passed["end_date"]) == (
        "check_volume",
        "passed",
        "2026-12-01T12:00:03+00:00",
    )
    assert passed["url"] == f"/dags/snowberg_{p}healthy__checks/runs/json_chk/tasks/check_volume"
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
    with create_session() as session:
        seen: list[str] = []
        engine = session.get_bind()
        listener = lambda *a, **k: seen.append(a[2])  # noqa: E731
        event.listen(engine, "before_cursor_execute", listener)
        try:
            tables = ui_data.collect(None, session, refresh=True)
        finally:
            event.remove(engine, "before_cursor_execute", listener)
    assert len(tables) == 5
    assert len([q for q in seen if q.lstrip().upper().startswith("SELECT")]) == 5, seen
