"""snowberg as an Airflow provider (``apache_airflow_provider`` entry point): valid, importable, listed once."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from importlib.metadata import entry_points, version
from pathlib import Path

import jsonschema

from snowberg.airflow.provider_info import get_provider_info


def test_the_provider_info_follows_airflows_schema_and_claims_nothing_we_do_not_add() -> None:
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == "snowberg"
    # snowberg adds no connection type (it uses the snowflake and iceberg ones) and registers its UI page
    # through the airflow.plugins entry point; listing it here would load it twice.
    assert "connection-types" not in info and "plugins" not in info and "hook-class-names" not in info


def test_every_listed_class_and_module_is_what_it_claims_to_be() -> None:
    from airflow.providers.snowflake.hooks.snowflake import SnowflakeHook
    from airflow.sdk import BaseNotifier, BaseOperator
    from airflow.triggers.base import BaseTrigger

    info = get_provider_info()
    for path in info["notifications"]:
        module, _, name = path.rpartition(".")
        assert issubclass(getattr(importlib.import_module(module), name), BaseNotifier), path
    kinds = {"operators": BaseOperator, "hooks": SnowflakeHook, "triggers": BaseTrigger}
    for key, base in kinds.items():
        for module_name in info[key][0]["python-modules"]:
            module = importlib.import_module(module_name)
            own = [
                v
                for v in vars(module).values()
                if isinstance(v, type) and issubclass(v, base) and v.__module__ == module_name
            ]
            assert own, f"{module_name} defines no {base.__name__}"


def test_airflow_lists_snowberg_once_and_loads_its_plugin_once(tmp_path: Path) -> None:
    """A fresh Airflow process: the provider is discovered with the installed version, the plugin has no error."""
    [ep] = [e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("snowberg.")]
    assert ep.value == "snowberg.airflow.provider_info:get_provider_info"
    code = (
        "import json\n"
        "from airflow.providers_manager import ProvidersManager\n"
        "from airflow import plugins_manager as pm\n"
        "m = ProvidersManager()\n"
        "p = m.providers['snowberg']\n"
        "notifiers = sorted(n for n in m.notification if n.startswith('snowberg.'))\n"
        "plugins, errors = pm._get_plugins()\n"
        "print(json.dumps({'version': p.version, 'notifiers': notifiers,\n"
        "    'plugins': [x.name for x in plugins if x.name == 'snowberg'], 'errors': errors}))\n"
    )
    env = {**os.environ, "AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path), "AIRFLOW__CORE__LAZY_LOAD_PROVIDERS": "False"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["version"] == version("snowberg")
    assert got["notifiers"] == sorted(get_provider_info()["notifications"])
    assert got["plugins"] == ["snowberg"]
    assert got["errors"] == {}
