"""Freshness knows a quiet source from a stuck pipeline (issue 22, item 3), through real DAG runs.

* a source with no changes for longer than the SLA: every load run is green, the checks DAG does not alert,
  because each idle run proved the lake current as of its plan;
* the load DAG not running (paused) for longer than the SLA: the checks DAG alerts.

The idle run also ends after its plan (item 2): its downstream tasks are skipped (not run, not failed),
and it sends exactly one statement to Snowflake.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from table_dags import table_dags

# Long enough for the idle run and the checks run that follow its plan (a few seconds on a slow CI machine),
# short enough that the two waits past it keep this test under half a minute.
SLA_SECONDS = 10


def _states(run: Any) -> dict[str, str]:
    return {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in run.get_task_instances()}


def _count_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement any snowberg Snowflake connection executes in this process (dag.test runs tasks in-process)."""
    from snowberg.snowflake import hook

    seen: list[str] = []
    original = hook.SnowbergSnowflakeHook.get_conn

    def get_conn(self: Any) -> Any:
        conn = original(self)
        make_cursor = conn.cursor

        def cursor(*args: Any, **kwargs: Any) -> Any:
            cur = make_cursor(*args, **kwargs)
            execute = cur.execute

            def counted(command: str, *a: Any, **kw: Any) -> Any:
                seen.append(command)
                return execute(command, *a, **kw)

            cur.execute = counted
            return cur

        conn.cursor = cursor
        return conn

    monkeypatch.setattr(hook.SnowbergSnowflakeHook, "get_conn", get_conn)
    return seen


@pytest.mark.slow
def test_quiet_source_stays_green_and_a_stopped_pipeline_alerts(
    sfdb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str, catalog_env: Any
) -> None:
    src = sfdb.table("SRC")
    sfdb.sql(f"CREATE TABLE {src} (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    rows = ", ".join(f"({i}, '2026-01-01 00:00:{i:02d}'::TIMESTAMP_NTZ)" for i in range(50))
    sfdb.sql(f"INSERT INTO {src} VALUES {rows}")
    assert sfdb.sql(f"SELECT COUNT(*) FROM {src}") == [(50,)]
    monkeypatch.setenv("AIRFLOW_CONN_SF_QUIET", sfdb.airflow_connection(password="pw"))
    catalog_env("quietcat")
    name = f"quiet_{sfdb.name.lower()}"
    entry = {
        "name": name,
        "source": {"table": src},
        "target": f"quiet.{sfdb.name.lower()}",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "snowflake_conn_id": "sf_quiet",
        "catalog": "quietcat",
        "retries": 0,
        "freshness_sla": f"{SLA_SECONDS}s",
    }
    bag = table_dags(tmp_path, monkeypatch, entry)
    load, checks = bag[f"snowberg_{name}"], bag[f"snowberg_{name}__checks"]

    first = load.test()
    assert first.state == "success", _states(first)
    # 50 rows: at most inline_load_rows, so the plan task loaded them and skipped the rest (docs/performance.md)
    assert _states(first)["plan"] == "success" and _states(first)["load"] == "skipped"

    # The source stays quiet for longer than the SLA; the load keeps running on its schedule.
    time.sleep(SLA_SECONDS + 2)
    statements = _count_statements(monkeypatch)
    second = load.test()
    states = _states(second)
    assert second.state == "success", states
    assert states["plan"] == "success"
    # The idle run ends after its plan: nothing else starts, and the UI shows skipped.
    assert {t: s for t, s in states.items() if t != "plan"} == dict.fromkeys(set(states) - {"plan"}, "skipped")
    # The policy query (INFORMATION_SCHEMA.POLICY_REFERENCES) and the plan query.
    assert len(statements) == 2 and "POLICY_REFERENCES" in statements[0], statements
    # The checks DAG (where freshness alerts) is green: the idle run proved the lake current.
    quiet = checks.test()
    assert quiet.state == "success", _states(quiet)
    assert _states(quiet)["check_freshness"] == "success"

    # The load DAG is paused (no run at all) for longer than the SLA: the checks DAG alerts.
    time.sleep(SLA_SECONDS + 2)
    stuck = checks.test()
    assert stuck.state == "failed"
    assert _states(stuck)["check_freshness"] == "failed"
