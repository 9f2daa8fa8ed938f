"""Bounded lake reads for the UI page: every catalog opened once, tables read in parallel, a timeout per read.

The page runs inside Airflow's api-server, which serves the rest of Airflow's UI too: a catalog that
accepts a connection and never answers (a REST catalog behind a dead proxy) must cost the page at most
one timeout, once, and never delay the tables of other catalogs.

* Each catalog is opened once per catalog name and kept (``CatalogPool``); pyiceberg's catalogs are
  safe to share between threads (SqlCatalog: a SQLAlchemy engine; REST: a ``requests`` session).
* Opening a catalog and reading each table run on a shared ``ThreadPoolExecutor``. A read that has been
  running for longer than the timeout is given up: its table is shown as ``catalog unreachable``. Its
  catalog is then "busy" until the stuck call returns: later tables of that catalog, in this request and
  the next ones, are reported unreachable at once instead of queueing more threads behind it.
* pyiceberg's REST client sets no socket timeout, so a stuck call may hold its thread until the server
  closes the connection; the pool's size bounds how many such threads can exist.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

# Threads shared by every page request of the process (reads are I/O bound: catalog round trips, metadata files).
WORKERS = 16


class CatalogUnreachable(Exception):
    """A catalog did not answer within the page's timeout (or is still stuck on an earlier call)."""


@dataclass(kw_only=True)
class _Timed:
    """A submitted call and when a worker started it (queued calls have not started: no timeout runs yet)."""

    key: str
    catalog: str
    future: Future[Any]
    started: list[float]  # set by the worker: [monotonic start]
    submitted: float


