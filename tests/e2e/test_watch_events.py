"""Event-driven loads (``watch:``) through a real Airflow 3: scheduler, dag-processor, triggerer, api-server.

Eight watched tables (``watch: {poll_interval: 10s, max_interval: null}``: runs only on changes) on the
local stack's emulator, which serves ``SYSTEM$LAST_CHANGE_COMMIT_TIME`` from the commit time of each
table's last change (``snowberg.local.emulator``). One Airflow stack for the whole file; the test goes
through its phases in order:

1. unpaused, each table gets its first run (no run has recorded it yet), and only that;
2. rows change in 2 tables: exactly one run each, none for the other 6; the changed rows reach the lake;
3. the triggerer is frozen (SIGSTOP, so it cannot poll), a third table changes, the triggerer is killed
   with SIGKILL (the change seen by no poll, no run started for it), a fourth table changes while no
   triggerer runs, and the triggerer is started again: each of the two gets exactly one run, the other
   six none, and their rows reach the lake. What was loaded comes from the run records, not from the
   dead triggerer's memory.

The latency from the source's commit (the emulator's commit time of the UPDATE) to the lake's commit (the
snapshot's timestamp) is logged for every change and bounded generously (one poll plus one run on a
loaded 2-core machine; the killed triggerer's changes also wait for the restart and the new triggerer's
claim of the orphaned triggers).
"""

from __future__ import annotations

import json
import logging
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from airflow_stack import ARTIFACTS, TERMINAL, AirflowStack, ApiClient
from e2e_data import DATABASE, SCHEMA, Lake, create_source, ntz, query, table_entry, write_tables_config

pytestmark = pytest.mark.slow

log = logging.getLogger(__name__)

POLL_S = 10  # the minimum poll interval (snowberg.config.watch_settings.MIN_POLL_INTERVAL)
TABLES = [f"e2e_watch_{i}" for i in range(8)]
ROWS = 20
# A change reaches the lake within a poll plus a run; runs here take 20-60 s on a loaded 2-core machine.
LATENCY_BOUND_S = 180.0
# The orphaned triggers of a killed triggerer are claimed once its heartbeat is this old.
HEALTH_THRESHOLD_S = 15


def source(table: str) -> str:
    return f"WATCH_{table.rsplit('_', 1)[1]}"


def fqn(table: str) -> str:
    return f"{DATABASE}.{SCHEMA}.{source(table)}"


def dag(table: str) -> str:
    return f"snowberg_{table}"


@dataclass
class Watch:
    stack: AirflowStack
    api: ApiClient
    snow: Any
    lake: Lake

    def runs(self, table: str) -> list[dict[str, Any]]:
        return self.api.runs(dag(table))

    def counts(self) -> dict[str, int]:
        return {t: len(self.runs(t)) for t in TABLES}

    def wait_runs(self, expected: dict[str, int], timeout: float = 300, alive: bool = True) -> None:
        """Until each table has ``expected`` runs, all finished and successful."""

        def done() -> bool:
            for t, n in expected.items():
                runs = self.runs(t)
                if len(runs) > n:
                    raise AssertionError(f"{t}: {len(runs)} runs, expected {n}: {[r['dag_run_id'] for r in runs]}")
                if len(runs) < n or any(r["state"] not in TERMINAL for r in runs):
                    return False
                bad = [(r["dag_run_id"], self.api.task_states(dag(t), r["dag_run_id"])) for r in runs if
                       r["state"] != "success"]  # fmt: skip
                assert not bad, f"{t}: runs failed: {bad}"
            return True

        self.api.wait_for(f"runs {expected}", done, timeout=timeout, every=2, stack=self.stack if alive else None)

    def change(self, table: str, note: str) -> tuple[set[int], int]:
        """Update 3 rows of ``table``'s source; their ids and the emulator's commit time of the change (ns)."""
        ids = {1, 7, 13}
        query(
            self.snow,
            f"UPDATE {fqn(table)} SET NOTE = %(note)s, UPDATED_AT = %(now)s::TIMESTAMP_NTZ "
            "WHERE ORDER_ID IN (1, 7, 13)",
            {"note": note, "now": ntz(time_now())},
        )
        [(commit_ns,)] = query(self.snow, "SELECT SYSTEM$LAST_CHANGE_COMMIT_TIME(%(t)s)", {"t": fqn(table)})
        return ids, int(commit_ns)

    def lake_commit_ms(self, table: str, ids: set[int], note: str) -> int:
        """The lake's commit of the change: the first snapshot whose table holds ``note`` on every one of ``ids``."""
        t = self.lake.table(table)
        assert t is not None
        for snap in sorted(t.snapshots(), key=lambda s: s.timestamp_ms):
            rows = t.scan(snapshot_id=snap.snapshot_id).to_arrow().to_pylist()
            if {int(r["order_id"]) for r in rows if r["note"] == note} == ids:
                return int(snap.timestamp_ms)
        raise AssertionError(f"{table}: the rows changed to {note!r} never reached the lake")


