"""A small window loads in the plan task (``inline_load_rows``): one task start, the same commit, the same event.

Through Airflow's own runner (``dag.test``): a run of a few new rows commits them in ``plan`` and skips
``load``, ``publish`` and ``table_health``; the table's Asset event is sent once per loading run and never by
an idle one; a health breach still runs ``table_health`` and fails it. By hand: a retried plan whose commit
landed before its publish loads every row once.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from snowberg.config.table_config import parse_config

REPO = Path(__file__).resolve().parents[4]


def _insert(sfdb: Any, first: int, n: int) -> None:
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} SELECT {first} + seq4(), seq4() / 4, "
        f"DATEADD(second, {first} + seq4(), '2026-01-01'::TIMESTAMP_NTZ) FROM TABLE(GENERATOR(ROWCOUNT => {n}))"
    )


@pytest.fixture
def inline_env(sfdb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str, catalog_env: Any) -> Any:
    sfdb.sql(f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), AMOUNT NUMBER(10,2), UPDATED_AT TIMESTAMP_NTZ(9))")
    _insert(sfdb, 1, 50)
    monkeypatch.setenv("AIRFLOW_CONN_SF_INLINE", sfdb.airflow_connection())
    catalog_env("inlinecat")
    entry = {
        "name": f"inline_{sfdb.name.lower()}",
        "source": {"table": sfdb.table("SRC")},
        "target": f"inl.{sfdb.name.lower()}",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "snowflake_conn_id": "sf_inline",
        "catalog": "inlinecat",
        "retries": 0,
        "inline_load_rows": 100,
    }
    return sfdb, entry


def _dag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: dict[str, Any]) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    dags = tmp_path / "dags"
    dags.mkdir(exist_ok=True)
    shutil.copy(REPO / "dags" / "snowberg_tables.py", dags)
    (tmp_path / "tables.yaml").write_text(yaml.safe_dump({"tables": [entry]}))
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(tmp_path / "tables.yaml"))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    bag = DagBag(dag_folder=str(dags))
    assert not bag.import_errors, bag.import_errors
    return bag.dags[f"snowberg_{entry['name']}"]


def _states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in run.get_task_instances()}


def _asset_events(uri: str) -> int:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        return (
            session.query(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .filter(AssetModel.uri == uri)
        ).count()


def _lake_ids(entry: dict[str, Any]) -> list[int]:
    from snowberg.iceberg.catalogs import open_catalog

    rows = open_catalog(entry["catalog"]).load_table(entry["target"]).scan().to_arrow().column("id").to_pylist()
    return sorted(int(r) for r in rows)


@pytest.mark.slow
def test_a_small_window_loads_in_the_plan_and_sends_the_asset_event_once(
    inline_env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.models import Variable

    from snowberg.airflow.dag_factory import table_asset

    sfdb, entry = inline_env
    cfg = parse_config({"tables": [entry]}).tables[0]
    dag = _dag(tmp_path, monkeypatch, entry)
    uri = table_asset(cfg).uri
    before = _asset_events(uri)

    first = dag.test()  # 50 rows, a first load: at most inline_load_rows
    assert first.state == "success"
    assert _states(first) == {"plan": "success", "load": "skipped", "publish": "skipped", "table_health": "skipped"}
    assert _lake_ids(entry) == list(range(1, 51))
    mirror = json.loads(Variable.get(cfg.variable_key))
    assert mirror["run_id"] == first.run_id
    assert _asset_events(uri) == before + 1

    idle = dag.test()
    assert idle.state == "success" and _states(idle)["plan"] == "success"
    assert _asset_events(uri) == before + 1  # an idle plan tells no downstream DAG that the table changed

    _insert(sfdb, 51, 3)  # a handful of changed rows
    busy = dag.test()
    assert busy.state == "success"
    assert _states(busy) == {"plan": "success", "load": "skipped", "publish": "skipped", "table_health": "skipped"}
    assert _lake_ids(entry) == list(range(1, 54))
    assert json.loads(Variable.get(cfg.variable_key))["run_id"] == busy.run_id
    assert _asset_events(uri) == before + 2
    # The table's UI page times the commit by the task that made it: here the plan.
    from airflow.utils.session import create_session

    from snowberg.airflow.ui_data import table_status

    with create_session() as session:
        page = table_status(cfg, session)
    assert page.run_id == busy.run_id and page.load_task_seconds is not None

    _insert(sfdb, 54, 101)  # above inline_load_rows: the load task loads it, publish sends the event
    big = dag.test()
    assert big.state == "success"
    assert _states(big) == {"plan": "success", "load": "success", "publish": "success", "table_health": "success"}
    assert _lake_ids(entry) == list(range(1, 155))
    assert _asset_events(uri) == before + 3


@pytest.mark.slow
def test_a_health_breach_after_an_inline_load_runs_table_health_and_fails_it(
    inline_env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sfdb, entry = inline_env
    entry = entry | {"health": {"max_small_file_ratio": 0.0}}  # every file of a 50-row table is small
    dag = _dag(tmp_path, monkeypatch, entry)
    run = dag.test()
    assert run.state == "failed"
    assert _states(run) == {"plan": "success", "load": "skipped", "publish": "skipped", "table_health": "failed"}
    assert _lake_ids(entry) == list(range(1, 51))


def test_a_retried_inline_plan_whose_commit_landed_loads_every_row_once(
    inline_env: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan task commits, then dies before publishing; its retry (same run id) plans again from the lake."""
    from snowberg.airflow.operators.arguments import operator_arguments
    from snowberg.airflow.operators.incremental import SnowbergPlanOperator

    sfdb, entry = inline_env
    cfg = parse_config({"tables": [entry]}).tables[0]
    monkeypatch.setattr("snowberg.iceberg.state.AirflowVariables", lambda: variables)  # no task supervisor here
    context = {
        "run_id": "scheduled__retried",
        "dag_run": SimpleNamespace(run_type="scheduled", clear_number=0),
        "params": {},
        "data_interval_start": None,
        "data_interval_end": None,
    }
    from airflow.sdk import Asset

    from snowberg.airflow.dag_factory import table_asset
    from snowberg.airflow.operators.incremental import inline_alias

    alias = inline_alias(cfg.name)
    arguments = operator_arguments(SnowbergPlanOperator, cfg) | {"asset_alias": alias, "asset": table_asset(cfg)}
    events: dict[Any, Any] = {alias: SimpleNamespace(add=lambda asset: sent.append(asset))}
    sent: list[Asset] = []
    context["outlet_events"] = events
    plan = SnowbergPlanOperator(task_id="plan", **arguments)
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:before_publish")
    with pytest.raises(RuntimeError, match="injected failure at before_publish"):
        plan.execute(context)
    assert _lake_ids(entry) == list(range(1, 51))  # committed; the Variable has not followed
    assert variables.get(cfg.variable_key) is None
    monkeypatch.delenv("SNOWBERG_FAULT")
    _insert(sfdb, 51, 2)  # rows that arrive between the tries

    assert sent == []
    window = SnowbergPlanOperator(task_id="plan", **arguments).execute(context)
    assert sent == [table_asset(cfg)]
    assert window["rows_in_window"] == 2  # planned from the committed watermark, not the first try's window
    assert _lake_ids(entry) == list(range(1, 53))  # every row once
    from snowberg.iceberg.catalogs import open_catalog
    from snowberg.iceberg.state import read_state

    st = read_state(open_catalog(entry["catalog"]).load_table(entry["target"]))
    assert st is not None
    assert json.loads(variables.get(cfg.variable_key))["watermark"] == st.watermark


