"""Plan a run: fix its window from the table's state and Snowflake's clock.

The plan is the task's XCom, so a retried load reads exactly the same rows.
The window starts at the watermark stored in the table's last snowberg
commit (the Variable is reconciled, never trusted).
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from snowberg.config.table_config import NullCursorPolicy, OnPolicy, TableConfig
from snowberg.core.cursor import CursorKind
from snowberg.core.identifiers import TableName
from snowberg.core.window import Mode, Window
from snowberg.iceberg import state
from snowberg.iceberg.identity import check_identity
from snowberg.mapping.columns import SnowflakeColumn, TypeMappingError
from snowberg.snowflake import source_version
from snowberg.snowflake.change_signal import SignalKind, read_signal
from snowberg.snowflake.policies import check_policies
from snowberg.snowflake.source import SourceQuery, cursor_kind, describe_cursor

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")

# A writer's clock may differ from Snowflake's by a little; by more than this
# ahead of the configured zone, the cursor is read as written in another zone.
CLOCK_TOLERANCE = timedelta(minutes=15)


# The run modes under their old names, for modules that still import them from here.
INCREMENTAL, BACKFILL, FULL_REFRESH = Mode.INCREMENTAL, Mode.BACKFILL, Mode.FULL_REFRESH

# Window.extra key of a cursor-less run that reads nothing because the source is unchanged: why.
SKIPPED = "skipped_because"
# Window.extra keys of a watched table's run (docs/event-driven.md): the source's change token read before
# the plan's query, and when rows beyond the window (if any) are covered by a run.
WATCH_SIGNAL = "watch_signal"
WATCH_DUE = "watch_due"
# Window.extra key of a run that loads a source with policies its table allows (``on_policy: allow``): what they
# are; each commit records it in its snapshot summary (``snowberg.iceberg.gate.run_counts``).
POLICIES_ALLOWED = state.WINDOW_POLICIES_ALLOWED
# Added to a due time: the triggerer's clock and Snowflake's may differ by a little.
DUE_MARGIN = timedelta(minutes=1)


class PlanError(ValueError):
    """The run cannot be planned as asked. Raised before any SQL; the message says what to do instead."""


def plan_run(
    cfg: TableConfig,
    conn: Any,
    table: Table | None,
    *,
    run_id: str,
    mode: str = Mode.INCREMENTAL,
    start: Any = None,
    end: Any = None,
    dry_run: bool = False,
    dag_id: str = "",
) -> Window:
    """Fix the window of a run. Reads the table's state and Snowflake's clock.

    ``start``/``end`` bound a backfill: instants (aware datetimes or ISO text)
    for time cursors, numbers for NUMBER cursors. ``dag_id``: the run's DAG
    (its commit records it with the run id).
    """
    mode = Mode(mode)
    check_identity(cfg, table, mode=mode)
    st = state.read_state(table)
    base_wm = st.watermark if st else None
    base_snap = st.snapshot_id if st else None
    planned_at = datetime.now(UTC).isoformat()
    sq = SourceQuery(cfg)
    if mode is Mode.BACKFILL:
        check_backfill_request(cfg, st, start, end)
    # Read before anything else: a change committed after it moves the token again, so the triggerer
    # starts another run for what this one may not see (docs/event-driven.md, "No row stays behind").
    watched = watch_signal(cfg, conn, mode, dry_run)
    # Masking and row access policies: one metadata query, before any row is read (PolicyError under on_policy fail).
    policies = policy_extra(cfg, conn)
    if cfg.cursor is None:
        # Without a cursor nothing tells new rows from old: a run replaces the table, unless Snowflake
        # reports the source unchanged since the last load (scheduled runs only; a full_refresh always reloads).
        observed = source_version.observe(cfg, conn)
        if mode is Mode.INCREMENTAL:
            last = recorded_source_version(table)
            why = source_version.unchanged(last, observed)
            if why is not None:
                log.info("table %s: nothing to load, no commit: %s", cfg.name, why)
                return Window(
                    mode=Mode.INCREMENTAL,
                    base_watermark=base_wm,
                    base_snapshot_id=base_snap,
                    rows_in_window=0,
                    planned_at=planned_at,
                    run_id=run_id,
                    dag_id=dag_id,
                    dry_run=dry_run,
                    extra={SKIPPED: why, **watched, **policies},
                )
            log.info(
                "table %s has no cursor: this run is a full refresh (one replace commit): %s",
                cfg.name,
                source_version.changed_reason(last, observed),
            )
        return Window(
            mode=Mode.FULL_REFRESH,
            base_watermark=base_wm,
            base_snapshot_id=base_snap,
            planned_at=planned_at,
            run_id=run_id,
            dag_id=dag_id,
            dry_run=dry_run,
            extra=({state.SOURCE_VERSION: observed.version.to_text()} if observed.version else {}) | watched | policies,
        )
    zone = ZoneInfo(cfg.cursor.timezone)

    cur = conn.cursor()
    try:
        recorded = CursorKind(st.cursor_kind) if st and st.cursor_kind else None
        kind: CursorKind
        if recorded is not None and recorded is not CursorKind.NUMBER and mode is not Mode.BACKFILL:
            # The kind the watermark was recorded with: no describe round trip before the plan query,
            # whose own result types are checked against it below (check_plan_cursor) before any use.
            kind, scale = recorded, 0
            described = False
        else:
            kind, scale = _described_kind(cfg, cur, sq, recorded)
            described = True
        policy = cfg.cursor.null_policy
        include_nulls = policy is NullCursorPolicy.INCLUDE and mode is not Mode.BACKFILL

        if mode is Mode.BACKFILL:
            assert base_wm is not None  # check_backfill_request refused a table without one
            w = _backfill_window(cfg, kind, scale, zone, start, end, base_wm)
            w = replace(
                w,
                base_snapshot_id=base_snap,
                planned_at=planned_at,
                run_id=run_id,
                dag_id=dag_id,
                dry_run=dry_run,
                extra=w.extra | policies,
            )
            w = _count_backfill(cur, sq, w)
            log.info("planned backfill window for %s: %s", cfg.name, describe_window(w))
            return w

        low: str | None
        if mode is Mode.FULL_REFRESH:
            low, low_inc = None, False
        elif base_wm is not None:
            low, low_inc = base_wm, False
            if cfg.cursor.lookback.total_seconds() > 0:
                low = kind.shift_value(base_wm, cfg.cursor.lookback)
        elif cfg.cursor.initial_value is not None:
            # Inclusive. A value with a UTC offset is an instant, read on the wall clock of cursor.timezone
            # like a backfill bound (an NTZ column holds that wall time); a NUMBER rounds up to the scale.
            low, low_inc = _initial_low(cfg, kind, scale, zone), True
        else:
            low, low_inc = None, False
        # NULL cursors are counted under every policy: raise needs the count,
        # exclude logs it, include loads them.
        sql, params = sq.plan_sql(
            kind, scale, low, low_inc, cfg.cursor.commit_lag, count_nulls=True, zone=cfg.cursor.timezone
        )
        try:
            res = _run_plan(cur, sql, params)
        except Exception:
            if not described:
                # The SQL may fail because the column is no longer of the recorded kind: say so if it is not.
                _described_kind(cfg, cur, sq, recorded)
            raise
        if not described:
            check_plan_cursor(cfg, cur, kind)
    finally:
        cur.close()

    if kind is CursorKind.TIMESTAMP_NTZ:
        _check_writer_clock(cfg, res["clock"], res["newest"])
    high: str | None
    if res["high"] is None:
        # An empty source (or NUMBER/NTZ capped at a newest value that does not exist): nothing to read.
        high = base_wm
    else:
        high = kind.format_value(res["high"])
    null_rows = int(res["null_rows"] or 0)
    if null_rows and policy is NullCursorPolicy.RAISE:
        raise ValueError(
            f"table {cfg.name!r}: {null_rows} source rows have NULL in cursor column {cfg.cursor.column!r}. "
            "Set cursor.null_policy to 'include' (needs primary_key) or 'exclude', or fix the source."
        )
    if null_rows and policy is NullCursorPolicy.EXCLUDE:
        log.warning(
            "table %s: skipping %d rows with NULL %s (null_policy: exclude)", cfg.name, null_rows, cfg.cursor.column
        )
    rows = int(res["rows_in_window"] or 0) + (null_rows if include_nulls else 0)
    if base_wm is not None and high is not None and mode is Mode.INCREMENTAL:
        if kind.parse_value(high) < kind.parse_value(base_wm):
            # The clock minus the lag is behind the committed watermark (a lag
            # was raised, or clocks differ): never move the watermark back.
            log.warning("window high %s is below the watermark %s; nothing to read this run", high, base_wm)
            high, rows = base_wm, 0
    if watched and (due := covered_from(kind, res["newest"], high, cfg.cursor.commit_lag, zone)) is not None:
        watched = {**watched, WATCH_DUE: due.isoformat()}
        log.info(
            "table %s: rows up to %s lie beyond this window (ends %s): a run covers them from %s",
            cfg.name,
            res["newest"],
            high,
            watched[WATCH_DUE],
        )
    w = Window(
        mode=mode,
        cursor_column=cfg.cursor.column,
        cursor_kind=kind,
        cursor_scale=scale,
        low=low,
        low_inclusive=low_inc,
        high=high,
        high_inclusive=True,
        include_nulls=include_nulls,
        base_watermark=base_wm,
        base_snapshot_id=base_snap,
        new_watermark=high,
        rows_in_window=rows,
        null_rows=null_rows,
        planned_at=planned_at,
        run_id=run_id,
        dag_id=dag_id,
        dry_run=dry_run,
        extra={"min_cursor": _str(res["min_cursor"]), "max_cursor": _str(res["max_cursor"])} | watched | policies,
    )
    log.info("planned %s window for %s: %s", mode, cfg.name, describe_window(w))
    return w


def watch_signal(cfg: TableConfig, conn: Any, mode: Mode, dry_run: bool) -> dict[str, Any]:
    """``{WATCH_SIGNAL: token}`` for a watched table's run that loads up to the source's end, else nothing.

    Only incremental and full-refresh runs cover the source's newest rows; a backfill or a dry run
    proves nothing the triggerer could rely on. A stream table's runs do not plan (``snowberg.streams``).
    """
    if cfg.watch is None or cfg.stream is not None or dry_run or mode is Mode.BACKFILL or not cfg.source.table:
        return {}
    name = TableName.parse(cfg.source.table)
    return {WATCH_SIGNAL: read_signal(conn, SignalKind.TABLE, name)}


def policy_extra(cfg: TableConfig, conn: Any) -> dict[str, Any]:
    """``{POLICIES_ALLOWED: text}`` when the run loads a source whose policies its table allows, else nothing."""
    finding = check_policies(cfg, conn, excluded=cfg.columns.exclude)
    if cfg.on_policy is OnPolicy.ALLOW and finding.references:
        return {POLICIES_ALLOWED: f"{finding.summary_text()} (role {finding.role})"}
    return {}


def covered_from(kind: CursorKind, newest: Any, high: str | None, lag: timedelta, zone: ZoneInfo) -> datetime | None:
    """When a run's window first covers ``newest`` (the source's newest cursor value), if this one ends before it.

    A window ends at Snowflake's clock minus ``commit_lag`` (a DATE window at the last closed day), so a
    row beyond it (written within the lag, by a clock ahead of ``cursor.timezone``, dated today) is
    covered by a run that plans after ``newest + commit_lag`` (for a DATE: the next day's midnight in
    ``cursor.timezone`` plus the lag), plus ``DUE_MARGIN`` for the clocks. None when the window covers it.
    """
    if newest is None or high is None or kind is CursorKind.NUMBER:
        return None  # a NUMBER window ends at the newest value
    newest_text = kind.format_value(newest)
    if kind.parse_value(newest_text) <= kind.parse_value(high):
        return None
    if kind is CursorKind.DATE:
        newest_text = kind.format_value(kind.parse_value(newest_text) + timedelta(days=1))
    at = kind.as_instant(newest_text, zone)
    assert at is not None  # time-like kinds only
    return at + lag + DUE_MARGIN


def _initial_low(cfg: TableConfig, kind: CursorKind, scale: int, zone: ZoneInfo) -> str:
    """``cursor.initial_value`` as cursor text: the first value the first run reads."""
    assert cfg.cursor is not None and cfg.cursor.initial_value is not None
    value = cfg.cursor.initial_value
    try:
        if kind is CursorKind.DATE:
            return kind.format_value(value)  # a day, not an instant: no move to the next midnight
        return kind.window_bound(value if kind is CursorKind.NUMBER else str(value), zone, scale)
    except (TypeError, ValueError) as exc:
        raise PlanError(
            f"table {cfg.name!r}: cursor.initial_value {str(value)[:80]!r} is not a {kind.value} value: {exc}"
        ) from None


def recorded_source_version(table: Table | None) -> source_version.SourceVersion | None:
    """The source version the table's last load recorded, if the lake provably holds exactly what that load left.

    Proof is the table's current snapshot being the one that carries the
    state. None (reload) otherwise: another engine wrote to the table since,
    so its rows may no longer be the source's. A state read from the table
    properties proves nothing: it is read only when no snapshot on main
    carries the state any more (expiry took it after another engine's
    commits), and its snapshot id is then the table's current one whoever
    wrote it. Commits that carry the state forward (compaction, propagated
    deletes) carry the version with it.
    """
    st = state.read_state(table)
    if table is None or st is None or st.from_properties:
        return None
    current = table.current_snapshot()
    if current is None or current.snapshot_id != st.snapshot_id:
        return None
    return source_version.SourceVersion.from_text(state.current_state_props(table).get(state.SOURCE_VERSION))


def _described_kind(cfg: TableConfig, cur: Any, sq: SourceQuery, recorded: CursorKind | None) -> tuple[CursorKind, int]:
    """The cursor column's kind and NUMBER scale from a compile-only describe; refused if not the recorded kind."""
    assert cfg.cursor is not None
    ccol = describe_cursor(cur, sq)
    kind = cursor_kind(ccol)
    if recorded is not None and recorded != kind:
        raise TypeMappingError(
            f"cursor column {cfg.cursor.column!r} is now {ccol.sql_type} ({kind}); the table's watermark "
            f"was recorded as {recorded}"
        )
    return kind, (ccol.scale or 0) if kind is CursorKind.NUMBER else 0


