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
* Mapped slices at the library level: one commit for all slices; a retried
  slice's first files are never committed; a commit re-run after it landed
  appends nothing; a commit that failed is re-run once; a file already in the
  table is refused; a schema change between plan and slice is refused; merges
  replace updated keys; nothing new → no slice tasks and no commit.
* Mapped slices in Airflow (slow): ``dag.test()`` of plan → plan_slices →
  load_slice (mapped) → commit → publish with one slice failing on its first
  try: only that slice is retried, and the table holds each row once; a
  second run with nothing new skips the (zero-length) mapped task, and its
  commit and publish succeed without a commit to the table.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from snowberg.config.table_config import parse_config
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


def make_orders(db: Any, n: int, *, table: str = "ORDERS", tie: bool = False, base: str = "2026-10-01 00:00:00") -> str:
    """An orders table of n rows in the test's emulator database (cursor UPDATED_AT spread over 30 days)."""
    name = db.table(table)
    db.sql(f"""CREATE OR REPLACE TABLE {name} (
        ORDER_ID NUMBER(38,0), CUSTOMER_ID NUMBER(10,0), AMOUNT NUMBER(12,2), CHANNEL VARCHAR(16),
        ORDER_DATE DATE, DETAILS VARIANT, UPDATED_AT TIMESTAMP_NTZ(9))""")
    updated = (
        f"'{base}'::TIMESTAMP_NTZ" if tie else f"DATEADD(second, -MOD(seq4() * 7, 2592000), '{base}'::TIMESTAMP_NTZ)"
    )
    db.sql(f"""INSERT INTO {name}
        SELECT seq4() + 1, MOD(seq4() * 7919, 25000) + 1, (MOD(seq4() * 53, 1500) + 300) / 100,
               CASE MOD(seq4(), 3) WHEN 0 THEN 'app' WHEN 1 THEN 'walk-up' ELSE 'phone' END,
               CAST(DATEADD(second, -MOD(seq4() * 7, 2592000), '{base}'::TIMESTAMP_NTZ) AS DATE),
               OBJECT_CONSTRUCT('n', seq4()), {updated}
        FROM TABLE(GENERATOR(ROWCOUNT => {n}))""")
    return name


def table_cfg(source: str, **over: Any) -> Any:
    entry = {
        "name": "orders",
        "source": {"table": source},
        "target": "shop.orders",
        "cursor": {"column": "updated_at"},
        "primary_key": ["order_id"],
    }
    entry.update(over)
    return parse_config({"tables": [entry]}).tables[0]


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


def lake_rows(catalog: Any, ident: str = "shop.orders") -> Any:
    return catalog.load_table(ident).scan().to_arrow()


def snowberg_snapshots(catalog: Any, ident: str = "shop.orders") -> list[Any]:
    t = catalog.load_table(ident)
    return [s for s in t.snapshots() if s.summary and "snowberg.watermark" in s.summary.additional_properties]


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


def _plan(cfg: Any, conn: Any, catalog: Any, run_id: str, **kw: Any) -> Window:
    from snowberg.iceberg.tables import load_table_or_none
    from snowberg.load.plan import plan_run

    return plan_run(cfg, conn, load_table_or_none(catalog, cfg), run_id=run_id, **kw)


