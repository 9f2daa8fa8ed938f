"""Full loads against the raw limit on several table shapes (the demo's orders table is bench.run's).

    .venv/bin/python -m bench.shapes                       # 500k rows per shape, 3 repeats
    .venv/bin/python -m bench.shapes --rows 1000000 --shapes typed

Shapes (each seeded in the emulator with GENERATOR):

  typed   NUMBER(38,0) key kept as decimal, NUMBER(10,2), FLOAT, VARCHAR, BOOLEAN, DATE, VARIANT, TIMESTAMP_NTZ
  wide    60 columns: 15 each of NUMBER(18,0), NUMBER(12,2), VARCHAR, TIMESTAMP_NTZ
  narrow  3 columns: NUMBER(18,0) key, VARCHAR, TIMESTAMP_NTZ

For each shape and repeat, in alternating order, each its own process:
raw limit (connector fetch_arrow_batches → pyiceberg append) and snowberg
full loads without a key (append) and with one (merge; on a first load that
is a key-uniqueness check, nothing to replace). Ratios are rows/s ÷ the raw
limit's rows/s, run by run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.run import med_range, run_phase, warm_bytecode_cache

BASE = "'2026-01-01 00:00:00'::TIMESTAMP_NTZ"


def shape_sql(name: str) -> tuple[list[str], list[str]]:
    """(column DDL, SELECT expressions over GENERATOR's seq4())."""
    ts = f"DATEADD(second, seq4(), {BASE})"
    if name == "typed":
        return (
            [
                "ID NUMBER(38,0)",
                "AMOUNT NUMBER(10,2)",
                "RATE FLOAT",
                "NOTE VARCHAR",
                "FLAG BOOLEAN",
                "DAY DATE",
                "DETAILS VARIANT",
                "UPDATED_AT TIMESTAMP_NTZ",
            ],
            [
                "seq4() + 1",
                "MOD(seq4() * 53, 100000) / 100",
                "MOD(seq4(), 10) / 40",
                "'note ' || seq4()",
                "MOD(seq4(), 5) = 0",
                f"CAST({ts} AS DATE)",
                "OBJECT_CONSTRUCT('n', seq4(), 'tag', 'x' || MOD(seq4(), 7))",
                ts,
            ],
        )
    if name == "narrow":
        return (["ID NUMBER(18,0)", "NOTE VARCHAR", "UPDATED_AT TIMESTAMP_NTZ"], ["seq4() + 1", "'n' || seq4()", ts])
    if name == "wide":
        cols, exprs = ["ID NUMBER(18,0)"], ["seq4() + 1"]
        for i in range(14):
            cols.append(f"N{i} NUMBER(18,0)")
            exprs.append(f"MOD(seq4() * {i + 3}, 1000003)")
        for i in range(15):
            cols.append(f"D{i} NUMBER(12,2)")
            exprs.append(f"MOD(seq4() * {i + 7}, 100000) / 100")
        for i in range(15):
            cols.append(f"S{i} VARCHAR")
            exprs.append(f"'s{i}-' || MOD(seq4(), {1000 + i})")
        for i in range(14):
            cols.append(f"T{i} TIMESTAMP_NTZ")
            exprs.append(f"DATEADD(second, seq4() + {i}, {BASE})")
        cols.append("UPDATED_AT TIMESTAMP_NTZ")
        exprs.append(ts)
        assert len(cols) == 60
        return cols, exprs
    raise ValueError(f"unknown shape {name!r}")


def seed_shape(conn: Any, name: str, rows: int) -> str:
    table = f"SNOWBERG_DEMO.SHAPES.{name.upper()}"
    cols, exprs = shape_sql(name)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE IF NOT EXISTS SNOWBERG_DEMO")
    cur.execute("CREATE SCHEMA IF NOT EXISTS SNOWBERG_DEMO.SHAPES")
    cur.execute(f"CREATE OR REPLACE TABLE {table} ({', '.join(cols)})")
    cur.execute(f"INSERT INTO {table} SELECT {', '.join(exprs)} FROM TABLE(GENERATOR(ROWCOUNT => {rows}))")
    cur.close()
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shapes", default="typed,wide,narrow")
    ap.add_argument("--slice-rows", type=int, default=250_000)
    args = ap.parse_args(argv)

    from bench.worker import connect
    from snowberg.local.stack import FakesnowServer

    root = Path(tempfile.mkdtemp(prefix="snowberg-shapes-"))
    warm_bytecode_cache()
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    try:
        with FakesnowServer(root / "fakesnow") as fs:
            conn = connect({"port": fs.port})
            for shape in args.shapes.split(","):
                table = seed_shape(conn, shape, args.rows)
                runs: dict[str, list[dict[str, Any]]] = {"raw": [], "append": [], "merge": []}
                for r in range(args.repeats):
                    order = ["raw", "append", "merge"]
                    for kind in order if r % 2 == 0 else order[::-1]:
                        lake = root / f"{shape}-{kind}-{r}"
                        (lake / "warehouse").mkdir(parents=True)
                        spec: dict[str, Any] = {
                            "port": fs.port,
                            "lake": str(lake),
                            "variables": str(lake / "variables.json"),
                            "load": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
                        }
                        if kind == "raw":
                            x = run_phase({**spec, "phase": "raw", "source": table, "target": "shapes.raw"})
                        else:
                            cfg = {
                                "name": f"shape_{shape}",
                                "source": {"table": table},
                                "target": "shapes.t",
                                "number_as_long": [],
                                "primary_key": ["id"] if kind == "merge" else [],
                                "write_mode": kind,
                            }
                            x = run_phase(
                                {**spec, "phase": "snowberg", "run_id": f"{kind}-{r}", "slice_rows": args.slice_rows}
                                | {"config": cfg}
                            )
                        x["load"] = spec["load"]
                        runs[kind].append(x)
                        shutil.rmtree(lake, ignore_errors=True)
                    print(
                        f"# {shape} repeat {r + 1}: " + ", ".join(f"{k} {v[-1]['wall']:.1f}s" for k, v in runs.items()),
                        flush=True,
                    )
                out[shape] = runs
                cur = conn.cursor()
                cur.execute(f"DROP TABLE {table}")
                cur.close()
            conn.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\n".join(render(out, args.rows)))
    return 0


def render(out: dict[str, dict[str, list[dict[str, Any]]]], rows: int) -> list[str]:
    lines = [
        "",
        f"| shape ({rows:,} rows) | raw limit wall s | snowberg full, no key: wall s | ÷ raw (rows/s) | "
        "snowberg full, key: wall s | ÷ raw (rows/s) | peak RSS MB raw / no key / key | load avg |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for shape, runs in out.items():
        raw = runs["raw"]

        def ratio(kind: str, runs: dict[str, list[dict[str, Any]]] = runs) -> list[float]:
            return [
                (s["rows"] / s["wall"]) / (r["rows"] / r["wall"]) for s, r in zip(runs[kind], runs["raw"], strict=True)
            ]

        rss = " / ".join(f"{statistics.median(x['rss_mb'] for x in runs[k]):,.0f}" for k in ("raw", "append", "merge"))
        lines.append(
            f"| {shape} | {med_range([x['wall'] for x in raw])} | {med_range([x['wall'] for x in runs['append']])} | "
            f"{med_range(ratio('append'))} | {med_range([x['wall'] for x in runs['merge']])} | "
            f"{med_range(ratio('merge'))} | "
            f"{rss} | {raw[0]['load']} |"
        )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
