"""Slices: a big window read as several cursor ranges — in one task, or as mapped tasks committed once.

What these prove
* ``slice_windows`` puts every possible cursor value (and NULL cursors) in
  exactly one slice, for incremental, first-load and backfill windows;
  boundaries outside the window or repeated are dropped; the numeric
  projection used by ``APPROX_PERCENTILE`` round-trips for every cursor kind.
* On the emulator, a sliced ``load_window`` sends one extract query per slice
  (none holding the whole window), writes one commit, and loads exactly the
  source's rows — with quantile and min/max boundaries, on a first load, a
  merge after updates, and a window whose rows all tie on one cursor value.
* A window below ``max_rows_per_slice`` and a run with nothing new cost no
  slicing query.
* Memory (slow): peak RSS of the loading process at 5× the rows stays within
  1.3× when sliced; the same load unsliced does not (so the check can fail).
* Mapped slices (prepare → write_slice → commit_slices, and in Airflow):
  ``test_mapped.py``.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from orders_data import lake_rows, make_orders, plan_window, table_cfg

from snowberg.core.cursor import format_cursor_value, parse_cursor_value
from snowberg.core.window import Window
from snowberg.load.slices import (
    SLICE_BOUNDS,
    clean_bounds,
    cursor_from_numeric,
    plan_slices,
    slice_windows,
    with_slices,
)

REPO = Path(__file__).resolve().parents[3]


# ---------------------------------------------------------------------------
# helpers


class CountingConn:
    """Records every statement and how many rows each result held."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.log: list[tuple[str, Any]] = []

    def cursor(self) -> Any:
        outer = self

        class Cur:
            def __init__(self) -> None:
                self.c = outer.conn.cursor()

            def execute(self, sql: str, params: Any = None) -> Any:
                outer.log.append((sql, params))
                return self.c.execute(sql, params)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.c, name)

        return Cur()

    def extracts(self) -> list[tuple[str, Any]]:
        return [(s, p) for s, p in self.log if s.startswith("SELECT * FROM") and "LIMIT 0" not in s]


def window(
    kind: str,
    low: Any,
    high: Any,
    *,
    low_inc: bool = False,
    high_inc: bool = True,
    nulls: bool = False,
    mode: str = "incremental",
) -> Window:
    return Window(
        mode=mode,
        cursor_column="c",
        cursor_kind=kind,
        low=low,
        low_inclusive=low_inc,
        high=high,
        high_inclusive=high_inc,
        include_nulls=nulls,
        new_watermark=high,
        rows_in_window=100,
    )


def in_window(w: Window, v: Any) -> bool:
    """Python model of SourceQuery.predicate."""
    if v is None:
        return w.include_nulls
    kind = w.cursor_kind
    assert kind is not None
    x = parse_cursor_value(kind, format_cursor_value(kind, v))
    if w.low is not None:
        lo = parse_cursor_value(kind, w.low)
        if x < lo or (x == lo and not w.low_inclusive):
            return False
    if w.high is not None:
        hi = parse_cursor_value(kind, w.high)
        if x > hi or (x == hi and not w.high_inclusive):
            return False
    return True


# ---------------------------------------------------------------------------
# unit: coverage, boundaries, numeric projection


