"""End to end on the local stack: the factory's load and checks DAGs, a real SMTP server and HTTP receiver.

The lake and the source drift apart in three ways — (a) rows deleted from the
lake behind snowberg's back, (b) source rows inserted with a cursor below the
watermark, (c) rows hard-deleted in the source — and the checks DAG built by
the factory fails its ``check_volume`` task; the email (aiosmtpd) and the
webhook (a local HTTP server) name the table, the counts on each side and the
differing keys. With ``deletes: propagate`` the next checks run removes
nothing while (a) and (b) remain (deletes propagate only from a consistent
report) and its alert says so; after a full refresh of the table all three
are gone and the check passes. A later hard delete in an old day is found by
the next full verification (started by hand) and propagated.
"""

from __future__ import annotations

import email
import email.policy
import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

SOURCE_ROWS = 300


class Sink:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def wait(self, n: int, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.items) >= n:
                    return list(self.items)
            time.sleep(0.05)
        raise AssertionError(f"expected {n} item(s), got {len(self.items)}")

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's hook name
        msg = email.message_from_bytes(envelope.original_content or envelope.content, policy=email.policy.default)
        body = msg.get_body(preferencelist=("html", "plain"))
        with self.lock:
            self.items.append({"subject": str(msg["Subject"]), "body": body.get_content() if body else ""})
        return "250 Message accepted for delivery"


@pytest.fixture
def smtp() -> Iterator[tuple[int, Sink]]:
    from aiosmtpd.controller import Controller

    sink = Sink()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, sink
    finally:
        controller.stop()


