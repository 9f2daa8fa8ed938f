"""Which DAG a process parses the DAG files for: every DAG (the dag-processor) or one (a task).

Airflow parses a DAG file again in every task process, with the task's DAG id
in ``airflow.sdk.get_parsing_context()``. The DAG builders read it here and
build only that DAG's table or sync, so a task's cost does not grow with the
number of configured tables (docs/performance.md).
"""

from __future__ import annotations


def parsing_dag_id() -> str | None:
    """The DAG id a task process parses the file for; None in the dag-processor and outside Airflow."""
    from airflow.sdk import get_parsing_context

    return get_parsing_context().dag_id
