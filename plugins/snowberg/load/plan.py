"""Plan a run: fix its window from the table's state and Snowflake's clock.

The plan is the task's XCom, so a retried load reads exactly the same rows.
The window starts at the watermark stored in the table's last snowberg
commit (the Variable is reconciled, never trusted).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from snowberg.config.table_config import NullCursorPolicy, TableConfig
from snowberg.core.cursor import format_cursor_value, shift_cursor
from snowberg.core.window import Window
from snowberg.iceberg import state
from snowberg.iceberg.identity import check_identity
from snowberg.mapping.columns import TypeMappingError
from snowberg.snowflake.source import SourceQuery, cursor_kind, describe_cursor

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

INCREMENTAL, BACKFILL, FULL_REFRESH = "incremental", "backfill", "full_refresh"


def plan_run(
    cfg: TableConfig,
    conn: Any,
    table: Table | None,
    *,
    run_id: str,
    mode: str = INCREMENTAL,
    start: str | None = None,
    end: str | None = None,
    dry_run: bool = False,
) -> Window:
    """Fix the window of a run. Reads the table's state and Snowflake's clock."""
    check_identity(cfg, table, mode=mode)
    st = state.read_state(table)
    base_wm = st.watermark if st else None
    base_snap = st.snapshot_id if st else None
    planned_at = datetime.now(UTC).isoformat()
    sq = SourceQuery(cfg)
    if cfg.cursor is None:
        if mode != FULL_REFRESH:
            raise ValueError(f"table {cfg.name!r} has no cursor: only full refresh is possible")
        return Window(
            FULL_REFRESH,
            None,
            None,
            0,
            None,
            False,
            None,
            False,
            False,
            base_wm,
            base_snap,
            None,
            planned_at=planned_at,
            run_id=run_id,
            dry_run=dry_run,
        )

    cur = conn.cursor()
    try:
        ccol = describe_cursor(cur, sq)
        kind = cursor_kind(ccol)
        scale = ccol.scale or 0 if kind == "number" else 0
        if st and st.cursor_kind and st.cursor_kind != kind:
            raise TypeMappingError(
                f"cursor column {cfg.cursor.column!r} is now {ccol.sql_type} ({kind}); the table's watermark "
                f"was recorded as {st.cursor_kind}"
            )
        policy = cfg.cursor.null_policy
        include_nulls = policy is NullCursorPolicy.INCLUDE and mode != BACKFILL

        if mode == BACKFILL:
            if start is None or end is None:
                raise ValueError("a backfill needs a start and an end")
            # The window is the backfill's [start, end), not the clock.
            w = Window(
                BACKFILL,
                cfg.cursor.column,
                kind,
                scale,
                format_cursor_value(kind, start),
                True,
                format_cursor_value(kind, end),
                False,
                False,
                base_wm,
                base_snap,
                new_watermark=base_wm,
                planned_at=planned_at,
                run_id=run_id,
                dry_run=dry_run,
            )
            w = _count_backfill(cur, sq, w)
            log.info("planned backfill window for %s: %s", cfg.name, describe_window(w))
            return w

        low: str | None
        if mode == FULL_REFRESH:
            low, low_inc = None, False
        elif base_wm is not None:
            low, low_inc = base_wm, False
            if cfg.cursor.lookback.total_seconds() > 0:
                low = shift_cursor(kind, base_wm, cfg.cursor.lookback)
        elif cfg.cursor.initial_value is not None:
            low, low_inc = format_cursor_value(kind, cfg.cursor.initial_value), True
        else:
            low, low_inc = None, False
        # NULL cursors are counted under every policy: raise needs the count,
        # exclude logs it, include loads them.
        sql, params = sq.plan_sql(kind, scale, low, low_inc, cfg.cursor.commit_lag, count_nulls=True)
        res = _run_plan(cur, sql, params)
    finally:
        cur.close()

    high: str | None
    if res["high"] is None:
        # NUMBER cursor on an empty source: nothing to read.
        high = base_wm
    else:
        high = format_cursor_value(kind, res["high"])
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
    if base_wm is not None and high is not None and mode == INCREMENTAL:
        from snowberg.core.cursor import parse_cursor_value

        if parse_cursor_value(kind, high) < parse_cursor_value(kind, base_wm):
            # The clock minus the lag is behind the committed watermark (a lag
            # was raised, or clocks differ): never move the watermark back.
            log.warning("window high %s is below the watermark %s; nothing to read this run", high, base_wm)
            high, rows = base_wm, 0
    w = Window(
        mode,
        cfg.cursor.column,
        kind,
        scale,
        low,
        low_inc,
        high,
        True,
        include_nulls,
        base_wm,
        base_snap,
        new_watermark=high,
        rows_in_window=rows,
        null_rows=null_rows,
        planned_at=planned_at,
        run_id=run_id,
        dry_run=dry_run,
        extra={"min_cursor": _str(res["min_cursor"]), "max_cursor": _str(res["max_cursor"])},
    )
    log.info("planned %s window for %s: %s", mode, cfg.name, describe_window(w))
    return w


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
    d = w.to_dict()
    d["rows_in_window"] = int(n)
    return Window.from_dict(d)


def describe_window(w: Window) -> str:
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
