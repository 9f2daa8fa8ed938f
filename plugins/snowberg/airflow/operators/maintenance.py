"""The maintenance DAG's steps: a manual rollback or tag, compaction, snapshot expiry, orphan files.

Each step is one ``SnowbergMaintenanceOperator`` (``step=``); the library does
the work (``snowberg.iceberg.maintenance`` / ``.rollback``), logs its progress
and returns a summary (XCom). A manual run with a rollback or tag param does
that and nothing else (the other steps skip); a scheduled run compacts,
expires and sweeps, and the table-health task after it reports the effect.

Run params (validated before anything is read or written):

* ``rollback_to_snapshot`` / ``rollback_before_run`` / ``rollback_to_tag`` —
  at most one; the table and its watermark return to that snapshot, and the
  watermark Variable follows; ``rollback_dag_id`` names the DAG of
  ``rollback_before_run`` (default: the table's load DAG);
* ``tag`` (+ ``tag_snapshot``, default the current snapshot) — tag a snapshot;

Snapshot ids are text of digits (19-digit ids pass 2**53: a JSON number is
rounded by the browser). Every pattern is anchored for the form's JSON schema
(a search) and checked again here with ``re.fullmatch``.
* ``dry_run`` — log and return what would be done, change nothing (orphan
  files are listed).

The operator takes the table settings it reads as keyword arguments
(``snowberg.airflow.operators.arguments``)::

    SnowbergMaintenanceOperator(
        task_id="compact",
        step="compact",
        table_name="orders",
        source={"table": "SHOP.PUBLIC.ORDERS"},
        target="shop.orders",
        maintenance={"snapshot_retention": "7d", "min_snapshots": 48},
    )
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from airflow.sdk import BaseOperator, Param
from airflow.sdk.exceptions import AirflowSkipException

from snowberg.airflow.operators.arguments import Settings, TableSettings
from snowberg.airflow.operators.lake_access import names_lake_connection
from snowberg.airflow.parsing import form_param
from snowberg.config.maintenance_settings import MaintenanceSettings
from snowberg.config.run_params import SNAPSHOT_ID_PATTERN, TAG_PATTERN, RunParamError, parse_snapshot_id
from snowberg.config.table_config import Source, TableConfig


class MaintenanceStep(StrEnum):
    MANUAL = "manual"  # rollback or tag, from run params
    COMPACT = "compact"
    EXPIRE = "expire_snapshots"
    ORPHANS = "remove_orphan_files"


ROLLBACK_PARAMS = ("rollback_to_snapshot", "rollback_before_run", "rollback_to_tag")
MANUAL_PARAMS = (*ROLLBACK_PARAMS, "tag")
SNAPSHOT_PARAMS = ("rollback_to_snapshot", "tag_snapshot")


def maintenance_params() -> dict[str, Param]:
    """The maintenance DAG's trigger form."""
    return {
        "dry_run": form_param(False, type="boolean", description="Log what would be done; change nothing."),
        "rollback_to_snapshot": form_param(
            None,
            type=["null", "string"],
            pattern=SNAPSHOT_ID_PATTERN,
            description="Roll back to this snapshot id (its digits, as text).",
        ),
        "rollback_before_run": form_param(
            None, type=["null", "string"], maxLength=250, description="Roll back to just before this run's commits."
        ),
        "rollback_dag_id": form_param(
            None,
            type=["null", "string"],
            maxLength=250,
            description="The DAG of rollback_before_run (run ids repeat across DAGs); default: the table's load DAG.",
        ),
        "rollback_to_tag": form_param(
            None, type=["null", "string"], maxLength=100, description="Roll back to this tag."
        ),
        "tag": form_param(
            None,
            type=["null", "string"],
            pattern=f"^{TAG_PATTERN}$",
            description="Tag a snapshot (tags survive expiry).",
        ),
        "tag_snapshot": form_param(
            None,
            type=["null", "string"],
            pattern=SNAPSHOT_ID_PATTERN,
            description="Snapshot to tag, its digits as text (default: current).",
        ),
    }


def manual_request(params: dict[str, Any]) -> dict[str, Any]:
    """The manual actions a run asks for, validated: snapshot ids parsed, the tag name fullmatched.

    Raises (``ValueError``, naming the param) when more than one rollback
    target is given or a value the form's schema let through is not valid.
    """
    keys = (*MANUAL_PARAMS, "tag_snapshot", "rollback_dag_id")
    asked = {k: params.get(k) for k in keys if params.get(k) not in (None, "")}
    if sum(1 for k in ROLLBACK_PARAMS if k in asked) > 1:
        raise ValueError(f"give at most one of {', '.join(ROLLBACK_PARAMS)} (got {sorted(asked)})")
    for k in SNAPSHOT_PARAMS:
        if k in asked:
            asked[k] = parse_snapshot_id(k, asked[k])
    tag = asked.get("tag")
    if tag is not None and not (isinstance(tag, str) and re.fullmatch(TAG_PATTERN, tag)):
        raise RunParamError(f"param 'tag': {str(tag)[:80]!r} is not a tag name (letters, digits, '_', '.', '-')")
    if "rollback_dag_id" in asked and "rollback_before_run" not in asked:
        raise RunParamError("param 'rollback_dag_id' goes with rollback_before_run")
    return asked


