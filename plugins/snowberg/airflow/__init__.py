"""Everything Airflow-facing: the DAG factory, operators, notifiers."""
