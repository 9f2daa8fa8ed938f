"""snowberg.local.summary_dag: the demo's downstream DAG is built only when its orders table is configured."""

from __future__ import annotations

from pathlib import Path

import yaml

from snowberg.local.summary_dag import build_summary_dags


def _tables(path: Path, names: list[str]) -> Path:
    entries = [{"name": n, "source": {"table": "DB.S.T"}, "target": f"shop.{n}"} for n in names]
    path.write_text(yaml.safe_dump({"tables": entries}))
    return path


def test_scheduled_on_the_orders_tables_asset(tmp_path: Path) -> None:
    (tmp_path / "summary.yaml").write_text("orders_table: demo_orders\n")
    dags = build_summary_dags(tmp_path / "summary.yaml", _tables(tmp_path / "t.yaml", ["demo_orders"]))
    dag = dags["snowberg_demo_brand_margin"]
    assert [a.uri for a in dag.timetable.asset_condition.objects] == ["iceberg://lake/shop/demo_orders"]
    assert [a.uri for a in dag.task_dict["brand_margin"].outlets] == ["iceberg://lake/shop/brand_margin"]


def test_no_dag_without_the_orders_table(tmp_path: Path) -> None:
    (tmp_path / "summary.yaml").write_text("")
    assert build_summary_dags(tmp_path / "summary.yaml", _tables(tmp_path / "t.yaml", ["other"])) == {}
