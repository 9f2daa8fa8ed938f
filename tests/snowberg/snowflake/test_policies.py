"""Masking and row access policies on a source (``snowberg.snowflake.policies``) and what ``on_policy`` makes of them.

The local emulator has no policies and answers ``POLICY_REFERENCES`` with no row. The rows below are shaped
from Snowflake's documentation of the table function, not recorded from an account
(https://docs.snowflake.com/en/sql-reference/functions/policy_references: columns POLICY_DB, POLICY_SCHEMA,
POLICY_NAME, POLICY_KIND, REF_DATABASE_NAME, REF_SCHEMA_NAME, REF_ENTITY_NAME, REF_ENTITY_DOMAIN,
REF_COLUMN_NAME, REF_ARG_COLUMN_NAMES, TAG_DATABASE, TAG_SCHEMA, TAG_NAME, POLICY_STATUS; POLICY_KIND values
such as MASKING_POLICY and ROW_ACCESS_POLICY; REF_ENTITY_DOMAIN 'TABLE' for tables and external tables,
'VIEW' for views). The live lane (``test_policies_live.py``) attaches real policies on an account.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from snowberg.config.table_config import TableConfig, parse_config
from snowberg.core.identifiers import TableName
from snowberg.iceberg import state
from snowberg.load.extract import load_window
from snowberg.load.plan import plan_run
from snowberg.load.publish import publish, reconcile_before_plan
from snowberg.snowflake import policies
from snowberg.snowflake.policies import (
    PolicyError,
    PolicyKind,
    PolicyReference,
    check_policies,
    parse_references,
    policy_sql,
    read_references,
)


def documented_row(kind: str, name: str, column: str | None = None, **more: Any) -> dict[str, Any]:
    """One row of POLICY_REFERENCES as the documentation lists its columns."""
    return {
        "POLICY_DB": "GOV",
        "POLICY_SCHEMA": "POLICIES",
        "POLICY_NAME": name,
        "POLICY_KIND": kind,
        "REF_DATABASE_NAME": "SHOP",
        "REF_SCHEMA_NAME": "PUBLIC",
        "REF_ENTITY_NAME": "CUSTOMERS",
        "REF_ENTITY_DOMAIN": "TABLE",
        "REF_COLUMN_NAME": column,
        "REF_ARG_COLUMN_NAMES": None,
        "TAG_DATABASE": None,
        "TAG_SCHEMA": None,
        "TAG_NAME": None,
        "POLICY_STATUS": "ACTIVE",
        **more,
    }


MASKED_EMAIL = documented_row("MASKING_POLICY", "EMAIL_MASK", "EMAIL")
ROW_FILTER = documented_row("ROW_ACCESS_POLICY", "REGION_ROWS")
PROJECTION = documented_row("PROJECTION_POLICY", "NO_SSN", "SSN")


def config(source: str = "SHOP.PUBLIC.CUSTOMERS", **over: Any) -> TableConfig:
    entry = {"name": "customers", "source": {"table": source}, "target": "ns.customers", **over}
    return parse_config({"tables": [entry]}).tables[0]


class RoleConn:
    """A connection that answers ``SELECT CURRENT_ROLE()`` only (the reader is injected)."""

    def __init__(self, role: str = "LOADER") -> None:
        self.role = role
        self.statements: list[str] = []

    def cursor(self) -> Any:
        conn = self

        class Cur:
            def execute(self, sql: str, params: Any = None) -> None:
                conn.statements.append(sql)

            def fetchone(self) -> tuple[str]:
                return (conn.role,)

            def close(self) -> None:
                pass

        return Cur()


def reader_of(*rows: dict[str, Any]) -> Any:
    return lambda conn, name: parse_references(rows)


def test_documented_rows_give_masking_and_row_access_policies_and_leave_out_others() -> None:
    tagged = documented_row("MASKING_POLICY", "PII_MASK", "PHONE", TAG_NAME="PII")
    refs = parse_references([MASKED_EMAIL, ROW_FILTER, PROJECTION, tagged])
    assert refs == [
        PolicyReference(policy="GOV.POLICIES.EMAIL_MASK", kind=PolicyKind.MASKING, column="EMAIL"),
        PolicyReference(policy="GOV.POLICIES.REGION_ROWS", kind=PolicyKind.ROW_ACCESS),
        PolicyReference(policy="GOV.POLICIES.PII_MASK", kind=PolicyKind.MASKING, column="PHONE", tag="PII"),
    ]


def test_the_query_is_one_table_function_call_with_bound_entity_and_domain() -> None:
    sql, params = policy_sql(TableName.parse("shop.public.customers"), policies.EntityDomain.TABLE)
    assert 'FROM TABLE("SHOP".INFORMATION_SCHEMA.POLICY_REFERENCES(' in sql
    assert "REF_ENTITY_NAME => %(entity)s, REF_ENTITY_DOMAIN => %(domain)s" in sql
    assert params == {"entity": '"SHOP"."PUBLIC"."CUSTOMERS"', "domain": "TABLE"}


def test_a_masked_column_fails_the_run_naming_column_policy_role_and_the_way_to_allow_it() -> None:
    with pytest.raises(PolicyError) as err:
        check_policies(config(), RoleConn("LOADER"), reader=reader_of(MASKED_EMAIL))
    msg = str(err.value)
    for part in ("column EMAIL", "GOV.POLICIES.EMAIL_MASK", "role LOADER", "on_policy: allow", "columns.exclude"):
        assert part in msg


def test_a_row_access_policy_fails_the_run_too() -> None:
    with pytest.raises(PolicyError, match="row access policy GOV.POLICIES.REGION_ROWS"):
        check_policies(config(), RoleConn(), reader=reader_of(ROW_FILTER))


def test_warn_loads_and_logs_the_policy(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="snowberg.snowflake.policies"):
        finding = check_policies(config(on_policy="warn"), RoleConn(), reader=reader_of(MASKED_EMAIL))
    assert finding.references and "EMAIL_MASK" in caplog.text and "on_policy: warn" in caplog.text


def test_allow_returns_what_the_commit_records() -> None:
    finding = check_policies(config(on_policy="allow"), RoleConn("R1"), reader=reader_of(MASKED_EMAIL, ROW_FILTER))
    assert finding.role == "R1"
    assert finding.summary_text() == (
        "MASKING_POLICY GOV.POLICIES.EMAIL_MASK on EMAIL; ROW_ACCESS_POLICY GOV.POLICIES.REGION_ROWS"
    )


def test_a_masked_column_left_out_is_no_reason_to_stop() -> None:
    conn = RoleConn()
    cfg = config(columns={"exclude": ["email"]})
    assert check_policies(cfg, conn, excluded=cfg.columns.exclude, reader=reader_of(MASKED_EMAIL)).references == ()
    assert conn.statements == []  # no policy applies: not even the role is asked


def test_a_query_source_is_not_checked_and_says_so() -> None:
    cfg = parse_config({"tables": [{"name": "q", "source": {"query": "SELECT 1 AS X"}, "target": "ns.q"}]}).tables[0]
    finding = check_policies(cfg, RoleConn(), reader=reader_of(MASKED_EMAIL))
    assert not finding.checked and "custom query" in finding.note


def test_a_check_that_cannot_run_fails_under_fail_and_loads_under_warn() -> None:
    def broken(conn: Any, name: TableName) -> list[PolicyReference]:
        raise RuntimeError("Insufficient privileges")

    with pytest.raises(PolicyError, match="Insufficient privileges"):
        check_policies(config(), RoleConn(), reader=broken)
    assert not check_policies(config(on_policy="warn"), RoleConn(), reader=broken).checked


class DomainConn:
    """Answers the TABLE domain with Snowflake's "does not exist" (the source is a view), the VIEW domain with a row."""

    def __init__(self) -> None:
        self.domains: list[str] = []

    def cursor(self) -> Any:
        conn = self

        class Cur:
            description = [(c,) for c in MASKED_EMAIL][:6]

            def execute(self, sql: str, params: dict[str, str]) -> None:
                conn.domains.append(params["domain"])
                if params["domain"] == "TABLE":
                    raise RuntimeError("SQL compilation error: Object does not exist or not authorized.")
                self.description = [(c,) for c in ("POLICY_DB", "POLICY_SCHEMA", "POLICY_NAME", "POLICY_KIND",
                                                   "REF_COLUMN_NAME", "TAG_NAME")]  # fmt: skip

            def fetchall(self) -> list[tuple[Any, ...]]:
                return [("GOV", "POLICIES", "V_MASK", "MASKING_POLICY", "EMAIL", None)]

            def close(self) -> None:
                pass

        return Cur()


