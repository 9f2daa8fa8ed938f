from snowberg.airflow.dag_factory import build_dags  # one Airflow DAG per table in include/tables.yaml

globals().update(build_dags(dag_file=__file__))
