"""Snapshot freshness from Iceberg metadata alone: an operator and its deferrable trigger."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from snowberg.airflow.metrics import emit_freshness
from snowberg.airflow.operators.check_base import SnowbergCheckFailed, SnowbergCheckOperator, check_duration
from snowberg.airflow.operators.lake_access import names_lake_connection
from snowberg.config.check_settings import FreshnessMeasure
from snowberg.core.durations import format_duration

log = logging.getLogger(__name__)


def current_proof(table: str, measure: str, watch_conn_id: str | None = None) -> Any:
    """The proof of currency ``measure`` uses, from the task's Airflow Variables (``freshness_proof``)."""
    from snowberg.iceberg.state import AirflowVariables
    from snowberg.iceberg.watch_state import freshness_proof

    return freshness_proof(table, measure, AirflowVariables(), watch_conn_id=watch_conn_id)


class FreshnessTrigger(BaseTrigger):
    """Poll a table's metadata until it is fresh or ``deadline`` passes (runs in the triggerer)."""

    def __init__(
        self,
        *,
        catalog: str,
        table: str,
        sla_seconds: float | None,
        max_watermark_lag_seconds: float | None,
        deadline: str,
        poll_interval: float = 300.0,
        cursor_timezone: str = "UTC",
        measure: str = FreshnessMeasure.LAST_DATA.value,
        watch_conn_id: str | None = None,
    ) -> None:
        super().__init__()
        self.watch_conn_id = watch_conn_id
        self.cursor_timezone = cursor_timezone
        self.measure = measure
        self.catalog = catalog
        self.table = table
        self.sla_seconds = sla_seconds
        self.max_watermark_lag_seconds = max_watermark_lag_seconds
        self.deadline = deadline
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "catalog": self.catalog,
                "table": self.table,
                "sla_seconds": self.sla_seconds,
                "max_watermark_lag_seconds": self.max_watermark_lag_seconds,
                "deadline": self.deadline,
                "poll_interval": self.poll_interval,
                "cursor_timezone": self.cursor_timezone,
                "measure": self.measure,
                "watch_conn_id": self.watch_conn_id,
            },
        )

    def check(self) -> dict[str, Any]:
        from snowberg.checks import freshness
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.iceberg.tables import find_table

        table = find_table(open_catalog(self.catalog), self.table)
        return freshness.evaluate(
            table,
            name=self.table,
            sla=timedelta(seconds=self.sla_seconds) if self.sla_seconds is not None else None,
            max_watermark_lag=timedelta(seconds=self.max_watermark_lag_seconds)
            if self.max_watermark_lag_seconds is not None
            else None,
            cursor_timezone=self.cursor_timezone,
            measure=self.measure,
            proof=current_proof(self.table, self.measure, self.watch_conn_id),
        ).to_dict()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = datetime.fromisoformat(self.deadline)
        polls = 0
        while True:
            polls += 1
            try:
                result = await asyncio.to_thread(self.check)
            except Exception as exc:  # noqa: BLE001 - report, let the task decide
                yield TriggerEvent({"status": "error", "error": f"{type(exc).__name__}: {exc}", "polls": polls})
                return
            if result["fresh"]:
                yield TriggerEvent({"status": "fresh", "result": result, "polls": polls})
                return
            remaining = (deadline - datetime.now(UTC)).total_seconds()
            if remaining <= 0:
                yield TriggerEvent({"status": "deadline", "result": result, "polls": polls})
                return
            self.log.info(
                "%s is not fresh yet (%s); next look in %.0fs",
                self.table,
                "; ".join(result["reasons"]),
                min(self.poll_interval, remaining),
            )
            await asyncio.sleep(min(self.poll_interval, remaining))