def check_plan_cursor(cfg: TableConfig, cur: Any, kind: CursorKind) -> None:
    """Refuse a plan whose cursor column is no longer of the recorded kind, from the plan query's own result.

    ``min_cursor`` is ``MIN(cursor)``, so its result metadata is the cursor
    column's type (also when the window is empty): one statement does what a
    describe and the plan query did, and a retyped column is still refused
    before anything is read or written.
    """
    assert cfg.cursor is not None
    md = next(d for d in (getattr(cur, "_description", None) or cur.description) if d.name.lower() == "min_cursor")
    col = SnowflakeColumn.from_metadata(md)
    now = CursorKind.for_snowflake_type(col.type)
    if now is not kind:
        raise TypeMappingError(
            f"cursor column {cfg.cursor.column!r} is now {col.sql_type}"
            f"{f' ({now})' if now else ''}; the table's watermark was recorded as {kind}"
        )


def _check_writer_clock(cfg: TableConfig, clock: Any, newest: Any) -> None:
    """Refuse a TIMESTAMP_NTZ source whose newest value lies ahead of the clock of ``cursor.timezone``.

    Such values were written by a clock in a zone east of the configured one
    (or in the future): with the clock as the window's bound they would load
    hours late. A writer *behind* the configured clock looks the same as a
    quiet source, so it cannot be refused; the window's bound is capped at the
    newest value for that case (``CursorKind.capped_at_newest``) and nothing
    is lost. Both are logged with the offset.
    """
    assert cfg.cursor is not None
    if clock is None or newest is None:
        return
    gap = newest - clock
    zone = cfg.cursor.timezone
    col = cfg.cursor.column
    if gap > CLOCK_TOLERANCE:
        raise PlanError(
            f"table {cfg.name!r}: the newest {col!r} value ({newest}) is {_hours(gap)} ahead of the clock in "
            f"cursor.timezone {zone!r} ({clock:%Y-%m-%d %H:%M}): the values look written at "
            f"{_utc_offset(zone, gap)}. Set cursor.timezone to the zone whose wall clock writes {col!r} "
            "(an IANA name such as 'Asia/Tokyo'), or fix the future-dated rows."
        )
    if -gap > timedelta(hours=1):
        log.info(
            "table %s: the newest %s value is %s behind the clock in cursor.timezone %r; if the source is "
            "written continuously, its writer's clock is about %s (the window stops at the newest value, so "
            "no row is skipped, but set cursor.timezone to apply commit_lag on the writer's clock)",
            cfg.name,
            col,
            _hours(-gap),
            zone,
            _utc_offset(zone, gap),
        )


