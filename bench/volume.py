"""Volume-check benchmark on the local stack:

    .venv/bin/python -m bench.volume                 # 1M rows, 3 repeats
    .venv/bin/python -m bench.volume --rows 200000

One emulator (fakesnow) holds a source table of ``--rows`` rows (a NUMBER key
and a TIMESTAMP_NTZ cursor, one second apart); a SQLite-catalog Iceberg table
holds the same rows with a snowberg watermark above them all. It times, in
this process (medians of ``--repeats``):

  read key+cursor   one scan of the lake table's key and cursor columns (the yardstick)
  verify equal      the volume check on the two equal tables
  verify 1 diff     the volume check after one lake row is deleted: Snowflake queries spent,
                    source rows downloaded, and whether the row was named

and prints verify-equal / read-key+cursor (the bound is 3×) and the query
count of the one-row diff (the bound is 30). See docs/volume-checks.md.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

WATERMARK_DAYS = 365


def _seed(conn: Any, catalog: Any, rows: int) -> Any:
    import datetime as dt

    import pyarrow as pa

    cur = conn.cursor()
    cur.execute("CREATE DATABASE IF NOT EXISTS BENCH")
    cur.execute("CREATE SCHEMA IF NOT EXISTS BENCH.S")
    cur.execute("CREATE OR REPLACE TABLE BENCH.S.SRC (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    cur.execute(
        "INSERT INTO BENCH.S.SRC SELECT seq4() + 1, DATEADD(second, seq4() + 1, '2026-01-01'::TIMESTAMP_NTZ) "
        f"FROM TABLE(GENERATOR(ROWCOUNT => {int(rows)}))"
    )
    ids = pa.array(range(1, rows + 1), pa.int64())
    base = int(dt.datetime(2026, 1, 1).timestamp() * 1_000_000)
    ts = pa.array([base + i * 1_000_000 for i in range(1, rows + 1)], pa.int64()).cast(pa.timestamp("us"))
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("updated_at", pa.timestamp("us"))])
    catalog.create_namespace_if_not_exists("bench")
    t = catalog.create_table("bench.orders", schema=schema)
    wm = (dt.datetime(2026, 1, 1) + dt.timedelta(days=WATERMARK_DAYS)).isoformat(sep=" ", timespec="microseconds")
    t.append(
        pa.table({"id": ids, "updated_at": ts}, schema=schema),
        snapshot_properties={
            "snowberg.watermark": wm,
            "snowberg.cursor-kind": "timestamp_ntz",
            "snowberg.run-id": "bench",
            "snowberg.mode": "incremental",
            "snowberg.rows": str(rows),
        },
    )
    return t


def _median(fn: Any, repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    from pyiceberg.catalog.sql import SqlCatalog

    from snowberg.checks.hashdiff import HashDialect
    from snowberg.checks.volume import read_lake_columns, verify
    from snowberg.config.table_config import parse_config
    from snowberg.local.stack import FakesnowServer

    root = Path(tempfile.mkdtemp(prefix="snowberg-bench-volume-"))
    (root / "wh").mkdir()
    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/c.db", warehouse=f"file://{root}/wh")
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "bench_orders",
                    "source": {"table": "BENCH.S.SRC"},
                    "target": "bench.orders",
                    "cursor": {"column": "updated_at"},
                    "primary_key": ["id"],
                }
            ]
        }
    ).tables[0]
    with FakesnowServer(root / "fakesnow") as fs:
        conn: Any = fs.connect(database="BENCH", schema="S")
        t0 = time.perf_counter()
        table = _seed(conn, catalog, args.rows)
        print(f"seeded {args.rows:,} rows on both sides in {time.perf_counter() - t0:.1f}s")
        wm = table.current_snapshot().summary.additional_properties["snowberg.watermark"]

        # Interleaved (read, verify, read, verify, …): on a shared machine the load drifts, and the ratio of
        # two medians taken minutes apart would measure the drift.
        reads, equals = [], []
        for _ in range(args.repeats):
            t, data = _median(
                lambda: read_lake_columns(table, ["id", "updated_at"], "updated_at", "timestamp_ntz", wm, False), 1
            )
            reads.append(t)
            t, rep = _median(lambda: verify(cfg, table, conn, dialect=HashDialect.EMULATOR), 1)
            equals.append(t)
        read, equal = statistics.median(reads), statistics.median(equals)
        ratios = sorted(e / r for e, r in zip(equals, reads, strict=True))
        assert rep.ok, rep.to_dict()
        victim = args.rows // 2 + 7
        table.delete(f"id = {victim}")
        table = table.refresh()
        diff, rep1 = _median(lambda: verify(cfg, table, conn, dialect=HashDialect.EMULATOR), args.repeats)
        named = [d.key for d in rep1.differences] == [{"id": str(victim)}]
        conn.close()
    lines = [
        f"rows                         {args.rows:,} (lake read: {data.num_rows:,} rows)",
        f"read key+cursor (lake)       {read:.2f}s",
        f"verify equal                 {equal:.2f}s   ratio {equal / read:.2f}x  (bound 3x; per pair "
        f"{ratios[0]:.2f}..{ratios[-1]:.2f}x)  {rep.snowflake_queries} Snowflake queries",
        f"verify 1 differing row       {diff:.2f}s   {rep1.snowflake_queries} Snowflake queries (bound 30), "
        f"{rep1.source_rows_fetched:,} source rows downloaded, row named: {named}",
    ]
    print("\n".join(lines))
    ok = equal <= 3 * read and rep1.snowflake_queries <= 30 and named
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
