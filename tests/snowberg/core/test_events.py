"""Events library code finds without failing the run: every listener hears them, a failing one is only logged."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from snowberg.core import events


@pytest.fixture(autouse=True)
def no_listeners(monkeypatch: pytest.MonkeyPatch) -> None:
    # The listener list is process-wide (the Airflow layer subscribes on import); each test starts without one.
    monkeypatch.setattr(events, "_listeners", [])


def test_every_listener_gets_the_event_with_its_table_and_details() -> None:
    first: list[tuple[Any, ...]] = []
    second: list[tuple[Any, ...]] = []
    events.subscribe(lambda e, **kw: first.append((e, kw)))
    events.subscribe(lambda e, **kw: second.append((e, kw)))
    events.emit("schema_change", table="orders", lake_table="shop.orders", details={"added": ["x long"]})
    expected = ("schema_change", {"table": "orders", "lake_table": "shop.orders", "details": {"added": ["x long"]}})
    assert first == [expected] and second == [expected]


def test_subscribing_the_same_listener_twice_delivers_each_event_once() -> None:
    got: list[str] = []

    def listener(event: str, **_: Any) -> None:
        got.append(event)

    events.subscribe(listener)
    events.subscribe(listener)
    events.emit("schema_change", table="t")
    assert got == ["schema_change"]


def test_a_failing_listener_is_logged_and_the_others_still_hear_the_event(caplog: pytest.LogCaptureFixture) -> None:
    got: list[str] = []

    def broken(event: str, **_: Any) -> None:
        raise ConnectionError("channel down")

    events.subscribe(broken)
    events.subscribe(lambda e, **kw: got.append(kw["table"]))
    with caplog.at_level(logging.WARNING, logger=events.__name__):
        events.emit("schema_change", table="orders")  # does not raise
    assert got == ["orders"]
    (record,) = [r for r in caplog.records if r.name == events.__name__]
    assert record.getMessage() == "snowberg: could not deliver schema_change for orders"
    assert record.exc_info is not None and "channel down" in str(record.exc_info[1])


def test_without_a_listener_the_event_is_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=events.__name__):
        events.emit("schema_change", table="orders")
    assert [r.getMessage() for r in caplog.records if r.name == events.__name__] == [
        "snowberg: schema_change for orders: no listener (not inside an Airflow task)"
    ]