class SnowbergMaintenanceOperator(TableSettings, BaseOperator):
    """One maintenance step on one configured table (see the module doc).

    :param step: which step (``MaintenanceStep`` or its value).
    :param table_name: the table's name (logs, the rollback's plan).
    :param source: the Snowflake table or query (``Source`` or its dict): part of the table's identity.
    :param target: the Iceberg table ``namespace.table`` (its watermark Variable is named after it).
    :param maintenance: what compaction, expiry and orphan removal do (``MaintenanceSettings`` or its dict).
    :param catalog: the pyiceberg catalog (templated).
    """

    snowberg_alert_event = "maintenance_failure"  # what its failure alerts (airflow.alerts.build_alert)

    template_fields: Sequence[str] = ("catalog",)
    ui_color = "#e8f4e8"

    def __init__(
        self,
        *,
        step: MaintenanceStep | str,
        table_name: str,
        source: Source | Settings,
        target: str,
        maintenance: MaintenanceSettings | Settings | None = None,
        catalog: str = "lake",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.step = MaintenanceStep(step)
        self.table_name = table_name
        self.source = source
        self.target = target
        self.maintenance = maintenance if maintenance is not None else MaintenanceSettings()
        self.catalog = catalog
        self.check_table_settings()

    @names_lake_connection("catalog")
    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.iceberg.tables import load_table_or_none

        cfg = self.build_config()
        params = dict(context.get("params") or {})
        asked = manual_request(params)
        dry_run = bool(params.get("dry_run"))
        manual = set(asked) & set(MANUAL_PARAMS)
        if self.step is MaintenanceStep.MANUAL and not manual:
            raise AirflowSkipException("no rollback or tag requested")
        if self.step is not MaintenanceStep.MANUAL and manual:
            raise AirflowSkipException(f"a manual run ({', '.join(sorted(manual))}): no scheduled maintenance")
        table = load_table_or_none(open_catalog(self.catalog), cfg)
        if table is None:
            raise AirflowSkipException(f"{cfg.target} does not exist yet")
        self.log.info("%s on %s%s", self.step.value, cfg.target, " (dry run)" if dry_run else "")
        if self.step is MaintenanceStep.MANUAL:
            return self._manual(cfg, table, asked, dry_run)
        return self._scheduled(cfg, table, dry_run)

    def _manual(self, cfg: TableConfig, table: Any, asked: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        from snowberg.iceberg import rollback as rb
        from snowberg.iceberg.state import AirflowVariables

        out: dict[str, Any] = {}
        if any(k in asked for k in ROLLBACK_PARAMS):
            plan = rb.rollback(
                table,
                cfg.name,
                variables=AirflowVariables(),
                variable_key=cfg.variable_key,
                to_snapshot=asked.get("rollback_to_snapshot"),
                before_run=asked.get("rollback_before_run"),
                dag_id=asked.get("rollback_dag_id") or cfg.dag_id,
                to_tag=asked.get("rollback_to_tag"),
                dry_run=dry_run,
            )
            out["rollback"] = plan.to_dict()
        if "tag" in asked:
            if dry_run:
                out["tag"] = {"tag": asked["tag"], "dry_run": True}
            else:
                sid = rb.tag_snapshot(table, asked["tag"], asked.get("tag_snapshot"))
                out["tag"] = {"tag": asked["tag"], "snapshot_id": sid}
        return out

    def _scheduled(self, cfg: TableConfig, table: Any, dry_run: bool) -> dict[str, Any]:
        from snowberg.iceberg import maintenance as m
        from snowberg.iceberg import state
        from snowberg.iceberg.state import AirflowVariables

        s = cfg.maintenance
        if self.step is MaintenanceStep.COMPACT:
            if not s.compact:
                raise AirflowSkipException("compaction is off for this table (maintenance.compact)")
            r = m.compact(
                table,
                target_size=s.target_file_size,
                small_file_ratio=s.small_file_ratio,
                min_input_files=s.min_input_files,
                delete_ratio=s.delete_ratio,
                dry_run=dry_run,
            )
            if not dry_run:
                # Also when there was nothing to do: an earlier attempt may have committed and died before this.
                action = state.follow_variable(table.refresh(), cfg.variable_key, AirflowVariables())
                self.log.info("Variable %s: %s", cfg.variable_key, action)
            return r.to_dict()
        if self.step is MaintenanceStep.EXPIRE:
            if not dry_run:
                # Before the expiry: a commit whose Variable update was lost (any writer) may have left it naming
                # a snapshot this expiry removes, and the next load would refuse to run.
                action = state.follow_variable(table, cfg.variable_key, AirflowVariables())
                self.log.info("Variable %s: %s", cfg.variable_key, action)
            return m.expire_snapshots(
                table, older_than=s.snapshot_retention, min_snapshots=s.min_snapshots, dry_run=dry_run
            ).to_dict()
        if not s.remove_orphans:
            raise AirflowSkipException("orphan removal is off for this table (maintenance.remove_orphans)")
        return m.remove_orphan_files(
            table, older_than=s.orphan_age, allow_short_age=s.allow_short_orphan_age, dry_run=dry_run
        ).to_dict()
