"""Airflow operators. Importing this package is cheap: heavy libraries load in ``execute()``."""
