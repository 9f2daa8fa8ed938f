"""The check operators' contract (``SnowbergCheckOperator``, ``SnowbergCheckFailed``): keyword-only, documented,
templated, cheap to build, serializable in a DAG, and a failure that survives pickling."""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any

import pytest

OPERATORS = ("SnapshotFreshnessOperator", "TableHealthOperator", "VerifyExternalVolumeOperator", "LakeProbeOperator")


def _cls(name: str) -> Any:
    import importlib

    for module in ("freshness", "health", "storage"):
        mod = importlib.import_module(f"snowberg.airflow.operators.{module}")
        if hasattr(mod, name):
            return getattr(mod, name)
    raise AssertionError(f"no operator {name}")


@pytest.mark.parametrize("name", OPERATORS)
def test_keyword_only_documented_templated(name: str) -> None:
    cls = _cls(name)
    params = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]
    assert all(p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in params), params
    doc = inspect.getdoc(cls) or ""
    assert ".. code-block:: python" in doc and f"{name}(" in doc
    assert cls.template_fields and cls.snowberg_check
    for field in cls.template_fields:
        assert f":param {field}:" in doc, field


def _dag() -> Any:
    import pendulum
    from airflow.sdk import DAG

    from snowberg.airflow.alerts import build_notifiers
    from snowberg.airflow.operators.freshness import SnapshotFreshnessOperator
    from snowberg.airflow.operators.health import TableHealthOperator
    from snowberg.airflow.operators.storage import LakeProbeOperator, VerifyExternalVolumeOperator

    notifiers = build_notifiers(
        {"email": ["oncall@example.com"], "webhook_url": "http://127.0.0.1:9/h"},
        table="orders",
        dag_id="snowberg_orders",
    )
    with DAG(
        "snowberg_orders_checks",
        schedule="@hourly",
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        default_args={"on_failure_callback": notifiers},
    ) as dag:
        SnapshotFreshnessOperator(
            task_id="check_freshness", table="lake.orders", freshness_sla="{{ params.sla }}", max_watermark_lag="1d"
        )
        TableHealthOperator(task_id="table_health", table="lake.orders", thresholds={"min_stats_coverage": 0.9})
        VerifyExternalVolumeOperator(
            task_id="verify_external_volume",
            external_volume="iceberg_external_volume",
            catalog="lake",
            table="lake.orders",
        )
        LakeProbeOperator(task_id="probe_lake", table="lake.orders")
        SnapshotFreshnessOperator(
            task_id="wait_fresh", table="lake.orders", freshness_sla="2h", deferrable=True, wait_timeout="1h"
        )
    return dag


def test_operators_serialize_in_a_dag() -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    dag = _dag()
    round_trip = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    assert set(round_trip.task_ids) == {
        "check_freshness",
        "table_health",
        "verify_external_volume",
        "probe_lake",
        "wait_fresh",
    }
    assert dag.get_task("check_freshness").on_failure_callback  # the notifiers are attached


def test_templates_render(use_catalog: Any, orders: Any, context: dict[str, Any]) -> None:
    from airflow.sdk.definitions.param import ParamsDict

    op = _dag().get_task("check_freshness")
    op.render_template_fields({"params": ParamsDict({"sla": "3h"})})
    assert op.freshness_sla == "3h"


def test_parsing_a_dag_with_the_operators_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "import snowberg.airflow.operators.freshness, snowberg.airflow.operators.health, "
        "snowberg.airflow.operators.storage, snowberg.airflow.alerts\n"
        "print([m for m in ('pyiceberg', 'pyarrow', 'pandas', 'boto3', 'snowflake.connector', 'slack_sdk') "
        "if m in sys.modules])\n"
    )
    out = (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    assert out == "[]"


def test_a_check_failure_pickles_with_what_it_observed() -> None:
    import pickle

    from snowberg.airflow.operators.check_base import SnowbergCheckFailed

    e = SnowbergCheckFailed(
        "x is stale", table="lake.x", check="freshness", observed="o", expected="e", details={"a": 1}
    )
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.message, e2.table, e2.check, e2.observed, e2.expected, e2.details) == (
        "x is stale",
        "lake.x",
        "freshness",
        "o",
        "e",
        {"a": 1},
    )
