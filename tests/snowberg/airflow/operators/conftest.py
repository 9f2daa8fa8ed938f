"""Fixtures for the operators' tests.

The check operators' tests use the checks' fixtures (tests/snowberg/checks/checks_harness.py: Iceberg
tables on a SQLite catalog, a task context, a moto S3 server, recorded Snowflake outputs); the stream
operators' tests use the stream capture harness of tests/snowberg/streams on the session's fakesnow server.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "streams"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "checks"))

from checks_harness import (  # noqa: E402,F401 - fixtures, registered by being here
    catalog,
    context,
    lake,
    moto_endpoint,
    orders,
    partitioned,
    s3_props,
    use_catalog,
)
from streams_harness import Harness  # noqa: E402


@pytest.fixture
def harness(fakesnow_server: Any, tmp_path: Path) -> Iterator[Harness]:
    """A stream table on the session's fakesnow server (the harness's stream double wraps its connections)."""
    h = Harness(fakesnow_server.connect_kwargs(), tmp_path)
    try:
        yield h
    finally:
        h.close()