def _hours(td: timedelta) -> str:
    return f"{td.total_seconds() / 3600:.1f} h"


def _utc_offset(zone: str, gap: timedelta) -> str:
    """The UTC offset of a writer whose clock reads ``gap`` ahead of ``zone`` now (to the quarter hour)."""
    base = datetime.now(ZoneInfo(zone)).utcoffset() or timedelta(0)
    quarters = round((base + gap) / timedelta(minutes=15))
    sign = "-" if quarters < 0 else "+"
    h, m = divmod(abs(quarters) * 15, 60)
    return f"UTC{sign}{h:02d}:{m:02d}"


def check_backfill_request(cfg: TableConfig, st: state.TableState | None, start: Any, end: Any) -> None:
    """What a backfill needs, checked from the table's state (Iceberg metadata) before any Snowflake SQL.

    The plan operator calls it before it even connects to Snowflake; ``plan_run`` calls it again.
    """
    if cfg.cursor is None:
        raise PlanError(f"table {cfg.name!r} has no cursor, so a window cannot be reloaded: use full_refresh")
    if start is None or end is None:
        raise PlanError(f"table {cfg.name!r}: a backfill needs a start and an end")
    if st is None or not st.watermark:
        raise PlanError(
            f"table {cfg.name!r} has no watermark yet: a backfill reloads rows the table already holds. "
            "Let an incremental run (or a full_refresh) load it first."
        )
    numeric = [_is_number(v) for v in (start, end)]
    if st.cursor_kind == CursorKind.NUMBER and not all(numeric):
        raise PlanError(
            f"table {cfg.name!r}: cursor {cfg.cursor.column!r} is a NUMBER, and a date-time window (window "
            "params or a run from the Backfill dialog) cannot bound it. Reload by cursor value instead: trigger "
            "the DAG with params number_start and number_end (rows with number_start <= cursor < number_end)."
        )
    if st.cursor_kind and st.cursor_kind != CursorKind.NUMBER and any(numeric):
        raise PlanError(
            f"table {cfg.name!r}: cursor {cfg.cursor.column!r} is a {st.cursor_kind.upper()}; number_start/"
            "number_end bound NUMBER cursors only. Use window_start and window_end."
        )


