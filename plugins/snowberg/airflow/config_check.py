"""What ``snowberg validate`` can only learn from Airflow: schedules it refuses, DAGs that do not build.

The models accept any schedule string; Airflow parses it when the DAG is validated, and the DAG
factory refuses such an entry at parse time (``dag_factory.table_dags``). Here each valid entry's
schedules are checked with the factory's own ``check_schedule`` (so the error names the field),
then its DAGs are built exactly as the DAG processor will build them, in this process: no
connection, catalog or metadata database is touched.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from snowberg.airflow.dag_factory import check_schedule, table_dags
from snowberg.airflow.sync_dags import build_sync_dag
from snowberg.config.table_config import TableConfig
from snowberg.core.identifiers import clip
from snowberg.sync.config import ON_SOURCE_CHANGE, SyncConfig


def _schedule_problems(schedules: list[tuple[str, Any]]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    for fld, schedule in schedules:
        try:
            check_schedule(schedule)
        except Exception as exc:  # noqa: BLE001 - Airflow's own exception types vary by timetable
            out.append((fld, f"Airflow refuses the schedule {clip(schedule)}: {clip(str(exc), 300)[1:-1]}"))
    return out


def _build_problems(build: Callable[[], object]) -> list[tuple[str | None, str]]:
    try:
        build()
    except Exception as exc:  # noqa: BLE001 - whatever stops the DAG file is this entry's finding
        return [(None, f"its DAGs do not build: {type(exc).__name__}: {clip(str(exc), 400)[1:-1]}")]
    return []


def entry_problems(entry: Any) -> list[tuple[str | None, str]]:
    """``(field or None, message)`` for each reason the DAG processor would not build this valid entry's DAGs."""
    if isinstance(entry, TableConfig):
        schedules: list[tuple[str, Any]] = [("schedule", entry.schedule), ("checks_schedule", entry.checks_schedule)]
        if entry.maintenance.enabled:
            schedules.append(("maintenance.schedule", entry.maintenance.schedule))
        return _schedule_problems(schedules) or _build_problems(partial(table_dags, entry))
    if isinstance(entry, SyncConfig):
        schedules = [] if entry.schedule == ON_SOURCE_CHANGE else [("schedule", entry.schedule)]
        return _schedule_problems(schedules) or _build_problems(partial(build_sync_dag, entry))
    return []
