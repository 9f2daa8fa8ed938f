"""``VolumeCheckOperator``: Snowflake vs lake, volume anomalies, hard deletes.

Runs in each table's checks DAG. Watermark tables are compared up to the
committed watermark, incrementally (the cursor ranges changed since the last
verified snapshot) with a full verification on ``volume.full_schedule`` or
when the checks DAG is triggered with ``full_verification: true``; stream and
cursor-less tables by counts, against the source as of what the lake holds.
A mismatch fails the task without retry (``SnowbergCheckFailed``, check
``volume``) and the table's notifiers send a ``volume_mismatch`` alert naming
the counts on each side, the compared window and the differing keys; a source
the check cannot read fails it the same way, naming the error. A check that
cannot compare (no lake table or commit yet, an inconclusive result) is
skipped with the reason, never passed. An anomalous run volume logs a warning
or, with ``anomaly.on_anomaly: fail``, fails with check ``volume_anomaly``
(``volume_anomaly`` alert). See docs/volume-checks.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseOperator

from snowberg.airflow.operators.arguments import Settings, TableSettings
from snowberg.airflow.operators.check_base import SnowbergCheckFailed
from snowberg.airflow.operators.lake_access import names_lake_connection
from snowberg.config.stream_settings import StreamSource
from snowberg.config.table_config import ColumnSettings, Cursor, Source, WriteMode
from snowberg.config.volume_settings import AnomalyAction, VolumeSettings

# The ``status`` of the result a check pushes when it could not run (the UI page shows it with its reason).
NOT_RUN = "not_run"

FULL_VERIFICATION_PARAM = "full_verification"
"""The checks DAG's trigger param that makes its volume check a full verification."""


def full_verification_requested(context: Mapping[str, Any]) -> bool:
    """Was the run triggered with ``full_verification: true`` (a boolean Param; text from a CLI conf is read too)?"""
    params = context.get("params") or {}
    value = params.get(FULL_VERIFICATION_PARAM) if hasattr(params, "get") else None
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return value is True


