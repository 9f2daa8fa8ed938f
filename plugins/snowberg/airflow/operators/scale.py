"""Scale-out: a large window loaded by mapped slice tasks, committed once.

    plan ─► plan_slices ─► load_slice ×N (dynamic task mapping) ─► commit ─► publish

* ``plan_slices`` (``SnowbergSlicePlanOperator``) cuts the planned window into
  cursor ranges of at most ``max_rows_per_slice`` rows and prepares the table
  (creates it, applies schema changes). Its XCom is a list: one entry per slice.
* ``load_slice`` (``SnowbergSliceLoadOperator``, mapped with
  ``.partial(...).expand(slice_task=...)``) extracts one slice and writes its
  Parquet data files plus a small staging manifest. It commits nothing, so a
  failed slice retries alone, on any worker, without touching the others.
* ``commit`` (``SnowbergSliceCommitOperator``) reads the slices' manifests and
  appends every data file in one Iceberg commit that carries the watermark
  (and, for merge tables, the copy-on-write delete of replaced keys). A re-run
  after a commit that landed appends nothing; a re-run after a commit that
  failed commits the same files once.

Under CeleryExecutor the mapped instances are queued like any task and spread
over the workers; ``max_active_tis_per_dagrun`` caps how many read Snowflake at
once. ``sliced_load`` wires the four tasks into a DAG (used by the factory
when a table opts in to scale-out).

Example::

    plan = SnowbergPlanOperator(task_id="plan", table_config=raw)
    commit = sliced_load(raw, plan, max_parallel=4)
    publish = SnowbergPublishOperator(task_id="publish", table_config=raw, window=plan.output)
    commit >> publish
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from snowberg.airflow.lineage import LoadLineage
from snowberg.airflow.operators.incremental import SnowbergTableOperator


class SnowbergSlicePlanOperator(SnowbergTableOperator):
    """Cut the planned window into slices; return one mapped-task argument per slice.

    An empty list (nothing new, a dry run, or the run already committed) makes
    Airflow skip the mapped ``load_slice`` tasks; ``commit`` still runs and
    records nothing.
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "window", "max_rows_per_slice")
    ui_color = "#c9e4f5"

    def __init__(
        self, *, window: Any, max_rows_per_slice: int | None = None, slice_method: str = "quantiles", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.window = window
        self.max_rows_per_slice = max_rows_per_slice
        self.slice_method = slice_method

    def execute(self, context: Any) -> list[dict[str, Any]]:
        from snowberg.core.window import Window
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.load.mapped import prepare_slices
        from snowberg.snowflake.source import snowflake_hook

        cfg = self.cfg
        w = Window.from_dict(self.window)
        conn = snowflake_hook(self.snowflake_conn_id, cfg).get_conn()
        try:
            return prepare_slices(
                cfg,
                conn,
                open_catalog(self.catalog),
                w,
                max_rows=int(self.max_rows_per_slice) if self.max_rows_per_slice else None,
                method=self.slice_method,
            )
        finally:
            conn.close()


class SnowbergSliceLoadOperator(SnowbergTableOperator):
    """Extract one slice and write its data files (not committed). Map it over ``plan_slices``' output."""

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "slice_task")
    ui_color = "#b3d9f2"

    def __init__(self, *, slice_task: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.slice_task = slice_task

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.load.mapped import write_slice
        from snowberg.snowflake.source import snowflake_hook

        cfg = self.cfg
        conn = snowflake_hook(self.snowflake_conn_id, cfg).get_conn()
        try:
            return write_slice(cfg, conn, open_catalog(self.catalog), dict(self.slice_task))
        finally:
            conn.close()


class SnowbergSliceCommitOperator(LoadLineage, SnowbergTableOperator):
    """Append every slice's data files in one Iceberg commit with the watermark (idempotent per run).

    Runs when no upstream failed (``none_failed``), so a window with nothing
    new — whose mapped tasks were skipped — still ends cleanly.
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "window", "slice_results")
    ui_color = "#d6ecfa"

    def __init__(self, *, window: Any, slice_results: Any, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", "none_failed")
        super().__init__(**kwargs)
        self.window = window
        self.slice_results = slice_results

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.core.window import Window
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.load.mapped import commit_slices

        results = [dict(r) for r in (self.slice_results or []) if r]
        from snowberg.airflow.metrics import observed_load

        result = commit_slices(self.cfg, open_catalog(self.catalog), Window.from_dict(self.window), results)
        return observed_load(self, self.cfg.name, result)


def sliced_load(
    table_config: dict[str, Any],
    plan: Any,
    *,
    max_rows_per_slice: int | None = None,
    max_parallel: int | None = None,
    slice_method: str = "quantiles",
) -> SnowbergSliceCommitOperator:
    """Add plan_slices → load_slice (mapped) → commit after ``plan``; return the commit task.

    Call inside a ``with DAG(...)`` block. ``max_parallel`` caps the mapped
    slices running at once in one DAG run (``max_active_tis_per_dagrun``).
    """
    prepare = SnowbergSlicePlanOperator(
        task_id="plan_slices",
        table_config=table_config,
        window=plan.output,
        max_rows_per_slice=max_rows_per_slice,
        slice_method=slice_method,
    )
    partial_kwargs: dict[str, Any] = {"task_id": "load_slice", "table_config": table_config}
    if max_parallel:
        partial_kwargs["max_active_tis_per_dagrun"] = max_parallel
    slices = SnowbergSliceLoadOperator.partial(**partial_kwargs).expand(slice_task=prepare.output)
    commit = SnowbergSliceCommitOperator(
        task_id="commit",
        table_config=table_config,
        window=plan.output,
        slice_results=slices.output,
    )
    plan >> prepare >> slices >> commit
    return commit


class SnowbergUnloadOperator(LoadLineage, SnowbergTableOperator):
    """Push-down: Snowflake unloads the planned window as Parquet into a stage in the lake; one commit registers it.

    For initial loads and full refreshes of very large tables (see
    docs/performance.md). ``stage`` is ``DB.SCHEMA.STAGE``, an external stage
    whose URL (``stage_url``, as the lake's FileIO addresses it) is in the
    lake's storage. Use in place of the load task::

        plan >> SnowbergUnloadOperator(task_id="unload", table_config=raw, window=plan.output,
                                       stage="LAKE.PUBLIC.LAKE_STAGE",
                                       stage_url="s3://lake/warehouse/shop/orders/data") >> publish
    """

    template_fields: Sequence[str] = ("snowflake_conn_id", "catalog", "window", "stage", "stage_url", "prefix")
    ui_color = "#e1f0fa"

    def __init__(
        self,
        *,
        window: Any,
        stage: str,
        stage_url: str,
        prefix: str = "snowberg-unload",
        max_file_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.window = window
        self.stage = stage
        self.stage_url = stage_url
        self.prefix = prefix
        self.max_file_size = max_file_size

    def execute(self, context: Any) -> dict[str, Any]:
        from snowberg.core.window import Window
        from snowberg.iceberg.catalogs import open_catalog
        from snowberg.load.unload import DEFAULT_MAX_FILE_SIZE, UnloadTarget, unload_window
        from snowberg.snowflake.source import snowflake_hook

        cfg = self.cfg
        target = UnloadTarget(
            stage=self.stage,
            stage_url=self.stage_url,
            prefix=self.prefix,
            max_file_size=int(self.max_file_size or DEFAULT_MAX_FILE_SIZE),
        )
        from snowberg.airflow.metrics import observed_load

        conn = snowflake_hook(self.snowflake_conn_id, cfg).get_conn()
        try:
            result = unload_window(
                cfg,
                conn,
                open_catalog(self.catalog),
                Window.from_dict(self.window),
                target,
                try_number=int(getattr(context.get("ti"), "try_number", 1) or 1),
            )
        finally:
            conn.close()
        return observed_load(self, cfg.name, result)
