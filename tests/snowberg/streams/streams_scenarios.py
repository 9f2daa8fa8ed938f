"""Scenarios shared by the emulator tests (stream double) and the live lane (a real account).

Each takes a ``Harness`` and asserts. The truth every scenario checks is the
source table itself: after the pipeline runs, the Iceberg target holds
exactly the source's rows (the target mirrors the table the stream tracks).
"""

from __future__ import annotations

from typing import Any

from streams_harness import Harness


def _data_files_only(h: Harness, target: str = "shop.orders") -> None:
    """No delete files of any kind (Snowflake cannot read equality deletes; snowberg writes neither kind)."""
    t = h.catalog().load_table(target)
    snap = t.current_snapshot()
    assert snap is not None
    for manifest in snap.manifests(t.io):
        assert manifest.content.name == "DATA", f"{target} has a {manifest.content.name} manifest"
        for entry in manifest.fetch_manifest_entry(t.io):
            assert entry.data_file.content.name == "DATA"


def inserts(h: Harness) -> dict[str, Any]:
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    first = h.run()
    assert first["consume"]["refresh"] is True  # SHOW_INITIAL_ROWS: the first batch is a full copy
    assert h.target_rows() == h.source_rows()
    h.insert((3, "new", "30.00"), (4, "new", "40.00"))
    second = h.run()
    assert second["consume"]["rows"] == 2 and second["load"]["rows_appended"] == 2
    assert second["load"]["keys_deleted"] == 2  # inserts of new keys: the delete matches nothing
    assert h.target_rows() == h.source_rows()
    assert h.staged_count() == 0
    return second


def updates(h: Harness) -> dict[str, Any]:
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    h.run()
    h.update(1, "paid")
    res = h.run()
    assert res["consume"]["rows"] == 2  # one update = a DELETE + INSERT pair
    assert res["load"]["rows_appended"] == 1 and res["load"]["keys_deleted"] == 1
    assert h.target_rows() == h.source_rows()
    _data_files_only(h)
    return res


def deletes(h: Harness) -> dict[str, Any]:
    h.insert((1, "new", "10.00"), (2, "new", "20.00"), (3, "new", "30.00"))
    h.run()
    h.delete(2)
    res = h.run()
    assert res["load"]["rows_appended"] == 0 and res["load"]["keys_deleted"] == 1
    assert h.target_rows() == h.source_rows()
    assert [r["id"] for r in h.target_rows()] == [1, 3]
    _data_files_only(h)
    return res


def mixed(h: Harness) -> dict[str, Any]:
    h.insert((1, "new", "10.00"), (2, "new", "20.00"), (3, "new", "30.00"))
    h.run()
    before = len(h.catalog().load_table("shop.orders").metadata.metadata_log)
    h.update(1, "paid")
    h.update(1, "shipped")  # two updates of one key: the stream returns the net change
    h.delete(2)
    h.insert((4, "new", "40.00"))
    h.update(4, "paid")  # inserted then updated in the same window: one INSERT
    h.insert((5, "new", "50.00"))
    h.delete(5)  # inserted then deleted: nothing at all
    res = h.run()
    assert h.target_rows() == h.source_rows()
    assert {r["id"]: r["status"] for r in h.target_rows()} == {1: "shipped", 3: "new", 4: "paid"}
    after = h.catalog().load_table("shop.orders")
    assert len(after.metadata.metadata_log) == before + 1, "the batch must land in one Iceberg commit"
    props = after.current_snapshot().summary.additional_properties
    assert props["snowberg.stream-batch-id"] == str(res["consume"]["batch_id"])
    assert props["snowberg.mode"] == "stream" and props["snowberg.run-id"] == f"manual__run{h.runs}"
    _data_files_only(h)
    return res


def crash_after_consume(h: Harness) -> None:
    h.insert((1, "new", "10.00"), (2, "new", "20.00"), (3, "new", "30.00"))
    h.run()
    h.update(1, "paid")
    h.delete(2)
    proc = h.run_step_in_subprocess("consume", "stream_after_consume")
    assert proc.returncode == 137, proc.stderr[-2000:]
    assert h.stream_pending() == 0, "the crashed run's consume committed: the changes are staged, not in the stream"
    assert h.staged_count() == 3
    assert {r["id"] for r in h.target_rows()} == {1, 2, 3}  # nothing applied yet
    h.update(1, "shipped")  # a second batch on top of the staged one: last wins across batches
    h.insert((4, "new", "40.00"))
    res = h.run()
    assert res["load"]["batches"] == [2, 3]
    assert h.target_rows() == h.source_rows()
    assert h.staged_count() == 0


