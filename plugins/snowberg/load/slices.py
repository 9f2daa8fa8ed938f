"""Slices: a large window read as several smaller windows, by cursor value.

Why: the local emulator returns each query as one Arrow block, and even real
Snowflake hands a whole result to one worker. A window of 50M rows must not
become one query result, one Arrow table or one task. So a window with more
than ``max_rows_per_slice`` rows is cut into contiguous cursor ranges at plan
time, and each range is its own extract query:

    window (low, high]  →  (low, b1] (b1, b2] … (bn-1, high]

Correctness does not depend on where the boundaries fall: consecutive slices
share a boundary (one side exclusive, the other inclusive), the first slice
keeps the window's lower bound and NULL-cursor rows, the last keeps its upper
bound, so every row of the window is in exactly one slice. Only the balance
depends on the boundaries; they come from ``APPROX_PERCENTILE`` on the cursor
(one cheap aggregate in Snowflake, issued only when the window is big), or
from the min/max the plan query already returned (``method="range"``). Rows
tied on one cursor value cannot be split: a slice holding a big tie is as big
as the tie (logged).

Two ways to use slices, both ending in ONE Iceberg commit with the watermark:

* in one task (``load.load_window``): the slices are extracted one after the
  other and each is written to its own data files, so memory is bounded by
  the slice, not the window;
* across workers (``operators/scale.py``, ``load.mapped``): ``prepare_slices``
  → one mapped task per slice running ``write_slice`` (data files + a staging
  manifest, nothing committed) → ``commit_slices`` appends all files in a
  single commit.

This module only plans: boundaries, the slices of a window, and the checks
every slice of a run shares.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from snowberg.config.table_config import TableConfig
from snowberg.core.cursor import CursorKind, format_cursor_value, parse_cursor_value
from snowberg.core.window import Window
from snowberg.iceberg.keys import DuplicateKeyError
from snowberg.snowflake.source import SourceQuery

if TYPE_CHECKING:
    from snowberg.mapping.columns import SnowflakeColumn

log = logging.getLogger(__name__)

SLICE_BOUNDS = "slice_bounds"  # Window.extra key: the inner boundaries, as cursor text


class SliceMethod(StrEnum):
    """How slice boundaries are found.

    quantiles: ``APPROX_PERCENTILE`` of the cursor in Snowflake (one aggregate; balanced slices)
    range:     equal-width cuts between the window's min and max cursor (no query)
    """

    QUANTILES = "quantiles"
    RANGE = "range"

    @classmethod
    def parse(cls, value: str) -> SliceMethod:
        """The method named ``value``; a ValueError naming the valid ones otherwise."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"slice method must be one of {[m.value for m in cls]}, got {value!r}") from None


def max_rows_per_slice(cfg: TableConfig) -> int:
    """The table's ``max_rows_per_slice`` (its config refuses values below 1,000)."""
    return int(cfg.max_rows_per_slice)


# ---------------------------------------------------------------------------
# Boundaries


def numeric_cursor_sql(kind: str, cursor_sql: str) -> str:
    """The cursor as a number APPROX_PERCENTILE can digest (UTC microseconds, days, or itself)."""
    return CursorKind(kind).numeric_sql(cursor_sql)


def cursor_from_numeric(kind: str, scale: int, value: Any) -> str:
    """Inverse of ``numeric_cursor_sql``: a cursor value as text (floored to the cursor's resolution)."""
    return CursorKind(kind).from_numeric(value, scale)


def _rows_only(w: Window) -> Window:
    """The window without its NULL-cursor rows (quantiles are over cursor values)."""
    return replace(w, include_nulls=False)


def quantile_sql(sq: SourceQuery, w: Window, n_slices: int) -> tuple[str, dict[str, Any]]:
    """One aggregate: the n-1 inner quantiles of the cursor within the window."""
    if sq.cursor_sql is None or w.cursor_kind is None:
        raise ValueError("slicing needs a cursor column")
    if n_slices < 2:
        raise ValueError("n_slices must be at least 2")
    num = numeric_cursor_sql(w.cursor_kind, sq.cursor_sql)
    where, params = sq.predicate(_rows_only(w))
    exprs = ", ".join(f"APPROX_PERCENTILE({num}, {k / n_slices:.6f}) AS q{k}" for k in range(1, n_slices))
    # Identifiers are validated and quoted by SourceQuery; values are bind parameters.
    return f"SELECT {exprs} FROM {sq.from_clause} WHERE {where}", params  # noqa: S608


def range_bounds(w: Window, n_slices: int) -> list[str]:
    """Equal-width boundaries between the window's min and max cursor (from the plan query; no extra query)."""
    kind = w.cursor_kind
    lo, hi = w.extra.get("min_cursor"), w.extra.get("max_cursor")
    if kind is None or lo is None or hi is None or n_slices < 2:
        return []
    lo_v, hi_v = kind.parse_value(kind.format_value(lo)), kind.parse_value(kind.format_value(hi))
    return [kind.between(lo_v, hi_v, Decimal(k) / Decimal(n_slices), w.cursor_scale) for k in range(1, n_slices)]


