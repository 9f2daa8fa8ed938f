"""The deployment recipes of docs/deployment.md, checked without the platforms (no Kubernetes, Astro or MWAA here).

Each recipe file is parsed and checked against what snowberg reads (config
variables, the connection and catalog names of the example project, the
package version), and the guide shows every file as it is in the repository.
"""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path

import pytest
import yaml
from dockerfile import arg_defaults, instructions, parse
from packaging.requirements import Requirement
from wheel_env import REPO

from snowberg.config.examples import example_files
from snowberg.config.locations import ConfigFile

GUIDE = REPO / "docs" / "deployment.md"
RECIPES = REPO / "docs" / "deploy"
HELM = RECIPES / "helm-values.yaml"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
DEPLOY = REPO / "docker" / "deploy.Dockerfile"


def _blocks(lang: str) -> list[str]:
    """The guide's fenced code blocks of language ``lang`` ("" for none), dedented."""
    out, current, fence = [], None, None
    for line in GUIDE.read_text().splitlines():
        stripped = line.strip()
        if current is None and stripped.startswith("```"):
            current, fence = [], stripped[3:]
            indent = len(line) - len(line.lstrip())
        elif current is not None and stripped == "```":
            if fence == lang:
                out.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line[indent:])
    return out


def _meaningful(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def _example_yaml(name: str) -> dict:
    return yaml.safe_load(example_files()[f"include/{name}"])


def test_the_helm_values_run_the_recipes_image_with_configs_from_the_configmap() -> None:
    values = yaml.safe_load(HELM.read_text())
    # Only keys of the official chart's values.yaml (checked against the chart: top-level volumes/volumeMounts/env/
    # secret reach every Airflow container and the KubernetesExecutor pod template).
    allowed = {"airflowVersion", "executor", "defaultAirflowRepository", "defaultAirflowTag", "env", "secret"}
    assert set(values) <= allowed | {"volumes", "volumeMounts"}
    version = arg_defaults(instructions(DEPLOY))["AIRFLOW_VERSION"]
    assert values["airflowVersion"] == version and values["defaultAirflowTag"] == version
    # The chart's pod template (KubernetesExecutor task pods) takes images.pod_template or defaultAirflow*,
    # never images.airflow: the image must be set where the task pods get it.
    assert values["defaultAirflowRepository"] != "apache/airflow" and "images" not in values
    assert values["executor"] == "KubernetesExecutor"
    mounts = {m["name"]: m["mountPath"] for m in values["volumeMounts"]}
    volumes = {v["name"]: v for v in values["volumes"]}
    assert set(mounts) == set(volumes)
    env = {e["name"]: e["value"] for e in values["env"]}
    configmap_files = set()
    for kind in (ConfigFile.TABLES, ConfigFile.SYNCS):
        path = Path(env[kind.env_var])
        assert path.name == kind.value and f"include/{kind.value}" in example_files()
        [volume] = [n for n, m in mounts.items() if path.parent == Path(m)]
        configmap_files.add((volumes[volume]["configMap"]["name"], path.name))
    # The connection and the catalog the example project's tables use are the ones the values provide.
    defaults = _example_yaml("tables.yaml")["defaults"]
    conn_var = f"AIRFLOW_CONN_{defaults['snowflake_conn_id'].upper()}"
    assert conn_var in {s["envName"] for s in values["secret"]}
    assert all(set(s) == {"envName", "secretName", "secretKey"} for s in values["secret"])
    assert f"PYICEBERG_CATALOG__{defaults['catalog'].upper()}__TYPE" in env
    # The guide's kubectl line creates that ConfigMap from those files.
    text = GUIDE.read_text()
    for name, file in configmap_files:
        assert f"kubectl create configmap {name} " in text and f"--from-file=include/{file}" in text


def test_the_astro_and_mwaa_requirements_name_this_version() -> None:
    for path in (RECIPES / "astro" / "requirements.txt", RECIPES / "mwaa" / "requirements.txt"):
        reqs = [ln for ln in _meaningful(path.read_text()) if not ln.startswith("--")]
        assert [str(Requirement(r)) for r in reqs] == [f"snowberg=={VERSION}"], path
    options = [ln for ln in _meaningful((RECIPES / "mwaa" / "requirements.txt").read_text()) if ln.startswith("--")]
    assert options == ["--find-links /usr/local/airflow/plugins"]


def test_a_dag_file_laid_out_as_mwaa_syncs_it_builds_its_dags_from_the_startup_scripts_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MWAA syncs the bucket's dags/ to /usr/local/airflow/dags; the configs travel in dags/include/."""
    from snowberg.airflow.dag_factory import build_dags
    from snowberg.airflow.sync_dags import build_sync_dags

    exports = {}
    for line in _meaningful((RECIPES / "mwaa" / "startup.sh").read_text()):
        key, _, value = line.removeprefix("export ").partition("=")
        exports[key] = shlex.split(value)[0]
    root = Path("/usr/local/airflow/dags")
    assert set(exports) == {ConfigFile.TABLES.env_var, ConfigFile.SYNCS.env_var}
    dags = tmp_path / "usr/local/airflow/dags"
    for var, value in exports.items():
        rel = Path(value).relative_to(root)
        (dags / rel).parent.mkdir(parents=True, exist_ok=True)
        (dags / rel).write_bytes(example_files()[f"include/{rel.name}"])
        monkeypatch.setenv(var, str(dags / rel))
    (dags / "snowberg_tables.py").write_bytes(example_files()["dags/snowberg_tables.py"])
    monkeypatch.chdir(tmp_path)  # no ./include here: only the startup script's variables can find the configs
    tables = build_dags(dag_file=dags / "snowberg_tables.py")
    syncs = build_sync_dags(dag_file=dags / "snowberg_syncs.py")
    assert "snowberg_demo_orders" in tables and "snowberg_sync_menu_to_native" in syncs


def test_the_guide_shows_every_recipe_file_as_it_is() -> None:
    helm_blocks = [yaml.safe_load(b) for b in _blocks("yaml")]
    assert yaml.safe_load(HELM.read_text()) in helm_blocks
    deploy = [(i.keyword, i.value) for i in instructions(DEPLOY)]
    shown = [[(i.keyword, i.value) for i in parse(b)] for b in _blocks("dockerfile")]
    assert deploy in shown, "docs/deployment.md does not show docker/deploy.Dockerfile's instructions"
    plain = [_meaningful(b) for b in _blocks("")] + [_meaningful(b) for b in _blocks("sh")]
    for path in (
        RECIPES / "astro" / "requirements.txt",
        RECIPES / "mwaa" / "requirements.txt",
        RECIPES / "mwaa" / "startup.sh",
    ):
        assert _meaningful(path.read_text()) in plain, f"docs/deployment.md does not show {path.relative_to(REPO)}"
    for path in (HELM, DEPLOY, *RECIPES.rglob("*.*")):
        assert str(path.relative_to(REPO)) in GUIDE.read_text() or path.name in GUIDE.read_text(), path


def test_the_helm_recipe_adds_the_charts_repository_before_installing_from_it() -> None:
    """``apache-airflow/airflow`` names a chart of a repository the reader's helm does not know yet.

    Before the fix the guide ran ``helm install airflow apache-airflow/airflow`` alone: "Error: repo
    apache-airflow not found" on a fresh machine.
    """
    commands = [
        ln.split("#", 1)[0].strip() for block in _blocks("bash") for ln in block.splitlines() if ln.startswith("helm ")
    ]
    install = next(i for i, c in enumerate(commands) if c.startswith("helm install") and "apache-airflow/" in c)
    # The official chart's repository, as the chart's own documentation adds it.
    assert "helm repo add apache-airflow https://airflow.apache.org" in commands[:install]
    assert "helm repo update" in commands[:install]