def crash_during_write(h: Harness) -> None:
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    h.run()
    h.update(2, "paid")
    h.insert((3, "new", "30.00"))
    conn = h.connect()
    from snowberg.streams.steps import consume_step

    consumed = consume_step(h.cfg, h.stream, conn, h.catalog(), run_id="crash__run")
    snap_before = h.catalog().load_table("shop.orders").current_snapshot().snapshot_id
    proc = h.run_step_in_subprocess("load", "stream_during_write", consumed=consumed)
    assert proc.returncode == 137, proc.stderr[-2000:]
    assert h.catalog().load_table("shop.orders").current_snapshot().snapshot_id == snap_before
    res = h.run()  # a new run: consumes nothing new, applies the staged batch
    assert res["load"]["batches"] == [consumed["batch_id"]]
    assert h.target_rows() == h.source_rows()
    assert h.staged_count() == 0


def crash_after_commit(h: Harness) -> None:
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    h.run()
    h.update(1, "paid")
    h.delete(2)
    h.insert((3, "new", "30.00"))
    conn = h.connect()
    from snowberg.streams.steps import consume_step

    consumed = consume_step(h.cfg, h.stream, conn, h.catalog(), run_id="crash__run")
    proc = h.run_step_in_subprocess("load", "stream_after_commit", consumed=consumed)
    assert proc.returncode == 137, proc.stderr[-2000:]
    t = h.catalog().load_table("shop.orders")
    assert t.current_snapshot().summary.additional_properties["snowberg.stream-batch-id"] == str(consumed["batch_id"])
    assert h.staged_count() > 0  # committed but not cleaned
    snapshots = len(t.snapshots())
    # The same run's load retried: appends nothing.
    from snowberg.streams.steps import load_step

    again = load_step(h.cfg, h.stream, conn, h.catalog(), run_id="crash__run", consumed=consumed)
    assert again["status"] == "already_committed"
    assert len(h.catalog().load_table("shop.orders").snapshots()) == snapshots
    h.run()
    assert h.target_rows() == h.source_rows()
    assert h.staged_count() == 0


def crash_before_cleanup(h: Harness) -> None:
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    h.run()
    h.update(2, "paid")
    conn = h.connect()
    from snowberg.streams.steps import consume_step, load_step

    consumed = consume_step(h.cfg, h.stream, conn, h.catalog(), run_id="crash__run")
    load_step(h.cfg, h.stream, conn, h.catalog(), run_id="crash__run", consumed=consumed)
    proc = h.run_step_in_subprocess("cleanup", "stream_before_cleanup")
    assert proc.returncode == 137, proc.stderr[-2000:]
    assert h.staged_count() == 2  # the staged update survived the crash
    h.insert((3, "new", "30.00"))
    res = h.run()
    assert res["load"]["batches"] == [consumed["batch_id"] + 1]  # the committed batch is not applied twice
    assert h.target_rows() == h.source_rows()
    assert h.staged_count() == 0


def stale_then_recover(h: Harness, make_stale: Any) -> None:
    from snowberg.streams.errors import StaleStreamError

    h.insert((1, "new", "10.00"), (2, "new", "20.00"), (3, "new", "30.00"))
    h.run()
    h.update(1, "paid")
    h.delete(3)
    make_stale()
    try:
        h.run()
    except StaleStreamError as exc:
        assert "recover_stale_stream=true" in str(exc)
    else:
        raise AssertionError("a stale stream must stop the run")
    assert h.staged_count() == 0  # nothing consumed
    h.insert((4, "new", "40.00"))
    res = h.run(recover=True)
    assert res["consume"]["refresh"] is True and res["load"]["refresh"] is True
    assert h.target_rows() == h.source_rows()
    h.update(4, "paid")
    h.run()
    assert h.target_rows() == h.source_rows()