@pytest.mark.parametrize("method", ["quantiles", "range"])
def test_sliced_first_load_one_query_per_slice_one_commit(sfdb: Any, catalog: Any, method: str) -> None:
    from snowberg.load.extract import load_window

    src = make_orders(sfdb, 12_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    conn = CountingConn(sfdb.conn)
    w = plan_slices(cfg, conn, _plan(cfg, conn, catalog, "r1"), max_rows=3_000, method=method)
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
    w1 = plan_slices(cfg, sfdb.conn, _plan(cfg, sfdb.conn, catalog, "r1"), max_rows=2_000)
    load_window(cfg, sfdb.conn, catalog, w1)
    publish(cfg, catalog, w1, variables)
    # 3,000 rows updated now: a second window big enough to slice, merged by key
    sfdb.sql(
        f"UPDATE {src} SET AMOUNT = 0, UPDATED_AT = CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ) "
        "WHERE MOD(ORDER_ID, 8000) < 3000"
    )
    time.sleep(0.01)
    w2 = _plan(cfg, sfdb.conn, catalog, "r2")
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
    w = plan_slices(cfg, sfdb.conn, _plan(cfg, sfdb.conn, catalog, "r1"), max_rows=1_000)
    assert len(slice_windows(w)) == 1
    assert "distinct boundaries" in caplog.text
    assert load_window(cfg, sfdb.conn, catalog, w).rows == 3_000


def test_nothing_new_issues_one_query_and_writes_nothing(
    sfdb: Any, catalog: Any, variables: Any, tmp_path: Path
) -> None:
    from snowberg.load.extract import load_window
    from snowberg.load.publish import publish

    src = make_orders(sfdb, 2_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w = _plan(cfg, sfdb.conn, catalog, "r1")
    load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)
    wh = Path(str(catalog.properties["warehouse"]).removeprefix("file://"))
    files = sorted(p for p in wh.rglob("*") if p.is_file())
    conn = CountingConn(sfdb.conn)
    w2 = plan_slices(cfg, conn, _plan(cfg, conn, catalog, "r2"), max_rows=100)
    r = load_window(cfg, conn, catalog, w2)
    assert r.status == "nothing_new"
    real = [s for s, _ in conn.log if not s.rstrip().endswith("LIMIT 0")]
    assert len(real) == 1 and "rows_in_window" in real[0]  # the plan query, nothing else
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


# ---------------------------------------------------------------------------
# mapped slices, library level


def _mapped(cfg: Any, conn: Any, catalog: Any, run_id: str, max_rows: int) -> tuple[Window, list[dict[str, Any]]]:
    from snowberg.load.slices import prepare_slices

    w = _plan(cfg, conn, catalog, run_id)
    return w, prepare_slices(cfg, conn, catalog, w, max_rows=max_rows)


def test_mapped_slices_commit_once_and_retries_append_nothing(sfdb: Any, catalog: Any, monkeypatch: Any) -> None:
    from snowberg.load.slices import SliceResult, commit_slices, read_staging_manifest, write_slice

    src = make_orders(sfdb, 9_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w, tasks = _mapped(cfg, sfdb.conn, catalog, "m1", 3_000)
    assert len(tasks) >= 3 and catalog.load_table("shop.orders").current_snapshot() is None
    results = [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks]
    # slice 0 "fails after writing" and is retried: the first attempt's files must never be committed
    first_attempt = {
        f.file_path for f in read_staging_manifest(catalog.load_table("shop.orders"), SliceResult.from_dict(results[0]))
    }
    retried = write_slice(cfg, sfdb.conn, catalog, tasks[0])
    assert retried["manifest_path"] != results[0]["manifest_path"]
    results[0] = retried
    assert catalog.load_table("shop.orders").current_snapshot() is None  # slices commit nothing

    # the commit fails before it lands, then is re-run
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:before_commit")
    with pytest.raises(RuntimeError, match="injected failure"):
        commit_slices(cfg, catalog, w, results)
    monkeypatch.delenv("SNOWBERG_FAULT")
    assert catalog.load_table("shop.orders").current_snapshot() is None
    # lands, but the task dies right after: the re-run finds the commit
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:after_commit")
    with pytest.raises(RuntimeError, match="injected failure"):
        commit_slices(cfg, catalog, w, results)
    monkeypatch.delenv("SNOWBERG_FAULT")
    again = commit_slices(cfg, catalog, w, results)
    assert again["status"] == "already_committed"

    t = lake_rows(catalog)
    ids = t.column("order_id").to_pylist()
    assert len(ids) == 9_000 and len(set(ids)) == 9_000
    snaps = snowberg_snapshots(catalog)
    assert len(snaps) == 1 and snaps[0].summary.additional_properties["snowberg.watermark"] == w.new_watermark
    assert snaps[0].summary.additional_properties["snowberg.rows"] == "9000"
    committed = {f.file.file_path for f in catalog.load_table("shop.orders").scan().plan_files()}
    assert len(committed) == sum(r["data_files"] for r in results)
    assert first_attempt and not (first_attempt & committed)


def test_commit_refuses_files_already_in_the_table(sfdb: Any, catalog: Any) -> None:
    from snowberg.load.slices import SliceResult, commit_data_files, read_staging_manifest, write_slice

    src = make_orders(sfdb, 2_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w, tasks = _mapped(cfg, sfdb.conn, catalog, "m1", 100_000)
    res = SliceResult.from_dict(write_slice(cfg, sfdb.conn, catalog, tasks[0]))
    table = catalog.load_table("shop.orders")
    files = read_staging_manifest(table, res)
    commit_data_files(cfg, table, w, files, res.rows)
    # the same files under another run id (e.g. a hand-made re-run): refused, nothing appended
    from dataclasses import replace

    w2 = replace(w, run_id="m2", base_watermark=w.new_watermark, base_snapshot_id=None)
    with pytest.raises(RuntimeError, match="already in the table"):
        commit_data_files(cfg, catalog.load_table("shop.orders"), w2, files, res.rows)
    assert lake_rows(catalog).num_rows == 2_000


def test_slice_refuses_a_schema_changed_after_planning(sfdb: Any, catalog: Any) -> None:
    from snowberg.load.slices import write_slice

    src = make_orders(sfdb, 1_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    _, tasks = _mapped(cfg, sfdb.conn, catalog, "m1", 400)
    sfdb.sql(f"ALTER TABLE {src} ADD COLUMN NOTE VARCHAR(10)")
    with pytest.raises(RuntimeError, match="re-plan"):
        write_slice(cfg, sfdb.conn, catalog, tasks[0])


def test_mapped_merge_replaces_updated_keys_and_nothing_new_has_no_slices(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    from snowberg.load.publish import publish
    from snowberg.load.slices import commit_slices, write_slice

    src = make_orders(sfdb, 6_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w, tasks = _mapped(cfg, sfdb.conn, catalog, "m1", 2_000)
    commit_slices(cfg, catalog, w, [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks])
    publish(cfg, catalog, w, variables)
    # 2,500 updates, microseconds apart (one UPDATE with one timestamp would be a single tie: one slice)
    sfdb.sql(
        f"UPDATE {src} SET AMOUNT = 0, UPDATED_AT = DATEADD(microsecond, -ORDER_ID, "
        "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)) WHERE ORDER_ID <= 2500"
    )
    time.sleep(0.01)
    w2, tasks2 = _mapped(cfg, sfdb.conn, catalog, "m2", 1_000)
    assert len(tasks2) >= 2
    results = [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks2]
    assert all(r["keys_path"] for r in results)
    out = commit_slices(cfg, catalog, w2, results)
    assert out["rows"] == 2_500
    publish(cfg, catalog, w2, variables)
    t = lake_rows(catalog)
    ids = t.column("order_id").to_pylist()
    assert len(ids) == 6_000 and len(set(ids)) == 6_000
    assert sum(1 for a in t.column("amount").to_pylist() if a == 0) == 2_500
    # nothing new: no slice task, the commit records nothing
    w3, tasks3 = _mapped(cfg, sfdb.conn, catalog, "m3", 1_000)
    assert tasks3 == []
    assert commit_slices(cfg, catalog, w3, [])["status"] == "nothing_new"
    # (a merge commit is one catalog commit holding two snapshots: the copy-on-write delete and the append)
    assert {s.summary.additional_properties["snowberg.run-id"] for s in snowberg_snapshots(catalog)} == {"m1", "m2"}


def test_mapped_first_load_checks_key_uniqueness_in_snowflake(sfdb: Any, catalog: Any) -> None:
    from snowberg.load.extract import DuplicateKeyError

    src = make_orders(sfdb, 1_000)
    sfdb.sql(f"UPDATE {src} SET ORDER_ID = 1 WHERE ORDER_ID <= 3")
    cfg = table_cfg(src, number_as_long=["order_id"])
    with pytest.raises(DuplicateKeyError, match="not unique"):
        _mapped(cfg, sfdb.conn, catalog, "m1", 400)


def test_mapped_backfill_commits_after_an_incremental_run_without_moving_the_watermark(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    from snowberg.load.extract import load_window
    from snowberg.load.publish import publish
    from snowberg.load.slices import commit_slices, prepare_slices, write_slice

    src = make_orders(sfdb, 4_000)
    cfg = table_cfg(src, number_as_long=["order_id"])
    w1 = _plan(cfg, sfdb.conn, catalog, "r1")
    load_window(cfg, sfdb.conn, catalog, w1)
    publish(cfg, catalog, w1, variables)
    # a backfill of an old range is planned and its slices written …
    wb = _plan(cfg, sfdb.conn, catalog, "b1", mode="backfill", start="2026-09-30 18:00:00", end="2026-09-30 23:00:00")
    assert wb.rows_in_window and wb.rows_in_window > 1_000
    tasks = prepare_slices(cfg, sfdb.conn, catalog, wb, max_rows=700)
    assert len(tasks) >= 2
    results = [write_slice(cfg, sfdb.conn, catalog, t) for t in tasks]
    # … while an incremental run commits
    sfdb.sql(
        f"UPDATE {src} SET AMOUNT = 0, UPDATED_AT = CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ) "
        "WHERE ORDER_ID <= 10"
    )
    time.sleep(0.01)
    w2 = _plan(cfg, sfdb.conn, catalog, "r2")
    load_window(cfg, sfdb.conn, catalog, w2)
    out = commit_slices(cfg, catalog, wb, results)
    assert out["status"] == "committed" and out["rows"] == wb.rows_in_window
    snap = catalog.load_table("shop.orders").current_snapshot()
    assert snap.summary.additional_properties["snowberg.watermark"] == w2.new_watermark  # not moved back
    t = lake_rows(catalog)
    ids = t.column("order_id").to_pylist()
    assert len(ids) == 4_000 and len(set(ids)) == 4_000


# ---------------------------------------------------------------------------
# mapped slices in Airflow (slow): dag.test() with one slice failing once

DAG_SCRIPT = """
import json, os
from datetime import timedelta
import pendulum
from airflow.sdk import DAG
from snowberg.config.table_config import parse_config
from snowberg.airflow.operators.incremental import SnowbergPlanOperator, SnowbergPublishOperator
from snowberg.airflow.operators.scale import SnowbergSliceLoadOperator, sliced_load

cfg = parse_config({"tables": [json.loads(os.environ["E2E_TABLE"])]}).tables[0]
raw = cfg.model_dump(mode="json")

# Slice 1 fails on its first try. (dag.test() imports this file a second time to serialize the DAG: patch once.)
if not getattr(SnowbergSliceLoadOperator.execute, "flaky", False):
    _execute = SnowbergSliceLoadOperator.execute

    def flaky(self, context):
        ti = context["ti"]
        with open(os.environ["E2E_ATTEMPTS"], "a") as f:
            f.write(json.dumps([ti.map_index, ti.try_number]) + "\\n")
        if ti.map_index == 1 and ti.try_number == 1:
            raise RuntimeError("injected: slice 1 lost its worker")
        return _execute(self, context)

    flaky.flaky = True
    SnowbergSliceLoadOperator.execute = flaky

with DAG("snowberg_sliced", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False,
         default_args={"retries": 1, "retry_delay": timedelta(seconds=0)}) as dag:
    plan = SnowbergPlanOperator(task_id="plan", table_config=raw)
    commit = sliced_load(raw, plan, max_rows_per_slice=int(os.environ["E2E_SLICE_ROWS"]), max_parallel=2)
    publish = SnowbergPublishOperator(task_id="publish", table_config=raw, window=plan.output)
    commit >> publish

if __name__ == "__main__":  # dag.test() parses this file again to serialize the DAG
    first = dag.test()
    second = dag.test()  # nothing new: zero slices, the mapped task is skipped, commit and publish still succeed
    states = {ti.task_id: str(ti.state) for ti in second.get_task_instances()}
    print("E2E_RESULT " + json.dumps({"state": str(first.state), "second": str(second.state), "second_tis": states}))
"""


@pytest.mark.slow
def test_dag_mapped_slices_retry_alone_and_commit_once(fakesnow_server: Any, sfdb: Any, tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    from snowberg.local.stack import snowflake_connection_uri

    src = make_orders(sfdb, 6_000)
    home = tmp_path / "airflow-home"
    home.mkdir()
    (tmp_path / "wh").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYICEBERG", "SNOWBERG_FAULT"))}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(tmp_path / "dags"),
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        AIRFLOW_CONN_SNOWFLAKE_DEFAULT=snowflake_connection_uri(fakesnow_server.port, database=sfdb.name),
        PYICEBERG_CATALOG__LAKE__TYPE="sql",
        PYICEBERG_CATALOG__LAKE__URI=f"sqlite:///{tmp_path}/lake.db",
        PYICEBERG_CATALOG__LAKE__WAREHOUSE=f"file://{tmp_path}/wh",
        E2E_TABLE=json.dumps(
            {
                "name": "orders",
                "source": {"table": src},
                "target": "shop.orders",
                "cursor": {"column": "updated_at"},
                "primary_key": ["order_id"],
                "number_as_long": ["order_id"],
            }
        ),
        E2E_SLICE_ROWS="2000",
        E2E_ATTEMPTS=str(tmp_path / "attempts.jsonl"),
    )
    (tmp_path / "dags").mkdir()
    script = tmp_path / "dags" / "sliced_dag.py"
    script.write_text(DAG_SCRIPT)
    airflow = str(Path(sys.executable).with_name("airflow"))
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    t = time.monotonic()
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - t
    (tmp_path / "dag-test.log").write_text(run.stdout + run.stderr)
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith("E2E_RESULT ")), None)
    assert line, run.stdout[-3000:] + run.stderr[-6000:]
    res = json.loads(line[len("E2E_RESULT ") :])
    attempts = [json.loads(x) for x in (tmp_path / "attempts.jsonl").read_text().splitlines()]
    print(f"dag.test() of the mapped-slice DAG: {elapsed:.1f}s; slice attempts (map index, try) {attempts}")
    assert res["state"].endswith("success"), res
    assert res["second"].endswith("success"), res
    assert res["second_tis"]["load_slice"].endswith("skipped") and res["second_tis"]["commit"].endswith("success"), res
    tries: dict[int, list[int]] = {}
    for idx, n in attempts:
        tries.setdefault(idx, []).append(n)
    assert len(tries) >= 3
    assert tries[1] == [1, 2]  # the failed slice ran again…
    assert all(v == [1] for k, v in tries.items() if k != 1)  # …and only it

    cat = SqlCatalog("lake", uri=f"sqlite:///{tmp_path}/lake.db", warehouse=f"file://{tmp_path}/wh")
    t_ = cat.load_table("shop.orders")
    ids = t_.scan().to_arrow().column("order_id").to_pylist()
    assert len(ids) == 6_000 and len(set(ids)) == 6_000
    snaps = [s for s in t_.snapshots() if s.summary and "snowberg.watermark" in s.summary.additional_properties]
    assert len(snaps) == 1  # the second run committed nothing
