"""Errors a stream run stops with: one family (``StreamError``), config problems also ``ValueError``s."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from snowberg.config.stream_settings import StreamSource
from snowberg.core.identifiers import TableName
from snowberg.streams.errors import (
    StaleStreamError,
    StreamConfigError,
    StreamError,
    StreamGoingStaleError,
    StreamMissingError,
)
from snowberg.streams.staging import create_stream
from snowberg.streams.status import check_margin, parse_show_row, require_fresh

STREAM = TableName.parse("DB.SRC.ORDERS_STREAM")
NOW = datetime(2026, 6, 9, tzinfo=UTC)


def _status(**kw: object) -> object:
    row = {"name": "ORDERS_STREAM", "stale": "false", "stale_after": NOW + timedelta(hours=3), **kw}
    return parse_show_row(row)


RAISES: dict[str, tuple[type[StreamError], Callable[[], object]]] = {
    "missing": (StreamMissingError, lambda: require_fresh(None, STREAM, now=NOW)),
    "stale": (StaleStreamError, lambda: require_fresh(_status(stale="true"), STREAM, now=NOW)),  # type: ignore[arg-type]
    "going_stale": (
        StreamGoingStaleError,
        lambda: check_margin(_status(), STREAM, interval=timedelta(hours=2), intervals=2, now=NOW),  # type: ignore[arg-type]
    ),
    "config": (
        StreamConfigError,
        lambda: create_stream(None, StreamSource(name="DB.SRC.ORDERS_STREAM", create=True), None, replace=False),
    ),
}


@pytest.mark.parametrize("case", sorted(RAISES))
def test_every_stop_of_a_stream_run_is_a_stream_error_that_names_the_stream(case: str) -> None:
    cls, call = RAISES[case]
    with pytest.raises(StreamError) as exc:
        call()
    assert type(exc.value) is cls and isinstance(exc.value, RuntimeError)
    assert "ORDERS_STREAM" in str(exc.value)


def test_config_errors_are_value_errors_and_the_runtime_ones_are_not() -> None:
    with pytest.raises(ValueError, match="on_table .* is needed to create the stream"):
        RAISES["config"][1]()
    for case in ("missing", "stale", "going_stale"):
        with pytest.raises(StreamError) as exc:
            RAISES[case][1]()
        assert not isinstance(exc.value, ValueError)


def test_going_stale_missing_and_stale_are_told_apart() -> None:
    """An alert (going stale) is not a stop (stale), and a missing stream is neither: each has its own fix."""
    with pytest.raises(StreamGoingStaleError) as going:
        RAISES["going_stale"][1]()
    assert not isinstance(going.value, (StaleStreamError, StreamMissingError))
    with pytest.raises(StaleStreamError) as stale:
        RAISES["stale"][1]()
    assert not isinstance(stale.value, (StreamGoingStaleError, StreamMissingError))
