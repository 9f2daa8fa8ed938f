"""Demo data: a food-truck menu and its orders (in the spirit of seed 002).

ORDERS carries a mix of types (NUMBER at several precisions and scales,
FLOAT, VARCHAR, BOOLEAN, DATE, TIME, VARIANT, TIMESTAMP_TZ, TIMESTAMP_NTZ)
and an ``UPDATED_AT`` watermark column. Rows are generated inside the
emulator with ``GENERATOR`` so seeding 120k rows takes well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

DATABASE = "SNOWBERG_DEMO"
SCHEMA = "SHOP"
ORDERS = f"{DATABASE}.{SCHEMA}.ORDERS"

MENU_DDL = f"""
CREATE TABLE IF NOT EXISTS {DATABASE}.{SCHEMA}.MENU (
    MENU_ITEM_ID NUMBER(38,0),
    TRUCK_BRAND VARCHAR(40),
    ITEM_NAME VARCHAR(60),
    ITEM_CATEGORY VARCHAR(20),
    COST_OF_GOODS NUMBER(10,2),
    SALE_PRICE NUMBER(10,2),
    IS_VEGETARIAN BOOLEAN,
    UPDATED_AT TIMESTAMP_NTZ(9)
)"""

ORDERS_DDL = f"""
CREATE TABLE IF NOT EXISTS {DATABASE}.{SCHEMA}.ORDERS (
    ORDER_ID NUMBER(38,0),
    CUSTOMER_ID NUMBER(10,0),
    MENU_ITEM_ID NUMBER(38,0),
    QUANTITY NUMBER(3,0),
    UNIT_PRICE NUMBER(10,2),
    ORDER_TOTAL NUMBER(12,2),
    DISCOUNT_RATE FLOAT,
    ORDER_CHANNEL VARCHAR(16),
    IS_DELIVERY BOOLEAN,
    ORDER_DATE DATE,
    PICKUP_TIME TIME,
    DETAILS VARIANT,
    PLACED_AT TIMESTAMP_TZ,
    UPDATED_AT TIMESTAMP_NTZ(9)
)"""

BRANDS = ["Kitakata Ramen Bar", "Freezing Point", "Smoky BBQ", "Tasty Tibs", "Le Coin des Crepes", "Guac n' Roll"]
CATEGORIES = ["Main", "Snack", "Dessert", "Beverage"]


def _case(expr: str, values: list[str]) -> str:
    whens = " ".join(f"WHEN {i} THEN '{v.replace(chr(39), chr(39) * 2)}'" for i, v in enumerate(values))
    return f"CASE MOD({expr}, {len(values)}) {whens} END"


def seed(conn: Any, orders: int = 120_000, menu_items: int = 60, base: str = "2026-10-01 00:00:00") -> dict[str, int]:
    """Create and fill the demo tables; a table that has rows is kept as it is (the local stack keeps its data).

    Returns the row counts (``orders``, ``menu``) and how many rows this call inserted (``inserted``: 0 when
    both tables were kept).
    """
    inserted = 0
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {DATABASE}.{SCHEMA}")
    cur.execute(MENU_DDL)
    cur.execute(ORDERS_DDL)
    cur.execute(f"SELECT COUNT(*) FROM {DATABASE}.{SCHEMA}.MENU")
    if cur.fetchone()[0] == 0:
        brands = _case("seq4()", BRANDS)
        cats = _case("seq4()", CATEGORIES)
        cur.execute(
            f"""INSERT INTO {DATABASE}.{SCHEMA}.MENU
            SELECT seq4() + 1,
                   {brands},
                   'Item ' || (seq4() + 1),
                   {cats},
                   (MOD(seq4() * 37, 700) + 100) / 100,
                   (MOD(seq4() * 53, 1500) + 300) / 100,
                   MOD(seq4(), 3) = 0,
                   DATEADD(second, seq4(), '{base}'::TIMESTAMP_NTZ)
            FROM TABLE(GENERATOR(ROWCOUNT => {menu_items}))"""
        )
        inserted += menu_items
    cur.execute(f"SELECT COUNT(*) FROM {DATABASE}.{SCHEMA}.ORDERS")
    if cur.fetchone()[0] == 0:
        # Orders spread over 30 days before `base`; updated a little after placement.
        cur.execute(
            f"""INSERT INTO {DATABASE}.{SCHEMA}.ORDERS
            SELECT seq4() + 1,
                   MOD(seq4() * 7919, 25000) + 1,
                   MOD(seq4() * 31, {menu_items}) + 1,
                   MOD(seq4(), 4) + 1,
                   (MOD(seq4() * 53, 1500) + 300) / 100,
                   (MOD(seq4(), 4) + 1) * (MOD(seq4() * 53, 1500) + 300) / 100,
                   MOD(seq4(), 10) / 40,
                   CASE MOD(seq4(), 3) WHEN 0 THEN 'app' WHEN 1 THEN 'walk-up' ELSE 'phone' END,
                   MOD(seq4(), 5) = 0,
                   CAST(DATEADD(second, -MOD(seq4() * 7, 2592000), '{base}'::TIMESTAMP_NTZ) AS DATE),
                   '12:30:00'::TIME,
                   OBJECT_CONSTRUCT('notes', 'order ' || seq4(), 'extras', MOD(seq4(), 4)),
                   DATEADD(second, -MOD(seq4() * 7, 2592000), '{base}'::TIMESTAMP_TZ),
                   DATEADD(second, 60 - MOD(seq4() * 7, 2592000), '{base}'::TIMESTAMP_NTZ)
            FROM TABLE(GENERATOR(ROWCOUNT => {orders}))"""
        )
        inserted += orders
    cur.execute(f"SELECT COUNT(*) FROM {DATABASE}.{SCHEMA}.ORDERS")
    n_orders = cur.fetchone()[0]
    cur.execute(f"SELECT COUNT(*) FROM {DATABASE}.{SCHEMA}.MENU")
    n_menu = cur.fetchone()[0]
    cur.close()
    return {"orders": n_orders, "menu": n_menu, "inserted": inserted}


def touch_orders(conn: Any, count: int) -> int:
    """Update ``count`` orders as an application would: new values, UPDATED_AT = now (UTC)."""
    cur = conn.cursor()
    cur.execute(
        f"""UPDATE {DATABASE}.{SCHEMA}.ORDERS
        SET QUANTITY = QUANTITY + 1,
            ORDER_TOTAL = (QUANTITY + 1) * UNIT_PRICE,
            UPDATED_AT = CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)
        WHERE MOD(ORDER_ID, %(step)s) = 0 AND ORDER_ID <= %(limit)s""",
        {"step": 7, "limit": count * 7},
    )
    n = cur.rowcount
    cur.close()
    return int(n or 0)


def last_altered(conn: Any, table: str = ORDERS) -> datetime | None:
    """``table``'s LAST_ALTERED, read as snowberg's loads read it; None when Snowflake reports no real time.

    One metadata query (``snowberg.snowflake.source_version``). On the local stack the emulator answers
    with the table's last commit time (``snowberg.local.emulator``).
    """
    from snowberg.core.identifiers import TableName
    from snowberg.snowflake.source_version import observe_table

    version = observe_table(TableName.parse(table), conn).version
    return datetime.fromisoformat(version.last_altered) if version else None


@dataclass(frozen=True, kw_only=True)
class OrdersChange:
    """Orders changed at the source, and the table's LAST_ALTERED before and after (later, if it moved)."""

    rows: int
    last_altered_before: datetime | None
    last_altered_after: datetime | None


def change_orders(conn: Any, count: int) -> OrdersChange:
    """Change ``count`` demo orders (``touch_orders``) and read ORDERS' LAST_ALTERED before and after.

    What a source-change watcher sees: on the local stack the time moves to the UPDATE's commit.
    """
    before = last_altered(conn)
    rows = touch_orders(conn, count)
    return OrdersChange(rows=rows, last_altered_before=before, last_altered_after=last_altered(conn))
