"""Ending an idle run: the run's first task found nothing to do, so nothing after it starts.

A scheduled run with nothing new (a watermark plan with an empty window, a
stream without change data) ends in the task that found it: that task
records that the run proved the lake current (``snowberg.iceberg.current``,
what the freshness check measures), succeeds and every task after it is marked *skipped* through Airflow's own
``SkipMixin.skip``, as ``ShortCircuitOperator`` does, so no further task
process starts and the UI shows what happened. Teardown tasks still run.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from snowberg.iceberg.current import CurrentProof


class SkippingOperator(Protocol):
    """A ``BaseOperator`` (its ``log`` and relatives) that mixes in ``SkipMixin`` (its ``skip``)."""

    @property
    def log(self) -> Any: ...

    def get_flat_relatives(self, upstream: bool = False) -> Any: ...

    def skip(self, ti: Any, tasks: Any) -> None: ...


def skip_downstream(
    operator: SkippingOperator,
    context: Any,
    *,
    result: dict[str, Any],
    why: str,
    keep: Collection[str] = (),
) -> None:
    """Push ``result`` as the XCom, log ``why`` and the tasks skipped, skip every non-teardown task after it.

    ``keep``: task ids left to run (their trigger rule must let them run after skipped upstream tasks).
    """
    downstream = [
        t
        for t in operator.get_flat_relatives(upstream=False)
        if not getattr(t, "is_teardown", False) and t.task_id not in keep
    ]
    if not downstream:
        return
    ti = context["ti"]
    # DownstreamTasksSkipped (raised by skip) ends execute() before Airflow would push the return value.
    ti.xcom_push(key="return_value", value=result)
    operator.log.info("%s; skipping %s", why, sorted(t.task_id for t in downstream))
    operator.skip(ti=ti, tasks=downstream)


def end_idle_run(
    operator: SkippingOperator, context: Any, *, target: str, proof: CurrentProof, result: dict[str, Any], why: str
) -> None:
    """Record ``proof`` for Iceberg table ``target``, then ``skip_downstream``."""
    from snowberg.iceberg.current import record_proof
    from snowberg.iceberg.state import AirflowVariables

    record_proof(target, proof, AirflowVariables())
    skip_downstream(operator, context, result=result, why=why)
