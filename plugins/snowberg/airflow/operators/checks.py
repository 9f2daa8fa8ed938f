"""Airflow operators for snowberg's checks.

* ``SnapshotFreshnessOperator``   — snapshot age and watermark lag vs an SLA (metadata only; optionally deferrable)
* ``TableHealthOperator``         — snapshots, files, rows, stats coverage, partition skew, small files, properties
* ``VerifyExternalVolumeOperator`` — ``SYSTEM$VERIFY_EXTERNAL_VOLUME`` step by step, plus a probe of the lake storage
* ``LakeProbeOperator``           — write/read/list/delete a probe object with the lake writer's FileIO

All of them: keyword-only arguments, ``template_fields``, no I/O in
``__init__`` (catalogs, tables and hooks are opened in ``execute()``), the
structured result as the return value (XCom ``return_value``) and, on
failure, under the XCom key ``result`` too. A breached check raises
``SnowbergCheckFailed``: an ``AirflowFailException`` (no retry: the data
will not be fresher in two minutes) that carries the table, the check, what
was observed and what was expected, which ``snowberg.airflow.alerts`` puts in the
message. Errors reaching the catalog or Snowflake are ordinary exceptions
and are retried.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException
from airflow.triggers.base import BaseTrigger, TriggerEvent

from snowberg.airflow.metrics import emit_freshness
from snowberg.checks import CheckFailed
from snowberg.checks.settings import HealthThresholds
from snowberg.core.durations import format_duration, parse_duration

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


def _duration(value: Any, what: str) -> timedelta | None:
    if value is None or value == "":
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


def _open_catalog(name: str) -> Any:
    from snowberg.iceberg import tables as lake

    return lake.open_catalog(name)


def _load_table(catalog: Any, identifier: str) -> Any | None:
    from pyiceberg.exceptions import NoSuchTableError

    from snowberg.core.identifiers import IcebergName

    n = IcebergName.parse(identifier)
    try:
        return catalog.load_table((n.namespace, n.table))
    except NoSuchTableError:
        return None


class _SnowbergCheck(BaseOperator):
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


# ---------------------------------------------------------------------------
# Freshness


class FreshnessTrigger(BaseTrigger):
    """Poll a table's metadata until it is fresh or ``deadline`` passes (runs in the triggerer)."""

    def __init__(
        self,
        *,
        catalog: str,
        table: str,
        sla_seconds: float | None,
        max_watermark_lag_seconds: float | None,
        deadline: str,
        poll_interval: float = 300.0,
    ) -> None:
        super().__init__()
        self.catalog = catalog
        self.table = table
        self.sla_seconds = sla_seconds
        self.max_watermark_lag_seconds = max_watermark_lag_seconds
        self.deadline = deadline
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "catalog": self.catalog,
                "table": self.table,
                "sla_seconds": self.sla_seconds,
                "max_watermark_lag_seconds": self.max_watermark_lag_seconds,
                "deadline": self.deadline,
                "poll_interval": self.poll_interval,
            },
        )

    def check(self) -> dict[str, Any]:
        from snowberg.checks import freshness

        table = _load_table(_open_catalog(self.catalog), self.table)
        return freshness.evaluate(
            table,
            name=self.table,
            sla=timedelta(seconds=self.sla_seconds) if self.sla_seconds is not None else None,
            max_watermark_lag=timedelta(seconds=self.max_watermark_lag_seconds)
            if self.max_watermark_lag_seconds is not None
            else None,
        ).to_dict()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = datetime.fromisoformat(self.deadline)
        polls = 0
        while True:
            polls += 1
            try:
                result = await asyncio.to_thread(self.check)
            except Exception as exc:  # noqa: BLE001 - report, let the task decide
                yield TriggerEvent({"status": "error", "error": f"{type(exc).__name__}: {exc}", "polls": polls})
                return
            if result["fresh"]:
                yield TriggerEvent({"status": "fresh", "result": result, "polls": polls})
                return
            remaining = (deadline - datetime.now(UTC)).total_seconds()
            if remaining <= 0:
                yield TriggerEvent({"status": "deadline", "result": result, "polls": polls})
                return
            self.log.info(
                "%s is not fresh yet (%s); next look in %.0fs",
                self.table,
                "; ".join(result["reasons"]),
                min(self.poll_interval, remaining),
            )
            await asyncio.sleep(min(self.poll_interval, remaining))


