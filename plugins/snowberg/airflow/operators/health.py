"""Table health from metadata: statistics coverage, partition skew, file sizes."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from snowberg.airflow.operators.check_base import SnowbergCheckOperator
from snowberg.airflow.operators.lake_access import names_lake_connection
from snowberg.config.check_settings import HealthThresholds

log = logging.getLogger(__name__)


class TableHealthOperator(SnowbergCheckOperator):
    """Report an Iceberg table's health from metadata, and fail on breached limits.

    Reads the metadata file and the current snapshot's manifests (never a
    data file): snapshot history, data and delete files, rows, bytes,
    column-statistics coverage (null counts, lower/upper bounds), partition
    skew (max/min files per partition), small-file ratio and the table
    properties. The report is logged as a table and returned (XCom).

    .. code-block:: python

        TableHealthOperator(
            task_id="table_health",
            table="lake.orders",
            catalog="lake",
            thresholds={"min_stats_coverage": 0.9, "max_small_file_ratio": 0.5, "max_partition_skew": 20},
            table_name="orders",
        )

    :param table: Iceberg identifier ``namespace.table``. Templated.
    :param catalog: pyiceberg catalog name. Templated.
    :param thresholds: a ``HealthThresholds`` (or its dict form); unset limits are only reported.
    :param table_name: label for reports and alerts (default: ``table``). Templated.
    """

    template_fields: Sequence[str] = ("table", "catalog", "table_name")
    snowberg_check = "health"

    def __init__(
        self,
        *,
        table: str,
        catalog: str = "lake",
        thresholds: HealthThresholds | Mapping[str, Any] | None = None,
        table_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.catalog = catalog
        self.thresholds = (
            thresholds
            if isinstance(thresholds, HealthThresholds)
            else HealthThresholds.model_validate(dict(thresholds or {}))
        )
        self.table_name = table_name

    @names_lake_connection("catalog")
    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.iceberg.tables import find_table

        label = self.table_name or self.table
        table = find_table(open_catalog(self.catalog), self.table)
        if table is None:
            raise self._fail(
                context,
                f"{label}: table {self.table} does not exist",
                table=self.table,
                observed="table does not exist",
                expected="an existing table",
                details={"table": self.table, "exists": False},
            )
        report = health_report(table, name=self.table, thresholds=self.thresholds, log=self.log)
        out = report.to_dict()
        if failing(report, self.thresholds):
            raise self._fail(
                context,
                f"{label} is unhealthy: " + "; ".join(b.message for b in report.breaches),
                table=self.table,
                observed={b.metric: b.observed for b in report.breaches},
                expected={
                    b.metric: (f">= {b.limit}" if b.metric == "stats_coverage" else f"<= {b.limit}")
                    for b in report.breaches
                },
                details=out,
            )
        for b in report.breaches:
            self.log.warning("health limit breached (fail_on_breach is off): %s", b.message)
        return out


def health_report(table: Any, *, name: str, thresholds: HealthThresholds, log: Any = log) -> Any:
    """The table's health report from its metadata (``snowberg.checks.health``), logged as a table."""
    from snowberg.checks import health

    report = health.collect(table, name=name, thresholds=thresholds)
    log.info("\n%s", health.render(report))
    return report


def failing(report: Any, thresholds: HealthThresholds) -> bool:
    """Does ``report`` fail the health check (a breached limit, and ``fail_on_breach``)?

    A load that commits in its plan task (``inline_load_rows``) asks this of the report it made right after its
    commit: only then does the ``table_health`` task start, and fail with the check's own alert.
    """
    return bool(report.breaches) and thresholds.fail_on_breach
