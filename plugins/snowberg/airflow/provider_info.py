"""What snowberg adds to Airflow, as Airflow's provider registry reads it (the ``apache_airflow_provider`` entry point).

Registering as a provider puts snowberg and its version in ``airflow providers list``
and the UI's Providers page, so an operator can see which snowberg a worker runs,
and lists the notifier and trigger classes it ships.

Listed honestly, and only what snowberg really adds:

* no connection types: snowberg uses the Snowflake provider's ``snowflake`` and
  the Iceberg provider's ``iceberg`` connections (its hook subclasses the
  Snowflake provider's and registers nothing);
* no ``plugins`` entry: the UI page registers through the ``airflow.plugins``
  entry point; Airflow would load a plugin listed here a second time and record
  "Plugin 'snowberg' already registered" as an import error.

Airflow calls ``get_provider_info()`` during provider discovery in every
component, so this module imports nothing.
"""

from __future__ import annotations

from typing import Any

OPERATOR_MODULES = (
    "snowberg.airflow.operators.incremental",
    "snowberg.airflow.operators.scale",
    "snowberg.airflow.operators.streams",
    "snowberg.airflow.operators.volume",
    "snowberg.airflow.operators.freshness",
    "snowberg.airflow.operators.health",
    "snowberg.airflow.operators.storage",
    "snowberg.airflow.operators.maintenance",
    "snowberg.airflow.operators.lake_to_snowflake",
)
HOOK_MODULES = ("snowberg.snowflake.hook",)
TRIGGER_MODULES = ("snowberg.airflow.operators.freshness", "snowberg.airflow.watch_trigger")
NOTIFIERS = (
    "snowberg.airflow.alerts.EmailAlertNotifier",
    "snowberg.airflow.alerts.SlackAlertNotifier",
    "snowberg.airflow.alerts.SnsAlertNotifier",
    "snowberg.airflow.alerts.WebhookNotifier",
)
INTEGRATION = "snowberg"


def get_provider_info() -> dict[str, Any]:
    """The provider description (Airflow's ``provider_info.schema.json``)."""
    return {
        "package-name": "snowberg",
        "name": "snowberg",
        "description": "Incremental, exactly-once loads between Snowflake and Apache Iceberg, with checks and alerts.",
        "integrations": [
            {"integration-name": INTEGRATION, "tags": ["software"]},
        ],
        "operators": [{"integration-name": INTEGRATION, "python-modules": list(OPERATOR_MODULES)}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": list(HOOK_MODULES)}],
        "triggers": [{"integration-name": INTEGRATION, "python-modules": list(TRIGGER_MODULES)}],
        "notifications": list(NOTIFIERS),
    }
