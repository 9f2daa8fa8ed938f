"""CHANGES (AT/END): a stateless range read that consumes nothing, used to backfill a window."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from streams_harness import Harness

from snowberg.streams.changes import backfill_changes
from snowberg.streams.errors import StreamError


def _now(h: Harness) -> datetime:
    time.sleep(0.05)
    (ts,) = h.sql("SELECT CURRENT_TIMESTAMP()")[0]
    time.sleep(0.05)
    return ts


def test_changes_window_into_changelog_consumes_nothing(fakesnow_server: dict[str, Any], tmp_path: Path) -> None:
    h = Harness(fakesnow_server, tmp_path, changelog=True)
    try:
        h.sql(f'ALTER TABLE "{h.db}"."SRC"."ORDERS" SET CHANGE_TRACKING = TRUE')
        h.insert((1, "new", "10.00"), (2, "new", "20.00"))
        t0 = _now(h)
        h.update(1, "paid")
        h.delete(2)
        h.insert((3, "new", "30.00"))
        t1 = _now(h)
        h.update(3, "paid")  # after the window: not in it
        h.run()  # the stream (created now, with initial rows) is independent of the window
        pending_before = h.stream_pending()
        conn, cat = h.connect(), h.catalog()
        res = backfill_changes(h.cfg, h.stream, conn, cat, start=t0, end=t1, run_id="bf1", target="changelog")
        assert res["status"] == "committed" and res["rows"] == 4
        rows = [r for r in h.changelog_rows() if r.get("snowberg_changes_start")]
        got = sorted((r["snowberg_action"], r["snowberg_isupdate"], int(r["id"]), r["status"]) for r in rows)
        assert got == [
            ("DELETE", False, 2, "new"),
            ("DELETE", True, 1, "new"),
            ("INSERT", False, 3, "new"),
            ("INSERT", True, 1, "paid"),
        ]
        again = backfill_changes(h.cfg, h.stream, conn, cat, start=t0, end=t1, run_id="bf2", target="changelog")
        assert again["status"] == "already_committed"
        assert h.stream_pending() == pending_before  # CHANGES has no offset: nothing consumed
    finally:
        h.close()


def test_changes_window_applies_to_target_by_key(harness: Harness) -> None:
    h = harness
    h.sql(f'ALTER TABLE "{h.db}"."SRC"."ORDERS" SET CHANGE_TRACKING = TRUE')
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    t0 = _now(h)
    h.update(1, "paid")
    h.delete(2)
    t1 = _now(h)
    res = backfill_changes(h.cfg, h.stream, h.connect(), h.catalog(), start=t0, end=t1, run_id="bf", target="table")
    assert res["keys"] == 2
    # Only the window's changes: key 2 was deleted in it, key 1 updated; rows outside the window are not read.
    assert [(int(r["id"]), r["status"]) for r in h.target_rows()] == [(1, "paid")]
    props = h.catalog().load_table("shop.orders").current_snapshot().summary.additional_properties
    assert props["snowberg.mode"] == "stream_changes_backfill" and "snowberg.stream-batch-id" not in props


def test_changes_window_before_applied_stream_changes_is_refused(harness: Harness) -> None:
    h = harness
    h.sql(f'ALTER TABLE "{h.db}"."SRC"."ORDERS" SET CHANGE_TRACKING = TRUE')
    t0 = _now(h)
    h.insert((1, "new", "10.00"))
    h.run()
    h.update(1, "paid")
    h.run()
    t1 = _now(h)
    with pytest.raises(StreamError, match="put back row versions"):
        backfill_changes(h.cfg, h.stream, h.connect(), h.catalog(), start=t0, end=t1, run_id="bf", target="table")
    assert [(int(r["id"]), r["status"]) for r in h.target_rows()] == [(1, "paid")]


def test_net_changes_refuse_null_keys_and_two_live_rows_for_one_key() -> None:
    import pyarrow as pa

    from snowberg.iceberg.keys import DuplicateKeyError, NullKeyError
    from snowberg.streams import sql as S
    from snowberg.streams.changes import net_changes

    def changes(rows: list[tuple[Any, str, str, str]]) -> pa.Table:
        return pa.table(
            {
                "ID": [r[0] for r in rows],
                "STATUS": [r[1] for r in rows],
                S.S_ACTION: [r[2] for r in rows],
                S.S_ROW_ID: [r[3] for r in rows],
                S.S_ISUPDATE: [r[2] == "INSERT" and r[3] == "a" for r in rows],
            }
        )

    # an update pair (DELETE + INSERT of one row) and a delete + re-insert (two row ids): legitimate
    keys, rows = net_changes(
        changes(
            [(1, "old", "DELETE", "a"), (1, "new", "INSERT", "a"), (2, "x", "DELETE", "b"), (2, "y", "INSERT", "c")]
        ),
        ["ID"],
        "orders",
    )
    assert sorted(rows.to_pylist(), key=lambda r: r["ID"]) == [{"ID": 1, "STATUS": "new"}, {"ID": 2, "STATUS": "y"}]
    with pytest.raises(DuplicateKeyError, match="two live rows"):
        net_changes(changes([(3, "p", "INSERT", "d"), (3, "q", "INSERT", "e")]), ["ID"], "orders")
    with pytest.raises(NullKeyError, match=r"1 row\(s\) have NULL in primary-key column 'ID'"):
        net_changes(changes([(None, "p", "INSERT", "d")]), ["ID"], "orders")
