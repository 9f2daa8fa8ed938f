"""The column backfill's process killed around its commit (``os._exit``, as a killed worker dies): the task's
retry, a new process, applies it exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowberg" / "iceberg"))
from maint_harness import DDL, NOW, insert, load, table_cfg  # noqa: E402

from snowberg.iceberg import state  # noqa: E402
from snowberg.iceberg.tables import BACKFILL_PENDING  # noqa: E402
from snowberg.load.column_backfill import MODE  # noqa: E402

# The load task: its load, then the backfill of the columns the load added (batches of 3 keys), then publish.
CHILD = r"""
import json, sys
from snowberg.config.table_config import parse_config
from snowberg.load.column_backfill import backfill_added_columns
from snowberg.load.plan import plan_run
from snowberg.load.publish import reconcile_before_plan, publish
from snowberg.load.extract import load_window
from snowberg.local.stack import FakesnowServer
from pyiceberg.catalog.sql import SqlCatalog
a = json.loads(sys.argv[1])
cfg = parse_config({"tables": [a["entry"]]}).tables[0]
srv = FakesnowServer.__new__(FakesnowServer); srv.port = a["port"]
conn = srv.connect(database=a["db"], schema="S")
cat = SqlCatalog("lake", uri=a["uri"], warehouse=a["wh"])
class V(dict):
    def set(self, k, v): self[k] = v
variables = V(a["vars"])
table, _ = reconcile_before_plan(cfg, cat, variables)
w = plan_run(cfg, conn, table, run_id=a["run_id"], dag_id="snowberg_t")
load_window(cfg, conn, cat, w)
b = backfill_added_columns(cfg, conn, cat, run_id=w.run_id, dag_id=w.dag_id, batch_keys=3)
publish(cfg, cat, w, variables)
print(json.dumps({"vars": dict(variables), "backfill": b.to_dict() if b else None}))
"""


def run_child(cfg: Any, sfdb: Any, catalog: Any, variables: Any, fault: str | None) -> subprocess.CompletedProcess[str]:
    args = {
        "entry": cfg.model_dump(mode="json"),
        "port": sfdb.server.port,
        "db": sfdb.name,
        "uri": catalog.properties["uri"],
        "wh": catalog.properties["warehouse"],
        "vars": dict(variables),
        "run_id": "r2",
    }
    env = dict(os.environ)
    env.pop("SNOWBERG_FAULT", None)
    if fault:
        env["SNOWBERG_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)], env=env, text=True, capture_output=True, timeout=180
    )


def backfill_commits(catalog: Any) -> list[Any]:
    table = catalog.load_table("ns.t")
    return [s for s in state.commits(table) if state.snowberg_props(s).get(state.MODE) == MODE]


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["column_backfill_before_commit", "column_backfill_after_commit"])
def test_a_killed_backfill_is_applied_once_by_the_retry(sfdb: Any, catalog: Any, variables: Any, fault: str) -> None:
    sfdb.sql(DDL.format(t=sfdb.table("SRC")))
    insert(sfdb, range(1, 11), "2026-01-01 00:00:00")
    cfg = table_cfg(sfdb, on_column_added="backfill")
    load(cfg, sfdb, catalog, variables, "r1")
    sfdb.sql(f"ALTER TABLE {sfdb.table('SRC')} ADD COLUMN C VARCHAR(10) DEFAULT 'x'")
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} (ID, AMOUNT, NOTE, UPDATED_AT, C) VALUES (11, 1, 'a', {NOW}, 'y')")

    killed = run_child(cfg, sfdb, catalog, variables, fault)
    assert killed.returncode == 137 and f"injected crash at {fault}" in killed.stderr, killed.stderr[-2000:]
    landed = fault.endswith("after_commit")
    assert len(backfill_commits(catalog)) == (1 if landed else 0)
    assert (BACKFILL_PENDING in catalog.load_table("ns.t").properties) is not landed

    retry = run_child(cfg, sfdb, catalog, variables, None)
    assert retry.returncode == 0, retry.stderr[-2000:]
    out = json.loads(retry.stdout.strip().splitlines()[-1])
    assert (out["backfill"] is None) is landed
    if not landed:
        assert (out["backfill"]["rows"], out["backfill"]["queries"]) == (10, 4)  # 10 rows, 3 keys per query
    assert len(backfill_commits(catalog)) == 1
    rows = catalog.load_table("ns.t").scan(selected_fields=("id", "c")).to_arrow().to_pylist()
    assert sorted((r["id"], r["c"]) for r in rows) == [(i, "x") for i in range(1, 11)] + [(11, "y")]
