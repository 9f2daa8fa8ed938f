"""Lineage through ``airflow dags test``: every COMPLETE event arrives, with its facets, inside a 1 s budget.

The OpenLineage provider's listener builds a task's COMPLETE event in a process
it forks after the task and kills after ``[openlineage] execution_timeout``
seconds ("OpenLineage process ... expired"). Here that budget is cut to 1 s
(``AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT=1``) and events go to the file
transport, in real ``airflow dags test`` processes over the real DAG files:

* a single-task load (``SnowbergLoadOperator``),
* a scaled-out load whose commit task holds no Snowflake connection
  (``SnowbergSliceCommitOperator``, after mapped slice loads),
* a lake → native Snowflake sync (``IcebergToSnowflakeNativeOperator``).

The stream load, the push-down unload and the lake → Horizon sync need
Snowflake features the emulator lacks (streams, ``COPY INTO @stage``, a
Horizon catalog); their gathering is tested in tests/snowberg/airflow/test_lineage.py
and their facet building shares ``build_lineage`` with these.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROWS = 2_500


@pytest.fixture
def project(sfdb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str, catalog_env: Any) -> Any:
    sfdb.sql(f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), AMOUNT NUMBER(12,2), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} SELECT seq4() + 1, (seq4() % 1000) / 100, "
        f"DATEADD(second, seq4(), '2026-01-01'::TIMESTAMP_NTZ) FROM TABLE(GENERATOR(ROWCOUNT => {ROWS}))"
    )
    s = sfdb.name.lower()
    monkeypatch.setenv("AIRFLOW_CONN_SF_OL", sfdb.airflow_connection())
    catalog_env("ollake")
    base = {
        "source": {"table": sfdb.table("SRC")},
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "number_as_long": ["id"],
        "snowflake_conn_id": "sf_ol",
        "catalog": "ollake",
        "schedule": None,
        "retries": 0,
    }
    tables = [
        {**base, "name": f"ol_single_{s}", "target": f"ol.single_{s}"},
        {
            **base,
            "name": f"ol_scaled_{s}",
            "target": f"ol.scaled_{s}",
            "max_rows_per_slice": 1_000,
            "scale_out": True,
        },
    ]
    syncs = {
        "syncs": [
            {
                "name": f"ol_copy_{s}",
                "source": {"catalog": "ollake", "table": f"ol.single_{s}"},
                "target": {"kind": "native", "snowflake_conn_id": "sf_ol", "table": sfdb.table("COPY")},
                "schedule": None,
            }
        ]
    }
    dags = tmp_path / "dags"
    dags.mkdir()
    for f in ("snowberg_tables.py", "snowberg_syncs.py"):
        shutil.copy(REPO / "dags" / f, dags)
    (tmp_path / "tables.yaml").write_text(yaml.safe_dump({"tables": tables}, sort_keys=False))
    (tmp_path / "syncs.yaml").write_text(yaml.safe_dump(syncs, sort_keys=False))
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(tmp_path / "tables.yaml"))
    monkeypatch.setenv("SNOWBERG_SYNCS_CONFIG", str(tmp_path / "syncs.yaml"))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    return s, tmp_path


def dags_test(dag_id: str, events: Path, *, lineage: bool = True) -> tuple[float, str]:
    """``airflow dags test DAG_ID`` in its own process; (wall seconds, its output)."""
    env = dict(os.environ)
    env["AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT"] = "1"
    env["AIRFLOW__OPENLINEAGE__NAMESPACE"] = "snowberg_dags_test"
    if lineage:
        env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(
            {"type": "file", "log_file_path": str(events), "append": True}
        )
    else:
        env["AIRFLOW__OPENLINEAGE__DISABLED"] = "True"
    exe = Path(sys.executable).with_name("airflow")
    started = time.monotonic()
    done = subprocess.run(
        [str(exe), "dags", "test", dag_id], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    seconds = time.monotonic() - started
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    return seconds, out


def complete(events: Path, job: str) -> list[dict[str, Any]]:
    lines = events.read_text().splitlines() if events.exists() else []
    return [
        e for e in map(json.loads, lines) if e.get("eventType") == "COMPLETE" and e.get("job", {}).get("name") == job
    ]


def _input_names(event: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event["inputs"]]


@pytest.mark.timeout(1200)
def test_every_lineage_event_arrives_within_a_one_second_listener_budget(project: Any, sfdb: Any) -> None:
    s, tmp_path = project
    events = tmp_path / "events.jsonl"
    src_name = ("snowflake://fakesnow.us-west-1.aws", sfdb.table("SRC"))

    # 1. A single-task load. A window of ROWS rows is below inline_load_rows: the plan task loads it, and its
    # COMPLETE event is the one that carries the lineage (the skipped load task sends none).
    _, out = dags_test(f"snowberg_ol_single_{s}", events)
    assert "expired" not in out, out[-4000:]
    loads = [
        e
        for e in map(json.loads, events.read_text().splitlines())
        if e.get("eventType") == "COMPLETE"
        and e["job"]["name"].startswith(f"snowberg_ol_single_{s}.")
        and e.get("outputs")
    ]
    assert [e["job"]["name"] for e in loads] == [f"snowberg_ol_single_{s}.plan"]
    [load] = loads
    assert _input_names(load) == [src_name]
    assert [f["name"] for f in load["inputs"][0]["facets"]["schema"]["fields"]] == ["ID", "AMOUNT", "UPDATED_AT"]
    [out_ds] = load["outputs"]
    assert out_ds["namespace"] == "file" and out_ds["name"].endswith(f"/ol/single_{s}")
    assert out_ds["facets"]["symlinks"]["identifiers"][0]["name"] == f"ol.single_{s}"
    stats = out_ds["outputFacets"]["outputStatistics"]
    assert stats["rowCount"] == ROWS and stats["size"] > 0 and stats["fileCount"] >= 1
    assert out_ds["facets"]["columnLineage"]["fields"]["amount"]["inputFields"][0]["field"] == "AMOUNT"

    # 2. A scaled-out load: mapped slices, then one commit task (no Snowflake connection of its own).
    _, out = dags_test(f"snowberg_ol_scaled_{s}", events)
    assert "expired" not in out, out[-4000:]
    commits = [
        e
        for e in map(json.loads, events.read_text().splitlines())
        if e.get("eventType") == "COMPLETE"
        and e["job"]["name"].startswith(f"snowberg_ol_scaled_{s}.")
        and e.get("outputs")
    ]
    assert len(commits) == 1, [e["job"]["name"] for e in commits]
    [commit] = commits
    assert _input_names(commit) == [src_name]
    assert commit["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == ROWS
    assert commit["outputs"][0]["name"].endswith(f"/ol/scaled_{s}")

    # 3. The lake → native Snowflake sync of the first table.
    _, out = dags_test(f"snowberg_sync_ol_copy_{s}", events)
    assert "expired" not in out, out[-4000:]
    [sync] = complete(events, f"snowberg_sync_ol_copy_{s}.sync")
    assert _input_names(sync) == [(out_ds["namespace"], out_ds["name"])]
    [copy] = sync["outputs"]
    assert (copy["namespace"], copy["name"]) == (src_name[0], sfdb.table("COPY"))
    assert copy["outputFacets"]["outputStatistics"]["rowCount"] == ROWS
    assert "ID" in {f["name"] for f in copy["facets"]["schema"]["fields"]}
