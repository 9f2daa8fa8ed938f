"""snowberg benchmark against the raw limit, on the local stack. One command:

    .venv/bin/python -m bench.run                 # 1M rows, 3 repeats (about 4 minutes)
    .venv/bin/python -m bench.run --rows 5000000  # needs ~16 GB free (the emulator holds the table in memory)

What it runs, each phase in its own process (wall time and peak RSS are the
process's own, imports included), on one emulator seeded with ``--rows`` orders:

  raw full          connector fetch_arrow_batches() → pyiceberg append(RecordBatchReader)
  snowberg full     plan → (slices) → load → publish, into an empty table
  snowberg incr 1%  after touch_orders(rows/100): the merge run
  raw incr 1%       the raw limit on the same changed rows (append only)
  snowberg nothing  a run with nothing new
  mapped slices     prepare → N slice processes (--workers at a time) → one commit
  memory            snowberg full at --memory-rows sizes, sliced and unsliced

and prints medians and ranges, and snowberg's ratios to the raw limit.
See docs/performance.md for how to read it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def run_phase(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one phase in a fresh interpreter; add the parent's view of its wall time."""
    return child_result(["bench.worker", json.dumps(spec)], f"phase {spec['phase']}")


def child_result(args: list[str], what: str) -> dict[str, Any]:
    """``python -m <args>`` in a fresh interpreter: the dict it prints after ``RESULT ``, with its wall time."""
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, env=child_env())
    wall = time.monotonic() - t
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    out: dict[str, Any] = json.loads(line[len("RESULT ") :])
    out["wall"] = wall
    return out


PYCACHE = Path(tempfile.gettempdir()) / "snowberg-bench-pycache"


