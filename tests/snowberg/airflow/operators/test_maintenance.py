"""The maintenance DAG through Airflow's own runner: compaction + expiry keep the Variable in step,
a manual run rolls back (table, watermark, Variable) and the next load reloads the window once; tags."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from snowberg.config.table_config import parse_config
from snowberg.iceberg import state

NOW = "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)"


@pytest.fixture
def env(sfdb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str, catalog_env: Any) -> Any:
    sfdb.sql(f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} SELECT seq4() + 1, 'a', '2026-01-01'::TIMESTAMP_NTZ "
        "FROM TABLE(GENERATOR(ROWCOUNT => 50))"
    )
    monkeypatch.setenv("AIRFLOW_CONN_SF_MAINT", sfdb.airflow_connection(TIMEZONE="UTC"))
    catalog_env("maint")
    entry = {
        "name": f"mt_{sfdb.name.lower()}",
        "source": {"table": sfdb.table("SRC")},
        "target": f"mt.{sfdb.name.lower()}",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "snowflake_conn_id": "sf_maint",
        "catalog": "maint",
        "retries": 0,
        "maintenance": {"snapshot_retention": "0s", "min_snapshots": 1},
    }
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(Path(__file__).resolve().parents[4] / "dags" / "snowberg_tables.py", dags)
    (tmp_path / "tables.yaml").write_text(yaml.safe_dump({"tables": [entry]}))
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(tmp_path / "tables.yaml"))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    return sfdb, parse_config({"tables": [entry]}).tables[0]


def _dags(cfg: Any) -> tuple[Any, Any]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    return bag.dags[cfg.dag_id], bag.dags[f"{cfg.dag_id}__maintenance"]


def _table(cfg: Any) -> Any:
    from snowberg.iceberg.catalogs import open_catalog
    from snowberg.iceberg.tables import load_table_or_none

    return load_table_or_none(open_catalog("maint"), cfg)


def _lake(cfg: Any) -> list[tuple[int, str]]:
    return sorted((int(r["id"]), r["note"]) for r in _table(cfg).scan().to_arrow().to_pylist())


def _source(sfdb: Any) -> list[tuple[int, str]]:
    return sorted((int(i), n) for i, n in sfdb.sql(f"SELECT ID, NOTE FROM {sfdb.table('SRC')}"))


def _change(sfdb: Any, ids: str, note: str) -> None:
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET NOTE = '{note}', UPDATED_AT = {NOW} WHERE ID IN ({ids})")
    time.sleep(0.01)


def test_maintenance_dag_compacts_expires_then_rolls_back_and_tags(
    env: Any, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    from airflow.models import Variable

    sfdb, cfg = env
    load_dag, maint_dag = _dags(cfg)
    assert [t.task_id for t in maint_dag.topological_sort()] == [
        "manual",
        "compact",
        "expire_snapshots",
        "remove_orphan_files",
        "table_health",
    ]
    assert load_dag.test().state == "success"
    _change(sfdb, "1, 2", "b")
    run2 = load_dag.test()
    _change(sfdb, "3", "c")
    assert load_dag.test().state == "success"
    files_before = len(_table(cfg).inspect.files())

    # The progress lines reach the task log (stdout under dag.test) or, once another test
    # configured logging in this process, the log records: read both.
    with caplog.at_level("INFO", logger="snowberg"):
        dr = maint_dag.test()
    assert dr.state == "success"
    text = "".join(capfd.readouterr()) + caplog.text
    assert "compact: committed replace snapshot" in text and "expire: removed" in text and "orphans:" in text
    t = _table(cfg)
    assert len(t.inspect.files()) < files_before and len(list(t.snapshots())) == 1
    st = state.read_state(t)
    assert json.loads(Variable.get(cfg.variable_key))["snapshot_id"] == st.snapshot_id
    assert _lake(cfg) == _source(sfdb)
    _change(sfdb, "4", "d")
    assert load_dag.test().state == "success"  # expiry and compaction never break the next load
    assert _lake(cfg) == _source(sfdb)

    # Manual run: roll back before the last load; the Variable follows; the next load reloads it once.
    last = state.read_state(_table(cfg)).run_id
    dry = maint_dag.test(run_conf={"rollback_before_run": last, "dry_run": True})
    assert dry.state == "success" and state.read_state(_table(cfg)).run_id == last
    # (dag.test() keeps an earlier run's conf in the DAG's params: say every value)
    dr = maint_dag.test(run_conf={"rollback_before_run": last, "dry_run": False})
    assert dr.state == "success"
    st = state.read_state(_table(cfg))
    assert st.run_id != last and json.loads(Variable.get(cfg.variable_key))["snapshot_id"] == st.snapshot_id
    assert dict(_lake(cfg))[4] == "a"
    assert load_dag.test().state == "success"
    assert _lake(cfg) == _source(sfdb)

    # Tag the current snapshot from a manual run; it survives the next expiry.
    head = _table(cfg).current_snapshot().snapshot_id
    assert maint_dag.test(run_conf={"tag": "after-fix", "rollback_before_run": None}).state == "success"
    _change(sfdb, "5", "e")
    assert load_dag.test().state == "success"
    assert maint_dag.test(run_conf={"tag": None}).state == "success"
    t = _table(cfg)
    assert t.metadata.refs["after-fix"].snapshot_id == head and t.snapshot_by_id(head) is not None
    assert run2.state == "success"


def test_two_rollback_targets_fail_the_manual_run(env: Any) -> None:
    sfdb, cfg = env
    load_dag, maint_dag = _dags(cfg)
    assert load_dag.test().state == "success"
    dr = maint_dag.test(run_conf={"rollback_to_tag": "x", "rollback_before_run": "y"})
    assert dr.state == "failed"


@pytest.mark.slow  # six DAG runs through Airflow's runner: about a minute on a shared machine
def test_a_compaction_killed_after_its_commit_still_leaves_the_variable_following(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compact task dies after its commit (retried: nothing left to compact); expiry then runs.

    Before the fix only a compaction that committed in the same attempt moved the Variable: it kept naming
    the load's snapshot, the expiry removed that snapshot, and the next load failed ("ahead of the table").
    """
    from airflow.models import Variable

    sfdb, cfg = env
    load_dag, maint_dag = _dags(cfg)
    assert load_dag.test().state == "success"
    _change(sfdb, "1, 2", "b")
    assert load_dag.test().state == "success"
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:compact_after_commit")
    assert maint_dag.test().state == "failed"  # compact committed, then died
    monkeypatch.delenv("SNOWBERG_FAULT")
    assert _table(cfg).current_snapshot().summary.operation.value == "replace"
    assert maint_dag.test().state == "success"  # nothing to compact; expiry keeps 1 snapshot
    t = _table(cfg)
    assert len(list(t.snapshots())) == 1
    assert json.loads(Variable.get(cfg.variable_key))["snapshot_id"] == state.read_state(t).snapshot_id
    _change(sfdb, "3", "c")
    assert load_dag.test().state == "success"
    assert _lake(cfg) == _source(sfdb)


