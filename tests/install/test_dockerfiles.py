"""docker/deploy.Dockerfile (the deployment recipe) and docker/Dockerfile (the compose image), read without a daemon.

There is no Docker engine here, so each file is parsed: known instructions only,
a pinned official base image whose Airflow and Python satisfy snowberg's bounds,
COPY sources that exist and that .dockerignore does not drop, and pip lines that
install what the recipe says. The deploy recipe's pip line is also what
tests/install/test_wheel.py installs into its venvs.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest
from dockerfile import arg_defaults, base_images, instructions, pip_install_requirements, substitute
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from wheel_env import REPO, WHEEL_SOURCES

DEPLOY = REPO / "docker" / "deploy.Dockerfile"
COMPOSE = REPO / "docker" / "Dockerfile"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _airflow_requirement() -> Requirement:
    return next(Requirement(r) for r in PROJECT["dependencies"] if Requirement(r).name == "apache-airflow")


def _ignored(path: str) -> bool:
    patterns = [ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines() if ln.strip() and ln[0] != "#"]
    parts = Path(path).parts
    return any(
        fnmatch.fnmatch(path, p) or fnmatch.fnmatch(parts[0], p) or fnmatch.fnmatch(path, p.removeprefix("**/"))
        for p in patterns
    )


@pytest.mark.parametrize("dockerfile", [DEPLOY, COMPOSE], ids=["deploy", "compose"])
def test_the_base_is_the_official_image_of_an_airflow_and_python_snowberg_supports(dockerfile: Path) -> None:
    images = base_images(dockerfile)
    assert images and all(i == images[0] for i in images)
    repo, _, tag = images[0].partition(":")
    assert repo == "apache/airflow"
    airflow, _, python = tag.partition("-python")
    assert airflow in _airflow_requirement().specifier, f"Airflow {airflow} is outside {_airflow_requirement()}"
    major, minor = (int(x) for x in python.split("."))
    assert f"{major}.{minor}.0" in SpecifierSet(PROJECT["requires-python"])


@pytest.mark.parametrize("dockerfile", [DEPLOY, COMPOSE], ids=["deploy", "compose"])
def test_copy_sources_exist_and_reach_the_build_context(dockerfile: Path) -> None:
    for i in instructions(dockerfile):
        if i.keyword != "COPY" or "--from=" in i.value:
            continue
        sources = [w for w in i.value.split() if not w.startswith("--")][:-1]
        for src in sources:
            assert not _ignored(src.rstrip("/")), f"{dockerfile.name}:{i.line}: {src} is excluded by .dockerignore"
            if src.rstrip("/") == "dist" or src.startswith("dist/"):
                continue  # the wheel `uv build --wheel` writes (the recipe's first step)
            assert (REPO / src).exists(), f"{dockerfile.name}:{i.line}: {src} does not exist"


def test_the_deploy_recipe_installs_the_wheel_and_keeps_the_images_airflow() -> None:
    """The one wheel of this version: ``dist/`` often holds older builds, which a ``snowberg-*`` glob would take too.

    Before the fix: ``COPY dist/`` and ``/tmp/snowberg-dist/snowberg-*-py3-none-any.whl`` (every wheel in dist/).
    """
    wheel = f"snowberg-{PROJECT['version']}-py3-none-any.whl"
    assert pip_install_requirements(DEPLOY) == [["apache-airflow==3.3.2", f"/tmp/snowberg-dist/{wheel}"]]
    assert arg_defaults(instructions(DEPLOY))["AIRFLOW_VERSION"] == "3.3.2"
    assert arg_defaults(instructions(DEPLOY))["SNOWBERG_VERSION"] == PROJECT["version"]
    copies = [
        substitute(i.value, arg_defaults(instructions(DEPLOY))) for i in instructions(DEPLOY) if i.keyword == "COPY"
    ]
    assert f"--chown=airflow:0 dist/{wheel} /tmp/snowberg-dist/" in copies
    assert "--chown=airflow:0 dags/ /opt/airflow/dags/" in copies
    assert "--chown=airflow:0 include/ /opt/airflow/include/" in copies


def test_the_compose_image_builds_the_same_wheel_and_adds_the_emulator() -> None:
    instrs = instructions(COMPOSE)
    wheel_stage = [i.value for i in instrs[: next(n for n, i in enumerate(instrs) if i.value.endswith("AS wheel")) + 4]]
    copied = {src.rstrip("/") for v in wheel_stage if v.startswith("--chown") for src in v.split()[1:-1]}
    assert copied == set(WHEEL_SOURCES)  # exactly what tests/install builds its wheel from
    [reqs] = pip_install_requirements(COMPOSE)
    assert reqs[0] == "apache-airflow==3.3.2"
    assert reqs[-1] == "$(ls /tmp/snowberg-dist/snowberg-*-py3-none-any.whl)[local]"


def test_the_celery_pin_is_where_the_guide_says_and_the_guide_warns_about_celery_5_7() -> None:
    """Before the fix docs/airflow-deployment.md said "pinned in pyproject.toml" (only the dev extra pins it; the
    wheel's requirements do not) and did not say that celery 5.7.0 breaks CeleryExecutor."""
    pin = "celery[redis]>=5.5,<5.7"
    [compose] = pip_install_requirements(COMPOSE)
    assert pin in compose
    assert pin in PROJECT["optional-dependencies"]["dev"]
    assert not [r for r in PROJECT["dependencies"] if Requirement(r).name == "celery"]
    guide = " ".join((REPO / "docs" / "airflow-deployment.md").read_text().split())
    assert "pinned by the compose image (`docker/Dockerfile`) and the `dev` extra, not by snowberg's own" in guide
    assert f"`{pin}`. **celery 5.7.0 breaks `CeleryExecutor`**" in guide
