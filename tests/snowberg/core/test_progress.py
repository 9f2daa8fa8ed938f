"""Progress lines: totals always add up, and the log hears from them at most every few seconds."""

from __future__ import annotations

import logging
import re

import pytest

from snowberg.core.progress import Progress

log = logging.getLogger("snowberg.test.progress")


def test_rows_and_bytes_add_up_across_batches() -> None:
    p = Progress("orders", log)
    p.add(1_000, 2_000_000)
    p.add(500, 500_000)
    assert (p.rows, p.bytes) == (1_500, 2_500_000)
    assert re.fullmatch(r"1,500 rows, 2\.5 MB in [\d,.]+ s \([\d,]+ rows/s, [\d,.]+ MB/s\)", p.summary()), p.summary()


def test_a_line_is_logged_once_the_interval_has_passed(caplog: pytest.LogCaptureFixture) -> None:
    p = Progress("orders", log, every=0.0)
    with caplog.at_level(logging.INFO, logger=log.name):
        p.add(10, 1_000_000)
        p.add(10, 1_000_000)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("orders: 10 rows, 1.0 MB in ") and lines[1].startswith("orders: 20 rows, 2.0 MB in ")


def test_no_line_is_logged_before_the_interval(caplog: pytest.LogCaptureFixture) -> None:
    p = Progress("orders", log, every=3600.0)
    with caplog.at_level(logging.INFO, logger=log.name):
        for _ in range(100):
            p.add(1, 1)
    assert caplog.records == [] and p.rows == 100
