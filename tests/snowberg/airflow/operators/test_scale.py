"""Scale-out operators: ``sliced_load``'s wiring from a table config, and the push-down unload's settings.

The mapped slices run end to end in tests/snowberg/load/test_mapped.py (``dag.test()``) and the
unload operator's push-down run in tests/snowberg/load/test_unload.py.
"""

from __future__ import annotations

from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG

from snowberg.airflow.operators.arguments import operator_arguments
from snowberg.airflow.operators.incremental import SnowbergPlanOperator
from snowberg.airflow.operators.scale import SnowbergUnloadOperator, sliced_load
from snowberg.config.table_config import TableConfig

CFG = TableConfig.model_validate(
    {
        "name": "orders",
        "source": {"table": "DB.S.ORDERS"},
        "target": "shop.orders",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "merge_strategy": "copy_on_write",
        "batch_rows": 4000,
        "max_rows_per_slice": 5000,
        "catalog": "shop_lake",
        "unload": {"stage": "DB.S.STG", "stage_url": "s3://lake/unload"},
    }
)


def _dag(**kw: Any) -> tuple[DAG, Any]:
    with DAG("snowberg_orders", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        plan = SnowbergPlanOperator(task_id="plan", **operator_arguments(SnowbergPlanOperator, CFG))
        commit = sliced_load(CFG, plan, **kw)
    return dag, commit


def test_sliced_load_wires_plan_slices_mapped_loads_and_one_commit() -> None:
    dag, commit = _dag(max_parallel=2)
    assert [t.task_id for t in dag.topological_sort()] == ["plan", "plan_slices", "load_slice", "commit"]
    prepare, slices = dag.get_task("plan_slices"), dag.get_task("load_slice")
    assert prepare.max_rows_per_slice == 5000 and prepare.slice_method == "quantiles"
    assert slices.partial_kwargs["max_active_tis_per_dagrun"] == 2
    assert slices.partial_kwargs["batch_rows"] == 4000 and slices.partial_kwargs["catalog"] == "shop_lake"
    assert commit.merge_strategy == "copy_on_write" and commit.trigger_rule == "none_failed"


def test_the_mapped_slice_task_keeps_airflows_defaults() -> None:
    """A mapped task's defaults come from every ``__init__`` up to BaseOperator: none may hand it ``inlets=None``."""
    dag, _ = _dag()
    slices = dag.get_task("load_slice")
    assert slices.inlets == [] and slices.outlets == [] and slices.partial_kwargs["executor_config"] == {}


def test_sliced_load_can_override_the_tables_slice_size() -> None:
    dag, _ = _dag(max_rows_per_slice=2000, slice_method="range")
    prepare = dag.get_task("plan_slices")
    assert prepare.max_rows_per_slice == 2000 and prepare.slice_method == "range"
    with pytest.raises(ValueError, match="max_rows_per_slice"):
        _dag(max_rows_per_slice=10)  # a TableConfig allows 1,000 at least


def test_an_unknown_slice_method_fails_when_the_dag_is_built_naming_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"slice method must be one of \['quantiles', 'range'\], got 'even'"):
        _dag(slice_method="even")


def test_the_sliced_dag_serializes_with_the_mapped_tasks_settings() -> None:
    from airflow.serialization.serialized_objects import DagSerialization

    dag, _ = _dag(max_parallel=2)
    back = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    # The mapped task's arguments travel with the serialized DAG: the table's settings as JSON.
    partial = back.get_task("load_slice").partial_kwargs
    assert partial["cursor"]["column"] == "updated_at" and partial["source"] == {"table": "DB.S.ORDERS", "query": None}
    assert back.get_task("commit").catalog == "shop_lake"  # a template field


def test_the_unload_settings_are_checked_when_built_unless_templated() -> None:
    args = operator_arguments(SnowbergUnloadOperator, CFG)
    with pytest.raises(ValueError, match=r"unload\.stage: .*invalid stage"):
        SnowbergUnloadOperator(
            task_id="unload", window={}, **{**args, "unload": {"stage": "x;y", "stage_url": "s3://l"}}
        )
    templated = {"stage": "{{ params.stage }}", "stage_url": "s3://lake/unload"}
    op = SnowbergUnloadOperator(task_id="unload", window={}, **{**args, "unload": templated})
    assert op.unload == templated and "unload" in op.template_fields
    op.render_template_fields({"params": {"stage": "DB.S.OTHER_STG"}})
    built = op.build_config()
    assert built.unload is not None and built.unload.stage == "DB.S.OTHER_STG"