class CatalogPool:
    """Catalogs opened once per name, reads on shared threads with a timeout, stuck catalogs remembered."""

    def __init__(self, opener: Callable[[str], Any], *, workers: int = WORKERS, keep_seconds: float = 600.0) -> None:
        self._opener = opener
        self._workers = workers
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="snowberg-ui")
        self._lock = threading.Lock()
        self._keep = keep_seconds  # an open catalog is kept this long (a changed connection is seen after it)
        self._catalogs: dict[str, tuple[float, Any]] = {}
        self._stuck: dict[str, Future[Any]] = {}  # catalog name -> the call that has not returned

    def _start(self, fn: Callable[[], T], started: list[float]) -> T:
        started.append(time.monotonic())
        return fn()

    def _submit(self, key: str, catalog: str, fn: Callable[[], Any]) -> _Timed:
        started: list[float] = []
        fut = self._executor.submit(self._start, fn, started)
        return _Timed(key=key, catalog=catalog, future=fut, started=started, submitted=time.monotonic())

    def _stuck_on(self, catalog: str) -> bool:
        with self._lock:
            fut = self._stuck.get(catalog)
            if fut is not None and fut.done():
                del self._stuck[catalog]
                return False
            return fut is not None

    def _mark_stuck(self, catalog: str, fut: Future[Any]) -> None:
        with self._lock:
            self._stuck.setdefault(catalog, fut)

    def forget(self) -> None:
        """Drop the open catalogs (they are opened again on the next read)."""
        with self._lock:
            self._catalogs.clear()

    def _opened(self, name: str) -> Any | None:
        with self._lock:
            kept = self._catalogs.get(name)
            if kept is None or time.monotonic() - kept[0] > self._keep:
                return None
            return kept[1]

    def _open(self, name: str) -> Any:
        cat = self._opener(name)
        with self._lock:
            self._catalogs[name] = (time.monotonic(), cat)
        return cat

    def _unreachable(self, catalog: str, timeout: float) -> CatalogUnreachable:
        return CatalogUnreachable(f"catalog {catalog!r} did not answer within {timeout:g} s")

    def _run(self, jobs: list[tuple[str, str, Callable[[], Any]]], timeout: float, results: dict[str, Any]) -> None:
        """Run ``(key, catalog, fn)`` jobs, at most half the threads per catalog; fill ``results``.

        A catalog is given up (all its jobs: ``CatalogUnreachable``) when one of its calls has run for
        ``timeout`` seconds with no other call of that catalog finishing meanwhile: a catalog that keeps
        answering is slow, not unreachable (on a busy machine many reads share the interpreter). A
        stuck catalog holds at most half the threads, so the other catalogs' reads always have some;
        a job that finds no free thread within ``timeout`` (threads held by calls stuck in earlier
        views) is reported as not read.
        """
        cap = max(1, self._workers // 2)
        queues: dict[str, deque[tuple[str, Callable[[], Any]]]] = {}
        for key, catalog, fn in jobs:
            queues.setdefault(catalog, deque()).append((key, fn))
        running: list[_Timed] = []
        progress: dict[str, float] = {}  # catalog -> when a call of it last finished
        given_up: set[str] = set()
        while running or any(queues.values()):
            now = time.monotonic()
            for catalog, queue in queues.items():
                busy = sum(1 for j in running if j.catalog == catalog)
                while queue and busy < cap and catalog not in given_up:
                    key, fn = queue.popleft()
                    running.append(self._submit(key, catalog, fn))
                    busy += 1
            still: list[_Timed] = []
            for job in running:
                if job.future.done():
                    exc = job.future.exception()
                    results[job.key] = exc if exc is not None else job.future.result()
                    progress[job.catalog] = now
                elif job.catalog in given_up:
                    job.future.cancel()  # queued: never runs; running: abandoned to its thread
                    results[job.key] = self._unreachable(job.catalog, timeout)
                elif job.started and now - max(job.started[0], progress.get(job.catalog, 0.0)) > timeout:
                    log.warning(
                        "snowberg page: catalog %r did not answer %s within %g s", job.catalog, job.key, timeout
                    )
                    self._mark_stuck(job.catalog, job.future)
                    given_up.add(job.catalog)
                    results[job.key] = self._unreachable(job.catalog, timeout)
                elif not job.started and now - job.submitted > timeout and job.future.cancel():
                    results[job.key] = CatalogUnreachable(
                        f"not read: no free thread within {timeout:g} s (calls to stuck catalogs hold them)"
                    )
                else:
                    still.append(job)
            running = still
            for catalog in given_up:
                while queues[catalog]:
                    results[queues[catalog].popleft()[0]] = self._unreachable(catalog, timeout)
            if running:
                wait([j.future for j in running], timeout=0.1, return_when=FIRST_COMPLETED)

    def read(
        self, jobs: Iterable[tuple[str, str, Callable[[Any], T]]], *, timeout: float
    ) -> dict[str, T | BaseException]:
        """Run ``fn(catalog)`` for each ``(key, catalog name, fn)``: the result or the exception per key.

        First every catalog not open yet is opened (one call per name, in parallel), then the jobs of
        the catalogs that opened run in parallel. A call running for longer than ``timeout`` seconds
        makes its catalog unreachable: its jobs get ``CatalogUnreachable`` (so a catalog that never
        answers costs one timeout, once: on opening, or on its first table reads).
        """
        todo = list(jobs)
        opened: dict[str, Any] = {}
        for name in dict.fromkeys(c for _, c, _ in todo):
            if self._stuck_on(name):
                opened[name] = CatalogUnreachable(f"catalog {name!r} is still not answering an earlier request")
            elif (cat := self._opened(name)) is not None:
                opened[name] = cat
        self._run(
            [(n, n, functools.partial(self._open, n)) for n in dict.fromkeys(c for _, c, _ in todo) if n not in opened],
            timeout,
            opened,
        )
        results: dict[str, T | BaseException] = {}
        reads: list[tuple[str, str, Callable[[], Any]]] = []
        for key, catalog, fn in todo:
            cat = opened[catalog]
            if isinstance(cat, BaseException):
                results[key] = cat
            else:
                reads.append((key, catalog, functools.partial(fn, cat)))
        self._run(reads, timeout, results)
        return results
