"""Attempt ids: which attempt of a DAG run wrote a commit or staged files.

A task retry keeps its run's plan, and with it the run id its commit is
found by: a retried load that already committed appends nothing. Clearing a
whole DAG run (or re-running a backfill with "reprocess", which clears the
same run id) must re-plan and reload, so the run's writes are named by an
attempt id: the DAG run id, plus ``#clear<n>`` once Airflow cleared the run
``n`` times (``DagRun.clear_number``, which only grows). An attempt with a
lower number than another of the same DAG run can never run again: clearing
the run gave every one of its tasks the new attempt.
"""

from __future__ import annotations

import re

_CLEARED = re.compile(r"(.*)#clear([0-9]+)", re.DOTALL)


def attempt_id(run_id: str, clear_number: int) -> str:
    """The attempt id of DAG run ``run_id`` after ``clear_number`` clears."""
    return run_id if clear_number == 0 else f"{run_id}#clear{clear_number}"


def split_attempt(attempt: str) -> tuple[str, int]:
    """``(DAG run id, clear number)`` of an attempt id: ``scheduled__x#clear2`` → ``("scheduled__x", 2)``."""
    m = _CLEARED.fullmatch(attempt)
    return (m.group(1), int(m.group(2))) if m else (attempt, 0)
