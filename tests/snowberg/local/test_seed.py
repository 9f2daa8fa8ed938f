"""Demo data in a real fakesnow server: the menu and orders tables, filled once, and orders touched as an app would."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from snowberg.local.seed import BRANDS, CATEGORIES, DATABASE, SCHEMA, change_orders, last_altered, seed, touch_orders
from snowberg.local.stack import FakesnowServer

ORDERS = f"{DATABASE}.{SCHEMA}.ORDERS"
MENU = f"{DATABASE}.{SCHEMA}.MENU"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakesnowServer]:
    # Its own emulator: the demo database has a fixed name.
    with FakesnowServer(tmp_path_factory.mktemp("seed") / "db") as s:
        yield s


@pytest.fixture
def conn(server: FakesnowServer) -> Iterator[Any]:
    c: Any = server.connect()
    cur = c.cursor()
    cur.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")  # the emulator has no DROP DATABASE
    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {DATABASE}.{SCHEMA}")
    for table in (ORDERS, MENU):
        cur.execute(f"DROP TABLE IF EXISTS {table}")
    try:
        yield c
    finally:
        c.close()


def rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    cur.execute(sql)
    return list(cur.fetchall())


def test_seed_creates_both_tables_with_the_requested_row_counts(conn: Any) -> None:
    assert seed(conn, orders=500, menu_items=12) == {"orders": 500, "menu": 12, "inserted": 512}
    assert rows(conn, f"SELECT COUNT(*), MIN(ORDER_ID), MAX(ORDER_ID) FROM {ORDERS}") == [(500, 1, 500)]
    assert rows(conn, f"SELECT COUNT(DISTINCT MENU_ITEM_ID) FROM {MENU}") == [(12,)]


def test_seeding_again_keeps_the_existing_rows(conn: Any) -> None:
    seed(conn, orders=100, menu_items=6)
    touch_orders(conn, 3)
    assert seed(conn, orders=1_000, menu_items=60) == {"orders": 100, "menu": 6, "inserted": 0}
    assert rows(conn, f"SELECT COUNT(*) FROM {ORDERS} WHERE QUANTITY <> MOD(ORDER_ID - 1, 4) + 1") == [(3,)]


def test_the_menu_names_every_brand_and_category_including_quotes(conn: Any) -> None:
    seed(conn, orders=10, menu_items=24)
    brands = {r[0] for r in rows(conn, f"SELECT DISTINCT TRUCK_BRAND FROM {MENU}")}
    categories = {r[0] for r in rows(conn, f"SELECT DISTINCT ITEM_CATEGORY FROM {MENU}")}
    assert brands == set(BRANDS) and "Guac n' Roll" in brands
    assert categories == set(CATEGORIES)
    assert rows(conn, f"SELECT ITEM_NAME FROM {MENU} WHERE MENU_ITEM_ID = 7") == [("Item 7",)]


def test_orders_are_consistent_and_placed_within_30_days_before_the_base(conn: Any) -> None:
    seed(conn, orders=300, menu_items=10, base="2026-10-01 00:00:00")
    bad_totals = rows(conn, f"SELECT COUNT(*) FROM {ORDERS} WHERE ORDER_TOTAL <> QUANTITY * UNIT_PRICE")
    assert bad_totals == [(0,)]
    unknown_items = rows(
        conn, f"SELECT COUNT(*) FROM {ORDERS} o LEFT JOIN {MENU} m USING (MENU_ITEM_ID) WHERE m.ITEM_NAME IS NULL"
    )
    assert unknown_items == [(0,)]
    (lo, hi), *_ = rows(conn, f"SELECT MIN(UPDATED_AT), MAX(UPDATED_AT) FROM {ORDERS}")
    assert str(lo) >= "2026-09-01" and str(hi) <= "2026-10-01 00:01:00"
    assert {r[0] for r in rows(conn, f"SELECT DISTINCT ORDER_CHANNEL FROM {ORDERS}")} == {"app", "walk-up", "phone"}
    (order,) = rows(conn, f"SELECT QUANTITY, UNIT_PRICE, DISCOUNT_RATE FROM {ORDERS} WHERE ORDER_ID = 1")
    assert order == (1, Decimal("3.00"), 0.0)


def test_touch_updates_every_seventh_order_and_moves_its_cursor_to_now(conn: Any) -> None:
    seed(conn, orders=200, menu_items=5)
    before = dict(rows(conn, f"SELECT ORDER_ID, QUANTITY FROM {ORDERS}"))
    assert touch_orders(conn, 10) == 10
    after = rows(conn, f"SELECT ORDER_ID, QUANTITY, ORDER_TOTAL, UNIT_PRICE, UPDATED_AT FROM {ORDERS}")
    changed = sorted(r[0] for r in after if r[1] != before[r[0]])
    assert changed == list(range(7, 71, 7))
    for order_id, qty, total, price, updated in after:
        if order_id in changed:
            assert qty == before[order_id] + 1 and total == qty * price and str(updated) > "2026-10-01"


def test_changing_orders_moves_their_last_altered_and_no_other_tables(conn: Any) -> None:
    """What the quick start shows a source-change watcher: the UPDATE's commit time, read as the loads read it."""
    seed(conn, orders=50, menu_items=5)
    menu = last_altered(conn, MENU)
    change = change_orders(conn, 4)
    assert change.rows == 4
    assert change.last_altered_before is not None and change.last_altered_after is not None
    assert change.last_altered_before < change.last_altered_after == last_altered(conn)
    assert last_altered(conn, MENU) == menu