def test_a_view_is_asked_again_in_the_view_domain() -> None:
    conn = DomainConn()
    refs = read_references(conn, TableName.parse("SHOP.PUBLIC.V_CUSTOMERS"))
    assert conn.domains == ["TABLE", "VIEW"]
    assert refs == [PolicyReference(policy="GOV.POLICIES.V_MASK", kind=PolicyKind.MASKING, column="EMAIL")]


# ---------------------------------------------------------------------------
# In a run's plan, on the emulator


def source(sfdb: Any) -> TableConfig:
    sfdb.sql(f"CREATE TABLE {sfdb.table('CUSTOMERS')} (ID NUMBER(38,0), EMAIL VARCHAR)")
    sfdb.sql(f"INSERT INTO {sfdb.table('CUSTOMERS')} VALUES (1, 'a@x.org'), (2, 'b@x.org')")
    return config(sfdb.table("CUSTOMERS"), primary_key=["id"])


def test_the_plan_asks_the_emulator_which_answers_no_policy(sfdb: Any, catalog: Any) -> None:
    cfg = source(sfdb)
    assert read_references(sfdb.conn, TableName.parse(cfg.source.table or "")) == []
    w = plan_run(cfg, sfdb.conn, None, run_id="r1")
    assert state.WINDOW_POLICIES_ALLOWED not in w.extra


def test_a_masked_source_fails_the_plan_before_any_row_is_read(
    sfdb: Any, catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = source(sfdb)
    monkeypatch.setattr(policies, "read_references", reader_of(MASKED_EMAIL))
    with pytest.raises(PolicyError, match="EMAIL_MASK"):
        plan_run(cfg, sfdb.conn, None, run_id="r1")
    assert not catalog.table_exists("ns.customers")


def test_an_allowed_policy_is_recorded_in_the_commits_snapshot_summary(
    sfdb: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    source(sfdb)
    cfg = config(sfdb.table("CUSTOMERS"), primary_key=["id"], on_policy="allow")
    monkeypatch.setattr(policies, "read_references", reader_of(MASKED_EMAIL))
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, sfdb.conn, table, run_id="r1")
    load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)
    snap = catalog.load_table("ns.customers").current_snapshot()
    recorded = snap.summary.additional_properties[state.POLICIES_ALLOWED]
    assert "MASKING_POLICY GOV.POLICIES.EMAIL_MASK on EMAIL" in recorded
    assert "(role " in recorded
