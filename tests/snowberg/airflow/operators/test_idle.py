"""Ending an idle run (``snowberg.airflow.operators.idle``): the tasks after the one that found nothing are skipped,
teardown tasks still run, as the module promises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

DAG_FILE = '''
from typing import Any

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, BaseOperator
from airflow.sdk.bases.skipmixin import SkipMixin

from snowberg.airflow.operators.idle import skip_downstream


class IdlePlan(BaseOperator, SkipMixin):
    """A plan that finds nothing new and ends the run, as the plan and consume operators do."""

    def execute(self, context: Any) -> Any:
        skip_downstream(self, context, result={"rows_in_window": 0}, why="nothing new")


with DAG(dag_id="snowberg_idle", schedule=None) as dag:
    plan = IdlePlan(task_id="plan")
    load = EmptyOperator(task_id="load")
    publish = EmptyOperator(task_id="publish")
    cleanup = EmptyOperator(task_id="cleanup").as_teardown()
    plan >> load >> publish >> cleanup
'''


@pytest.fixture
def idle_dag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """plan (finds nothing new) >> load >> publish >> cleanup, where cleanup is a teardown task."""
    from airflow import settings
    from airflow.dag_processing.dagbag import DagBag

    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "idle_dag.py").write_text(DAG_FILE)
    # dag.test() syncs the dags-folder bundle, whose path Airflow read into settings when it was imported.
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    monkeypatch.setattr(settings, "DAGS_FOLDER", str(dags))
    bag = DagBag(dag_folder=str(dags))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["snowberg_idle"]


def test_the_skip_leaves_teardown_tasks_out(idle_dag: Any) -> None:
    from airflow.sdk.exceptions import DownstreamTasksSkipped

    pushed: dict[str, Any] = {}

    class TI:
        map_index = -1

        def xcom_push(self, key: str, value: Any) -> None:
            pushed[key] = value

    with pytest.raises(DownstreamTasksSkipped) as skipped:
        idle_dag.get_task("plan").execute({"ti": TI()})
    assert sorted(skipped.value.tasks) == ["load", "publish"]
    assert pushed["return_value"] == {"rows_in_window": 0}


@pytest.mark.slow  # one DAG run through Airflow's runner (it syncs the DAG to the metadata database first)
def test_an_idle_run_skips_the_work_and_its_teardown_still_runs(airflow_db: str, idle_dag: Any) -> None:
    """Through Airflow's own runner: plan succeeds, load and publish are skipped, the teardown runs."""
    dr = idle_dag.test()
    states = {ti.task_id: ti.state for ti in dr.get_task_instances()}
    assert states == {"plan": "success", "load": "skipped", "publish": "skipped", "cleanup": "success"}, states