def child_env() -> dict[str, str]:
    """The phases' environment: bytecode cached (outside the repo and the venv), as on a real worker.

    With PYTHONDONTWRITEBYTECODE set, every process would compile pyiceberg,
    pyarrow and the connector from source (~4 s here) before doing anything.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONWARNINGS="ignore", PYTHONPYCACHEPREFIX=str(PYCACHE))
    return env


def warm_bytecode_cache() -> None:
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import bench.worker, snowberg.load.plan, snowberg.load.extract, snowberg.load.slices, "
            "pyiceberg.catalog.sql, "
            "pyarrow.parquet, snowflake.connector, pyiceberg.io.pyarrow",
        ],
        cwd=REPO,
        env=child_env(),
        check=True,
    )


def server_peak_mb(pid: int) -> float | None:
    try:
        for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
            if ln.startswith("VmHWM:"):
                return int(ln.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def med_range(values: list[float], fmt: str = "{:.2f}") -> str:
    if not values:
        return "-"
    m = statistics.median(values)
    if len(values) == 1:
        return fmt.format(m)
    return f"{fmt.format(m)} [{fmt.format(min(values))}–{fmt.format(max(values))}]"


def summarise(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [r.get("rows", 0) for r in runs]
    return {
        "phase": name,
        "runs": len(runs),
        "rows": int(statistics.median(rows)) if rows else 0,
        "wall": [r["wall"] for r in runs],
        "inner": [r["seconds"] for r in runs],
        "rows_per_s": [r.get("rows", 0) / r["wall"] for r in runs],
        "rss_mb": [r["rss_mb"] for r in runs],
        "data_files": [r.get("data_files", 0) for r in runs],
        "commits": [r.get("commits", 0) for r in runs],
        "queries": [r.get("queries", 0) for r in runs],
    }


def table_lines(summaries: list[dict[str, Any]]) -> list[str]:
    head = (
        "| phase | runs | rows | wall s (process) | in-process s | rows/s (process) | peak RSS MB "
        "| data files | commits | queries |"
    )
    sep = "|---|---|---|---|---|---|---|---|---|---|"
    out = [head, sep]
    for s in summaries:
        out.append(
            f"| {s['phase']} | {s['runs']} | {s['rows']:,} | {med_range(s['wall'])} | {med_range(s['inner'])} | "
            f"{med_range(s['rows_per_s'], '{:,.0f}')} | {med_range(s['rss_mb'], '{:,.0f}')} | "
            f"{med_range([float(x) for x in s['data_files']], '{:.0f}')} | "
            f"{med_range([float(x) for x in s['commits']], '{:.0f}')} | "
            f"{med_range([float(x) for x in s['queries']], '{:.0f}')} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--slice-rows", type=int, default=250_000, help="max_rows_per_slice for snowberg runs (0: no slicing)"
    )
    ap.add_argument(
        "--memory-rows", default=None, help="comma list of sizes for the memory check (default rows/5,rows)"
    )
    ap.add_argument(
        "--memory-slice-rows",
        type=int,
        default=None,
        help="max_rows_per_slice for the memory check (default: the smaller size / 4, so both runs are sliced)",
    )
    ap.add_argument("--workers", type=int, default=2, help="mapped slice processes at a time")
    ap.add_argument("--skip-mapped", action="store_true")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--root", default=None, help="scratch folder (default: a new temp dir, removed at the end)")
    ap.add_argument("--json", default=None, help="also write the raw results here")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))

    from snowberg.local.seed import seed, touch_orders
    from snowberg.local.stack import FakesnowServer

    root = Path(args.root or tempfile.mkdtemp(prefix="snowberg-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    mem_sizes = (
        [int(x) for x in args.memory_rows.split(",")] if args.memory_rows else [max(args.rows // 5, 1000), args.rows]
    )
    if args.memory_slice_rows is None:
        args.memory_slice_rows = max(min(mem_sizes) // 4, 1000)
    results: dict[str, Any] = {"args": vars(args), "machine": machine()}
    servers: dict[int, float | None] = {}

    def lake(tag: str) -> dict[str, Any]:
        d = root / tag
        shutil.rmtree(d, ignore_errors=True)
        (d / "warehouse").mkdir(parents=True)
        return {"lake": str(d), "variables": str(d / "variables.json")}

    warm_bytecode_cache()
    try:
        # ---------------------------------------------------------------- main size
        print(f"# seeding {args.rows:,} rows …", flush=True)
        with FakesnowServer(root / f"fakesnow-{args.rows}") as fs:
            conn: Any = fs.connect()
            t = time.monotonic()
            seed(conn, orders=args.rows)
            print(f"# seeded in {time.monotonic() - t:.1f}s", flush=True)
            base = {"port": fs.port}
            runs: dict[str, list[dict[str, Any]]] = {
                k: [] for k in ("raw_full", "sb_full", "sb_incr", "raw_incr", "sb_incr_nokey", "sb_none")
            }
            for r in range(args.repeats):
                lk = lake(f"lake-{r}")
                sb = {**base, **lk, "phase": "snowberg", "slice_rows": args.slice_rows}
                raw = {**base, **lk, "phase": "raw", "target": "bench.raw_orders"}
                order = [("raw_full", raw), ("sb_full", {**sb, "run_id": f"full-{r}"})]
                for name, spec in order if r % 2 == 0 else order[::-1]:
                    runs[name].append(run_phase(spec))
                # The same table without a key (append): its full load is set-up, its incremental is measured.
                nokey = {**sb, "config": {"primary_key": [], "target": "bench.orders_nokey"}}
                nokey["target"] = "bench.orders_nokey"
                run_phase({**nokey, "run_id": f"full-nokey-{r}"})
                cur = conn.cursor()
                cur.execute("SELECT MAX(UPDATED_AT) FROM SNOWBERG_DEMO.SHOP.ORDERS")
                since = str(cur.fetchone()[0])
                time.sleep(0.01)
                touched = touch_orders(conn, args.rows // 100)
                order = [
                    ("sb_incr", {**sb, "run_id": f"incr-{r}"}),
                    ("raw_incr", {**raw, "since": since}),
                    ("sb_incr_nokey", {**nokey, "run_id": f"incr-nokey-{r}"}),
                ]
                for name, spec in order if r % 2 == 0 else order[::-1]:
                    runs[name].append(run_phase(spec))
                runs["sb_none"].append(run_phase({**sb, "run_id": f"none-{r}"}))
                print(
                    f"# repeat {r + 1}/{args.repeats}: touched {touched:,}; "
                    + ", ".join(f"{k} {v[-1]['wall']:.1f}s" for k, v in runs.items()),
                    flush=True,
                )
            results["main"] = {k: v for k, v in runs.items()}

            # ------------------------------------------------------------ mapped slices
            if not args.skip_mapped:
                mapped = []
                for r in range(args.repeats):
                    mapped.append(run_mapped(base, lake(f"mapped-{r}"), args, r))
                    print(
                        f"# mapped {r + 1}/{args.repeats}: {mapped[-1]['wall']:.1f}s "
                        f"({mapped[-1]['slices']} slices, {args.workers} at a time)",
                        flush=True,
                    )
                results["mapped"] = mapped
            if args.rows in mem_sizes and not args.skip_memory:
                results.setdefault("memory", {})[args.rows] = memory_runs(base, lake, args, args.rows)
            conn.close()
            servers[args.rows] = server_peak_mb(fs.proc.pid) if fs.proc else None

        # ------------------------------------------------------------ other memory sizes
        if not args.skip_memory:
            for n in mem_sizes:
                if n == args.rows:
                    continue
                with FakesnowServer(root / f"fakesnow-{n}") as fs:
                    c2: Any = fs.connect()
                    seed(c2, orders=n)
                    c2.close()
                    results.setdefault("memory", {})[n] = memory_runs({"port": fs.port}, lake, args, n)
                    servers[n] = server_peak_mb(fs.proc.pid) if fs.proc else None
        results["server_peak_mb"] = servers
    finally:
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)

    report = render(results, args, mem_sizes)
    print("\n".join(report))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


def run_mapped(base: dict[str, Any], lk: dict[str, Any], args: argparse.Namespace, r: int) -> dict[str, Any]:
    """prepare → slices (args.workers processes at a time) → commit, like the mapped DAG on workers."""
    d = Path(lk["lake"])
    common = {**base, **lk}
    t = time.monotonic()
    prep = run_phase(
        {
            **common,
            "phase": "prepare",
            "run_id": f"mapped-{r}",
            "slice_rows": args.slice_rows,
            "out": str(d / "plan.json"),
        }
    )
    tasks = json.loads((d / "plan.json").read_text())["tasks"]
    outs = [str(d / f"slice-{i}.json") for i in range(len(tasks))]
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        slices = list(
            pool.map(
                lambda it: run_phase({**common, "phase": "slice", "task": it[0], "out": it[1]}),
                zip(tasks, outs, strict=True),
            )
        )
    commit = run_phase({**common, "phase": "commit", "plan": str(d / "plan.json"), "results": outs})
    return {
        "wall": time.monotonic() - t,
        "slices": len(tasks),
        "rows": commit["rows"],
        "status": commit["status"],
        "data_files": commit["data_files"],
        "prepare": prep["wall"],
        "slice_walls": [s["wall"] for s in slices],
        "commit": commit["wall"],
        "slice_rss_mb": max((s["rss_mb"] for s in slices), default=0.0),
    }


def memory_runs(base: dict[str, Any], lake: Any, args: argparse.Namespace, n: int) -> dict[str, Any]:
    """Peak RSS of a full load of n rows: sliced at --memory-slice-rows (repeats), and unsliced (control, once)."""
    out: dict[str, Any] = {"sliced": [], "sliced_rows": []}
    for r in range(args.repeats):
        lk = lake(f"mem-{n}-{r}")
        x = run_phase({**base, **lk, "phase": "snowberg", "slice_rows": args.memory_slice_rows, "run_id": f"m{r}"})
        out["sliced"].append(x["rss_mb"])
        out["sliced_rows"].append(x["rows"])
    lk = lake(f"mem-{n}-unsliced")
    control = run_phase({**base, **lk, "phase": "snowberg", "slice_rows": 0, "run_id": "unsliced"})
    out["unsliced"] = [control["rss_mb"]]
    return out


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    try:
        mem = {ln.split(":")[0]: ln.split(":")[1].strip() for ln in Path("/proc/meminfo").read_text().splitlines()}
        info["mem_total"] = mem.get("MemTotal")
        info["mem_available_at_start"] = mem.get("MemAvailable")
        info["load_at_start"] = Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        pass
    return info


def render(results: dict[str, Any], args: argparse.Namespace, mem_sizes: list[int]) -> list[str]:
    m = results["main"]
    names = {
        "raw_full": "raw limit: full",
        "sb_full": "snowberg: full load",
        "raw_incr": "raw limit: 1% changed (append)",
        "sb_incr": "snowberg: incremental 1% (merge)",
        "sb_incr_nokey": "snowberg: incremental 1% (no key: append)",
        "sb_none": "snowberg: nothing new",
    }
    sums = {k: summarise(names[k], v) for k, v in m.items()}
    lines = [
        "",
        f"## snowberg benchmark — {args.rows:,} rows, {args.repeats} repeats, max_rows_per_slice {args.slice_rows:,}",
        f"machine: {results['machine']}",
        "",
        *table_lines([sums[k] for k in ("raw_full", "sb_full", "raw_incr", "sb_incr", "sb_incr_nokey", "sb_none")]),
        "",
    ]
    med = statistics.median
    full_ratio = [s / r for s, r in zip(sums["sb_full"]["rows_per_s"], sums["raw_full"]["rows_per_s"], strict=True)]
    full_inner = [
        (a["rows"] / a["seconds"]) / (b["rows"] / b["seconds"])
        for a, b in zip(m["sb_full"], m["raw_full"], strict=True)
    ]
    incr_vs_full = [a / b for a, b in zip(sums["sb_incr"]["wall"], sums["raw_full"]["wall"], strict=True)]
    incr_vs_incr = [a / b for a, b in zip(sums["sb_incr"]["wall"], sums["raw_incr"]["wall"], strict=True)]
    nokey_vs_incr = [a / b for a, b in zip(sums["sb_incr_nokey"]["wall"], sums["raw_incr"]["wall"], strict=True)]
    none = m["sb_none"]
    lines += [
        "| target | measured (median [range]) | target | met |",
        "|---|---|---|---|",
        f"| full load rows/s ÷ raw rows/s (process) | {med_range(full_ratio)} (in-process {med_range(full_inner)}) "
        f"| ≥ 0.8 | {'yes' if med(full_ratio) >= 0.8 else 'NO'} |",
        f"| incremental 1% wall ÷ raw full wall (whole process) | {med_range(incr_vs_full)} | ≤ 1.0 "
        f"| {'yes' if med(incr_vs_full) <= 1.0 else 'NO'} |",
        f"| incremental 1% (merge) wall ÷ raw 1% append wall (whole process) | {med_range(incr_vs_incr)} | ≤ 1.0 "
        f"| {'yes' if med(incr_vs_incr) <= 1.0 else 'NO'} |",
        f"| incremental 1% (no key) wall ÷ raw 1% append wall (whole process) | {med_range(nokey_vs_incr)} | ≤ 1.0 "
        f"| {'yes' if med(nokey_vs_incr) <= 1.0 else 'NO'} |",
        f"| nothing new: queries / data files / commits | {sorted({x['queries'] for x in none})} / "
        f"{sorted({x['data_files'] for x in none})} / {sorted({x['commits'] for x in none})} | 1 / 0 / 0 | "
        f"{'yes' if all(x['queries'] == 1 and x['data_files'] == 0 and x['commits'] == 0 for x in none) else 'NO'} |",
    ]
    if "memory" in results:
        mem = results["memory"]
        lines += [
            "",
            "| memory: full load peak RSS MB | " + " | ".join(f"{n:,} rows" for n in mem_sizes) + " | ratio |",
            "|---|" + "---|" * (len(mem_sizes) + 1),
        ]
        for kind in ("sliced", "unsliced"):
            vals = [mem.get(n, {}).get(kind, []) for n in mem_sizes]
            ratio = (med(vals[-1]) / med(vals[0])) if all(vals) else float("nan")
            label = f"sliced (≤{args.memory_slice_rows:,} rows/slice)" if kind == "sliced" else "unsliced (control)"
            lines.append(f"| {label} | " + " | ".join(med_range(v, "{:,.0f}") for v in vals) + f" | {ratio:.2f}× |")
        sl = [mem.get(n, {}).get("sliced", []) for n in mem_sizes]
        if all(sl):
            ratio = med(sl[-1]) / med(sl[0])
            lines.append(
                f"\nmemory target: sliced peak RSS at {mem_sizes[-1] // mem_sizes[0]}× the rows within 1.3× → "
                f"{ratio:.2f}× ({'met' if ratio <= 1.3 else 'NOT met'})"
            )
    if "mapped" in results:
        mp = results["mapped"]
        lines += [
            "",
            f"| mapped slices ({args.workers} worker processes) | value (median [range]) |",
            "|---|---|",
            f"| slices | {mp[0]['slices']} |",
            f"| total wall s (prepare + slices + commit) | {med_range([x['wall'] for x in mp])} |",
            f"| prepare s | {med_range([x['prepare'] for x in mp])} |",
            f"| slice wall s (each) | {med_range([w for x in mp for w in x['slice_walls']])} |",
            f"| commit s | {med_range([x['commit'] for x in mp])} |",
            f"| rows/s overall | {med_range([x['rows'] / x['wall'] for x in mp], '{:,.0f}')} |",
            f"| peak RSS of a slice process MB | {med_range([x['slice_rss_mb'] for x in mp], '{:,.0f}')} |",
            f"| data files / commits | {mp[0]['data_files']} / 1 per run "
            f"(status {sorted({x['status'] for x in mp})}) |",
            f"| vs single-task full load wall | {med_range([x['wall'] for x in mp])} "
            f"vs {med_range(sums['sb_full']['wall'])} |",
        ]
    lines.append(
        "\nemulator (fakesnow server) peak RSS MB by size: "
        + ", ".join(f"{n:,}: {v:,.0f}" for n, v in results.get("server_peak_mb", {}).items() if v)
    )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