# ---------------------------------------------------------------- the trigger form (issue 20, items 9 and 10)


def _validated_by_airflow(conf: dict[str, Any]) -> dict[str, Any]:
    """The params a run gets for ``conf``, as Airflow's API server checks them when a run is triggered.

    ``create_dagrun`` merges the conf into the serialized DAG's params and validates them against each
    Param's JSON schema (a 400 from the REST API, an error in the UI form).
    """
    from airflow.sdk import DAG
    from airflow.serialization.serialized_objects import DagSerialization

    from snowberg.airflow.operators.maintenance import maintenance_params

    dag = DAG("form", schedule=None, params=maintenance_params())
    served = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    return dict(served.params.deep_merge(conf).validate())


def test_snapshot_ids_from_the_trigger_form_are_digits_as_text_and_stay_exact() -> None:
    """Before the fix the snapshot params were JSON integers: a 19-digit id typed into the form is rounded by
    the browser (2**53), and the digits sent as text were refused by the schema."""
    from snowberg.airflow.operators.maintenance import maintenance_params, manual_request

    big = "6412771532345617081"
    for name in ("rollback_to_snapshot", "tag_snapshot"):
        schema = maintenance_params()[name].schema
        assert schema["type"] == ["null", "string"] and schema["pattern"] == "^[0-9]{1,19}$"
    params = _validated_by_airflow({"rollback_to_snapshot": big, "tag_snapshot": big})
    assert params["rollback_to_snapshot"] == big
    asked = manual_request(params)
    assert asked["rollback_to_snapshot"] == 6412771532345617081 and asked["tag_snapshot"] == 6412771532345617081
    with pytest.raises(Exception, match="is not of type"):
        _validated_by_airflow({"rollback_to_snapshot": int(big)})  # a JSON number is refused


