"""Start and stop the local stack; write the settings Airflow and snowberg read.

* Snowflake: the emulator, fakesnow's server run by ``snowberg.local.emulator``
  (``python -m snowberg.local.emulator -p PORT -d DIR``): its DuckDB files under the
  stack folder, so tables, rows and change times survive ``down`` and ``up``
  (``fakesnow -s`` itself ignores ``-d`` and keeps everything in memory), and each
  table's last commit time served as ``LAST_ALTERED``.
* Lake: pyiceberg's SQL catalog on SQLite with a local warehouse folder.

Nothing here is read by snowberg's library code: the stack only writes an
env file (``.snowberg/stack.env``) with ``AIRFLOW_CONN_SNOWFLAKE_DEFAULT`` and
``PYICEBERG_CATALOG__LAKE__*``, the same settings a real deployment sets.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_DIR = Path(os.environ.get("SNOWBERG_STACK_DIR", Path.cwd() / ".snowberg"))

# Servers ``up`` started in this process, by pid, so ``down`` can wait for and reap them.
_STARTED: dict[int, FakesnowServer] = {}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it), for a server started next."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 30.0) -> None:
    """Return once something accepts connections on ``port``; ``TimeoutError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def snowflake_connection_uri(port: int, database: str = "SNOWBERG_DEMO") -> str:
    """Airflow connection (JSON form) for the emulator: plain http on ``port``."""
    return json.dumps(
        {
            "conn_type": "snowflake",
            "login": "fake",
            "password": "snow",
            "extra": {
                "account": "fakesnow",
                "host": "127.0.0.1",
                "port": port,
                "protocol": "http",
                "database": database,
                "warehouse": "DEMO_WH",
            },
        }
    )


def worker_preload_env() -> dict[str, str]:
    """The scheduler's LocalExecutor workers forked from a forkserver that imported snowberg's task libraries.

    ``snowberg.airflow.worker_preload`` says why; docs/airflow-deployment.md gives the same two settings.
    """
    return {
        "AIRFLOW__SCHEDULER__MP_START_METHOD": "forkserver",
        "AIRFLOW__SCHEDULER__MP_FORKSERVER_PRELOAD": "snowberg.airflow.worker_preload",
    }


def stack_env(stack_dir: Path, port: int) -> dict[str, str]:
    """The settings a real deployment would set, pointing at the emulator on ``port`` and the SQLite lake."""
    lake = stack_dir / "lake"
    return worker_preload_env() | {
        "AIRFLOW_CONN_SNOWFLAKE_DEFAULT": snowflake_connection_uri(port),
        "PYICEBERG_CATALOG__LAKE__TYPE": "sql",
        "PYICEBERG_CATALOG__LAKE__URI": f"sqlite:///{lake / 'catalog.db'}",
        "PYICEBERG_CATALOG__LAKE__WAREHOUSE": f"file://{lake / 'warehouse'}",
        "SNOWBERG_FAKESNOW_PORT": str(port),
    }


class FakesnowServer:
    """The emulator's server process (``snowberg.local.emulator``), its databases kept in ``db_path``."""

    def __init__(self, db_path: Path, port: int | None = None, log_path: Path | None = None) -> None:
        self.db_path = Path(db_path)
        self.port = port or free_port()
        self.log_path = log_path or self.db_path.parent / "fakesnow.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> FakesnowServer:
        """Start the server and return once it accepts connections (stopped again if it never does)."""
        self.db_path.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "snowberg.local.emulator", "-p", str(self.port), "-d", str(self.db_path)]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_port(self.port)
        except TimeoutError:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group (the emulator closes its databases), after ``timeout`` s SIGKILL; reap it."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def connect_kwargs(self) -> dict[str, object]:
        """``snowflake.connector.connect`` arguments for this server (plain http, UTC session)."""
        return {
            "user": "fake",
            "password": "snow",
            "account": "fakesnow",
            "host": "127.0.0.1",
            "port": self.port,
            "protocol": "http",
            "session_parameters": {"TIMEZONE": "UTC"},
            "network_timeout": 60,
        }

    def connect(self, **extra: object) -> object:
        import snowflake.connector

        return snowflake.connector.connect(**self.connect_kwargs(), **extra)

    def __enter__(self) -> FakesnowServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def up(stack_dir: Path = DEFAULT_DIR, port: int | None = None) -> dict[str, str]:
    """Start the emulator in the background (if not running) and write ``stack.env``.

    The emulator opens what an earlier ``up`` left in ``stack_dir / "fakesnow"``: stopping and starting
    the stack keeps the source tables as they were (``snowberg demo --fresh`` starts from nothing).
    """
    stack_dir.mkdir(parents=True, exist_ok=True)
    (stack_dir / "lake" / "warehouse").mkdir(parents=True, exist_ok=True)
    pid_file = stack_dir / "fakesnow.pid"
    env_file = stack_dir / "stack.env"
    if pid_file.exists() and env_file.exists():
        pid, old_port = (int(x) for x in pid_file.read_text().split())
        try:
            os.kill(pid, 0)
            wait_port(old_port, timeout=5)
            return read_env(env_file)
        except (OSError, TimeoutError):
            pid_file.unlink()
    server = FakesnowServer(stack_dir / "fakesnow", port=port)
    server.start()
    assert server.proc is not None
    _STARTED[server.proc.pid] = server
    pid_file.write_text(f"{server.proc.pid} {server.port}")
    env = stack_env(stack_dir, server.port)
    env_file.write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()))
    return env


def down(stack_dir: Path = DEFAULT_DIR, timeout: float = 10.0) -> None:
    """Stop the emulator ``up`` started and return once it has exited.

    SIGTERM first, SIGKILL after ``timeout`` seconds. A server started by this process is reaped, so a
    long-lived caller (a test session, a notebook) keeps no zombie; one started by another process (the
    CLI's ``up``) is waited for until it is gone.
    """
    pid_file = stack_dir / "fakesnow.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().split()[0])
    server = _STARTED.pop(pid, None)
    if server is not None:
        server.stop(timeout)
    else:
        _stop_process_group(pid, timeout)
    pid_file.unlink()


def _stop_process_group(pid: int, timeout: float) -> None:
    """SIGTERM the group led by ``pid`` (a server started by another process), then SIGKILL it after ``timeout``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _exited(pid):
                return
            time.sleep(0.05)
    if not _exited(pid):
        raise TimeoutError(f"fakesnow (pid {pid}) did not exit after SIGKILL")


def _exited(pid: int) -> bool:
    """True once ``pid`` is gone; reaps it if it is our child, counts a zombie of another parent as gone."""
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        return reaped == pid
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def read_env(env_file: Path) -> dict[str, str]:
    """The ``export K=V`` lines of an env file ``up`` wrote, unquoted as a shell would; other lines are ignored."""
    out = {}
    for line in env_file.read_text().splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export ") :].partition("=")
            out[k] = shlex.split(v)[0] if v else ""
    return out
