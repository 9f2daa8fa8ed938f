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


def _bar_heights(svg: str) -> list[float]:
    import re

    return [float(h) for h in re.findall(r'<rect class="bar"[^>]* height="([0-9.]+)"', svg)]


def test_the_chart_has_a_dated_time_axis_log_scales_and_a_caption_that_counts_right() -> None:
    """A 120,000-row first load beside 500, 2,000 and 300-row runs; ages from 1520 h down to 12 s."""
    import re
    from datetime import UTC, datetime, timedelta
    from zoneinfo import ZoneInfo

    from snowberg.airflow.ui import chart_caption, svg_chart
    from snowberg.airflow.ui_data import RunPoint

    rows_ages = [(120_000, 1520 * 3600.0), (500, 12.0), (2_000, 14.0), (300, 12.0)]
    pts = [
        RunPoint(
            snapshot_id=i,
            run_id=f"r{i}",
            mode="incremental",
            committed_at=(datetime(2026, 11, 28, 10, tzinfo=UTC) + timedelta(days=i)).isoformat(),
            rows=rows,
            watermark_age_seconds=age,
        )
        for i, (rows, age) in enumerate(rows_ages)
    ]
    svg = svg_chart(pts, tz=ZoneInfo("UTC"))
    heights = _bar_heights(svg)
    assert heights[1] > heights[0] * 0.4 and heights[3] > heights[0] * 0.4  # small runs stay visible
    assert heights[2] > heights[1] > heights[3]  # and in order
    # The time axis: first, middle and last commit with dates; bars placed by time.
    assert re.findall(r'class="axis tick-time"[^>]*>([^<]+)<', svg) == [
        "2026-11-28 10:00",
        "2026-11-29 22:00",
        "2026-12-01 10:00",
    ]
    assert [t for t in re.findall(r'class="axis tick-rows">([^<]+)<', svg)] == [
        "1",
        "10",
        "100",
        "1,000",
        "10,000",
        "100,000",
    ]
    # The age axis in units that fit (log scale): 12 s stays off the baseline, beside 1520 h.
    assert re.findall(r'class="axis lag tick-age">([^<]+)<', svg) == ["1 s", "1 min", "1 h", "1 d"]
    ys = [float(y) for y in re.findall(r'<circle cx="[0-9.]+" cy="([0-9.]+)"', svg)]
    baseline = float(re.search(r'<line x1="[0-9.]+" y1="([0-9.]+)"', svg).group(1))  # type: ignore[union-attr]
    assert all(baseline - y > 10 for y in ys[1:]), (ys, baseline)
    assert "watermark age at commit 63.3 d</title>" in svg and "watermark age at commit 12 s</title>" in svg
    # Captions count right, and say as of when.
    as_of = "2026-12-03T08:00:00+00:00"
    assert chart_caption(pts, as_of, ZoneInfo("UTC")).startswith("4 snowberg commits, as of <time")
    assert chart_caption(pts[:1], as_of, ZoneInfo("UTC")).startswith("1 snowberg commit, as of")
    assert "2026-12-03 08:00:00 UTC" in chart_caption(pts[:1], as_of, ZoneInfo("UTC"))


