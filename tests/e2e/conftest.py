"""Fixtures for the end-to-end tests: a real Airflow 3 over the local stack.

Session layout (every process started here is stopped here, even on failure):

* one ``fakesnow`` server with a source table per test table (``e2e_data``)
  and a SQLite-catalog lake, the env of ``snowberg.local.stack.stack_env``;
* a PostgreSQL template database migrated once (``airflow db migrate``);
  each Airflow stack gets a fresh copy, dropped at the end;
* at most one Airflow stack running at a time: ``local_stack``
  (LocalExecutor) for the API and browser tests, ``celery_stack``
  (CeleryExecutor + a Celery worker on Redis) for the distributed test, and
  ``eco`` (test_ecosystem.py: its own tables, syncs, lineage, metrics and
  plugins settings through ``Stacks.get(extra_env=...)``).

Wall time and the peak summed RSS of every process the session started are
written to ``test-artifacts/e2e/resources.json`` and printed at the end.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_stack import (
    ARTIFACTS,
    AirflowStack,
    ApiClient,
    ResourceMonitor,
    create_database,
    drop_database,
)
from e2e_data import SOURCES, TABLES, Lake, create_source, dag_id, write_tables_config

from snowberg.local.stack import FakesnowServer, free_port, stack_env

REDIS_DB = int(os.environ.get("SNOWBERG_E2E_REDIS_DB", "11"))


@pytest.fixture(scope="session")
def e2e_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def monitor() -> Iterator[ResourceMonitor]:
    started = time.monotonic()
    rm = ResourceMonitor().start()
    yield rm
    rm.stop()
    rm.sample()
    out = ARTIFACTS / "e2e" / "resources.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "wall_seconds": round(time.monotonic() - started, 1),
        "peak_pss_mb": round(rm.peak_pss / 2**20),
        "peak_rss_sum_mb": round(rm.peak_rss / 2**20),
        "peak_processes": rm.peak_procs,
    }
    out.write_text(json.dumps(report, indent=2))
    print(f"\ne2e resources: {report}")


@pytest.fixture(scope="session")
def fakesnow_server(e2e_root: Path, monitor: ResourceMonitor) -> Iterator[FakesnowServer]:
    (ARTIFACTS / "e2e").mkdir(parents=True, exist_ok=True)
    server = FakesnowServer(e2e_root / "fakesnow", log_path=ARTIFACTS / "e2e" / "fakesnow.log")
    server.start()
    try:
        import psutil

        assert server.proc is not None
        pid = server.proc.pid
        monitor.add(lambda: [psutil.Process(pid)])
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def snow(fakesnow_server: FakesnowServer) -> Iterator[Any]:
    conn: Any = fakesnow_server.connect()
    for source in SOURCES.values():
        create_source(conn, source)
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def lake_env(e2e_root: Path, fakesnow_server: FakesnowServer, snow: Any) -> dict[str, str]:
    (e2e_root / "lake" / "warehouse").mkdir(parents=True, exist_ok=True)
    env = stack_env(e2e_root, fakesnow_server.port)
    env["SNOWBERG_TABLES_CONFIG"] = str(write_tables_config(e2e_root / "tables.yaml", TABLES))
    return env


@pytest.fixture(scope="session")
def lake(lake_env: dict[str, str]) -> Lake:
    return Lake(lake_env)


class Stacks:
    """Starts Airflow stacks on demand, one running at a time (2 cores)."""

    def __init__(self, root: Path, env: dict[str, str], monitor: ResourceMonitor) -> None:
        self.root = root
        self.env = env
        self.monitor = monitor
        self.token = secrets.token_hex(4)
        self.template: str | None = None
        self.databases: list[str] = []
        self.current: AirflowStack | None = None
        self.started: list[AirflowStack] = []
        self.timings: dict[str, float] = {}

    def _template(self) -> str:
        if self.template is None:
            name = f"snowberg_e2e_{self.token}_tpl"
            url = create_database(name)
            self.databases.append(name)
            probe = AirflowStack(
                "migrate",
                home=self.root / "migrate",
                database=name,
                sql_alchemy_conn=url,
                api_port=free_port(),
                extra_env=self.env,
            )
            t = time.monotonic()
            res = probe.airflow("db", "migrate", timeout=600)
            self.timings["db_migrate_s"] = round(time.monotonic() - t, 1)
            if res.returncode != 0:
                raise RuntimeError(f"airflow db migrate failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
            self.template = name
        return self.template

    def get(
        self,
        name: str,
        *,
        executor: str = "LocalExecutor",
        celery_worker: bool = False,
        unpause: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
        wait_for: list[str] | None = None,
    ) -> AirflowStack:
        """The stack ``name`` (started now unless it is the running one).

        ``extra_env`` adds to the session's environment for this stack only (its
        own tables config, lineage and metrics settings); ``wait_for`` lists the
        DAG ids to wait for (default: the standard test tables').
        """
        if self.current is not None and self.current.name == name:
            self.current.check_alive()
            return self.current
        if self.current is not None:
            self.current.stop()
            self.current = None
        template = self._template()
        db = f"snowberg_e2e_{self.token}_{name.replace('-', '_')}"
        url = create_database(db, template=template)
        self.databases.append(db)
        stack = AirflowStack(
            name,
            home=self.root / name,
            database=db,
            sql_alchemy_conn=url,
            api_port=free_port(),
            extra_env={**self.env, **(extra_env or {})},
            executor=executor,
            redis_db=REDIS_DB,
            celery_queue=f"snowberg_e2e_{self.token}",
        )
        self.started.append(stack)
        self.current = stack
        self.monitor.add(stack.processes)
        t = time.monotonic()
        try:
            stack.start(celery_worker=celery_worker)
            stack.wait_healthy()
            api = stack.client()
            api.wait_dags(wait_for if wait_for is not None else [dag_id(t["name"]) for t in TABLES])
            for table in unpause:
                api.set_paused(dag_id(table), False)
        except BaseException:
            stack.stop()
            raise
        self.timings[f"{name}_start_s"] = round(time.monotonic() - t, 1)
        return stack

    def close(self) -> list[int]:
        for s in self.started:
            s.stop()
        leftover = [pid for s in self.started for pid in s.leftover()]
        for db in reversed(self.databases):
            drop_database(db)
        return leftover


@pytest.fixture(scope="session")
def stacks(e2e_root: Path, lake_env: dict[str, str], monitor: ResourceMonitor) -> Iterator[Stacks]:
    mgr = Stacks(e2e_root, lake_env, monitor)
    try:
        yield mgr
    finally:
        leftover = mgr.close()
        print(f"\ne2e stack timings: {mgr.timings}")
        assert not leftover, f"processes still running after the stacks were stopped: {leftover}"


@pytest.fixture
def local_stack(stacks: Stacks) -> AirflowStack:
    # The backfill tables' tests (API and browser) start after their first
    # scheduled run (catchup off: one run for the latest day); unpausing them
    # now lets those runs overlap the tests before them.
    return stacks.get("local", unpause=("e2e_backfill", "e2e_bf_date", "e2e_bf_number"))


@pytest.fixture
def api(local_stack: AirflowStack) -> ApiClient:
    return local_stack.client()


@pytest.fixture
def celery_stack(stacks: Stacks) -> AirflowStack:
    return stacks.get("celery", executor="CeleryExecutor", celery_worker=True)
