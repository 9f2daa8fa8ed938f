"""The demo's downstream transform: raw orders → margin per truck brand and item category, with checks.

What a user builds on a loaded lake table (in the spirit of seed 002's menu
summary): a DAG scheduled on the orders table's Asset reads the lake tables,
aggregates, writes a summary Iceberg table in one commit, and checks it:

* every order matches a menu item (a dimension gap would silently drop revenue);
* the summary's revenue equals the orders' total (nothing lost or doubled in the join);
* margins lie in (-100 %, 100 %] and no key is NULL.

Money stays decimal end to end (``NUMBER(p,2)`` in the source → Iceberg
``decimal``), so the reconciliation is exact. Configured in
``include/demo_summary.yaml``; imported by the DAG file, so nothing heavy at module level.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, field_validator

from snowberg.core.identifiers import IcebergName

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

log = logging.getLogger(__name__)

SOURCE_SNAPSHOT = "snowberg.summary.orders-snapshot-id"


class SummaryConfig(BaseModel):
    """``include/demo_summary.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dag_id: str = "snowberg_demo_brand_margin"
    orders_table: str = "demo_orders"  # a table name from tables.yaml: its Asset schedules the DAG
    catalog: str = "lake"
    orders: str = "shop.orders"
    menu: str = "shop.menu"
    target: str = "shop.brand_margin"
    owner: str = "data-engineering"

    @field_validator("orders", "menu", "target")
    @classmethod
    def _names(cls, v: str) -> str:
        IcebergName.parse(v)
        return v


def asset_uri_and_name(catalog: str, target: str) -> tuple[str, str]:
    """The Asset URI and name of a lake table, as the table's load DAG emits it.

    The same rule as ``snowberg.airflow.dag_factory.table_asset`` (a test holds
    them equal); spelled out here so the downstream DAG file need not import the
    whole DAG factory and its operators at parse time.
    """
    n = IcebergName.parse(target)
    return f"iceberg://{catalog}/{n.namespace}/{n.table}", f"iceberg_{catalog}_{n.namespace}_{n.table}"


def load_summary_config(path: str | Path) -> SummaryConfig:
    """The demo summary's settings from ``demo_summary.yaml`` (an empty file gives the defaults)."""
    from snowberg.config.yaml_loader import read_yaml

    return SummaryConfig.model_validate(read_yaml(path, ValueError) or {})


class SummaryCheckFailed(RuntimeError):
    """The summary does not reconcile with the orders; the message says which check."""


@dataclass(kw_only=True)
class SummaryResult:
    """What the demo's downstream summary wrote: its rows, the orders it covers, totals and the snapshots involved."""

    rows: int
    orders: int
    revenue: str
    margin: str
    snapshot_id: int
    orders_snapshot_id: int
    top: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def aggregate(orders: pa.Table, menu: pa.Table) -> pa.Table:
    """Orders joined to the menu, grouped by (truck_brand, item_category): orders, units, revenue, cost, margin."""
    import pyarrow as pa
    import pyarrow.compute as pc

    o = orders.select(["menu_item_id", "quantity", "order_total"])
    m = menu.select(["menu_item_id", "truck_brand", "item_category", "cost_of_goods"])
    joined = o.join(m, "menu_item_id", join_type="left outer")
    missing = joined.filter(pc.is_null(joined["truck_brand"])).num_rows
    if missing:
        raise SummaryCheckFailed(f"{missing} orders have no menu item: the menu table is behind the orders")
    cost = pc.multiply(joined["quantity"], joined["cost_of_goods"])
    joined = joined.append_column("cost", cost)
    g = joined.group_by(["truck_brand", "item_category"]).aggregate(
        [([], "count_all"), ("quantity", "sum"), ("order_total", "sum"), ("cost", "sum")]
    )
    revenue = pc.cast(g["order_total_sum"], pa.decimal128(18, 2))
    total_cost = pc.cast(g["cost_sum"], pa.decimal128(18, 2))
    margin = pc.subtract(revenue, total_cost)
    pct = pc.round(
        pc.multiply(pc.divide(pc.cast(margin, pa.float64()), pc.cast(revenue, pa.float64())), 100.0), ndigits=2
    )
    out = pa.table(
        {
            "truck_brand": g["truck_brand"],
            "item_category": g["item_category"],
            "orders": pc.cast(g["count_all"], pa.int64()),
            "units": pc.cast(g["quantity_sum"], pa.int64()),
            "revenue": revenue,
            "cost": total_cost,
            "margin": pc.cast(margin, pa.decimal128(18, 2)),
            "margin_pct": pct,
        }
    )
    return out.sort_by([("margin_pct", "descending"), ("truck_brand", "ascending")])


