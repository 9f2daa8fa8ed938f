"""Checks on the lake and its storage, all from metadata or tiny probes.

* ``external_volume`` — Snowflake's ``SYSTEM$VERIFY_EXTERNAL_VOLUME`` parsed step by step
* ``probe``     — write/read/list/delete a probe object with the lake writer's FileIO
* ``freshness`` — snapshot age and watermark lag against an SLA (metadata only)
* ``health``    — snapshots, files, rows, statistics coverage, partition skew (manifests only)
* ``volume``, ``hashdiff``, ``anomaly`` — the lake's rows against Snowflake's, and run-to-run volume

Their settings (the ``alerts:``, ``health:`` and ``volume:`` sections) live in ``snowberg.config``.

This package imports nothing heavy at module level; the Airflow operators
live in ``snowberg.airflow.operators`` (freshness, health, storage).
"""

from __future__ import annotations

from typing import Any


class CheckFailed(Exception):
    """A check ran and its result breaches the expectation.

    Carries what an alert needs: which table, which check, what was observed
    and what was expected. ``details`` is the check's structured result.
    """

    def __init__(
        self,
        message: str,
        *,
        table: str | None,
        check: str,
        observed: Any = None,
        expected: Any = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.table = table
        self.check = check
        self.observed = observed
        self.expected = expected
        self.details = details or {}

    def summary(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "check": self.check,
            "observed": self.observed,
            "expected": self.expected,
            "message": self.message,
        }


def find_check_failure(exc: BaseException | None) -> CheckFailed | None:
    """The ``CheckFailed`` in ``exc`` or its causes (operators may wrap it)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, CheckFailed):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


__all__ = ["CheckFailed", "find_check_failure"]
