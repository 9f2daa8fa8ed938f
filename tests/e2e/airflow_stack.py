"""A real Airflow 3 for the end-to-end tests, started the way users run it.

``AirflowStack`` runs ``airflow api-server``, ``scheduler``, ``dag-processor``
and ``triggerer`` (and ``celery worker`` under CeleryExecutor) as separate
processes against a PostgreSQL metadata database of its own, each in its own
process group, with its log in ``test-artifacts/e2e/<stack>/``. ``stop()``
kills every process it started (the whole tree, found with psutil, then the
process groups) whatever state the tests left them in.

``ApiClient`` drives the stack over the public REST API v2 with a JWT from
``POST /auth/token`` (simple auth manager, fixed admin password).

Nothing here is snowberg-specific except the environment handed to Airflow:
the tables config (``SNOWBERG_TABLES_CONFIG``), the Snowflake connection and
the lake catalog (``snowberg.local.stack.stack_env``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
PG_ADMIN_DSN = os.environ.get("SNOWBERG_E2E_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("SNOWBERG_E2E_REDIS_URL", "redis://127.0.0.1:6379")
ADMIN_USER, ADMIN_PASSWORD = "admin", "admin"
AIRFLOW = str(Path(sys.executable).with_name("airflow"))

TERMINAL = {"success", "failed"}


# ---------------------------------------------------------------------------
# PostgreSQL: one fresh database per stack, dropped afterwards


def pg_url(dbname: str) -> str:
    base = PG_ADMIN_DSN.rsplit("/", 1)[0]
    return f"{base}/{dbname}"


def _admin_exec(sql: str) -> None:
    import psycopg2

    conn = psycopg2.connect(PG_ADMIN_DSN)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(sql)
    finally:
        conn.close()


def create_database(name: str, template: str | None = None) -> str:
    """Create database ``name`` (a copy of ``template`` when given); return its SQLAlchemy URL."""
    if not name.replace("_", "").isalnum():
        raise ValueError(f"bad database name {name!r}")
    _admin_exec(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    return "postgresql+psycopg2://" + pg_url(name).split("://", 1)[1]


def drop_database(name: str) -> None:
    _admin_exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ---------------------------------------------------------------------------
# Processes


@dataclass
class Service:
    name: str
    cmd: list[str]
    env: dict[str, str]
    log_path: Path
    cwd: Path
    proc: subprocess.Popen[bytes] | None = None
    seen: set[int] = field(default_factory=set)

    def start(self, *, append: bool = False) -> None:
        """Start the process; ``append`` keeps the log of an earlier start (a restart)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab" if append else "wb")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(
            self.cmd,
            env=self.env,
            cwd=self.cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tree(self) -> list[psutil.Process]:
        if self.proc is None:
            return []
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
        self.seen.update(p.pid for p in procs)
        return procs

    def signal(self, sig: int) -> list[psutil.Process]:
        """Send ``sig`` to the service's process groups; return its process tree as it was."""
        if self.proc is None:
            return []
        procs = self.tree()
        pgids = {self.proc.pid}
        for p in procs:
            with contextlib.suppress(psutil.Error, OSError):
                pgids.add(os.getpgid(p.pid))
        for pgid in pgids:
            with contextlib.suppress(OSError):
                os.killpg(pgid, sig)
        return procs

    def stop(self, grace: float = 15.0) -> None:
        stop_all([self], grace)

    def reap(self) -> None:
        """Kill what is left (after the grace period) and collect the exit status."""
        if self.proc is None:
            return
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        # Processes seen in the tree at any time (a task runner that re-parented
        # itself) must be gone too.
        for pid in self.seen:
            with contextlib.suppress(psutil.Error):
                p = psutil.Process(pid)
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    p.kill()

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def stop_all(services: list[Service], grace: float = 15.0) -> None:
    """SIGTERM every service at once, wait up to ``grace`` seconds for all, then SIGKILL the rest."""
    procs: list[psutil.Process] = []
    for s in services:
        procs.extend(s.signal(signal.SIGTERM))
    psutil.wait_procs(procs, timeout=grace)
    for s in services:
        s.reap()


