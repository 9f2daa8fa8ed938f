"""``VolumeCheckOperator``: Snowflake vs lake up to the watermark, volume anomalies, hard deletes.

Runs in each table's checks DAG. A mismatch fails the task without retry
(``SnowbergCheckFailed``, check ``volume``) and the table's notifiers send a
``volume_mismatch`` alert naming the counts on each side and the differing
keys; an anomalous run volume logs a warning or, with
``anomaly.on_anomaly: fail``, fails with check ``volume_anomaly``
(``volume_anomaly`` alert). See docs/volume-checks.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from snowberg.airflow.operators.arguments import Settings, TableSettings
from snowberg.airflow.operators.check_base import SnowbergCheckFailed
from snowberg.config.table_config import Cursor, Source, WriteMode
from snowberg.config.volume_settings import AnomalyAction, DeletePolicy, VolumeSettings


class VolumeCheckOperator(TableSettings, BaseOperator):
    """Compare a table's source and lake rows up to the committed watermark.

    .. code-block:: python

        VolumeCheckOperator(
            task_id="check_volume",
            table_name="orders",
            source={"table": "SHOP.PUBLIC.ORDERS"},
            target="shop.orders",
            cursor={"column": "updated_at"},
            primary_key=["id"],
            volume={"deletes": "propagate"},
        )

    :param table_name: the table's name (logs, alerts, the Snowflake query tag).
    :param source: the Snowflake table or query (``Source`` or its dict) the lake is compared with.
    :param target: the Iceberg table ``namespace.table``.
    :param cursor: the watermark cursor (``Cursor`` or its dict): rows up to the watermark are compared, by day.
    :param primary_key: the key columns differing rows are named by (none: counts only).
    :param write_mode: ``merge`` or ``append``; None: merge when there is a primary key (an append table is
        compared by counts).
    :param geo_format: GEOGRAPHY/GEOMETRY as ``geojson`` or ``wkt`` (the session's output format).
    :param volume: what is compared and what a difference does (``VolumeSettings`` or its dict).
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
        primary_key: Sequence[str] = (),
        write_mode: WriteMode | str | None = None,
        geo_format: str = "geojson",
        volume: VolumeSettings | Settings | None = None,
        snowflake_conn_id: str = "snowflake_default",
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table_name = table_name
        self.source = source
        self.target = target
        self.cursor = cursor
        self.primary_key = primary_key
        self.write_mode = write_mode
        self.geo_format = geo_format
        self.volume = volume if volume is not None else VolumeSettings()
        self.snowflake_conn_id = snowflake_conn_id
        self.catalog = catalog
        self.check_table_settings()

    def _fail(self, context: Any, check: str, message: str, **kw: Any) -> SnowbergCheckFailed:
        ti = context.get("ti")
        if ti is not None:
            try:
                ti.xcom_push(key="result", value=kw.get("details"))
            except Exception:  # noqa: BLE001 - a failed XCom must not hide the check's own failure
                self.log.warning("could not push the check result to XCom", exc_info=True)
        return SnowbergCheckFailed(message, check=check, **kw)

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.checks import anomaly, volume
        from snowberg.checks.hashdiff import HashDialect
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.iceberg.tables import load_table_or_none
        from snowberg.snowflake.hook import snowflake_hook

        cfg = self.build_config()
        settings = cfg.volume
        catalog = open_catalog(cfg.catalog)
        table = load_table_or_none(catalog, cfg)
        if table is None:
            self.log.info("%s: table %s does not exist yet: nothing to verify", cfg.name, cfg.target)
            return {"table": cfg.name, "ok": True, "note": "no table yet"}
        snap = table.current_snapshot()
        hook = snowflake_hook(cfg.snowflake_conn_id, cfg)
        # Real Snowflake is reached over https only; plain http is the local emulator (docs/volume-checks.md).
        protocol = hook.get_connection(cfg.snowflake_conn_id).extra_dejson.get("protocol")
        dialect = HashDialect.EMULATOR if protocol == "http" else HashDialect.SNOWFLAKE
        conn = hook.get_conn()
        try:
            report = volume.verify(cfg, table, conn, settings=settings, dialect=dialect)
        finally:
            conn.close()
        self.log.info("\n%s", volume.render(report, settings.max_reported_keys))
        if settings.deletes is DeletePolicy.PROPAGATE and report.deleted_in_source and snap is not None:
            keys = [d.key for d in report.deleted_in_source]
            report.propagated = volume.commit_hard_deletes(
                table,
                cfg,
                keys,
                run_id=str(context.get("run_id") or "volume-check"),
                dag_id=self.dag_id,
                expected_snapshot_id=snap.snapshot_id,
            )
            self.log.info("%s: propagated %d hard delete(s): %s", cfg.name, report.propagated, keys[:20])
        out = report.to_dict()

        hist = anomaly.run_history(table, settings.anomaly.runs) if settings.anomaly.enabled else []
        an = anomaly.evaluate(hist, k=settings.anomaly.k, min_history=settings.anomaly.min_history)
        out["anomaly"] = an.to_dict()
        self.log.info("%s: run volume: %s", cfg.name, an.reason)

        if not report.ok:
            diffs = report.differences[: settings.max_reported_keys]
            observed: dict[str, Any] = {"source rows": report.source_rows, "lake rows": report.lake_rows}
            for d, (s, lk) in list(report.differing_days.items())[:10]:
                observed[f"day {d or '(all)'}"] = f"source {s}, lake {lk}"
            observed["differing keys"] = [
                f"{d.key} {d.kind.value} (source cursor {d.source_cursor}, lake cursor {d.lake_cursor})" for d in diffs
            ]
            raise self._fail(
                context,
                "volume",
                f"{cfg.name}: the lake differs from Snowflake up to watermark {report.watermark}: "
                f"{report.summary_line()}; {len(report.differences)} differing key(s)"
                + (" (more not narrowed down)" if report.truncated else "")
                + ": "
                + "; ".join(f"{d.key} {d.kind.value}" for d in diffs),
                table=cfg.target,
                observed=observed,
                expected="the same keys and cursor values on both sides up to the watermark",
                details=out,
            )
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
        return out


__all__ = ["VolumeCheckOperator"]
