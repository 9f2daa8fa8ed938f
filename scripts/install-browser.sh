#!/usr/bin/env bash
# Install Debian's Chromium for the browser e2e test (tests/e2e/test_browser.py),
# unless a chromium is already there. Playwright drives it as a system
# executable: `playwright install` downloads browser builds, which CI cannot.
#
# Usage (as root, e.g. from .ci/run before pytest):  bash scripts/install-browser.sh
# Prints the executable's path; exit code non-zero when it cannot be installed.
set -euo pipefail

exe="${SNOWBERG_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$exe" ] && "$exe" --headless --no-sandbox --version >/dev/null 2>&1; then
    echo "$exe"
    exit 0
fi

if [ "$(id -u)" != "0" ]; then
    echo "install-browser: $exe is missing and this is not root; run: sudo apt-get install -y chromium" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
for attempt in 1 2 3; do
    if apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null; then
        break
    fi
    echo "install-browser: apt-get failed (attempt $attempt), retrying" >&2
    sleep $((attempt * 5))
done

if ! [ -x "$exe" ]; then
    echo "install-browser: $exe still missing after apt-get install chromium" >&2
    exit 1
fi
"$exe" --headless --no-sandbox --version >&2
echo "$exe"
