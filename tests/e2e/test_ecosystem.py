"""snowberg inside a real Airflow 3: lineage, metrics, the UI page and the factory's alerts, in one stack.

One Airflow stack (api-server, scheduler, dag-processor, triggerer on
PostgreSQL) is started for this file, configured the way docs/airflow-ecosystem.md
tells users to: the OpenLineage provider's HTTP transport pointed at a local
receiver, StatsD metrics at a local UDP socket, the repository's ``plugins/``
folder as Airflow's plugins folder (the snowberg page), and tables and syncs
with ``alerts:`` posting to a local webhook.

Runs: a table load, its checks DAG and a lake → Snowflake (native) sync that
succeed (their COMPLETE lineage events inside a 1 s listener budget); and a
table, a checks DAG and a sync that fail, to show the notifiers the DAG
factory wires in fire.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import yaml
from airflow_stack import ADMIN_PASSWORD, ADMIN_USER, ARTIFACTS, AirflowStack, ApiClient
from e2e_data import ROWS, Lake, create_source, table_entry, write_tables_config

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("SNOWBERG_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]  # fmt: skip
SHOTS = ARTIFACTS / "e2e" / "ecosystem"
# The emulator's connection names the account "fakesnow": a legacy locator without a region, which the
# Snowflake provider's fix_account_name completes with its default region and cloud.
SNOWFLAKE_NS = "snowflake://fakesnow.us-west-1.aws"


# ---------------------------------------------------------------------------
# Receivers: OpenLineage HTTP transport, alert webhook, StatsD


@dataclass
class Received:
    lineage: list[dict[str, Any]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    statsd: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def events(self, job_suffix: str, event_type: str = "COMPLETE") -> list[dict[str, Any]]:
        with self.lock:
            return [
                e
                for e in self.lineage
                if e.get("eventType") == event_type and e.get("job", {}).get("name", "").endswith(job_suffix)
            ]

    def metric_lines(self, prefix: str) -> list[str]:
        with self.lock:
            return [line for line in self.statsd if line.startswith(prefix)]


class Receivers:
    def __init__(self) -> None:
        self.got = Received()
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with got.lock:
                    (got.alerts if self.path.startswith("/alert") else got.lineage).append(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http_port = self.http.server_address[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.5)
        self.udp_port = self.udp.getsockname()[1]
        self._stop = threading.Event()
        self.threads = [
            threading.Thread(target=self.http.serve_forever, daemon=True),
            threading.Thread(target=self._udp_loop, daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _udp_loop(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.udp.recv(65535)
            except (TimeoutError, OSError):
                continue
            with self.got.lock:
                self.got.statsd.extend(data.decode(errors="replace").splitlines())

    def close(self) -> None:
        self._stop.set()
        self.http.shutdown()
        self.http.server_close()
        self.udp.close()
        (ARTIFACTS / "e2e").mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "e2e" / "ecosystem-received.json").write_text(
            json.dumps({"lineage": self.got.lineage, "alerts": self.got.alerts, "statsd": self.got.statsd}, indent=1)
        )


@dataclass
class Eco:
    stack: AirflowStack
    api: ApiClient
    got: Received
    lake: Lake
    runs: dict[str, str]


TABLE, BROKEN = "eco_orders", "eco_broken"
SYNC, BROKEN_SYNC = "eco_copy", "eco_broken_sync"


def _wait(api: ApiClient, stack: AirflowStack, dag: str, expect: str, conf: dict[str, Any] | None = None) -> str:
    api.set_paused(dag, False)
    run_id = api.trigger(dag, conf=conf)["dag_run_id"]
    run = api.wait_run(dag, run_id, stack=stack, timeout=300)
    assert run["state"] == expect, (dag, api.task_states(dag, run_id))
    return str(run_id)


@pytest.fixture(scope="session")
def eco(stacks: Any, snow: Any, e2e_root: Path, lake_env: dict[str, str]) -> Iterator[Eco]:
    rx = Receivers()
    try:
        create_source(snow, "ECO_ORDERS")
        hook = f"http://127.0.0.1:{rx.http_port}/alert"
        alerts = {"webhook_url": hook}
        tables = [
            table_entry(TABLE, schedule=None, source_table="ECO_ORDERS", freshness_sla="1h", alerts=alerts),
            table_entry(BROKEN, schedule=None, source_table="ECO_MISSING", freshness_sla="1h", alerts=alerts),
        ]
        tables_path = write_tables_config(e2e_root / "eco-tables.yaml", tables)
        syncs = {
            "defaults": {"owner": "e2e", "retries": 0, "schedule": None, "alerts": alerts},
            "syncs": [
                {
                    "name": SYNC,
                    "source": {"catalog": "lake", "table": f"e2e.{TABLE}"},
                    "target": {
                        "kind": "native",
                        "snowflake_conn_id": "snowflake_default",
                        "table": "E2E.SHOP.ECO_ORDERS_COPY",
                    },  # fmt: skip
                },
                {
                    "name": BROKEN_SYNC,
                    "source": {"catalog": "lake", "table": "e2e.no_such_table"},
                    "target": {
                        "kind": "native",
                        "snowflake_conn_id": "snowflake_default",
                        "table": "E2E.SHOP.ECO_NOWHERE",
                    },  # fmt: skip
                },
            ],
        }
        syncs_path = e2e_root / "eco-syncs.yaml"
        syncs_path.write_text(yaml.safe_dump(syncs, sort_keys=False))
        env = {
            "SNOWBERG_TABLES_CONFIG": str(tables_path),
            "SNOWBERG_SYNCS_CONFIG": str(syncs_path),
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                {"type": "http", "url": f"http://127.0.0.1:{rx.http_port}", "endpoint": "api/v1/lineage"}
            ),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "snowberg_e2e",
            # The listener's budget cut from 10 s to 1 s: an event whose facets needed I/O after the task
            # (a connection, a catalog) would be killed with its process and never arrive.
            "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "1",
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(rx.udp_port),
            "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        }
        dags = [f"snowberg_{TABLE}", f"snowberg_{TABLE}__checks", f"snowberg_{BROKEN}", f"snowberg_{BROKEN}__checks",
                f"snowberg_sync_{SYNC}", f"snowberg_sync_{BROKEN_SYNC}"]  # fmt: skip
        stack = stacks.get("eco", extra_env=env, wait_for=dags)
        api = stack.client()
        runs = {
            "load": _wait(api, stack, f"snowberg_{TABLE}", "success"),
            "checks": _wait(api, stack, f"snowberg_{TABLE}__checks", "success"),
            "sync": _wait(api, stack, f"snowberg_sync_{SYNC}", "success"),
        }
        yield Eco(stack, api, rx.got, Lake(lake_env), runs)
    finally:
        rx.close()


def _wait_for(eco: Eco, what: str, fn: Any, timeout: float = 90) -> Any:
    return eco.api.wait_for(what, fn, timeout=timeout, stack=eco.stack)


# ---------------------------------------------------------------------------
# 1. Lineage and metrics


@pytest.mark.timeout(900)
def test_a_load_and_a_sync_send_lineage_with_dataset_names_and_counts(eco: Eco) -> None:
    t = eco.lake.table(TABLE)
    assert t is not None
    snap = t.current_snapshot()
    added = int(snap.summary.additional_properties["added-files-size"])

    # The demo-sized window loads in the plan task (inline_load_rows): its COMPLETE event carries the lineage.
    [load] = _wait_for(eco, "the load's COMPLETE event", lambda: eco.got.events(f"snowberg_{TABLE}.plan"))
    [src] = load["inputs"]
    assert (src["namespace"], src["name"]) == (SNOWFLAKE_NS, "E2E.SHOP.ECO_ORDERS")
    assert [f["name"] for f in src["facets"]["schema"]["fields"]][:2] == ["ORDER_ID", "AMOUNT"]
    [out] = load["outputs"]
    assert (out["namespace"], out["name"]) == ("file", t.location().removeprefix("file://"))
    assert out["facets"]["symlinks"]["identifiers"][0]["name"] == f"e2e.{TABLE}"
    assert out["facets"]["catalog"]["framework"] == "iceberg"
    stats = out["outputFacets"]["outputStatistics"]
    assert stats["rowCount"] == ROWS and stats["size"] == added
    assert out["facets"]["columnLineage"]["fields"]["amount"]["inputFields"][0]["field"] == "AMOUNT"
    assert load["run"]["facets"]["parent"]["job"]["name"] == f"snowberg_{TABLE}"

    [sync] = _wait_for(eco, "the sync's COMPLETE event", lambda: eco.got.events(f"snowberg_sync_{SYNC}.sync"))
    assert [(i["namespace"], i["name"]) for i in sync["inputs"]] == [(out["namespace"], out["name"])]
    [copy] = sync["outputs"]
    assert (copy["namespace"], copy["name"]) == (SNOWFLAKE_NS, "E2E.SHOP.ECO_ORDERS_COPY")
    assert copy["outputFacets"]["outputStatistics"]["rowCount"] == ROWS


@pytest.mark.timeout(600)
def test_real_task_runs_send_snowberg_metrics_to_statsd(eco: Eco) -> None:
    def have(prefix: str) -> list[str]:
        return eco.got.metric_lines(prefix)

    assert _wait_for(eco, "rows", lambda: have(f"airflow.snowberg.load.rows.{TABLE}:")) == [
        f"airflow.snowberg.load.rows.{TABLE}:{ROWS}|c"
    ]
    assert have("airflow.snowberg.load.rows:") == [f"airflow.snowberg.load.rows:{ROWS}|c"]
    assert have(f"airflow.snowberg.load.bytes.{TABLE}:")
    assert have(f"airflow.snowberg.load.duration.{TABLE}:")[0].endswith("|ms")
    assert have(f"airflow.snowberg.load.volume_diff.{TABLE}:") == [f"airflow.snowberg.load.volume_diff.{TABLE}:0|g"]
    # One gauge per freshness check run (the load DAG's, the checks DAG's): each a few seconds to minutes.
    lags = _wait_for(eco, "freshness lag", lambda: have(f"airflow.snowberg.freshness.lag.{TABLE}:"))
    assert all(line.endswith("|g") and 0 <= float(line.split(":")[1].split("|")[0]) < 3600 for line in lags)
    assert _wait_for(eco, "sync rows", lambda: have("airflow.snowberg.sync.rows.E2E__SHOP__ECO_ORDERS_COPY:")) == [
        f"airflow.snowberg.sync.rows.E2E__SHOP__ECO_ORDERS_COPY:{ROWS}|c"
    ]


# ---------------------------------------------------------------------------
# 2. Alerts wired by the DAG factory and the sync DAG file


@pytest.mark.timeout(900)
def test_the_notifiers_of_table_checks_and_sync_dags_fire_in_real_runs(eco: Eco) -> None:
    failed = {
        dag: _wait(eco.api, eco.stack, dag, "failed")
        for dag in (f"snowberg_{BROKEN}", f"snowberg_{BROKEN}__checks", f"snowberg_sync_{BROKEN_SYNC}")
    }

    def by_dag() -> dict[str, set[tuple[str, str]]] | None:
        with eco.got.lock:
            got: dict[str, set[tuple[str, str]]] = {}
            for a in eco.got.alerts:
                if a.get("run_id") == failed.get(a.get("dag_id")):
                    got.setdefault(a["dag_id"], set()).add((a["event"], a["task_id"]))
        return got if set(got) == set(failed) and len(got[f"snowberg_{BROKEN}__checks"]) >= 2 else None

    got = _wait_for(eco, "alerts of the three failed DAGs", by_dag)
    assert got[f"snowberg_{BROKEN}"] == {("load_failure", "plan")}
    assert got[f"snowberg_{BROKEN}__checks"] >= {
        ("check_failure", "check_freshness"),
        ("check_failure", "table_health"),
    }
    assert got[f"snowberg_sync_{BROKEN_SYNC}"] == {("load_failure", "sync")}
    with eco.got.lock:
        names = {a["table"] for a in eco.got.alerts}
    assert {BROKEN, BROKEN_SYNC} <= names


# ---------------------------------------------------------------------------
# 3. The snowberg page


@pytest.mark.timeout(900)
def test_the_snowberg_page_shows_the_lake_numbers_behind_airflow_auth(eco: Eco) -> None:
    base = eco.stack.base_url
    assert httpx.get(f"{base}/snowberg/api/tables", timeout=30).status_code == 401
    assert httpx.get(f"{base}/snowberg/", timeout=30).status_code == 401
    bad = httpx.get(f"{base}/snowberg/api/tables", headers={"Authorization": "Bearer not-a-jwt"}, timeout=30)
    assert bad.status_code in (401, 403) and "ECO" not in bad.text.upper()

    token = httpx.post(f"{base}/auth/token", json={"username": ADMIN_USER, "password": ADMIN_PASSWORD}).json()

    def tables() -> dict[str, Any]:
        data = httpx.get(
            f"{base}/snowberg/api/tables?refresh=true",  # not the statuses kept from the previous call
            headers={"Authorization": f"Bearer {token['access_token']}"},
            timeout=60,
        ).json()
        return {t["name"]: t for t in data}

    by_name = tables()
    if not by_name[BROKEN]["checks"]:  # run alone: the notifiers test has not run the broken table's checks
        _wait(eco.api, eco.stack, f"snowberg_{BROKEN}__checks", "failed")
        by_name = tables()
    assert set(by_name) == {TABLE, BROKEN}
    t = eco.lake.table(TABLE)
    snap = t.current_snapshot()
    props = snap.summary.additional_properties
    mine = by_name[TABLE]
    assert mine["snapshot_id"] == snap.snapshot_id
    assert mine["rows"] == int(props["snowberg.rows"]) == ROWS
    assert mine["bytes"] == int(props["added-files-size"])
    assert mine["watermark"] == props["snowberg.watermark"] and mine["mirror_in_sync"] is True
    assert mine["run_id"] == eco.runs["load"] and mine["load_task_seconds"] is not None
    # A link relative to the host the page was opened on; the run id quoted as a path segment.
    assert mine["committing_run"]["url"] == f"/dags/{mine['dag_id']}/runs/{quote(eco.runs['load'], safe='')}"
    assert mine["committing_run"]["duration_seconds"] >= mine["load_task_seconds"]
    assert mine["live_rows"] == ROWS and mine["attention"] is None
    assert mine["fresh"] is True and mine["sla"] == "1h"
    assert {c["task_id"]: c["state"] for c in mine["checks"]} == {
        "check_freshness": "success",
        "check_volume": "success",
        "table_health": "success",
    }
    health = next(c for c in mine["checks"] if c["task_id"] == "table_health")["result"]
    assert health["rows"] == ROWS
    assert [p["rows"] for p in mine["history"]] == [ROWS]
    assert by_name[BROKEN]["exists"] is False
    # No lake table: the volume check could not run, and the page says so with the reason (never "success").
    volume = next(c for c in by_name[BROKEN]["checks"] if c["task_id"] == "check_volume")
    assert (volume["state"], volume["outcome"]) == ("skipped", "could not run")
    assert f"the lake table e2e.{BROKEN} does not exist" in volume["reason"]

    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/")
            page.get_by_label("Username").fill(ADMIN_USER)
            page.get_by_label("Password").fill(ADMIN_PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(lambda url: "/auth/login" not in url)
            # Inside the Airflow UI: the external view (an iframe of /snowberg/) under its nav entry.
            page.goto(f"{base}/plugin/snowberg")
            frame = page.frame_locator("iframe").first
            section = frame.locator(f"section[data-table='{TABLE}']")
            section.wait_for()
            assert section.locator("[data-field='rows']").inner_text() == f"{ROWS:,}"
            assert section.locator("[data-field='snapshot_id']").inner_text() == str(snap.snapshot_id)
            assert section.locator("[data-field='watermark']").inner_text() == props["snowberg.watermark"]
            assert section.locator("svg.chart rect.bar").count() == 1
            assert section.get_by_text("fresh", exact=True).count() == 1
            page.screenshot(path=str(SHOTS / "snowberg-page-in-airflow.png"), full_page=True)
            # The page alone, as the iframe loads it (the session cookie authenticates it).
            page.goto(f"{base}/snowberg/")
            page.locator(f"section[data-table='{BROKEN}']").wait_for()
            item = page.locator(f"section[data-table='{BROKEN}'] li[data-check='check_volume']")
            assert item.get_attribute("data-outcome") == "could not run"
            assert "does not exist" in item.inner_text() and "success" not in item.inner_text()
            assert page.get_by_text("watermark age at commit (line, log scale)").count() >= 1
            page.screenshot(path=str(SHOTS / "snowberg-page.png"), full_page=True)
        finally:
            browser.close()
