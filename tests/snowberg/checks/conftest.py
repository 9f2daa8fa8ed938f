"""Fixtures for the checks (defined in checks_harness.py, which the check operators' tests share)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from checks_harness import (  # noqa: E402,F401 - fixtures, registered by being here
    catalog,
    context,
    lake,
    moto_endpoint,
    orders,
    partitioned,
    s3_bucket,
    s3_props,
    use_catalog,
)
