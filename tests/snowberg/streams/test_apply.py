"""Inserts, updates, deletes and mixed batches through the stream double into Iceberg."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import streams_scenarios as sc
from streams_harness import Harness


def test_inserts_are_appended(harness: Harness) -> None:
    sc.inserts(harness)


def test_updates_replace_rows_by_key(harness: Harness) -> None:
    sc.updates(harness)


def test_deletes_remove_rows_by_key(harness: Harness) -> None:
    sc.deletes(harness)


def test_mixed_batch_resolves_to_last_change_in_one_commit(harness: Harness) -> None:
    sc.mixed(harness)


def test_several_staged_batches_resolve_last_wins(harness: Harness) -> None:
    """Two consumes without a load in between: batch 3's change to key 1 wins over batch 2's."""
    from snowberg.streams.steps import consume_step, load_step

    h = harness
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    h.run()
    conn, cat = h.connect(), h.catalog()
    h.update(1, "paid")
    h.delete(2)
    first = consume_step(h.cfg, h.stream, conn, cat, run_id="r2")
    h.update(1, "refunded")
    h.insert((2, "again", "21.00"))  # deleted in batch 2, back in batch 3
    second = consume_step(h.cfg, h.stream, conn, cat, run_id="r3")
    assert (first["batch_id"], second["batch_id"]) == (2, 3)
    res = load_step(h.cfg, h.stream, conn, cat, run_id="r3", consumed=second)
    assert res["batches"] == [2, 3]
    assert {r["id"]: r["status"] for r in h.target_rows()} == {1: "refunded", 2: "again"}
    assert h.target_rows() == h.source_rows()


def test_append_only_stream_without_key_appends(fakesnow_server: dict[str, Any], tmp_path: Path) -> None:
    h = Harness(fakesnow_server, tmp_path, append_only=True, primary_key=[])
    try:
        h.insert((1, "new", "10.00"))
        h.run()
        h.insert((2, "new", "20.00"))
        h.update(1, "paid")  # not tracked by an APPEND_ONLY stream
        res = h.run()
        assert res["consume"]["rows"] == 1
        assert [(r["id"], r["status"]) for r in h.target_rows()] == [(1, "new"), (2, "new")]
    finally:
        h.close()


def test_standard_stream_needs_a_primary_key(fakesnow_server: dict[str, Any], tmp_path: Path) -> None:
    from snowberg.streams.errors import StreamConfigError

    h = Harness(fakesnow_server, tmp_path, primary_key=[])
    try:
        from snowberg.streams.status import read_status

        with pytest.raises(StreamConfigError, match="primary_key"):
            h.run()
        assert read_status(h.connect(), h.stream.stream_name) is None  # refused before creating anything
    finally:
        h.close()


def test_changelog_records_every_change_with_action_and_batch(fakesnow_server: dict[str, Any], tmp_path: Path) -> None:
    h = Harness(fakesnow_server, tmp_path, changelog=True)
    try:
        h.insert((1, "new", "10.00"), (2, "new", "20.00"))
        h.run()
        h.update(1, "paid")
        h.delete(2)
        h.run()
        log = [
            (r["snowberg_batch_id"], r["snowberg_action"], r["snowberg_isupdate"], r["id"], r["status"])
            for r in h.changelog_rows()
        ]
        assert log == [
            (1, "REFRESH", False, None, None),
            (1, "INSERT", False, 1, "new"),
            (1, "INSERT", False, 2, "new"),
            (2, "DELETE", True, 1, "new"),
            (2, "DELETE", False, 2, "new"),
            (2, "INSERT", True, 1, "paid"),
        ]
        assert h.target_rows() == h.source_rows()
        assert h.staged_count() == 0
    finally:
        h.close()


def test_null_key_in_a_batch_fails_before_writing_naming_column_and_count(harness: Harness) -> None:
    from snowberg.iceberg.keys import NullKeyError

    h = harness
    h.insert((1, "new", "10.00"))
    h.run()
    h.insert((None, "no key", "1.00"), (None, "no key either", "2.00"))  # type: ignore[arg-type]
    with pytest.raises(NullKeyError, match=r"2 staged change\(s\) .* primary-key column 'ID'"):
        h.run()
    assert [r["id"] for r in h.target_rows()] == [1]
    assert len(h.catalog().load_table("shop.orders").snapshots()) == 1


def test_two_live_rows_for_one_key_in_a_batch_fail_instead_of_keeping_one(harness: Harness) -> None:
    from snowberg.iceberg.keys import DuplicateKeyError

    h = harness
    h.insert((1, "new", "10.00"))
    h.run()
    snaps = len(h.catalog().load_table("shop.orders").snapshots())
    h.insert((2, "first", "20.00"), (2, "second", "21.00"))  # the source's key is not unique
    with pytest.raises(DuplicateKeyError, match=r"two live rows in one stream batch"):
        h.run()
    assert len(h.catalog().load_table("shop.orders").snapshots()) == snaps
    # the documented way out: make the key unique, then a recovery run (full refresh) supersedes the batch
    h.sql(f'DELETE FROM "{h.db}"."SRC"."ORDERS" WHERE ID = 2 AND STATUS = %(s)s', {"s": "second"})
    h.run(recover=True)
    assert h.target_rows() == h.source_rows()
    # an update is a DELETE + INSERT pair for one key in one batch: legitimate, applied
    h.update(1, "paid")
    h.run()
    assert {r["id"]: r["status"] for r in h.target_rows()} == {1: "paid", 2: "first"}


def _recreate_stream(h: Harness, *, initial_rows: bool) -> None:
    """Drop the stream and create it again by hand: a new generation whose offset starts now."""
    h.sql(f'DROP STREAM "{h.db}"."SRC"."ORDERS_STREAM"')
    tail = " SHOW_INITIAL_ROWS = TRUE" if initial_rows else ""
    h.sql(f'CREATE STREAM "{h.db}"."SRC"."ORDERS_STREAM" ON TABLE "{h.db}"."SRC"."ORDERS"{tail}')


def test_a_stream_recreated_after_an_empty_first_run_without_initial_rows_is_refused(harness: Harness) -> None:
    """The first run stages nothing; the stream's generation must still be remembered to notice a re-creation."""
    from snowberg.streams import checkpoint as cp
    from snowberg.streams.errors import StreamError

    h = harness
    h.stream = h.stream.model_copy(update={"show_initial_rows": False})
    h.insert((1, "new", "10.00"))  # before the stream: not asked for
    first = h.run()
    assert (first["consume"]["created_stream"], first["consume"]["rows"]) == (True, 0)
    # The generation is in the Iceberg table (staging is cleaned up): the next run compares against it.
    state = cp.read_stream_state(h.catalog().load_table("shop.orders"))
    assert state is not None and state.generation == first["consume"]["status"]["created_on"]
    assert h.target_rows() == [] and h.staged_count() == 0
    h.insert((2, "new", "20.00"))  # the old stream holds this change ...
    _recreate_stream(h, initial_rows=False)  # ... the new one cannot show it
    h.insert((3, "new", "30.00"))
    with pytest.raises(StreamError, match=r"was re-created .* configured without initial rows"):
        h.run()
    h.run(recover=True)
    assert h.target_rows() == h.source_rows()


