"""The demo's downstream transform on real lake tables: exact decimal margins, checks that fail loudly."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from snowberg.local.summary import SummaryCheckFailed, SummaryConfig, build_summary

D = pa.decimal128


def _lake(catalog: Any, menu_ids: list[int]) -> None:
    catalog.create_namespace("shop")
    catalog.create_table(
        "shop.menu",
        schema=pa.schema(
            [
                ("menu_item_id", D(38, 0)),
                ("truck_brand", pa.string()),
                ("item_category", pa.string()),
                ("cost_of_goods", D(10, 2)),
            ]
        ),
    )
    catalog.load_table("shop.menu").append(
        pa.table(
            {
                "menu_item_id": pa.array([Decimal(i) for i in menu_ids], D(38, 0)),
                "truck_brand": ["Smoky BBQ", "Smoky BBQ", "Freezing Point"][: len(menu_ids)],
                "item_category": ["Main", "Snack", "Dessert"][: len(menu_ids)],
                "cost_of_goods": pa.array(
                    [Decimal("4.00"), Decimal("1.50"), Decimal("2.25")][: len(menu_ids)], D(10, 2)
                ),
            }
        )
    )
    orders = pa.table(
        {
            "order_id": pa.array([1, 2, 3, 4], pa.int64()),
            "menu_item_id": pa.array([Decimal(1), Decimal(1), Decimal(2), Decimal(3)], D(38, 0)),
            "quantity": pa.array([Decimal(2), Decimal(1), Decimal(4), Decimal(1)], D(3, 0)),
            "order_total": pa.array([Decimal("20.00"), Decimal("10.00"), Decimal("12.00"), Decimal("6.75")], D(12, 2)),
        }
    )
    catalog.create_table("shop.orders", schema=orders.schema).append(orders)


def test_margin_per_brand_and_category_reconciles_with_the_orders(catalog: Any) -> None:
    _lake(catalog, [1, 2, 3])
    r = build_summary(catalog, SummaryConfig())
    rows = {
        (x["truck_brand"], x["item_category"]): x
        for x in catalog.load_table("shop.brand_margin").scan().to_arrow().to_pylist()
    }
    assert r.rows == 3 and r.orders == 4 and r.revenue == "48.75"
    main = rows[("Smoky BBQ", "Main")]
    assert (main["orders"], main["units"], main["revenue"], main["cost"], main["margin"]) == (
        2,
        3,
        Decimal("30.00"),
        Decimal("12.00"),
        Decimal("18.00"),
    )
    assert main["margin_pct"] == 60.0
    assert rows[("Freezing Point", "Dessert")]["margin"] == Decimal("4.50")
    snap = catalog.load_table("shop.brand_margin").current_snapshot()
    assert snap.summary.additional_properties["snowberg.summary.orders-snapshot-id"] == str(r.orders_snapshot_id)
    build_summary(catalog, SummaryConfig())  # a second run replaces, never appends
    assert len(catalog.load_table("shop.brand_margin").scan().to_arrow()) == 3


def test_an_order_without_a_menu_item_fails_before_anything_is_written(catalog: Any) -> None:
    _lake(catalog, [1, 2])
    with pytest.raises(SummaryCheckFailed, match="1 orders have no menu item"):
        build_summary(catalog, SummaryConfig())
    assert not catalog.table_exists("shop.brand_margin")


def test_the_downstream_dag_schedules_on_the_asset_the_orders_load_emits() -> None:
    from snowberg.airflow.dag_factory import table_asset
    from snowberg.config.table_config import parse_config
    from snowberg.local.summary import asset_uri_and_name

    cfg = parse_config(
        {"tables": [{"name": "o", "source": {"table": "D.S.T"}, "target": "shop.orders", "cursor": {"column": "u"}}]}
    ).tables[0]
    a = table_asset(cfg)
    assert asset_uri_and_name(cfg.catalog, cfg.target) == (a.uri, a.name)
