"""What verifying a sync's key costs: the whole source once, then each change.

    .venv/bin/python -m bench.sync_keys                     # 1M and 10M rows, two key shapes, 3 repeats
    .venv/bin/python -m bench.sync_keys --sizes 200000 --repeats 1

A ``key_columns`` that is not the source's Iceberg identifier fields is
verified (``snowberg.sync.keys``): the whole source once (``verify_source``:
the key columns of every live row, distinct values counted), then only each
change (``verify_change``: the rows the change writes and removes). Two key
shapes: a ``long`` key (``id``, ascending over the files, so each range pass
reads only its files), and a composite text + timestamp key (``customer``,
``placed_at``; the customer values are spread over every file, so each pass
reads every file's key columns) with a wide row around it. Lake tables are
written directly with pyiceberg (files of 250k rows). Each measurement runs in
its own process: wall time of the check and the process's peak RSS; the same
process with only the imports and the table loaded gives the RSS baseline.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.run import child_result, med_range, warm_bytecode_cache

SHAPES = {"long": ["id"], "composite": ["customer", "placed_at"]}


def schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("id", pa.int64()),
            ("customer", pa.string()),
            ("placed_at", pa.timestamp("us")),
            ("amount", pa.decimal128(12, 2)),
            ("note", pa.string()),
        ]
    )


def build_lake(root: Path, n: int, file_rows: int = 250_000) -> None:
    import datetime as dt
    import itertools
    import uuid

    import numpy as np
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    (root / "warehouse").mkdir(parents=True)
    cat = SqlCatalog("s", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=f"file://{root / 'warehouse'}")
    cat.create_namespace("shop")
    t = cat.create_table("shop.orders", schema=schema())
    tx = t.transaction()
    counter, write_uuid = itertools.count(0), uuid.uuid4()
    start = np.datetime64(dt.datetime(2026, 1, 1), "us")
    with tx.update_snapshot().fast_append() as fa:
        for lo in range(0, n, file_rows):
            k = np.arange(lo, min(n, lo + file_rows), dtype=np.int64)
            batch = pa.table(
                {
                    "id": k,
                    "customer": pa.array(k % 100_003).cast(pa.string()),
                    "placed_at": pa.array(start + k, pa.timestamp("us")),
                    "amount": pa.array(k % 1_000_000, pa.int32()).cast(pa.decimal128(12, 2)),
                    "note": pa.array(k).cast(pa.string()),
                },
                schema=schema(),
            )
            for f in _dataframe_to_data_files(tx.table_metadata, batch, t.io, write_uuid=write_uuid, counter=counter):
                fa.append_data_file(f)
    tx.commit_transaction()


def phase(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement in this process (called with --phase)."""
    import resource

    from pyiceberg.catalog.sql import SqlCatalog

    from snowberg.sync import keys

    root = Path(spec["lake"])
    cat = SqlCatalog("s", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=f"file://{root / 'warehouse'}")
    t = cat.load_table("shop.orders")
    snap = t.current_snapshot().snapshot_id
    t0 = time.monotonic()
    rows = 0
    if spec["what"] == "source":
        rows = keys.verify_source(t, snap, SHAPES[spec["shape"]], "bench")
    seconds = time.monotonic() - t0
    hwm = next(
        (int(ln.split()[1]) / 1024 for ln in Path("/proc/self/status").read_text().splitlines() if "VmHWM" in ln),
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    return {"rows": rows, "seconds": seconds, "rss_mb": hwm}


def run(spec: dict[str, Any]) -> dict[str, Any]:
    return child_result(["bench.sync_keys", "--phase", json.dumps(spec)], f"key check {spec}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    if args.phase:
        print("RESULT " + json.dumps(phase(json.loads(args.phase))), flush=True)
        return 0
    warm_bytecode_cache()
    sizes = [int(s) for s in args.sizes.split(",")]
    print("| key | rows | verify s | peak RSS MB | RSS baseline MB | rows/s |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        root = Path(tempfile.mkdtemp(prefix="snowberg-keys-bench-"))
        try:
            build_lake(root, n)
            base = run({"lake": str(root), "what": "baseline", "shape": "long"})
            for shape in SHAPES:
                runs = [run({"lake": str(root), "what": "source", "shape": shape}) for _ in range(args.repeats)]
                secs = [r["seconds"] for r in runs]
                rss = [r["rss_mb"] for r in runs]
                print(
                    f"| {shape} ({', '.join(SHAPES[shape])}) | {n:,} | {med_range(secs)} | {med_range(rss, '{:.0f}')} "
                    f"| {base['rss_mb']:.0f} | {n / statistics.median(secs):,.0f} |",
                    flush=True,
                )
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
