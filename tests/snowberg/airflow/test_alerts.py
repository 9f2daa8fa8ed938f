"""Alerts: notifiers from config, the message, and delivery to real local receivers.

* email: a real SMTP server (aiosmtpd) on 127.0.0.1;
* webhook and Slack: a local HTTP receiver;
* SNS: moto in server mode, the topic subscribed by an SQS queue we read back;
* end to end: a DAG run by ``dag.test()`` in a fresh Airflow (its own
  AIRFLOW_HOME and SQLite database, in a subprocess) whose freshness check
  finds a stale table and whose load fails; the alerts arrive by email and
  webhook and say which table, which check, observed vs expected, and link
  to the run.
"""

from __future__ import annotations

import email
import email.policy
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from snowberg.airflow.alerts import WebhookNotifier, send_event
from snowberg.config.check_settings import AlertEvent

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="snowberg-airflow-home-"))

BASE_URL = "http://airflow.example.test:8080"
RUN_ID = "manual__2026-01-01T00:00:00+00:00"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------
# Receivers


class SmtpSink:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's hook name
        msg = email.message_from_bytes(envelope.original_content or envelope.content, policy=email.policy.default)
        body = msg.get_body(preferencelist=("html", "plain"))
        with self.lock:
            self.messages.append(
                {
                    "from": envelope.mail_from,
                    "to": list(envelope.rcpt_tos),
                    "subject": str(msg["Subject"]),
                    "headers": dict(msg.items()),
                    "body": body.get_content() if body is not None else "",
                }
            )
        return "250 Message accepted for delivery"

    def wait(self, n: int, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.messages) >= n:
                    return list(self.messages)
            time.sleep(0.05)
        raise AssertionError(f"expected {n} email(s), got {len(self.messages)}")


@pytest.fixture
def smtp_server() -> Iterator[tuple[int, SmtpSink]]:
    from aiosmtpd.controller import Controller

    sink = SmtpSink()
    port = _free_port()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, sink
    finally:
        controller.stop()


