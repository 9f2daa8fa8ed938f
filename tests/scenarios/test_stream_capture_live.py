"""Stream capture, live lane: the emulator scenarios against a real Snowflake account (real Streams, CHANGES).

Skipped unless these are set (see docs/streams.md, "Live tests"):
SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT, _USER, _PASSWORD, _WAREHOUSE (optional _ROLE;
the role needs CREATE DATABASE). Each test creates and drops its own
database ``SNOWBERG_TEST_<random>``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowberg" / "streams"))
import streams_scenarios as sc  # noqa: E402
from streams_harness import LIVE_ENV, Harness  # noqa: E402

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not all(os.environ.get(k) for k in LIVE_ENV), reason="live Snowflake lane: set " + ", ".join(LIVE_ENV)
    ),
]


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(None, tmp_path)
    try:
        yield h
    finally:
        h.close()


@pytest.mark.parametrize("scenario", [sc.inserts, sc.updates, sc.deletes, sc.mixed], ids=lambda f: f.__name__)
def test_live_changes(live: Harness, scenario: object) -> None:
    scenario(live)  # type: ignore[operator]


@pytest.mark.parametrize(
    "scenario",
    [sc.crash_after_consume, sc.crash_during_write, sc.crash_after_commit, sc.crash_before_cleanup],
    ids=lambda f: f.__name__,
)
def test_live_crash(live: Harness, scenario: object) -> None:
    scenario(live)  # type: ignore[operator]


def test_live_stale_after_is_read_and_recovery_refreshes(live: Harness) -> None:
    """A real stream cannot be made stale on demand: check STALE_AFTER is read and recovery rebuilds the table."""
    from snowberg.streams.steps import staleness_step

    h = live
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    h.run()
    out = staleness_step(h.stream, h.connect(), interval=timedelta(minutes=5))
    assert out["status"]["stale"] is False and out["status"]["stale_after"]
    h.delete(2)
    res = h.run(recover=True)
    assert res["load"]["refresh"] is True
    assert h.target_rows() == h.source_rows()


def test_live_changes_clause_consumes_nothing(live: Harness) -> None:
    from snowberg.streams.changes import backfill_changes

    h = live
    h.configure(changelog=True)
    h.sql(f'ALTER TABLE "{h.db}"."SRC"."ORDERS" SET CHANGE_TRACKING = TRUE')
    h.insert((1, "new", "10.00"))
    time.sleep(2)
    (t0,) = h.sql("SELECT CURRENT_TIMESTAMP()")[0]
    time.sleep(2)
    h.update(1, "paid")
    time.sleep(2)
    (t1,) = h.sql("SELECT CURRENT_TIMESTAMP()")[0]
    h.run()
    pending = h.stream_pending()
    res = backfill_changes(
        h.cfg, h.stream, h.connect(), h.catalog(), start=t0, end=t1, run_id="live_bf", target="changelog"
    )
    assert res["rows"] == 2
    assert h.stream_pending() == pending


def test_live_idle_probe_is_one_statement_and_sees_changes_and_staged_batches(live: Harness) -> None:
    """``SYSTEM$STREAM_HAS_DATA`` with the staging count: idle after a clean run, busy after a change.

    Snowflake may answer TRUE for a stream without changes (documented), so only the busy answers and the
    statement count are asserted strictly; an idle answer right after a consume is the expected one.
    """
    from streams_harness import CountingConnection

    from snowberg.streams.staging import nothing_to_consume

    h = live
    h.insert((1, "new", "10.00"))
    committed = h.run()["cleanup"]["committed_batch_id"]
    conn = CountingConnection(h.connect())
    idle = nothing_to_consume(conn, h.stream, committed_batch_id=committed)
    assert len(conn.statements) == 1
    h.update(1, "paid")
    assert nothing_to_consume(conn, h.stream, committed_batch_id=committed) is False
    print(f"idle probe after a clean run answered {idle}")
