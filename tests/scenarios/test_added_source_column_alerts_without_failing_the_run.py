"""A schema_change alert reaches the table's channels from inside a real task run, and the run succeeds."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        _Receiver.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_an_added_source_column_alerts_without_failing_the_run(
    sfdb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str, catalog_env: Any
) -> None:
    src = sfdb.table("SRC")
    sfdb.sql(f"CREATE TABLE {src} (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(f"INSERT INTO {src} VALUES (1, '2026-01-01'::TIMESTAMP_NTZ)")
    _Receiver.bodies = []
    srv = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    monkeypatch.setenv("AIRFLOW_CONN_SF_SCHEMA", sfdb.airflow_connection(password="pw"))
    catalog_env("schemacat")
    name = f"schema_{sfdb.name.lower()}"
    entry = {
        "name": name,
        "source": {"table": src},
        "target": f"sc.{sfdb.name.lower()}",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "snowflake_conn_id": "sf_schema",
        "catalog": "schemacat",
        "retries": 0,
        "alerts": {"webhook_url": f"http://127.0.0.1:{srv.server_port}/hook", "events": ["schema_change"]},
    }
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "dags" / "snowberg_tables.py", dags)
    (tmp_path / "tables.yaml").write_text(yaml.safe_dump({"tables": [entry]}))
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(tmp_path / "tables.yaml"))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    from airflow.dag_processing.dagbag import DagBag

    try:
        bag = DagBag(dag_folder=str(dags))
        assert not bag.import_errors, bag.import_errors
        dag = bag.dags[f"snowberg_{name}"]
        assert dag.test().state == "success"
        assert _Receiver.bodies == []  # creating the table is not a schema change
        sfdb.sql(f"ALTER TABLE {src} ADD COLUMN EXTRA VARCHAR(10)")
        sfdb.sql(
            f"INSERT INTO {src} VALUES (2, CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ), 'x')"
        )
        assert dag.test().state == "success"
    finally:
        srv.shutdown()
    (body,) = _Receiver.bodies
    # One new row: the plan task loads it itself (inline_load_rows), so the alert names that task.
    assert body["event"] == "schema_change" and body["table"] == name and body["task_id"] == "plan"
    assert body["details"]["added"] == ["extra string"]
    assert "on_column_added: null" in body["details"]["existing_rows"]  # rows loaded before hold NULL in it
