"""Operators for stream capture: consume → load → cleanup, a staleness check, and a CHANGES backfill.

Example (what the DAG factory builds for a table with ``stream:``)::

    raw = cfg.model_dump(mode="json")
    backfill = SnowbergStreamChangesOperator(task_id="changes_backfill", table_config=raw)
    consume = SnowbergStreamConsumeOperator(task_id="consume", table_config=raw)
    load = SnowbergStreamLoadOperator(task_id="load", table_config=raw, consumed=consume.output)
    cleanup = SnowbergStreamCleanupOperator(task_id="cleanup", table_config=raw, outlets=[table_asset(cfg)])
    check = SnowbergStreamStalenessOperator(task_id="stream_staleness", table_config=raw,
                                            schedule=cfg.schedule, trigger_rule="all_done", retries=0)
    backfill >> consume >> load >> cleanup >> check

Run params (``snowberg.streams.params``): ``recover_stale_stream``,
``changes_start``/``changes_end``/``changes_target``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator

from snowberg.airflow.lineage import StreamLoadLineage
from snowberg.config.stream_settings import StreamSource
from snowberg.config.table_config import TableConfig


def split_config(
    raw: dict[str, Any] | TableConfig, stream: dict[str, Any] | StreamSource | None
) -> tuple[TableConfig, StreamSource]:
    """The table config and its stream settings (``table_config['stream']`` unless given apart)."""
    if isinstance(raw, TableConfig):
        cfg, embedded = raw, getattr(raw, "stream", None)
    else:
        data = dict(raw)
        embedded = data.get("stream")
        if "stream" not in TableConfig.model_fields:
            data.pop("stream", None)
        cfg = TableConfig.model_validate(data)
        if "stream" in TableConfig.model_fields:
            embedded = getattr(cfg, "stream", None)
    src = stream if stream is not None else embedded
    if src is None:
        raise ValueError(f"table {cfg.name!r} has no stream settings ('stream:' in the table config)")
    return cfg, src if isinstance(src, StreamSource) else StreamSource.model_validate(src)


class _StreamOperator(BaseOperator):
    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog")
    ui_color = "#e0f2f1"

    def __init__(
        self,
        *,
        table_config: dict[str, Any] | TableConfig,
        stream: dict[str, Any] | StreamSource | None = None,
        snowflake_conn_id: str | None = None,
        catalog: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        cfg, src = split_config(table_config, stream)  # validates; pydantic only
        self.table_config = (
            table_config.model_dump(mode="json") if isinstance(table_config, TableConfig) else dict(table_config)
        )
        self.stream = src.model_dump(mode="json")
        self.snowflake_conn_id = snowflake_conn_id or cfg.snowflake_conn_id
        self.catalog = catalog or cfg.catalog

    def configs(self) -> tuple[TableConfig, StreamSource]:
        return split_config(self.table_config, self.stream)

    def connect(self, cfg: TableConfig) -> Any:
        """A Snowflake connection (autocommit; the consume step opens its own transaction)."""
        from snowberg.snowflake.source import snowflake_hook

        return snowflake_hook(self.snowflake_conn_id, cfg).get_conn()


class SnowbergStreamConsumeOperator(_StreamOperator):
    """Consume the stream into the staging table as one batch, in one Snowflake transaction.

    Creates the stream when configured (``stream.create``) and stops with a
    recovery hint when it is stale. With the run param
    ``recover_stale_stream=true`` it re-creates the stream with initial rows
    first; the load then replaces the target. Returns the batch (XCom).
    """

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.streams.params import resolve_stream_params
        from snowberg.streams.steps import consume_step

        cfg, stream = self.configs()
        request = resolve_stream_params(dict(context.get("params") or {}))
        conn = self.connect(cfg)
        try:
            return consume_step(
                cfg,
                stream,
                conn,
                open_catalog(self.catalog),
                run_id=context["run_id"],
                recover=request.recover,
            )
        finally:
            conn.close()


class SnowbergStreamLoadOperator(StreamLoadLineage, _StreamOperator):
    """Apply the staged batches up to the consumed one to Iceberg in one commit (idempotent)."""

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "consumed")

    def __init__(self, *, consumed: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.consumed = consumed

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.airflow.metrics import observed_load
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.streams.steps import load_step

        cfg, stream = self.configs()
        conn = self.connect(cfg)
        try:
            result = load_step(
                cfg,
                stream,
                conn,
                open_catalog(self.catalog),
                run_id=context["run_id"],
                consumed=self.consumed,
            )
        finally:
            conn.close()
        return observed_load(self, cfg.name, result)


class SnowbergStreamCleanupOperator(_StreamOperator):
    """Read the commit back, delete the staged rows it holds, mirror the batch id to a Variable."""

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.iceberg.state import AirflowVariables
        from snowberg.streams.steps import cleanup_step

        cfg, stream = self.configs()
        conn = self.connect(cfg)
        try:
            return cleanup_step(cfg, stream, conn, open_catalog(self.catalog), variables=AirflowVariables())
        finally:
            conn.close()


class SnowbergStreamStalenessOperator(_StreamOperator):
    """Fail (and so alert through the DAG's notifiers) when the stream is stale or will be within N intervals.

    ``schedule``: the DAG's schedule (preset, cron or duration); the margin is
    ``stream.stale_alert_intervals`` (default 2) × its longest interval.
    """

    def __init__(self, *, schedule: str | None = None, interval: timedelta | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.schedule_text = schedule
        self.interval = interval

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.streams.params import schedule_interval
        from snowberg.streams.steps import staleness_step

        cfg, stream = self.configs()
        interval = self.interval or schedule_interval(self.schedule_text) or timedelta(days=1)
        conn = self.connect(cfg)
        try:
            return staleness_step(stream, conn, interval=interval)
        finally:
            conn.close()


class SnowbergStreamChangesOperator(_StreamOperator):
    """Backfill a window of changes with CHANGES (AT/END) when the run params give one; consumes nothing."""

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.streams.changes import backfill_changes
        from snowberg.streams.params import resolve_stream_params

        cfg, stream = self.configs()
        request = resolve_stream_params(dict(context.get("params") or {}))
        if request.changes_start is None or request.changes_end is None:
            self.log.info("no changes_start/changes_end param: no CHANGES backfill this run")
            return {"status": "not_requested"}
        conn = self.connect(cfg)
        try:
            return backfill_changes(
                cfg,
                stream,
                conn,
                open_catalog(self.catalog),
                start=request.changes_start,
                end=request.changes_end,
                run_id=context["run_id"],
                target=request.changes_target,
            )
        finally:
            conn.close()


def build_stream_tasks(
    table_config: dict[str, Any], *, schedule: str | None, outlets: Sequence[Any] = ()
) -> dict[str, BaseOperator]:
    """Create and chain a stream table's tasks (call inside ``with DAG(...)``; the DAG takes
    ``snowberg.streams.params.STREAM_PARAM_SCHEMAS`` as its params)."""
    backfill = SnowbergStreamChangesOperator(task_id="changes_backfill", table_config=table_config)
    consume = SnowbergStreamConsumeOperator(task_id="consume", table_config=table_config)
    load = SnowbergStreamLoadOperator(task_id="load", table_config=table_config, consumed=consume.output)
    cleanup = SnowbergStreamCleanupOperator(task_id="cleanup", table_config=table_config, outlets=list(outlets))
    check = SnowbergStreamStalenessOperator(
        task_id="stream_staleness", table_config=table_config, schedule=schedule, trigger_rule="all_done", retries=0
    )
    backfill >> consume >> load >> cleanup >> check
    return {
        "changes_backfill": backfill,
        "consume": consume,
        "load": load,
        "cleanup": cleanup,
        "stream_staleness": check,
    }
