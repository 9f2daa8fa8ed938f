"""Live lane of ``validate --connect``'s stream and grant checks: SHOW STREAMS, SHOW GRANTS, IS_ROLE_IN_SESSION.

The emulator has none of them, so ``test_config_online.py`` answers with rows shaped from Snowflake's
documentation; this module runs the same checks against a real account. Skipped unless
SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT, _USER, _PASSWORD, _WAREHOUSE are set (optional _ROLE; the role needs
CREATE DATABASE). Each test creates and drops its own database ``SNOWBERG_TEST_<random>``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "streams"))
from streams_harness import LIVE_LANE, live_database  # noqa: E402

from snowberg.checks.config_online import source_findings, stream_findings  # noqa: E402
from snowberg.config.table_config import TableConfig  # noqa: E402
from snowberg.config.validate import Severity  # noqa: E402

pytestmark = LIVE_LANE


@pytest.fixture
def account() -> Iterator[tuple[Any, str]]:
    yield from live_database("CREATE TABLE {db}.S.ORDERS (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")


def cfg(db: str, **stream: Any) -> TableConfig:
    return TableConfig.model_validate(
        {
            "name": "orders_cdc",
            "source": {"table": f"{db}.S.ORDERS"},
            "target": "shop.orders_cdc",
            "primary_key": ["id"],
            "stream": {"name": f"{db}.S.ORDERS_STREAM", **stream},
        }
    )


def test_live_a_stream_to_create_in_a_schema_the_role_owns(account: tuple[Any, str]) -> None:
    conn, db = account
    got = {(f, s) for f, s, _ in stream_findings(conn, cfg(db, create=True))}
    # The role created the database: it owns the schema (OWNERSHIP covers CREATE STREAM / CREATE TABLE) and the
    # table (it may turn CHANGE_TRACKING on).
    assert got == {
        ("stream.create", Severity.OK),
        ("stream.on_table", Severity.OK),
        ("stream.staging_table", Severity.OK),
    }


def test_live_an_existing_stream_is_read_without_consuming_it(account: tuple[Any, str]) -> None:
    conn, db = account
    cur = conn.cursor()
    cur.execute(f"CREATE STREAM {db}.S.ORDERS_STREAM ON TABLE {db}.S.ORDERS APPEND_ONLY = TRUE")
    cur.execute(f"INSERT INTO {db}.S.ORDERS VALUES (1, CURRENT_TIMESTAMP()::TIMESTAMP_NTZ)")
    found = stream_findings(conn, cfg(db))
    assert ("stream.append_only", Severity.ERROR) in {(f, s) for f, s, _ in found}  # APPEND_ONLY, config says not
    assert all(s is not Severity.ERROR for f, s, _ in found if f != "stream.append_only"), found
    cur.execute(f"SELECT COUNT(*) FROM {db}.S.ORDERS_STREAM")
    assert cur.fetchone()[0] == 1  # nothing was consumed
    assert {(f, s) for f, s, _ in source_findings(conn, cfg(db))} >= {("source.table", Severity.OK)}
