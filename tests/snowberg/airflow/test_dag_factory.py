"""The DAG factory: what it wires into each table's DAGs (alert targets, check settings)."""

from __future__ import annotations

from snowberg.airflow.dag_factory import build_checks_dag, build_dag, build_unload_dag
from snowberg.config.table_config import parse_config


def test_every_dag_of_a_table_alerts_with_its_own_dag_id() -> None:
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "orders",
                    "source": {"table": "DB.S.ORDERS"},
                    "target": "shop.orders",
                    "cursor": {"column": "updated_at"},
                    "freshness_sla": "1h",
                    "unload": {"stage": "DB.S.LAKE_STAGE", "stage_url": "s3://lake/unload"},
                    "alerts": {"webhook_url": "https://hooks.example.com/a"},
                }
            ]
        }
    ).tables[0]
    dags = [build_dag(cfg), build_checks_dag(cfg), build_unload_dag(cfg)]
    assert len({d.dag_id for d in dags}) == 3
    for dag in dags:
        for task in dag.tasks:
            [notifier] = task.on_failure_callback
            assert (notifier.dag_id, notifier.table) == (dag.dag_id, "orders"), (dag.dag_id, task.task_id)


def test_freshness_reads_the_watermark_on_the_cursors_clock() -> None:
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "orders",
                    "source": {"table": "DB.S.ORDERS"},
                    "target": "shop.orders",
                    "cursor": {"column": "updated_at", "timezone": "America/Los_Angeles"},
                    "freshness_sla": "1h",
                    "max_watermark_lag": "6h",
                }
            ]
        }
    ).tables[0]
    task = build_checks_dag(cfg).get_task("check_freshness")
    assert task.cursor_timezone == "America/Los_Angeles"
    assert task.max_watermark_lag is not None
