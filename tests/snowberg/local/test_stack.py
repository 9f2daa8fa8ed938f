"""The local stack: a real fakesnow server started, found again and stopped, and the env file Airflow reads."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from snowberg.local import stack


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            return True
        time.sleep(0.1)
    return False


def freed(port: int, timeout: float = 15.0) -> bool:
    """The server's port closes once the server has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not listening(port):
            return True
        time.sleep(0.1)
    return False


def test_a_free_port_can_be_bound() -> None:
    port = stack.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    assert 0 < port < 65536


def test_wait_port_returns_once_something_listens_and_times_out_naming_the_port() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        stack.wait_port(srv.getsockname()[1], timeout=2)
    port = stack.free_port()
    with pytest.raises(TimeoutError, match=f"nothing listening on 127.0.0.1:{port} after 0.3s"):
        stack.wait_port(port, timeout=0.3)


def test_the_connection_is_airflows_json_form_for_plain_http_on_the_port() -> None:
    conn = json.loads(stack.snowflake_connection_uri(4321, database="DB1"))
    assert conn["conn_type"] == "snowflake" and (conn["login"], conn["password"]) == ("fake", "snow")
    assert conn["extra"] == {
        "account": "fakesnow",
        "host": "127.0.0.1",
        "port": 4321,
        "protocol": "http",
        "database": "DB1",
        "warehouse": "DEMO_WH",
    }


def test_the_env_points_airflow_at_the_emulator_and_pyiceberg_at_the_sqlite_lake(tmp_path: Path) -> None:
    env = stack.stack_env(tmp_path, 4321)
    assert json.loads(env["AIRFLOW_CONN_SNOWFLAKE_DEFAULT"])["extra"]["port"] == 4321
    assert env["PYICEBERG_CATALOG__LAKE__TYPE"] == "sql"
    assert env["PYICEBERG_CATALOG__LAKE__URI"] == f"sqlite:///{tmp_path}/lake/catalog.db"
    assert env["PYICEBERG_CATALOG__LAKE__WAREHOUSE"] == f"file://{tmp_path}/lake/warehouse"
    assert env["SNOWBERG_FAKESNOW_PORT"] == "4321"
    # docs/airflow-deployment.md: the LocalExecutor's workers come from a forkserver that imported the preload
    assert env["AIRFLOW__SCHEDULER__MP_START_METHOD"] == "forkserver"
    assert env["AIRFLOW__SCHEDULER__MP_FORKSERVER_PRELOAD"] == "snowberg.airflow.worker_preload"


def test_read_env_reads_back_shell_quoted_exports(tmp_path: Path) -> None:
    f = tmp_path / "stack.env"
    f.write_text('# comment\nexport A=\'{"x": "it\'"\'"\'s"}\'\nexport B=plain\nexport EMPTY=\nOTHER=1\n')
    assert stack.read_env(f) == {"A": '{"x": "it\'s"}', "B": "plain", "EMPTY": ""}


def test_a_server_answers_queries_while_started_and_frees_its_port_when_stopped(tmp_path: Path) -> None:
    with stack.FakesnowServer(tmp_path / "db") as server:
        assert server.proc is not None and listening(server.port)
        conn = server.connect()
        try:
            cur = conn.cursor()  # type: ignore[attr-defined]
            cur.execute("SELECT 40 + 2")
            assert cur.fetchone() == (42,)
        finally:
            conn.close()  # type: ignore[attr-defined]
        pid = server.proc.pid
    assert server.proc is None and gone(pid)
    assert (tmp_path / "fakesnow.log").exists()


