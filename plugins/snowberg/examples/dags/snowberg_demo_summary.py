from snowberg.local.summary_dag import build_summary_dags  # the demo's downstream Airflow DAG

globals().update(build_summary_dags(dag_file=__file__))