def test_the_numbers_live_rows_whole_run_zone_named_times_watermark_zone_and_failures_flagged() -> None:
    from zoneinfo import ZoneInfo

    from snowberg.airflow.ui import render_page, render_table
    from snowberg.airflow.ui_data import RunInfo, TableStatus

    base = dict(
        name="orders",
        dag_id="snowberg_orders",
        checks_dag_id="snowberg_orders__checks",
        source="DB.S.O",
        target="shop.orders",
        catalog="lake",
    )
    run = RunInfo(
        run_id="manual__1",
        state="success",
        start_date="2026-12-01T10:00:00+00:00",
        end_date="2026-12-01T10:00:11+00:00",
        url="/dags/snowberg_orders/runs/manual__1",
        duration_seconds=11.0,
    )
    ok = TableStatus(
        **base,  # type: ignore[arg-type]
        exists=True,
        snapshot_id=7,
        run_id="manual__1",
        committing_run=run,
        last_load_run=run,
        mode="incremental",
        committed_at="2026-12-01T10:00:10+00:00",
        rows=300,
        bytes=2048,
        live_rows=120_000,
        load_task_seconds=0.3,
        watermark="2026-12-01 01:59:00",
        watermark_kind="timestamp_ntz",
        watermark_zone="America/Los_Angeles",
        sla="1m",
        sla_seconds=60,
        freshness_measure="proven_current",
        fresh=False,
        freshness_age_seconds=216,
        as_of="2026-12-01T10:05:00+00:00",
        attention="stale",
    )
    html = render_table(ok, ZoneInfo("Europe/Amsterdam"))
    assert "<span data-field='live_rows'>120,000</span> live rows" in html
    assert "load task 0.3 s, whole run 11 s" in html
    assert "2026-12-01 11:00:10 CET" in html  # the commit time in the page's zone, the zone named
    assert (
        "<a href='/dags/snowberg_orders/runs/manual__1' target='_top' data-link='committing-run'>manual__1</a>" in html
    )
    assert "(America/Los_Angeles, timestamp_ntz)" in html
    assert "STALE</b>: proven current 3.6 min ago, SLA 1.0 min" in html  # one unit for both
    page = render_page([ok], ZoneInfo("Europe/Amsterdam"))
    assert "1 of 1 tables need attention" in page and "times in Europe/Amsterdam" in page
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "")  # relative links only

    unreachable = TableStatus(
        **base, catalog_error="catalog lake did not answer in time", attention="catalog unreachable"
    )  # type: ignore[arg-type]
    html = render_table(unreachable)
    assert "no SLA" not in html and "- rows" not in html and "at -" not in html
    assert "cannot be judged</b>: the catalog could not be read" in html and "<b class='bad'>unknown</b>" in html
    missing = TableStatus(**base, exists=False, attention="table missing")  # type: ignore[arg-type]
    html = render_table(missing)
    assert "none</b>: the lake table does not exist" in html and "nothing</b>: the lake table does not exist" in html
    assert "- rows" not in html and "- live rows" not in html


def test_attention_names_the_most_urgent_reason_and_orders_the_tables() -> None:
    from snowberg.airflow.ui_data import RunInfo, TableStatus, attention, attention_rank

    def status(name: str, **kw: object) -> TableStatus:
        return TableStatus(
            name=name, dag_id=f"d_{name}", checks_dag_id="c", source="S", target="n.t", catalog="lake", **kw
        )  # type: ignore[arg-type]

    failed_run = RunInfo(run_id="r9", state="failed", start_date=None, end_date=None, url="/dags/d/runs/r9")
    tables = {
        "ok": status("ok", exists=True, fresh=True),
        "stale": status("stale", exists=True, fresh=False, freshness_reasons=["over the SLA"]),
        "watch": status("watch", exists=True, fresh=True, watch={"state": "failing", "error": "no privilege"}),
        # A failed load outranks what the lake still shows (stale here).
        "load": status("load", exists=True, fresh=False, last_load_run=failed_run),
    }
    got = {n: attention(t) for n, t in tables.items()}
    assert got == {
        "ok": (None, None),
        "stale": ("stale", "over the SLA"),
        "watch": ("watch failing", "no privilege"),
        "load": ("load failed", "the latest load run r9 failed"),
    }
    for t in tables.values():
        t.attention, t.attention_detail = attention(t)
    assert [t.name for t in sorted(tables.values(), key=attention_rank)] == ["load", "stale", "watch", "ok"]


def test_a_table_loaded_with_policies_allowed_says_so_and_one_without_does_not() -> None:
    from snowberg.airflow.ui import render_table
    from snowberg.airflow.ui_data import TableStatus

    base = dict(
        name="masked",
        dag_id="snowberg_masked",
        checks_dag_id="snowberg_masked__checks",
        source="DB.S.M",
        target="shop.masked",
        catalog="lake",
        exists=True,
    )
    allowed = "MASKING_POLICY GOV.P.EMAIL_MASK on EMAIL (role LOADER)"
    html = render_table(TableStatus(**base, policies_allowed=allowed))  # type: ignore[arg-type]
    assert f"<span class='warn' data-field='policies_allowed'>{allowed}</span>" in html
    assert "policies_allowed" not in render_table(TableStatus(**base))  # type: ignore[arg-type]
