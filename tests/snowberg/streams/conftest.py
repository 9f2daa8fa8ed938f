"""Fixtures for stream capture tests: a fakesnow server, the stream double, a SQLite Iceberg catalog."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from streams_harness import Harness  # noqa: E402


@pytest.fixture(scope="session")
def fakesnow_server() -> Iterator[dict[str, Any]]:
    """One emulator for the module's tests; each test gets its own database in it."""
    import fakesnow

    with fakesnow.server() as kwargs:
        yield kwargs


@pytest.fixture
def harness(fakesnow_server: dict[str, Any], tmp_path: Path) -> Iterator[Harness]:
    h = Harness(fakesnow_server, tmp_path)
    try:
        yield h
    finally:
        h.close()
