"""Airflow plugin: the snowberg page in the Airflow UI (served by the api-server; see snowberg/airflow/ui.py).

Registered through the ``airflow.plugins`` entry point in the package metadata,
so installing snowberg is enough: no file to copy into a plugins folder. The
api-server mounts the page at ``/snowberg/``; the UI's navigation shows it as
"snowberg tables" (an external view, displayed inside the Airflow UI).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from snowberg.airflow.ui import create_app


class SnowbergUiPlugin(AirflowPlugin):
    name = "snowberg"
    fastapi_apps = [{"app": create_app(), "url_prefix": "/snowberg", "name": "snowberg"}]
    external_views = [
        {
            "name": "snowberg tables",
            "href": "/snowberg/",
            "destination": "nav",
            "url_route": "snowberg",
            "category": "browse",
        }
    ]
