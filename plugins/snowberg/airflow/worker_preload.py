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

import importlib
import logging

log = logging.getLogger(__name__)

# What a snowberg task imports on its way (tests/snowberg/airflow/test_worker_preload.py checks the list against
# what a task's parse and execute() import). Airflow's own worker and task-runner modules come first: a
# forkserver's worker re-imports Airflow otherwise, which Airflow's docs for the setting point out.
PRELOAD_MODULES: tuple[str, ...] = (
    "airflow.executors.local_executor",
    "airflow.sdk.execution_time.supervisor",
    "airflow.sdk.execution_time.task_runner",
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
    return failed


preload()
