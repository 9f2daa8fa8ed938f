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

import functools
import html
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from snowberg.airflow.ui_data import HISTORY, CheckOutcome, RunInfo, RunPoint, TableStatus


def authorized_tables(user: Any, *, root: str = "", refresh: bool = False) -> list[TableStatus]:
    """The tables whose DAG the auth manager lets ``user`` read (none: an empty page, no data), attention first."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.utils.session import create_session

    from snowberg.airflow.ui_data import collect

    with create_session() as session:
        dag_ids = get_auth_manager().get_authorized_dag_ids(user=user, method="GET", session=session)
        return collect(set(dag_ids), session, root=root, refresh=refresh)


def ui_root(request: Request) -> str:
    """The Airflow UI's root path as the request reached the page (``""`` at the host's root).

    Links are built on it, never on ``[api] base_url`` (unset by default, then ``localhost``).
    """
    root = str(request.scope.get("root_path") or "").rstrip("/")
    return root.removesuffix(MOUNT)


# ---------------------------------------------------------------------------
# Rendering


MOUNT = "/snowberg"


def display_zone() -> Any:
    """The zone the page shows times in: Airflow's ``[core] default_timezone`` (the UI's server-side setting).

    The UI's per-user time zone lives in the browser only; the page has no script, so it names the zone.
    """
    try:
        from airflow.settings import TIMEZONE

        return TIMEZONE
    except Exception:  # noqa: BLE001 - a page outside Airflow shows UTC
        return UTC


def zone_name(tz: Any) -> str:
    return str(getattr(tz, "name", None) or getattr(tz, "key", None) or tz)


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


# (name, seconds) from the largest: a duration is written in the largest unit it reaches.
UNITS = (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0))


def unit_for(seconds: float) -> tuple[str, float]:
    """The unit that fits ``seconds`` (the largest it reaches; seconds below a minute)."""
    s = abs(seconds)
    return next(((u, size) for u, size in UNITS if s >= size), ("s", 1.0))


def in_unit(seconds: float, unit: tuple[str, float]) -> str:
    value = seconds / unit[1]
    whole = abs(value) >= 100 or (unit[1] == 1.0 and abs(value) >= 10)
    return f"{value:,.0f} {unit[0]}" if whole else f"{value:,.1f} {unit[0]}"


def _lag(seconds: float | None) -> str:
    """A duration in the unit that fits it ("12 s", "4.5 min", "63.3 d")."""
    if seconds is None:
        return "-"
    return in_unit(seconds, unit_for(seconds))


def _parse(iso: str | None) -> datetime | None:
    if not iso:
        return None
    try:
        dt = datetime.fromisoformat(iso)
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def when(iso: str | None, tz: Any, *, date: bool = True) -> str:
    """An instant in the page's zone, the zone's abbreviation beside it, in a ``<time>`` with the exact ISO value."""
    dt = _parse(iso)
    if dt is None:
        return "-"
    local = dt.astimezone(tz)
    text = local.strftime("%Y-%m-%d %H:%M:%S %Z" if date else "%H:%M:%S %Z")
    return f"<time datetime='{_e(iso)}'>{_e(text)}</time>"


def _local(epoch: float, tz: Any) -> str:
    return datetime.fromtimestamp(epoch, UTC).astimezone(tz).strftime("%Y-%m-%d %H:%M:%S %Z")


def _ticks(top: float) -> list[float]:
    """Powers of ten up to ``top`` (log axis labels)."""
    out, v = [], 1.0
    while v <= top:
        out.append(v)
        v *= 10
    return out


def _age_ticks(top: float) -> list[tuple[float, str]]:
    return [(size, f"1 {u}") for u, size in reversed(UNITS) if size <= top]


def svg_chart(points: Sequence[RunPoint], *, tz: Any = UTC, width: int = 560, height: int = 170) -> str:
    """Bars: rows per run; line: the watermark's age at each commit. Both on log scales; x is commit time. Inline SVG.

    Log scales keep a 500-row run visible beside a 120,000-row first load, and a 12 s age beside a
    two-month one. The line is commit time minus the watermark the commit carried: how far behind the
    source's cursor each load was. It is not freshness (how long ago the lake was proven current,
    against the SLA): a table loaded every minute from a source whose newest row is old shows a large
    age and is fresh.
    """
    if not points:
        return "<p class='muted'>no snowberg commit yet</p>"
    pad_l, pad_r, pad_t, pad_b = 60, 60, 10, 44
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    times = [(_parse(p.committed_at) or datetime.now(UTC)).timestamp() for p in points]
    t0, t1 = min(times), max(times)
    span = t1 - t0

    def x_of(t: float) -> float:
        return pad_l + (w / 2 if span <= 0 else w * (t - t0) / span)

    max_rows = max(max(p.rows for p in points), 1)
    row_top = math.log10(max_rows + 1)

    def y_rows(rows: int) -> float:
        return pad_t + h - h * math.log10(rows + 1) / row_top

    ages = [p.watermark_age_seconds for p in points if p.watermark_age_seconds is not None]
    age_top = math.log10(max(max(ages or [1.0]), 1.0) + 1) or 1.0

    def y_age(age: float) -> float:
        return pad_t + h - h * math.log10(max(age, 0.0) + 1) / age_top

    bw = max(2.0, min(14.0, w / max(len(points), 1) * 0.6))
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>rows per run and watermark age at each commit, over time</title>',
        f'<line x1="{pad_l}" y1="{pad_t + h}" x2="{pad_l + w}" y2="{pad_t + h}" stroke="#999"/>',
        f'<text x="{pad_l - 4}" y="{pad_t + h}" text-anchor="end" class="axis">0</text>',
    ]
    for v in _ticks(max_rows):
        y = y_rows(int(v))
        parts.append(f'<text x="{pad_l - 4}" y="{y + 3:.1f}" text-anchor="end" class="axis tick-rows">{v:,.0f}</text>')
        parts.append(f'<line x1="{pad_l}" y1="{y:.1f}" x2="{pad_l + w}" y2="{y:.1f}" stroke="#eee"/>')
    if ages:
        for size, label in _age_ticks(max(ages)):
            parts.append(
                f'<text x="{pad_l + w + 4}" y="{y_age(size) + 3:.1f}" class="axis lag tick-age">{label}</text>'
            )
    # The time axis: first and last commit (and the middle when they are apart), with dates.
    labels = [(t0, "start")] if span <= 0 else [(t0, "start"), (t0 + span / 2, "middle"), (t1, "end")]
    for t, anchor in labels:
        iso = datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")
        text = datetime.fromtimestamp(t, UTC).astimezone(tz).strftime("%Y-%m-%d %H:%M")
        parts.append(
            f'<text x="{x_of(t):.1f}" y="{pad_t + h + 12}" text-anchor="{anchor}" class="axis tick-time" '
            f'data-time="{_e(iso)}">{_e(text)}</text>'
        )
    parts.append(
        f'<text x="{pad_l}" y="{height - 4}" class="axis">rows per run (bars, log scale)</text>'
        f'<text x="{pad_l + w}" y="{height - 4}" text-anchor="end" class="axis lag">'
        "watermark age at commit (line, log scale)</text>"
    )
    line: list[str] = []
    for t, p in zip(times, points, strict=True):
        x, top = x_of(t), y_rows(p.rows)
        parts.append(
            f'<rect class="bar" data-rows="{p.rows}" x="{x - bw / 2:.1f}" y="{top:.1f}" '
            f'width="{bw:.1f}" height="{pad_t + h - top:.1f}" fill="#4a90d9">'
            f"<title>{_e(p.run_id)} at {_e(_local(t, tz))}: "
            f"{p.rows:,} rows, watermark age at commit {_e(_lag(p.watermark_age_seconds))}</title></rect>"
        )
        if p.watermark_age_seconds is not None:
            line.append(f"{x:.1f},{y_age(p.watermark_age_seconds):.1f}")
    if line:
        parts.append(f'<polyline class="lag-line" points="{" ".join(line)}" fill="none" stroke="#e07b00"/>')
        for xy in line:
            cx, cy = xy.split(",")
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="#e07b00"/>')
    parts.append("</svg>")
    return "".join(parts)


def chart_caption(points: Sequence[RunPoint], as_of: str | None, tz: Any) -> str:
    n = len(points)
    what = f"the last {n} snowberg commits" if n >= HISTORY else f"{n} snowberg commit{'' if n == 1 else 's'}"
    return f"{what}, as of {when(as_of, tz)}"


def _run_line(run: RunInfo | None, tz: Any, *, what: str) -> str:
    if run is None:
        return f"<span class='muted'>no {what} yet</span>"
    state = run.state or "unknown"
    took = f", {_lag(run.duration_seconds)}" + (" so far" if run.end_date is None else "")
    took = took if run.duration_seconds is not None else ""
    retry = f" <b class='bad'>retrying {_e(run.retrying_task)}</b>" if run.retrying_task else ""
    return (
        f"<b class='state state-{_e(state)}'>{_e(state)}</b>{retry} "
        f"<a href='{_e(run.url)}' target='_top' data-link='run'>{_e(run.run_id)}</a>"
        f" started {when(run.start_date, tz)}{took}"
    )


def _check_cell(t: TableStatus, tz: Any) -> str:
    if not t.checks:
        return "<span class='muted'>no checks run yet</span>"
    items = []
    for c in t.checks:
        extra = ""
        if c.outcome in (CheckOutcome.NOT_RUN, CheckOutcome.FAILED):
            extra = f": {c.reason}" if c.reason else ""
        elif isinstance(c.result, dict):
            if "data_files" in c.result and ("live_rows" in c.result or "rows" in c.result):
                rows = c.result.get("live_rows", c.result.get("rows"))
                extra = f" ({_num(rows)} live rows, {_num(c.result.get('data_files'))} files)"
            elif "fresh" in c.result:
                extra = " (fresh)" if c.result.get("fresh") else " (stale)"
        outcome = c.outcome.value
        log = f" <a href='{_e(c.url)}' target='_top' data-link='log'>log</a>" if c.url else ""
        items.append(
            f"<li data-check='{_e(c.task_id)}' data-outcome='{_e(outcome)}'>"
            f"<b class='outcome-{_e(outcome.replace(' ', '-'))}' title='task state: {_e(c.state)}'>{_e(outcome)}</b> "
            f"{_e(c.task_id)}{_e(extra)} <span class='muted'>{when(c.end_date, tz)}</span>{log}</li>"
        )
    run = t.checks_run
    link = (
        f"<a href='{_e(run.url)}' target='_top' data-link='checks-run'>latest checks run</a>"
        f" ({_e(run.state)}, started {when(run.start_date, tz)})"
        if run
        else ""
    )
    return f"<ul class='checks'>{''.join(items)}</ul>{link}"


def freshness_cell(t: TableStatus) -> str:
    """Fresh or STALE, on the measure the table is judged on, the age and the SLA in one unit."""
    if t.catalog_error:
        return "<b class='bad'>cannot be judged</b>: the catalog could not be read"
    if t.exists is False:
        return "<b class='bad'>cannot be judged</b>: the lake table does not exist"
    measure = "proven current" if t.freshness_measure == "proven_current" else "last data written"
    verdict = (
        "<span class='muted'>no SLA</span>"
        if t.sla_seconds is None
        else f"<b class='{'ok' if t.fresh else 'bad'}'>{'fresh' if t.fresh else 'STALE'}</b>"
    )
    parts = [verdict]
    age = t.freshness_age_seconds
    if age is not None:
        # One unit for the age and the SLA: the one that fits the smaller (6 min against 60 min, not 0.1 h).
        unit = unit_for(min(age, t.sla_seconds) if t.sla_seconds else age)
        sla = f", SLA {in_unit(t.sla_seconds, unit)}" if t.sla_seconds is not None else ""
        parts.append(f": {measure} {in_unit(age, unit)} ago{sla}")
    elif t.sla_seconds is not None:
        parts.append(f" (SLA {_e(t.sla)})")
    lag = t.watermark_lag_seconds
    if lag is not None and t.max_watermark_lag_seconds is not None:
        unit = unit_for(min(lag, t.max_watermark_lag_seconds))
        cls = "bad" if lag > t.max_watermark_lag_seconds else "ok"
        parts.append(
            f"<div class='{cls}'>watermark {in_unit(lag, unit)} behind now, limit "
            f"{in_unit(t.max_watermark_lag_seconds, unit)}</div>"
        )
    if age is None:  # no data snapshot, an unreadable watermark: the check's own words
        parts.extend(f"<div class='bad'>{_e(r)}</div>" for r in t.freshness_reasons)
    return "".join(parts)


def _watermark_cell(t: TableStatus) -> str:
    if t.watermark is None:
        return "<span class='muted'>none yet</span>"
    kind = t.watermark_kind or "unknown kind"
    zone = f"{t.watermark_zone}, " if t.watermark_zone and kind in ("timestamp_ntz", "date") else ""
    return f"<code data-field='watermark'>{_e(t.watermark)}</code> <span class='muted'>({_e(zone)}{_e(kind)})</span>"


def _watch_cell(t: TableStatus, tz: Any) -> str:
    w = t.watch
    if not w:
        return "-"
    if not w.get("watched"):
        return _e(w.get("mode"))
    state = w.get("state") or "not polled"
    pending = "<b class='bad'>a change is pending</b>" if w.get("pending") else "no change pending"
    err = f"<div class='bad'>poll failing: {_e(w.get('error'))}</div>" if w.get("error") else ""
    reason = f" <span class='muted'>{_e(w.get('reason'))}</span>" if w.get("reason") else ""
    return (
        f"{_e(w.get('mode'))}<br><span data-field='watch-state'>{_e(state)}</span>: {pending}{reason}<br>"
        f"last poll {when(w.get('last_poll'), tz)}, last change seen {when(w.get('last_change_seen'), tz)}{err}"
    )


def _last_commit_cell(t: TableStatus, tz: Any) -> str:
    if t.catalog_error:
        return "<b class='bad'>unknown</b>: the catalog could not be read"
    if t.exists is False:
        return "<b class='bad'>none</b>: the lake table does not exist"
    if t.snapshot_id is None:
        return "<span class='muted'>no snowberg commit yet</span>"
    run = t.committing_run
    by = (
        f"<a href='{_e(run.url)}' target='_top' data-link='committing-run'>{_e(t.run_id)}</a>"
        if run
        else f"<code>{_e(t.run_id)}</code>"
    )
    task = f"load task {_lag(t.load_task_seconds)}" if t.load_task_seconds is not None else "load task -"
    whole = f"whole run {_lag(run.duration_seconds)}" if run and run.duration_seconds is not None else "whole run -"
    return (
        f"<span data-field='rows'>{_num(t.rows)}</span> rows, <span data-field='bytes'>{_bytes(t.bytes)}</span> added "
        f"at {when(t.committed_at, tz)} by run {by} ({_e(t.mode)}; {task}, {whole}); "
        f"snapshot <code data-field='snapshot_id'>{_e(t.snapshot_id)}</code>"
    )


def render_table(t: TableStatus, tz: Any = UTC) -> str:
    mirror = "-" if t.mirror is None else ("in sync" if t.mirror_in_sync else "differs")
    live = (
        "<b class='bad'>unknown</b>: the catalog could not be read"
        if t.catalog_error
        else "<b class='bad'>nothing</b>: the lake table does not exist"
        if t.exists is False
        else f"<span data-field='live_rows'>{_num(t.live_rows)}</span> live rows"
    )
    rows = [
        ("source", f"Snowflake <code>{_e(t.source)}</code>"),
        ("target", f"Iceberg <code>{_e(t.target)}</code> in <code>{_e(t.catalog)}</code>"),
        ("latest load run", _run_line(t.last_load_run, tz, what="load run")),
        ("last commit", _last_commit_cell(t, tz)),
        ("table holds", live),
        ("watermark", _watermark_cell(t)),
        ("freshness", freshness_cell(t)),
        ("started by", _watch_cell(t, tz)),
        ("Variable mirror", f"<span data-field='mirror'>{_e(mirror)}</span>"),
        ("checks", _check_cell(t, tz)),
    ]
    if t.policies_allowed:  # on_policy: allow: the lake holds what the policies let the role read, deliberately
        rows.insert(
            5,
            (
                "policies allowed",
                f"<span class='warn' data-field='policies_allowed'>{_e(t.policies_allowed)}</span> "
                "<span class='muted'>(on_policy: allow; the lake holds what they let the loading role read)</span>",
            ),
        )
    root = t.last_load_run.url.split("/dags/", 1)[0] if t.last_load_run else ""
    links = " · ".join(
        f"<a href='{_e(root)}/dags/{quote(d, safe='')}' target='_top'>{_e(d)}</a>" for d in (t.dag_id, t.checks_dag_id)
    )
    flag = (
        f"<div class='attention' data-field='attention'><b>{_e(t.attention)}</b>"
        f"{': ' + _e(t.attention_detail) if t.attention_detail else ''}</div>"
        if t.attention
        else ""
    )
    errors = "".join(f"<div class='bad err'>{_e(e)}</div>" for e in t.errors if e != t.attention_detail)
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    cls = "table needs-attention" if t.attention else "table"
    return (
        f"<section class='{cls}' data-table='{_e(t.name)}' data-attention='{_e(t.attention or '')}'>"
        f"<h2>{_e(t.name)}</h2>{flag}{errors}"
        f"<div class='grid'><table>{body}</table><div>{svg_chart(t.history, tz=tz)}"
        f"<div class='muted caption'>{chart_caption(t.history, t.as_of, tz)}</div></div></div>"
        f"<div class='links'>DAGs: {links}</div></section>"
    )


STYLE = """
body{font-family:system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 8px} h2{font-size:16px;margin:0 0 8px}
p.summary{font-size:15px;margin:0 0 14px} p.summary b{color:#c62828}
section.table{border:1px solid #ddd;border-radius:6px;padding:12px;margin-bottom:14px}
section.needs-attention{border:2px solid #c62828}
.attention{color:#c62828;margin:0 0 8px;font-size:14px}
.grid{display:flex;gap:24px;flex-wrap:wrap} table{border-collapse:collapse;font-size:13px;max-width:760px}
th{text-align:left;padding:3px 10px 3px 0;color:#555;vertical-align:top;font-weight:600} td{padding:3px 0}
.muted{color:#888;font-size:12px} .ok{color:#1a7f37} .bad{color:#c62828} .warn{color:#9a6700} code{font-size:12px}
.axis{font-size:10px;fill:#666} .lag{fill:#e07b00} ul.checks{margin:0;padding-left:16px}
.outcome-passed{color:#1a7f37} .outcome-failed{color:#c62828} .outcome-could-not-run{color:#b26a00}
.outcome-not-finished{color:#555} .links{margin-top:8px;font-size:13px}
.state-failed{color:#c62828} .state-success{color:#1a7f37} .state-running{color:#b26a00}
"""


def render_page(tables: Sequence[TableStatus], tz: Any = None) -> str:
    tz = tz if tz is not None else display_zone()
    need = sum(1 for t in tables if t.attention)
    as_of = max((t.as_of for t in tables if t.as_of), default=None)
    summary = (
        f"<p class='summary' data-field='summary'><b>{need} of {len(tables)} tables need attention</b>"
        if need
        else f"<p class='summary' data-field='summary'>{len(tables)} tables, none needs attention"
    ) + f" · as of {when(as_of, tz)} · times in {_e(zone_name(tz))}</p>"
    zone = zone_name(tz)
    body = "".join(t.memo(f"html {zone}", functools.partial(render_table, t, tz)) for t in tables)
    body = body or "<p>No table you may read is configured.</p>"
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>snowberg tables</title>"
        f"<style>{STYLE}</style></head><body><h1>snowberg: lake tables</h1>"
        f"{summary if tables else ''}{body}</body></html>"
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
    def tables_json(
        request: Request,
        refresh: bool = False,
        user: Any = Depends(current_user),  # noqa: B008
    ) -> Response:
        tables = authorized_tables(user, root=ui_root(request), refresh=refresh)
        # Each status's JSON is encoded once while it is cached (FastAPI's encoder would walk it on every view).
        return Response("[" + ",".join(t.to_json() for t in tables) + "]", media_type="application/json")

    @app.get("/", response_class=HTMLResponse)
    def page(request: Request, refresh: bool = False, user: Any = Depends(current_user)) -> str:  # noqa: B008
        return render_page(authorized_tables(user, root=ui_root(request), refresh=refresh))

    return app