def time_now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


@pytest.fixture(scope="module")
def watch(stacks: Any, snow: Any, e2e_root: Path, lake_env: dict[str, str]) -> Iterator[Watch]:
    for t in TABLES:
        create_source(snow, source(t), rows=ROWS)
    entries = []
    for t in TABLES:
        entry = table_entry(t, schedule=None, source_table=source(t), watch={"poll_interval": f"{POLL_S}s",
                                                                             "max_interval": None})  # fmt: skip
        del entry["schedule"]  # watched: no schedule
        entries.append(entry)
    env = {
        "SNOWBERG_TABLES_CONFIG": str(write_tables_config(e2e_root / "watch-tables.yaml", entries)),
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": str(HEALTH_THRESHOLD_S),
        # Airflow adds a watcher's trigger when it parses an unpaused DAG: a short interval starts the
        # watchers soon after the test unpauses them (the harness's 120 s would wait that long, twice).
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "15",
    }
    stack = stacks.get("watch", extra_env=env, wait_for=[dag(t) for t in TABLES])
    yield Watch(stack=stack, api=stack.client(), snow=snow, lake=Lake(lake_env))


@pytest.mark.timeout(1200)
def test_watch_runs_only_changed_tables_and_a_killed_triggerer_loses_no_change(watch: Watch) -> None:
    latencies: dict[str, float] = {}

    # 1. Unpaused, every table gets its first run (no run has recorded it), and only that.
    for t in TABLES:
        watch.api.set_paused(dag(t), False)
    watch.wait_runs(dict.fromkeys(TABLES, 1), timeout=600)
    for t in TABLES:
        assert len(watch.lake.rows(t)) == ROWS
        [run] = watch.runs(t)
        assert run["run_type"] == "asset_triggered", run
    time.sleep(2 * POLL_S)  # polls that find the loaded tables current start nothing
    assert watch.counts() == dict.fromkeys(TABLES, 1)

    # 2. Rows change in 2 tables: exactly one run each, none for the other 6.
    changed = ["e2e_watch_1", "e2e_watch_5"]
    commits = {t: watch.change(t, f"changed {t}") for t in changed}
    expected = {t: 2 if t in changed else 1 for t in TABLES}
    watch.wait_runs(expected)
    time.sleep(2 * POLL_S)
    assert watch.counts() == expected
    for t, (ids, commit_ns) in commits.items():
        latencies[t] = (watch.lake_commit_ms(t, ids, f"changed {t}") - commit_ns / 1e6) / 1000

    # 3. A change no poll saw, its triggerer killed (SIGKILL), another change while none runs; then a restart.
    triggerer = watch.stack.service("triggerer")
    watch.stack.kill("triggerer", signal.SIGSTOP)  # frozen: it cannot poll (nor fire) from here on
    seen_by_none = watch.change("e2e_watch_2", "changed before the kill")
    watch.stack.kill("triggerer", signal.SIGKILL)
    assert not triggerer.alive()
    while_down = watch.change("e2e_watch_6", "changed while no triggerer ran")
    time.sleep(POLL_S)
    assert watch.counts() == expected, "no run may start without a triggerer"
    watch.stack.restart("triggerer")
    expected.update({"e2e_watch_2": 2, "e2e_watch_6": 2})
    watch.wait_runs(expected, timeout=420)
    time.sleep(2 * POLL_S)
    assert watch.counts() == expected
    for t, (ids, commit_ns), note in (
        ("e2e_watch_2", seen_by_none, "changed before the kill"),
        ("e2e_watch_6", while_down, "changed while no triggerer ran"),
    ):
        latencies[t] = (watch.lake_commit_ms(t, ids, note) - commit_ns / 1e6) / 1000
        assert {int(r["order_id"]) for r in watch.lake.rows(t)} == set(range(1, ROWS + 1))

    report = {t: round(s, 1) for t, s in latencies.items()}
    log.warning("watch latency, source commit -> lake commit (s): %s", report)
    print(f"\nwatch latency, source commit -> lake commit (s): {report}")
    (ARTIFACTS / "e2e").mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "e2e" / "watch-latency.json").write_text(json.dumps(report, indent=2))
    for t in changed:
        assert 0 < latencies[t] <= LATENCY_BOUND_S, (t, latencies[t])
    # After the kill: the restart, the claim of the orphaned triggers and a poll come on top.
    for t in ("e2e_watch_2", "e2e_watch_6"):
        assert 0 < latencies[t] <= LATENCY_BOUND_S + 120, (t, latencies[t])
