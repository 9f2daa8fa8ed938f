"""The operators through Airflow's own runner (``dag.test``): logs, Variables, params."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from snowberg.config.table_config import parse_config

SECRET = "pw-Very-Secret-7f3a9"


@pytest.fixture
def table_env(sfdb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str, catalog_env: Any) -> Any:
    sfdb.sql(f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), AMOUNT NUMBER(10,2), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} SELECT seq4() + 1, seq4() / 4, "
        "DATEADD(second, seq4(), '2026-01-01'::TIMESTAMP_NTZ) "
        "FROM TABLE(GENERATOR(ROWCOUNT => 5000))"
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_SF_OPTEST", sfdb.airflow_connection(password=SECRET, TIMEZONE="America/Los_Angeles")
    )
    catalog_env("optest")
    entry = {
        "name": f"optest_{sfdb.name.lower()}",
        "source": {"table": sfdb.table("SRC")},
        "target": f"ops.{sfdb.name.lower()}",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "snowflake_conn_id": "sf_optest",
        "catalog": "optest",
        "retries": 0,
    }
    import shutil

    import yaml

    # dag.test() runs DAGs from the configured dags folder: give it one with
    # our thin DAG file and a config holding just this table.
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(Path(__file__).resolve().parents[4] / "dags" / "snowberg_tables.py", dags)
    (tmp_path / "tables.yaml").write_text(yaml.safe_dump({"tables": [entry]}))
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(tmp_path / "tables.yaml"))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    return sfdb, parse_config({"tables": [entry]}).tables[0]


def _dag(cfg: Any) -> Any:
    import os

    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    return bag.dags[cfg.dag_id]


def test_dag_run_loads_logs_progress_and_never_the_password(
    table_env: Any, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    from airflow.models import Variable

    sfdb, cfg = table_env
    caplog.set_level("DEBUG")
    dag = _dag(cfg)
    dr = dag.test()
    assert dr.state == "success"
    out = capfd.readouterr()
    text = out.out + out.err + caplog.text
    assert SECRET not in text
    assert "rows/s" in text and "5,000 rows" in text  # progress: rows, bytes, rate
    assert "rows loaded 5000" in text
    mirror = json.loads(Variable.get(cfg.variable_key))
    assert mirror["run_id"] == dr.run_id

    # second run: nothing new, no commit, the mirror stays in sync
    dr2 = dag.test()
    assert dr2.state == "success"
    assert json.loads(Variable.get(cfg.variable_key))["snapshot_id"] == mirror["snapshot_id"]
    # ... and the run ended after its plan: the rest is skipped (no task process), the plan recorded that the
    # lake is current (a Variable, no Iceberg commit) and still hands its window on as XCom
    states = {ti.task_id: ti.state for ti in dr2.get_task_instances()}
    assert states.pop("plan") == "success" and set(states.values()) == {"skipped"}, states
    assert {"load", "publish"} <= set(states)
    proof = json.loads(Variable.get(cfg.variable_key.replace("__watermark", "__current")))
    assert proof["run_id"] == dr2.run_id and proof["watermark"] == mirror["watermark"]
    plan_ti = next(ti for ti in dr2.get_task_instances() if ti.task_id == "plan")
    assert plan_ti.xcom_pull(task_ids="plan")["rows_in_window"] == 0

    # a dry-run backfill writes nothing and leaves the watermark alone
    dr3 = dag.test(
        run_conf={"window_start": "2026-01-01T00:00:00Z", "window_end": "2026-01-01T00:10:00Z", "dry_run": True}
    )
    assert dr3.state == "success"
    assert json.loads(Variable.get(cfg.variable_key)) == mirror | {"run_id": mirror["run_id"]}


def test_bad_params_fail_before_any_sql(table_env: Any, capfd: pytest.CaptureFixture[str]) -> None:
    sfdb, cfg = table_env
    dag = _dag(cfg)
    dr = dag.test(run_conf={"window_start": "2026-01-02T00:00:00Z", "window_end": "2026-01-01T00:00:00Z"})
    assert dr.state == "failed"
    text = "".join(capfd.readouterr())
    assert "must be after window_start" in text
    assert "extracting" not in text and "planned" not in text


def test_operators_built_by_hand_plan_load_and_publish(
    table_env: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The explicit arguments alone carry the table: plan → load → publish run outside any DAG file."""
    from types import SimpleNamespace

    from snowberg.airflow.operators.incremental import (
        SnowbergLoadOperator,
        SnowbergPlanOperator,
        SnowbergPublishOperator,
    )

    sfdb, cfg = table_env
    monkeypatch.setattr("snowberg.iceberg.state.AirflowVariables", lambda: variables)  # no task supervisor here
    table = {"table_name": cfg.name, "source": {"table": sfdb.table("SRC")}, "target": cfg.target, "catalog": "optest"}
    keyed = {"cursor": {"column": "updated_at"}, "primary_key": ["id"], "snowflake_conn_id": "sf_optest"}
    context = {
        "run_id": "manual__by_hand",
        "dag_run": SimpleNamespace(run_type="manual", clear_number=0),
        "params": {},
        "data_interval_start": None,
        "data_interval_end": None,
    }
    window = SnowbergPlanOperator(task_id="plan", **table, **keyed).execute(context)
    assert window["rows_in_window"] == 5000
    loaded = SnowbergLoadOperator(task_id="load", window=window, **table, **keyed).execute(context)
    assert loaded["status"] == "committed" and loaded["rows"] == 5000
    published = SnowbergPublishOperator(task_id="publish", window=window, **table).execute(context)
    assert published["rows_loaded"] == 5000 and published["variable"] == cfg.variable_key
    assert json.loads(variables.get(cfg.variable_key))["run_id"] == "manual__by_hand"
    assert (
        json.loads(variables.get(cfg.variable_key.replace("__watermark", "__current")))["run_id"] == "manual__by_hand"
    )

    # Nothing new: a plan with nothing downstream records the proof and returns its window (nothing to skip).
    idle = SnowbergPlanOperator(task_id="plan", **table, **keyed).execute(context | {"run_id": "manual__idle"})
    assert idle["rows_in_window"] == 0
    assert json.loads(variables.get(cfg.variable_key.replace("__watermark", "__current")))["run_id"] == "manual__idle"


