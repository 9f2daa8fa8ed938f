"""Events that library code finds without failing the run (a source schema change).

The load finds a schema change deep inside the write path; the channels that
should hear about it (email, Slack, webhooks) are Airflow notifiers. So that
the lake and load layers never import Airflow, they ``emit`` here and the
Airflow layer subscribes (``snowberg.airflow.alerts`` does when it is
imported, which every snowberg DAG file does). Outside Airflow (the CLI,
library use) nobody listens and the event is only logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

Listener = Callable[..., Any]
"""Called as ``listener(event, table=..., lake_table=..., details=...)``."""

_listeners: list[Listener] = []


def subscribe(listener: Listener) -> None:
    """Receive every event emitted in this process from now on (idempotent)."""
    if listener not in _listeners:
        _listeners.append(listener)


def emit(event: str, *, table: str, lake_table: str | None = None, details: Mapping[str, Any] | None = None) -> None:
    """Hand an event to every listener; a failing listener is logged, never raised (the run goes on)."""
    if not _listeners:
        log.info("snowberg: %s for %s: no listener (not inside an Airflow task)", event, table)
    for listener in list(_listeners):
        try:
            listener(event, table=table, lake_table=lake_table, details=details)
        except Exception:  # noqa: BLE001 - an alert channel must not fail the load
            log.warning("snowberg: could not deliver %s for %s", event, table, exc_info=True)