@pytest.fixture
def hooks() -> Iterator[tuple[str, Sink]]:
    sink = Sink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's hook name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with sink.lock:
                sink.items.append(json.loads(body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", sink
    finally:
        server.shutdown()
        server.server_close()


def _write_config(tmp_path: Path, entry: dict[str, Any]) -> None:
    import yaml

    (tmp_path / "tables.yaml").write_text(yaml.safe_dump({"tables": [entry]}))


def _dags() -> dict[str, Any]:
    import os

    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    return bag.dags


def _failed_tasks(dr: Any) -> set[str]:
    return {ti.task_id for ti in dr.get_task_instances() if ti.state == "failed"}


@pytest.mark.slow
def test_drift_is_named_by_email_and_webhook_then_propagated_and_refreshed_away(
    sfdb: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    airflow_db: str,
    smtp: tuple[int, Sink],
    hooks: tuple[str, Sink],
) -> None:
    from snowberg.iceberg.catalogs import open_catalog as load_catalog

    port, mails = smtp
    url, posts = hooks
    src = sfdb.table("SRC")
    sfdb.sql(f"CREATE TABLE {src} (ID NUMBER(38,0), AMOUNT NUMBER(10,2), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(
        f"INSERT INTO {src} SELECT seq4() + 1, seq4() / 4, DATEADD(minute, seq4(), '2026-01-01'::TIMESTAMP_NTZ) "
        f"FROM TABLE(GENERATOR(ROWCOUNT => {SOURCE_ROWS}))"
    )
    monkeypatch.setenv("AIRFLOW_CONN_SF_VOLUME", sfdb.airflow_connection())
    monkeypatch.setenv(
        "AIRFLOW_CONN_SMTP_VOLUME",
        json.dumps(
            {
                "conn_type": "smtp",
                "host": "127.0.0.1",
                "port": port,
                "extra": {"disable_ssl": True, "disable_tls": True, "timeout": 10, "retry_limit": 0},
            }
        ),
    )
    (tmp_path / "wh").mkdir()
    for k, v in {"TYPE": "sql", "URI": f"sqlite:///{tmp_path}/c.db", "WAREHOUSE": f"file://{tmp_path}/wh"}.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__VOLTEST__{k}", v)
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "dags" / "snowberg_tables.py", dags)
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(tmp_path / "tables.yaml"))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    name = f"vol_{sfdb.name.lower()}"
    entry: dict[str, Any] = {
        "name": name,
        "source": {"table": src},
        "target": f"vol.{sfdb.name.lower()}",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "snowflake_conn_id": "sf_volume",
        "catalog": "voltest",
        "retries": 0,
        "alerts": {
            "email": ["oncall@example.com"],
            "email_conn_id": "smtp_volume",
            "email_from": "snowberg@example.com",
            "webhook_url": url,
        },
        "volume": {"deletes": "detect"},
    }
    _write_config(tmp_path, entry)
    bag = _dags()
    assert bag[f"snowberg_{name}"].test().state == "success"
    first = bag[f"snowberg_{name}__checks"].test()
    assert first.state == "success", _failed_tasks(first)

    # (a) three rows deleted from the lake behind snowberg's back
    table = load_catalog("voltest").load_table(("vol", sfdb.name.lower()))
    table.delete("id in (11, 22, 33)")
    # (b) five source rows whose cursor is below the watermark
    sfdb.sql(
        f"INSERT INTO {src} SELECT 1000 + seq4(), 1, DATEADD(minute, 90 + seq4(), '2026-01-01'::TIMESTAMP_NTZ) "
        "FROM TABLE(GENERATOR(ROWCOUNT => 5))"
    )
    # (c) two source rows hard-deleted
    sfdb.sql(f"DELETE FROM {src} WHERE ID IN (250, 260)")

    dr = bag[f"snowberg_{name}__checks"].test()
    assert dr.state == "failed" and _failed_tasks(dr) == {"check_volume"}
    payload = next(p for p in posts.wait(1) if p["event"] == "volume_mismatch")
    assert payload["table"] == name and payload["check"] == "volume"
    assert payload["observed"]["source rows"] == SOURCE_ROWS + 5 - 2
    assert payload["observed"]["lake rows"] == SOURCE_ROWS - 3
    keys = " ".join(payload["observed"]["differing keys"])
    for k in ("11", "22", "33", "1000", "1004", "250", "260"):
        assert f"'id': '{k}'" in keys, k
    assert "source_only" in keys and "lake_only" in keys
    mail = mails.wait(1)[0]
    assert mail["subject"] == f"[snowberg] {name}: volume mismatch between Snowflake and the lake"
    for needle in (
        name,
        "source rows",
        str(SOURCE_ROWS + 3),
        "lake rows",
        str(SOURCE_ROWS - 3),
        "&#x27;id&#x27;: &#x27;260&#x27;",
    ):
        assert needle in mail["body"], needle

    # deletes: propagate — (a) and (b) make the report inconsistent: nothing is removed, and the alert says so
    entry["volume"] = {"deletes": "propagate"}
    _write_config(tmp_path, entry)
    bag = _dags()
    dr = bag[f"snowberg_{name}__checks"].test(run_conf={"full_verification": True})
    assert _failed_tasks(dr) == {"check_volume"}

    def lake_ids() -> set[int]:
        t = load_catalog("voltest").load_table(("vol", sfdb.name.lower()))
        return {int(i) for i in t.scan(selected_fields=("id",)).to_arrow()["id"].to_pylist()}

    assert {250, 260} <= lake_ids()
    payload = [p for p in posts.wait(2) if p["event"] == "volume_mismatch"][-1]
    assert "not propagated: the report has 8 other difference(s)" in payload["observed"]["hard deletes not propagated"]

    # a full refresh brings (a) and (b) and drops (c): the check passes
    assert bag[f"snowberg_{name}"].test(run_conf={"full_refresh": True}).state == "success"
    final = bag[f"snowberg_{name}__checks"].test()
    assert final.state == "success", _failed_tasks(final)

    # a hard delete in an old day: the next full verification finds it, the report is consistent: removed
    sfdb.sql(f"DELETE FROM {src} WHERE ID = 270")
    assert bag[f"snowberg_{name}__checks"].test(run_conf={"full_verification": True}).state == "success"
    assert 270 not in lake_ids() and 269 in lake_ids()