def test_a_cursorless_tables_unchanged_source_ends_the_run_after_the_plan(table_env: Any, tmp_path: Path) -> None:
    """Through Airflow's runner: a full refresh records the source's version; the next run, unchanged, is idle.

    The version is the emulator's own: it serves each table's last commit time as LAST_ALTERED
    (snowberg.local.emulator, tested against Snowflake's documented semantics in
    tests/snowberg/local/test_emulator.py). A changed source reloads: the UPDATE keeps the row count,
    so LAST_ALTERED alone tells the change.
    """
    import yaml
    from airflow.models import Variable

    sfdb, cfg = table_env
    config = yaml.safe_load((tmp_path / "tables.yaml").read_text())
    del config["tables"][0]["cursor"]
    (tmp_path / "tables.yaml").write_text(yaml.safe_dump(config))
    dag = _dag(cfg)
    first = dag.test()
    assert first.state == "success"
    assert {ti.task_id: ti.state for ti in first.get_task_instances()}["publish"] == "success"
    idle = dag.test()
    states = {ti.task_id: ti.state for ti in idle.get_task_instances()}
    assert states.pop("plan") == "success" and set(states.values()) == {"skipped"}, states
    proof = json.loads(Variable.get(cfg.variable_key.replace("__watermark", "__current")))
    assert proof["run_id"] == idle.run_id
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET AMOUNT = AMOUNT + 1 WHERE ID = 1")  # the next run reloads
    again = dag.test()
    assert {ti.task_id: ti.state for ti in again.get_task_instances()}["publish"] == "success"


def test_the_load_operator_backfills_an_added_column_after_its_commit_and_not_on_a_retry(
    table_env: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """on_column_added: backfill through the operator: the run that adds the column fills it for the 5,000 rows."""
    from types import SimpleNamespace

    from snowberg.airflow.operators.incremental import SnowbergLoadOperator, SnowbergPlanOperator
    from snowberg.iceberg.catalogs import open_catalog

    sfdb, cfg = table_env
    monkeypatch.setattr("snowberg.iceberg.state.AirflowVariables", lambda: variables)
    table = {"table_name": cfg.name, "source": {"table": sfdb.table("SRC")}, "target": cfg.target, "catalog": "optest"}
    keyed = {"cursor": {"column": "updated_at"}, "primary_key": ["id"], "snowflake_conn_id": "sf_optest"}
    ctx = {"dag_run": SimpleNamespace(run_type="manual", clear_number=0), "params": {}}
    ctx |= {"data_interval_start": None, "data_interval_end": None}
    first = ctx | {"run_id": "manual__1"}
    window = SnowbergPlanOperator(task_id="plan", **table, **keyed).execute(first)
    load = SnowbergLoadOperator(task_id="load", window=window, on_column_added="backfill", **table, **keyed)
    assert "column_backfill" not in load.execute(first)  # a first load adds no column
    sfdb.sql(f"ALTER TABLE {sfdb.table('SRC')} ADD COLUMN C VARCHAR(10) DEFAULT 'x'")
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} (ID, AMOUNT, UPDATED_AT, C) "
        "VALUES (5001, 1, CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ), 'y')"
    )
    second = ctx | {"run_id": "manual__2"}
    window = SnowbergPlanOperator(task_id="plan", **table, **keyed).execute(second)
    load = SnowbergLoadOperator(task_id="load", window=window, on_column_added="backfill", **table, **keyed)
    done = load.execute(second)
    assert done["status"] == "committed" and done["rows"] == 1
    filled = done["column_backfill"]
    assert (filled["status"], filled["columns"], filled["rows"], filled["rows_found"]) == (
        "committed",
        ["c"],
        5000,
        5000,
    )
    assert filled["queries"] == 1  # 5,000 keys fit one query's batch
    rows = open_catalog("optest").load_table(cfg.target).scan(selected_fields=("id", "c")).to_arrow().to_pylist()
    assert len(rows) == 5001 and {r["c"] for r in rows if r["id"] <= 5000} == {"x"}
    retry = load.execute(second)  # the task's retry: its load and the backfill had both committed
    assert retry["status"] == "already_committed" and "column_backfill" not in retry
