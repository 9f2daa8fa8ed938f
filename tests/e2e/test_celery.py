"""The same DAGs under CeleryExecutor: Redis as the broker, PostgreSQL as the result backend.

A separate Airflow stack (its own metadata database) runs api-server,
scheduler, dag-processor, triggerer and an ``airflow celery worker`` that
listens on a queue of its own. A manual run of a snowberg table must go
through that worker and load the table.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from airflow_stack import AirflowStack, pg_url
from e2e_data import SOURCES, Lake, dag_id, source_ids

pytestmark = pytest.mark.slow


def _celery_results(database: str) -> list[tuple[str, str]]:
    import psycopg2

    conn = psycopg2.connect(pg_url(database))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT task_id, status FROM celery_taskmeta")
            return [(str(a), str(b)) for a, b in cur.fetchall()]
    finally:
        conn.close()


@pytest.mark.timeout(420)
def test_a_load_runs_through_a_celery_worker(celery_stack: AirflowStack, snow: Any, lake: Lake) -> None:
    api = celery_stack.client()
    table, dag = "e2e_celery", dag_id("e2e_celery")
    health = api.get("/monitor/health")
    assert health["scheduler"]["status"] == "healthy"
    assert celery_stack.env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"

    api.set_paused(dag, False)
    run = api.trigger(dag)
    run = api.wait_run(dag, run["dag_run_id"], stack=celery_stack, timeout=300)
    assert run["state"] == "success", api.task_states(dag, run["dag_run_id"])

    # Every task that ran went through the worker: it logged each one and Celery stored each result.
    tis = api.task_instances(dag, run["dag_run_id"])
    ran = [t for t in tis if t["state"] == "success"]
    assert {t["task_id"] for t in ran} >= {"plan", "load", "publish"}
    assert {t["queue"] for t in tis} == {celery_stack.celery_queue}
    worker = next(s for s in celery_stack.services if s.name == "celery-worker")

    def succeeded() -> set[str]:
        # The worker logs "succeeded" just after the task reported its state: give it a moment.
        return set(
            re.findall(r"Task execute_workload\[([0-9a-f-]+)\] succeeded", worker.log_path.read_text(errors="replace"))
        )

    done = api.wait_for(
        "the worker to log every task",
        lambda: len(succeeded()) >= len(ran) and succeeded(),
        timeout=60,
        stack=celery_stack,
    )
    results = dict(_celery_results(celery_stack.database))
    assert done <= set(results) and {results[k] for k in done} == {"SUCCESS"}, results

    ids = [int(r["order_id"]) for r in lake.rows(table)]
    assert len(ids) == len(set(ids))
    assert set(ids) == source_ids(snow, SOURCES[table])
    assert lake.watermark(table) is not None
    api.set_paused(dag, True)
