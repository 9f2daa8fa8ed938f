"""What a volume check verifies: the verified record, and the cursor ranges changed since it (SQLite catalog)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from snowberg.checks import volume_scope as vs
from snowberg.checks.hashdiff import Range
from snowberg.config.table_config import parse_config
from snowberg.core.cursor import CursorKind

NOW = dt.datetime(2026, 3, 4, 12, 0, tzinfo=dt.UTC)  # a Wednesday
T0 = dt.datetime(2026, 1, 1)


def _cfg(**volume: Any) -> Any:
    entry = {
        "name": "orders",
        "source": {"table": "DB.S.ORDERS"},
        "target": "lake.orders",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "volume": volume,
    }
    return parse_config({"tables": [entry]}).tables[0]


def _text(t: dt.datetime) -> str:
    return t.isoformat(sep=" ", timespec="microseconds")


def _rows(ids: list[int], hour: int) -> Any:
    import pyarrow as pa

    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "updated_at": pa.array([T0 + dt.timedelta(hours=hour, seconds=i) for i in ids], pa.timestamp("us")),
        }
    )


def _props(run: str, mode: str, low: dt.datetime | None, high: dt.datetime) -> dict[str, str]:
    return {
        "snowberg.watermark": _text(high),
        "snowberg.cursor-kind": "timestamp_ntz",
        "snowberg.run-id": run,
        "snowberg.mode": mode,
        "snowberg.window-low": _text(low) if low else "",
        "snowberg.window-high": _text(high),
    }


@pytest.fixture
def table(catalog: Any) -> Any:
    """Three hourly incremental loads (windows ending 01:00, 02:00, 03:00)."""
    t = catalog.create_table("lake.orders", schema=_rows([1], 0).schema)
    t.append(_rows([1, 2], 0), snapshot_properties=_props("r1", "incremental", None, T0 + dt.timedelta(hours=1)))
    for h in (1, 2):
        low, high = T0 + dt.timedelta(hours=h), T0 + dt.timedelta(hours=h + 1)
        t.append(_rows([10 * h, 10 * h + 1], h), snapshot_properties=_props(f"r{h + 1}", "incremental", low, high))
    return t


def _record(table: Any, *, full_at: dt.datetime | None = NOW - dt.timedelta(days=1), **kw: Any) -> vs.VerifiedRecord:
    snap = table.current_snapshot()
    wm = snap.summary.additional_properties["snowberg.watermark"]
    base = {
        "snapshot_id": snap.snapshot_id,
        "watermark": wm,
        "cursor_kind": "timestamp_ntz",
        "verified_at": NOW.isoformat(),
        "full_at": full_at.isoformat() if full_at else None,
    }
    return vs.VerifiedRecord(**(base | kw))


def _plan(table: Any, record: vs.VerifiedRecord | None, cfg: Any = None, **kw: Any) -> vs.VerificationScope:
    from snowberg.iceberg.state import read_state

    cfg = cfg or _cfg()
    st = read_state(table.refresh())
    assert st is not None
    wm = st.watermark
    args = {"watermark": wm, "cursor_kind": "timestamp_ntz", "now": NOW} | kw
    return vs.plan_scope(table.refresh(), cfg, cfg.volume, record, **args)


def test_the_record_round_trips_and_a_bad_one_means_a_full_verification(variables: Any, table: Any) -> None:
    rec = _record(table, open_ranges=(Range(low="2026-01-01", high="2026-01-02", low_inclusive=True),))
    assert vs.VerifiedRecord.from_json(rec.to_json()) == rec
    assert '"snapshot_id": "' in rec.to_json()  # 19 digits travel as text
    key = vs.record_key(_cfg())
    assert key == "snowberg__lake__orders__volume_verified"
    assert vs.read_record(variables, key) == (
        None,
        f"no verified record (Variable {key!r}): a first check, or the record was lost",
    )
    variables.set(key, "{not json")
    record, why = vs.read_record(variables, key)
    assert record is None and "unreadable" in why
    scope = _plan(table, record, record_problem=why)
    assert scope.kind is vs.ScopeKind.FULL and "unreadable" in scope.reason


def test_no_change_since_the_record_verifies_the_late_margin_only(table: Any) -> None:
    scope = _plan(table, _record(table))
    assert scope.kind is vs.ScopeKind.INCREMENTAL
    assert scope.ranges == (Range(low="2026-01-01 02:00:00.000000", high="2026-01-01 03:00:00.000000"),)
    # the cursor's lookback widens the margin when it is larger
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "orders",
                    "source": {"table": "DB.S.ORDERS"},
                    "target": "lake.orders",
                    "cursor": {"column": "updated_at", "lookback": "2h"},
                    "primary_key": ["id"],
                }
            ]
        }
    ).tables[0]
    assert _plan(table, _record(table), cfg).ranges[0].low == "2026-01-01 01:00:00.000000"


def test_windows_committed_since_the_record_are_the_scope(table: Any) -> None:
    rec = _record(table)
    for h in (3, 4):
        low, high = T0 + dt.timedelta(hours=h), T0 + dt.timedelta(hours=h + 1)
        table.append(_rows([10 * h], h), snapshot_properties=_props(f"r{h + 1}", "incremental", low, high))
    # a backfill of an old window, committed since: verified again too
    table.append(
        _rows([99], 0),
        snapshot_properties=_props("bf", "backfill", T0 + dt.timedelta(minutes=10), T0 + dt.timedelta(minutes=20))
        | {"snowberg.watermark": _text(T0 + dt.timedelta(hours=5))},
    )
    scope = _plan(table, rec)
    assert scope.kind is vs.ScopeKind.INCREMENTAL
    assert [r.describe() for r in scope.ranges] == [
        "[2026-01-01 00:10:00.000000, 2026-01-01 00:20:00.000000]",
        "(2026-01-01 02:00:00.000000, 2026-01-01 05:00:00.000000]",
    ]


def test_another_engines_delete_is_located_by_the_statistics_of_the_files_it_rewrote(table: Any) -> None:
    rec = _record(table)
    table.delete("id = 10")  # copy-on-write: the 01:00 load's file is rewritten without the row
    scope = _plan(table, rec)
    assert scope.kind is vs.ScopeKind.INCREMENTAL
    assert "[2026-01-01 01:00:10.000000, 2026-01-01 01:00:11.000000]" in [r.describe() for r in scope.ranges]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ("full_refresh", "a full_refresh commit since the last check"),
        ("rollback", "is not an ancestor of the current one"),
        ("expired", "is no longer in the table (expired)"),
        ("cursor_kind", "cursor kind"),
        ("schedule", "full_schedule '@weekly' is due"),
        ("by_hand", "started by hand"),
        ("off", "volume.incremental is off"),
    ],
)
def test_what_cannot_be_located_is_a_full_verification(table: Any, change: str, needle: str) -> None:
    rec = _record(table)
    kw: dict[str, Any] = {}
    cfg = None
    if change == "full_refresh":
        table.append(_rows([5], 5), snapshot_properties=_props("fr", "full_refresh", None, T0 + dt.timedelta(hours=6)))
    elif change == "rollback":
        parent = table.current_snapshot().parent_snapshot_id
        table.append(_rows([7], 7), snapshot_properties=_props("x", "incremental", T0, T0 + dt.timedelta(hours=8)))
        rec = _record(table)
        table.manage_snapshots().rollback_to_snapshot(parent).commit()
    elif change == "expired":
        rec = _record(table, snapshot_id=12345)
    elif change == "cursor_kind":
        kw["cursor_kind"] = "date"
    elif change == "schedule":
        rec = _record(table, full_at=dt.datetime(2026, 2, 28, tzinfo=dt.UTC))  # before Sunday 2026-03-01 00:00
    elif change == "by_hand":
        kw["force_full"] = True
    else:
        cfg = _cfg(incremental=False)
    scope = _plan(table, rec, cfg, **kw)
    assert scope.kind is vs.ScopeKind.FULL and needle in scope.reason, scope.reason


def test_compaction_and_propagated_deletes_add_nothing_to_the_scope(table: Any) -> None:
    from snowberg.iceberg.maintenance import compact

    rec = _record(table)
    props = dict(table.current_snapshot().summary.additional_properties)
    state = {k: v for k, v in props.items() if k.startswith("snowberg.")}
    table.delete("id = 20", snapshot_properties=state | {"snowberg.mode": vs.PROPAGATE_MODE, "snowberg.run-id": "c"})
    result = compact(table.refresh(), min_input_files=2)  # a real replace snapshot over every file
    assert table.refresh().current_snapshot().summary.operation.value == "replace", result
    scope = _plan(table, rec)
    assert scope.kind is vs.ScopeKind.INCREMENTAL and len(scope.ranges) == 1


def test_a_first_load_or_another_engines_delete_files_since_the_record_mean_a_full_verification(
    table: Any, catalog: Any
) -> None:
    import pyarrow as pa

    from snowberg.iceberg.merge import write_position_deletes

    rec = _record(table)
    tx = table.transaction()
    # no snowberg state: another engine
    write_position_deletes(tx, pa.table({"id": pa.array([10], pa.int64())}), {}, io=table.io)
    tx.commit_transaction()
    scope = _plan(table, rec)
    assert scope.kind is vs.ScopeKind.FULL and "has delete files" in scope.reason
    fresh = catalog.create_table("lake.fresh", schema=_rows([1], 0).schema)
    fresh.append(_rows([1], 0), snapshot_properties=_props("r1", "incremental", T0, T0 + dt.timedelta(hours=1)))
    rec = _record(fresh)
    fresh.append(_rows([2], 1), snapshot_properties=_props("again", "incremental", None, T0 + dt.timedelta(hours=2)))
    scope = _plan(fresh, rec)
    assert scope.kind is vs.ScopeKind.FULL and "a first load since the last check" in scope.reason


def test_open_ranges_of_the_last_check_stay_in_scope_until_they_pass(table: Any) -> None:
    day = Range(
        low="2025-12-30 00:00:00.000000", high="2025-12-31 00:00:00.000000", low_inclusive=True, high_inclusive=False
    )
    scope = _plan(table, _record(table, open_ranges=(day,)))
    assert scope.ranges[0] == day and "differed at the last check" in scope.reason


def test_ranges_merge_and_many_become_their_hull() -> None:
    k = CursorKind.NUMBER
    assert vs.merge_ranges(k, [Range(low="5", high="9"), Range(low="1", high="6"), Range(low="20", high="30")]) == (
        Range(low="1", high="9"),
        Range(low="20", high="30"),
    )
    many = [Range(low=str(i * 10), high=str(i * 10 + 1)) for i in range(40)]
    assert vs.merge_ranges(k, many) == (Range(low="0", high="391"),)
    assert vs.merge_ranges(k, [Range(low=None, high="3"), Range(low="2", high=None)]) == (Range(low=None, high=None),)


def test_the_next_record_keeps_the_last_full_time_unless_this_check_was_full() -> None:
    inc = vs.VerificationScope(kind=vs.ScopeKind.INCREMENTAL, reason="x", ranges=(Range(),))
    full = vs.VerificationScope(kind=vs.ScopeKind.FULL, reason="x")
    prev = vs.VerifiedRecord(snapshot_id=1, watermark="1", cursor_kind="number", verified_at="a", full_at="f")
    args = {"snapshot_id": 2, "watermark": "5", "cursor_kind": "number", "open_ranges": (), "now": NOW}
    assert vs.next_record(prev, inc, **args).full_at == "f"
    assert vs.next_record(prev, full, **args).full_at == NOW.isoformat(timespec="seconds")
    assert vs.full_due("@weekly", None, NOW) and not vs.full_due(None, None, NOW)
    assert not vs.full_due("@weekly", "2026-03-01T00:00:01+00:00", NOW)


def test_another_engines_files_without_cursor_statistics_mean_a_full_verification(table: Any) -> None:
    rec = _record(table)
    with table.transaction() as tx:
        tx.set_properties({"write.metadata.metrics.default": "none"})
    table.append(_rows([77], 2))  # an append by another writer that keeps no column statistics
    scope = _plan(table, rec)
    assert scope.kind is vs.ScopeKind.FULL and "has no statistics for 'updated_at'" in scope.reason


def test_the_earlier_snapshots_of_a_snowberg_commit_take_its_window(table: Any) -> None:
    """A merge-on-read run stages its position deletes, then its append; when only the last snapshot carries the
    state, the first says which commit it is part of: the commit's window is the scope, not a full verification."""
    import pyarrow as pa

    from snowberg.iceberg.merge import write_position_deletes

    rec = _record(table)
    low, high = T0 + dt.timedelta(hours=3), T0 + dt.timedelta(hours=4)
    tx = table.transaction()
    part = {vs.PARTIAL_OF: "c1", "snowberg.run-id": "r9", "snowberg.mode": "incremental"}
    write_position_deletes(tx, pa.table({"id": pa.array([10], pa.int64())}), part, io=table.io)
    tx.append(_rows([10], 3), snapshot_properties=_props("r9", "incremental", low, high))
    tx.commit_transaction()
    scope = _plan(table, rec)
    assert scope.kind is vs.ScopeKind.INCREMENTAL, scope.reason
    assert [r.describe() for r in scope.ranges] == ["(2026-01-01 02:00:00.000000, 2026-01-01 04:00:00.000000]"]


