"""Airflow plugin: the snowberg page in the Airflow UI (served by the api-server; see snowberg/airflow/ui.py).

Registered through the ``airflow.plugins`` entry point in the package metadata,
so installing snowberg is enough: no file to copy into a plugins folder. The
api-server mounts the page at ``/snowberg/``; the UI's navigation shows it as
"snowberg tables" (an external view, displayed inside the Airflow UI).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from airflow.plugins_manager import AirflowPlugin


@cache
def snowberg_app() -> Any:
    """The page's FastAPI app, built once, when the api-server integrates the plugin."""
    from snowberg.airflow.ui import create_app

    return create_app()


class SnowbergUiPlugin(AirflowPlugin):
    name = "snowberg"

    # A property, not a list built at import: every task process loads the plugins (Airflow's task runner
    # integrates their macros) and only the api-server serves the page. Built at import, FastAPI and the page's
    # modules cost every task of the deployment, a snowberg task or not, 0.5 s of CPU
    # (tests/snowberg/airflow/test_ui_plugin.py).
    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [{"app": snowberg_app(), "url_prefix": "/snowberg", "name": "snowberg"}]

    external_views = [
        {
            "name": "snowberg tables",
            "href": "/snowberg/",
            "destination": "nav",
            "url_route": "snowberg",
            "category": "browse",
        }
    ]
