from snowberg.airflow.sync_dags import build_sync_dags  # one Airflow DAG per sync in include/syncs.yaml

globals().update(build_sync_dags(dag_file=__file__))
