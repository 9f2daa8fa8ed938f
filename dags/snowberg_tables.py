"""Airflow DAGs: one per table in include/tables.yaml (Snowflake → Iceberg watermark loads).

(The words "airflow" and "dag" in this file let Airflow's safe-mode discovery find it.)

Thin on purpose: the factory validates the config and wires tasks; nothing
here touches a connection, a Variable or a heavy library.
"""

import os
from pathlib import Path

from snowberg.airflow.dag_factory import build_dags

CONFIG = os.environ.get("SNOWBERG_TABLES_CONFIG") or str(
    Path(__file__).resolve().parent.parent / "include" / "tables.yaml"
)

globals().update(build_dags(CONFIG))
