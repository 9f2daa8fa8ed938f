"""One DAG per sync in ``syncs.yaml`` (lake Iceberg tables → Snowflake). Called from a two-line DAG file.

Each DAG has two tasks: ``sync`` writes the source snapshots not yet synced
(into a Snowflake-managed Iceberg table through Horizon's REST catalog, or
into a native table), then ``check_visible`` asks Snowflake for the rows.
Parse time reads the YAML and validates it; no connection, catalog or heavy
library is touched until a task runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, Asset

from snowberg.airflow.alerts import build_notifiers
from snowberg.airflow.operators.lake_to_snowflake import (
    IcebergToSnowflakeIcebergOperator,
    IcebergToSnowflakeNativeOperator,
    SnowflakeVisibilityCheckOperator,
)
from snowberg.airflow.parsing import parsing_dag_id
from snowberg.config.locations import ConfigFile, config_path
from snowberg.core.identifiers import IcebergName
from snowberg.sync.config import ON_SOURCE_CHANGE, IcebergTarget, SyncConfig, load_sync_selected, load_syncs

START_DATE = pendulum.datetime(2026, 1, 1, tz="UTC")
SYNC_DAG_ID_PREFIX = "snowberg_sync_"  # SyncConfig.dag_id


def source_asset(cfg: SyncConfig) -> Asset:
    """The lake table's Asset (the same URI the Snowflake → lake DAGs emit)."""
    n = IcebergName.parse(cfg.source.table)
    c = cfg.source.catalog
    return Asset(uri=f"iceberg://{c}/{n.namespace}/{n.table}", name=f"iceberg_{c}_{n.namespace}_{n.table}")


def target_asset(cfg: SyncConfig) -> Asset:
    """The target table's Asset.

    ``snowflake://<connection id>/<database>/<schema>/<table>`` for the table
    Snowflake queries (a native target, or a checked Iceberg target's
    ``check.table``): the Snowflake provider's URI rule wants an account in the
    host position, and the account lives in the connection, which a DAG file
    must not read at parse time, so the connection id stands in for it. An
    unchecked Iceberg target is named as the Iceberg table it is:
    ``iceberg://<catalog>/<namespace>/<table>``.
    """
    t = cfg.target
    if isinstance(t, IcebergTarget) and not cfg.check_enabled:
        n = IcebergName.parse(t.table)
        return Asset(
            uri=f"iceberg://{t.catalog}/{n.namespace}/{n.table}",
            name=f"iceberg_{t.catalog}_{n.namespace}_{n.table}".lower(),
        )
    table = cfg.check_table
    return Asset(
        uri=f"snowflake://{cfg.check_conn_id.lower()}/{table.replace('.', '/').lower()}",
        name=f"snowflake_{table.replace('.', '_').lower()}",
    )


def _doc(cfg: SyncConfig) -> str:
    t = cfg.target
    if isinstance(t, IcebergTarget):
        into = f"Snowflake-managed Iceberg table `{t.table}` through the Iceberg REST catalog `{t.catalog}`"
        state = "the target's Iceberg snapshot summary (`snowberg.sync.source-snapshot-id`)"
    else:
        into = f"native Snowflake table `{t.table}` (connection `{t.snowflake_conn_id}`)"
        state = f"the state table `{t.state_table or 'SNOWBERG_SYNC_STATE'}`, in the same transaction as the rows"
    lines = [
        f"## snowberg sync: {cfg.name}",
        "",
        cfg.description or "",
        "",
        f"* **Source**: Iceberg `{cfg.source.table}` in catalog `{cfg.source.catalog}`",
        f"* **Target**: {into}",
        f"* **Progress**: the last synced source snapshot id, recorded in {state}",
        "* **Overwrite/delete snapshots in the source**: applied by key ("
        + (f"`key_columns` {cfg.key_columns}" if cfg.key_columns else "the source's Iceberg identifier fields")
        + "); without a key: "
        + ("full reload of the target" if cfg.on_rewrite == "full_reload" else "the run fails (on_rewrite: fail)"),
        "* **Check**: "
        + (f"Snowflake is queried for the rows (`{cfg.check_table}`)" if cfg.check_enabled else "disabled"),
        "",
        "See docs/lake-to-snowflake.md.",
    ]
    return "\n".join(lines)


