"""Publishing a run against the emulator and a SQLite-catalog table: the commit is read back, then mirrored.

The Variable only ever follows the table. A crash between the commit and the
publish is in ``tests/scenarios/test_load_crash_points.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from orders_data import make_orders, plan_window, table_cfg

from snowberg.iceberg import state
from snowberg.load.extract import load_window
from snowberg.load.publish import publish, reconcile_before_plan


def add_orders(sfdb: Any, source: str, ids: range) -> None:
    rows = ", ".join(f"({i}, '2026-10-02 00:00:00'::TIMESTAMP_NTZ)" for i in ids)
    sfdb.sql(f"INSERT INTO {source} (ORDER_ID, UPDATED_AT) VALUES {rows}")


@pytest.fixture
def orders(sfdb: Any) -> Any:
    return table_cfg(make_orders(sfdb, 50))


def test_before_the_first_load_there_is_no_table_and_nothing_to_reconcile(
    orders: Any, catalog: Any, variables: Any
) -> None:
    assert reconcile_before_plan(orders, catalog, variables) == (None, "fresh table")
    assert dict(variables) == {}


def test_publish_reports_the_runs_commit_and_mirrors_it_into_the_variable(
    sfdb: Any, orders: Any, catalog: Any, variables: Any
) -> None:
    w = plan_window(orders, sfdb.conn, catalog, "r1")
    r = load_window(orders, sfdb.conn, catalog, w)
    assert variables.get(orders.variable_key) is None  # the load itself never writes the Variable
    summary = publish(orders, catalog, w, variables)
    assert summary == {
        "table": "shop.orders",
        "rows_loaded": 50,
        "snapshot_id": r.snapshot_id,
        "watermark": r.watermark,
        "variable": orders.variable_key,
        "variable_action": "adopted table state (Variable was missing)",
        "mode": "incremental",
    }
    mirror = json.loads(variables[orders.variable_key])
    assert (mirror["snapshot_id"], mirror["watermark"], mirror["run_id"]) == (r.snapshot_id, r.watermark, "r1")


def test_a_run_that_found_nothing_new_publishes_the_tables_last_commit(
    sfdb: Any, orders: Any, catalog: Any, variables: Any
) -> None:
    w1 = plan_window(orders, sfdb.conn, catalog, "r1")
    first = load_window(orders, sfdb.conn, catalog, w1)
    publish(orders, catalog, w1, variables)
    w2 = plan_window(orders, sfdb.conn, catalog, "r2")
    assert load_window(orders, sfdb.conn, catalog, w2).status == "nothing_new"
    summary = publish(orders, catalog, w2, variables)
    assert (summary["rows_loaded"], summary["snapshot_id"], summary["watermark"]) == (
        0,
        first.snapshot_id,
        first.watermark,
    )
    assert summary["variable_action"] == "in sync"


def test_publish_refuses_a_run_whose_commit_is_missing_after_the_watermark_moved(
    sfdb: Any, orders: Any, catalog: Any, variables: Any
) -> None:
    source = orders.source.table
    w1 = plan_window(orders, sfdb.conn, catalog, "r1")
    load_window(orders, sfdb.conn, catalog, w1)
    publish(orders, catalog, w1, variables)
    add_orders(sfdb, source, range(1000, 1005))
    stale = plan_window(orders, sfdb.conn, catalog, "r2")  # planned, never loaded
    w3 = plan_window(orders, sfdb.conn, catalog, "r3")
    assert load_window(orders, sfdb.conn, catalog, w3).rows == 5
    publish(orders, catalog, w3, variables)
    mirror_before = variables[orders.variable_key]
    with pytest.raises(state.StateError, match="run r2: no commit of this run found on the table; refusing to publish"):
        publish(orders, catalog, stale, variables)
    assert variables[orders.variable_key] == mirror_before


def test_a_failure_before_publish_leaves_the_variable_behind_and_the_next_publish_adopts_the_table(
    sfdb: Any, orders: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = plan_window(orders, sfdb.conn, catalog, "r1")
    r = load_window(orders, sfdb.conn, catalog, w)
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:before_publish")
    with pytest.raises(RuntimeError, match="injected failure at before_publish"):
        publish(orders, catalog, w, variables)
    assert dict(variables) == {}
    monkeypatch.delenv("SNOWBERG_FAULT")
    table, action = reconcile_before_plan(orders, catalog, variables)
    assert table is not None and action == "adopted table state (Variable was missing)"
    assert json.loads(variables[orders.variable_key])["snapshot_id"] == r.snapshot_id
    assert publish(orders, catalog, w, variables)["variable_action"] == "in sync"


def test_reconcile_before_plan_refuses_a_variable_that_is_not_a_mirror(
    sfdb: Any, orders: Any, catalog: Any, variables: Any
) -> None:
    w = plan_window(orders, sfdb.conn, catalog, "r1")
    load_window(orders, sfdb.conn, catalog, w)
    variables[orders.variable_key] = "2026-01-01"
    with pytest.raises(state.StateError, match="holds '2026-01-01', not a snowberg watermark mirror; delete it"):
        reconcile_before_plan(orders, catalog, variables)