def test_up_starts_once_writes_the_env_file_and_down_stops_it(tmp_path: Path) -> None:
    env = stack.up(tmp_path)
    try:
        port = int(env["SNOWBERG_FAKESNOW_PORT"])
        pid, recorded_port = (int(x) for x in (tmp_path / "fakesnow.pid").read_text().split())
        assert recorded_port == port and listening(port)
        assert stack.read_env(tmp_path / "stack.env") == env == stack.stack_env(tmp_path, port)
        assert (tmp_path / "lake" / "warehouse").is_dir()
        assert stack.up(tmp_path) == env  # already running: found again, not started twice
        assert (tmp_path / "fakesnow.pid").read_text().split()[0] == str(pid)
    finally:
        stack.down(tmp_path)
    assert not (tmp_path / "fakesnow.pid").exists() and freed(port)
    stack.down(tmp_path)  # nothing running: nothing to do


def test_up_replaces_a_pid_file_left_by_a_dead_server(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "fakesnow.pid").write_text(f"{dead.pid} {stack.free_port()}")
    (tmp_path / "stack.env").write_text("export SNOWBERG_FAKESNOW_PORT=1\n")
    env = stack.up(tmp_path)
    try:
        port = int(env["SNOWBERG_FAKESNOW_PORT"])
        assert port != 1 and listening(port)
        assert (tmp_path / "fakesnow.pid").read_text().split()[0] != str(dead.pid)
    finally:
        stack.down(tmp_path)
    assert freed(port)


def exited_and_reaped(pid: int) -> bool:
    """Neither running nor a zombie: no /proc entry, and no child of ours left to wait for."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return not Path(f"/proc/{pid}").exists()
    return False


def test_down_waits_for_the_server_it_started_to_exit_and_reaps_it(tmp_path: Path) -> None:
    env = stack.up(tmp_path)
    pid = int((tmp_path / "fakesnow.pid").read_text().split()[0])
    stack.down(tmp_path)
    assert exited_and_reaped(pid)
    assert not listening(int(env["SNOWBERG_FAKESNOW_PORT"]))


def test_down_kills_a_server_that_ignores_sigterm_once_the_timeout_has_passed(tmp_path: Path) -> None:
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"1\n"  # SIGTERM is ignored from here on
    (tmp_path / "fakesnow.pid").write_text(f"{stubborn.pid} {stack.free_port()}")
    started = time.monotonic()
    stack.down(tmp_path, timeout=0.5)
    assert 0.5 <= time.monotonic() - started < 10
    assert exited_and_reaped(stubborn.pid)
    assert not (tmp_path / "fakesnow.pid").exists()
    stubborn.stdout.close()


@pytest.mark.slow  # two emulator starts
def test_down_and_up_keep_the_source_rows_and_change_times_and_up_does_not_seed_over_them(tmp_path: Path) -> None:
    """The demo's data is kept in the stack folder: a restart neither loses nor re-seeds the changed orders."""
    import snowflake.connector

    from snowberg.local.seed import ORDERS, change_orders, last_altered, seed

    def connect(env: dict[str, str]) -> Any:
        port = int(env["SNOWBERG_FAKESNOW_PORT"])
        return snowflake.connector.connect(
            user="fake", password="snow", account="fakesnow", host="127.0.0.1", port=port, protocol="http"
        )

    try:
        conn = connect(stack.up(tmp_path))
        assert seed(conn, orders=40, menu_items=4)["inserted"] == 44
        change = change_orders(conn, 3)
        conn.close()
        stack.down(tmp_path)

        conn = connect(stack.up(tmp_path))
        assert seed(conn, orders=40, menu_items=4) == {"orders": 40, "menu": 4, "inserted": 0}  # as `stack up` does
        cur = conn.cursor()
        cur.execute(f"SELECT ORDER_ID FROM {ORDERS} WHERE QUANTITY <> MOD(ORDER_ID - 1, 4) + 1 ORDER BY 1")
        assert cur.fetchall() == [(7,), (14,), (21,)]  # the changed orders, as they were changed
        assert change.last_altered_after is not None and last_altered(conn) == change.last_altered_after
        conn.close()
    finally:
        stack.down(tmp_path)
