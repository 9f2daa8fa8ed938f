"""The demo's downstream DAG, scheduled on the orders table's Asset. Called from a two-line DAG file.

Each commit of the ``demo_orders`` load updates the Asset ``iceberg://lake/shop/orders``;
Airflow then runs this DAG: margin per truck brand and category into ``shop.brand_margin``,
checked against the orders. The transform itself lives in ``snowberg.local.summary``.
"""

from __future__ import annotations

from pathlib import Path

import pendulum
from airflow.sdk import DAG, Asset, task

from snowberg.config.locations import ConfigFile, config_path
from snowberg.config.table_config import load_config
from snowberg.local.summary import SummaryConfig, asset_uri_and_name, load_summary_config


def _asset(catalog: str, target: str) -> Asset:
    # By keyword: Asset's first positional parameter is the name, not the URI.
    uri, name = asset_uri_and_name(catalog, target)
    return Asset(uri=uri, name=name)


def build_summary_dag(cfg: SummaryConfig, orders_catalog: str, orders_target: str) -> DAG:
    with DAG(
        dag_id=cfg.dag_id,
        schedule=[_asset(orders_catalog, orders_target)],
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["snowberg", "demo", "downstream"],
        doc_md=f"## Demo downstream: margin per truck brand and category\n\nRuns when `{orders_target}` changes "
        f"(its Asset), writes `{cfg.target}` in one commit and checks it reconciles with the orders "
        "(every order has a menu item, revenue equals the orders' total, margins in range).",
        default_args={"owner": cfg.owner, "retries": 1},
    ) as dag:

        @task(outlets=[_asset(cfg.catalog, cfg.target)])
        def brand_margin() -> dict[str, object]:
            from snowberg.iceberg.catalogs import open_catalog
            from snowberg.local.summary import build_summary

            return build_summary(open_catalog(cfg.catalog), cfg).to_dict()

        brand_margin()
    return dag


def build_summary_dags(
    config: str | Path | None = None, tables_config: str | Path | None = None, *, dag_file: str | Path | None = None
) -> dict[str, DAG]:
    """The summary DAG keyed by its id, or nothing when the tables config has no orders table to schedule on."""
    cfg = load_summary_config(config_path(ConfigFile.SUMMARY, config, dag_file=dag_file))
    tables = load_config(config_path(ConfigFile.TABLES, tables_config, dag_file=dag_file))
    orders = next((t for t in tables.tables if t.name == cfg.orders_table), None)
    if orders is None:
        return {}
    return {cfg.dag_id: build_summary_dag(cfg, orders.catalog, orders.target)}
