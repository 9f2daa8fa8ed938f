"""The table health operator: its report, a breach, warn-only thresholds, a missing table."""

from __future__ import annotations

from typing import Any

import pytest

# ---------------------------------------------------------------------------
# The operator


def test_operator_returns_report(use_catalog: Any, partitioned: Any, context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.health import TableHealthOperator

    out = TableHealthOperator(task_id="h", table="lake.sales", thresholds={"max_partition_skew": 10}).execute(context)
    assert out["healthy"] and out["data_files"] == 5 and out["partition_skew"] == 4.0
    assert out["limits"] == {"small_file_size": 32 * 1024 * 1024, "max_partition_skew": 10.0}


def test_operator_fails_on_breach(use_catalog: Any, partitioned: Any, context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.airflow.operators.health import TableHealthOperator

    op = TableHealthOperator(
        task_id="h",
        table="lake.sales",
        thresholds={"max_partition_skew": 2, "min_stats_coverage": 0.5},
        table_name="sales",
    )
    with pytest.raises(SnowbergCheckFailed) as ei:
        op.execute(context)
    err = ei.value
    assert err.check == "health" and str(err).startswith("sales is unhealthy")
    assert err.observed == {"partition_skew": 4.0}
    assert err.expected == {"partition_skew": "<= 2.0"}
    assert context["ti"].xcom["result"]["healthy"] is False


def test_operator_warn_only(use_catalog: Any, partitioned: Any, context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.health import TableHealthOperator

    out = TableHealthOperator(
        task_id="h", table="lake.sales", thresholds={"max_partition_skew": 2, "fail_on_breach": False}
    ).execute(context)
    assert out["healthy"] is False and out["breaches"][0]["metric"] == "partition_skew"


def test_operator_missing_table(use_catalog: Any, context: dict[str, Any]) -> None:
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed
    from snowberg.airflow.operators.health import TableHealthOperator

    with pytest.raises(SnowbergCheckFailed, match="does not exist"):
        TableHealthOperator(task_id="h", table="lake.missing").execute(context)


def test_operator_rejects_bad_thresholds() -> None:
    from pydantic import ValidationError

    from snowberg.airflow.operators.health import TableHealthOperator

    with pytest.raises(ValidationError, match="max_partition_skew"):
        TableHealthOperator(task_id="h", table="lake.sales", thresholds={"max_partition_skew": 0.5})
