"""Masking and row access policies on a stream table's source: checked by the consume before anything is staged.

The emulator has no policies (the stream double answers POLICY_REFERENCES with no row); the row below is shaped
from Snowflake's documentation of the table function, not recorded from an account
(https://docs.snowflake.com/en/sql-reference/functions/policy_references; see
``tests/snowberg/snowflake/test_policies.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from streams_harness import Harness

from snowberg.config.table_config import TableConfig
from snowberg.iceberg import state
from snowberg.snowflake import policies

MASKED_STATUS = {
    "POLICY_DB": "GOV",
    "POLICY_SCHEMA": "P",
    "POLICY_NAME": "STATUS_MASK",
    "POLICY_KIND": "MASKING_POLICY",
    "REF_COLUMN_NAME": "STATUS",
    "TAG_NAME": None,
}


def test_without_policies_the_stream_table_loads(harness: Harness) -> None:
    harness.insert((1, "new", "10.00"))
    harness.run()
    snap = harness.catalog().load_table("shop.orders").current_snapshot()
    assert state.POLICIES_ALLOWED not in snap.summary.additional_properties


def test_a_masked_column_stops_the_consume_and_allow_records_it(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness
    monkeypatch.setattr(policies, "read_references", lambda conn, name: policies.parse_references([MASKED_STATUS]))
    h.insert((1, "new", "10.00"))
    with pytest.raises(policies.PolicyError, match="column STATUS carries masking policy GOV.P.STATUS_MASK"):
        h.run()
    assert not h.catalog().table_exists("shop.orders")
    assert not h.sql(f'SHOW STREAMS IN SCHEMA "{h.db}"."SRC"')  # checked before the stream is even created
    h.cfg = TableConfig.model_validate({**h.cfg.model_dump(mode="json", exclude_defaults=True), "on_policy": "allow"})
    h.run()
    props: dict[str, Any] = h.catalog().load_table("shop.orders").current_snapshot().summary.additional_properties
    assert props[state.POLICIES_ALLOWED].startswith("MASKING_POLICY GOV.P.STATUS_MASK on STATUS (role ")
