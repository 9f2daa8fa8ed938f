"""Storage checks: Snowflake's external-volume verification and a probe with the lake writer's own credentials."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from snowberg.airflow.operators.check_base import SnowbergCheckOperator

log = logging.getLogger(__name__)


def _probe(catalog_name: str, table: str | None, location: str | None) -> Any:
    from snowberg.checks import probe
    from snowberg.iceberg.catalogs import open_catalog
    from snowberg.iceberg.tables import find_table

    catalog = open_catalog(catalog_name)
    tbl = find_table(catalog, table) if table else None
    if table and tbl is None:
        raise ValueError(f"table {table} does not exist in catalog {catalog_name!r}")
    io, where = probe.writer_file_io(catalog, table=tbl, location=location)
    return probe.probe_location(io, where)


class LakeProbeOperator(SnowbergCheckOperator):
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


class VerifyExternalVolumeOperator(SnowbergCheckOperator):
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
        from snowberg.snowflake.hook import snowflake_hook

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