def test_form_values_the_json_schema_lets_through_are_refused_by_the_task() -> None:
    """A JSON schema ``pattern`` is a search and ``$`` matches before a trailing newline: the task fullmatches."""
    from snowberg.airflow.operators.maintenance import maintenance_params, manual_request

    pattern = maintenance_params()["tag"].schema["pattern"]
    assert pattern.startswith("^") and pattern.endswith("$")
    for name, value in (("tag", "v1\n"), ("rollback_to_snapshot", "12\n")):
        params = _validated_by_airflow({name: value})  # the schema accepts it …
        assert params[name] == value
        with pytest.raises(ValueError, match=name):
            manual_request(params)  # … the task does not


def test_a_short_orphan_age_fails_the_operator_at_parse_and_the_override_reaches_the_sweep(
    tmp_path: Path, catalog_env: Any
) -> None:
    """``orphan_age`` under a day is refused when the DAG is parsed, naming the override; with the override, the
    sweep step runs with that age (and deletes a leftover that old)."""
    from datetime import UTC, datetime, timedelta

    import pyarrow as pa

    from snowberg.airflow.operators.maintenance import SnowbergMaintenanceOperator
    from snowberg.iceberg.catalogs import open_catalog

    kw: dict[str, Any] = {
        "task_id": "remove_orphan_files",
        "step": "remove_orphan_files",
        "table_name": "t",
        "source": {"table": "DB.S.T"},
        "target": "ns.t",
        "catalog": "maint",
    }
    with pytest.raises(ValueError, match=r"maintenance\.orphan_age.*at least 1 day.*allow_short_orphan_age: true"):
        SnowbergMaintenanceOperator(**kw, maintenance={"orphan_age": "0s"})

    catalog_env("maint")
    catalog = open_catalog("maint")
    catalog.create_namespace("ns")
    t = catalog.create_table("ns.t", schema=pa.schema([pa.field("id", pa.int64())]))
    t.append(pa.table({"id": [1, 2]}), snapshot_properties={state.WATERMARK: "2", state.RUN_ID: "r1"})
    stray = Path(t.location().removeprefix("file://")) / "data" / "00000-killed-run.parquet"
    stray.write_bytes(b"x")
    two_hours_ago = (datetime.now(UTC) - timedelta(hours=2)).timestamp()
    os.utime(stray, (two_hours_ago, two_hours_ago))
    op = SnowbergMaintenanceOperator(**kw, maintenance={"orphan_age": "1h", "allow_short_orphan_age": True})
    out = op.execute({"params": {}})
    assert out["orphans"] == [f"file://{stray}"] and out["deleted"] == 1 and not stray.exists()


@pytest.mark.slow
def test_the_maintenance_dag_compacts_after_a_backfill_on_a_merge_on_read_table(env: Any) -> None:
    """The issue's case through Airflow: merges leave position deletes, a backfill removes a data file
    copy-on-write; the next maintenance run compacted nothing ever again ("would keep 1 of 2 delete files")."""
    from snowberg.iceberg import rollback

    sfdb, cfg = env
    load_dag, maint_dag = _dags(cfg)
    assert load_dag.test().state == "success"
    _change(sfdb, "1, 2", "b")
    assert load_dag.test().state == "success"
    _change(sfdb, "1, 3", "c")  # one delete manifest: a delete file for the first file and one for the second
    assert load_dag.test().state == "success"
    backfill = {"window_start": "2025-12-31T00:00:00Z", "window_end": "2026-01-02T00:00:00Z", "full_refresh": False}
    assert load_dag.test(run_conf=backfill).state == "success"  # the first file goes, copy-on-write
    t = _table(cfg)
    assert rollback.plan_rollback(t, cfg.name, to_snapshot=t.current_snapshot().snapshot_id).rows_now == 50

    assert maint_dag.test(run_conf={"dry_run": False}).state == "success"
    t = _table(cfg)
    assert t.current_snapshot().summary.additional_properties.get("snowberg.maintenance") == "compact"
    assert t.inspect.delete_files().num_rows == 0
    assert _lake(cfg) == _source(sfdb)
