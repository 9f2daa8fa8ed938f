"""What the watch poll costs the triggerer, in-process, at N watched tables (docs/event-driven.md).

    .venv/bin/python -m bench.watch_poll                       # 10, 100 and 1,000 tables over 4 databases
    .venv/bin/python -m bench.watch_poll --tables 10 1000 --databases 2 --polls 300

A ``WatchLoop`` (the loop one shared stream runs in the triggerer) polls N loaded tables spread over D
databases through a connection that answers as Snowflake documents
(``tests/snowberg/snowflake/documented_snowflake.py``: no network, so the figures are snowberg's CPU,
not Snowflake's latency, nor the connector's), with Variables in memory: first quiet polls, then polls
in each of which one table changed. For each N it reports the statements per poll, the Variable reads
per poll, the poll record's writes per hour, the CPU of a quiet poll (median) and of a record write,
the CPU per hour at a 1-minute interval, and the reads and CPU of a poll with one change. The last
line is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "snowberg" / "snowflake"))
from documented_snowflake import DocumentedSnowflake  # noqa: E402

from snowberg.airflow.watch_loop import WatchLoop, WatchTarget  # noqa: E402
from snowberg.iceberg.watch_state import RunPhase, record_run  # noqa: E402
from snowberg.snowflake.change_signal import SignalKind  # noqa: E402

INTERVAL = timedelta(minutes=1)


class Store(dict):  # type: ignore[type-arg]
    """Variables in memory, counting reads and writes."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.writes = 0

    def get(self, key: str, default: Any = None) -> Any:
        self.reads += 1
        return super().get(key, default)

    def set(self, key: str, value: str) -> None:
        self.writes += 1
        self[key] = value


def measure(tables: int, databases: int, polls: int) -> dict[str, Any]:
    """Quiet polls, then polls in which one table changes each time."""
    account = DocumentedSnowflake()
    store = Store()
    targets = []
    for i in range(tables):
        source = f"DB{i % databases}.S.T{i}"
        account.table(source)
        targets.append(
            WatchTarget(dag_id=f"d{i}", table=f"t{i}", target=f"ns.t{i}", kind=SignalKind.TABLE, source=source)
        )
        record_run(
            f"ns.t{i}",
            store,
            phase=RunPhase.DONE,
            run_id="r",
            dag_id=f"d{i}",
            observed_at="2026-12-01T00:00:00+00:00",
            signal=account.token(source),
            watermark=None,
            snapshot_id=None,
        )
    now = datetime(2026, 12, 1, 1, tzinfo=UTC)
    clock = {"t": now}
    loop = WatchLoop(
        snowflake_conn_id="sf", poll_interval=INTERVAL, variables=store, connect=account.connect, now=lambda: clock["t"]
    )
    loop.poll(targets)  # the first poll reads every record once

    def polls_of(k0: int, change: bool) -> tuple[list[float], list[float], int, int]:
        plain, writing = [], []
        reads = statements = 0
        for k in range(k0, k0 + polls):
            if change:
                account.dml(targets[0].source)
            clock["t"] = now + k * INTERVAL
            r0, s0, w0 = store.reads, len(account.statements), store.writes
            c0 = time.process_time()
            loop.poll(targets)
            cpu = time.process_time() - c0
            (writing if store.writes > w0 else plain).append(cpu)
            reads += store.reads - r0
            statements += len(account.statements) - s0
        return plain, writing, reads, statements

    quiet, quiet_writing, quiet_reads, quiet_statements = polls_of(1, change=False)
    _, busy_writing, busy_reads, _ = polls_of(1 + polls, change=True)
    quiet_ms = statistics.median(quiet) * 1000
    write_ms = statistics.median(quiet_writing) * 1000 - quiet_ms
    return {
        "tables": tables,
        "databases": databases,
        "poll_statements_per_poll": quiet_statements / polls,
        "variable_reads_per_quiet_poll": quiet_reads / polls,
        "record_writes_per_hour_quiet": round(len(quiet_writing) * 60 / polls, 1),
        "cpu_ms_per_quiet_poll": round(quiet_ms, 3),
        "cpu_ms_per_record_write": round(write_ms, 3),
        "cpu_s_per_hour_quiet": round(
            (len(quiet) * quiet_ms + len(quiet_writing) * (quiet_ms + write_ms)) / 1000 * 60 / polls, 4
        ),
        "variable_reads_per_poll_one_change": busy_reads / polls,
        "cpu_ms_per_poll_one_change": round(statistics.median(busy_writing) * 1000, 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--databases", type=int, default=4)
    ap.add_argument("--polls", type=int, default=120, help="quiet polls, then as many with one change each")
    args = ap.parse_args(argv)
    rows = [measure(n, args.databases, args.polls) for n in args.tables]
    print(
        "| tables | databases | statements per poll | Variable reads per quiet poll | record writes per hour (quiet) "
        "| CPU ms per quiet poll | CPU ms per record write | CPU s per hour (quiet, 1m polls) "
        "| a poll with one change: Variable reads, CPU ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['tables']:,} | {r['databases']} | {r['poll_statements_per_poll']:.0f} | "
            f"{r['variable_reads_per_quiet_poll']:.1f} | {r['record_writes_per_hour_quiet']:.0f} | "
            f"{r['cpu_ms_per_quiet_poll']:.2f} | {r['cpu_ms_per_record_write']:.2f} | "
            f"{r['cpu_s_per_hour_quiet']:.2f} | {r['variable_reads_per_poll_one_change']:.0f}, "
            f"{r['cpu_ms_per_poll_one_change']:.2f} |"
        )
    ratio = rows[-1]["cpu_s_per_hour_quiet"] / rows[0]["cpu_s_per_hour_quiet"]
    print(json.dumps({"rows": rows, "cpu_ratio_last_to_first": round(ratio, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
