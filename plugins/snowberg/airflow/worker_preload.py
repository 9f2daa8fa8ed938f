"""Imports a LocalExecutor's forkserver makes once, so that every snowberg task process starts with them.

Every task process pays its imports and the DAG file's parse again (docs/performance.md, "Busy runs"): the
Snowflake connector (which imports pandas and numpy), pyiceberg, pyarrow, and Airflow's discovery of the
providers' asset-URI handlers, which the first ``Asset`` of the parse triggers and which imports the Amazon
provider's S3 hook and boto3. With the scheduler's ``multiprocessing`` start method set to ``forkserver``,
Airflow (3.3 and later, ``[scheduler] mp_forkserver_preload``) has the forkserver import the listed modules
once; the LocalExecutor's workers are forked from it and fork their tasks in turn, so each task finds these
modules in ``sys.modules`` and pays neither the imports nor the discovery. docs/airflow-deployment.md
gives the two settings; ``bench.deployment_cost --preload`` measures what they save.

Python's forkserver ignores a preload module that fails to import, and so does this module for each of the
libraries it lists: a deployment without one of them (no Glue, say) still preloads the rest. Nothing here
reads a config, a connection or a Variable, and nothing connects anywhere: a module-level import only.
"""

from __future__ import annotations

import gc
import importlib
import logging

log = logging.getLogger(__name__)

# What a snowberg task imports on its way (tests/snowberg/airflow/test_task_imports.py fails when a task's parse or
# execute() imports a library this list leaves out). Airflow's own worker and task-runner modules come first: a
# worker forked from a forkserver re-imports Airflow otherwise, as Airflow's docs for the setting point out.
PRELOAD_MODULES: tuple[str, ...] = (
    "airflow.executors.local_executor",
    "airflow.sdk.execution_time.supervisor",
    "airflow.sdk.execution_time.task_runner",
    "airflow.dag_processing.dagbag",  # the task runner parses the DAG file with it
    "snowflake.connector",
    "pyarrow.dataset",
    "pyarrow.parquet",
    "pyiceberg.catalog.sql",
    "pyiceberg.io.pyarrow",
    "pyiceberg.table",
    "snowberg.airflow.dag_factory",
    "snowberg.airflow.sync_dags",
    "snowberg.airflow.operators.incremental",
    "snowberg.airflow.operators.health",
    "snowberg.load.plan",
    "snowberg.load.column_backfill",
    "snowberg.snowflake.hook",
    "snowberg.iceberg.merge",
    "snowberg.load.extract",
    "snowberg.load.publish",
    "snowberg.iceberg.catalogs",
    "snowberg.iceberg.gate",
    "snowberg.checks.health",
)


def preload() -> list[str]:
    """Import ``PRELOAD_MODULES`` and run Airflow's asset-URI handler discovery; the modules that failed."""
    failed = []
    for name in PRELOAD_MODULES:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            failed.append(name)
            log.warning("snowberg worker preload: cannot import %s (%s); tasks import it themselves", name, exc)
    # Building an Asset whose scheme has no handler of its own makes Airflow discover every provider's handlers
    # (public API; the discovery is cached in the process, and forked tasks inherit the cache).
    from airflow.sdk import Asset

    Asset(uri="iceberg://preload/discovery/of_asset_uri_handlers", name="snowberg_worker_preload")
    # Each task loads the plugins for their macros (cached in the process): once here, as a scheduler forking
    # its workers has done already. A plugin that fails to load is the task's to report, not the forkserver's.
    try:
        from airflow.sdk.plugins_manager import integrate_macros_plugins

        integrate_macros_plugins()
    except Exception:  # noqa: BLE001 - any plugin's error; the tasks load the plugins again and report it
        log.warning("snowberg worker preload: the plugins did not load; tasks load them themselves", exc_info=True)
    return failed


preload()
# Python's advice for a process that forks without exec (the gc module's docs): freeze what is there before the
# forks, so that a collection in a worker or a task never walks, and so never copies, the preloaded modules'
# pages. Without it a task's first full collection touched every page: 0.25 s of CPU per task, measured by
# forking from a preloaded process (24,000 page faults against 3,900 with the freeze).
gc.freeze()