def test_an_empty_first_run_without_initial_rows_leaves_no_marker_in_the_changelog(
    fakesnow_server: dict[str, Any], tmp_path: Path
) -> None:
    h = Harness(fakesnow_server, tmp_path, changelog=True)
    try:
        h.stream = h.stream.model_copy(update={"show_initial_rows": False})
        first = h.run()
        assert first["consume"]["rows"] == 0 and first["load"]["changelog_rows"] == 0
        h.insert((1, "new", "10.00"))
        h.run()
        log = [(r["snowberg_batch_id"], r["snowberg_action"], r["id"]) for r in h.changelog_rows()]
        assert log == [(2, "INSERT", 1)]
        assert h.target_rows() == h.source_rows()
    finally:
        h.close()


def test_a_stream_recreated_after_a_first_run_with_changes_without_initial_rows_is_refused(harness: Harness) -> None:
    """Staging is cleaned up after the commit: the generation the next run compares with is the Iceberg table's."""
    from snowberg.streams.errors import StreamError

    h = harness
    h.stream = h.stream.model_copy(update={"show_initial_rows": False})
    h.sql(f'CREATE STREAM "{h.db}"."SRC"."ORDERS_STREAM" ON TABLE "{h.db}"."SRC"."ORDERS"')
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    first = h.run()
    assert (first["consume"]["created_stream"], first["consume"]["rows"], h.staged_count()) == (False, 2, 0)
    h.update(1, "paid")  # the old stream holds this change ...
    _recreate_stream(h, initial_rows=False)  # ... the new one cannot show it
    h.delete(2)
    with pytest.raises(StreamError, match=r"was re-created .* configured without initial rows"):
        h.run()
    assert {r["id"]: r["status"] for r in h.target_rows()} == {1: "new", 2: "new"}  # nothing half-applied
    h.run(recover=True)
    assert h.target_rows() == h.source_rows()


@pytest.mark.parametrize("first_rows", [0, 2], ids=["empty-first-run", "first-run-with-rows"])
def test_a_stream_recreated_with_initial_rows_fully_refreshes_the_target(
    harness: Harness, caplog: pytest.LogCaptureFixture, first_rows: int
) -> None:
    """show_initial_rows: true: the new stream's first read is the whole table, so nothing in between is lost."""
    import logging

    h = harness
    h.insert(*[(i, "new", f"{i}0.00") for i in range(1, first_rows + 1)])
    first = h.run()
    assert (first["consume"]["refresh"], first["consume"]["rows"]) == (True, first_rows)
    h.insert((5, "new", "50.00"))  # the old stream holds this change ...
    h.update(1, "paid")
    _recreate_stream(h, initial_rows=True)  # ... the new one shows the table's rows instead
    h.insert((6, "new", "60.00"))
    with caplog.at_level(logging.WARNING, logger="snowberg.streams.staging"):
        res = h.run()
    assert res["consume"]["refresh"] is True and res["load"]["refresh"] is True
    assert h.target_rows() == h.source_rows()
    assert any("was re-created" in r.getMessage() and "SHOW_INITIAL_ROWS" in r.getMessage() for r in caplog.records)
