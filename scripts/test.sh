#!/usr/bin/env bash
# Quick start, command 2: install, lint, type-check and run the whole test suite
# (unit, DAG integrity, end-to-end against the local stack). Tests that need a
# service start it themselves. Live-account tests run only when SNOWBERG_LIVE_*
# credentials are set.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
if [ -f scripts/install-browser.sh ]; then bash scripts/install-browser.sh; fi
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff"; ruff check . && ruff format --check .
echo "== mypy"; mypy
echo "== imports"; python scripts/check_imports.py
echo "== docs"; snowberg docs --check
echo "== pytest"
# --durations: the slowest tests are printed at the end, so the suite's time stays visible in every CI log.
# Two workers (pytest-xdist; SNOWBERG_TEST_WORKERS=0 runs in one process): much of the suite waits on
# servers, schedulers and subprocesses, so a 2-core machine runs it in about three quarters of the time.
# tests/conftest.py's scheduler keeps each of its SERIAL_GROUPS (the Airflow stacks, the wheel venvs) in one worker.
exec pytest -p no:cacheprovider --durations=30 -n "${SNOWBERG_TEST_WORKERS:-2}" "$@"