class SnapshotFreshnessOperator(SnowbergCheckOperator):
    """Fail when the pipeline has not proven an Iceberg table current within an SLA.

    Reads only the table metadata: the snapshot log (hours since the last
    data-changing snapshot) and the watermark snowberg committed in the
    snapshot summary (watermark lag). No manifest or data file is opened.
    With ``measure="proven_current"`` (the default) it also reads the
    Airflow Variable in which runs that found nothing new record that they
    proved the lake current (``snowberg.iceberg.current``): a quiet source
    stays fresh, a load DAG that stops running goes stale.
    ``measure="last_data"`` ages from the last data snapshot alone.
    Logs a report, returns the measures (XCom), and raises
    ``SnowbergCheckFailed`` when the table is stale, has no snapshot or does
    not exist.

    Schedule it on its own (e.g. hourly) as well as after each load, so a
    table that receives nothing at all still alerts.

    With ``deferrable=True`` and ``wait_timeout``, a stale table is not
    failed at once: the task defers to ``FreshnessTrigger``, which polls the
    metadata every ``poll_interval`` until the table is fresh or the wait
    runs out (then it fails as above).

    .. code-block:: python

        SnapshotFreshnessOperator(
            task_id="check_freshness",
            table="lake.orders",  # Iceberg namespace.table
            catalog="lake",  # pyiceberg catalog name
            freshness_sla="2h",  # max age of the newest data snapshot
            max_watermark_lag="6h",  # optional: now - committed watermark
            table_name="orders",  # the name alerts show
        )

    :param table: Iceberg identifier ``namespace.table``. Templated.
    :param catalog: pyiceberg catalog name (``PYICEBERG_CATALOG__<NAME>__*``). Templated.
    :param freshness_sla: longest acceptable age ("90m", "2h", "PT2H", seconds) of the last proof that the
        lake is current, or of the last data snapshot (``measure``). Templated. (Not ``sla``: that name is
        reserved by ``BaseOperator``.)
    :param measure: ``proven_current`` (a commit or a run that found nothing new) or ``last_data``.
    :param max_watermark_lag: longest acceptable ``now - watermark`` (timestamp/date cursors). Templated.
    :param table_name: label for reports and alerts (default: ``table``). Templated.
    :param cursor_timezone: the zone whose wall clock wrote a TIMESTAMP_NTZ or DATE watermark (the table's
        ``cursor.timezone``; default UTC), so the watermark lag is measured on the writer's clock.
    :param deferrable: wait in the triggerer for a fresh snapshot instead of failing at once.
    :param wait_timeout: how long to wait when deferrable (e.g. "1h"). Templated.
    :param poll_interval: how often the trigger reads the metadata (default "5m"). Templated.
    :param watch_conn_id: for a watched table (``watch``), its Snowflake connection: the triggerer's polls
        that found the source unchanged prove the lake current too (``snowberg.iceberg.watch_state``).
    """

    template_fields: Sequence[str] = (
        "table",
        "catalog",
        "freshness_sla",
        "max_watermark_lag",
        "table_name",
        "wait_timeout",
        "poll_interval",
    )
    snowberg_check = "freshness"

    def __init__(
        self,
        *,
        table: str,
        catalog: str = "lake",
        freshness_sla: str | int | float | timedelta | None = None,
        max_watermark_lag: str | int | float | timedelta | None = None,
        table_name: str | None = None,
        deferrable: bool = False,
        wait_timeout: str | int | float | timedelta | None = None,
        poll_interval: str | int | float | timedelta = "5m",
        cursor_timezone: str = "UTC",
        measure: FreshnessMeasure | str = FreshnessMeasure.PROVEN_CURRENT,
        watch_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.watch_conn_id = watch_conn_id
        self.cursor_timezone = cursor_timezone
        self.measure = FreshnessMeasure(measure).value
        self.table = table
        self.catalog = catalog
        self.freshness_sla = freshness_sla
        self.max_watermark_lag = max_watermark_lag
        self.table_name = table_name
        self.deferrable = deferrable
        self.wait_timeout = wait_timeout
        self.poll_interval = poll_interval
        if deferrable and wait_timeout is None:
            raise ValueError("deferrable=True needs wait_timeout (how long to wait for a fresh snapshot)")

    def _limits(self) -> tuple[timedelta | None, timedelta | None]:
        return check_duration(self.freshness_sla, "freshness_sla"), check_duration(
            self.max_watermark_lag, "max_watermark_lag"
        )

    @names_lake_connection("catalog")
    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.checks import freshness

        sla, max_lag = self._limits()
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.iceberg.tables import find_table

        table = find_table(open_catalog(self.catalog), self.table)
        result = freshness.evaluate(
            table,
            name=self.table,
            sla=sla,
            max_watermark_lag=max_lag,
            cursor_timezone=self.cursor_timezone,
            measure=self.measure,
            proof=current_proof(self.table, self.measure, self.watch_conn_id),
        )
        emit_freshness(self.table_name or self.table, result.to_dict())
        self.log.info("%s", freshness.render(result))
        if result.fresh:
            return result.to_dict()
        wait = check_duration(self.wait_timeout, "wait_timeout")
        if self.deferrable and wait is not None and wait.total_seconds() > 0 and result.exists:
            deadline = datetime.now(UTC) + wait
            poll = check_duration(self.poll_interval, "poll_interval") or timedelta(minutes=5)
            self.log.info(
                "%s is stale; waiting up to %s (until %s) for a fresh snapshot",
                self.table,
                format_duration(wait),
                deadline.isoformat(timespec="seconds"),
            )
            self.defer(
                trigger=FreshnessTrigger(
                    catalog=self.catalog,
                    table=self.table,
                    sla_seconds=sla.total_seconds() if sla is not None else None,
                    max_watermark_lag_seconds=max_lag.total_seconds() if max_lag is not None else None,
                    deadline=deadline.isoformat(),
                    poll_interval=max(poll.total_seconds(), 1.0),
                    cursor_timezone=self.cursor_timezone,
                    measure=self.measure,
                    watch_conn_id=self.watch_conn_id,
                ),
                method_name="execute_complete",
                timeout=wait + poll + timedelta(minutes=5),
            )
        raise self._stale(context, result)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        from snowberg.checks import freshness

        if event.get("status") == "error":
            raise RuntimeError(f"freshness trigger for {self.table} failed: {event.get('error')}")
        result = freshness.Freshness.from_dict(event["result"])
        emit_freshness(self.table_name or self.table, result.to_dict())
        self.log.info("after %s poll(s) of the metadata:\n%s", event.get("polls", "?"), freshness.render(result))
        if result.fresh:
            return result.to_dict()
        raise self._stale(context, result)

    def _stale(self, context: Any, result: Any) -> SnowbergCheckFailed:
        label = self.table_name or self.table
        return self._fail(
            context,
            f"{label} is stale: " + "; ".join(result.reasons),
            table=self.table,
            observed=result.observed,
            expected=result.expected,
            details=result.to_dict(),
        )
