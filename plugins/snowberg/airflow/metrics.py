"""snowberg's metrics, sent through Airflow's own metrics client.

Airflow decides where metrics go (``[metrics] statsd_on`` for StatsD,
``otel_on`` for OpenTelemetry, ``statsd_datadog_enabled`` for DogStatsD) and
applies its ``metrics_allow_list``/``block_list``; snowberg only names the
metrics. Each is sent twice, the way Airflow sends its own: once with a
``table`` tag (OpenTelemetry, DogStatsD and InfluxDB-style StatsD keep tags)
and once with the table as the last part of the name (plain StatsD drops
tags), e.g. ``snowberg.load.rows`` with ``table=orders`` and
``snowberg.load.rows.orders``.

=================================  ======  ====================================================
name                               kind    value
=================================  ======  ====================================================
``snowberg.load.rows``             count   rows committed by a load (0 when nothing was new)
``snowberg.load.bytes``            count   bytes the load fetched from Snowflake (Arrow, in memory)
``snowberg.load.duration``         timer   seconds from the start of extract to the commit
``snowberg.load.volume_diff``      gauge   rows the plan counted in the window minus rows committed
``snowberg.freshness.lag``         gauge   seconds since the table's last write (snapshot metadata)
``snowberg.freshness.watermark_lag``  gauge  seconds between now and the committed watermark
``snowberg.sync.rows``             count   rows a lake → Snowflake sync wrote
``snowberg.sync.duration``         timer   seconds the sync took
=================================  ======  ====================================================

Metrics never fail a task: a broken metrics backend is logged and ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from enum import StrEnum
from typing import Any

from snowberg.airflow.lineage import remember_result

log = logging.getLogger(__name__)

PREFIX = "snowberg"


class Metric(StrEnum):
    """Every metric snowberg sends (names without the table suffix)."""

    LOAD_ROWS = "snowberg.load.rows"
    LOAD_BYTES = "snowberg.load.bytes"
    LOAD_DURATION = "snowberg.load.duration"
    LOAD_VOLUME_DIFF = "snowberg.load.volume_diff"
    FRESHNESS_LAG = "snowberg.freshness.lag"
    FRESHNESS_WATERMARK_LAG = "snowberg.freshness.watermark_lag"
    SYNC_ROWS = "snowberg.sync.rows"
    SYNC_DURATION = "snowberg.sync.duration"


def _stats() -> Any:
    from airflow.sdk.observability import stats

    return stats


def metric_suffix(table: str) -> str:
    """The table as a metric name part: letters, digits, '_' and '-' (a '.' would add a level)."""
    from airflow.sdk.observability.stats import normalize_name_for_stats

    return normalize_name_for_stats(table.replace(".", "__"), log_warning=False)


def _send(kind: str, metric: Metric, table: str, value: Any) -> None:
    try:
        stats = _stats()
        tags = {"table": table}
        for name, t in ((str(metric), tags), (f"{metric}.{metric_suffix(table)}", None)):
            if kind == "incr":
                stats.incr(name, count=int(value), tags=t)
            elif kind == "gauge":
                stats.gauge(name, value, tags=t)
            else:
                stats.timing(name, timedelta(seconds=float(value)), tags=t)
    except Exception:  # noqa: BLE001 - metrics are never worth failing a load for
        log.warning("could not send metric %s for %s", metric, table, exc_info=True)


def emit_load(table: str, result: Mapping[str, Any]) -> None:
    """Metrics of one load (``LoadResult`` as a dict): rows, bytes, duration, planned − committed."""
    rows = int(result.get("rows", result.get("rows_appended")) or 0)  # stream loads count rows_appended
    _send("incr", Metric.LOAD_ROWS, table, rows)
    _send("incr", Metric.LOAD_BYTES, table, int(result.get("bytes") or 0))
    _send("timing", Metric.LOAD_DURATION, table, float(result.get("seconds") or 0.0))
    planned = (result.get("window") or {}).get("rows_in_window")
    if result.get("status") == "committed" and planned is not None:
        _send("gauge", Metric.LOAD_VOLUME_DIFF, table, int(planned) - rows)


def emit_freshness(table: str, result: Mapping[str, Any]) -> None:
    """Freshness lag of a check (``Freshness`` as a dict), in seconds."""
    hours = result.get("hours_since_last_write")
    if hours is not None:
        _send("gauge", Metric.FRESHNESS_LAG, table, float(hours) * 3600)
    wm_hours = result.get("watermark_lag_hours")
    if wm_hours is not None:
        _send("gauge", Metric.FRESHNESS_WATERMARK_LAG, table, float(wm_hours) * 3600)


def emit_sync(name: str, result: Mapping[str, Any]) -> None:
    _send("incr", Metric.SYNC_ROWS, name, int(result.get("rows") or 0))
    _send("timing", Metric.SYNC_DURATION, name, float(result.get("seconds") or 0.0))


def observed_load(operator: Any, table: str, result: dict[str, Any]) -> dict[str, Any]:
    """What a loading operator returns: metrics sent now, the result kept for its lineage; returned unchanged."""
    emit_load(table, result)
    return remember_result(operator, result)  # type: ignore[no-any-return]


def observed_sync(operator: Any, name: str, result: dict[str, Any]) -> dict[str, Any]:
    emit_sync(name, result)
    return remember_result(operator, result)  # type: ignore[no-any-return]


__all__ = ["Metric", "emit_freshness", "emit_load", "emit_sync", "metric_suffix", "observed_load", "observed_sync"]
