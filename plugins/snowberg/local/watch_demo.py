"""The quick start's watch step: a quiet watched table starts nothing, a change is seen within one poll.

``python -m snowberg.local.watch_demo --config include/tables.yaml --table demo_orders --changes 50``, run by
``snowberg demo`` with the demo's Airflow environment. It polls the table's source with ``WatchLoop``, the poll
loop that Airflow's triggerer runs for ``SourceChangeTrigger`` (the same watch target the DAG's Asset
watcher carries), and the run records the demo's load runs wrote. It prints one JSON line:

* ``quiet_polls`` and ``quiet_fired``: polls before the change, and how many of them would have started
  a run (0: the last run covered the source, nothing is due);
* ``changed``: the orders the step changed at the source;
* ``seconds_to_event``: from the change's commit to the poll whose decision fires, at most about one
  ``poll_interval`` (the first poll after the change sees the new change token).

The demo then runs the load DAG once, as the event would. Why not Airflow's triggerer itself: the quick
start runs DAGs with ``airflow dags test`` (no scheduler, no triggerer); a real deployment's triggerer
and scheduler do both steps on their own, which tests/e2e/test_watch_events.py shows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def watch_change(cfg: Any, *, changes: int, connect_source: Any, quiet_polls: int = 2) -> dict[str, Any]:
    """Poll ``cfg``'s source ``quiet_polls`` times, change ``changes`` orders, poll until the watch fires."""
    from datetime import timedelta

    from snowberg.airflow.dag_factory import watched_source_asset
    from snowberg.airflow.watch_loop import WatchLoop
    from snowberg.airflow.watch_trigger import SourceChangeTrigger, watch_connection
    from snowberg.iceberg.state import MetadataDbVariables
    from snowberg.local.seed import change_orders

    assert cfg.watch is not None, f"table {cfg.name} has no watch section"
    (watcher,) = watched_source_asset(cfg).watchers
    trigger = watcher.trigger
    assert isinstance(trigger, SourceChangeTrigger)
    target = trigger.watch_target()
    interval = cfg.watch.poll_interval.total_seconds()
    loop = WatchLoop(
        snowflake_conn_id=cfg.snowflake_conn_id,
        poll_interval=timedelta(seconds=interval),
        variables=MetadataDbVariables(),  # a process outside a task reads Airflow's Variables from its database
        connect=lambda: watch_connection(cfg.snowflake_conn_id),
    )
    try:
        fired_quiet = 0
        for i in range(quiet_polls):
            if i:
                time.sleep(interval)
            decision = loop.poll([target]).get(cfg.dag_id)
            fired_quiet += bool(decision is not None and decision.fire)
        conn = connect_source()
        try:
            changed = change_orders(conn, changes).rows
        finally:
            conn.close()
        committed = time.monotonic()
        deadline = committed + 3 * interval
        while True:
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
            decision = loop.poll([target]).get(cfg.dag_id)
            if decision is not None and decision.fire:
                break
            if time.monotonic() >= deadline:
                raise SystemExit(f"no event within {3 * interval:.0f} s of the change")
        return {
            "quiet_polls": quiet_polls,
            "quiet_fired": fired_quiet,
            "changed": changed,
            "seconds_to_event": round(time.monotonic() - committed, 1),
            "poll_interval_s": interval,
            "statements": loop.statements,
        }
    finally:
        loop.close()


def main(argv: Sequence[str] | None = None) -> int:
    from snowberg.config.table_config import load_config
    from snowberg.snowflake.hook import snowflake_hook

    p = argparse.ArgumentParser(prog="python -m snowberg.local.watch_demo", description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--changes", type=int, default=50)
    args = p.parse_args(argv)
    cfg = next(t for t in load_config(args.config).tables if t.name == args.table)
    got = watch_change(
        cfg, changes=args.changes, connect_source=lambda: snowflake_hook(cfg.snowflake_conn_id).get_conn()
    )
    print(json.dumps(got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
