"""What every snowberg check operator shares: a result in XCom, and a failure that carries what alerts need.

The check operators (freshness, health, storage, volume) subclass
``SnowbergCheckOperator``; they take keyword arguments only and import
nothing heavy at module level (DAG parsing stays fast).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from snowberg.checks import CheckFailed
from snowberg.core.durations import parse_duration

log = logging.getLogger(__name__)


class SnowbergCheckFailed(CheckFailed, AirflowFailException):
    """A check failed: fail the task without retrying, and tell the alerts why."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_check_failed,
            (self.message, self.table, self.check, self.observed, self.expected, self.details),
        )


def _rebuild_check_failed(
    message: str, table: str | None, check: str, observed: Any, expected: Any, details: dict[str, Any]
) -> SnowbergCheckFailed:
    return SnowbergCheckFailed(message, table=table, check=check, observed=observed, expected=expected, details=details)


def check_duration(value: Any, what: str) -> timedelta | None:
    if value is None or value == "":
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


class SnowbergCheckOperator(BaseOperator):
    """The base of snowberg's checks: a result pushed to XCom, a failure that carries what alerts need."""

    snowberg_check = "check"
    ui_color = "#d6eaf8"

    def _push(self, context: Mapping[str, Any], value: Any) -> None:
        ti = context.get("ti")
        if ti is not None:
            try:
                ti.xcom_push(key="result", value=value)
            except Exception:  # noqa: BLE001 - a failed XCom must not hide the check's own failure
                self.log.warning("could not push the check result to XCom", exc_info=True)

    def _fail(
        self,
        context: Mapping[str, Any],
        message: str,
        *,
        table: str | None,
        observed: Any,
        expected: Any,
        details: dict[str, Any],
    ) -> SnowbergCheckFailed:
        self._push(context, details)
        return SnowbergCheckFailed(
            message, table=table, check=self.snowberg_check, observed=observed, expected=expected, details=details
        )