def check(summary: pa.Table, orders: pa.Table) -> None:
    """The summary's checks (see the module doc); raises ``SummaryCheckFailed``."""
    import pyarrow.compute as pc

    if summary.num_rows == 0:
        raise SummaryCheckFailed("the summary is empty")
    for col in ("truck_brand", "item_category"):
        if summary[col].null_count:
            raise SummaryCheckFailed(f"{summary[col].null_count} summary rows have no {col}")
    got, want = pc.sum(summary["revenue"]).as_py(), pc.sum(orders["order_total"]).as_py()
    if got != want:
        raise SummaryCheckFailed(f"summary revenue {got} != orders total {want}")
    n_orders = pc.sum(summary["orders"]).as_py()
    if n_orders != orders.num_rows:
        raise SummaryCheckFailed(f"summary counts {n_orders} orders, the orders table has {orders.num_rows}")
    pct = summary["margin_pct"]
    bad = summary.filter(pc.or_(pc.less_equal(pct, -100.0), pc.greater(pct, 100.0))).num_rows
    if bad:
        raise SummaryCheckFailed(f"{bad} summary rows have a margin outside (-100 %, 100 %]")


def build_summary(catalog: Catalog, cfg: SummaryConfig) -> SummaryResult:
    """Read orders and menu from the lake, aggregate, check, and replace the summary table in one commit."""
    import pyarrow.compute as pc

    from snowberg.iceberg.tables import ensure_namespace

    orders_t = catalog.load_table(cfg.orders)
    snap = orders_t.current_snapshot()
    if snap is None:
        raise SummaryCheckFailed(f"{cfg.orders} has no snapshot yet")
    orders = orders_t.scan(
        snapshot_id=snap.snapshot_id, selected_fields=("menu_item_id", "quantity", "order_total")
    ).to_arrow()
    menu = catalog.load_table(cfg.menu).scan().to_arrow()
    summary = aggregate(orders, menu)
    check(summary, orders)
    n = IcebergName.parse(cfg.target)
    ensure_namespace(catalog, n.namespace)
    target = catalog.create_table_if_not_exists((n.namespace, n.table), schema=summary.schema)
    target.overwrite(summary, snapshot_properties={SOURCE_SNAPSHOT: str(snap.snapshot_id)})
    written = catalog.load_table((n.namespace, n.table))
    back = written.scan().to_arrow()
    if back.num_rows != summary.num_rows:
        raise SummaryCheckFailed(f"wrote {summary.num_rows} summary rows, read back {back.num_rows}")
    head = written.current_snapshot()
    assert head is not None
    result = SummaryResult(
        rows=summary.num_rows,
        orders=orders.num_rows,
        revenue=str(pc.sum(summary["revenue"]).as_py()),
        margin=str(pc.sum(summary["margin"]).as_py()),
        snapshot_id=head.snapshot_id,
        orders_snapshot_id=snap.snapshot_id,
        top=[
            {k: (str(v) if k in ("revenue", "margin", "cost") else v) for k, v in r.items()}
            for r in summary.slice(0, 3).to_pylist()
        ],
    )
    log.info(
        "%s: %d (brand, category) rows from %s orders of snapshot %s; revenue %s, margin %s — checks passed",
        cfg.target,
        result.rows,
        f"{result.orders:,}",
        snap.snapshot_id,
        result.revenue,
        result.margin,
    )
    return result
