"""The Airflow UI in a real browser: Debian's chromium driven by Playwright.

Logs in, triggers a run from the trigger form with typed params (the window
date-time pickers, the dry-run switch), starts a Backfill from the same
dialog's Backfill tab without "Override parameters" (so the run's data
interval drives the window), and checks both succeed and loaded what they
should. Screenshots of every step are kept under ``test-artifacts/e2e/browser/``.

No browser is downloaded: ``scripts/install-browser.sh`` installs Debian's
chromium, launched here as a system executable (``SNOWBERG_CHROMIUM``
overrides the path).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from airflow_stack import ADMIN_PASSWORD, ADMIN_USER, ARTIFACTS, AirflowStack, ApiClient, parse_ts, wait_runs_done
from e2e_data import SOURCES, Lake, dag_id, day, source_ids

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("SNOWBERG_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
SHOTS = ARTIFACTS / "e2e" / "browser"


class Ui:
    """A logged-in page plus the API calls it made (to read back what the form sent)."""

    def __init__(self, page: Any, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.sent: list[dict[str, Any]] = []
        self.step = 0
        page.on("requestfinished", self._record)

    def _record(self, request: Any) -> None:
        if "/api/v2/" in request.url and request.method in ("POST", "PATCH"):
            resp = request.response()
            self.sent.append(
                {
                    "method": request.method,
                    "url": request.url,
                    "body": request.post_data,
                    "status": resp.status if resp else None,
                    "response": resp.text() if resp is not None else None,
                }
            )

    def shot(self, name: str) -> Path:
        self.step += 1
        path = SHOTS / f"{self.step:02d}-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def login(self) -> None:
        pg = self.page
        pg.goto(f"{self.base_url}/")
        pg.get_by_label("Username").fill(ADMIN_USER)
        pg.get_by_label("Password").fill(ADMIN_PASSWORD)
        self.shot("login")
        pg.get_by_role("button", name="Sign in").click()
        pg.wait_for_url(re.compile(r"^(?!.*/auth/login).*$"), timeout=60_000)

    def open_trigger_dialog(self, dag: str) -> Any:
        pg = self.page
        pg.goto(f"{self.base_url}/dags/{dag}")
        pg.locator('[data-testid="trigger-dag-button"]').click(timeout=60_000)
        dialog = pg.locator('[role="dialog"][data-state="open"]').last
        dialog.locator('[data-testid="trigger-dag-submit"], button:has-text("Run Backfill")').first.wait_for()
        return dialog

    def pick(self, widget: Any, when: datetime) -> None:
        """Set a date-time widget (a popover with date and time fields)."""
        widget.click()
        pop = self.page.locator('[data-scope="popover"][data-part="content"][data-state="open"]')
        pop.get_by_placeholder("YYYY/MM/DD").fill(when.strftime("%Y/%m/%d"))
        pop.get_by_placeholder("HH:mm").fill(when.strftime("%H:%M"))
        self.page.keyboard.press("Escape")
        pop.wait_for(state="hidden")

    def submit(self, button: Any, path_part: str) -> dict[str, Any]:
        """Click ``button`` and return the POST it made to the API (body, status, response)."""

        def match(r: Any) -> bool:
            return path_part in r.url and r.request.method == "POST"

        with self.page.expect_response(match, timeout=60_000) as info:
            button.click()
        resp = info.value
        return {"body": resp.request.post_data, "status": resp.status, "response": resp.text()}


@pytest.fixture
def ui(local_stack: AirflowStack) -> Iterator[Ui]:
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} missing: run scripts/install-browser.sh"
    shutil.rmtree(SHOTS, ignore_errors=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(30_000)
            u = Ui(page, local_stack.base_url)
            try:
                yield u
            finally:
                u.shot("last")
                (SHOTS / "api-calls.json").write_text(json.dumps(u.sent, indent=2))
        finally:
            browser.close()


def _wait_success(api: ApiClient, stack: AirflowStack, dag: str, run_id: str) -> dict[str, Any]:
    run = api.wait_run(dag, run_id, stack=stack, timeout=240)
    assert run["state"] == "success", api.task_states(dag, run_id)
    return run


@pytest.mark.timeout(600)
def test_trigger_form_with_params_and_backfill_dialog(
    ui: Ui, local_stack: AirflowStack, api: ApiClient, snow: Any, lake: Lake
) -> None:
    # The backfill table (its first scheduled run is done by now); the API
    # backfill test used logical dates day 2..3, this one uses day 6.
    table, dag = "e2e_backfill", dag_id("e2e_backfill")
    src = SOURCES[table]
    ui.login()
    ui.shot("logged-in")

    # 1. A single run from the trigger form: window [day 2, day 4) typed into the
    #    date-time pickers of the params, "Dry run" left off.
    dialog = ui.open_trigger_dialog(dag)
    params = dialog.locator('[id$=":content:Run Parameters"]')
    pickers = params.locator('[data-testid="datetime-input"]')
    assert pickers.count() == 2
    ui.pick(pickers.nth(0), day(2))
    ui.pick(pickers.nth(1), day(4))
    assert params.get_by_text("Dry run").count() == 1 and params.get_by_text("Full refresh").count() == 1
    ui.shot("trigger-form-filled")
    sent = ui.submit(dialog.locator('[data-testid="trigger-dag-submit"]'), f"/dags/{dag}/dagRuns")
    assert sent["status"] in (200, 201), sent
    conf = json.loads(sent["body"])["conf"]
    assert parse_ts(conf["window_start"]) == day(2) and parse_ts(conf["window_end"]) == day(4)
    assert conf["dry_run"] is False and conf["full_refresh"] is False
    run_id = json.loads(sent["response"])["dag_run_id"]

    # The UI shows the run; the header's state badge turns to success.
    ui.page.goto(f"{ui.base_url}/dags/{dag}/runs/{run_id}")
    badge = ui.page.locator('[data-testid="header-card"] [data-testid="state-badge"]').first
    badge.wait_for(timeout=60_000)
    _wait_success(api, local_stack, dag, run_id)
    ui.page.reload()
    ui.page.locator(
        '[data-testid="header-card"] [data-testid="state-badge"]', has_text=re.compile("success", re.I)
    ).first.wait_for(timeout=60_000)
    ui.shot("trigger-run-success")
    window = source_ids(snow, src, day(2), day(4))
    ids = [int(r["order_id"]) for r in lake.rows(table)]
    assert len(ids) == len(set(ids))
    assert set(ids) >= window
    plan = api.xcom(dag, run_id, "plan")
    assert plan["mode"] == "backfill" and plan["rows_in_window"] == len(window)
    mine = [s for s in lake.snapshots(table) if s.get("snowberg.run-id") == run_id]
    assert mine and mine[-1]["snowberg.rows"] == str(len(window))

    # 2. A backfill from the dialog's Backfill tab: logical date day 6 (From =
    #    To: one daily run), "Override parameters" not ticked, so the run
    #    carries no conf and its data interval [day 6, day 7) is the window.
    dialog = ui.open_trigger_dialog(dag)
    dialog.get_by_text("Backfill", exact=True).click()
    run_backfill = dialog.get_by_role("button", name="Run Backfill")
    run_backfill.wait_for()
    ranges = dialog.locator('[data-testid="datetime-input"]')
    ui.pick(ranges.nth(0), day(6))
    ui.pick(ranges.nth(1), day(6))
    ui.page.wait_for_function("b => !b.disabled", arg=run_backfill.element_handle(), timeout=30_000)
    ui.shot("backfill-dialog-filled")
    sent = ui.submit(run_backfill, "/backfills")
    assert sent["status"] in (200, 201), sent
    body = json.loads(sent["body"])
    assert body.get("dag_run_conf") in (None, {}), body
    backfill = json.loads(sent["response"])
    assert backfill["dag_run_conf"] is None

    runs = [
        r
        for r in wait_runs_done(
            api, dag, count=1, run_type="backfill", stack=local_stack, started_after=backfill["created_at"]
        )
    ]
    assert all(r["state"] == "success" for r in runs), {
        r["dag_run_id"]: api.task_states(dag, r["dag_run_id"]) for r in runs
    }
    assert [(parse_ts(r["data_interval_start"]), parse_ts(r["data_interval_end"])) for r in runs] == [(day(6), day(7))]
    assert runs[0]["conf"] in (None, {})
    snaps = lake.snapshots(table)
    for r in runs:
        mine = [s for s in snaps if s.get("snowberg.run-id") == r["dag_run_id"]]
        n = len(source_ids(snow, src, parse_ts(r["data_interval_start"]), parse_ts(r["data_interval_end"])))
        assert mine and mine[-1]["snowberg.mode"] == "backfill" and mine[-1]["snowberg.rows"] == str(n)
    ids = [int(r["order_id"]) for r in lake.rows(table)]
    assert len(ids) == len(set(ids))
    assert set(ids) >= window | source_ids(snow, src, day(6), day(7))

    ui.page.goto(f"{ui.base_url}/dags/{dag}/backfills")
    ui.page.wait_for_load_state("networkidle")
    ui.shot("backfills-list")
    ui.page.goto(f"{ui.base_url}/dags/{dag}/runs")
    ui.page.get_by_text(runs[0]["dag_run_id"]).first.wait_for(timeout=60_000)
    ui.shot("runs-list")
    assert backfill["dag_id"] == dag