def _default_args(cfg: SyncConfig) -> dict[str, Any]:
    args: dict[str, Any] = {"owner": cfg.owner, "retries": cfg.retries, "retry_delay": cfg.retry_delay}
    notifiers = build_notifiers(cfg.alerts, table=cfg.name, dag_id=cfg.dag_id)
    if notifiers:
        args["on_failure_callback"] = notifiers  # task-level, as for tables: the alert names the failing task
    return args


def build_sync_dag(cfg: SyncConfig) -> DAG:
    schedule: Any = [source_asset(cfg)] if cfg.schedule == ON_SOURCE_CHANGE else cfg.schedule
    with DAG(
        dag_id=cfg.dag_id,
        schedule=schedule,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        tags=["snowberg", "lake-to-snowflake", cfg.target.kind, *cfg.tags],
        doc_md=_doc(cfg),
        default_args=_default_args(cfg),
    ) as dag:
        t = cfg.target
        outlets = [target_asset(cfg)]
        sync: Any
        if isinstance(t, IcebergTarget):
            sync = IcebergToSnowflakeIcebergOperator(
                task_id="sync",
                source_catalog=cfg.source.catalog,
                source_table=cfg.source.table,
                target_catalog=t.catalog,
                target_table=t.table,
                on_rewrite=cfg.on_rewrite,
                key_columns=cfg.key_columns,
                create_if_missing=t.create_if_missing,
                create_in_snowflake=cfg.snowflake_create,
                batch_rows=t.batch_rows,
                outlets=outlets,
            )
        else:
            sync = IcebergToSnowflakeNativeOperator(
                task_id="sync",
                source_catalog=cfg.source.catalog,
                source_table=cfg.source.table,
                snowflake_conn_id=t.snowflake_conn_id,
                target_table=t.table,
                state_table=t.state_table,
                on_rewrite=cfg.on_rewrite,
                key_columns=cfg.key_columns,
                lineage_column=t.lineage_column,
                insert_batch_rows=t.insert_batch_rows,
                stage=t.stage,
                stage_url=t.stage_url,
                copy_min_rows=t.copy_min_rows,
                outlets=outlets,
            )
        if cfg.check_enabled:
            check = SnowflakeVisibilityCheckOperator(
                task_id="check_visible",
                kind=t.kind,
                snowflake_conn_id=cfg.check_conn_id,
                table=cfg.check_table,
                sync_result=sync.output,
                target_catalog=t.catalog if isinstance(t, IcebergTarget) else None,
                target_table=t.table if isinstance(t, IcebergTarget) else None,
                source_catalog=cfg.source.catalog,
                source_table=cfg.source.table,
                timeout=(cfg.check.timeout.total_seconds() if cfg.check else 60.0),
                retries=0,
            )
            sync >> check
    return dag


def build_sync_dags(
    config: str | Path | None = None, *, dag_file: str | Path | None = None, dag_id: str | None = None
) -> dict[str, DAG]:
    """Every sync's DAG, keyed by DAG id: a DAG file is ``globals().update(build_sync_dags(dag_file=__file__))``.

    The config is ``config``, else ``$SNOWBERG_SYNCS_CONFIG``, else
    ``include/syncs.yaml`` beside the DAG file's folder or under the current
    directory (``snowberg.config.locations``).

    In a task process (``dag_id``, else Airflow's parsing context, names the
    DAG being run) only that sync is validated and its DAG built, so a task's
    cost does not grow with the number of syncs; when it cannot be picked out
    alone (``load_sync_selected``), every sync's DAG is built.
    """
    path = config_path(ConfigFile.SYNCS, config, dag_file=dag_file)
    wanted = dag_id if dag_id is not None else parsing_dag_id()
    if wanted and wanted.startswith(SYNC_DAG_ID_PREFIX):
        only = load_sync_selected(path, wanted[len(SYNC_DAG_ID_PREFIX) :])
        if only is not None:
            return {only.dag_id: build_sync_dag(only)}
    return {s.dag_id: build_sync_dag(s) for s in load_syncs(path).syncs}
