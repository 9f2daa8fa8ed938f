"""One benchmark phase, run as its own process so its wall time and peak RSS are its own.

    python -m bench.worker '<json spec>'

Prints one JSON line (prefixed ``RESULT ``) with what it measured. The
orchestrator (``bench/run.py``) starts the emulator, seeds it and runs these.

Phases
  raw         the raw limit: connector ``fetch_arrow_batches()`` → pyiceberg
              ``append(RecordBatchReader)`` — nothing else (no plan, no types,
              no state)
  snowberg    one snowberg run: reconcile → plan_run → plan_slices →
              load_window → publish (what the plan/load/publish tasks do)
  prepare     mapped path, step 1: plan_run + prepare_slices → slice tasks
  slice       mapped path, step 2: write_slice for one slice task
  commit      mapped path, step 3: commit_slices + publish
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

T0 = time.monotonic()


def _rss_mb() -> float:
    """This process's peak RSS (VmHWM): ``ru_maxrss`` would include the parent's RSS at fork time on Linux."""
    try:
        for ln in Path("/proc/self/status").read_text().splitlines():
            if ln.startswith("VmHWM:"):
                return int(ln.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class FileVariables:
    """Airflow-Variable stand-in shared by the benchmark's processes (a JSON file)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def _all(self) -> dict[str, str]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def get(self, key: str) -> str | None:
        return self._all().get(key)

    def set(self, key: str, value: str) -> None:
        d = self._all()
        d[key] = value
        self.path.write_text(json.dumps(d))


class CountingCursor:
    def __init__(self, cur: Any, log: list[str]) -> None:
        self._cur, self._log = cur, log

    def execute(self, sql: str, params: Any = None) -> Any:
        self._log.append(sql)
        return self._cur.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


class CountingConnection:
    """Counts the statements snowberg sends (the 'one cheap query' check)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.queries: list[str] = []

    def cursor(self) -> CountingCursor:
        return CountingCursor(self._conn.cursor(), self.queries)

    def close(self) -> None:
        self._conn.close()


# The session snowberg pins (snowberg.snowflake.session.session_parameters(None)), written out so the raw
# limit's process imports nothing of snowberg; the snowberg phases check that the two agree.
RAW_SESSION = {
    "TIMEZONE": "UTC",
    "TIMESTAMP_TYPE_MAPPING": "TIMESTAMP_NTZ",
    "WEEK_START": 0,
    "GEOGRAPHY_OUTPUT_FORMAT": "GeoJSON",
    "GEOMETRY_OUTPUT_FORMAT": "GeoJSON",
}


def connect(spec: dict[str, Any], session: dict[str, Any] | None = None) -> Any:
    import snowflake.connector

    if session is None:
        from snowberg.snowflake.session import session_parameters

        session = session_parameters(None)
        assert session == RAW_SESSION, "bench.worker.RAW_SESSION no longer matches snowberg's pinned session"
    return snowflake.connector.connect(
        user="fake",
        password="snow",
        account="fakesnow",
        host="127.0.0.1",
        port=spec["port"],
        protocol="http",
        database="SNOWBERG_DEMO",
        session_parameters=session,
        arrow_number_to_decimal=True,
        network_timeout=600,
    )


def catalog(spec: dict[str, Any]) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    lake = Path(spec["lake"])
    return SqlCatalog("bench", uri=f"sqlite:///{lake / 'catalog.db'}", warehouse=f"file://{lake / 'warehouse'}")


def table_config(spec: dict[str, Any]) -> Any:
    from snowberg.config.table_config import parse_config

    entry = {
        "name": "bench_orders",
        "source": {"table": "SNOWBERG_DEMO.SHOP.ORDERS"},
        "target": spec.get("target", "bench.orders"),
        "cursor": {"column": "updated_at"},
        "primary_key": ["order_id"],
        "number_as_long": ["order_id", "menu_item_id"],
    }
    entry.update(spec.get("config", {}))
    return parse_config({"tables": [entry]}).tables[0]


def count_files(spec: dict[str, Any], suffix: str = ".parquet") -> int:
    root = Path(spec["lake"]) / "warehouse"
    return sum(1 for p in root.rglob(f"*{suffix}") if "snowberg-staging" not in p.parts) if root.exists() else 0


def catalog_commits(cat: Any, ident: str) -> int:
    """Catalog commits that changed a table after it was created (each writes one metadata version)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        t = cat.load_table(ident)
    except NoSuchTableError:
        return 0
    return len(t.metadata.metadata_log)