def test_backfills_full_refreshes_dry_runs_and_large_windows_go_through_the_load_task() -> None:
    from airflow.sdk import Asset

    from snowberg.airflow.operators.incremental import SnowbergPlanOperator, inline_alias
    from snowberg.core.window import Mode, Window

    table = {"table_name": "t", "source": {"table": "D.S.T"}, "target": "n.t"}
    asset = {"asset_alias": inline_alias("t"), "asset": Asset(uri="iceberg://lake/n/t", name="t")}
    plan = SnowbergPlanOperator(task_id="plan", inline_load_rows=100, **table, **asset)

    def window(**kw: Any) -> Window:
        return Window(**({"mode": Mode.INCREMENTAL, "rows_in_window": 5, "run_id": "r"} | kw))

    assert plan.loads_inline(window())
    assert plan.loads_inline(window(rows_in_window=100))
    assert not plan.loads_inline(window(rows_in_window=101))
    assert not plan.loads_inline(window(mode=Mode.BACKFILL))
    assert not plan.loads_inline(window(mode=Mode.FULL_REFRESH, rows_in_window=None))
    assert not plan.loads_inline(window(dry_run=True))
    assert not plan.loads_inline(window(extra={"slice_bounds": ["2026-01-01"]}))
    assert not SnowbergPlanOperator(task_id="plan", inline_load_rows=0, **table, **asset).loads_inline(window())
    # Without an Asset to tell (a plan built by hand), the load task loads every window: publish sends the event.
    assert not SnowbergPlanOperator(task_id="plan", **table).loads_inline(window())


def test_the_factory_plan_loads_inline_except_with_mapped_slices(tmp_path: Path) -> None:
    from snowberg.airflow.dag_factory import build_dag, table_asset

    entry = {"name": "fac", "source": {"table": "D.S.T"}, "target": "n.t", "cursor": {"column": "u"}}
    cfg = parse_config({"tables": [entry]}).tables[0]
    plan = build_dag(cfg).get_task("plan")
    assert plan.inline_load_rows == 10_000 and plan.asset == table_asset(cfg)
    assert [o.name for o in plan.outlets] == [f"snowberg_inline_load_{cfg.name}"]
    assert build_dag(cfg).get_task("table_health").trigger_rule == "none_failed"
    sliced = parse_config({"tables": [entry | {"scale_out": True}]}).tables[0]
    assert build_dag(sliced).get_task("plan").asset_alias is None
    off = parse_config({"tables": [entry | {"inline_load_rows": 0}]}).tables[0]
    assert build_dag(off).get_task("plan").outlets == []
    assert os.environ.get("SNOWBERG_FAULT") is None
