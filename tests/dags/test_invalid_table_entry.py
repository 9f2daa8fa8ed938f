"""One broken entry in the tables config does not take the other tables' DAGs down.

The real ``dags/snowberg_tables.py`` is parsed by Airflow's DagBag with a
config of good and bad entries: the good tables get their DAGs, each bad
entry gets a DAG named for it whose only task fails with the config error,
and the error is logged and recorded as a warning of the file at parse time.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "snowberg_tables.py"

GOOD = {
    "name": "orders",
    "source": {"table": "DB.SHOP.ORDERS"},
    "target": "shop.orders",
    "cursor": {"column": "updated_at"},
    "primary_key": ["order_id"],
}


def _bag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tables: list[Any]) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    path = tmp_path / "tables.yaml"
    path.write_text(yaml.safe_dump({"tables": tables}))
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(path))
    return DagBag(dag_folder=str(DAG_FILE))


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_typo_in_one_entry_leaves_the_other_tables_loading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from snowberg.config.table_config import ConfigError

    bad = {**GOOD, "name": "payments", "target": "shop.payments", "cursor": {"colum": "updated_at"}}
    # Airflow reconfigures logging when the bag is first built, so listen on the module's logger itself.
    records = _Records()
    logging.getLogger("snowberg.airflow.dag_factory").addHandler(records)
    try:
        bag = _bag(tmp_path, monkeypatch, [GOOD, bad])
    finally:
        logging.getLogger("snowberg.airflow.dag_factory").removeHandler(records)
    assert not bag.import_errors, bag.import_errors
    assert {"snowberg_orders", "snowberg_orders__checks", "snowberg_payments"} <= set(bag.dag_ids)
    assert {t.task_id for t in bag.dags["snowberg_orders"].tasks} >= {"plan", "load", "publish"}

    stand_in = bag.dags.get("snowberg_payments")
    assert [t.task_id for t in stand_in.tasks] == ["config_error"] and "invalid-config" in stand_in.tags
    assert stand_in.schedule is not None  # it runs (and fails) where the load would have run
    with pytest.raises(ConfigError, match=r"table 'payments': field 'cursor.colum': unknown key"):
        stand_in.get_task("config_error").execute({})

    assert any("table 'payments': field 'cursor.colum'" in line for line in records.lines), records.lines
    warned = [w for ws in bag.captured_warnings.values() for w in ws]
    assert any("table 'payments'" in w for w in warned), warned


def test_an_entry_without_a_usable_name_or_schedule_still_gets_a_stand_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad_name = {**GOOD, "name": "Orders-2\n", "target": "shop.orders2"}
    duplicate = {**GOOD, "schedule": "every tuesday"}  # duplicate of orders, and a schedule Airflow refuses
    bad_schedule = {**GOOD, "name": "refunds", "target": "shop.refunds", "schedule": "every tuesday"}
    bag = _bag(tmp_path, monkeypatch, [GOOD, bad_name, duplicate, "not a mapping", bad_schedule])
    assert not bag.import_errors, bag.import_errors
    ids = {"snowberg_orders", "snowberg_invalid_entry_2", "snowberg_invalid_entry_3", "snowberg_invalid_entry_4"}
    assert ids | {"snowberg_refunds"} <= set(bag.dag_ids)
    assert "duplicate name or target 'orders'" in bag.dags["snowberg_invalid_entry_3"].get_task("config_error").error
    refunds = bag.dags["snowberg_refunds"]
    assert [t.task_id for t in refunds.tasks] == ["config_error"]
    assert "table 'refunds'" in refunds.get_task("config_error").error and "snowberg_refunds__checks" not in bag.dag_ids


def test_a_file_that_is_not_a_tables_config_is_still_an_import_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    path = tmp_path / "tables.yaml"
    path.write_text("tables: [\n")
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(path))
    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.import_errors and "not valid YAML" in next(iter(bag.import_errors.values()))
