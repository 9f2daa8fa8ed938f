"""The UI page registers through the package's ``airflow.plugins`` entry point: installing snowberg is enough."""

from __future__ import annotations

from importlib.metadata import entry_points


def test_the_installed_package_declares_the_plugin_entry_point() -> None:
    eps = [ep for ep in entry_points(group="airflow.plugins") if ep.name == "snowberg"]
    assert [ep.value for ep in eps] == ["snowberg.airflow.ui_plugin:SnowbergUiPlugin"]
    plugin = eps[0].load()
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