def clean_bounds(w: Window, candidates: Sequence[str | None]) -> list[str]:
    """Sorted, distinct boundaries strictly inside the window (others would make empty slices).

    Boundaries below the window's smallest cursor or at/above its largest
    (as the plan query saw them, in ``w.extra``) would also only make slices
    that are empty at plan time; rows arriving later still land in the last
    slice, which always reaches the window's upper bound.
    """
    kind = w.cursor_kind
    if kind is None:
        return []

    def bound(text: Any) -> Any:
        return None if text is None else parse_cursor_value(kind, format_cursor_value(kind, text))

    lo, hi = bound(w.low), bound(w.high)
    seen_min, seen_max = bound(w.extra.get("min_cursor")), bound(w.extra.get("max_cursor"))
    seen: dict[Any, str] = {}
    for text in candidates:
        if text is None:
            continue
        v = parse_cursor_value(kind, text)
        if (lo is not None and v <= lo) or (hi is not None and v >= hi):
            continue
        if (seen_min is not None and v < seen_min) or (seen_max is not None and v >= seen_max):
            continue
        seen.setdefault(v, format_cursor_value(kind, v))
    return [seen[v] for v in sorted(seen)]


def with_slices(w: Window, bounds: Sequence[str]) -> Window:
    """``w`` with these slice bounds (none: one slice); the bounds travel in ``extra`` to the load."""
    extra = dict(w.extra)
    if bounds:
        extra[SLICE_BOUNDS] = list(bounds)
    else:
        extra.pop(SLICE_BOUNDS, None)
    return replace(w, extra=extra)


def plan_slices(
    cfg: TableConfig,
    conn: Any,
    w: Window,
    *,
    max_rows: int | None = None,
    method: SliceMethod | str = SliceMethod.QUANTILES,
) -> Window:
    """Fix the slice boundaries of a planned window (stored in ``w.extra``; retries reuse them).

    No query when the window is small, has no cursor or is a dry run: a run
    with nothing new still costs only the plan query.
    """
    limit = max_rows or max_rows_per_slice(cfg)
    rows = w.rows_in_window or 0
    if w.cursor_kind is None or w.dry_run or rows <= limit:
        return with_slices(w, [])
    method = SliceMethod.parse(method)
    n = math.ceil(rows / limit)
    if method is SliceMethod.RANGE:
        candidates: list[str | None] = list(range_bounds(w, n))
    else:
        sql, params = quantile_sql(SourceQuery(cfg), w, n)
        cur = conn.cursor()
        try:
            cur.execute(sql, params)
            row = cur.fetchone() or ()
        finally:
            cur.close()
        candidates = [None if v is None else cursor_from_numeric(w.cursor_kind, w.cursor_scale, v) for v in row]
    bounds = clean_bounds(w, candidates)
    if len(bounds) + 1 < n:
        log.warning(
            "%s: wanted %d slices of ≤%s rows but the cursor has only %d distinct boundaries in the window "
            "(rows tied on one cursor value stay in one slice)",
            cfg.name,
            n,
            f"{limit:,}",
            len(bounds) + 1,
        )
    log.info(
        "%s: %s rows in the window → %d slices by %s (≤%s rows each planned)",
        cfg.name,
        f"{rows:,}",
        len(bounds) + 1,
        method,
        f"{limit:,}",
    )
    return with_slices(w, bounds)


def slice_windows(w: Window) -> list[Window]:
    """The slices of a window, in cursor order (``[w]`` when it was not sliced)."""
    bounds = list(w.extra.get(SLICE_BOUNDS) or [])
    if not bounds:
        return [w]
    edges: list[str | None] = [w.low, *bounds, w.high]
    n = len(edges) - 1
    out = []
    for i in range(n):
        extra = {k: v for k, v in w.extra.items() if k != SLICE_BOUNDS}
        extra.update({"slice_index": i, "slice_count": n})
        out.append(
            replace(
                w,
                low=edges[i],
                low_inclusive=w.low_inclusive if i == 0 else False,
                high=edges[i + 1],
                high_inclusive=w.high_inclusive if i == n - 1 else True,
                include_nulls=w.include_nulls and i == 0,
                rows_in_window=None,
                extra=extra,
            )
        )
    return out


def check_same_columns(first: Sequence[SnowflakeColumn], other: Sequence[SnowflakeColumn], where: str) -> None:
    """Every slice of a run must describe the same columns (a DDL change mid-run fails the run)."""
    if list(first) != list(other):
        a = [c.name + " " + c.sql_type for c in first]
        b = [c.name + " " + c.sql_type for c in other]
        raise RuntimeError(f"{where}: the source's columns changed during the run ({a} → {b}); re-run to re-plan")


def duplicate_keys_sql(cfg: TableConfig, w: Window) -> tuple[str, dict[str, Any]]:
    """Up to three primary-key values that occur more than once in the window."""
    from snowberg.core.identifiers import quote_identifier

    sq = SourceQuery(cfg)
    keys = ", ".join(quote_identifier(k, "primary key column") for k in cfg.primary_key)
    where, params = sq.predicate(w)
    sql = (
        f"SELECT {keys}, COUNT(*) AS n FROM {sq.from_clause} WHERE {where} GROUP BY {keys} HAVING COUNT(*) > 1 LIMIT 3"  # noqa: S608
    )
    return sql, params


def check_unique_in_source(cfg: TableConfig, conn: Any, w: Window) -> None:
    """Refuse a window whose primary key repeats, asked of Snowflake (no worker holds every key)."""
    sql, params = duplicate_keys_sql(cfg, w)
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        dup = cur.fetchall()
    finally:
        cur.close()
    if dup:
        raise DuplicateKeyError(
            f"primary key {[k.lower() for k in cfg.primary_key]} is not unique in the window (e.g. {dup}); nothing "
            "was written. Fix primary_key in the config or de-duplicate in a custom query."
        )
