"""A commit the catalog applied but whose answer the client never got is found by the retry, never applied twice.

The load task commits; the catalog applies the commit; the client sees an
error instead of the answer — on the SQL catalog a dropped database connection
after the pointer swap, on a REST catalog a connection closed under the request
or a gateway's 502 after the server applied it. The task fails. Airflow's retry
is a new process that runs the load again with the same planned window: it must
find the commit, append nothing, and the publish that follows must mirror the
commit's watermark. Each step is the real operator in its own process
(``chaos_tasks``); the table is an append table, where a second apply would
show as duplicate rows.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chaos_tasks as ct
import pytest

from snowberg.local.stack import FakesnowServer, snowflake_connection_uri

pytestmark = pytest.mark.slow

DB = "LOST"
PAT, ROLE, CATALOG_DB = "pat-secret-lost", "LAKE_WRITER", "LAKEDB"


def rest_server_module() -> Any:
    """The Horizon-shaped REST catalog test server (``tests/snowberg/sync/l2s_rest_catalog.py``)."""
    if "l2s_rest_catalog" in sys.modules:
        return sys.modules["l2s_rest_catalog"]
    path = Path(__file__).resolve().parents[1] / "snowberg" / "sync" / "l2s_rest_catalog.py"
    spec = importlib.util.spec_from_file_location("l2s_rest_catalog", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["l2s_rest_catalog"] = mod
    spec.loader.exec_module(mod)
    return mod


@dataclass(kw_only=True)
class Setup:
    kind: str
    conn: Any
    tmp: Path
    env: dict[str, str]
    entry: dict[str, Any]
    store: Any  # a SqlCatalog on the lake's own storage, for reading what landed
    server: Any = None
    n: int = 0

    def sql(self, text: str) -> list[tuple[Any, ...]]:
        cur = self.conn.cursor()
        try:
            cur.execute(text)
            return list(cur.fetchall()) if cur.description else []
        finally:
            cur.close()

    def spec(self, step: str, run_id: str, window: Any = None, **kw: Any) -> ct.StepSpec:
        self.n += 1
        return ct.StepSpec(
            step=step,
            table_config=self.entry,
            run_id=run_id,
            window=window,
            env=self.env,
            variables_path=str(self.tmp / "variables.json"),
            trace_path=str(self.tmp / f"{self.n}.trace"),
            result_path=str(self.tmp / f"{self.n}.json"),
            **kw,
        )

    def table(self) -> Any:
        return self.store.load_table(self.entry["target"])


CATALOGS = ["sql-connection-dropped", "rest-connection-dropped", "rest-502-after-apply"]


@pytest.fixture(params=CATALOGS)
def case(fakesnow_server: FakesnowServer, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Setup]:
    from pyiceberg.catalog.sql import SqlCatalog

    kind = request.param
    src = f"SRC_{CATALOGS.index(kind)}"
    conn = fakesnow_server.connect()
    (tmp_path / "wh").mkdir()
    store = SqlCatalog("lost_lake", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{tmp_path / 'wh'}")
    server = None
    if kind.startswith("sql"):
        lake_conn = {
            "conn_type": "sqlite",
            "host": str(tmp_path / "catalog.db"),
            "extra": {"warehouse": store.properties["warehouse"]},
        }
    else:
        server = rest_server_module().HorizonLikeServer(store, pat=PAT, role=ROLE, database=CATALOG_DB).start()
        lake_conn = {
            "conn_type": "snowflake",
            "password": PAT,
            "extra": {"account": "lost", "role": ROLE, "database": CATALOG_DB, "catalog_uri": server.uri},
        }
    env = {
        "AIRFLOW_CONN_LOST_SNOWFLAKE": snowflake_connection_uri(fakesnow_server.port, database=DB),
        "AIRFLOW_CONN_LOST_LAKE": json.dumps(lake_conn),
    }
    entry = {
        "name": "lost",
        "source": {"table": f"{DB}.S.{src}"},
        "target": "lost.events",
        "cursor": {"column": "seq"},
        "write_mode": "append",
        "snowflake_conn_id": "lost_snowflake",
        "catalog": "lost_lake",
    }
    s = Setup(kind=kind, conn=conn, tmp=tmp_path, env=env, entry=entry, store=store, server=server)
    s.sql(f"CREATE DATABASE IF NOT EXISTS {DB}")
    s.sql(f"CREATE SCHEMA IF NOT EXISTS {DB}.S")
    s.sql(f"CREATE OR REPLACE TABLE {DB}.S.{src} (ID NUMBER(38,0), NOTE VARCHAR(20), SEQ NUMBER(38,0))")
    s.entry["source"]["table"] = f"{DB}.S.{src}"
    try:
        yield s
    finally:
        if server is not None:
            server.stop()
        conn.close()


def clean_run(s: Setup, run_id: str) -> dict[str, Any]:
    window = None
    results = {}
    for step in ct.STEPS:
        out = ct.run(s.spec(step, run_id, window))
        assert out.exitcode == 0, f"{step} of {run_id} failed: {out.error}"
        results[step] = out.result
        if step == "plan":
            window = out.result
    return results


def rows(s: Setup) -> list[tuple[int, int, str]]:
    return [(int(r["id"]), int(r["seq"]), r["note"]) for r in s.table().scan().to_arrow().to_pylist()]


def snowberg_props(snap: Any) -> dict[str, str]:
    return {
        k: v
        for k, v in (snap.summary.additional_properties if snap.summary else {}).items()
        if k.startswith("snowberg.")
    }


def test_a_commit_whose_response_is_lost_is_found_by_the_retry_and_not_applied_twice(case: Setup) -> None:
    s = case
    src = s.entry["source"]["table"]
    s.sql(f"INSERT INTO {src} SELECT seq4() + 1, 'first', 1 FROM TABLE(GENERATOR(ROWCOUNT => 50))")
    clean_run(s, "scheduled__1")
    assert len(rows(s)) == 50
    s.sql(f"INSERT INTO {src} SELECT seq4() + 101, 'second', 2 FROM TABLE(GENERATOR(ROWCOUNT => 20))")
    s.sql(f"UPDATE {src} SET SEQ = 3, NOTE = 'moved' WHERE ID <= 5")

    plan = ct.run(s.spec("plan", "scheduled__2"))
    assert plan.exitcode == 0, plan.error
    window = plan.result
    assert (window["high"], window["rows_in_window"]) == ("3", 25)
    snaps_before = len(s.table().metadata.snapshots)

    # The load commits; the catalog applies it; the client sees a failure instead of the answer.
    if s.server is not None:
        s.server.lose_next_commit_responses = 1
        s.server.lost_commit_status = 502 if "502" in s.kind else None
    lost = ct.run(s.spec("load", "scheduled__2", window, lose_commit_response=s.kind.startswith("sql")))
    assert lost.exitcode not in (0, None) and not lost.killed, "the load should have failed on the lost response"
    expected_error = {
        "sql-connection-dropped": "OperationalError",
        "rest-connection-dropped": "ConnectionError",
        "rest-502-after-apply": "CommitStateUnknownException",
    }[s.kind]
    assert lost.error is not None and expected_error in lost.error, lost.error
    applied = s.table()
    assert len(applied.metadata.snapshots) == snaps_before + 1, "the catalog did not apply the commit"
    head = applied.current_snapshot()
    assert snowberg_props(head)["snowberg.run-id"] == "scheduled__2"
    if s.server is not None:
        assert s.server.lost_commits == [head.snapshot_id]
    assert len(rows(s)) == 75

    def commit_requests() -> int:
        return 0 if s.server is None else len(s.server.calls("POST", "/tables/events"))

    # Airflow's retry: a new process, the same planned window.
    sent = commit_requests()
    retry = ct.run(s.spec("load", "scheduled__2", window))
    assert retry.exitcode == 0, retry.error
    assert commit_requests() == sent, "the retry sent another commit"
    assert retry.result["status"] == "already_committed" and retry.result["snapshot_id"] == head.snapshot_id
    assert [x.snapshot_id for x in s.table().metadata.snapshots][-1] == head.snapshot_id
    assert len(s.table().metadata.snapshots) == snaps_before + 1

    published = ct.run(s.spec("publish", "scheduled__2", window))
    assert published.exitcode == 0, published.error
    assert (published.result["watermark"], published.result["snapshot_id"]) == ("3", head.snapshot_id)
    mirror = json.loads(json.loads((s.tmp / "variables.json").read_text())["snowberg__lost__events__watermark"])
    assert (mirror["watermark"], mirror["snapshot_id"]) == ("3", head.snapshot_id)

    # The lake equals the source, and the next run has nothing to do.
    after = clean_run(s, "scheduled__3")
    assert after["load"]["status"] == "nothing_new"
    got = rows(s)
    assert not [p for p, c in Counter((i, q) for i, q, _ in got).items() if c > 1], "a row was appended twice"
    current = {(int(i), int(q), n) for i, n, q in s.sql(f"SELECT ID, NOTE, SEQ FROM {src}")}
    assert current <= set(got)
    assert len(got) == 75  # 50 + 20 new + 5 moved (their old versions stay: an append table keeps history)
