"""snowberg's metrics through Airflow's StatsD client, caught by a local UDP receiver.

The end-to-end test (tests/e2e/test_ecosystem.py) catches the same packets from a real task run.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest


class StatsdReceiver:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]

    def lines(self) -> list[str]:
        out: list[str] = []
        while True:
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                return out
            out.extend(data.decode().splitlines())


@pytest.fixture
def statsd(monkeypatch: pytest.MonkeyPatch) -> Iterator[StatsdReceiver]:
    from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

    rx = StatsdReceiver()
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(rx.port))
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
    stats.initialize(factory=get_stats_factory(), export_legacy_names=False)  # what the task runner does
    try:
        yield rx
    finally:
        stats.initialize(factory=NoStatsLogger, export_legacy_names=False)
        rx.sock.close()


def test_a_load_sends_rows_bytes_duration_and_volume_difference(statsd: StatsdReceiver) -> None:
    from snowberg.airflow.metrics import emit_load

    emit_load(
        "orders",
        {"status": "committed", "rows": 120, "bytes": 4096, "seconds": 1.5, "window": {"rows_in_window": 123}},
    )
    lines = statsd.lines()
    assert "airflow.snowberg.load.rows.orders:120|c" in lines
    assert "airflow.snowberg.load.rows:120|c" in lines
    assert "airflow.snowberg.load.bytes.orders:4096|c" in lines
    assert "airflow.snowberg.load.duration.orders:1500.000000|ms" in lines
    assert "airflow.snowberg.load.volume_diff.orders:3|g" in lines


def test_a_run_with_nothing_new_sends_no_volume_difference(statsd: StatsdReceiver) -> None:
    from snowberg.airflow.metrics import emit_load

    emit_load("orders", {"status": "nothing_new", "rows": 0, "bytes": 0, "seconds": 0.2, "window": {}})
    lines = statsd.lines()
    assert "airflow.snowberg.load.rows.orders:0|c" in lines
    assert not [line for line in lines if "volume_diff" in line]


def test_freshness_lag_in_seconds_and_dotted_names_stay_one_level(statsd: StatsdReceiver) -> None:
    from snowberg.airflow.metrics import emit_freshness

    emit_freshness("shop.orders", {"hours_since_last_write": 0.5, "watermark_lag_hours": 2.0})
    lines = statsd.lines()
    assert "airflow.snowberg.freshness.lag.shop__orders:1800.0|g" in lines
    assert "airflow.snowberg.freshness.watermark_lag.shop__orders:7200.0|g" in lines


def test_a_broken_backend_never_fails_the_task(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    from snowberg.airflow import metrics

    class Broken:
        def incr(self, *a: Any, **k: Any) -> None:
            raise OSError("network down")

    monkeypatch.setattr(metrics, "_stats", lambda: Broken())
    metrics.emit_sync("SALES.ORDERS", {"rows": 3, "seconds": 1})
    assert "could not send metric snowberg.sync.rows" in caplog.text