class HttpSink:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.status = 200

    def wait(self, n: int, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= n:
                    return list(self.requests)
            time.sleep(0.05)
        raise AssertionError(f"expected {n} request(s), got {len(self.requests)}")


@pytest.fixture
def http_receiver() -> Iterator[tuple[str, HttpSink]]:
    sink = HttpSink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's hook name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = body.decode(errors="replace")
            with sink.lock:
                sink.requests.append({"path": self.path, "headers": dict(self.headers.items()), "json": parsed})
            self.send_response(sink.status)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", sink
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------------------
# A failure context like the one Airflow hands to on_failure_callback


class FakeTI:
    task_id = "check_freshness"
    dag_id = "snowberg_orders"
    run_id = RUN_ID
    try_number = 1

    @property
    def log_url(self) -> str:
        return (
            f"{BASE_URL}/dags/snowberg_orders/runs/manual__2026-01-01T00%3A00%3A00%2B00%3A00"
            "/tasks/check_freshness?try_number=1"
        )


def _context(exc: BaseException, task_id: str = "check_freshness") -> dict[str, Any]:
    ti = FakeTI()
    ti.task_id = task_id  # type: ignore[misc]
    return {"ti": ti, "task_instance": ti, "run_id": RUN_ID, "exception": exc, "dag": None}


def _stale_error() -> BaseException:
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed

    return SnowbergCheckFailed(
        "orders is stale: last write 2026-01-01T00:00:00+00:00 is 30.00 h old, over the SLA of 2h",
        table="lake.orders",
        check="freshness",
        observed="last write 2026-01-01T00:00:00+00:00 (30.00 h ago)",
        expected="a write within 2h",
    )


@pytest.fixture(autouse=True)
def _base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", BASE_URL)


def _conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


# ---------------------------------------------------------------------------
# Building notifiers from config


def test_build_notifiers_from_config() -> None:
    from snowberg.airflow.alerts import (
        EmailAlertNotifier,
        SlackAlertNotifier,
        SnsAlertNotifier,
        WebhookNotifier,
        build_notifiers,
    )
    from snowberg.config.check_settings import AlertsConfig

    assert build_notifiers(None, table="orders", dag_id="snowberg_orders") == []
    cfg = AlertsConfig(
        email=["oncall@example.com"],
        email_conn_id="smtp_alerts",
        slack_webhook_conn_id="slack_alerts",
        sns_topic_arn="arn:aws:sns:us-east-1:123456789012:lake",
        aws_conn_id="aws_alerts",
        webhook_conn_id="ops_hook",
        webhook_endpoint="/hook",
        events=["check_failure"],
    )
    ns = build_notifiers(cfg, table="orders", dag_id="snowberg_orders")
    assert [type(n) for n in ns] == [EmailAlertNotifier, SlackAlertNotifier, SnsAlertNotifier, WebhookNotifier]
    assert all(n.table == "orders" and n.dag_id == "snowberg_orders" and n.events == ("check_failure",) for n in ns)
    email_n, slack_n, sns_n, hook_n = ns
    assert (
        isinstance(email_n, EmailAlertNotifier)
        and email_n.to == ["oncall@example.com"]
        and email_n.smtp_conn_id == "smtp_alerts"
    )
    assert isinstance(sns_n, SnsAlertNotifier) and sns_n.aws_conn_id == "aws_alerts"
    assert isinstance(hook_n, WebhookNotifier) and hook_n.http_conn_id == "ops_hook" and hook_n.endpoint == "/hook"
    # the dict form (as in YAML) works too
    assert len(build_notifiers({"webhook_url": "http://x/y"}, table="t", dag_id="d")) == 1


def test_building_notifiers_imports_no_provider() -> None:
    code = textwrap.dedent(
        """
        import sys
        from snowberg.airflow.alerts import build_notifiers
        build_notifiers({"email": ["a@b.co"], "slack_webhook_conn_id": "s", \
"sns_topic_arn": "arn:aws:sns:us-east-1:123456789012:t",
                         "webhook_url": "http://x"}, table="t", dag_id="d")
        heavy = ("boto3", "botocore", "slack_sdk", "requests_toolbelt", "pyiceberg", "pyarrow",
                 "airflow.providers.smtp.notifications.smtp", "airflow.providers.slack.notifications.slack_webhook",
                 "airflow.providers.amazon.aws.notifications.sns", "airflow.providers.http.hooks.http")
        print([m for m in heavy if m in sys.modules])
        """
    )
    out = (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    assert out == "[]"


def test_alert_message_for_a_check() -> None:
    from snowberg.airflow.alerts import build_alert

    a = build_alert(_context(_stale_error()), table="orders", dag_id="snowberg_orders")
    assert a.event == "check_failure" and a.check == "freshness" and a.lake_table == "lake.orders"
    assert a.run_url == f"{BASE_URL}/dags/snowberg_orders/runs/manual__2026-01-01T00%3A00%3A00%2B00%3A00"
    assert a.subject == "[snowberg] orders: freshness check failed"
    for text in (a.text, a.html, a.slack_text):
        for needle in ("orders", "freshness", "30.00 h ago", "a write within 2h"):
            assert needle in text, (needle, text)
    assert a.run_url in a.text and a.run_url in a.slack_text
    assert a.run_url.replace("&", "&amp;") in a.html
    p = a.payload()
    assert p["source"] == "snowberg" and p["event"] == "check_failure" and p["observed"].startswith("last write")
    assert json.loads(json.dumps(p)) == p


def test_alert_message_for_a_load() -> None:
    from snowberg.airflow.alerts import build_alert

    a = build_alert(
        _context(RuntimeError("Snowflake said no"), task_id="load"), table="orders", dag_id="snowberg_orders"
    )
    assert a.event == "load_failure" and a.check is None
    assert a.subject == "[snowberg] orders: load failed (load)"
    assert a.error == "RuntimeError: Snowflake said no"
    assert "observed" not in a.text and "Snowflake said no" in a.text


def test_check_task_infrastructure_error_counts_as_check_failure() -> None:
    from snowberg.airflow.alerts import build_alert
    from snowberg.airflow.operators.health import TableHealthOperator

    ctx = _context(ConnectionError("catalog unreachable"), task_id="table_health")
    ctx["task"] = TableHealthOperator(task_id="table_health", table="lake.orders")
    a = build_alert(ctx, table="orders", dag_id="snowberg_orders")
    assert a.event == "check_failure" and a.check == "health" and a.lake_table == "lake.orders"


# ---------------------------------------------------------------------------
# Delivery


def test_email_arrives(smtp_server: tuple[int, SmtpSink], monkeypatch: pytest.MonkeyPatch) -> None:
    from snowberg.airflow.alerts import build_notifiers

    port, sink = smtp_server
    _conn(
        monkeypatch,
        "smtp_test",
        conn_type="smtp",
        host="127.0.0.1",
        port=port,
        extra={
            "disable_ssl": True,
            "disable_tls": True,
            "from_email": "airflow@example.com",
            "timeout": 10,
            "retry_limit": 0,
        },
    )
    (n,) = build_notifiers(
        {"email": ["oncall@example.com"], "email_conn_id": "smtp_test"}, table="orders", dag_id="snowberg_orders"
    )
    n(_context(_stale_error()))
    (msg,) = sink.wait(1)
    assert msg["to"] == ["oncall@example.com"] and msg["from"] == "airflow@example.com"
    assert msg["subject"] == "[snowberg] orders: freshness check failed"
    assert msg["headers"]["X-Snowberg-Table"] == "orders"
    body = msg["body"]
    for needle in ("orders", "freshness", "30.00 h ago", "a write within 2h", f"{BASE_URL}/dags/snowberg_orders/runs/"):
        assert needle in body, needle


def test_event_filter(http_receiver: tuple[str, HttpSink]) -> None:
    from snowberg.airflow.alerts import build_notifiers

    url, sink = http_receiver
    (n,) = build_notifiers(
        {"webhook_url": f"{url}/hook", "events": ["check_failure"]}, table="orders", dag_id="snowberg_orders"
    )
    n(_context(RuntimeError("load broke"), task_id="load"))  # a load failure: not wanted here
    n(_context(_stale_error()))
    (req,) = sink.wait(1)
    time.sleep(0.2)
    assert len(sink.requests) == 1 and req["json"]["event"] == "check_failure"


def test_a_watch_failure_arrives_through_the_tables_channels_and_without_one_is_an_error_log(
    http_receiver: tuple[str, HttpSink], caplog: pytest.LogCaptureFixture
) -> None:
    """From the triggerer (no task, no run): the table's webhook gets a ``watch_failure`` naming the source."""
    from snowberg.airflow.alerts import send_watch_failure

    url, sink = http_receiver
    details = {"source": "SALES.SHOP.ORDERS", "connection": "snowflake_default", "failed polls in a row": 3}
    error = 'SQL compilation error: Object \'"SALES"."SHOP"."ORDERS"\' does not exist or not authorized.'
    sent = send_watch_failure(
        table="orders",
        dag_id="snowberg_orders",
        alerts_config={"webhook_url": f"{url}/hook"},
        error=error,
        details=details,
    )
    (req,) = sink.wait(1)
    assert sent == 1
    body = req["json"]
    assert (body["event"], body["table"], body["dag_id"], body["error"]) == (
        "watch_failure",
        "orders",
        "snowberg_orders",
        error,
    )
    assert body["details"]["source"] == "SALES.SHOP.ORDERS" and body["run_url"] == f"{BASE_URL}/dags/snowberg_orders"
    # A channel that does not take the event, or no channel at all: an error in the triggerer's log, never nothing.
    only_loads = {"webhook_url": f"{url}/hook", "events": ["load_failure"]}
    for alerts in (only_loads, None):
        with caplog.at_level("ERROR", logger="snowberg.airflow.alerts"):
            assert (
                send_watch_failure(
                    table="orders", dag_id="snowberg_orders", alerts_config=alerts, error=error, details=details
                )
                == 0
            )
        assert "no alert channel takes it" in caplog.text and "SALES.SHOP.ORDERS" in caplog.text
        caplog.clear()
    assert len(sink.requests) == 1


def test_webhook_url_and_template_text_stays_text(http_receiver: tuple[str, HttpSink]) -> None:
    from snowberg.airflow.alerts import WebhookNotifier

    url, sink = http_receiver
    n = WebhookNotifier(url=f"{url}/alerts", table="orders", dag_id="snowberg_orders", headers={"X-Token": "t0ken"})
    n(_context(RuntimeError("bad value {{ 7 * 7 }} in column")))
    (req,) = sink.wait(1)
    assert req["path"] == "/alerts" and req["headers"]["X-Token"] == "t0ken"
    p = req["json"]
    assert p["table"] == "orders" and p["event"] == "check_failure" if p["check"] else p["event"] == "load_failure"
    assert "{{ 7 * 7 }}" in p["error"]  # never rendered as Jinja
    assert p["run_url"] == f"{BASE_URL}/dags/snowberg_orders/runs/manual__2026-01-01T00%3A00%3A00%2B00%3A00"


def test_webhook_http_connection(http_receiver: tuple[str, HttpSink], monkeypatch: pytest.MonkeyPatch) -> None:
    from snowberg.airflow.alerts import build_notifiers

    url, sink = http_receiver
    host, port = url.removeprefix("http://").split(":")
    _conn(
        monkeypatch, "ops_hook", conn_type="http", host=host, port=int(port), schema="http", extra={"X-Api-Key": "k3y"}
    )
    (n,) = build_notifiers(
        {"webhook_conn_id": "ops_hook", "webhook_endpoint": "/v1/events"}, table="orders", dag_id="snowberg_orders"
    )
    n(_context(_stale_error()))
    (req,) = sink.wait(1)
    assert req["path"] == "/v1/events" and req["headers"]["X-Api-Key"] == "k3y"
    assert req["json"]["check"] == "freshness" and req["json"]["expected"] == "a write within 2h"


def test_webhook_connection_errors_do_not_carry_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from snowberg.airflow.alerts import WebhookDeliveryError, WebhookNotifier

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    _conn(monkeypatch, "down_hook", conn_type="http", host=f"http://127.0.0.1:{port}/services/tok-91ab7")
    n = WebhookNotifier(http_conn_id="down_hook", endpoint="/more-tok-3c5d", table="orders", dag_id="d")
    with pytest.raises(WebhookDeliveryError) as exc:
        n(_context(_stale_error()))
    assert "refused the alert" in str(exc.value)
    assert "tok-91ab7" not in str(exc.value) and "more-tok-3c5d" not in str(exc.value)


def test_webhook_error_status_raises(http_receiver: tuple[str, HttpSink]) -> None:
    from snowberg.airflow.alerts import WebhookNotifier

    url, sink = http_receiver
    sink.status = 500
    with pytest.raises(Exception, match="500"):
        WebhookNotifier(url=url, table="orders", dag_id="d")(_context(_stale_error()))


def test_slack_webhook_arrives(http_receiver: tuple[str, HttpSink], monkeypatch: pytest.MonkeyPatch) -> None:
    from snowberg.airflow.alerts import build_notifiers

    url, sink = http_receiver
    _conn(monkeypatch, "slack_test", conn_type="slackwebhook", password=f"{url}/services/T000/B000/XXXX")
    (n,) = build_notifiers({"slack_webhook_conn_id": "slack_test"}, table="orders", dag_id="snowberg_orders")
    n(_context(_stale_error()))
    (req,) = sink.wait(1)
    assert req["path"] == "/services/T000/B000/XXXX"
    text = req["json"]["text"]
    for needle in (
        "orders",
        "freshness check failed",
        "30.00 h ago",
        "a write within 2h",
        "/dags/snowberg_orders/runs/",
    ):
        assert needle in text, needle


@pytest.fixture
def moto_sns_sqs() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_sns_arrives(moto_sns_sqs: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    from snowberg.airflow.alerts import build_notifiers

    kw = {
        "endpoint_url": moto_sns_sqs,
        "region_name": "us-east-1",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    sns, sqs = boto3.client("sns", **kw), boto3.client("sqs", **kw)
    topic = sns.create_topic(Name="lake-alerts")["TopicArn"]
    queue = sqs.create_queue(QueueName="alerts")["QueueUrl"]
    qarn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=qarn)
    _conn(
        monkeypatch,
        "aws_test",
        conn_type="aws",
        login="testing",
        password="testing",
        extra={"region_name": "us-east-1", "endpoint_url": moto_sns_sqs},
    )
    (n,) = build_notifiers(
        {"sns_topic_arn": topic, "aws_conn_id": "aws_test"}, table="orders", dag_id="snowberg_orders"
    )
    n(_context(_stale_error()))
    msgs = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=5).get("Messages", [])
    assert len(msgs) == 1
    envelope = json.loads(msgs[0]["Body"])
    assert envelope["Subject"] == "[snowberg] orders: freshness check failed"
    assert "a write within 2h" in envelope["Message"] and "/dags/snowberg_orders/runs/" in envelope["Message"]
    assert envelope["MessageAttributes"]["check"]["Value"] == "freshness"


# ---------------------------------------------------------------------------
# End to end: a stale table, a real Airflow run, the alert by email and webhook


DAG_SCRIPT = """
import json, os, sys
import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

from snowberg.airflow.alerts import build_notifiers
from snowberg.config.check_settings import AlertsConfig
from snowberg.airflow.operators.freshness import SnapshotFreshnessOperator

alerts = AlertsConfig(
    email=["oncall@example.com"], email_conn_id="smtp_e2e", email_from="snowberg@example.com",
    webhook_url=os.environ["E2E_HOOK_URL"],
)

def load():
    raise RuntimeError("Snowflake is unreachable: 250001 (08001): Failed to connect")

with DAG(
    "snowberg_orders", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
    default_args={"retries": 0, \
"on_failure_callback": build_notifiers(alerts, table="orders", dag_id="snowberg_orders")},
) as dag:
    SnapshotFreshnessOperator(task_id="check_freshness", table="lake.orders", catalog="lake", freshness_sla="1s", \
table_name="orders")
    PythonOperator(task_id="load", python_callable=load)

if __name__ == "__main__":  # dag.test() also parses this file from the dags folder
    dr = dag.test()
    print("E2E_RESULT " + json.dumps({"state": str(dr.state), "run_id": dr.run_id}))
"""


@pytest.mark.slow
def test_stale_table_alert_arrives_by_email_and_webhook(
    tmp_path: Path, smtp_server: tuple[int, SmtpSink], http_receiver: tuple[str, HttpSink]
) -> None:
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    port, mails = smtp_server
    url, hooks = http_receiver
    # the lake: one snowberg commit, then nothing
    cat = SqlCatalog("lake", uri=f"sqlite:///{tmp_path}/lake.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("lake")
    t = cat.create_table("lake.orders", schema=pa.schema([("id", pa.int64())]))
    t.append(
        pa.table({"id": [1, 2]}),
        snapshot_properties={
            "snowberg.watermark": "2026-01-01 00:00:00.000000",
            "snowberg.cursor-kind": "timestamp_ntz",
            "snowberg.run-id": "r1",
            "snowberg.mode": "incremental",
        },
    )
    time.sleep(1.1)

    home = tmp_path / "airflow-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYICEBERG"))}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(tmp_path / "dags"),
        AIRFLOW__API__BASE_URL=BASE_URL,
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        PYICEBERG_CATALOG__LAKE__TYPE="sql",
        PYICEBERG_CATALOG__LAKE__URI=f"sqlite:///{tmp_path}/lake.db",
        PYICEBERG_CATALOG__LAKE__WAREHOUSE=f"file://{tmp_path}/wh",
        AIRFLOW_CONN_SMTP_E2E=json.dumps(
            {
                "conn_type": "smtp",
                "host": "127.0.0.1",
                "port": port,
                "extra": {"disable_ssl": True, "disable_tls": True, "timeout": 10, "retry_limit": 0},
            }
        ),
        E2E_HOOK_URL=f"{url}/snowberg",
    )
    (tmp_path / "dags").mkdir()
    script = tmp_path / "dags" / "e2e_dag.py"
    script.write_text(DAG_SCRIPT)
    airflow = str(Path(sys.executable).with_name("airflow"))
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    (tmp_path / "dag-test.log").write_text(run.stdout + run.stderr)
    assert "E2E_RESULT" in run.stdout, run.stdout[-3000:] + run.stderr[-5000:]
    result = json.loads(run.stdout.split("E2E_RESULT ", 1)[1].splitlines()[0])
    assert result["state"] == "failed"
    run_id = result["run_id"]
    from urllib.parse import quote

    run_url = f"{BASE_URL}/dags/snowberg_orders/runs/{quote(run_id, safe='')}"

    # two failures → two emails and two webhook calls; find each by its event
    received = mails.wait(2)
    payloads = [r["json"] for r in hooks.wait(2)]
    by_event = {p["event"]: p for p in payloads}
    assert set(by_event) == {"check_failure", "load_failure"}

    stale = by_event["check_failure"]
    assert stale["table"] == "orders" and stale["lake_table"] == "lake.orders"
    assert stale["check"] == "freshness" and stale["task_id"] == "check_freshness"
    assert stale["observed"].startswith("last write ") and "h ago" in stale["observed"]
    assert stale["expected"] == "a run proving the lake current within 1s"  # the default measure
    assert stale["run_id"] == run_id and stale["dag_id"] == "snowberg_orders"
    assert stale["run_url"] == run_url
    assert "orders is stale" in stale["error"]

    load = by_event["load_failure"]
    assert load["task_id"] == "load" and "Snowflake is unreachable" in load["error"]

    subjects = {m["subject"]: m for m in received}
    assert set(subjects) == {"[snowberg] orders: freshness check failed", "[snowberg] orders: load failed (load)"}
    mail = subjects["[snowberg] orders: freshness check failed"]
    assert mail["to"] == ["oncall@example.com"] and mail["from"] == "snowberg@example.com"
    for needle in ("orders", "freshness", "observed", "expected", "a run proving the lake current within 1s", run_url):
        assert needle in mail["body"], needle


