"""An orders source in the emulator and what the lake holds of it: shared by the slice and mapped-slice tests."""

from __future__ import annotations

from typing import Any

from snowberg.config.table_config import parse_config
from snowberg.core.window import Window


def make_orders(db: Any, n: int, *, table: str = "ORDERS", tie: bool = False, base: str = "2026-10-01 00:00:00") -> str:
    """An orders table of n rows in the test's emulator database (cursor UPDATED_AT spread over 30 days)."""
    name = db.table(table)
    db.sql(f"""CREATE OR REPLACE TABLE {name} (
        ORDER_ID NUMBER(38,0), CUSTOMER_ID NUMBER(10,0), AMOUNT NUMBER(12,2), CHANNEL VARCHAR(16),
        ORDER_DATE DATE, DETAILS VARIANT, UPDATED_AT TIMESTAMP_NTZ(9))""")
    updated = (
        f"'{base}'::TIMESTAMP_NTZ" if tie else f"DATEADD(second, -MOD(seq4() * 7, 2592000), '{base}'::TIMESTAMP_NTZ)"
    )
    db.sql(f"""INSERT INTO {name}
        SELECT seq4() + 1, MOD(seq4() * 7919, 25000) + 1, (MOD(seq4() * 53, 1500) + 300) / 100,
               CASE MOD(seq4(), 3) WHEN 0 THEN 'app' WHEN 1 THEN 'walk-up' ELSE 'phone' END,
               CAST(DATEADD(second, -MOD(seq4() * 7, 2592000), '{base}'::TIMESTAMP_NTZ) AS DATE),
               OBJECT_CONSTRUCT('n', seq4()), {updated}
        FROM TABLE(GENERATOR(ROWCOUNT => {n}))""")
    return name


def table_cfg(source: str, **over: Any) -> Any:
    entry = {
        "name": "orders",
        "source": {"table": source},
        "target": "shop.orders",
        "cursor": {"column": "updated_at"},
        "primary_key": ["order_id"],
    }
    entry.update(over)
    return parse_config({"tables": [entry]}).tables[0]


def lake_rows(catalog: Any, ident: str = "shop.orders") -> Any:
    return catalog.load_table(ident).scan().to_arrow()


def snowberg_snapshots(catalog: Any, ident: str = "shop.orders") -> list[Any]:
    t = catalog.load_table(ident)
    return [s for s in t.snapshots() if s.summary and "snowberg.watermark" in s.summary.additional_properties]


def plan_window(cfg: Any, conn: Any, catalog: Any, run_id: str, **kw: Any) -> Window:
    from snowberg.iceberg.tables import load_table_or_none
    from snowberg.load.plan import plan_run

    return plan_run(cfg, conn, load_table_or_none(catalog, cfg), run_id=run_id, **kw)
