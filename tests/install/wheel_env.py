"""Helpers of the install tests: the uv command, clean environments for a wheel venv, the recipe's pip line.

The test venvs log in to the local Snowflake emulator (fakesnow 0.12.1, run from the dev venv as a
server), which snowflake-connector-python 5.x cannot log in to ("Missing response field: master token"):
``EMULATOR_CONSTRAINT`` keeps them on 4.x. It is a constraint of these tests only; a deployment talking
to Snowflake has no such limit, and the wheel's requirements carry no upper bound on the connector.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dockerfile import pip_install_requirements

REPO = Path(__file__).resolve().parents[2]
DEPLOY_DOCKERFILE = REPO / "docker" / "deploy.Dockerfile"
EMULATOR_CONSTRAINT = "snowflake-connector-python<5"
DEV_BIN = Path(sys.executable).parent
# What the wheel is built from (the install tests' fixture and docker/Dockerfile's wheel stage copy exactly these).
WHEEL_SOURCES = ("pyproject.toml", "README.md", "LICENSE", "plugins/snowberg")


def uv_command() -> list[str]:
    """uv from the dev venv (the dev extra installs it), else from PATH."""
    local = DEV_BIN / "uv"
    if local.exists():
        return [str(local)]
    found = shutil.which("uv")
    if found:
        return [found]
    raise RuntimeError("uv is not installed: run scripts/bootstrap.sh (the dev extra brings it)")


def run(cmd: list[str], *, timeout: float = 600, **kw: Any) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}")
    return res


def runtime_requirements(wheel: Path) -> list[str]:
    """snowberg's own Requires-Dist lines without extras, read from the built wheel."""
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        [meta] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        text = z.read(meta).decode()
    return [
        line.split(":", 1)[1].strip()
        for line in text.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]


def deploy_requirements(wheel: Path) -> list[str]:
    """The recipe's pip line (docker/deploy.Dockerfile), its wheel glob pointed at the wheel just built."""
    [reqs] = pip_install_requirements(DEPLOY_DOCKERFILE)
    return [str(wheel) if r.endswith(".whl") else r for r in reqs]


def listed_pythons() -> list[tuple[int, int]]:
    """The Python versions the package's classifiers list (what snowberg says it is tested on)."""
    import tomllib

    classifiers = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["classifiers"]
    prefix = "Programming Language :: Python :: "
    out = []
    for c in classifiers:
        version = c.removeprefix(prefix)
        if c.startswith(prefix) and version.count(".") == 1:
            major, minor = version.split(".")
            out.append((int(major), int(minor)))
    return sorted(out)


def interpreters() -> dict[tuple[int, int], str]:
    """Each listed Python this machine has → an interpreter of it; the running one for its own version.

    Looked up as ``python3.X`` on PATH and under pyenv's versions (``$PYENV_ROOT``, default ``~/.pyenv``);
    each candidate is asked its version (a pyenv shim of an inactive version fails and is skipped).
    """
    found: dict[tuple[int, int], str] = {(sys.version_info[0], sys.version_info[1]): sys.executable}
    pyenv = Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser()
    for major, minor in listed_pythons():
        if (major, minor) in found:
            continue
        name = f"python{major}.{minor}"
        candidates = [shutil.which(name), *sorted(map(str, pyenv.glob(f"versions/{major}.{minor}.*/bin/{name}")))]
        for c in filter(None, candidates):
            try:
                res = subprocess.run(
                    [c, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True, timeout=30
                )
            except OSError:
                continue
            if res.returncode == 0 and res.stdout.split() == [str(major), str(minor)]:
                found[(major, minor)] = c
                break
    return found


@dataclass
class WheelVenv:
    kind: str
    root: Path
    install_seconds: float
    python_path: str = sys.executable  # the interpreter the venv was made from
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> str:
        return str(self.bin / "python")

    def env(self, **extra: str) -> dict[str, str]:
        """A clean environment: nothing of the dev venv, the test session's Airflow or the repo's settings.

        Bytecode is written (PYTHONDONTWRITEBYTECODE dropped): uv installs without it, and every later
        process of the test then reuses what the first one compiled.
        """
        drop = ("AIRFLOW", "PYICEBERG", "SNOWBERG", "_AIRFLOW")
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(drop)
            and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
        }
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != DEV_BIN.resolve()]
        env["PATH"] = os.pathsep.join([str(self.bin), *path])
        env["VIRTUAL_ENV"] = str(self.root)
        env.update(extra)
        return env


def freeze(python: str) -> dict[str, str]:
    out = run([*uv_command(), "pip", "freeze", "--python", python]).stdout
    pins = {}
    for line in out.splitlines():
        name, sep, version = line.partition("==")
        if sep:
            pins[name.lower().replace("_", "-")] = version
    return pins
