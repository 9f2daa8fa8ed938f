#!/bin/sh
# MWAA startup script: MWAA syncs the bucket's dags/ prefix to /usr/local/airflow/dags, so snowberg's
# configs travel in dags/include/ and are named here (docs/deployment.md).
export SNOWBERG_TABLES_CONFIG=/usr/local/airflow/dags/include/tables.yaml
export SNOWBERG_SYNCS_CONFIG=/usr/local/airflow/dags/include/syncs.yaml