def test_maintenance_task_failure_is_a_maintenance_failure() -> None:
    from snowberg.airflow.alerts import build_alert
    from snowberg.airflow.operators.maintenance import MaintenanceStep, SnowbergMaintenanceOperator

    ctx = _context(RuntimeError("compaction verification failed"), task_id="compact")
    ctx["task"] = SnowbergMaintenanceOperator(
        task_id="compact",
        step=MaintenanceStep("compact"),
        table_name="orders",
        source={"table": "DB.S.ORDERS"},
        target="shop.orders",
    )
    a = build_alert(ctx, table="orders", dag_id="snowberg_orders__maintenance")
    assert a.event == "maintenance_failure"
    assert "maintenance failure" in a.subject


# ---------------------------------------------------------------------------
# send_event: events that do not fail the run (a schema change) reach the task's notifiers


class _Sink(BaseHTTPRequestHandler):
    received: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        _Sink.received.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def sink() -> Any:
    _Sink.received = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}", _Sink.received
    srv.shutdown()


def test_a_non_failing_event_reaches_the_notifiers_the_task_carries(sink: Any) -> None:
    import json

    url, received = sink

    class Task:
        on_failure_callback = [
            WebhookNotifier(url=f"{url}/all", table="t", dag_id="snowberg_t"),
            WebhookNotifier(url=f"{url}/failures", table="t", dag_id="snowberg_t", events=["load_failure"]),
        ]

    n = send_event(
        AlertEvent.SCHEMA_CHANGE,
        table="t",
        lake_table="ns.t",
        details={"added": ["extra long"]},
        context={"task": Task(), "run_id": "r1"},
    )
    assert n == 2 and len(received) == 1  # the second channel does not take schema_change
    body = json.loads(received[0])
    assert body["event"] == "schema_change" and body["details"] == {"added": ["extra long"]}
    assert body["title"] == "source schema changed"


def test_outside_a_task_an_event_is_only_logged() -> None:
    assert send_event(AlertEvent.SCHEMA_CHANGE, table="t", details={"added": ["x"]}) == 0


def test_a_channel_that_is_down_does_not_fail_the_run() -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()

    class Task:
        on_failure_callback = [WebhookNotifier(url=f"http://127.0.0.1:{port}/hook/tok", table="t", dag_id="d")]

    assert send_event(AlertEvent.SCHEMA_CHANGE, table="t", details={"added": ["x"]}, context={"task": Task()}) == 0
