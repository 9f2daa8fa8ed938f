"""Progress lines for long work: rows, bytes and rate, at most every few seconds."""

from __future__ import annotations

import logging
import time


class Progress:
    """Logs rows, bytes and rate at most every ``every`` seconds."""

    def __init__(self, what: str, logger: logging.Logger, every: float = 10.0) -> None:
        self.what, self.log, self.every = what, logger, every
        self.rows = 0
        self.bytes = 0
        self.started = time.monotonic()
        self._last = self.started

    def add(self, rows: int, nbytes: int) -> None:
        """Count a batch; log the running totals at most once every ``every`` seconds."""
        self.rows += rows
        self.bytes += nbytes
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self.log.info("%s: %s", self.what, self.summary())

    def summary(self) -> str:
        """Rows, megabytes and their rates since the start, for the progress log lines."""
        secs = max(time.monotonic() - self.started, 1e-9)
        return (
            f"{self.rows:,} rows, {self.bytes / 1e6:,.1f} MB in {secs:,.1f} s "
            f"({self.rows / secs:,.0f} rows/s, {self.bytes / 1e6 / secs:,.1f} MB/s)"
        )
