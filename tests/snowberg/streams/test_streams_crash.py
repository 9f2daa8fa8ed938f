"""A crash at each step, then a re-run, gives the same Iceberg contents as an uninterrupted run.

The crashes are real: the step runs in a child process that ``os._exit``s at
the failpoint (``SNOWBERG_FAULT``), leaving whatever a killed worker leaves.
"""

from __future__ import annotations

import pytest
import streams_scenarios as sc
from streams_harness import Harness

pytestmark = pytest.mark.slow


def test_crash_after_consume(harness: Harness) -> None:
    sc.crash_after_consume(harness)


def test_crash_during_iceberg_write(harness: Harness) -> None:
    sc.crash_during_write(harness)


def test_crash_after_iceberg_commit(harness: Harness) -> None:
    sc.crash_after_commit(harness)


def test_crash_before_staging_cleanup(harness: Harness) -> None:
    sc.crash_before_cleanup(harness)


def test_failure_inside_consume_transaction_rolls_back(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offset moves only with a committed consume: a failure before COMMIT leaves the changes in the stream."""
    from snowberg.streams.steps import consume_step

    h = harness
    h.insert((1, "new", "10.00"))
    h.run()
    h.update(1, "paid")
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:stream_in_consume")
    with pytest.raises(RuntimeError, match="stream_in_consume"):
        consume_step(h.cfg, h.stream, h.connect(), h.catalog(), run_id="r")
    monkeypatch.delenv("SNOWBERG_FAULT")
    assert h.stream_pending() == 2
    assert h.staged_count() == 0
    h.run()
    assert h.target_rows() == h.source_rows()
