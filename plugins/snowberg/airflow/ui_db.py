"""Batched metadata-database reads for the UI page: a fixed number of queries, whatever the table count.

One query each for: the latest run of every DAG, the task instances of the runs the page shows, the
committing runs, the check results (XCom), and snowberg's Variables. A page of 500 tables costs the
same five round trips as a page of one.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Where snowberg keeps its Variables (watermark mirror, freshness proof, watch records): read in one query.
VARIABLE_PREFIX = "snowberg__"


@dataclass(frozen=True, kw_only=True)
class RunRow:
    dag_id: str
    run_id: str
    state: str | None
    start_date: datetime | None
    end_date: datetime | None


@dataclass(frozen=True, kw_only=True)
class TaskRow:
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    state: str | None
    start_date: datetime | None
    end_date: datetime | None
    duration: float | None
    try_number: int


def _state(value: Any) -> str | None:
    return None if value is None else str(getattr(value, "value", value))


def _run_row(r: Any) -> RunRow:
    return RunRow(dag_id=r.dag_id, run_id=r.run_id, state=_state(r.state), start_date=r.start_date, end_date=r.end_date)


def latest_runs(session: Any, dag_ids: Collection[str]) -> dict[str, RunRow]:
    """The latest run of each DAG, whatever its state (the newest created: the highest id)."""
    from airflow.models import DagRun
    from sqlalchemy import func, select

    if not dag_ids:
        return {}
    newest = (
        select(func.max(DagRun.id).label("id")).where(DagRun.dag_id.in_(list(dag_ids))).group_by(DagRun.dag_id)
    ).subquery()
    cols = (DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.start_date, DagRun.end_date)
    rows = session.execute(select(*cols).join(newest, DagRun.id == newest.c.id)).all()
    return {r.dag_id: _run_row(r) for r in rows}


def runs(session: Any, pairs: Collection[tuple[str, str]]) -> dict[tuple[str, str], RunRow]:
    """The runs named by ``(dag_id, run_id)``."""
    from airflow.models import DagRun
    from sqlalchemy import select

    if not pairs:
        return {}
    dags, ids = {d for d, _ in pairs}, {r for _, r in pairs}
    cols = (DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.start_date, DagRun.end_date)
    rows = session.execute(select(*cols).where(DagRun.dag_id.in_(dags), DagRun.run_id.in_(ids))).all()
    return {(r.dag_id, r.run_id): _run_row(r) for r in rows if (r.dag_id, r.run_id) in pairs}


def task_rows(session: Any, pairs: Collection[tuple[str, str]]) -> dict[tuple[str, str], list[TaskRow]]:
    """The task instances of the runs named by ``(dag_id, run_id)``, per run, by task id."""
    from airflow.models import TaskInstance as TI
    from sqlalchemy import select

    if not pairs:
        return {}
    dags, ids = {d for d, _ in pairs}, {r for _, r in pairs}
    cols = (TI.dag_id, TI.run_id, TI.task_id, TI.map_index, TI.state, TI.start_date, TI.end_date, TI.duration)
    query = select(*cols, TI.try_number).where(TI.dag_id.in_(dags), TI.run_id.in_(ids)).order_by(TI.task_id)
    out: dict[tuple[str, str], list[TaskRow]] = {}
    for r in session.execute(query).all():
        if (r.dag_id, r.run_id) in pairs:
            out.setdefault((r.dag_id, r.run_id), []).append(
                TaskRow(
                    dag_id=r.dag_id,
                    run_id=r.run_id,
                    task_id=r.task_id,
                    map_index=r.map_index,
                    state=_state(r.state),
                    start_date=r.start_date,
                    end_date=r.end_date,
                    duration=r.duration,
                    try_number=r.try_number or 0,
                )
            )
    return out


@dataclass(frozen=True)
class _Stored:
    value: Any  # what ``XComModel.deserialize_value`` reads


def xcom_values(
    session: Any, pairs: Collection[tuple[str, str]], keys: Iterable[str]
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """XCom values of the runs named by ``(dag_id, run_id)``: per (dag, run, task), per key (unmapped tasks)."""
    from airflow.models.xcom import XComModel as X
    from sqlalchemy import select

    if not pairs:
        return {}
    dags, ids = {d for d, _ in pairs}, {r for _, r in pairs}
    query = select(X.dag_id, X.run_id, X.task_id, X.key, X.value).where(
        X.dag_id.in_(dags), X.run_id.in_(ids), X.key.in_(list(keys)), X.map_index == -1
    )
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in session.execute(query).all():
        if (r.dag_id, r.run_id) in pairs:
            out.setdefault((r.dag_id, r.run_id, r.task_id), {})[r.key] = X.deserialize_value(_Stored(r.value))
    return out


def snowberg_variables(session: Any) -> dict[str, str]:
    """Every snowberg Variable in the metadata database, decrypted (one query)."""
    from airflow.models import Variable
    from sqlalchemy import select

    rows = session.scalars(select(Variable).where(Variable.key.startswith(VARIABLE_PREFIX, autoescape=True))).all()
    return {v.key: v.val for v in rows}


class PrefetchedVariables:
    """A read-only ``VariableStore`` over Variables read in one query (``snowberg_variables``).

    Airflow looks a Variable up in the environment (``AIRFLOW_VAR_<KEY>``) before the metadata
    database; so does this. A custom secrets backend is not consulted: the page reads what snowberg's
    runs write, which is the metadata database.
    """

    def __init__(self, values: dict[str, str]) -> None:
        self._values = values

    def get(self, key: str) -> str | None:
        env = os.environ.get(f"AIRFLOW_VAR_{key.upper()}")
        return env if env is not None else self._values.get(key)

    def set(self, key: str, value: str) -> None:
        raise TypeError("the UI page does not write Variables")