@pytest.mark.parametrize(
    "mode,low,low_inc,high_inc,nulls",
    [
        ("incremental", "2026-01-01 00:00:00", False, True, False),
        ("incremental", None, False, True, True),
        ("backfill", "2026-01-01 00:00:00", True, False, False),
    ],
)
def test_slices_cover_every_value_exactly_once(
    mode: str, low: str | None, low_inc: bool, high_inc: bool, nulls: bool
) -> None:
    rnd = random.Random(7)
    kind = "timestamp_ntz"
    base = datetime(2026, 1, 1)
    w = window(kind, low, "2026-01-31 00:00:00", low_inc=low_inc, high_inc=high_inc, nulls=nulls, mode=mode)
    cands = [format_cursor_value(kind, base + timedelta(seconds=rnd.randrange(0, 31 * 86400))) for _ in range(9)]
    sliced = with_slices(w, clean_bounds(w, cands))
    parts = slice_windows(sliced)
    assert len(parts) >= 5
    bounds = sliced.extra[SLICE_BOUNDS]
    probes: list[Any] = [None, base, base + timedelta(days=30), base - timedelta(days=1), base + timedelta(days=31)]
    probes += [parse_cursor_value(kind, b) for b in bounds]
    probes += [parse_cursor_value(kind, b) + timedelta(microseconds=d) for b in bounds for d in (-1, 1)]
    probes += [base + timedelta(microseconds=rnd.randrange(-86400 * 10**6, 32 * 86400 * 10**6)) for _ in range(500)]
    for v in probes:
        hits = [i for i, p in enumerate(parts) if in_window(p, v)]
        assert len(hits) == (1 if in_window(w, v) else 0), (v, hits)
    assert parts[0].include_nulls == nulls and not any(p.include_nulls for p in parts[1:])
    assert parts[0].low == w.low and parts[-1].high == w.high and parts[-1].high_inclusive == w.high_inclusive
    # every slice carries the run's identity and the whole window's watermark
    assert {(p.run_id, p.mode, p.new_watermark) for p in parts} == {(w.run_id, w.mode, w.new_watermark)}


def test_unsliced_window_is_itself() -> None:
    w = window("number", "10", "20")
    assert slice_windows(w) == [w]
    assert slice_windows(with_slices(w, [])) == [w]


def test_clean_bounds_drops_outside_and_duplicates() -> None:
    w = window("number", "10", "20")
    assert clean_bounds(w, ["5", "10", "12", "12.0", None, "15", "20", "25"]) == ["12", "15"]


@pytest.mark.parametrize(
    "kind,scale,numeric,expected",
    [
        ("timestamp_ntz", 0, 1790637863500000, datetime(2026, 9, 28, 23, 24, 23, 500000)),
        ("timestamp_tz", 0, 1767218400123456, datetime(2025, 12, 31, 22, 0, 0, 123456, tzinfo=UTC)),
        ("date", 0, 20455, date(2026, 1, 2)),
        ("number", 0, Decimal("25000.5"), Decimal("25000")),
        ("number", 2, Decimal("2.375"), Decimal("2.37")),
    ],
)
def test_numeric_projection_round_trips(kind: str, scale: int, numeric: Any, expected: Any) -> None:
    assert parse_cursor_value(kind, cursor_from_numeric(kind, scale, numeric)) == expected


def test_small_window_costs_no_query() -> None:
    class NoConn:
        def cursor(self) -> Any:
            raise AssertionError("plan_slices must not query for a small window")

    cfg = table_cfg("DB.S.ORDERS")
    w = window("timestamp_ntz", None, "2026-01-31 00:00:00")
    assert plan_slices(cfg, NoConn(), w, max_rows=100) is not None  # rows_in_window == 100: not sliced
    assert slice_windows(plan_slices(cfg, NoConn(), w, max_rows=100)) == [w]
    from dataclasses import replace

    assert slice_windows(plan_slices(cfg, NoConn(), replace(w, rows_in_window=0), max_rows=10)) == [
        replace(w, rows_in_window=0)
    ]


# ---------------------------------------------------------------------------
# emulator: sliced load in one task


