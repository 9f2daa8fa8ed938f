"""Named crash points for the exactly-once tests.

``SNOWBERG_FAULT=<point>`` makes the process die hard (``os._exit``, no
cleanup, like a killed worker) when it reaches that point. Production runs
never set it. A failpoint in the real code path is the only honest way to
show what a crash at that exact step leaves behind.
"""

from __future__ import annotations

import os
import sys

POINTS: tuple[str, ...] = ("after_extract", "before_commit", "after_commit", "before_publish")
# Stream capture (snowberg.streams): in the consume transaction, after it commits,
# with the Iceberg files written but not committed, after the commit, before cleanup.
POINTS += (
    "stream_in_consume",
    "stream_after_consume",
    "stream_during_write",
    "stream_after_commit",
    "stream_before_cleanup",
)
# Lake → Snowflake syncs (snowberg.sync): the change read, the target's rows deleted by key inside the
# native transaction, the Iceberg target's data files written, before and after the target commit.
POINTS += ("sync_after_read", "sync_after_deletes", "sync_after_write", "sync_before_commit", "sync_after_commit")
# Native syncs by COPY (snowberg.sync.copy_load): files staged (PUT) before the transaction, the COPYs run
# inside it before the state update.
POINTS += ("sync_before_copy", "sync_after_copy")
# Table maintenance (snowberg.iceberg.maintenance): compaction files written, before its commit, after it.
POINTS += ("compact_after_write", "compact_before_commit", "compact_after_commit")
# The column backfill (snowberg.load.column_backfill): new files written, before its commit, after it.
POINTS += ("column_backfill_before_commit", "column_backfill_after_commit")
# `snowberg validate --connect`: its write probe table created, not yet removed (checks.config_online).
POINTS += ("validate_probe_created",)


def crash_point(name: str) -> None:
    """Die (``SNOWBERG_FAULT=<name>``) or raise (``raise:<name>``) here when a test asks for it; else do nothing.

    An unknown ``name`` is refused even when no fault is set, so a misspelt point in the code fails every
    run instead of leaving a crash test that can never trigger.
    """
    if name not in POINTS:
        raise ValueError(f"unknown fault point {name!r}")
    want = os.environ.get("SNOWBERG_FAULT")
    if want == name:
        sys.stderr.write(f"snowberg: injected crash at {name}\n")
        sys.stderr.flush()
        os._exit(137)
    if want == f"raise:{name}":
        raise RuntimeError(f"snowberg: injected failure at {name}")
