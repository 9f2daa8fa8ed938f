"""Secrets stay out of real task logs, and source values cannot inject Slack markup.

Each case runs a real task through Airflow's runner (``dag.test()`` of the
real DAG file) and greps what the task logged for a marker:
* a webhook URL's token, when the webhook answers 500 and when nothing listens;
* an ``Authorization`` catalog header;
* a webhook URL in a broken config entry (parse-time error);
and reads what the Slack webhook received for a source value ``<!channel>``.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

TOKEN = "TOKEN-b7e1c9d3a5f2"
AUTH = "Bearer hdr-4c2a9e7f1b3d"


class _Receiver(BaseHTTPRequestHandler):
    status = 200
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        type(self).bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.send_response(type(self).status)
        self.end_headers()
        self.wfile.write(b"no")

    def log_message(self, *args: Any) -> None:
        pass


def _serve(status: int) -> tuple[HTTPServer, type[_Receiver]]:
    handler = type("Receiver", (_Receiver,), {"status": status, "bodies": []})
    srv = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, handler


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


@pytest.fixture
def env(sfdb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_db: str, catalog_env: Any) -> Any:
    # Two rows share the key '<!channel>': the load fails, and its error quotes the source value.
    sfdb.sql(f"CREATE TABLE {sfdb.table('SRC')} (CODE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} VALUES ('<!channel>', '2026-01-01'::TIMESTAMP_NTZ), "
        "('<!channel>', '2026-01-01 00:00:01'::TIMESTAMP_NTZ)"
    )
    failing, failing_h = _serve(500)
    slack, slack_h = _serve(200)
    monkeypatch.setenv("AIRFLOW_CONN_SF_SECRETS", sfdb.airflow_connection(password="pw"))
    slack_url = f"http://127.0.0.1:{slack.server_port}/services/T0/B0/{TOKEN}"
    monkeypatch.setenv("AIRFLOW_CONN_SLACK_SECRETS", json.dumps({"conn_type": "slackwebhook", "password": slack_url}))
    catalog_env("secrets")
    monkeypatch.setenv("PYICEBERG_CATALOG__SECRETS__HEADER__AUTHORIZATION", AUTH)
    base = {
        "source": {"table": sfdb.table("SRC")},
        "cursor": {"column": "updated_at"},
        "primary_key": ["code"],
        "snowflake_conn_id": "sf_secrets",
        "catalog": "secrets",
        "retries": 0,
    }
    s = sfdb.name.lower()
    tables = [
        {
            **base,
            "name": f"hook500_{s}",
            "target": f"a.{s}",
            "alerts": {"webhook_url": f"http://127.0.0.1:{failing.server_port}/hooks/{TOKEN}"},
        },
        {
            **base,
            "name": f"hookdown_{s}",
            "target": f"b.{s}",
            "alerts": {"webhook_url": f"http://127.0.0.1:{_closed_port()}/hooks/{TOKEN}"},
        },
        {**base, "name": f"slack_{s}", "target": f"c.{s}", "alerts": {"slack_webhook_conn_id": "slack_secrets"}},
        {
            **base,
            "name": f"broken_{s}",
            "target": f"d.{s}",
            "alerts": {"webhook_url": f"https://hooks.example.com/{TOKEN} x"},
        },
    ]
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "dags" / "snowberg_tables.py", dags)
    (tmp_path / "tables.yaml").write_text(yaml.safe_dump({"tables": tables}))
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(tmp_path / "tables.yaml"))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    yield s, failing_h, slack_h
    failing.shutdown()
    slack.shutdown()


def _bag() -> Any:
    import os

    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    return bag


def _run(bag: Any, dag_id: str, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> str:
    caplog.clear()
    capfd.readouterr()
    dr = bag.dags[dag_id].test()
    assert dr.state == "failed"
    out = capfd.readouterr()
    # What Airflow's log handlers wrote (masked as a task log is), plus the raw records at INFO and up:
    # pytest's own capture sees records before Airflow's masker, and urllib3's DEBUG request lines are
    # only ever masked by it.
    raw = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    return out.out + out.err + raw


def test_webhook_tokens_and_catalog_headers_stay_out_of_task_logs(
    env: Any, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    s, failing, _ = env
    caplog.set_level("DEBUG")
    bag = _bag()
    text = _run(bag, f"snowberg_hook500_{s}", capfd, caplog)
    assert len(failing.bodies) == 1  # the alert was tried (and refused)
    assert "opening Iceberg catalog" in text and "header.authorization" in text  # the catalog line was logged
    assert AUTH.split()[1] not in text
    assert TOKEN not in text
    assert "refused the alert (HTTP 500)" in text
    text = _run(bag, f"snowberg_hookdown_{s}", capfd, caplog)
    assert TOKEN not in text
    assert "refused the alert" in text and "ConnectionError" in text


def test_a_broken_entry_does_not_echo_its_webhook_url(env: Any, capfd: pytest.CaptureFixture[str]) -> None:
    s, _, _ = env
    bag = _bag()
    out = capfd.readouterr()
    err = bag.dags[f"snowberg_broken_{s}"].get_task("config_error").error
    assert "field 'alerts.webhook_url'" in err
    assert TOKEN not in err and TOKEN not in out.out + out.err
    assert not any(TOKEN in w for ws in bag.captured_warnings.values() for w in ws)


def test_source_values_cannot_mention_a_slack_channel(
    env: Any, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    s, _, slack = env
    text = _run(_bag(), f"snowberg_slack_{s}", capfd, caplog)
    assert "is not unique" in text  # the load failed on the duplicate key, quoting the value
    (body,) = slack.bodies
    sent = json.loads(body)["text"]
    assert "&lt;!channel&gt;" in sent and "<!channel>" not in sent
    assert TOKEN not in text