@pytest.mark.slow
def test_incremental_checks_find_new_losses_and_the_full_verification_finds_old_ones(
    sfdb: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    airflow_db: str,
    hooks: tuple[str, Sink],
) -> None:
    """Nothing slips through: a row lost in a new window alerts at the next (incremental) check; a row lost in an
    old, already-verified window (a compaction that dropped it: its commit moves no cursor range, so incremental
    checks do not look there) alerts at the next full verification, started here by hand with the trigger param.
    Both alerts name the table, the key and the window compared."""
    from snowberg.iceberg import state
    from snowberg.iceberg.catalogs import open_catalog as load_catalog

    url, posts = hooks
    src = sfdb.table("SRC")
    sfdb.sql(f"CREATE TABLE {src} (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(
        f"INSERT INTO {src} SELECT seq4() + 1, DATEADD(minute, seq4(), '2026-01-01'::TIMESTAMP_NTZ) "
        f"FROM TABLE(GENERATOR(ROWCOUNT => {SOURCE_ROWS}))"
    )
    monkeypatch.setenv("AIRFLOW_CONN_SF_VOLUME", sfdb.airflow_connection())
    (tmp_path / "wh").mkdir()
    for k, v in {"TYPE": "sql", "URI": f"sqlite:///{tmp_path}/c.db", "WAREHOUSE": f"file://{tmp_path}/wh"}.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__VOLINC__{k}", v)
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "dags" / "snowberg_tables.py", dags)
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(tmp_path / "tables.yaml"))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    name = f"volinc_{sfdb.name.lower()}"
    _write_config(
        tmp_path,
        {
            "name": name,
            "source": {"table": src},
            "target": f"vol.{sfdb.name.lower()}",
            "cursor": {"column": "updated_at"},
            "primary_key": ["id"],
            "snowflake_conn_id": "sf_volume",
            "catalog": "volinc",
            "retries": 0,
            "alerts": {"webhook_url": url},
        },
    )
    bag = _dags()
    load, checks = bag[f"snowberg_{name}"], bag[f"snowberg_{name}__checks"]
    assert load.test().state == "success"
    assert checks.test().state == "success"  # the first check: a full verification, recorded

    # a new window: 50 rows a day later; one of them is lost from the lake after the load committed it
    sfdb.sql(
        f"INSERT INTO {src} SELECT 1000 + seq4(), DATEADD(minute, seq4(), '2026-01-02'::TIMESTAMP_NTZ) "
        "FROM TABLE(GENERATOR(ROWCOUNT => 50))"
    )
    assert load.test().state == "success"
    table = load_catalog("volinc").load_table(("vol", sfdb.name.lower()))
    table.delete("id = 1020")
    dr = checks.test()
    assert _failed_tasks(dr) == {"check_volume"}
    alert = posts.wait(1)[-1]
    assert alert["event"] == "volume_mismatch" and alert["table"] == name
    assert alert["observed"]["window"].startswith("incremental, cursor in (")  # only the new window was compared
    assert alert["observed"]["window"].endswith("up to watermark 2026-01-02 00:49:00.000000")
    assert alert["observed"]["differing keys"] == [
        "{'id': '1020'} source_only (source cursor 2026-01-02 00:20:00.000000, lake cursor None)"
    ]
    assert "2026-01-01" not in " ".join(alert["observed"])  # the old days were not read

    # repair with a full refresh (its commit makes the next check a full one), then lose id 7 of the first day
    # in a commit that moves no cursor range: a compaction that dropped a row
    assert load.test(run_conf={"full_refresh": True}).state == "success"
    assert checks.test().state == "success"
    table = load_catalog("volinc").load_table(("vol", sfdb.name.lower()))
    keep = state.current_state_props(table) | {state.MAINTENANCE: "compact"}
    table.delete("id = 7", snapshot_properties=keep)
    assert checks.test().state == "success"  # incremental: the first day is not in its scope
    dr = checks.test(run_conf={"full_verification": True})
    assert _failed_tasks(dr) == {"check_volume"}
    alert = posts.wait(2)[-1]
    assert alert["event"] == "volume_mismatch" and alert["table"] == name
    assert alert["observed"]["window"].startswith("full (started by hand (full_verification))")
    assert alert["observed"]["day 2026-01-01"] == f"source {SOURCE_ROWS}, lake {SOURCE_ROWS - 1}"
    assert alert["observed"]["differing keys"] == [
        "{'id': '7'} source_only (source cursor 2026-01-01 00:06:00.000000, lake cursor None)"
    ]