def _is_number(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int | float | Decimal):
        return True
    return isinstance(v, str) and _NUMBER.fullmatch(v.strip()) is not None


def _backfill_window(
    cfg: TableConfig, kind: CursorKind, scale: int, zone: ZoneInfo, start: Any, end: Any, wm: str
) -> Window:
    """``[start, end)`` as cursor values, clamped to the watermark.

    Rows above the watermark belong to the incremental runs that have not
    read them yet: a backfill that loaded them would have them appended again
    by the next incremental run. So a window ending past the watermark is
    clamped to end *at* the watermark (inclusive: those rows were loaded by
    the run that committed it), and a window starting past it is refused.
    """
    assert cfg.cursor is not None
    try:
        low, high = kind.window_bound(start, zone, scale), kind.window_bound(end, zone, scale)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"table {cfg.name!r}: backfill bounds {str(start)[:80]!r}, {str(end)[:80]!r}: {exc}") from None
    if kind.parse_value(high) <= kind.parse_value(low):
        raise PlanError(
            f"table {cfg.name!r}: the backfill window [{low}, {high}) holds no {kind.value} cursor value "
            f"(a DATE cursor reloads whole days: the window must contain a midnight in {cfg.cursor.timezone})"
        )
    high_inclusive = False
    if kind.parse_value(low) > kind.parse_value(wm):
        raise PlanError(
            f"table {cfg.name!r}: the backfill window starts at {low}, after the watermark {wm}: those rows "
            "have not been loaded yet, and the next incremental run loads them. Nothing to reload."
        )
    if kind.parse_value(high) > kind.parse_value(wm):
        log.warning(
            "table %s: backfill window end %s is past the watermark %s: clamped to end at the watermark "
            "(rows after it belong to the next incremental run)",
            cfg.name,
            high,
            wm,
        )
        high, high_inclusive = wm, True
    return Window(
        mode=Mode.BACKFILL,
        cursor_column=cfg.cursor.column,
        cursor_kind=kind,
        cursor_scale=scale,
        low=low,
        low_inclusive=True,
        high=high,
        high_inclusive=high_inclusive,
        base_watermark=wm,
        new_watermark=wm,
        extra={"clamped_to_watermark": True} if high_inclusive else {},
    )


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def _run_plan(cur: Any, sql: str, params: dict[str, Any]) -> dict[str, Any]:
    cur.execute(sql, params)
    row = cur.fetchone()
    names = [d[0].lower() for d in cur.description]
    return dict(zip(names, row, strict=True))


def _count_backfill(cur: Any, sq: SourceQuery, w: Window) -> Window:
    where, params = sq.predicate(w)
    cur.execute(f"SELECT COUNT(*) FROM {sq.from_clause} WHERE {where}", params)
    (n,) = cur.fetchone()
    return replace(w, rows_in_window=int(n))


def describe_window(w: Window) -> str:
    if w.extra.get(SKIPPED):
        return f"nothing ({w.extra[SKIPPED]})"
    if w.cursor_kind is None:
        return "all rows"
    lo = "-∞" if w.low is None else w.low
    hi = "+∞" if w.high is None else w.high
    text = f"{'[' if w.low_inclusive else '('}{lo}, {hi}{']' if w.high_inclusive else ')'}"
    if w.include_nulls:
        text += " + NULL cursors"
    if w.rows_in_window is not None:
        text += f", {w.rows_in_window:,} rows"
    return text