class ResourceMonitor:
    """Samples the memory of every process the tests started; keeps the peaks.

    ``peak_rss`` sums resident sets (pages shared by forked workers counted
    once per process: an upper bound); ``peak_pss`` sums proportional set sizes
    (shared pages split between their users: what the machine actually holds).
    """

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.sources: list[Callable[[], list[psutil.Process]]] = []
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_procs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="e2e-memory", daemon=True)

    def add(self, source: Callable[[], list[psutil.Process]]) -> None:
        self.sources.append(source)

    def sample(self) -> int:
        procs: dict[int, psutil.Process] = {p.pid: p for p in psutil.Process().children(recursive=True)}
        procs[os.getpid()] = psutil.Process()
        for src in list(self.sources):
            with contextlib.suppress(Exception):
                for p in src():
                    procs[p.pid] = p
        rss = pss = 0
        for p in procs.values():
            with contextlib.suppress(psutil.Error):
                info = p.memory_full_info()
                rss += info.rss
                pss += getattr(info, "pss", info.rss)
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss)
        self.peak_procs = max(self.peak_procs, len(procs))
        return rss

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):
                self.sample()

    def start(self) -> ResourceMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


# ---------------------------------------------------------------------------
# The stack


def _write_passwords(home: Path) -> Path:
    path = home / "simple_auth_manager_passwords.json"
    path.write_text(json.dumps({ADMIN_USER: ADMIN_PASSWORD}))
    return path


