#!/usr/bin/env bash
# Quick start, command 1: install, start the local stack (Snowflake emulator + Iceberg lake),
# seed demo data, and load it through Airflow twice (full, then only the changed rows).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/snowberg demo --fresh "$@"
