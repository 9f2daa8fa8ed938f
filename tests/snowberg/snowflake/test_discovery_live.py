"""Live lane of ``snowberg discover``: its metadata statements on a real account.

``test_discovery.py`` runs them on the emulator (which lacks RELY, key order, views in
INFORMATION_SCHEMA.TABLES, DATETIME_PRECISION and change tracking) and against answers written from
Snowflake's documentation; this lane checks the documentation's shapes are what an account answers.

Skipped unless SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT, _USER, _PASSWORD, _WAREHOUSE are set (optional _ROLE; the role
needs CREATE DATABASE). Each test creates and drops its own database ``SNOWBERG_TEST_<random>``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "streams"))
from streams_harness import LIVE_LANE, live_database  # noqa: E402

from snowberg.snowflake.discovery import discover, read_schema  # noqa: E402

pytestmark = LIVE_LANE


@pytest.fixture
def account() -> Iterator[tuple[Any, str]]:
    yield from live_database(
        "CREATE TABLE {db}.S.LINES (ORDER_ID NUMBER(38,0) NOT NULL, LINE_NO NUMBER(4,0) NOT NULL,"
        " UPDATED_AT TIMESTAMP_NTZ(9), CREATED_AT TIMESTAMP_NTZ(6),"
        " CONSTRAINT PK_LINES PRIMARY KEY (LINE_NO, ORDER_ID) RELY)",
        "CREATE TABLE {db}.S.RATES (CCY VARCHAR(3), RATE FLOAT, ID NUMBER(38,0) NOT NULL PRIMARY KEY)"
        " CHANGE_TRACKING = TRUE",
        "INSERT INTO {db}.S.LINES (ORDER_ID, LINE_NO, UPDATED_AT) VALUES (1, 1, CURRENT_TIMESTAMP()), (1, 2, NULL)",
        "CREATE VIEW {db}.S.V_LINES AS SELECT * FROM {db}.S.LINES",
    )


def test_the_account_answers_as_the_documentation_says(account: tuple[Any, str]) -> None:
    conn, db = account
    tables = {t.name: t for t in read_schema(conn.cursor(), db, "S")}
    assert tables["V_LINES"].kind == "view" and tables["LINES"].kind == "table"
    key = tables["LINES"].primary_key
    assert key is not None and key.name == "PK_LINES" and key.rely and key.columns == ("LINE_NO", "ORDER_ID")
    assert tables["RATES"].change_tracking is True and tables["LINES"].change_tracking is False
    assert tables["LINES"].column("UPDATED_AT").datetime_precision == 9  # type: ignore[union-attr]
    assert tables["LINES"].column("CREATED_AT").datetime_precision == 6  # type: ignore[union-attr]
    plan, text = discover(conn.cursor(), db, "S", text="", source="tables.yaml", profile=True)
    got = {e["name"]: e for e in yaml.safe_load(text)["tables"]}
    assert got["lines"]["primary_key"] == ["line_no", "order_id"] and got["lines"]["cursor"]["null_policy"] == "include"
    assert got["rates"]["stream"]["name"] == f"{db}.S.RATES_SNOWBERG_STREAM"
    assert "1 NULLs of 2 rows" in text and not plan.skipped
