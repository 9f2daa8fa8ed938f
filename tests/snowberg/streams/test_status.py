"""The stream's health from SHOW STREAMS: parsing, the exact-name match, staleness and the alert margin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from streams_harness import Harness

from snowberg.core.identifiers import TableName
from snowberg.streams.errors import StaleStreamError, StreamGoingStaleError, StreamMissingError
from snowberg.streams.status import check_margin, parse_show_row, read_status, recovery_hint, require_fresh

STREAM = TableName.parse("DB.SRC.ORDERS_STREAM")


def _row(**kw: object) -> dict[str, object]:
    base = {
        "name": "ORDERS_STREAM",
        "table_name": "DB.SRC.ORDERS",
        "mode": "DEFAULT",
        "stale": "false",
        "stale_after": datetime(2026, 6, 10, tzinfo=UTC),
        "invalid_reason": "N/A",
        "created_on": datetime(2026, 6, 1, tzinfo=UTC),
    }
    return {**base, **kw}


def test_show_streams_row_parsing_and_staleness_rules() -> None:
    now = datetime(2026, 6, 9, tzinfo=UTC)
    st = parse_show_row(_row())
    assert st.stale is False and st.invalid_reason is None and st.generation == "2026-06-01T00:00:00.000000+00:00"
    assert "in 1 day" in check_margin(st, STREAM, interval=timedelta(hours=1), intervals=2, now=now)
    with pytest.raises(StreamGoingStaleError):
        check_margin(st, STREAM, interval=timedelta(hours=13), intervals=2, now=now)
    with pytest.raises(StaleStreamError, match="recover_stale_stream=true"):
        require_fresh(parse_show_row(_row(stale="true")), STREAM, now=now)
    with pytest.raises(StaleStreamError):
        require_fresh(st, STREAM, now=datetime(2026, 6, 11, tzinfo=UTC))
    with pytest.raises(StreamMissingError, match="does not exist"):
        require_fresh(None, STREAM, now=now)


def test_show_row_text_timestamps_are_read_as_utc_and_naive_ones_taken_as_utc() -> None:
    st = parse_show_row(_row(stale_after="2026-06-10T02:00:00Z", created_on=datetime(2026, 6, 1, 12), stale=True))
    assert st.stale_after == datetime(2026, 6, 10, 2, tzinfo=UTC)
    assert st.created_on == datetime(2026, 6, 1, 12, tzinfo=UTC)
    assert st.stale is True
    assert parse_show_row(_row(stale_after="", created_on=None)).stale_after is None
    assert parse_show_row(_row(stale_after="", created_on=None)).generation is None
    with pytest.raises(TypeError, match="stale_after: expected a timestamp, got 42"):
        parse_show_row(_row(stale_after=42))


def test_status_as_a_dict_carries_iso_times_and_the_generation() -> None:
    d = parse_show_row(_row(mode="APPEND_ONLY")).to_dict()
    assert d == {
        "name": "ORDERS_STREAM",
        "table_name": "DB.SRC.ORDERS",
        "mode": "APPEND_ONLY",
        "stale": False,
        "stale_after": "2026-06-10T00:00:00+00:00",
        "invalid_reason": None,
        "created_on": "2026-06-01T00:00:00.000000+00:00",
    }


def test_an_invalid_stream_is_refused_with_its_reason_and_the_recovery() -> None:
    st = parse_show_row(_row(invalid_reason="base table dropped"))
    with pytest.raises(StaleStreamError, match="is invalid: base table dropped. Recover by triggering"):
        require_fresh(st, STREAM, now=datetime(2026, 6, 9, tzinfo=UTC))
    assert "CREATE OR REPLACE STREAM DB.SRC.ORDERS_STREAM" in recovery_hint(STREAM)


def test_margin_without_stale_after_passes_and_says_so() -> None:
    st = parse_show_row(_row(stale_after=None))
    text = check_margin(st, STREAM, interval=timedelta(days=30), intervals=2, now=datetime(2026, 6, 9, tzinfo=UTC))
    assert text == "stream DB.SRC.ORDERS_STREAM: no STALE_AFTER reported"


def test_margin_names_the_schedule_interval_and_the_ways_out() -> None:
    st = parse_show_row(_row())
    now = datetime(2026, 6, 9, 12, tzinfo=UTC)  # 12 hours left
    with pytest.raises(StreamGoingStaleError, match=r"= 3 × schedule interval 6:00:00\. Consume it sooner") as exc:
        check_margin(st, STREAM, interval=timedelta(hours=6), intervals=3, now=now)
    assert "DATA_RETENTION_TIME_IN_DAYS" in str(exc.value) and "recover_stale_stream=true" in str(exc.value)
    assert check_margin(st, STREAM, interval=timedelta(hours=6), intervals=1, now=now).endswith("alert margin 6:00:00")


def test_read_status_matches_the_stream_name_exactly_not_as_a_like_pattern(harness: Harness) -> None:
    h = harness
    h.sql(f'CREATE STREAM "{h.db}"."SRC"."ORDERSXSTREAM" ON TABLE "{h.db}"."SRC"."ORDERS"')
    stream = TableName.parse(f"{h.db}.SRC.ORDERS_STREAM")
    assert read_status(h.admin, stream) is None  # '_' matched 'X' in LIKE; the name differs
    h.sql(f'CREATE STREAM "{h.db}"."SRC"."ORDERS_STREAM" ON TABLE "{h.db}"."SRC"."ORDERS" APPEND_ONLY = TRUE')
    st = read_status(h.admin, stream)
    assert st is not None and st.name == "ORDERS_STREAM" and st.mode == "APPEND_ONLY" and st.stale is False
    assert st.stale_after is not None and st.stale_after > datetime.now(UTC) and st.generation
    assert require_fresh(st, stream) is st