def test_a_backfill_range_merged_with_an_open_range_ending_at_its_end_keeps_that_end(table: Any) -> None:
    """A backfill ``[a, d]`` and a day that differed at the last check, ``[c, d)``, end at the same cursor value:
    the merged range still holds ``d``, so rows at exactly that value are compared. Whichever range starts
    first."""
    k = CursorKind.NUMBER
    backfill = Range(low="10", high="20", low_inclusive=True, high_inclusive=True)
    for open_low in ("5", "15"):
        day = Range(low=open_low, high="20", low_inclusive=True, high_inclusive=False)
        for ranges in ([backfill, day], [day, backfill]):
            (merged,) = vs.merge_ranges(k, ranges)
            assert (merged.high, merged.high_inclusive) == ("20", True), (open_low, ranges)
            assert merged.low == min("10", open_low, key=int) and merged.low_inclusive

    # Through the plan: the backfill committed since the record, the day left open by the last check.
    rec = _record(
        table,
        open_ranges=(
            Range(
                low="2025-12-31 00:00:00.000000",
                high="2026-01-01 00:00:00.000000",
                low_inclusive=True,
                high_inclusive=False,
            ),
        ),
    )
    table.append(
        _rows([98], 0),
        snapshot_properties=_props("bf", "backfill", T0 - dt.timedelta(hours=12), T0)
        | {"snowberg.watermark": _text(T0 + dt.timedelta(hours=3))},
    )
    scope = _plan(table, rec)
    assert scope.kind is vs.ScopeKind.INCREMENTAL
    assert [r.describe() for r in scope.ranges] == [
        "[2025-12-31 00:00:00.000000, 2026-01-01 00:00:00.000000]",
        "(2026-01-01 02:00:00.000000, 2026-01-01 03:00:00.000000]",
    ]


def test_another_engines_compaction_adds_nothing_to_the_scope(table: Any) -> None:
    """A ``replace`` snapshot without snowberg's properties (Spark's rewrite_data_files, Snowflake's compaction)
    moves no row between cursor ranges: the scope stays the late margin, not the range of every file it
    rewrote (the check's cost would follow the table)."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    from snowberg.iceberg.deletes import replace_producer

    rec = _record(table)
    old = [task.file for task in table.scan().plan_files()]
    data = table.scan().to_arrow()
    tx = table.transaction()
    producer = replace_producer(tx, table.io, {})
    for f in old:
        producer.delete_data_file(f)
    for f in _dataframe_to_data_files(tx.table_metadata, data, table.io):
        producer.append_data_file(f)
    producer.commit()
    tx.commit_transaction()
    head = table.refresh().current_snapshot()
    assert head.summary.operation.value == "replace"
    assert not any(k.startswith("snowberg.") for k in head.summary.additional_properties)
    scope = _plan(table, rec)
    assert scope.kind is vs.ScopeKind.INCREMENTAL
    assert scope.ranges == (Range(low="2026-01-01 02:00:00.000000", high="2026-01-01 03:00:00.000000"),)
