"""Shared fixtures: a real fakesnow server per session, a SQLite Iceberg catalog per test."""

from __future__ import annotations

import itertools
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Airflow reads its home when first imported: give the test session its own. pytest-xdist workers inherit
# the controller's environment, this home included: each worker gets a home of its own (its own SQLite
# metadata database, so its own Variables), or two workers' tests of same-named tables share watermarks.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _XDIST_WORKER:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix=f"snowberg-airflow-{_XDIST_WORKER}-")
else:
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="snowberg-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(Path(__file__).resolve().parents[1] / "dags"))
os.environ.setdefault("AIRFLOW__CORE__PLUGINS_FOLDER", str(Path(__file__).resolve().parents[1] / "plugins"))

for noisy in ("snowflake.connector", "uvicorn", "httpx"):
    logging.getLogger(noisy).setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def fakesnow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real fakesnow HTTP server process (the Snowflake emulator), for the whole session."""
    from snowberg.local.stack import FakesnowServer

    server = FakesnowServer(tmp_path_factory.mktemp("fakesnow") / "db")
    server.start()
    try:
        yield server
    finally:
        server.stop()


_db_counter = itertools.count(1)


class SnowflakeDB:
    """A fresh database + schema on the emulator for one test."""

    def __init__(self, server: Any, name: str) -> None:
        self.server = server
        self.name = name
        self.conn = server.connect()
        cur = self.conn.cursor()
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {name}")
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {name}.S")
        cur.close()
        self.conn.close()
        self.conn = server.connect(database=name, schema="S")

    def sql(self, text: str, params: Any = None) -> list[tuple[Any, ...]]:
        cur = self.conn.cursor()
        cur.execute(text, params)
        try:
            return cur.fetchall()
        except Exception:
            return []
        finally:
            cur.close()

    def table(self, name: str) -> str:
        return f"{self.name}.S.{name}"

    def airflow_connection(self, *, password: str = "snow", **session: Any) -> str:
        """This database as an Airflow Snowflake connection: the JSON of an ``AIRFLOW_CONN_*`` variable.

        ``session`` becomes the connection's own ``session_parameters`` (what a user's connection might set).
        """
        extra: dict[str, Any] = {
            "account": "fakesnow",
            "host": "127.0.0.1",
            "port": self.server.port,
            "protocol": "http",
            "database": self.name,  # the emulator keeps its helper functions per database
        }
        if session:
            extra["session_parameters"] = session
        return json.dumps({"conn_type": "snowflake", "login": "fake", "password": password, "extra": extra})


@pytest.fixture
def catalog_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Configure pyiceberg catalog ``name`` through the environment, as an Airflow task reads it: SQLite in tmp_path."""

    def configure(name: str) -> None:
        (tmp_path / "wh").mkdir(exist_ok=True)
        key = f"PYICEBERG_CATALOG__{name.upper()}__"
        monkeypatch.setenv(key + "TYPE", "sql")
        monkeypatch.setenv(key + "URI", f"sqlite:///{tmp_path}/c.db")
        monkeypatch.setenv(key + "WAREHOUSE", f"file://{tmp_path}/wh")

    return configure


@pytest.fixture
def sfdb(fakesnow_server: Any) -> Iterator[SnowflakeDB]:
    db = SnowflakeDB(fakesnow_server, f"T{next(_db_counter)}")
    try:
        yield db
    finally:
        db.conn.close()


class VarStore(dict):  # type: ignore[type-arg]
    """In-memory VariableStore (the operators use Airflow Variables)."""

    def set(self, key: str, value: str) -> None:
        self[key] = value


@pytest.fixture
def variables() -> VarStore:
    return VarStore()


@pytest.fixture
def catalog(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    (tmp_path / "wh").mkdir()
    return SqlCatalog("lake", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")


@pytest.fixture(scope="session")
def airflow_db() -> str:
    """A migrated Airflow metadata database (SQLite) in the session's AIRFLOW_HOME."""
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("airflow")
    subprocess.run([str(exe), "db", "migrate"], check=True, capture_output=True, env=dict(os.environ))
    return os.environ["AIRFLOW_HOME"]


# Test folders that must stay in one pytest-xdist worker (scripts/test.sh runs two): their session fixtures
# are expensive or exclusive — the end-to-end Airflow stacks (one at a time, by design), the built wheel
# and its venvs — and a second worker would build them again or run two at once.
SERIAL_GROUPS = {"e2e": "airflow-stacks", "install": "wheel-venvs"}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's load scheduling, each of ``SERIAL_GROUPS`` on one worker, surviving a worker crash."""
    from xdist_scheduling import serial_groups_scheduler

    return serial_groups_scheduler(config, log, SERIAL_GROUPS)
