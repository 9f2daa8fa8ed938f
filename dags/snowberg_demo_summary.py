"""Airflow DAG: the demo's downstream transform, scheduled on the orders table's Asset.

(The words "airflow" and "dag" in this file let Airflow's safe-mode discovery find it.)

Each commit of the ``demo_orders`` load updates the Asset ``iceberg://lake/shop/orders``;
Airflow then runs this DAG: margin per truck brand and category into ``shop.brand_margin``,
checked against the orders. Thin: the transform lives in ``snowberg.local.summary``.
"""

import os
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Asset, task

from snowberg.config.table_config import load_config
from snowberg.local.summary import asset_uri_and_name, load_summary_config

INCLUDE = Path(__file__).resolve().parent.parent / "include"
CFG = load_summary_config(os.environ.get("SNOWBERG_SUMMARY_CONFIG") or INCLUDE / "demo_summary.yaml")
TABLES = load_config(os.environ.get("SNOWBERG_TABLES_CONFIG") or INCLUDE / "tables.yaml")
ORDERS = next((t for t in TABLES.tables if t.name == CFG.orders_table), None)

if ORDERS is not None:
    with DAG(
        dag_id=CFG.dag_id,
        schedule=[Asset(*asset_uri_and_name(ORDERS.catalog, ORDERS.target))],
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["snowberg", "demo", "downstream"],
        doc_md=f"## Demo downstream: margin per truck brand and category\n\nRuns when `{ORDERS.target}` changes "
        f"(its Asset), writes `{CFG.target}` in one commit and checks it reconciles with the orders "
        "(every order has a menu item, revenue equals the orders' total, margins in range).",
        default_args={"owner": CFG.owner, "retries": 1},
    ):

        @task(outlets=[Asset(*asset_uri_and_name(CFG.catalog, CFG.target))])
        def brand_margin() -> dict[str, object]:
            from snowberg.iceberg.catalogs import open_catalog
            from snowberg.local.summary import build_summary

            return build_summary(open_catalog(CFG.catalog), CFG).to_dict()

        brand_margin()
