"""The Snowflake hook: the session it pins and the connection settings it passes to the connector."""

from __future__ import annotations

import json
from typing import Any

import pytest

from snowberg.config.table_config import parse_config


def _cfg(**over: Any) -> Any:
    entry = {"name": "t", "source": {"table": "DB.S.ORDERS"}, "target": "n.t", "cursor": {"column": "updated_at"}}
    entry.update(over)
    return parse_config({"tables": [entry]}).tables[0]


def test_session_timezone_is_pinned_whatever_the_connection_says(monkeypatch: pytest.MonkeyPatch) -> None:
    from snowberg.snowflake.hook import snowflake_hook

    conn = {
        "conn_type": "snowflake",
        "login": "u",
        "password": "p",
        "extra": {
            "account": "a",
            "host": "127.0.0.1",
            "port": 1234,
            "protocol": "http",
            "session_parameters": {"TIMEZONE": "America/Los_Angeles", "QUERY_TAG": "x", "ABORT_DETACHED_QUERY": True},
        },
    }
    monkeypatch.setenv("AIRFLOW_CONN_SF_TZ", json.dumps(conn))
    params = snowflake_hook("sf_tz", _cfg()).connection_parameters()
    assert params["session_parameters"]["TIMEZONE"] == "UTC"
    assert params["session_parameters"]["ABORT_DETACHED_QUERY"] is True  # other settings kept
    assert params["session_parameters"]["GEOGRAPHY_OUTPUT_FORMAT"] == "GeoJSON"
    assert (params["host"], params["port"], params["protocol"]) == ("127.0.0.1", 1234, "http")
    assert params["arrow_number_to_decimal"] is True


def test_same_load_under_a_non_utc_session_gives_identical_rows(
    sfdb: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Load through the Airflow hook with a Los Angeles session and with a UTC one.

    The emulator ignores TIMEZONE, so on it this proves our SQL and casts do
    not depend on the session; the pin itself is checked above, and the live
    lane runs the same comparison on a real account.
    """
    from pyiceberg.catalog.sql import SqlCatalog

    from snowberg.load.extract import load_window
    from snowberg.load.plan import plan_run
    from snowberg.snowflake.hook import snowflake_hook

    sfdb.sql(
        f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(5,0), LTZ TIMESTAMP_LTZ, TZ TIMESTAMP_TZ, "
        "UPDATED_AT TIMESTAMP_NTZ)"
    )
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} VALUES (1, '2026-03-29 01:30:00'::TIMESTAMP_LTZ, "
        "'2026-03-29 01:30:00-07:00'::TIMESTAMP_TZ, '2026-03-29 01:30:00'::TIMESTAMP_NTZ)"
    )
    results = []
    for tz in ("America/Los_Angeles", "UTC"):
        monkeypatch.setenv("AIRFLOW_CONN_SF_TZ2", sfdb.airflow_connection(TIMEZONE=tz))
        cfg = _cfg(source={"table": sfdb.table("SRC")}, snowflake_conn_id="sf_tz2")
        cat = SqlCatalog("l", uri=f"sqlite:///{tmp_path}/{tz.replace('/', '_')}.db", warehouse=f"file://{tmp_path}")
        c = snowflake_hook("sf_tz2", cfg).get_conn()
        w = plan_run(cfg, c, None, run_id=tz)
        load_window(cfg, c, cat, w)
        c.close()
        results.append(cat.load_table("n.t").scan().to_arrow().to_pylist())
    assert results[0] == results[1]
    assert results[0][0]["tz"].isoformat() == "2026-03-29T08:30:00+00:00"


def test_a_connection_block_closes_the_connection_also_when_it_fails(
    sfdb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snowflake.connector import SnowflakeConnection

    from snowberg.snowflake.hook import snowflake_connection

    closed: list[int] = []
    close = SnowflakeConnection.close

    def recording_close(self: SnowflakeConnection, *args: Any, **kwargs: Any) -> None:
        closed.append(id(self))
        close(self, *args, **kwargs)

    monkeypatch.setattr(SnowflakeConnection, "close", recording_close)
    monkeypatch.setenv("AIRFLOW_CONN_SF_BLOCK", sfdb.airflow_connection())
    with snowflake_connection("sf_block") as conn:
        cur = conn.cursor()
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    assert closed == [id(conn)]
    with pytest.raises(RuntimeError, match="boom"), snowflake_connection("sf_block") as failing:
        raise RuntimeError("boom")
    assert closed == [id(conn), id(failing)]
