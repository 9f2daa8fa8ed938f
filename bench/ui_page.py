"""The snowberg UI page's time at 50, 200 and 500 configured tables: first view and repeat view, on PostgreSQL.

    .venv/bin/python -m bench.ui_page                      # 50, 200, 500 tables, 3 views each
    .venv/bin/python -m bench.ui_page --sizes 500 --runs 5

What it builds: a fresh PostgreSQL metadata database (``SNOWBERG_E2E_PG_DSN``, default
``postgresql://postgres@127.0.0.1:5432/postgres``; dropped at the end) migrated by ``airflow db
migrate``; a SQLite Iceberg catalog with the largest size's tables, each with two snowberg commits
(a first load and an incremental one); per table a load run (tasks ``plan`` and ``load``) and a
checks run (three checks, each with its result in XCom), written as the scheduler and the tasks
write them. Then, per size, the page's own app (``snowberg.airflow.ui.create_app``) answers
``GET /`` and ``GET /api/tables`` in process: "first" after the cache and the open catalogs are
dropped (every catalog opened, every table's metadata and every run read), "repeat" the next view
within ``[snowberg] ui_cache_seconds``. The auth manager is a stand-in that allows every DAG (the
real one asks the metadata database once per view); the user is resolved by an override.

Targets (issue 31): repeat view ≤ 1 s at 500 tables, first view ≤ 5 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
CHECKS = ("check_freshness", "check_volume", "table_health")


def tables_config(n: int) -> dict[str, Any]:
    return {
        "tables": [
            {
                "name": f"t{i:04d}",
                "source": {"table": f"DB.S.SRC{i}"},
                "target": f"bench.t{i:04d}",
                "catalog": "benchcat",
                "cursor": {"column": "updated_at"},
                "freshness_sla": "1h",
            }
            for i in range(n)
        ]
    }


def build_lake(n: int) -> None:
    import pyarrow as pa

    from snowberg.iceberg import state
    from snowberg.iceberg.catalogs import open_catalog

    cat = open_catalog("benchcat")
    cat.create_namespace("bench")
    schema = pa.schema([pa.field("id", pa.int64())])
    for i in range(n):
        t = cat.create_table(("bench", f"t{i:04d}"), schema=schema)
        for k, rows in enumerate((1000, 10)):
            t.append(
                pa.table({"id": pa.array(range(rows), pa.int64())}),
                snapshot_properties={
                    state.WATERMARK: f"2026-12-01 0{8 + k}:00:00",
                    state.CURSOR_KIND: "timestamp_ntz",
                    state.RUN_ID: f"run{k}_t{i:04d}",
                    state.MODE: "full" if k == 0 else "incremental",
                    state.ROWS: str(rows),
                },
            )


def seed_airflow(n: int) -> None:
    from airflow.models import DagRun, TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import insert, select

    runs, tasks = [], []
    for i in range(n):
        dag = f"snowberg_t{i:04d}"
        for k in range(2):
            start = T0 + timedelta(hours=k)
            runs.append(dict(dag_id=dag, run_id=f"run{k}_t{i:04d}", state="success", start=start))
            for j, task_id in enumerate(("plan", "load", "publish")):
                tasks.append(dict(dag_id=dag, run_id=f"run{k}_t{i:04d}", task_id=task_id, start=start, j=j))
        runs.append(dict(dag_id=f"{dag}__checks", run_id=f"chk_t{i:04d}", state="success", start=T0))
        for j, task_id in enumerate(CHECKS):
            tasks.append(dict(dag_id=f"{dag}__checks", run_id=f"chk_t{i:04d}", task_id=task_id, start=T0, j=j))
    with create_session() as s:
        s.execute(
            insert(DagRun.__table__),
            [
                dict(
                    dag_id=r["dag_id"],
                    run_id=r["run_id"],
                    run_type="manual",
                    state=r["state"],
                    start_date=r["start"],
                    end_date=r["start"] + timedelta(seconds=10),
                    run_after=r["start"],
                    queued_at=r["start"],
                    log_template_id=None,
                )
                for r in runs
            ],
        )
        s.execute(
            insert(TaskInstance.__table__),
            [
                dict(
                    id=uuid.uuid4(),
                    dag_id=t["dag_id"],
                    run_id=t["run_id"],
                    task_id=t["task_id"],
                    map_index=-1,
                    state="success",
                    start_date=t["start"] + timedelta(seconds=t["j"]),
                    end_date=t["start"] + timedelta(seconds=t["j"] + 1),
                    duration=1.0,
                    try_number=1,
                    max_tries=0,
                    pool="default_pool",
                    pool_slots=1,
                    priority_weight=1,
                )
                for t in tasks
            ],
        )
        ids = dict(
            s.execute(select(DagRun.run_id, DagRun.id).where(DagRun.dag_id.like("snowberg\\_%", escape="\\"))).all()
        )
        s.execute(
            insert(XComModel.__table__),
            [
                dict(
                    dag_run_id=ids[f"chk_t{i:04d}"],
                    dag_id=f"snowberg_t{i:04d}__checks",
                    run_id=f"chk_t{i:04d}",
                    task_id=task_id,
                    map_index=-1,
                    key="return_value",
                    value=XComModel.serialize_value({"ok": True, "source_rows": 1010, "lake_rows": 1010}),
                    timestamp=T0,
                )
                for i in range(n)
                for task_id in CHECKS
            ],
        )


def measure(n: int, root: Path, runs: int) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from snowberg.airflow import ui, ui_data

    path = root / f"tables-{n}.yaml"
    path.write_text(yaml.safe_dump(tables_config(n)))
    os.environ["SNOWBERG_TABLES_CONFIG"] = str(path)
    app = ui.create_app()
    app.dependency_overrides[ui.current_user] = lambda: object()
    client = TestClient(app)
    out: dict[str, list[float]] = {"first_html": [], "repeat_html": [], "first_json": [], "repeat_json": []}
    size = 0
    for _ in range(runs):
        for kind, url in (("html", "/"), ("json", "/api/tables")):
            ui_data.clear_cache()
            for view in ("first", "repeat"):
                t = time.monotonic()
                r = client.get(url)
                out[f"{view}_{kind}"].append(time.monotonic() - t)
                assert r.status_code == 200, r.text[:500]
                size = len(r.content) if kind == "html" else size
    body = client.get("/api/tables").json()
    assert len(body) == n and not [t for t in body if t["attention"] not in (None, "stale")], body[:1]
    return {k: statistics.median(v) for k, v in out.items()} | {"html_bytes": size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="50,200,500")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    from airflow_stack import create_database, drop_database

    (REPO / ".snowberg").mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="ui-bench-", dir=REPO / ".snowberg"))
    db = f"snowberg_ui_bench_{os.getpid()}"
    url = create_database(db)
    try:
        (root / "wh").mkdir()
        os.environ.update(
            {
                "AIRFLOW_HOME": str(root / "airflow"),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url,
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "PYICEBERG_CATALOG__BENCHCAT__TYPE": "sql",
                "PYICEBERG_CATALOG__BENCHCAT__URI": f"sqlite:///{root}/catalog.db",
                "PYICEBERG_CATALOG__BENCHCAT__WAREHOUSE": f"file://{root}/wh",
            }
        )
        airflow = str(Path(sys.executable).with_name("airflow"))
        subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True, env=dict(os.environ))
        t = time.monotonic()
        build_lake(max(sizes))
        seed_airflow(max(sizes))
        print(f"built {max(sizes)} tables and their runs in {time.monotonic() - t:.0f} s", flush=True)

        class AllowAll:
            def get_authorized_dag_ids(self, *, user: Any, method: str, session: Any) -> set[str]:
                return {f"snowberg_t{i:04d}" for i in range(max(sizes))}

        import airflow.api_fastapi.app as af_app

        af_app.get_auth_manager = lambda: AllowAll()  # type: ignore[assignment,return-value]
        print("| tables | first view (HTML) | repeat view (HTML) | first (JSON) | repeat (JSON) | HTML size |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for n in sizes:
            m = measure(n, root, args.runs)
            print(
                f"| {n} | {m['first_html']:.2f} s | {m['repeat_html']:.3f} s | {m['first_json']:.2f} s | "
                f"{m['repeat_json']:.3f} s | {m['html_bytes'] / 1024:.0f} KB |",
                flush=True,
            )
    finally:
        drop_database(db)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
