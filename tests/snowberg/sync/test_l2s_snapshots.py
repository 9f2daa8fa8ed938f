"""Which source snapshots a run reads: appends only; rewrites refused or reloaded."""

from __future__ import annotations

import pytest
from l2s_data import orders, orders_schema

from snowberg.sync.snapshots import SourceRewriteError, plan_changes, read_batches


def _ids(table, plan) -> list[int]:
    return sorted(i for _, b in read_batches(table, plan) for i in b.column("order_id").to_pylist())


def test_first_sync_reads_the_current_snapshot_then_only_new_appends(lake) -> None:
    t = lake.create_table("shop.orders", schema=orders_schema())
    assert plan_changes(t, None).mode == "nothing_new"  # no snapshot yet
    t.append(orders([1, 2]))
    t.append(orders([3]))
    first = plan_changes(t, None)
    assert first.mode == "initial" and first.to_snapshot_id == t.current_snapshot().snapshot_id
    assert _ids(t, first) == [1, 2, 3]

    last = first.to_snapshot_id
    assert plan_changes(t, last).mode == "nothing_new"
    t.append(orders([4]))
    a = t.current_snapshot().snapshot_id
    t.append(orders([5, 6]))
    b = t.current_snapshot().snapshot_id
    plan = plan_changes(t, last)
    assert plan.mode == "incremental" and (plan.from_snapshot_id, plan.to_snapshot_id) == (last, b)
    assert [s.snapshot_id for s in plan.load_steps] == [a, b]
    assert plan.expected_rows == 3
    pairs = [(snap, i) for snap, batch in read_batches(t, plan) for i in batch.column("order_id").to_pylist()]
    assert sorted(pairs) == sorted([(a, 4), (b, 5), (b, 6)])  # each row knows the snapshot that added it


def test_compaction_is_skipped_but_overwrite_and_delete_are_refused(lake) -> None:
    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders([1, 2]))
    last = t.current_snapshot().snapshot_id
    t.append(orders([3]))
    t.delete("order_id = 1")
    with pytest.raises(SourceRewriteError, match=r"is an (delete|overwrite).*on_rewrite: full_reload"):
        plan_changes(t, last)
    reload = plan_changes(t, last, on_rewrite="full_reload")
    assert reload.mode == "full_reload" and _ids(t, reload) == [2, 3]

    t2 = lake.create_table("shop.o2", schema=orders_schema())
    t2.append(orders([1]))
    base = t2.current_snapshot().snapshot_id
    t2.overwrite(orders([7]))
    with pytest.raises(SourceRewriteError):
        plan_changes(t2, base)


def compact(table, monkeypatch) -> None:
    """Rewrite every data file of ``table`` into one new file, committed as a ``replace`` snapshot.

    That is what Spark's ``rewrite_data_files`` (or Snowflake's own
    compaction) writes. pyiceberg 0.12 has no replace writer and refuses to
    summarise one, so the summary is computed as for an overwrite and then
    labelled ``replace``.
    """
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.table.snapshots import Operation, Summary
    from pyiceberg.table.update import snapshot as snapshot_mod
    from pyiceberg.table.update.snapshot import _OverwriteFiles

    summarise = snapshot_mod.update_snapshot_summaries

    def as_replace(summary, previous_summary=None):
        out = summarise(Summary(Operation.OVERWRITE, **summary.additional_properties), previous_summary)
        return Summary(Operation.REPLACE, **out.additional_properties)

    monkeypatch.setattr(snapshot_mod, "update_snapshot_summaries", as_replace)

    old = [task.file for task in table.scan().plan_files()]
    data = table.scan().to_arrow()
    with table.transaction() as tx:
        new = list(_dataframe_to_data_files(tx.table_metadata, data, table.io))
        with _OverwriteFiles(operation=Operation.REPLACE, transaction=tx, io=table.io) as rewrite:
            for f in old:
                rewrite.delete_data_file(f)
            for f in new:
                rewrite.append_data_file(f)


def test_replace_snapshots_change_no_rows_and_are_skipped(lake, monkeypatch) -> None:
    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders([1]))
    last = t.current_snapshot().snapshot_id
    t.append(orders([2]))
    added = t.current_snapshot().snapshot_id
    compact(t, monkeypatch)
    assert t.current_snapshot().summary.operation.value == "replace"
    plan = plan_changes(t, last)
    assert plan.mode == "incremental"
    assert [(s.snapshot_id, s.action) for s in plan.steps] == [
        (added, "load"),
        (t.current_snapshot().snapshot_id, "skip"),
    ]
    assert _ids(t, plan) == [2]  # the compacted file (holding 1 and 2 again) is not re-read


def test_expired_or_foreign_state_is_refused(lake) -> None:
    t = lake.create_table("shop.orders", schema=orders_schema())
    t.append(orders([1]))
    with pytest.raises(SourceRewriteError, match="not an ancestor"):
        plan_changes(t, 123456789)
    with pytest.raises(SourceRewriteError, match="was replaced"):
        plan_changes(t, t.current_snapshot().snapshot_id, synced_uuid="00000000-0000-0000-0000-000000000000")
    assert plan_changes(t, 123456789, on_rewrite="full_reload").mode == "full_reload"
