"""Volume-check benchmark on the local stack: what a full and an incremental check cost at two table sizes.

    .venv/bin/python -m bench.volume                       # 1M and 10M rows; typed/day, narrow/day, narrow/files
    .venv/bin/python -m bench.volume --sizes 1000000,5000000 --cases narrow/files --repeats 3

For each case (table shape / lake layout) and size, one emulator (fakesnow)
table holds the source rows and a SQLite-catalog Iceberg table holds the same
rows, written as snowberg's tables are (created by a snowberg run, so the
types are snowberg's mapping; the bulk appended directly by pyiceberg with
the snowberg state of an incremental commit, so the emulator never has to
serve a whole table). Then, each check in its own process (wall time and peak
RSS are the process's own), medians of ``--repeats``:

  full          run_check with no verified record: the whole table
  change        a 10k-row change: the source updates ``--changed`` keys spread over the
                whole table, and one snowberg incremental run merges them (merge-on-read:
                position deletes land in files all over the lake table)
  incremental   run_check from the record the full check left: the windows since it
                (the merged window and the 1h late margin), nothing else

Shapes (bench.shapes): ``typed`` — a NUMBER(38,0) key kept as decimal,
NUMBER(10,2), FLOAT, VARCHAR, BOOLEAN, DATE, VARIANT, TIMESTAMP_NTZ cursor;
``narrow`` — NUMBER(18,0) key, VARCHAR, TIMESTAMP_NTZ cursor. Layouts:
``day`` — the lake table partitioned by ``day(updated_at)``; ``files`` —
unpartitioned, files of 250k rows in cursor order (as incremental loads leave
a table), pruned by column statistics alone.

It prints, per run, the check's seconds, the process's wall time and peak
RSS, the Snowflake queries and the rows their pushed-down predicates
selected (what the emulator aggregated: rows scanned), the lake files read
out of the table's total; then the ratios large ÷ small: incremental time
(bound 1.5×) and peak RSS (bound 1.3×), full-check peak RSS (bound 1.3×).
See docs/volume-checks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.run import REPO, child_env, med_range, run_phase, warm_bytecode_cache
from bench.shapes import shape_sql

SCHEMA = "SNOWBERG_DEMO.VOLBENCH"
TARGET = "bench.volume"
BASE = dt.datetime(2026, 1, 1)
SEED_AT = "2025-12-31 00:00:00.000000"
EPOCH_DAY_2026 = 20454  # 2026-01-01 as days since 1970-01-01


def config(source: str, layout: str) -> dict[str, Any]:
    return {
        "name": "bench_volume",
        "source": {"table": source},
        "target": TARGET,
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "number_as_long": [],
        "partition_by": ["day(updated_at)"] if layout == "day" else [],
    }


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------------------
# One check, in this process (the child)


def phase_check(spec: dict[str, Any]) -> dict[str, Any]:
    from bench.worker import FileVariables, _rss_mb, catalog, connect
    from snowberg.checks.hashdiff import HashDialect
    from snowberg.checks.volume import run_check
    from snowberg.config.table_config import parse_config

    t_setup = time.monotonic()
    cfg = parse_config({"tables": [spec["config"]]}).tables[0]
    table = catalog(spec).load_table(cfg.target)
    conn = connect(spec)
    setup = time.monotonic() - t_setup
    t0 = time.monotonic()
    out = run_check(
        cfg,
        table,
        conn,
        dialect=HashDialect.EMULATOR,
        records=FileVariables(spec["records"]),
        force_full=bool(spec.get("full")),
    )
    seconds = time.monotonic() - t0
    conn.close()
    r = out.report
    return {
        "seconds": seconds,
        "setup_seconds": setup,  # catalog, table metadata, Snowflake login
        "source_seconds": r.source_seconds,
        "lake_seconds": r.lake_seconds,
        "rss_mb": _rss_mb(),
        "ok": r.ok,
        "verification": r.verification,
        "ranges": r.ranges,
        "source_rows": r.source_rows,
        "lake_rows": r.lake_rows,
        "queries": r.snowflake_queries,
        "source_rows_scanned": r.source_rows_scanned,
        "lake_files_read": r.lake_files_read,
        "lake_files_total": r.lake_files_total,
        "lake_rows_read": r.lake_rows_read,
    }


def run_check_process(spec: dict[str, Any]) -> dict[str, Any]:
    t = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "bench.volume", "--phase", json.dumps(spec)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=child_env(),
    )
    wall = time.monotonic() - t
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"check failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    out: dict[str, Any] = json.loads(line[len("RESULT ") :])
    out["wall"] = wall
    return out


# ---------------------------------------------------------------------------
# Building both sides


def seed_source(conn: Any, source: str, shape: str, rows: int) -> None:
    """``rows`` 0: the table with one seed row (a snowberg run loads it: the lake table, its types and first
    watermark); else ``rows`` more rows, ids 1.., one second apart from 2026-01-01."""
    cols, exprs = shape_sql(shape)
    cur = conn.cursor()
    if rows == 0:
        cur.execute("CREATE DATABASE IF NOT EXISTS SNOWBERG_DEMO")
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        cur.execute(f"CREATE OR REPLACE TABLE {source} ({', '.join(cols)})")
        cur.execute(f"INSERT INTO {source} SELECT {', '.join(exprs)} FROM TABLE(GENERATOR(ROWCOUNT => 1))")
        cur.execute(f"UPDATE {source} SET ID = 999999999999, UPDATED_AT = '{SEED_AT}'::TIMESTAMP_NTZ")
    else:
        # In chunks: one INSERT of 10M typed rows outlasts the connector's request timeout under load.
        for lo in range(0, rows, 1_000_000):
            n = min(rows, lo + 1_000_000) - lo
            chunk = [e.replace("seq4()", f"(seq4() + {lo})") for e in exprs]
            cur.execute(f"INSERT INTO {source} SELECT {', '.join(chunk)} FROM TABLE(GENERATOR(ROWCOUNT => {n}))")
    cur.close()


def _column(name: str, arrow_type: Any, k: Any) -> Any:
    """Values of one column for rows ``k`` (0-based): the key and the cursor as the source has them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if name == "id":
        return pa.array(k + 1).cast(pa.decimal128(38, 0) if pa.types.is_decimal(arrow_type) else arrow_type)
    if name == "updated_at":
        base = int((BASE - dt.datetime(1970, 1, 1)).total_seconds())
        return pa.array((k + base) * 1_000_000).cast(pa.timestamp("us")).cast(arrow_type)
    if pa.types.is_decimal(arrow_type):
        return pa.array(k % 100_000).cast(pa.decimal128(38, 0)).cast(arrow_type)
    if pa.types.is_integer(arrow_type):
        return pa.array(k % 100_000).cast(arrow_type)
    if pa.types.is_floating(arrow_type):
        return pa.array((k % 10) / 40).cast(arrow_type)
    if pa.types.is_boolean(arrow_type):
        return pa.array(k % 5 == 0)
    if pa.types.is_date(arrow_type):
        return pa.array((k // 86_400 + EPOCH_DAY_2026).astype("int32")).cast(arrow_type)
    return pc.binary_join_element_wise('{"n":', pa.array(k).cast(pa.string()), "}")


def build_lake(spec: dict[str, Any], rows: int, chunk: int) -> None:
    """The bulk rows appended by pyiceberg in one snapshot carrying an incremental commit's snowberg state."""
    import numpy as np
    import pyarrow as pa
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    from bench.worker import catalog
    from snowberg.iceberg.tables import arrow_schema

    t = catalog(spec).load_table(TARGET)
    schema = arrow_schema(t.schema())
    wm = (BASE + dt.timedelta(seconds=rows - 1)).isoformat(sep=" ", timespec="microseconds")
    props = {
        "snowberg.watermark": wm,
        "snowberg.cursor-kind": "timestamp_ntz",
        "snowberg.run-id": "bench-base",
        "snowberg.mode": "incremental",
        "snowberg.window-low": SEED_AT,
        "snowberg.window-high": wm,
        "snowberg.version": "1",
        "snowberg.rows": str(rows),
    }
    counter = itertools.count(0)
    write_uuid = uuid.uuid4()
    tx = t.transaction()
    with tx.update_snapshot(snapshot_properties=props).fast_append() as fa:
        for lo in range(0, rows, chunk):
            k = np.arange(lo, min(rows, lo + chunk), dtype=np.int64)
            batch = pa.table({f.name: _column(f.name, f.type, k) for f in schema}, schema=schema)
            for f in _dataframe_to_data_files(tx.table_metadata, batch, t.io, write_uuid=write_uuid, counter=counter):
                fa.append_data_file(f)
    tx.commit_transaction()


def change_source(conn: Any, source: str, shape: str, rows: int, changed: int, kind: str) -> str:
    """The change, cursor = now (UTC): ``spread`` — ``changed`` keys spread over the whole table are updated;
    ``new`` — ``changed`` new rows are inserted."""
    at = (dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0) - dt.timedelta(seconds=5)).isoformat(sep=" ")
    cur = conn.cursor()
    if kind == "spread":
        step = max(rows // changed, 1)
        cur.execute(f"UPDATE {source} SET UPDATED_AT = '{at}'::TIMESTAMP_NTZ WHERE MOD(ID, {step}) = 3")
    else:
        _, exprs = shape_sql(shape)
        new = [e.replace("seq4()", f"(seq4() + {rows})") for e in exprs]
        new[-1] = f"'{at}'::TIMESTAMP_NTZ"  # the cursor is each shape's last column
        cur.execute(f"INSERT INTO {source} SELECT {', '.join(new)} FROM TABLE(GENERATOR(ROWCOUNT => {changed}))")
    cur.close()
    return at


# ---------------------------------------------------------------------------


def _line(x: dict[str, Any]) -> str:
    return (
        f"{x['seconds']:.2f}s (Snowflake {x['source_seconds']:.2f}s, lake {x['lake_seconds']:.2f}s; "
        f"setup {x['setup_seconds']:.2f}s), {x['rss_mb']:.0f} MB, load {x['load']}"
    )


def run_case(fs: Any, conn: Any, root: Path, shape: str, layout: str, rows: int, args: Any) -> dict[str, Any]:
    source = f"{SCHEMA}.{shape.upper()}_{layout.upper()}_{rows}"
    lake = root / f"lake-{shape}-{layout}-{rows}"
    shutil.rmtree(lake, ignore_errors=True)
    (lake / "warehouse").mkdir(parents=True)
    spec: dict[str, Any] = {
        "port": fs.port,
        "lake": str(lake),
        "variables": str(lake / "variables.json"),
        "records": str(lake / "records.json"),
        "target": TARGET,
        "config": config(source, layout),
    }
    t = time.monotonic()
    seed_source(conn, source, shape, 0)
    seeded = run_phase({**spec, "phase": "snowberg", "run_id": "seed", "slice_rows": 0})
    assert seeded["status"] == "committed", seeded
    seed_source(conn, source, shape, rows)
    build_lake(spec, rows, 1_000_000 if layout == "day" else args.file_rows)
    print(f"# {shape}/{layout} {rows:,} rows built in {time.monotonic() - t:.1f}s (load {load_average()})", flush=True)
    records = Path(spec["records"])
    out: dict[str, Any] = {"shape": shape, "layout": layout, "rows": rows, "full": [], "incremental": []}
    for _ in range(args.repeats):
        records.unlink(missing_ok=True)  # no verified record: the check is a full verification
        x = run_check_process({**spec, "full": True})
        x["load"] = load_average()
        assert x["ok"] and x["verification"] == "full", x
        out["full"].append(x)
        print(f"#   full: {_line(x)}", flush=True)
    saved = records.read_text()
    changed_at = change_source(conn, source, shape, rows, args.changed, args.change)
    merged = run_phase({**spec, "phase": "snowberg", "run_id": "change", "slice_rows": 0})
    assert merged["status"] == "committed" and merged["rows"] == args.changed, merged
    print(
        f"#   change ({args.change}): {args.changed:,} rows at {changed_at}, merged in {merged['wall']:.1f}s",
        flush=True,
    )
    for _ in range(args.repeats):
        records.write_text(saved)  # every repeat starts from the record the full check left
        x = run_check_process(spec)
        x["load"] = load_average()
        assert x["ok"] and x["verification"] == "incremental", x
        out["incremental"].append(x)
        print(f"#   incremental: {_line(x)}", flush=True)
    cur = conn.cursor()
    cur.execute(f"DROP TABLE {source}")
    cur.close()
    shutil.rmtree(lake, ignore_errors=True)
    return out


def render(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "| shape/layout | rows | check | check s | Snowflake s | lake s | process wall s | peak RSS MB | "
        "Snowflake queries | source rows scanned | lake files read / total | lake rows read | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in results:
        for kind in ("full", "incremental"):
            rs = c[kind]
            mid = rs[len(rs) // 2]
            lines.append(
                f"| {c['shape']}/{c['layout']} | {c['rows']:,} | {kind} | {med_range([r['seconds'] for r in rs])} | "
                f"{med_range([r['source_seconds'] for r in rs])} | {med_range([r['lake_seconds'] for r in rs])} | "
                f"{med_range([r['wall'] for r in rs])} | {med_range([r['rss_mb'] for r in rs], '{:,.0f}')} | "
                f"{mid['queries']} | {mid['source_rows_scanned']:,} | {mid['lake_files_read']:,} / "
                f"{mid['lake_files_total']:,} | {mid['lake_rows_read']:,} | {rs[0]['load']} |"
            )
    cases = sorted({(c["shape"], c["layout"]) for c in results})
    lines += [
        "",
        "| shape/layout | sizes | incremental check s ratio (bound 1.5×) | incremental process wall ratio | "
        "incremental peak RSS ratio (bound 1.3×) | full peak RSS ratio (bound 1.3×) |",
        "|---|---|---|---|---|---|",
    ]
    for shape, layout in cases:
        cells = sorted((c for c in results if (c["shape"], c["layout"]) == (shape, layout)), key=lambda c: c["rows"])
        if len(cells) < 2:
            continue
        small, large = cells[0], cells[-1]

        def ratio(kind: str, key: str, small: dict[str, Any] = small, large: dict[str, Any] = large) -> float:
            a = statistics.median(r[key] for r in large[kind])
            b = statistics.median(r[key] for r in small[kind])
            return float(a / b)

        lines.append(
            f"| {shape}/{layout} | {large['rows']:,} ÷ {small['rows']:,} | {ratio('incremental', 'seconds'):.2f}× | "
            f"{ratio('incremental', 'wall'):.2f}× | {ratio('incremental', 'rss_mb'):.2f}× | "
            f"{ratio('full', 'rss_mb'):.2f}× |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--cases", default="typed/day,narrow/day,narrow/files", help="shape/layout pairs")
    ap.add_argument("--changed", type=int, default=10_000)
    ap.add_argument("--change", choices=("spread", "new"), default="spread", help="update spread keys, or insert")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--file-rows", type=int, default=250_000)
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phase:
        print("RESULT " + json.dumps(phase_check(json.loads(args.phase))), flush=True)
        return 0

    from bench.worker import connect
    from snowberg.local.stack import FakesnowServer

    root = Path(tempfile.mkdtemp(prefix="snowberg-bench-volume-"))
    warm_bytecode_cache()
    results = []
    try:
        with FakesnowServer(root / "fakesnow") as fs:
            conn = connect({"port": fs.port})
            for case in args.cases.split(","):
                shape, layout = case.split("/")
                for rows in [int(x) for x in args.sizes.split(",")]:
                    results.append(run_case(fs, conn, root, shape, layout, rows, args))
            conn.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\n".join(render(results)))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
