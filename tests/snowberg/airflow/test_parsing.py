"""Trigger forms attached after the tasks: Airflow's default check, once per distinct Param, and the same DAG."""

from __future__ import annotations

import uuid
from typing import Any

import pendulum
import pytest
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Param

from snowberg.airflow import parsing


def _dag(dag_id: str, schedule: str | None = "@hourly") -> DAG:
    with DAG(dag_id=dag_id, schedule=schedule, start_date=pendulum.datetime(2026, 1, 1), auto_register=False) as dag:
        EmptyOperator(task_id="a")
    return dag


def test_a_scheduled_dag_with_an_invalid_default_is_refused_as_airflow_refuses_it() -> None:
    form = {"n": parsing.form_param("three", type="integer")}
    with pytest.raises(ValueError, match="not allowed to define a Schedule") as ours:
        parsing.attach_form(_dag("ours"), form)
    with pytest.raises(ValueError, match="not allowed to define a Schedule"):
        DAG(dag_id="airflows", schedule="@hourly", start_date=pendulum.datetime(2026, 1, 1), params=form)
    assert "'n'" in str(ours.value)
    # Without a schedule Airflow checks no default (a manual run's form fills it in): neither do we.
    dag = parsing.attach_form(_dag("manual", schedule=None), {"n": parsing.form_param("three", type="integer")})
    assert dag.params.get_param("n").value == "three"


def test_each_distinct_param_is_validated_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    resolved: list[Any] = []
    original = Param.resolve

    def counting(self: Param, *args: Any, **kwargs: Any) -> Any:
        resolved.append(self.schema.get("title"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Param, "resolve", counting)
    title = uuid.uuid4().hex  # a schema this process has not seen
    for i in range(20):
        form = {
            "a": parsing.form_param(None, type=["null", "string"], title=title),
            "b": parsing.form_param(False, type="boolean", title=title),
        }
        dag = parsing.attach_form(_dag(f"d{i}"), form)
        assert dag.params.validate() == {"a": None, "b": False}
    assert resolved.count(title) == 2 + 20 * 2  # two first checks, then only the explicit validate() calls


def test_the_form_is_the_dags_and_serializes_with_it() -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    dag = parsing.attach_form(_dag("s"), {"tag": parsing.form_param(None, type=["null", "string"], maxLength=64)})
    assert dag.get_task("a").params == {}  # the task keeps no copy: Airflow merges the DAG's at run time
    back = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    param = back.params.get_param("tag")
    assert param.schema["maxLength"] == 64 and param.schema["$schema"] == parsing.PARAM_SCHEMA_DRAFT