class SnapshotFreshnessOperator(_SnowbergCheck):
    """Fail when an Iceberg table's newest data snapshot is older than an SLA.

    Reads only the table metadata: the snapshot log (hours since the last
    data-changing snapshot) and the watermark snowberg committed in the
    snapshot summary (watermark lag). No manifest or data file is opened.
    Logs a report, returns the measures (XCom), and raises
    ``SnowbergCheckFailed`` when the table is stale, has no snapshot or does
    not exist.

    Schedule it on its own (e.g. hourly) as well as after each load, so a
    table that receives nothing at all still alerts.

    With ``deferrable=True`` and ``wait_timeout``, a stale table is not
    failed at once: the task defers to ``FreshnessTrigger``, which polls the
    metadata every ``poll_interval`` until the table is fresh or the wait
    runs out (then it fails as above).

    .. code-block:: python

        SnapshotFreshnessOperator(
            task_id="check_freshness",
            table="lake.orders",  # Iceberg namespace.table
            catalog="lake",  # pyiceberg catalog name
            freshness_sla="2h",  # max age of the newest data snapshot
            max_watermark_lag="6h",  # optional: now - committed watermark
            table_name="orders",  # the name alerts show
        )

    :param table: Iceberg identifier ``namespace.table``. Templated.
    :param catalog: pyiceberg catalog name (``PYICEBERG_CATALOG__<NAME>__*``). Templated.
    :param freshness_sla: longest acceptable time since the last data snapshot ("90m", "2h", "PT2H",
        seconds). Templated. (Not ``sla``: that name is reserved by ``BaseOperator``.)
    :param max_watermark_lag: longest acceptable ``now - watermark`` (timestamp/date cursors). Templated.
    :param table_name: label for reports and alerts (default: ``table``). Templated.
    :param deferrable: wait in the triggerer for a fresh snapshot instead of failing at once.
    :param wait_timeout: how long to wait when deferrable (e.g. "1h"). Templated.
    :param poll_interval: how often the trigger reads the metadata (default "5m"). Templated.
    """

    template_fields: Sequence[str] = (
        "table",
        "catalog",
        "freshness_sla",
        "max_watermark_lag",
        "table_name",
        "wait_timeout",
        "poll_interval",
    )
    snowberg_check = "freshness"

    def __init__(
        self,
        *,
        table: str,
        catalog: str = "lake",
        freshness_sla: str | int | float | timedelta | None = None,
        max_watermark_lag: str | int | float | timedelta | None = None,
        table_name: str | None = None,
        deferrable: bool = False,
        wait_timeout: str | int | float | timedelta | None = None,
        poll_interval: str | int | float | timedelta = "5m",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.catalog = catalog
        self.freshness_sla = freshness_sla
        self.max_watermark_lag = max_watermark_lag
        self.table_name = table_name
        self.deferrable = deferrable
        self.wait_timeout = wait_timeout
        self.poll_interval = poll_interval
        if deferrable and wait_timeout is None:
            raise ValueError("deferrable=True needs wait_timeout (how long to wait for a fresh snapshot)")

    def _limits(self) -> tuple[timedelta | None, timedelta | None]:
        return _duration(self.freshness_sla, "freshness_sla"), _duration(self.max_watermark_lag, "max_watermark_lag")

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.checks import freshness

        sla, max_lag = self._limits()
        table = _load_table(_open_catalog(self.catalog), self.table)
        result = freshness.evaluate(table, name=self.table, sla=sla, max_watermark_lag=max_lag)
        emit_freshness(self.table_name or self.table, result.to_dict())
        self.log.info("%s", freshness.render(result))
        if result.fresh:
            return result.to_dict()
        wait = _duration(self.wait_timeout, "wait_timeout")
        if self.deferrable and wait is not None and wait.total_seconds() > 0 and result.exists:
            deadline = datetime.now(UTC) + wait
            poll = _duration(self.poll_interval, "poll_interval") or timedelta(minutes=5)
            self.log.info(
                "%s is stale; waiting up to %s (until %s) for a fresh snapshot",
                self.table,
                format_duration(wait),
                deadline.isoformat(timespec="seconds"),
            )
            self.defer(
                trigger=FreshnessTrigger(
                    catalog=self.catalog,
                    table=self.table,
                    sla_seconds=sla.total_seconds() if sla is not None else None,
                    max_watermark_lag_seconds=max_lag.total_seconds() if max_lag is not None else None,
                    deadline=deadline.isoformat(),
                    poll_interval=max(poll.total_seconds(), 1.0),
                ),
                method_name="execute_complete",
                timeout=wait + poll + timedelta(minutes=5),
            )
        raise self._stale(context, result)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        from snowberg.checks import freshness

        if event.get("status") == "error":
            raise RuntimeError(f"freshness trigger for {self.table} failed: {event.get('error')}")
        result = freshness.Freshness.from_dict(event["result"])
        emit_freshness(self.table_name or self.table, result.to_dict())
        self.log.info("after %s poll(s) of the metadata:\n%s", event.get("polls", "?"), freshness.render(result))
        if result.fresh:
            return result.to_dict()
        raise self._stale(context, result)

    def _stale(self, context: Any, result: Any) -> SnowbergCheckFailed:
        label = self.table_name or self.table
        return self._fail(
            context,
            f"{label} is stale: " + "; ".join(result.reasons),
            table=self.table,
            observed=result.observed,
            expected=result.expected,
            details=result.to_dict(),
        )


# ---------------------------------------------------------------------------
# Health


class TableHealthOperator(_SnowbergCheck):
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

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.checks import health

        label = self.table_name or self.table
        table = _load_table(_open_catalog(self.catalog), self.table)
        if table is None:
            raise self._fail(
                context,
                f"{label}: table {self.table} does not exist",
                table=self.table,
                observed="table does not exist",
                expected="an existing table",
                details={"table": self.table, "exists": False},
            )
        report = health.collect(table, name=self.table, thresholds=self.thresholds)
        self.log.info("\n%s", health.render(report))
        out = report.to_dict()
        if report.breaches and self.thresholds.fail_on_breach:
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


# ---------------------------------------------------------------------------
# Storage: Snowflake's verification and our own probe


def _probe(catalog_name: str, table: str | None, location: str | None) -> Any:
    from snowberg.checks import probe

    catalog = _open_catalog(catalog_name)
    tbl = _load_table(catalog, table) if table else None
    if table and tbl is None:
        raise ValueError(f"table {table} does not exist in catalog {catalog_name!r}")
    io, where = probe.writer_file_io(catalog, table=tbl, location=location)
    return probe.probe_location(io, where)


class LakeProbeOperator(_SnowbergCheck):
    """Write, read, list and delete a probe object in the lake with the writer's credentials.

    Uses the FileIO the lake writer uses — ``table.io`` when ``table`` is
    given (vended credentials included), else ``load_file_io`` on the
    catalog's properties for ``location`` (default: the catalog's
    warehouse). The probe object goes under ``<location>/_snowberg_probe/``
    and is deleted. Each step is reported as PASSED, SKIPPED or FAILED with a
    likely cause.

    .. code-block:: python

        LakeProbeOperator(task_id="probe_lake", catalog="lake", table="lake.orders", table_name="orders")

    :param catalog: pyiceberg catalog name. Templated.
    :param table: optional Iceberg ``namespace.table`` whose location and FileIO to probe. Templated.
    :param location: optional folder to probe (``s3://bucket/prefix``, ``file:///…``). Templated.
    :param table_name: label for reports and alerts. Templated.
    """

    template_fields: Sequence[str] = ("catalog", "table", "location", "table_name")
    snowberg_check = "lake_probe"

    def __init__(
        self,
        *,
        catalog: str = "lake",
        table: str | None = None,
        location: str | None = None,
        table_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.catalog = catalog
        self.table = table
        self.location = location
        self.table_name = table_name

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.checks import probe

        result = _probe(self.catalog, self.table, self.location)
        self.log.info("%s", probe.render(result))
        out = result.to_dict()
        if not result.ok:
            failed = result.failed
            raise self._fail(
                context,
                f"lake storage probe of {result.location} failed: "
                + "; ".join(
                    f"{s.label}: {s.message}" + (f" (likely cause: {s.cause})" if s.cause else "") for s in failed
                ),
                table=self.table,
                observed={s.label: f"FAILED: {s.message}" for s in failed},
                expected="write, read, list and delete PASSED",
                details=out,
            )
        return out


class VerifyExternalVolumeOperator(_SnowbergCheck):
    """Verify a Snowflake external volume, step by step, and probe the lake storage.

    Runs ``SELECT SYSTEM$VERIFY_EXTERNAL_VOLUME(%(volume)s)`` (the name is a
    bound value) and parses the JSON it returns: ``storageLocationSelectionResult``,
    ``awsRoleArnValidationResult``, ``writeResult``, ``readResult``,
    ``listResult``, ``deleteResult``, … each PASSED, SKIPPED or an error. A
    failed step is named with its likely cause (a role trust policy missing
    the ``STORAGE_AWS_IAM_USER_ARN`` / external id that ``DESC EXTERNAL VOLUME``
    shows, a missing ``s3:PutObject``, ``ALLOW_WRITES = FALSE``, …);
    ``DESC EXTERNAL VOLUME`` is read to enrich the diagnosis when allowed.

    With ``catalog`` set it also probes the lake with the lake writer's own
    FileIO (see ``LakeProbeOperator``), so one report shows whether Snowflake,
    the writer, or both cannot reach the storage.

    .. code-block:: python

        VerifyExternalVolumeOperator(
            task_id="verify_external_volume",
            external_volume="iceberg_external_volume",
            snowflake_conn_id="snowflake_default",
            catalog="lake",  # also probe the lake as the writer
            table="lake.orders",  # …at this table's location, with its FileIO
            table_name="orders",
        )

    :param external_volume: the volume's name (a plain identifier). Templated.
    :param snowflake_conn_id: Snowflake connection; the role needs OWNERSHIP of the volume. Templated.
    :param require_writes: fail when Snowflake skipped the write steps (a read-only volume).
    :param describe: also read ``DESC EXTERNAL VOLUME`` for the diagnosis.
    :param catalog: pyiceberg catalog to probe the lake with (``None``: no probe). Templated.
    :param table: Iceberg ``namespace.table`` to probe at. Templated.
    :param probe_location: folder to probe instead of the table/warehouse. Templated.
    :param table_name: label for reports and alerts. Templated.
    """

    template_fields: Sequence[str] = (
        "external_volume",
        "snowflake_conn_id",
        "catalog",
        "table",
        "probe_location",
        "table_name",
    )
    snowberg_check = "external_volume"

    def __init__(
        self,
        *,
        external_volume: str,
        snowflake_conn_id: str = "snowflake_default",
        require_writes: bool = True,
        describe: bool = True,
        catalog: str | None = None,
        table: str | None = None,
        probe_location: str | None = None,
        table_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.external_volume = external_volume
        self.snowflake_conn_id = snowflake_conn_id
        self.require_writes = require_writes
        self.describe = describe
        self.catalog = catalog
        self.table = table
        self.probe_location = probe_location
        self.table_name = table_name

    def execute(self, context: Any) -> dict[str, Any]:
        from snowflake.connector.errors import ProgrammingError

        from snowberg.checks import external_volume as volume
        from snowberg.checks import probe
        from snowberg.snowflake.source import snowflake_hook

        vol = self.external_volume
        problems: list[str] = []
        observed: dict[str, str] = {}
        hook = snowflake_hook(self.snowflake_conn_id)
        conn = hook.get_conn()
        try:
            verification, desc = volume.verify_external_volume(conn, vol, describe=self.describe)
        except ProgrammingError as exc:  # the query failed: a missing volume, or no privilege on it
            msg = f"SYSTEM$VERIFY_EXTERNAL_VOLUME('{vol}') failed: {exc}"
            raise self._fail(
                context,
                msg,
                table=self.table,
                observed={"verification": str(exc)},
                expected="the volume exists and this role owns it",
                details={"volume": vol, "error": str(exc)},
            ) from exc
        finally:
            conn.close()
        diag = volume.diagnose(verification, desc, require_writes=self.require_writes)
        self.log.info("\n%s", volume.render(diag))
        problems += [f"Snowflake: {p}" for p in diag.problems]
        for s in diag.steps:
            if s.status == volume.FAILED:
                observed[s.label] = f"FAILED: {s.message}"
        if self.require_writes and verification.writes_skipped:
            observed["write"] = "SKIPPED (read-only volume)"

        result: dict[str, Any] = {"volume": diag.to_dict(), "probe": None}
        if self.catalog:
            pr = _probe(self.catalog, self.table, self.probe_location)
            self.log.info("\n%s", probe.render(pr))
            result["probe"] = pr.to_dict()
            for s in pr.failed:
                problems.append(
                    f"lake writer: {s.label} failed: {s.message}" + (f" (likely cause: {s.cause})" if s.cause else "")
                )
                observed[f"lake writer {s.label}"] = f"FAILED: {s.message}"
        result["ok"] = not problems
        if problems:
            label = self.table_name or vol
            raise self._fail(
                context,
                f"external volume {vol} ({label}) failed verification:\n" + "\n".join(problems),
                table=self.table,
                observed=observed,
                expected="every step PASSED" + (" (writes required)" if self.require_writes else ""),
                details=result,
            )
        return result


__all__ = [
    "FreshnessTrigger",
    "LakeProbeOperator",
    "SnapshotFreshnessOperator",
    "SnowbergCheckFailed",
    "TableHealthOperator",
    "VerifyExternalVolumeOperator",
]
