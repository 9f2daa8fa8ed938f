#!/usr/bin/env bash
# Create .venv and install snowberg with its dev/local extras from pyproject.toml.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${SNOWBERG_PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PY="$(command -v "$cand")"; break
    fi
  done
fi
[ -n "$PY" ] || { echo "snowberg needs Python 3.11 (set SNOWBERG_PYTHON)" >&2; exit 1; }

# uv resolves and installs Airflow's ~250 packages in seconds; pip is the fallback.
if ! command -v uv >/dev/null 2>&1 && ! "$PY" -m uv --version >/dev/null 2>&1; then
  "$PY" -m pip install --quiet --disable-pip-version-check uv || true
fi
if command -v uv >/dev/null 2>&1; then UV=(uv); elif "$PY" -m uv --version >/dev/null 2>&1; then UV=("$PY" -m uv); else UV=(); fi

if [ ! -x .venv/bin/python ]; then
  if [ ${#UV[@]} -gt 0 ]; then "${UV[@]}" venv --quiet -p "$PY" .venv; else "$PY" -m venv .venv; fi
fi
# Installed compiled (.pyc written now): where PYTHONDONTWRITEBYTECODE=1 is set (common in container
# images) every process would otherwise compile pyiceberg, pyarrow, the connector and Airflow again at
# each start. uv installs without bytecode unless asked; pip compiles by default.
# constraints.txt pins the versions the suite last passed with (like Airflow's own
# constraint files), so a new release upstream cannot change a clean install.
if [ ${#UV[@]} -gt 0 ]; then
  "${UV[@]}" pip install --quiet --compile-bytecode -p .venv/bin/python -c constraints.txt -e ".[dev]"
else
  .venv/bin/pip install --quiet -c constraints.txt -e ".[dev]"
fi
# The editable build leaves setuptools' plugins/snowberg.egg-info behind; plugins/ is on sys.path (the
# editable .pth), so importlib.metadata would see a second "snowberg" distribution and Airflow would load
# the UI plugin's entry point twice ("Plugin 'snowberg' already registered"). The venv's dist-info is the
# installed metadata; the leftover is not needed.
rm -rf plugins/snowberg.egg-info
