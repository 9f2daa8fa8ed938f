"""The snowberg UI page: its HTML, and no data without a login (its data: test_ui_data.py).

The page in a real api-server and browser: tests/e2e/test_ecosystem.py.
"""

from __future__ import annotations

from typing import Any


def test_the_chart_draws_one_bar_per_run_and_the_page_escapes_what_it_shows() -> None:
    from snowberg.airflow.ui import render_page, svg_chart
    from snowberg.airflow.ui_data import RunPoint, TableStatus

    pts = [
        RunPoint(
            snapshot_id=1, run_id="r<1>", mode="incremental", committed_at="t", rows=10, watermark_age_seconds=60.0
        ),
        RunPoint(snapshot_id=2, run_id="r2", mode="incremental", committed_at="t", rows=0, watermark_age_seconds=None),
    ]
    svg = svg_chart(pts)
    assert svg.count('<rect class="bar"') == 2 and 'data-rows="10"' in svg and "r&lt;1&gt;" in svg
    assert svg.count("<circle") == 1  # no lag point where the cursor is not time-like
    status = TableStatus(
        name="orders",
        dag_id="snowberg_orders",
        checks_dag_id="snowberg_orders__checks",
        source="DB.S.ORDERS",
        target="shop.orders",
        catalog="lake",
        rows=1234,
        snapshot_id=42,
        history=pts,
        errors=["NoSuchTableError: <b>gone</b>"],
    )
    page = render_page([status])
    assert "<span data-field='rows'>1,234</span>" in page
    assert "&lt;b&gt;gone&lt;/b&gt;" in page and "<b>gone</b>" not in page
    assert "/dags/snowberg_orders__checks" in page
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "").split("<body>")[0]  # nothing fetched


def test_the_chart_names_its_line_for_what_it_plots_the_watermark_age_not_freshness() -> None:
    """The line is commit time − watermark (7056000 s = 1960 h here) next to a table that is fresh."""
    from snowberg.airflow.ui import render_page
    from snowberg.airflow.ui_data import RunPoint, TableStatus

    old_cursor = RunPoint(
        snapshot_id=1, run_id="r1", mode="incremental", committed_at="t", rows=5, watermark_age_seconds=7_056_000.0
    )
    status = TableStatus(
        name="orders",
        dag_id="snowberg_orders",
        checks_dag_id="snowberg_orders__checks",
        source="DB.S.ORDERS",
        target="shop.orders",
        catalog="lake",
        sla="1h",
        sla_seconds=3600,
        freshness_measure="proven_current",
        fresh=True,
        freshness_age_seconds=360,
        history=[old_cursor],
    )
    page = render_page([status])
    assert "freshness lag" not in page
    assert "watermark age at commit (line, log scale)</text>" in page
    assert "watermark age at commit 81.7 d</title>" in page  # the bar's tooltip, in days
    # Freshness: its own figure, on the measure it is judged on, age and SLA in one unit.
    assert "<b class='ok'>fresh</b>: proven current 6.0 min ago, SLA 60.0 min" in page


def test_a_check_that_could_not_run_is_shown_as_such_with_its_reason_never_as_a_success() -> None:
    from snowberg.airflow.ui import render_page
    from snowberg.airflow.ui_data import CheckOutcome, CheckTask, RunInfo, TableStatus, check_outcome

    reason = "broken: the lake table n.broken does not exist (not loaded yet?): nothing to verify"
    checks = []
    for task_id, state, result in [
        ("check_volume", "skipped", {"status": "not_run", "reason": reason}),
        ("check_freshness", "success", {"fresh": True}),
        ("table_health", "upstream_failed", None),
    ]:
        outcome, why = check_outcome(state, result)
        checks.append(
            CheckTask(task_id=task_id, state=state, end_date=None, result=result, outcome=outcome, reason=why)
        )
    status = TableStatus(
        name="broken",
        dag_id="snowberg_broken",
        checks_dag_id="snowberg_broken__checks",
        source="DB.S.B",
        target="n.broken",
        catalog="lake",
        checks=checks,
        checks_run=RunInfo(run_id="c1", state="success", start_date=None, end_date=None, url="/dags/x/runs/c1"),
    )
    assert [c.outcome for c in checks] == [CheckOutcome.NOT_RUN, CheckOutcome.PASSED, CheckOutcome.NOT_RUN]
    page = render_page([status])
    volume = page.split("data-check='check_volume'", 1)[1].split("</li>", 1)[0]
    assert (
        "data-outcome='could not run'" in volume and "could not run</b> check_volume: broken: the lake table" in volume
    )
    assert "success" not in volume and "passed" not in volume
    assert "could not run</b> table_health: task upstream_failed" in page
    assert "passed</b> check_freshness (fresh)" in page


def test_without_a_login_the_page_and_the_api_answer_401_with_no_data() -> None:
    from fastapi.testclient import TestClient

    from snowberg.airflow.ui import create_app

    client = TestClient(create_app())
    for path in ("/", "/api/tables"):
        r = client.get(path)
        assert r.status_code == 401 and "orders" not in r.text


def test_a_user_sees_only_the_tables_whose_dag_the_auth_manager_lets_them_read(
    tmp_path: Any, monkeypatch: Any, airflow_db: str
) -> None:
    import yaml

    from snowberg.airflow import ui

    entry = {"source": {"table": "DB.S.T"}, "catalog": "not_configured", "cursor": {"column": "u"}}
    path = tmp_path / "tables.yaml"
    path.write_text(
        yaml.safe_dump({"tables": [{"name": "a", "target": "n.a", **entry}, {"name": "b", "target": "n.b", **entry}]})
    )
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(path))
    allowed: set[str] = set()
    asked: list[Any] = []

    class AuthManager:
        def get_authorized_dag_ids(self, *, user: Any, method: str, session: Any) -> set[str]:
            asked.append((user, method))
            return allowed

    monkeypatch.setattr("airflow.api_fastapi.app.get_auth_manager", lambda: AuthManager())
    user = object()
    assert ui.authorized_tables(user) == [] and asked == [(user, "GET")]
    allowed.add("snowberg_b")
    [b] = ui.authorized_tables(user)
    assert b.name == "b" and b.errors  # its catalog is not configured: said on the table, not raised
