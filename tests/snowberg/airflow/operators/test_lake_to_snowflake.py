"""Lake → Snowflake operators: their arguments (the syncs they run: tests/snowberg/sync/test_native.py and
tests/snowberg/sync/test_horizon.py, which hold the emulated Snowflake and REST catalog)."""

from __future__ import annotations

import inspect

import pytest

from snowberg.airflow.operators.lake_to_snowflake import (
    IcebergToSnowflakeIcebergOperator,
    IcebergToSnowflakeNativeOperator,
    SnowflakeVisibilityCheckOperator,
)

OPERATORS = (IcebergToSnowflakeIcebergOperator, IcebergToSnowflakeNativeOperator, SnowflakeVisibilityCheckOperator)


@pytest.mark.parametrize("operator", OPERATORS, ids=[o.__name__ for o in OPERATORS])
def test_keyword_only_with_templated_tables(operator: type) -> None:
    params = [p for p in inspect.signature(operator.__init__).parameters.values() if p.name != "self"]
    assert all(p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in params)
    with pytest.raises(TypeError):
        operator("t", "lake", "shop.orders")


def test_the_syncs_template_their_tables() -> None:
    assert {"source_table", "target_table"} <= set(IcebergToSnowflakeIcebergOperator.template_fields)
    op = IcebergToSnowflakeNativeOperator(
        task_id="sync", source_catalog="lake", source_table="shop.orders", target_table="DB.SHOP.{{ params.t }}"
    )
    op.render_template_fields({"params": {"t": "ORDERS"}})
    assert op.target_table == "DB.SHOP.ORDERS" and op.snowflake_conn_id == "snowflake_default"


def test_the_visibility_check_refuses_an_unknown_kind_naming_it() -> None:
    with pytest.raises(ValueError, match="kind must be 'native' or 'iceberg', not 'parquet'"):
        SnowflakeVisibilityCheckOperator(
            task_id="check",
            kind="parquet",  # type: ignore[arg-type]
            snowflake_conn_id="sf",
            table="DB.SHOP.ORDERS",
            sync_result={},
        )
