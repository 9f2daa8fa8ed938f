"""Where snowberg finds its YAML configs: an argument, the environment, or the deployment's ``include/``.

snowberg is installed into someone else's Airflow (an image, a Helm chart,
Astro, MWAA), so no path may be derived from where the package itself lives:
that is ``site-packages``. A config is looked up, in order:

1. the path the caller gives (a CLI ``--config``, a DAG file's argument);
2. the environment variable of that config (``SNOWBERG_TABLES_CONFIG``, …);
3. ``include/<file>`` beside the folder of the DAG file that asks
   (``dags/`` and ``include/`` are siblings in Airflow and Astro projects);
4. ``include/<file>`` under the current directory.

The first that is given wins (an explicit path or variable that names a
missing file is an error, not a reason to look further); when nothing is
given and no default exists, the error lists every place that was tried.
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path


class ConfigFile(StrEnum):
    """The configs snowberg reads; the value is the file's default name under ``include/``."""

    TABLES = "tables.yaml"
    SYNCS = "syncs.yaml"
    SUMMARY = "demo_summary.yaml"

    @property
    def env_var(self) -> str:
        return {
            ConfigFile.TABLES: "SNOWBERG_TABLES_CONFIG",
            ConfigFile.SYNCS: "SNOWBERG_SYNCS_CONFIG",
            ConfigFile.SUMMARY: "SNOWBERG_SUMMARY_CONFIG",
        }[self]


class ConfigNotFoundError(FileNotFoundError):
    """No config file was given and none exists where snowberg looks by default."""


def config_path(kind: ConfigFile, explicit: str | Path | None = None, *, dag_file: str | Path | None = None) -> Path:
    """The config file of ``kind`` (see the module docstring for the order)."""
    if explicit:
        return Path(explicit)
    from_env = os.environ.get(kind.env_var)
    if from_env:
        return Path(from_env)
    candidates = []
    if dag_file is not None:
        candidates.append(Path(dag_file).resolve().parent.parent / "include" / kind.value)
    here = Path.cwd() / "include" / kind.value
    if here not in candidates:  # Airflow run from the project folder: one place, named once
        candidates.append(here)
    for c in candidates:
        if c.is_file():
            return c
    tried = ", ".join(str(c) for c in candidates)
    raise ConfigNotFoundError(f"no {kind.value} given: pass a path, set {kind.env_var}, or create one of: {tried}")
