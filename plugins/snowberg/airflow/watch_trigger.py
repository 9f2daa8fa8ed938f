"""The trigger behind ``watch:``: an Asset watcher that fires when a table's Snowflake source changes.

Airflow schedules a watched table's load DAG on its source Asset (``dag_factory.watched_source_asset``),
whose ``AssetWatcher`` runs this trigger in the triggerer; each event it yields is an asset event, and
the scheduler turns the events queued for the DAG into one run (Airflow's ``AssetDagRunQueue``: many
events while a run is active give one run after it).

All watched tables of one Snowflake connection and poll interval share one poll: their triggers
return the same ``shared_stream_key()``, so the triggerer (``airflow.triggers.shared_stream``) runs one
``open_shared_stream`` loop for them and hands each poll's outcome to every trigger's
``filter_shared_stream``. The loop asks Snowflake about every table whose trigger is subscribed
(``_SUBSCRIBED``: the triggers of this process register themselves there while they run) and does its
work, statements and Variables, in a worker thread (``asyncio.to_thread``) through ``WatchLoop``
(``snowberg.airflow.watch_loop``): nothing waits on the triggerer's event loop.

This module is imported when DAG files are parsed (the watcher is built there): it imports no more
than Airflow's trigger base; the rest is imported by the loop, in the triggerer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Hashable
from contextlib import aclosing
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

if TYPE_CHECKING:
    from snowberg.airflow.watch_loop import WatchLoop, WatchTarget

log = logging.getLogger(__name__)

STREAM_KEY = "snowberg-watch"

# The watched tables of this process's running triggers, by shared stream key and DAG id.
_SUBSCRIBED: dict[Hashable, dict[str, WatchTarget]] = {}


def stream_key(snowflake_conn_id: str, poll_interval: float) -> tuple[str, str, float]:
    """The shared stream of a connection and a poll interval: one poll for all its watched tables."""
    return (STREAM_KEY, snowflake_conn_id, float(poll_interval))


class SourceChangeTrigger(BaseEventTrigger):
    """Fire when the Snowflake source of a watched table changed and no run covers the change.

    :param dag_id: the table's load DAG (the key of the table in the shared poll).
    :param table: the table's config name (logs, alerts).
    :param target: the Iceberg table (its run record ``snowberg__<ns>__<table>__watch`` and poll record entry).
    :param kind: ``table`` (a table or view: its change token) or ``stream`` (a stream: whether it has data).
    :param source: ``database.schema.name`` of the table, view or stream.
    :param snowflake_conn_id: the Airflow connection the poll reads through.
    :param poll_interval: seconds between polls.
    :param alerts: the table's ``alerts`` section (a dict), for ``watch_failure`` alerts.
    :param freshness_sla: the table's ``freshness_sla`` in seconds: the poll proves a quiet table current at
        least four times within it (``WatchLoop``).
    """

    def __init__(
        self,
        *,
        dag_id: str,
        table: str,
        target: str,
        kind: str,
        source: str,
        snowflake_conn_id: str,
        poll_interval: float,
        alerts: dict[str, Any] | None = None,
        freshness_sla: float | None = None,
    ) -> None:
        super().__init__()
        self.dag_id = dag_id
        self.table = table
        self.target = target
        self.kind = kind
        self.source = source
        self.snowflake_conn_id = snowflake_conn_id
        self.poll_interval = float(poll_interval)
        self.alerts = alerts
        self.freshness_sla = freshness_sla

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "dag_id": self.dag_id,
                "table": self.table,
                "target": self.target,
                "kind": self.kind,
                "source": self.source,
                "snowflake_conn_id": self.snowflake_conn_id,
                "poll_interval": self.poll_interval,
                "alerts": self.alerts,
                "freshness_sla": self.freshness_sla,
            },
        )

    def __repr__(self) -> str:
        # Short: Airflow hashes a DAG through the repr of its timetable, which holds this trigger (through the
        # Asset's watcher), on every task it wires: the default repr formats every argument, the alerts too.
        return f"<SourceChangeTrigger {self.dag_id} on {self.source} via {self.snowflake_conn_id}>"

    def shared_stream_key(self) -> Hashable:
        return stream_key(self.snowflake_conn_id, self.poll_interval)

    def watch_target(self) -> WatchTarget:
        from snowberg.airflow.watch_loop import WatchTarget
        from snowberg.snowflake.change_signal import SignalKind

        return WatchTarget(
            dag_id=self.dag_id,
            table=self.table,
            target=self.target,
            kind=SignalKind(self.kind),
            source=self.source,
            alerts=self.alerts,
            freshness_sla=timedelta(seconds=self.freshness_sla) if self.freshness_sla is not None else None,
        )

    @classmethod
    def make_loop(cls, kwargs: dict[str, Any]) -> WatchLoop:
        """The loop of one shared stream, on the triggerer's Airflow Variables and the connection's hook."""
        from snowberg.airflow.alerts import send_watch_failure
        from snowberg.airflow.watch_loop import WatchLoop
        from snowberg.iceberg.state import AirflowVariables

        conn_id = str(kwargs["snowflake_conn_id"])
        return WatchLoop(
            snowflake_conn_id=conn_id,
            poll_interval=timedelta(seconds=float(kwargs["poll_interval"])),
            variables=AirflowVariables(),
            connect=lambda: watch_connection(conn_id),
            alert=send_watch_failure,
        )

    @classmethod
    async def open_shared_stream(cls, kwargs: dict[str, Any]) -> AsyncGenerator[Any, None]:
        """Poll every ``poll_interval`` for the subscribed tables of this key; yield each poll's decisions.

        Yields forever (a shared stream that ends fails its subscribers): a poll that raises is logged
        and the next one runs on time.
        """
        key = stream_key(str(kwargs["snowflake_conn_id"]), float(kwargs["poll_interval"]))
        interval = float(kwargs["poll_interval"])
        loop = cls.make_loop(kwargs)
        try:
            while True:
                started = time.monotonic()
                targets = list(_SUBSCRIBED.get(key, {}).values())
                decisions: dict[str, Any] = {}
                if targets:
                    try:
                        decisions = await asyncio.to_thread(loop.poll, targets)
                    except Exception:
                        log.exception("watch poll of connection %s failed; polling again in %ss", key[1], interval)
                yield {"decisions": decisions}
                await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
        finally:
            await asyncio.to_thread(loop.close)

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        """Subscribe this table to the shared poll while it runs; yield its events."""
        key = self.shared_stream_key()
        _SUBSCRIBED.setdefault(key, {})[self.dag_id] = self.watch_target()
        try:
            async for polled in shared_stream:
                decision = polled["decisions"].get(self.dag_id)
                if decision is not None and decision.fire:
                    yield TriggerEvent(decision.payload)
        finally:
            subscribed = _SUBSCRIBED.get(key, {})
            subscribed.pop(self.dag_id, None)
            if not subscribed:
                _SUBSCRIBED.pop(key, None)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Without the triggerer's shared streams: this trigger's own poll (the same code, one table)."""
        async with aclosing(type(self).open_shared_stream(self.serialize()[1])) as polls:
            async for event in self.filter_shared_stream(polls):
                yield event


def watch_connection(snowflake_conn_id: str) -> Any:
    """A Snowflake connection for the poll, tagged ``snowberg:watch`` (its statements are easy to find in history)."""
    from snowflake import connector

    from snowberg.snowflake.hook import snowflake_hook

    params = snowflake_hook(snowflake_conn_id).connection_parameters()
    params["session_parameters"] = {**params.get("session_parameters", {}), "QUERY_TAG": "snowberg:watch"}
    return connector.connect(**params)
