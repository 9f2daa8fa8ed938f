"""Stream capture: a crash at each step, then a re-run, gives the same Iceberg contents as an uninterrupted run.

The crashes are real: the step runs in a child process that ``os._exit``s at
the failpoint (``SNOWBERG_FAULT``), leaving whatever a killed worker leaves.
The pipeline is the one of ``tests/snowberg/streams`` (source table, stream
double and staging on the fakesnow emulator, target in a SQLite Iceberg catalog).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowberg" / "streams"))
import streams_scenarios as sc  # noqa: E402
from streams_harness import Harness  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def harness(fakesnow_server: Any, tmp_path: Path) -> Iterator[Harness]:
    """The pipeline on the session's fakesnow server (``tests/conftest.py``), in a database of its own."""
    h = Harness(fakesnow_server.connect_kwargs(), tmp_path)
    try:
        yield h
    finally:
        h.close()


def test_crash_after_consume_leaves_a_staged_batch_the_next_run_applies(harness: Harness) -> None:
    sc.crash_after_consume(harness)


def test_crash_during_iceberg_write_commits_nothing_and_the_next_run_applies_the_batch(harness: Harness) -> None:
    sc.crash_during_write(harness)


def test_crash_after_iceberg_commit_does_not_apply_the_batch_twice(harness: Harness) -> None:
    sc.crash_after_commit(harness)


def test_crash_before_staging_cleanup_leaves_rows_the_next_run_skips(harness: Harness) -> None:
    sc.crash_before_cleanup(harness)