@pytest.mark.parametrize("method", ["quantiles", "range"])
def test_sliced_first_load_one_query_per_slice_one_commit(sfdb: Any, catalog: Any, method: str) -> None:
    from snowberg.load.extract import load_window

    src = make_orders(sfdb, 12_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    conn = CountingConn(sfdb.conn)
    w = plan_slices(cfg, conn, plan_window(cfg, conn, catalog, "r1"), max_rows=3_000, method=method)
    parts = slice_windows(w)
    assert 4 <= len(parts) <= 5
    before = len(conn.log)
    r = load_window(cfg, conn, catalog, w)
    assert r.status == "committed" and r.rows == 12_000
    extracts = [s for s, _ in conn.log[before:] if s.startswith("SELECT * FROM")]
    assert len(extracts) == len(parts)  # each slice its own query
    # no slice query returned the window: count what each predicate selects in the source
    counts = []
    for p in parts:
        from snowberg.snowflake.source import SourceQuery

        where, params = SourceQuery(cfg).predicate(p)
        counts.append(sfdb.sql(f"SELECT COUNT(*) FROM {src} WHERE {where}", params)[0][0])
    assert sum(counts) == 12_000 and max(counts) <= 6_000, counts
    assert r.data_files >= len(parts)
    t = lake_rows(catalog)
    ids = t.column("order_id").to_pylist()
    assert len(ids) == 12_000 and len(set(ids)) == 12_000 and min(ids) == 1 and max(ids) == 12_000
    assert len(catalog.load_table("shop.orders").snapshots()) == 1


def test_sliced_merge_after_updates(sfdb: Any, catalog: Any, variables: Any) -> None:
    from snowberg.load.extract import load_window
    from snowberg.load.publish import publish

    src = make_orders(sfdb, 8_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w1 = plan_slices(cfg, sfdb.conn, plan_window(cfg, sfdb.conn, catalog, "r1"), max_rows=2_000)
    load_window(cfg, sfdb.conn, catalog, w1)
    publish(cfg, catalog, w1, variables)
    # 3,000 rows updated now: a second window big enough to slice, merged by key
    sfdb.sql(
        f"UPDATE {src} SET AMOUNT = 0, "
        "UPDATED_AT = CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ) "
        "WHERE MOD(ORDER_ID, 8000) < 3000"
    )
    time.sleep(0.01)
    w2 = plan_window(cfg, sfdb.conn, catalog, "r2")
    assert w2.rows_in_window == 3_000
    w2 = plan_slices(cfg, sfdb.conn, w2, max_rows=1_000, method="range")
    r = load_window(cfg, sfdb.conn, catalog, w2)
    assert r.rows == 3_000
    t = lake_rows(catalog)
    ids = t.column("order_id").to_pylist()
    assert len(ids) == 8_000 and len(set(ids)) == 8_000
    zero = sum(1 for a in t.column("amount").to_pylist() if a == 0)
    assert zero == 3_000


def test_rows_tied_on_one_cursor_value_stay_in_one_slice(sfdb: Any, catalog: Any, caplog: Any) -> None:
    from snowberg.load.extract import load_window

    src = make_orders(sfdb, 3_000, tie=True)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w = plan_slices(cfg, sfdb.conn, plan_window(cfg, sfdb.conn, catalog, "r1"), max_rows=1_000)
    assert len(slice_windows(w)) == 1
    assert "distinct boundaries" in caplog.text
    assert load_window(cfg, sfdb.conn, catalog, w).rows == 3_000


def test_nothing_new_issues_the_policy_query_and_one_plan_query_and_writes_nothing(
    sfdb: Any, catalog: Any, variables: Any, tmp_path: Path
) -> None:
    from snowberg.load.extract import load_window
    from snowberg.load.publish import publish

    src = make_orders(sfdb, 2_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w = plan_window(cfg, sfdb.conn, catalog, "r1")
    load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)
    wh = Path(str(catalog.properties["warehouse"]).removeprefix("file://"))
    files = sorted(p for p in wh.rglob("*") if p.is_file())
    conn = CountingConn(sfdb.conn)
    w2 = plan_slices(cfg, conn, plan_window(cfg, conn, catalog, "r2"), max_rows=100)
    r = load_window(cfg, conn, catalog, w2)
    assert r.status == "nothing_new"
    # The source's policy metadata query (POLICY_REFERENCES) and the plan query, nothing else.
    assert len(conn.log) == 2 and "POLICY_REFERENCES" in conn.log[0][0] and "rows_in_window" in conn.log[1][0]
    assert sorted(p for p in wh.rglob("*") if p.is_file()) == files  # no data file, no metadata file


# ---------------------------------------------------------------------------
# memory (slow): flat in the window size when sliced

MEMORY_SCRIPT = r"""
import json, sys
import snowflake.connector
from pyiceberg.catalog.sql import SqlCatalog
from snowberg.config.table_config import parse_config
from snowberg.load.plan import plan_run
from snowberg.load.extract import load_window
from snowberg.load.slices import plan_slices

def hwm_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

spec = json.loads(sys.argv[1])
conn = snowflake.connector.connect(user="fake", password="snow", account="fakesnow", host="127.0.0.1",
    port=spec["port"], protocol="http", database=spec["db"], session_parameters={"TIMEZONE": "UTC"})
cfg = parse_config({"tables": [{"name": "orders", "source": {"table": spec["src"]}, "target": "shop.orders",
    "cursor": {"column": "updated_at"}}]}).tables[0]
cat = SqlCatalog("m", uri=f"sqlite:///{spec['lake']}/c.db", warehouse=f"file://{spec['lake']}")
after_imports = hwm_kb()
# Reset the peak to the current RSS (Linux clear_refs "5"): the peak below is the load's, not the
# transient of compiling imports (PYTHONDONTWRITEBYTECODE may be set), which varies between runs.
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
w = plan_run(cfg, conn, None, run_id="m")
if spec["slice"]:
    w = plan_slices(cfg, conn, w, max_rows=spec["slice"])
r = load_window(cfg, conn, cat, w)
print("MEM " + json.dumps({"rows": r.rows, "rss_kb": hwm_kb(), "base_kb": after_imports}))
"""


def _peak_rss(fakesnow_server: Any, db: Any, src: str, tmp_path: Path, slice_rows: int) -> dict[str, Any]:
    lake = tmp_path / f"lake-{src.split('.')[-1]}-{slice_rows}"
    lake.mkdir()
    spec = {"port": fakesnow_server.port, "db": db.name, "src": src, "lake": str(lake), "slice": slice_rows}
    run = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, json.dumps(spec)], capture_output=True, text=True, timeout=600, cwd=REPO
    )
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("MEM ")), None)
    assert line, run.stdout[-2000:] + run.stderr[-4000:]
    return dict(json.loads(line[4:]))


