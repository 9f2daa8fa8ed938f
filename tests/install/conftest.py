"""Fixtures for the install tests: the wheel (built once per session) and fresh venvs that hold only it.

* ``wheel``: ``uv build --wheel`` from a copy of exactly what the wheel is made
  of (pyproject.toml, README.md, LICENSE, plugins/snowberg), so the build leaves
  nothing in the checkout and needs nothing else from it.
* ``wheel_venv`` (``newest`` / ``lowest``): a new venv with the wheel and the
  requirements of docker/deploy.Dockerfile's pip line, installed by uv (its
  cache makes a warm install take seconds): the newest versions snowberg's
  bounds allow, on the newest Python of ``PYTHONS``, or ``--resolution
  lowest-direct`` with snowberg's own requirements passed as direct ones, so
  each of its lower bounds is what gets installed, on the oldest. No dev
  extra, no fakesnow.
* ``other_python_venv``: the newest versions on each Python of ``PYTHONS`` in
  between (where the tests run a load only: the suite's own venv already runs
  everything on near-newest versions, so the other Pythons get what differs
  by interpreter: the install and a load through Airflow).

``PYTHONS``: each Python the package's classifiers list that this machine has
(on PATH as ``python3.X``, or under pyenv's versions), the test's own first.

One constraint is added for the test only: ``snowflake-connector-python<5``. The
test venvs log in to the local Snowflake emulator (fakesnow 0.12.1, run from the
dev venv as a server), which connector 5.x cannot log in to ("Missing response
field: master token"); a deployment talking to Snowflake has no such limit.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from wheel_env import (
    EMULATOR_CONSTRAINT,
    REPO,
    WHEEL_SOURCES,
    WheelVenv,
    deploy_requirements,
    freeze,
    interpreters,
    run,
    runtime_requirements,
    uv_command,
)

PYTHONS = interpreters()
NEWEST, LOWEST = max(PYTHONS), min(PYTHONS)
OTHERS = sorted(set(PYTHONS) - {NEWEST, LOWEST})


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    for name in WHEEL_SOURCES:
        if (REPO / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
            shutil.copytree(REPO / name, src / name, ignore=ignore)
        else:
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    run([*uv_command(), "build", "--wheel", "--quiet", "--out-dir", str(root / "dist"), str(src)])
    [built] = sorted((root / "dist").glob("snowberg-*.whl"))
    return built


@pytest.fixture(scope="session", params=["newest", "lowest"])
def wheel_venv(request: pytest.FixtureRequest, wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> WheelVenv:
    kind = request.param
    return _venv(kind, PYTHONS[NEWEST if kind == "newest" else LOWEST], wheel, tmp_path_factory)


@pytest.fixture(scope="session", params=[f"{v[0]}.{v[1]}" for v in OTHERS])
def other_python_venv(
    request: pytest.FixtureRequest, wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> WheelVenv:
    version = tuple(int(x) for x in request.param.split("."))
    return _venv("newest", PYTHONS[version], wheel, tmp_path_factory)  # type: ignore[index]


def _venv(kind: str, python: str, wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> WheelVenv:
    root = tmp_path_factory.mktemp(f"venv-{kind}") / "venv"
    run([*uv_command(), "venv", "--quiet", "--python", python, str(root)])
    constraints = root.parent / "constraints.txt"
    constraints.write_text(EMULATOR_CONSTRAINT + "\n")
    cmd = [*uv_command(), "pip", "install", "--quiet", "--python", str(root / "bin" / "python"), "-c", str(constraints)]
    if kind == "lowest":
        direct = root.parent / "snowberg-requirements.txt"
        direct.write_text("\n".join(runtime_requirements(wheel)) + "\n")
        cmd += ["--resolution", "lowest-direct", "-r", str(direct)]
    t = time.monotonic()
    run([*cmd, *deploy_requirements(wheel)])
    venv = WheelVenv(kind=kind, root=root, install_seconds=round(time.monotonic() - t, 1), python_path=python)
    venv.versions = freeze(venv.python)
    return venv


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The Snowflake emulator, run from the dev venv (the wheel venvs have no fakesnow), seeded with demo data."""
    from snowberg.local.seed import seed
    from snowberg.local.stack import FakesnowServer

    root = tmp_path_factory.mktemp("install-emulator")
    server = FakesnowServer(root / "fakesnow")
    server.start()
    try:
        conn: Any = server.connect()
        try:
            server.seeded = seed(conn, orders=3_000)  # type: ignore[attr-defined]
        finally:
            conn.close()
        yield server
    finally:
        server.stop()
