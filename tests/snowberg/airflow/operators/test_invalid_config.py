"""The stand-in task of a broken table entry: it fails, with the entry's error, and never retries."""

from __future__ import annotations

import pytest

from snowberg.airflow.operators.invalid_config import InvalidTableConfigOperator
from snowberg.config.table_config import ConfigError


def test_the_task_fails_with_the_config_error_and_does_not_retry() -> None:
    op = InvalidTableConfigOperator(task_id="config_error", error="table 'orders': field 'cursor.column': required")
    assert op.retries == 0
    with pytest.raises(
        ConfigError, match=r"not loaded until its entry is fixed: table 'orders': field 'cursor\.column'"
    ):
        op.execute({})


def test_it_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        InvalidTableConfigOperator("config_error", "boom")  # type: ignore[misc]
