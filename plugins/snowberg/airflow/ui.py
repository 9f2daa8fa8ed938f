"""The snowberg page in the Airflow UI: a FastAPI app the api-server mounts (``snowberg.airflow.ui_plugin``).

* ``GET /snowberg/``            the page (server-rendered HTML, charts as inline SVG:
                                no script and nothing fetched from outside, so it
                                works on machines without internet access);
* ``GET /snowberg/api/tables``  the same data as JSON.

Both sit behind Airflow's own authentication and authorization: the caller is
resolved by Airflow's ``get_user`` dependency (the UI's session cookie or an
``Authorization: Bearer`` token from ``POST /auth/token``), so no login means
401, and a table is shown only when the auth manager lets the user read its
DAG (``get_authorized_dag_ids``): a user without access gets no data.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from snowberg.airflow.ui_data import CheckOutcome, RunPoint, TableStatus


def _base() -> str:
    from snowberg.airflow.alerts import base_url

    return base_url()


def authorized_tables(user: Any) -> list[TableStatus]:
    """The tables whose DAG the auth manager lets ``user`` read (none: an empty page, no data)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.utils.session import create_session

    from snowberg.airflow.ui_data import collect

    with create_session() as session:
        dag_ids = get_auth_manager().get_authorized_dag_ids(user=user, method="GET", session=session)
        return collect(set(dag_ids), session)


# ---------------------------------------------------------------------------
# Rendering


def _e(value: Any) -> str:
    return html.escape("-" if value is None else str(value))


