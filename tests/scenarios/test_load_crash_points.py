"""A load process killed at each named failpoint (``os._exit``, as a killed worker dies) loses nothing and
reads nothing twice: before the commit nothing changed; after it, the next run adopts the table's state."""

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
from snowberg.load.publish import reconcile_before_plan  # noqa: E402


@pytest.fixture
def src(sfdb: Any) -> Any:
    sfdb.sql(DDL.format(t=sfdb.table("SRC")))
    insert(sfdb, range(1, 101), "2026-01-01 00:00:00")
    return sfdb


def lake_rows(catalog: Any, name: str = "ns.t") -> list[dict[str, Any]]:
    return sorted(catalog.load_table(name).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def snapshots(catalog: Any, name: str = "ns.t") -> list[Any]:
    return list(catalog.load_table(name).snapshots())


CHILD = r"""
import json, sys
from snowberg.config.table_config import parse_config
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
w = plan_run(cfg, conn, table, run_id=a["run_id"])
load_window(cfg, conn, cat, w)
publish(cfg, cat, w, variables)
print(json.dumps(dict(variables)))
"""


def run_child(
    cfg: Any, sfdb: Any, catalog: Any, variables: Any, run_id: str, fault: str | None
) -> subprocess.CompletedProcess[str]:
    entry = cfg.model_dump(mode="json")
    args = {
        "entry": entry,
        "port": sfdb.server.port,
        "db": sfdb.name,
        "uri": catalog.properties["uri"],
        "wh": catalog.properties["warehouse"],
        "vars": dict(variables),
        "run_id": run_id,
    }
    env = dict(os.environ)
    env.pop("SNOWBERG_FAULT", None)
    if fault:
        env["SNOWBERG_FAULT"] = fault
    res = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)], env=env, text=True, capture_output=True, timeout=120
    )
    if res.returncode == 0:
        variables.update(json.loads(res.stdout.strip().splitlines()[-1]))
    return res


@pytest.mark.parametrize("fault", ["after_commit", "before_publish"])
def test_a_crash_after_the_commit_before_the_variable_reads_nothing_twice(
    src: Any, catalog: Any, variables: Any, fault: str
) -> None:
    cfg = table_cfg(src)
    load(cfg, src, catalog, variables, "r1")
    before = dict(variables)
    src.sql(f"UPDATE {src.table('SRC')} SET NOTE = 'b', UPDATED_AT = {NOW} WHERE ID > 90")
    insert(src, range(101, 111), "now")
    res = run_child(cfg, src, catalog, variables, "r2", fault)
    assert res.returncode == 137, res.stderr[-2000:]
    assert f"injected crash at {fault}" in res.stderr
    assert variables == before  # the mirror was never written
    assert len(lake_rows(catalog)) == 110  # the commit landed
    # re-run: the table is ahead of the Variable → adopt; nothing is read twice
    _, action = reconcile_before_plan(cfg, catalog, variables)
    assert action.startswith("adopted table state"), action
    r3 = load(cfg, src, catalog, variables, "r3")
    assert r3.status == "nothing_new"
    rows = lake_rows(catalog)
    assert [r["id"] for r in rows] == list(range(1, 111))
    assert [r["note"] for r in rows if 90 < r["id"] <= 100] == ["b"] * 10
    st = state.read_state(catalog.load_table("ns.t"))
    assert json.loads(variables[cfg.variable_key])["snapshot_id"] == st.snapshot_id and st.run_id == "r2"


@pytest.mark.parametrize("fault", ["after_extract", "before_commit", "raise:before_commit"])
def test_a_crash_or_failure_before_the_commit_changes_nothing(
    src: Any, catalog: Any, variables: Any, fault: str
) -> None:
    cfg = table_cfg(src)
    load(cfg, src, catalog, variables, "r1")
    snaps_before = [s.snapshot_id for s in snapshots(catalog)]
    rows_before = lake_rows(catalog)
    insert(src, range(101, 121), "now")
    res = run_child(cfg, src, catalog, variables, "r2", fault)
    assert res.returncode != 0
    assert [s.snapshot_id for s in snapshots(catalog)] == snaps_before
    assert lake_rows(catalog) == rows_before
    r3 = load(cfg, src, catalog, variables, "r3")
    assert r3.rows == 20
    assert [r["id"] for r in lake_rows(catalog)] == list(range(1, 121))