@pytest.mark.slow
def test_memory_is_flat_in_the_window_size_when_sliced(fakesnow_server: Any, sfdb: Any, tmp_path: Path) -> None:
    small, large, per_slice = 80_000, 400_000, 20_000
    src_small = make_orders(sfdb, small, table="ORDERS_S")
    src_large = make_orders(sfdb, large, table="ORDERS_L")
    a = _peak_rss(fakesnow_server, sfdb, src_small, tmp_path, per_slice)
    b = _peak_rss(fakesnow_server, sfdb, src_large, tmp_path, per_slice)
    assert (a["rows"], b["rows"]) == (small, large)
    ratio = b["rss_kb"] / a["rss_kb"]
    # the same 5× load unsliced: one query result and one Arrow table hold the window
    c = _peak_rss(fakesnow_server, sfdb, src_large, tmp_path, 0)
    unsliced = c["rss_kb"] / a["rss_kb"]
    print(
        f"peak RSS MB: {small:,} sliced {a['rss_kb'] / 1024:.0f}, {large:,} sliced {b['rss_kb'] / 1024:.0f} "
        f"({ratio:.2f}×), {large:,} unsliced {c['rss_kb'] / 1024:.0f} ({unsliced:.2f}×)"
    )
    assert ratio <= 1.3
    assert unsliced > 1.3  # without slices the same check fails: it measures the window, not the imports
