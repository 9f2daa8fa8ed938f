"""Two dependency stacks, client side only: the raw limit and snowberg's full load against ONE emulator.

    .venv/bin/python -m bench.stacks --stack current=. --stack previous=/tmp/snowberg-previous --repeats 5

Each ``--stack NAME=DIR`` is a checkout with its own ``.venv`` (e.g. an older
commit installed from its own constraints.txt). The emulator runs from the
interpreter that runs this command and is seeded once; each repeat runs the
raw-limit phase and snowberg's full load of ``bench.worker`` once per stack,
the stacks in alternating order, each in its own process. Reported per
phase and stack: wall seconds of the process, in-process seconds, and the
process's own CPU time (user + sys from ``wait4``: time spent waiting for
the emulator is not in it). ``bench.run`` gives each stack its own emulator
instead; this isolates the client libraries (connector, pyarrow, pyiceberg).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.run import child_env


def run_phase(checkout: Path, spec: dict[str, Any]) -> dict[str, float]:
    """One ``bench.worker`` phase with ``checkout``'s venv: wall and in-process seconds (the caller adds CPU)."""
    t = time.monotonic()
    proc = subprocess.Popen(
        [str(checkout / ".venv" / "bin" / "python"), "-m", "bench.worker", json.dumps(spec)],
        cwd=checkout,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate()
    wall = time.monotonic() - t
    line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"{checkout}: phase {spec['phase']} failed:\n{err[-3000:]}")
    return {"wall": wall, "inner": float(json.loads(line[len("RESULT ") :])["seconds"])}


def med(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"


def main() -> None:
    from snowberg.local.seed import seed
    from snowberg.local.stack import FakesnowServer

    ap = argparse.ArgumentParser()
    ap.add_argument("--stack", action="append", required=True, help="NAME=DIR (a checkout with its .venv)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    stacks = {name: Path(d).resolve() for name, _, d in (s.partition("=") for s in args.stack)}
    root = Path(tempfile.mkdtemp(prefix="snowberg-bench-stacks-"))
    results: dict[tuple[str, str], list[dict[str, float]]] = {(s, k): [] for s in stacks for k in ("raw", "sb")}
    loads = []
    try:
        with FakesnowServer(root / "fakesnow") as fs:
            conn: Any = fs.connect()
            seed(conn, orders=args.rows)
            conn.close()
            for r in range(args.repeats):
                order = list(stacks) if r % 2 == 0 else list(stacks)[::-1]
                loads.append(os.getloadavg()[0])
                for kind in ("raw", "sb"):
                    for name in order:
                        lake = root / f"lake-{name}-{kind}-{r}"
                        (lake / "warehouse").mkdir(parents=True)
                        spec: dict[str, Any] = {"port": fs.port, "lake": str(lake), "variables": str(lake / "v.json")}
                        if kind == "raw":
                            spec.update(phase="raw", target="bench.raw_orders")
                        else:
                            spec.update(phase="snowberg", slice_rows=250_000, run_id=f"full-{r}")
                        before = os.times()
                        res = run_phase(stacks[name], spec)
                        after = os.times()
                        res["cpu"] = (after.children_user - before.children_user) + (
                            after.children_system - before.children_system
                        )
                        results[(name, kind)].append(res)
                print(
                    f"# repeat {r + 1}/{args.repeats}: "
                    + ", ".join(
                        f"{s}/{k} {v[-1]['wall']:.1f}s (cpu {v[-1]['cpu']:.1f}s)" for (s, k), v in results.items()
                    ),
                    flush=True,
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nload average (1 min) at each repeat: {', '.join(f'{x:.1f}' for x in loads)}")
    print("| phase | stack | wall s (process) | in-process s | client CPU s (user+sys) |")
    print("|---|---|---|---|---|")
    for kind, label in (("raw", f"raw limit: full ({args.rows:,})"), ("sb", f"snowberg: full load ({args.rows:,})")):
        for name in stacks:
            v = results[(name, kind)]
            print(
                f"| {label} | {name} | {med([x['wall'] for x in v])} | {med([x['inner'] for x in v])} "
                f"| {med([x['cpu'] for x in v])} |"
            )


if __name__ == "__main__":
    main()