class VolumeCheckOperator(TableSettings, BaseOperator):
    """Compare a table's source and lake rows (up to the committed watermark, or as of the consumed offset).

    .. code-block:: python

        VolumeCheckOperator(
            task_id="check_volume",
            table_name="orders",
            source={"table": "SHOP.PUBLIC.ORDERS"},
            target="shop.orders",
            cursor={"column": "updated_at"},
            primary_key=["id"],
            volume={"deletes": "propagate", "full_schedule": "@weekly"},
        )

    :param table_name: the table's name (logs, alerts, the Snowflake query tag).
    :param source: the Snowflake table or query (``Source`` or its dict) the lake is compared with.
    :param target: the Iceberg table ``namespace.table``.
    :param cursor: the watermark cursor (``Cursor`` or its dict): rows up to the watermark are compared, by day.
        None: counts only (per ``volume.day_column`` day, or of the whole table).
    :param stream: the Snowflake Stream the table captures from (``StreamSource`` or its dict): counts against
        the source as of the consumed offset.
    :param primary_key: the key columns differing rows are named by (none: counts only).
    :param write_mode: ``merge`` or ``append``; None: merge when there is a primary key (an append table is
        compared by counts).
    :param geo_format: GEOGRAPHY/GEOMETRY as ``geojson`` or ``wkt`` (the session's output format).
    :param volume: what is compared and what a difference does (``VolumeSettings`` or its dict).
    :param columns: the ``columns`` section (``ColumnSettings`` or its dict): excluded columns are never read,
        hashed ones are read as their salted SHA-256 (the salt from the Airflow Variable ``columns.hash_salt``).
    :param snowflake_conn_id: the Snowflake connection (templated).
    :param catalog: the pyiceberg catalog (templated).
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog")
    snowberg_check = "volume"
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        table_name: str,
        source: Source | Settings,
        target: str,
        cursor: Cursor | Settings | None = None,
        stream: StreamSource | Settings | None = None,
        primary_key: Sequence[str] = (),
        write_mode: WriteMode | str | None = None,
        geo_format: str = "geojson",
        volume: VolumeSettings | Settings | None = None,
        columns: ColumnSettings | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table_name = table_name
        self.source = source
        self.target = target
        self.cursor = cursor
        self.stream = stream
        self.primary_key = primary_key
        self.write_mode = write_mode
        self.geo_format = geo_format
        self.volume = volume if volume is not None else VolumeSettings()
        self.columns = columns or {}
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    def _push(self, context: Any, value: Any) -> None:
        ti = context.get("ti")
        if ti is not None:
            try:
                ti.xcom_push(key="result", value=value)
            except Exception:  # noqa: BLE001 - a failed XCom must not hide the check's own failure
                self.log.warning("could not push the check result to XCom", exc_info=True)

    def _not_run(self, context: Any, reason: str) -> Exception:
        """The skip of a check that could not compare, its reason pushed as the result (the UI page shows it).

        A skipped task keeps no message Airflow's database shows; without the
        pushed result the page could only say "skipped", not why.
        """
        from airflow.sdk.exceptions import AirflowSkipException

        self._push(context, {"status": NOT_RUN, "reason": reason})
        return AirflowSkipException(reason)

    def _fail(self, context: Any, check: str, message: str, **kw: Any) -> SnowbergCheckFailed:
        self._push(context, kw.get("details"))
        return SnowbergCheckFailed(message, check=check, **kw)

    @names_lake_connection("catalog")
    def execute(self, context: Any) -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowSkipException

        from snowberg.checks import anomaly, volume
        from snowberg.checks.hashdiff import HashDialect
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.iceberg.state import AirflowVariables
        from snowberg.iceberg.tables import load_table_or_none
        from snowberg.snowflake.hook import snowflake_hook

        cfg = self.build_config()
        settings = cfg.volume
        catalog = open_catalog(cfg.catalog)
        table = load_table_or_none(catalog, cfg)
        if table is None:
            raise self._not_run(
                context, f"{cfg.name}: the lake table {cfg.target} does not exist (not loaded yet?): nothing to verify"
            )
        hook = snowflake_hook(cfg.snowflake_conn_id, cfg)
        # Real Snowflake is reached over https only; plain http is the local emulator (docs/volume-checks.md).
        protocol = hook.get_connection(cfg.snowflake_conn_id).extra_dejson.get("protocol")
        dialect = HashDialect.EMULATOR if protocol == "http" else HashDialect.SNOWFLAKE
        ti = context.get("ti")
        dag_id = getattr(context.get("dag"), "dag_id", None) or getattr(ti, "dag_id", None)
        force = full_verification_requested(context)
        try:
            conn = hook.get_conn()
            try:
                outcome = volume.run_check(
                    cfg,
                    table,
                    conn,
                    settings=settings,
                    dialect=dialect,
                    records=AirflowVariables(),
                    force_full=force,
                    run_id=str(context.get("run_id") or "volume-check"),
                    dag_id=dag_id,
                )
            finally:
                conn.close()
        except volume.VolumeCheckSkipped as exc:
            self.log.warning("%s", exc)
            raise self._not_run(context, str(exc)) from None
        except volume.VolumeSourceError as exc:
            raise self._fail(
                context,
                "volume",
                f"{cfg.name}: the volume check cannot read its source: {exc}",
                table=cfg.target,
                observed={"source": cfg.source.table or "query", "error": str(exc)},
                expected="a source the check can read",
                details={"table": cfg.name, "ok": False, "error": str(exc)},
            ) from exc
        report = outcome.report
        self.log.info("\n%s", volume.render(report, settings.max_reported_keys))
        if outcome.record_written:
            self.log.info("%s: verified record updated (snapshot %s)", cfg.name, report.snapshot_id)
        out = report.to_dict()

        hist = anomaly.run_history(table, settings.anomaly.runs) if settings.anomaly.enabled else []
        an = anomaly.evaluate(hist, k=settings.anomaly.k, min_history=settings.anomaly.min_history)
        out["anomaly"] = an.to_dict()
        self.log.info("%s: run volume: %s", cfg.name, an.reason)

        if not report.ok and not report.inconclusive:
            raise self._mismatch(context, cfg.name, cfg.target, report, out, settings.max_reported_keys)
        if an.anomalous:
            if settings.anomaly.on_anomaly is AnomalyAction.FAIL:
                raise self._fail(
                    context,
                    "volume_anomaly",
                    f"{cfg.name}: {an.reason}",
                    table=cfg.target,
                    observed=an.run.rows if an.run else None,
                    expected=f"{max(an.low or 0, 0):,.0f}..{an.high or 0:,.0f} rows",
                    details=out,
                )
            self.log.warning("%s: volume anomaly: %s", cfg.name, an.reason)
        if report.inconclusive:
            self._push(context, out)
            raise AirflowSkipException(f"{cfg.name}: {report.note}")
        return out

    def _mismatch(
        self, context: Any, name: str, target: str, report: Any, out: dict[str, Any], max_keys: int
    ) -> SnowbergCheckFailed:
        """The failure (and so the alert) of a mismatch: counts, the compared window, the days and the keys."""
        diffs = report.differences[:max_keys]
        observed: dict[str, Any] = {"source rows": report.source_rows, "lake rows": report.lake_rows}
        observed["window"] = report.scope_line() + (f", up to watermark {report.watermark}" if report.watermark else "")
        for d, (s, lk) in list(report.differing_days.items())[:10]:
            observed[f"day {d if d not in ('null', '') else '(all)'}"] = f"source {s}, lake {lk}"
        observed["differing keys"] = [
            f"{d.key} {d.kind.value} (source cursor {d.source_cursor}, lake cursor {d.lake_cursor})" for d in diffs
        ]
        if report.propagation is not None and report.propagation.not_removed:
            p = report.propagation
            observed["hard deletes not propagated"] = f"{p.not_removed[:max_keys]}: {p.reason}"
        if report.propagated:
            observed["hard deletes propagated"] = f"{report.propagated:,} row(s) removed"
        if report.advice:
            observed["what to do"] = report.advice
        what = "up to watermark " + str(report.watermark) if report.watermark else "by counts"
        message = (
            f"{name}: the lake differs from Snowflake {what} ({report.verification} verification"
            + (f", cursor in {' ∪ '.join(report.ranges)}" if report.ranges else "")
            + f"): {report.summary_line()}; {len(report.differences)} differing key(s)"
            + (" (more not narrowed down)" if report.truncated else "")
            + (": " + "; ".join(f"{d.key} {d.kind.value}" for d in diffs) if diffs else "")
        )
        if report.propagation is not None and report.propagation.not_removed:
            message += f"; hard deletes not propagated ({report.propagation.reason})"
        if report.advice:
            message += f"; what to do: {report.advice}"
        return self._fail(
            context,
            "volume",
            message,
            table=target,
            observed=observed,
            expected="the same keys and cursor values on both sides in the compared window"
            if not report.count_only
            else "the same row counts on both sides",
            details=out,
        )


__all__ = ["FULL_VERIFICATION_PARAM", "NOT_RUN", "VolumeCheckOperator", "full_verification_requested"]
