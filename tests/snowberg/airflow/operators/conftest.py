"""Fixtures for the operators' tests: the stream capture harness of tests/snowberg/streams, on the session emulator."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "streams"))

from streams_harness import Harness  # noqa: E402


@pytest.fixture
def harness(fakesnow_server: Any, tmp_path: Path) -> Iterator[Harness]:
    """A stream table on the session's fakesnow server (the harness's stream double wraps its connections)."""
    h = Harness(fakesnow_server.connect_kwargs(), tmp_path)
    try:
        yield h
    finally:
        h.close()
