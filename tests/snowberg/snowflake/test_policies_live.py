"""Live lane of the policy check: real masking and row access policies on an account (``test_policies.py`` runs
the same logic against rows shaped from Snowflake's documentation; the emulator has no policies).

Checks what the documentation says and the check relies on: ``POLICY_REFERENCES`` with ``REF_ENTITY_DOMAIN =>
'TABLE'`` names the masked column and the row access policy of a table; a view is asked in the ``VIEW`` domain;
a table without policies answers no row. Needs Enterprise Edition (masking policies) and a role that may
create and apply policies (CREATE MASKING POLICY, CREATE ROW ACCESS POLICY, APPLY … on the test database).

Skipped unless SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT, _USER, _PASSWORD, _WAREHOUSE are set (optional _ROLE). Each test
creates and drops its own database ``SNOWBERG_TEST_<random>``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "streams"))
from streams_harness import LIVE_LANE, live_database  # noqa: E402

from snowberg.config.table_config import parse_config  # noqa: E402
from snowberg.core.identifiers import TableName  # noqa: E402
from snowberg.snowflake.policies import PolicyError, PolicyKind, check_policies, read_references  # noqa: E402

pytestmark = LIVE_LANE


@pytest.fixture
def account() -> Iterator[tuple[Any, str]]:
    yield from live_database(
        "CREATE TABLE {db}.S.CUSTOMERS (ID NUMBER(38,0), EMAIL VARCHAR, REGION VARCHAR)",
        "CREATE TABLE {db}.S.PLAIN (ID NUMBER(38,0))",
        "CREATE MASKING POLICY {db}.S.EMAIL_MASK AS (v VARCHAR) RETURNS VARCHAR -> '*****'",
        "CREATE ROW ACCESS POLICY {db}.S.NO_ROWS AS (r VARCHAR) RETURNS BOOLEAN -> FALSE",
        "ALTER TABLE {db}.S.CUSTOMERS MODIFY COLUMN EMAIL SET MASKING POLICY {db}.S.EMAIL_MASK",
        "ALTER TABLE {db}.S.CUSTOMERS ADD ROW ACCESS POLICY {db}.S.NO_ROWS ON (REGION)",
        "CREATE VIEW {db}.S.V_CUSTOMERS AS SELECT ID, EMAIL FROM {db}.S.CUSTOMERS",
        "ALTER VIEW {db}.S.V_CUSTOMERS MODIFY COLUMN EMAIL SET MASKING POLICY {db}.S.EMAIL_MASK",
    )


def test_a_tables_masked_column_and_row_access_policy_are_reported_and_fail_the_check(
    account: tuple[Any, str],
) -> None:
    conn, db = account
    refs = read_references(conn, TableName.parse(f"{db}.S.CUSTOMERS"))
    assert {(r.kind, r.column, r.policy.rsplit(".", 1)[-1]) for r in refs} == {
        (PolicyKind.MASKING, "EMAIL", "EMAIL_MASK"),
        (PolicyKind.ROW_ACCESS, None, "NO_ROWS"),
    }
    cfg = parse_config({"tables": [{"name": "c", "source": {"table": f"{db}.S.CUSTOMERS"}, "target": "ns.c"}]})
    with pytest.raises(PolicyError, match="EMAIL_MASK"):
        check_policies(cfg.tables[0], conn)


def test_a_view_is_asked_in_the_view_domain_and_a_plain_table_has_no_policy(account: tuple[Any, str]) -> None:
    conn, db = account
    refs = read_references(conn, TableName.parse(f"{db}.S.V_CUSTOMERS"))
    assert [(r.kind, r.column) for r in refs] == [(PolicyKind.MASKING, "EMAIL")]
    assert read_references(conn, TableName.parse(f"{db}.S.PLAIN")) == []
