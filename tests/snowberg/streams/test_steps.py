"""Staleness: each run reads STALE_AFTER; a stale stream stops the run; recovery is a run param."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import streams_scenarios as sc
from streams_harness import Harness

from snowberg.streams.errors import StaleStreamError, StreamGoingStaleError
from snowberg.streams.steps import consume_step, staleness_step


def test_stale_stream_stops_the_run_and_recovery_refreshes(harness: Harness) -> None:
    h = harness
    sc.stale_then_recover(h, lambda: h.admin.make_stale(h.stream.name))


def test_stale_after_in_the_past_is_stale(harness: Harness) -> None:
    h = harness
    h.insert((1, "new", "10.00"))
    h.run()
    h.admin.set_stale_after(h.stream.name, datetime.now(UTC) - timedelta(minutes=1))
    with pytest.raises(StaleStreamError, match="recover_stale_stream=true"):
        consume_step(h.cfg, h.stream, h.connect(), h.catalog(), run_id="r")
    with pytest.raises(StaleStreamError):
        staleness_step(h.stream, h.connect(), interval=timedelta(hours=1))


def test_stream_going_stale_within_two_intervals_alerts(harness: Harness) -> None:
    h = harness
    h.insert((1, "new", "10.00"))
    h.run()
    conn = h.connect()
    h.admin.set_stale_after(h.stream.name, datetime.now(UTC) + timedelta(minutes=90))
    with pytest.raises(StreamGoingStaleError, match="2 × schedule interval 1:00:00"):
        staleness_step(h.stream, conn, interval=timedelta(hours=1))
    ok = staleness_step(h.stream, conn, interval=timedelta(minutes=30))  # 90 min > 2 × 30 min
    assert ok["status"]["stale"] is False
    # A run consumes the stream, which moves STALE_AFTER out again (retention from now).
    h.update(1, "paid")
    h.run()
    assert staleness_step(h.stream, conn, interval=timedelta(hours=1))["status"]["stale"] is False


def test_recovery_that_died_after_consuming_is_finished_by_a_plain_rerun(harness: Harness) -> None:
    """Re-created stream, initial rows staged, crash: the next run (no param) still replaces the table."""
    from snowberg.streams.staging import create_stream

    h = harness
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    h.run()
    h.admin.make_stale(h.stream.name)
    h.delete(2)  # lost with the stale offset: only a full refresh brings the target back in line
    h.insert((3, "new", "30.00"))
    create_stream(
        h.connect(),
        h.stream,
        h.stream.table_name(h.cfg.source.table),
        replace=True,
    )
    proc = h.run_step_in_subprocess("consume", "stream_after_consume")
    assert proc.returncode == 137, proc.stderr[-2000:]
    res = h.run()
    assert res["load"]["refresh"] is True
    assert h.target_rows() == h.source_rows()


def test_a_run_is_not_idle_while_the_changelog_lags_the_target(
    fakesnow_server: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The changelog commit failed after the target's: the staged batch waits for the changelog alone.

    The stream is empty and nothing is staged above the target's batch, but the changelog is a batch behind:
    the run must load it (the idle probe counts staged rows above the lower of the two batch ids).
    """
    from snowberg.streams import apply
    from snowberg.streams.steps import idle_step, load_step

    h = Harness(fakesnow_server, tmp_path, changelog=True)
    try:
        h.insert((1, "new", "10.00"))
        h.run()
        h.update(1, "paid")
        conn, cat = h.connect(), h.catalog()
        consumed = consume_step(h.cfg, h.stream, conn, cat, run_id="r2")

        def catalog_down(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("injected: the catalog is unreachable for the changelog commit")

        with monkeypatch.context() as m:
            m.setattr(apply, "_apply_changelog", catalog_down)
            with pytest.raises(RuntimeError, match="injected"):
                load_step(h.cfg, h.stream, conn, cat, run_id="r2", consumed=consumed)
        assert [r["status"] for r in h.target_rows()] == ["paid"]
        assert {r["snowberg_batch_id"] for r in h.changelog_rows()} == {consumed["batch_id"] - 1}

        assert idle_step(h.cfg, h.stream, conn, cat) is None  # the changelog waits for the staged batch
        h.run()
        assert {r["snowberg_batch_id"] for r in h.changelog_rows()} == {consumed["batch_id"] - 1, consumed["batch_id"]}
        assert idle_step(h.cfg, h.stream, h.connect(), h.catalog()) is not None  # both at the staged batch: idle
    finally:
        h.close()