class AirflowStack:
    """Airflow 3 as separate processes (api-server, scheduler, dag-processor, triggerer[, celery worker])."""

    def __init__(
        self,
        name: str,
        *,
        home: Path,
        database: str,
        sql_alchemy_conn: str,
        api_port: int,
        extra_env: dict[str, str],
        executor: str = "LocalExecutor",
        redis_db: int = 0,
        celery_queue: str = "default",
    ) -> None:
        self.name = name
        self.home = home
        self.database = database
        self.api_port = api_port
        self.executor = executor
        self.celery_queue = celery_queue
        self.base_url = f"http://127.0.0.1:{api_port}"
        self.log_dir = ARTIFACTS / "e2e" / name
        self.services: list[Service] = []
        shutil.rmtree(self.log_dir, ignore_errors=True)
        home.mkdir(parents=True, exist_ok=True)
        (home / "plugins").mkdir(exist_ok=True)  # the package is installed; no plugin files
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            {
                "AIRFLOW_HOME": str(home),
                "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
                "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": executor,
                "AIRFLOW__CORE__PARALLELISM": "4",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
                "AIRFLOW__CORE__FERNET_KEY": "",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(_write_passwords(home)),
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": sql_alchemy_conn,
                "AIRFLOW__DATABASE__SQL_ALCHEMY_POOL_SIZE": "3",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(api_port),
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
                "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
                "AIRFLOW__API_AUTH__JWT_EXPIRATION_TIME": "7200",
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                # The DAG file does not change during a test session: parse it once, not every few seconds.
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "120",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
                "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "300",
                "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
                # Task logs next to the process logs: kept as CI artifacts.
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.log_dir / "task-logs"),
                "AIRFLOW__CELERY__BROKER_URL": f"{REDIS_URL}/{redis_db}",
                "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + pg_url(database),
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": "2",
                "AIRFLOW__CELERY__WORKER_ENABLE_REMOTE_CONTROL": "False",
                # A queue of our own: another Celery worker on the same Redis never takes our tasks.
                "AIRFLOW__OPERATORS__DEFAULT_QUEUE": celery_queue,
                "PYTHONUNBUFFERED": "1",
                "NO_PROXY": "*",
                "no_proxy": "*",
            }
        )
        env.update(extra_env)
        self.env = env

    # -- lifecycle

    def airflow(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [AIRFLOW, *args], env=self.env, cwd=self.home, capture_output=True, text=True, timeout=timeout, check=False
        )

    def _service(self, name: str, *args: str) -> Service:
        svc = Service(name, [AIRFLOW, *args], self.env, self.log_dir / f"{name}.log", self.home)
        self.services.append(svc)
        return svc

    def start(self, *, celery_worker: bool = False) -> AirflowStack:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._service("api-server", "api-server", "--port", str(self.api_port), "--host", "127.0.0.1").start()
        self._service("scheduler", "scheduler").start()
        self._service("dag-processor", "dag-processor").start()
        self._service("triggerer", "triggerer").start()
        if celery_worker:
            self._service(
                "celery-worker",
                "celery",
                "worker",
                "--concurrency",
                "2",
                "--queues",
                self.celery_queue,
                "--celery-hostname",
                f"snowberg-e2e-{self.celery_queue}@%h",
                "--without-mingle",
                "--without-gossip",
            ).start()
        return self

    def service(self, name: str) -> Service:
        """The running (or killed) service ``name`` (``triggerer``, ``scheduler``, ...)."""
        found = [s for s in self.services if s.name == name]
        if not found:
            raise KeyError(f"{self.name}: no service {name!r}")
        return found[-1]

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to one service's whole process tree (SIGKILL: no shutdown, as a crash); reap it on SIGKILL.

        The other services keep running: a test can then check what the stack does without this one.
        """
        svc = self.service(name)
        svc.signal(sig)
        if sig == signal.SIGKILL:
            svc.reap()

    def restart(self, name: str) -> Service:
        """Start one service again (killing what is left of it first), its log appended to the old one."""
        svc = self.service(name)
        if svc.alive():
            self.kill(name)
        svc.start(append=True)
        return svc

    def processes(self) -> list[psutil.Process]:
        out: list[psutil.Process] = []
        for s in self.services:
            out.extend(s.tree())
        return out

    def check_alive(self) -> None:
        dead = [s for s in self.services if not s.alive()]
        if dead:
            raise RuntimeError("Airflow process exited: " + "; ".join(f"{s.name}:\n{s.tail()}" for s in dead))

    def wait_healthy(self, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                r = httpx.get(f"{self.base_url}/api/v2/monitor/health", timeout=5)
                last = r.text
                if r.status_code == 200:
                    h = r.json()
                    parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
                    if all((h.get(p) or {}).get("status") == "healthy" for p in parts):
                        return h
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(1)
        raise TimeoutError(f"{self.name}: Airflow not healthy after {timeout}s: {last}")

    def stop(self) -> None:
        stop_all(self.services)

    def leftover(self) -> list[int]:
        """Pids of processes this stack started that are still alive (should be none after stop)."""
        pids = []
        for s in self.services:
            for pid in s.seen | ({s.proc.pid} if s.proc else set()):
                with contextlib.suppress(psutil.Error):
                    p = psutil.Process(pid)
                    if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                        pids.append(pid)
        return pids

    def client(self) -> ApiClient:
        return ApiClient(self.base_url)


@contextlib.contextmanager
def running_stack(stack: AirflowStack, *, celery_worker: bool = False) -> Iterator[AirflowStack]:
    try:
        stack.start(celery_worker=celery_worker)
        stack.wait_healthy()
        yield stack
    finally:
        stack.stop()


# ---------------------------------------------------------------------------
# REST API v2


class ApiError(RuntimeError):
    def __init__(self, response: httpx.Response) -> None:
        self.status_code = response.status_code
        self.text = response.text
        super().__init__(
            f"{response.request.method} {response.request.url} -> {response.status_code}: {response.text[:2000]}"
        )


class ApiClient:
    def __init__(self, base_url: str, user: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> None:
        self.base_url = base_url
        r = httpx.post(f"{base_url}/auth/token", json={"username": user, "password": password}, timeout=30)
        if r.status_code not in (200, 201):
            raise ApiError(r)
        self.http = httpx.Client(
            base_url=f"{base_url}/api/v2", timeout=60, headers={"Authorization": f"Bearer {r.json()['access_token']}"}
        )

    def request(self, method: str, path: str, *, ok: tuple[int, ...] = (200, 201, 204), **kw: Any) -> httpx.Response:
        r = self.http.request(method, path, **kw)
        if r.status_code not in ok:
            raise ApiError(r)
        return r

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params).json()

    # -- DAGs and runs

    def wait_dags(self, dag_ids: list[str], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        missing = list(dag_ids)
        while time.monotonic() < deadline:
            missing = [d for d in dag_ids if self.http.get(f"/dags/{d}").status_code != 200]
            if not missing:
                return
            time.sleep(1)
        errors = self.http.get("/importErrors").text
        raise TimeoutError(f"DAGs not parsed after {timeout}s: {missing}; import errors: {errors[:3000]}")

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": paused})

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"logical_date": None, **extra}
        if conf is not None:
            body["conf"] = conf
        return self.request("POST", f"/dags/{dag_id}/dagRuns", json=body).json()

    def runs(self, dag_id: str, **params: Any) -> list[dict[str, Any]]:
        return list(self.get(f"/dags/{dag_id}/dagRuns", limit=100, order_by="run_after", **params)["dag_runs"])

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.get(f"/dags/{dag_id}/dagRuns/{run_id}"))

    def wait_run(
        self, dag_id: str, run_id: str, timeout: float = 180, stack: AirflowStack | None = None
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        run: dict[str, Any] = {}
        while time.monotonic() < deadline:
            run = self.run(dag_id, run_id)
            if run["state"] in TERMINAL:
                return run
            if stack is not None:
                stack.check_alive()
            time.sleep(1)
        raise TimeoutError(
            f"run {dag_id}/{run_id} not finished after {timeout}s: {run.get('state')}; "
            f"tasks: {self.task_states(dag_id, run_id)}"
        )

    def wait_for(
        self,
        what: str,
        predicate: Callable[[], Any],
        timeout: float = 180,
        every: float = 1.0,
        stack: AirflowStack | None = None,
    ) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            if stack is not None:
                stack.check_alive()
            time.sleep(every)
        raise TimeoutError(f"timed out after {timeout}s waiting for {what}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"])

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        return {t["task_id"]: t["state"] for t in self.task_instances(dag_id, run_id)}

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        r = self.request(
            "GET",
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            params={"full_content": True},
            headers={"Accept": "application/json"},
        )
        content = r.json().get("content")
        if isinstance(content, list):
            return "\n".join(
                c.get("event", "") + " " + json.dumps({k: v for k, v in c.items() if k != "event"})
                if isinstance(c, dict)
                else str(c)
                for c in content
            )
        return str(content)

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        return self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}", deserialize=True)[
            "value"
        ]

    def variable(self, key: str) -> str | None:
        r = self.http.get(f"/variables/{key}")
        if r.status_code == 404:
            return None
        if r.status_code != 200:
            raise ApiError(r)
        return str(r.json()["value"])

    # -- backfills

    def create_backfill(
        self, dag_id: str, from_date: str, to_date: str, *, ok: tuple[int, ...] = (200, 201), **extra: Any
    ) -> httpx.Response:
        body = {
            "dag_id": dag_id,
            "from_date": from_date,
            "to_date": to_date,
            "reprocess_behavior": "none",
            "max_active_runs": 1,
            **extra,
        }
        return self.request("POST", "/backfills", json=body, ok=ok)

    def backfill(self, backfill_id: int) -> dict[str, Any]:
        return dict(self.get(f"/backfills/{backfill_id}"))

    def finish_backfill(self, backfill_id: int) -> None:
        """Mark a backfill whose runs have all ended as complete now.

        The scheduler does it on a 30-second timer; until then a new backfill
        of the same DAG is refused (409). Cancelling a backfill with no
        unfinished run only sets its completion time.
        """
        r = self.http.put(f"/backfills/{backfill_id}/cancel")
        if r.status_code not in (200, 409):  # 409: the scheduler marked it complete first
            raise ApiError(r)


# ---------------------------------------------------------------------------
# Helpers over run listings


def parse_ts(text: str | None) -> Any:
    from datetime import datetime

    if text is None:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def wait_runs_done(
    api: ApiClient,
    dag_id: str,
    *,
    count: int,
    timeout: float = 240,
    stack: AirflowStack | None = None,
    started_after: str | None = None,
    **filters: Any,
) -> list[dict[str, Any]]:
    """Wait until ``count`` runs matching ``filters`` (and started after ``started_after``) have all finished."""

    def done() -> list[dict[str, Any]] | None:
        runs = api.runs(dag_id, **filters)
        if started_after is not None:
            runs = [r for r in runs if r.get("start_date") and parse_ts(r["start_date"]) > parse_ts(started_after)]
        finished = [r for r in runs if r["state"] in TERMINAL]
        return finished if len(runs) >= count and len(finished) == len(runs) else None

    return list(api.wait_for(f"{count} {filters or ''} runs of {dag_id}", done, timeout=timeout, every=2, stack=stack))


def overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two runs or task instances were running at the same time (start/end dates)."""
    a0, a1, b0, b1 = (
        parse_ts(a["start_date"]),
        parse_ts(a["end_date"]),
        parse_ts(b["start_date"]),
        parse_ts(b["end_date"]),
    )
    return bool(a0 < b1 and b0 < a1)
