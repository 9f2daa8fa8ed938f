"""A stand-in for a table whose config entry is invalid.

One broken entry in ``include/tables.yaml`` must not take the other tables'
DAGs down with it (an import error would), yet it has to stay as visible as
an import error. So the factory builds, under the entry's name, a DAG whose
only task is this operator: every scheduled run fails with the config error
(and alerts, when the entry's ``alerts`` section itself is valid), until the
entry is fixed and the real DAG takes its place.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from snowberg.config.table_config import ConfigError


class InvalidTableConfigOperator(BaseOperator):
    """Fails with the validation error of a table's config entry; nothing else runs."""

    template_fields = ()
    ui_color = "#f4a6a6"

    def __init__(self, *, error: str, **kwargs: Any) -> None:
        kwargs.setdefault("retries", 0)  # the file does not fix itself between tries
        super().__init__(**kwargs)
        self.error = error

    def execute(self, context: Any) -> None:
        raise ConfigError(f"this table is not loaded until its entry is fixed: {self.error}")