def _num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _bytes(value: int | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{value} B"


def _lag(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = abs(seconds)
    text = f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"
    return ("-" if seconds < 0 else "") + text


def svg_chart(points: Sequence[RunPoint], *, width: int = 520, height: int = 140) -> str:
    """Bars: rows per run; line: the watermark's age at each commit (own scale, right axis). Inline SVG.

    The line is commit time minus the watermark the commit carried: how far
    behind the source's cursor each load was. It is not freshness (how long
    ago the lake was written, against the SLA): a table loaded every minute
    from a source whose newest row is old shows a large age and is fresh.
    """
    if not points:
        return "<p class='muted'>no snowberg commit yet</p>"
    pad_l, pad_r, pad_t, pad_b = 56, 56, 10, 22
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    n = len(points)
    step = w / n
    max_rows = max(p.rows for p in points) or 1
    lags = [p.watermark_age_seconds for p in points if p.watermark_age_seconds is not None]
    max_lag = max(lags) if lags and max(lags) > 0 else 1.0
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>rows per run and watermark age at each commit</title>',
        f'<line x1="{pad_l}" y1="{pad_t + h}" x2="{pad_l + w}" y2="{pad_t + h}" stroke="#999"/>',
        f'<text x="{pad_l - 4}" y="{pad_t + 8}" text-anchor="end" class="axis">{max_rows:,}</text>',
        f'<text x="{pad_l - 4}" y="{pad_t + h}" text-anchor="end" class="axis">0</text>',
        f'<text x="{pad_l + w + 4}" y="{pad_t + 8}" class="axis lag">{_e(_lag(max_lag))}</text>',
        f'<text x="{pad_l}" y="{height - 4}" class="axis">rows per run (bars)</text>',
        f'<text x="{pad_l + w}" y="{height - 4}" text-anchor="end" class="axis lag">'
        "watermark age at commit (line)</text>",
    ]
    line: list[str] = []
    for i, p in enumerate(points):
        bh = h * p.rows / max_rows
        x = pad_l + i * step + step * 0.15
        parts.append(
            f'<rect class="bar" data-rows="{p.rows}" x="{x:.1f}" y="{pad_t + h - bh:.1f}" '
            f'width="{step * 0.7:.1f}" height="{bh:.1f}" fill="#4a90d9">'
            f"<title>{_e(p.run_id)}: {p.rows:,} rows, watermark age at commit "
            f"{_e(_lag(p.watermark_age_seconds))}</title></rect>"
        )
        if p.watermark_age_seconds is not None:
            ly = pad_t + h - h * max(p.watermark_age_seconds, 0) / max_lag
            line.append(f"{pad_l + i * step + step / 2:.1f},{ly:.1f}")
    if line:
        parts.append(f'<polyline class="lag-line" points="{" ".join(line)}" fill="none" stroke="#e07b00"/>')
        for xy in line:
            cx, cy = xy.split(",")
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="#e07b00"/>')
    parts.append("</svg>")
    return "".join(parts)


def _check_cell(t: TableStatus) -> str:
    if not t.checks:
        return "<span class='muted'>no checks run yet</span>"
    base = _base()
    items = []
    for c in t.checks:
        extra = ""
        if c.outcome is CheckOutcome.NOT_RUN:
            extra = f": {c.reason}" if c.reason else ""
        elif isinstance(c.result, dict):
            if "rows" in c.result and "data_files" in c.result:
                extra = f" ({_num(c.result.get('rows'))} rows, {_num(c.result.get('data_files'))} files)"
            elif "fresh" in c.result:
                extra = " (fresh)" if c.result.get("fresh") else " (stale)"
        outcome = c.outcome.value
        items.append(
            f"<li data-check='{_e(c.task_id)}' data-outcome='{_e(outcome)}'>"
            f"<b class='outcome-{_e(outcome.replace(' ', '-'))}' title='task state: {_e(c.state)}'>{_e(outcome)}</b> "
            f"{_e(c.task_id)}{_e(extra)}</li>"
        )
    link = f"{base}/dags/{quote(t.checks_dag_id)}/runs/{quote(t.checks_run_id or '')}"
    return f"<ul class='checks'>{''.join(items)}</ul><a href='{_e(link)}' target='_top'>latest checks run</a>"


def render_table(t: TableStatus) -> str:
    base = _base()
    fresh = (
        "<span class='muted'>no SLA</span>"
        if t.sla is None
        else f"<b class='{'ok' if t.fresh else 'bad'}'>{'fresh' if t.fresh else 'STALE'}</b> (SLA {_e(t.sla)})"
    )
    mirror = "-" if t.mirror is None else ("in sync" if t.mirror_in_sync else "differs")
    rows = [
        ("source", f"Snowflake <code>{_e(t.source)}</code>"),
        ("target", f"Iceberg <code>{_e(t.target)}</code> in <code>{_e(t.catalog)}</code>"),
        (
            "last load",
            f"<span data-field='rows'>{_num(t.rows)}</span> rows, <span data-field='bytes'>"
            f"{_bytes(t.bytes)}</span> added, {_e(t.duration_seconds)} s, at {_e(t.committed_at)}",
        ),
        ("snapshot", f"<code data-field='snapshot_id'>{_e(t.snapshot_id)}</code> ({_e(t.mode)}, run {_e(t.run_id)})"),
        ("watermark", f"<code data-field='watermark'>{_e(t.watermark)}</code>"),
        ("Variable mirror", f"<span data-field='mirror'>{_e(mirror)}</span>"),
        (
            "freshness",
            f"{fresh}, last write "
            f"{_e(_lag((t.hours_since_last_write or 0) * 3600) if t.hours_since_last_write is not None else None)} ago"
            + "".join(f"<div class='bad'>{_e(r)}</div>" for r in t.freshness_reasons),
        ),
        ("checks", _check_cell(t)),
    ]
    links = " · ".join(
        f"<a href='{_e(base)}/dags/{quote(d)}' target='_top'>{_e(d)}</a>" for d in (t.dag_id, t.checks_dag_id)
    )
    errors = "".join(f"<div class='bad'>{_e(e)}</div>" for e in t.errors)
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return (
        f"<section class='table' data-table='{_e(t.name)}'><h2>{_e(t.name)}</h2>{errors}"
        f"<div class='grid'><table>{body}</table><div>{svg_chart(t.history)}"
        f"<div class='muted'>last {len(t.history)} snowberg commits</div></div></div>"
        f"<div class='links'>DAGs: {links}</div></section>"
    )


STYLE = """
body{font-family:system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 12px} h2{font-size:16px;margin:0 0 8px}
section.table{border:1px solid #ddd;border-radius:6px;padding:12px;margin-bottom:14px}
.grid{display:flex;gap:24px;flex-wrap:wrap} table{border-collapse:collapse;font-size:13px}
th{text-align:left;padding:3px 10px 3px 0;color:#555;vertical-align:top;font-weight:600} td{padding:3px 0}
.muted{color:#888;font-size:12px} .ok{color:#1a7f37} .bad{color:#c62828} code{font-size:12px}
.axis{font-size:10px;fill:#666} .lag{fill:#e07b00} ul.checks{margin:0;padding-left:16px}
.outcome-passed{color:#1a7f37} .outcome-failed{color:#c62828} .outcome-could-not-run{color:#b26a00}
.outcome-not-finished{color:#555} .links{margin-top:8px;font-size:13px}
"""


def render_page(tables: Sequence[TableStatus]) -> str:
    body = "".join(render_table(t) for t in tables) or "<p>No table you may read is configured.</p>"
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>snowberg tables</title>"
        f"<style>{STYLE}</style></head><body><h1>snowberg: lake tables</h1>{body}</body></html>"
    )


# ---------------------------------------------------------------------------
# The app


_bearer = HTTPBearer(auto_error=False)


async def current_user(
    request: Request,
    bearer: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
) -> Any:
    """Airflow's own ``get_user`` (bearer token, else the UI's session cookie; 401 without either).

    Imported on the first request: every Airflow process loads the plugin file, only
    the api-server serves the page.
    """
    from airflow.api_fastapi.core_api.security import get_user

    return await get_user(request, None, bearer)


def create_app() -> FastAPI:
    app = FastAPI(title="snowberg", description="snowberg tables: loads, watermarks, freshness, checks")

    @app.get("/api/tables")
    def tables_json(user: Any = Depends(current_user)) -> list[dict[str, Any]]:  # noqa: B008
        return [t.to_dict() for t in authorized_tables(user)]

    @app.get("/", response_class=HTMLResponse)
    def page(user: Any = Depends(current_user)) -> str:  # noqa: B008
        return render_page(authorized_tables(user))

    return app