def phase_raw(spec: dict[str, Any]) -> dict[str, Any]:
    # The emulator's timestamps are nanoseconds; Iceberg v2 stores microseconds.
    # pyiceberg's own switch for that (the raw limit does no other typing).
    os.environ["PYICEBERG_DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE"] = "true"
    import pyarrow as pa
    from pyiceberg.exceptions import NoSuchTableError

    cat = catalog(spec)
    ident = spec.get("target", "bench.raw_orders")
    cat.create_namespace_if_not_exists(ident.split(".")[0])
    files_before, commits_before = count_files(spec), catalog_commits(cat, ident)
    t_start = time.monotonic()
    conn = connect(spec, RAW_SESSION)  # nothing of snowberg is imported by the raw limit
    cur = conn.cursor()
    source = spec.get("source", "SNOWBERG_DEMO.SHOP.ORDERS")  # a bench-built name, never user input
    if spec.get("since") is not None:
        cur.execute(
            f"SELECT * FROM {source} WHERE UPDATED_AT > CAST(%(w)s AS TIMESTAMP_NTZ(9))",
            {"w": spec["since"]},
        )
    else:
        cur.execute(f"SELECT * FROM {source}")
    it = iter(cur.fetch_arrow_batches())
    first = next(it, None)
    rows = 0
    if first is not None:
        schema = first.schema
        counted = {"rows": 0}

        def batches() -> Any:
            for tbl in itertools.chain([first], it):
                counted["rows"] += tbl.num_rows
                yield from tbl.to_batches()

        try:
            table = cat.load_table(ident)
        except NoSuchTableError:
            table = cat.create_table(ident, schema=schema)
        table.append(pa.RecordBatchReader.from_batches(schema, batches()))
        rows = counted["rows"]
    conn.close()
    seconds = time.monotonic() - t_start
    return {
        "rows": rows,
        "seconds": seconds,
        "rss_mb": _rss_mb(),
        "data_files": count_files(spec) - files_before,
        "commits": catalog_commits(cat, ident) - commits_before,
        "queries": 1,
    }


def phase_snowberg(spec: dict[str, Any]) -> dict[str, Any]:
    from snowberg.load.extract import load_window
    from snowberg.load.plan import plan_run
    from snowberg.load.publish import publish, reconcile_before_plan
    from snowberg.load.slices import plan_slices

    cfg = table_config(spec)
    cat = catalog(spec)
    variables = FileVariables(spec["variables"])
    ident = cfg.target
    files_before, commits_before = count_files(spec), catalog_commits(cat, ident)
    t_start = time.monotonic()
    conn = CountingConnection(connect(spec))
    table, _ = reconcile_before_plan(cfg, cat, variables)
    w = plan_run(cfg, conn, table, run_id=spec["run_id"])
    if spec.get("slice_rows"):
        w = plan_slices(cfg, conn, w, max_rows=int(spec["slice_rows"]), method=spec.get("slice_method", "quantiles"))
    r = load_window(cfg, conn, cat, w)
    publish(cfg, cat, w, variables)
    conn.close()
    seconds = time.monotonic() - t_start
    return {
        "rows": r.rows,
        "seconds": seconds,
        "rss_mb": _rss_mb(),
        "status": r.status,
        "data_files": count_files(spec) - files_before,
        "commits": catalog_commits(cat, ident) - commits_before,
        "queries": len(conn.queries),  # every statement, compile-only describes included
        "slices": len(w.extra.get("slice_bounds") or []) + 1,
    }


def phase_prepare(spec: dict[str, Any]) -> dict[str, Any]:
    from snowberg.load.mapped import prepare_slices
    from snowberg.load.plan import plan_run
    from snowberg.load.publish import reconcile_before_plan

    cfg = table_config(spec)
    cat = catalog(spec)
    t_start = time.monotonic()
    conn = connect(spec)
    table, _ = reconcile_before_plan(cfg, cat, FileVariables(spec["variables"]))
    w = plan_run(cfg, conn, table, run_id=spec["run_id"])
    tasks = prepare_slices(cfg, conn, cat, w, max_rows=int(spec["slice_rows"]))
    conn.close()
    Path(spec["out"]).write_text(json.dumps({"window": w.to_dict(), "tasks": tasks}))
    return {"seconds": time.monotonic() - t_start, "rss_mb": _rss_mb(), "slices": len(tasks)}


def phase_slice(spec: dict[str, Any]) -> dict[str, Any]:
    from snowberg.load.mapped import write_slice

    cfg = table_config(spec)
    cat = catalog(spec)
    t_start = time.monotonic()
    conn = connect(spec)
    res = write_slice(cfg, conn, cat, spec["task"])
    conn.close()
    Path(spec["out"]).write_text(json.dumps(res))
    return {"seconds": time.monotonic() - t_start, "rss_mb": _rss_mb(), "rows": res["rows"]}


def phase_commit(spec: dict[str, Any]) -> dict[str, Any]:
    from snowberg.core.window import Window
    from snowberg.load.mapped import commit_slices
    from snowberg.load.publish import publish

    cfg = table_config(spec)
    cat = catalog(spec)
    t_start = time.monotonic()
    plan = json.loads(Path(spec["plan"]).read_text())
    w = Window.from_dict(plan["window"])
    results = [json.loads(Path(p).read_text()) for p in spec["results"]]
    r = commit_slices(cfg, cat, w, results)
    publish(cfg, cat, w, FileVariables(spec["variables"]))
    return {
        "seconds": time.monotonic() - t_start,
        "rss_mb": _rss_mb(),
        "rows": r["rows"],
        "status": r["status"],
        "data_files": r["data_files"],
    }


PHASES = {
    "raw": phase_raw,
    "snowberg": phase_snowberg,
    "prepare": phase_prepare,
    "slice": phase_slice,
    "commit": phase_commit,
}


def main() -> None:
    spec = json.loads(sys.argv[1])
    logging.basicConfig(level=os.environ.get("BENCH_LOG", "WARNING"), format="%(asctime)s %(name)s %(message)s")
    for noisy in ("snowflake", "urllib3", "botocore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    out = PHASES[spec["phase"]](spec)
    out["process_seconds"] = time.monotonic() - T0
    print("RESULT " + json.dumps(out, default=str), flush=True)


if __name__ == "__main__":
    main()
