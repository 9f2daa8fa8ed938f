"""A config edit that changes what a loaded table is loaded from is refused, until a full refresh."""

from __future__ import annotations

from typing import Any

import pytest

from snowberg.config.table_config import TableConfig, parse_config
from snowberg.iceberg import identity
from snowberg.iceberg.identity import ConfigDriftError, check_identity, identity_properties
from snowberg.load.extract import load_window
from snowberg.load.plan import plan_run
from snowberg.load.publish import publish, reconcile_before_plan

DDL = "CREATE TABLE {t} (ID NUMBER(38,0), CODE VARCHAR(10), UPDATED_AT TIMESTAMP_NTZ(9), CHANGED_AT TIMESTAMP_NTZ(9))"


def cfg_for(sfdb: Any, **over: Any) -> TableConfig:
    entry: dict[str, Any] = {
        "name": "t",
        "source": {"table": sfdb.table("SRC")},
        "target": "ns.t",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
    }
    entry.update(over)
    return parse_config({"tables": [entry]}).tables[0]


def run(cfg: TableConfig, conn: Any, catalog: Any, variables: Any, run_id: str, mode: str = "incremental") -> Any:
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, conn, table, run_id=run_id, mode=mode)
    r = load_window(cfg, conn, catalog, w)
    publish(cfg, catalog, w, variables)
    return r


class NoSQL:
    """A connection that fails the test if the plan asks it for a cursor."""

    def cursor(self) -> Any:
        raise AssertionError("SQL was run before the drift was refused")


@pytest.fixture
def loaded(sfdb: Any, catalog: Any, variables: Any) -> Any:
    for name in ("SRC", "OTHER"):
        sfdb.sql(DDL.format(t=sfdb.table(name)))
        sfdb.sql(
            f"INSERT INTO {sfdb.table(name)} VALUES (1, 'a', '2026-01-01'::TIMESTAMP_NTZ, '2026-01-02'::TIMESTAMP_NTZ)"
        )
    run(cfg_for(sfdb), sfdb.conn, catalog, variables, "r1")
    return sfdb


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"cursor": {"column": "changed_at"}}, "cursor.column"),
        ({"source": {"table": "OTHERDB.S.OTHER"}}, "source"),
        ({"primary_key": ["code"]}, "primary_key"),
    ],
)
def test_a_changed_source_cursor_or_key_is_refused_before_any_sql(
    loaded: Any, catalog: Any, variables: Any, over: dict[str, Any], field: str
) -> None:
    table = catalog.load_table("ns.t")
    with pytest.raises(ConfigDriftError) as exc:
        plan_run(cfg_for(loaded, **over), NoSQL(), table, run_id="r2")
    msg = str(exc.value)
    assert "table 't'" in msg and f"{field} was" in msg and "full_refresh" in msg


def test_full_refresh_reloads_and_records_the_new_setting(loaded: Any, catalog: Any, variables: Any) -> None:
    moved = cfg_for(loaded, source={"table": loaded.table("OTHER")}, cursor={"column": "changed_at"})
    with pytest.raises(ConfigDriftError):
        run(moved, loaded.conn, catalog, variables, "r2")
    r = run(moved, loaded.conn, catalog, variables, "r3", mode="full_refresh")
    assert r.status == "committed"
    props = catalog.load_table("ns.t").properties
    assert props[identity.SOURCE].endswith(".S.OTHER") and props[identity.CURSOR_COLUMN] == "changed_at"
    loaded.sql(
        f"INSERT INTO {loaded.table('OTHER')} VALUES (2, 'b', '2026-01-01'::TIMESTAMP_NTZ, "
        "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ))"
    )
    assert run(moved, loaded.conn, catalog, variables, "r4").rows == 1


def test_a_table_without_a_record_gets_one_from_its_next_commit(loaded: Any, catalog: Any, variables: Any) -> None:
    table = catalog.load_table("ns.t")
    with table.transaction() as tx:  # as a table loaded before identities were recorded
        tx.remove_properties(*identity_properties(cfg_for(loaded)))
    check_identity(cfg_for(loaded, primary_key=["code"]), catalog.load_table("ns.t"))  # nothing to compare yet
    loaded.sql(
        f"INSERT INTO {loaded.table('SRC')} VALUES (2, 'b', CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) "
        "AS TIMESTAMP_NTZ), NULL)"
    )
    run(cfg_for(loaded), loaded.conn, catalog, variables, "r2")
    assert catalog.load_table("ns.t").properties[identity.PRIMARY_KEY] == "id"
    with pytest.raises(ConfigDriftError, match="primary_key was 'id', is now 'code'"):
        check_identity(cfg_for(loaded, primary_key=["code"]), catalog.load_table("ns.t"))


def test_case_of_an_unquoted_source_name_is_not_a_change(loaded: Any, catalog: Any) -> None:
    lower = cfg_for(loaded, source={"table": loaded.table("SRC").lower()})
    check_identity(lower, catalog.load_table("ns.t"))


def test_an_edited_custom_query_is_logged_not_refused(
    loaded: Any, catalog: Any, variables: Any, caplog: pytest.LogCaptureFixture
) -> None:
    q1 = f"SELECT ID, CODE, UPDATED_AT, CHANGED_AT FROM {loaded.table('SRC')}"
    q2 = f"SELECT ID, CODE, UPDATED_AT, CHANGED_AT FROM {loaded.table('SRC')} WHERE ID > 0"
    run(cfg_for(loaded, source={"query": q1}), loaded.conn, catalog, variables, "q1", mode="full_refresh")
    with caplog.at_level("WARNING", logger="snowberg.iceberg.identity"):
        check_identity(cfg_for(loaded, source={"query": q2}), catalog.load_table("ns.t"))
    assert "custom query changed" in caplog.text
