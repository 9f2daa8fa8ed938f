"""The UI page registers through the package's ``airflow.plugins`` entry point: installing snowberg is enough."""

from __future__ import annotations

from importlib.metadata import entry_points


def test_the_installed_package_declares_the_plugin_entry_point() -> None:
    eps = [ep for ep in entry_points(group="airflow.plugins") if ep.name == "snowberg"]
    assert [ep.value for ep in eps] == ["snowberg.airflow.ui_plugin:SnowbergUiPlugin"]
    plugin = eps[0].load()()  # Airflow registers an instance of the class
    assert plugin.name == "snowberg"
    assert [a["url_prefix"] for a in plugin.fastapi_apps] == ["/snowberg"]
    assert [v["href"] for v in plugin.external_views] == ["/snowberg/"]


def test_airflow_loads_the_plugin_from_the_entry_point_with_an_empty_plugins_folder(tmp_path, monkeypatch) -> None:
    import subprocess
    import sys

    code = (
        "from airflow import plugins_manager as pm\n"
        "apps, _ = pm.get_fastapi_plugins()\n"
        "print(sorted((a['name'], a['url_prefix']) for a in apps))\n"
    )
    env = {**__import__("os").environ, "AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[('snowberg', '/snowberg')]", out.stdout[-2000:]


def test_a_task_process_loading_the_plugins_builds_no_page(tmp_path) -> None:
    """Every task process loads the plugins (Airflow's task runner integrates their macros): the page's FastAPI app
    is built only when the api-server asks for it. Building it at import cost every task of the deployment, a
    snowberg task or not, 0.5 s of CPU (FastAPI and the page's modules)."""
    import os
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from airflow.sdk.plugins_manager import integrate_macros_plugins\n"
        "integrate_macros_plugins()\n"
        "from airflow import plugins_manager as pm\n"
        "pm.ensure_plugins_loaded()\n"
        "heavy = sorted(m for m in ('fastapi', 'snowberg.airflow.ui') if m in sys.modules)\n"
        "loaded = [p['name'] for p in pm.get_plugin_info(attrs_to_dump=['name'])]  # builds the apps\n"
        "print(json.dumps([loaded, heavy]))\n"
    )
    env = {**os.environ, "AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded, heavy = __import__("json").loads(out.stdout.strip().splitlines()[-1])
    assert "snowberg" in loaded
    assert heavy == []
