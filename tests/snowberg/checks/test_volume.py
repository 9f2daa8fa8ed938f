"""The volume check against the emulator (fakesnow) and a SQLite Iceberg catalog.

The Snowflake side runs the emulator dialect (``HashDialect.EMULATOR``): the
emulator has no ``TO_NUMBER(<hex>, 'XXXXXXX')``; the Snowflake text of the
same queries is checked in ``test_hashdiff.py``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from snowberg.checks import hashdiff as hd
from snowberg.config.table_config import parse_config
from snowberg.config.volume_settings import DeletePolicy

WATERMARK = "2026-01-03 00:00:00.000000"
MISSING = "missing from the lake (lost, or backdated below the watermark)"
START = dt.datetime(2026, 1, 1)


def _cfg(sfdb: Any, **extra: Any) -> Any:
    entry = {
        "name": "orders",
        "source": {"table": sfdb.table("SRC")},
        "target": "lake.orders",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        **extra,
    }
    return parse_config({"tables": [entry]}).tables[0]


def _seed(sfdb: Any, catalog: Any, n: int, *, lake_ids: list[int] | None = None, unit: str = "minute") -> Any:
    """``n`` source rows one ``unit`` apart from 2026-01-01 (ids 1..n); the lake
    gets the same rows (or ``lake_ids``)."""
    import pyarrow as pa

    sfdb.sql(f"CREATE OR REPLACE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} SELECT seq4() + 1, DATEADD({unit}, seq4() + 1, '2026-01-01'::TIMESTAMP_NTZ) "
        f"FROM TABLE(GENERATOR(ROWCOUNT => {n}))"
    )
    ids = list(range(1, n + 1)) if lake_ids is None else lake_ids
    catalog.create_namespace_if_not_exists("lake")
    t = catalog.create_table(
        "lake.orders", schema=pa.schema([pa.field("id", pa.int64()), pa.field("updated_at", pa.timestamp("us"))])
    )
    t.append(
        pa.table(
            {"id": pa.array(ids, pa.int64()), "updated_at": [START + dt.timedelta(**{unit + "s": i}) for i in ids]},
            schema=pa.schema([pa.field("id", pa.int64()), pa.field("updated_at", pa.timestamp("us"))]),
        ),
        snapshot_properties={
            "snowberg.watermark": WATERMARK,
            "snowberg.cursor-kind": "timestamp_ntz",
            "snowberg.run-id": "r1",
            "snowberg.mode": "incremental",
            "snowberg.rows": str(len(ids)),
        },
    )
    return t


def _verify(cfg: Any, table: Any, sfdb: Any, **settings: Any) -> Any:
    from snowberg.checks.volume import verify

    s = cfg.volume.model_copy(update=settings) if settings else cfg.volume
    return verify(cfg, table, sfdb.conn, settings=s, dialect=hd.HashDialect.EMULATOR)


def test_equal_tables_pass_with_one_aggregate_query(sfdb: Any, catalog: Any) -> None:
    table = _seed(sfdb, catalog, 2000)
    report = _verify(_cfg(sfdb), table, sfdb)
    assert report.ok, report.to_dict()
    assert report.source_rows == report.lake_rows == 2000
    assert report.snowflake_queries == 2  # describe (LIMIT 0) + per-day counts and checksums


@pytest.mark.parametrize("strict", [False, True])
def test_one_missing_lake_row_is_named_with_its_cursor(sfdb: Any, catalog: Any, strict: bool) -> None:
    ids = [i for i in range(1, 3001) if i != 1234]
    table = _seed(sfdb, catalog, 3000, lake_ids=ids)
    report = _verify(_cfg(sfdb), table, sfdb, leaf_rows=50, digits_per_level=1, strict_checksums=strict)
    assert not report.ok
    assert [(d.kind, d.key, d.source_cursor) for d in report.differences] == [
        (hd.DiffKind.SOURCE_ONLY, {"id": "1234"}, "2026-01-01 20:34:00.000000")
    ]
    assert report.differing_days == {"2026-01-01": (1439, 1438)}
    assert report.snowflake_queries <= 30


def test_backdated_source_rows_lake_deletes_and_hard_deletes_are_told_apart(sfdb: Any, catalog: Any) -> None:
    table = _seed(sfdb, catalog, 2000)
    src = sfdb.table("SRC")
    # (a) three rows deleted from the lake behind snowberg's back
    table.delete("id in (10, 20, 30)")
    # (b) a source row inserted with a cursor below the watermark
    sfdb.sql(f"INSERT INTO {src} VALUES (5001, '2026-01-01 12:00:00'::TIMESTAMP_NTZ)")
    # (c) a hard delete in the source
    sfdb.sql(f"DELETE FROM {src} WHERE ID = 1500")
    # and an update after the watermark: pending, not a difference
    sfdb.sql(f"UPDATE {src} SET UPDATED_AT = '2026-02-01'::TIMESTAMP_NTZ WHERE ID = 1700")
    report = _verify(_cfg(sfdb), table.refresh(), sfdb, leaf_rows=100)
    kinds = {d.key["id"]: (d.kind, d.source_cursor, d.lake_cursor, d.note) for d in report.differences}
    assert kinds == {
        "10": (hd.DiffKind.SOURCE_ONLY, "2026-01-01 00:10:00.000000", None, MISSING),
        "20": (hd.DiffKind.SOURCE_ONLY, "2026-01-01 00:20:00.000000", None, MISSING),
        "30": (hd.DiffKind.SOURCE_ONLY, "2026-01-01 00:30:00.000000", None, MISSING),
        "5001": (hd.DiffKind.SOURCE_ONLY, "2026-01-01 12:00:00.000000", None, MISSING),
        "1500": (hd.DiffKind.LAKE_ONLY, None, "2026-01-02 01:00:00.000000", "deleted in source"),
    }
    assert report.pending == 1  # id 1700 moved above the watermark
    assert (report.source_rows, report.lake_rows) == (2000 - 1 - 1 + 1, 2000 - 3)
    assert not report.ok

    # deletes: ignore → the hard delete is not a difference; the rest still is
    ignored = _verify(_cfg(sfdb), table, sfdb, leaf_rows=100, deletes=DeletePolicy.IGNORE)
    assert sorted(d.key["id"] for d in ignored.differences) == ["10", "20", "30", "5001"]
    assert [d.key["id"] for d in ignored.deleted_in_source] == ["1500"]


def test_propagated_deletes_keep_the_state_and_never_touch_rows_above_the_watermark(sfdb: Any, catalog: Any) -> None:
    import pyarrow as pa

    from snowberg.checks.volume import commit_hard_deletes
    from snowberg.iceberg import state

    table = _seed(sfdb, catalog, 100)
    # a lake row above the watermark with a key that is also "deleted": it must stay
    table.append(
        pa.table(
            {"id": pa.array([50], pa.int64()), "updated_at": pa.array([dt.datetime(2026, 2, 1)], pa.timestamp("us"))}
        )
    )
    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')} WHERE ID IN (7, 50)")
    cfg = _cfg(sfdb, volume={"deletes": "propagate"})
    report = _verify(cfg, table, sfdb, leaf_rows=10)
    assert sorted(d.key["id"] for d in report.deleted_in_source) == ["50", "7"]
    assert report.ok  # propagate: hard deletes are not mismatches
    before = state.read_state(table)
    head = table.current_snapshot().snapshot_id
    done = commit_hard_deletes(
        table,
        cfg,
        report.deleted_in_source,
        columns=report.key_columns,
        run_id="check-1",
        expected_snapshot_id=head,
    )
    assert done.removed == 2 and done.not_removed == []
    table = table.refresh()
    after = state.read_state(table)
    assert after is not None and before is not None and after.watermark == before.watermark
    snap = table.current_snapshot()
    # one commit on the checked head: its rewrite is marked partial, its last snapshot carries the state
    chain = [s.snapshot_id for s in state.ancestors(table)]
    assert head in chain and all(state.is_partial(table, table.snapshot_by_id(i)) for i in chain[1 : chain.index(head)])
    assert snap.summary.additional_properties["snowberg.rows-deleted"] == "2"
    assert table.properties["commit.retry.num-retries"] == "0"
    left = table.scan().to_arrow().to_pydict()
    assert 7 not in left["id"] and left["id"].count(50) == 1  # the row above the watermark stayed
    assert _verify(cfg, table, sfdb, leaf_rows=10).deleted_in_source == []

    # a table that moved since the check read it is refused
    from snowberg.iceberg.state import ConcurrentCommitError

    with pytest.raises(ConcurrentCommitError):
        commit_hard_deletes(
            table, cfg, report.deleted_in_source[:1], columns=report.key_columns, run_id="c2", expected_snapshot_id=head
        )


def test_one_differing_row_is_found_within_the_query_bound(sfdb: Any, catalog: Any) -> None:
    n = 50_000
    ids = [i for i in range(1, n + 1) if i != 31_337]
    table = _seed(sfdb, catalog, n, lake_ids=ids, unit="second")
    report = _verify(_cfg(sfdb), table, sfdb)
    assert [d.key for d in report.differences] == [{"id": "31337"}]
    assert report.snowflake_queries <= 30, report.snowflake_queries
    print(f"one differing row among {n:,}: {report.snowflake_queries} Snowflake queries, {report.seconds:.2f}s")


def test_a_swap_that_keeps_the_day_count_is_still_found(sfdb: Any, catalog: Any) -> None:
    table = _seed(sfdb, catalog, 500)
    table.delete("id = 10")  # the lake loses a row of 2026-01-01 …
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} VALUES (9000, '2026-01-01 03:00:00'::TIMESTAMP_NTZ)"
    )  # … the source gains one
    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')} WHERE ID = 20")
    table.delete("id = 20")
    report = _verify(_cfg(sfdb), table.refresh(), sfdb, leaf_rows=50)
    assert sorted(d.key["id"] for d in report.differences) == ["10", "9000"]


def test_null_keys_fail_with_a_clear_error(sfdb: Any, catalog: Any) -> None:
    table = _seed(sfdb, catalog, 10)
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES (NULL, '2026-01-01 00:30:00'::TIMESTAMP_NTZ)")
    with pytest.raises(hd.VolumeInputError, match=r"table 'orders': primary_key \['id'\] is NULL in 1 source row"):
        _verify(_cfg(sfdb), table, sfdb)


def test_a_key_type_without_a_shared_text_form_is_refused_before_comparing(sfdb: Any, catalog: Any) -> None:
    table = _seed(sfdb, catalog, 10)
    sfdb.sql(f"ALTER TABLE {sfdb.table('SRC')} ADD COLUMN SCORE FLOAT")
    cfg = _cfg(sfdb, primary_key=["score"])
    with pytest.raises(hd.VolumeInputError, match="table 'orders': column 'score' is FLOAT"):
        _verify(cfg, table, sfdb)


def test_a_table_without_a_key_is_compared_by_counts_per_day(sfdb: Any, catalog: Any) -> None:
    table = _seed(sfdb, catalog, 2000)
    cfg = _cfg(sfdb, primary_key=[])
    assert _verify(cfg, table, sfdb).ok
    table.delete("id = 5")
    report = _verify(cfg, table.refresh(), sfdb)
    assert report.count_only and not report.ok
    assert report.differing_days == {"2026-01-01": (1439, 1438)}
    assert report.differences == []


def test_count_only_append_tables_allow_older_versions_in_the_lake(sfdb: Any, catalog: Any) -> None:
    import pyarrow as pa

    table = _seed(sfdb, catalog, 100)
    cfg = _cfg(sfdb, primary_key=[], write_mode="append")
    # an older version of id 5 stays in an append table's lake: more lake rows than source rows is fine
    table.append(
        pa.table(
            {"id": pa.array([5], pa.int64()), "updated_at": pa.array([dt.datetime(2026, 1, 1)], pa.timestamp("us"))}
        )
    )
    report = _verify(cfg, table.refresh(), sfdb)
    assert report.ok and report.count_only and report.lake_versions == 101
    # fewer lake rows than source rows on a day: rows are missing
    table.delete("id in (6, 7)")
    report = _verify(cfg, table.refresh(), sfdb)
    assert not report.ok and report.differing_days == {"2026-01-01": (100, 99)}


def test_many_updates_since_the_watermark_are_inconclusive_not_a_mismatch(sfdb: Any, catalog: Any) -> None:
    table = _seed(sfdb, catalog, 1000)
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET UPDATED_AT = '2026-02-01'::TIMESTAMP_NTZ WHERE ID <= 200")
    report = _verify(_cfg(sfdb), table, sfdb, max_reported_keys=5, leaf_rows=10)
    assert report.truncated and report.pending > 0 and report.differences == []
    assert report.inconclusive and not report.ok and report.note.startswith("inconclusive")
    # a real difference among them still fails
    table.delete("id = 900")
    report = _verify(_cfg(sfdb), table.refresh(), sfdb, max_reported_keys=300, leaf_rows=10)
    assert [d.key["id"] for d in report.differences] == ["900"] and report.pending == 200
    assert not report.ok


def test_count_only_reads_lake_counts_from_manifests_of_a_day_partitioned_table(
    sfdb: Any, catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform
    from pyiceberg.types import LongType, NestedField, TimestampType

    import snowberg.checks.volume as volume

    _seed(sfdb, catalog, 2000)
    catalog.drop_table("lake.orders")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "updated_at", TimestampType()))
    spec = PartitionSpec(PartitionField(2, 1000, DayTransform(), "updated_at_day"))
    t = catalog.create_table("lake.orders", schema=schema, partition_spec=spec)
    ids = list(range(1, 2001))
    t.append(
        pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "updated_at": pa.array([START + dt.timedelta(minutes=i) for i in ids], pa.timestamp("us")),
            }
        ),
        snapshot_properties={
            "snowberg.watermark": WATERMARK,
            "snowberg.cursor-kind": "timestamp_ntz",
            "snowberg.mode": "incremental",
        },
    )
    read = volume.LakeReader.read
    monkeypatch.setattr(volume.LakeReader, "read", lambda *a, **k: pytest.fail("a data file was read"))
    cfg = _cfg(sfdb, volume={"count_only": True})  # a merge table: counts must match exactly
    report = _verify(cfg, t, sfdb)
    assert report.ok and report.lake_counts_from_metadata and report.lake_rows == 2000
    assert report.lake_files_read == 0 and report.lake_files_counted_from_metadata == 2
    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')} WHERE ID = 1800")
    report = _verify(cfg, t, sfdb)
    assert report.differing_days == {"2026-01-02": (560, 561)}
    # a file holding rows above the compared watermark cannot be counted from its statistics: that file is read
    monkeypatch.setattr(volume.LakeReader, "read", read)
    spec = hd.Spec(
        table="orders",
        keys=(),
        cursor=hd.Column(name="updated_at", kind=hd.ValueKind.TIMESTAMP_NTZ),
        cursor_kind="timestamp_ntz",
        watermark="2026-01-02 06:00:00.000000",
    )
    partial = volume.VolumeReport(
        table="orders", lake_table="lake.orders", watermark=None, write_mode="merge", count_only=True
    )
    counts = volume.lake_day_counts(t, spec, volume.LakeReader(t, ["updated_at"], spec), partial, 256)
    assert counts == {"2026-01-01": 1439, "2026-01-02": 361}  # minutes 1440..1800
    assert partial.lake_files_counted_from_metadata == 1 and not partial.lake_counts_from_metadata


def test_keyed_append_tables_compare_each_keys_newest_version(sfdb: Any, catalog: Any) -> None:
    import pyarrow as pa

    table = _seed(sfdb, catalog, 300)
    old = pa.table(
        {
            "id": pa.array([5, 6], pa.int64()),
            "updated_at": pa.array([dt.datetime(2025, 12, 31)] * 2, pa.timestamp("us")),
        }
    )
    table.append(old)  # older versions of ids 5 and 6 stay in an append table
    cfg = _cfg(sfdb, write_mode="append")
    report = _verify(cfg, table.refresh(), sfdb)
    assert report.ok and report.lake_versions == 302 and report.lake_rows == 300
    # the newest version of id 6 lost: the lake's newest is the old one, with another cursor
    table.delete("id = 6 and updated_at > '2026-01-01T00:00:00'")
    report = _verify(cfg, table.refresh(), sfdb, leaf_rows=50)
    assert [(d.key, d.kind, d.source_cursor, d.lake_cursor) for d in report.differences] == [
        ({"id": "6"}, hd.DiffKind.CURSOR_DIFFERS, "2026-01-01 00:06:00.000000", "2025-12-31 00:00:00.000000")
    ]


def test_text_keys_and_number_cursors(sfdb: Any, catalog: Any) -> None:
    import pyarrow as pa

    src = sfdb.table("SRC")
    sfdb.sql(f"CREATE TABLE {src} (CODE VARCHAR, SEQ NUMBER(38,0))")
    sfdb.sql(f"INSERT INTO {src} SELECT 'k-' || seq4(), seq4() FROM TABLE(GENERATOR(ROWCOUNT => 500))")
    schema = pa.schema([pa.field("code", pa.string()), pa.field("seq", pa.int64())])
    t = catalog.create_table("lake.codes", schema=schema)
    t.append(
        pa.table(
            {"code": [f"k-{i}" for i in range(500) if i != 77], "seq": [i for i in range(500) if i != 77]},
            schema=schema,
        ),
        snapshot_properties={
            "snowberg.watermark": "450",
            "snowberg.cursor-kind": "number",
            "snowberg.mode": "incremental",
        },
    )
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "codes",
                    "source": {"table": src},
                    "target": "lake.codes",
                    "cursor": {"column": "seq"},
                    "primary_key": ["code"],
                }
            ]
        }
    ).tables[0]
    report = _verify(cfg, t, sfdb, leaf_rows=20)
    assert (report.source_rows, report.lake_rows) == (451, 450)  # cursor <= 450 on both sides
    assert [(d.key, d.kind, d.source_cursor) for d in report.differences] == [
        ({"code": "k-77"}, hd.DiffKind.SOURCE_ONLY, "77")
    ]


# ---------------------------------------------------------------------------
# Incremental verification (run_check: the scope from the verified record)


def _window(table: Any, ids: list[int], low: str, high: str, run: str, *, delete: str | None = None) -> None:
    """Commit an incremental window as a load does (``delete``: a row the same commit loses, as a buggy merge would)."""
    import pyarrow as pa

    props = {
        "snowberg.watermark": high,
        "snowberg.cursor-kind": "timestamp_ntz",
        "snowberg.run-id": run,
        "snowberg.mode": "incremental",
        "snowberg.window-low": low,
        "snowberg.window-high": high,
        "snowberg.rows": str(len(ids)),
    }
    with table.transaction() as tx:
        if delete:
            tx.delete(delete, snapshot_properties=props)
        tx.append(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "updated_at": pa.array([START + dt.timedelta(minutes=i) for i in ids], pa.timestamp("us")),
                }
            ),
            snapshot_properties=props,
        )


def _run(cfg: Any, table: Any, sfdb: Any, variables: Any, **kw: Any) -> Any:
    from snowberg.checks.volume import run_check

    return run_check(cfg, table.refresh(), sfdb.conn, dialect=hd.HashDialect.EMULATOR, records=variables, **kw)


def _grow_source(sfdb: Any, first: int, last: int) -> None:
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} SELECT {first} + seq4(), "
        f"DATEADD(minute, {first} + seq4(), '2026-01-01'::TIMESTAMP_NTZ) "
        f"FROM TABLE(GENERATOR(ROWCOUNT => {last - first + 1}))"
    )


def test_an_incremental_check_reads_only_the_windows_committed_since_the_last_one(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    from snowberg.checks.volume_scope import ScopeKind

    table = _seed(sfdb, catalog, 2000)  # ids 1..2000, one a minute, watermark 2026-01-03
    cfg = _cfg(sfdb)
    first = _run(cfg, table, sfdb, variables)
    assert first.scope.kind is ScopeKind.FULL and "no verified record" in first.scope.reason
    assert first.report.ok and first.record_written and first.report.source_rows_scanned == 2000
    # the next load: ids 3000..3059 (2026-01-03 02:00..02:59) in the window (2026-01-03, 2026-01-04 02:00]
    _grow_source(sfdb, 3000, 3059)
    _window(table, list(range(3000, 3060)), WATERMARK, "2026-01-04 02:00:00.000000", "r2")
    nxt = _run(cfg, table, sfdb, variables)
    assert nxt.scope.kind is ScopeKind.INCREMENTAL and nxt.report.ok, nxt.report.to_dict()
    assert nxt.report.ranges == ["(2026-01-02 23:00:00.000000, 2026-01-04 02:00:00.000000]"]  # 1h late margin
    assert nxt.report.source_rows == nxt.report.lake_rows == 60  # ids 1..2000 end 2026-01-02 09:20
    assert nxt.report.source_rows_scanned == 60 and nxt.report.lake_files_read == 1  # the new window's file only
    assert nxt.report.lake_files_total == 2


def test_a_row_lost_in_a_new_window_is_found_by_the_next_incremental_check(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    table = _seed(sfdb, catalog, 2000)
    cfg = _cfg(sfdb)
    assert _run(cfg, table, sfdb, variables).report.ok
    _grow_source(sfdb, 3000, 3059)
    _window(table, [i for i in range(3000, 3060) if i != 3033], WATERMARK, "2026-01-04 02:00:00.000000", "r2")
    out = _run(cfg, table, sfdb, variables)
    assert out.scope.kind.value == "incremental" and not out.report.ok
    assert [(d.key, d.kind) for d in out.report.differences] == [({"id": "3033"}, hd.DiffKind.SOURCE_ONLY)]
    assert out.report.source_rows_scanned < 200  # the window, not the table
    # the day stays open: the next check verifies it again (and fails again) until it is repaired
    again = _run(cfg, table, sfdb, variables)
    assert not again.report.ok and "differed at the last check" in again.scope.reason


def test_a_row_lost_in_an_old_verified_window_is_found_by_the_next_full_verification(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    table = _seed(sfdb, catalog, 2000)
    cfg = _cfg(sfdb)
    assert _run(cfg, table, sfdb, variables).report.ok
    _grow_source(sfdb, 3000, 3059)
    # a load whose commit also loses id 77 of an old, verified day (what a wrong merge delete would do):
    # its recorded window is the new one, so an incremental check does not look at 2026-01-01
    _window(table, list(range(3000, 3060)), WATERMARK, "2026-01-04 02:00:00.000000", "r2", delete="id = 77")
    inc = _run(cfg, table, sfdb, variables)
    assert inc.scope.kind.value == "incremental" and inc.report.ok
    full = _run(cfg, table, sfdb, variables, force_full=True)
    assert full.scope.kind.value == "full" and not full.report.ok
    assert [(d.key, d.kind, d.source_cursor) for d in full.report.differences] == [
        ({"id": "77"}, hd.DiffKind.SOURCE_ONLY, "2026-01-01 01:17:00.000000")
    ]
    assert full.report.differing_days == {"2026-01-01": (1439, 1438)}


def test_a_lost_record_means_a_full_verification_never_a_skipped_one(sfdb: Any, catalog: Any, variables: Any) -> None:
    from snowberg.checks.volume_scope import record_key

    table = _seed(sfdb, catalog, 500)
    cfg = _cfg(sfdb)
    _run(cfg, table, sfdb, variables)
    table.delete("id = 3")  # behind snowberg's back, in an old window
    variables.pop(record_key(cfg))
    out = _run(cfg, table, sfdb, variables)
    assert out.scope.kind.value == "full" and [d.key for d in out.report.differences] == [{"id": "3"}]


# ---------------------------------------------------------------------------
# Stream and cursor-less tables: counts against the source as of what the lake holds


class TimeTravelToEmulator:
    """A connection to the emulator for time-travel queries, which the emulator cannot run.

    The SQL is the Snowflake text (``AT(TIMESTAMP => TO_TIMESTAMP_LTZ(%(as_of)s))``, written from Snowflake's
    documentation of the AT clause); this records each statement and removes the AT clause before the
    emulator runs it, so the counting logic runs for real against the source as it is now.
    """

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.executed: list[tuple[str, Any]] = []

    def cursor(self) -> Any:
        outer = self
        inner = self.conn.cursor()

        class Cur:
            def execute(self, sql: str, params: Any = None) -> Any:
                outer.executed.append((sql, params))
                sql = sql.replace(" AT(TIMESTAMP => TO_TIMESTAMP_LTZ(%(as_of)s))", "")
                params = {k: v for k, v in (params or {}).items() if k != "as_of"} or None
                return inner.execute(sql, params)

            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

        return Cur()


def _count_seed(sfdb: Any, catalog: Any, props: dict[str, str], n: int = 300) -> Any:
    import pyarrow as pa

    sfdb.sql(f"CREATE OR REPLACE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), CREATED_ON DATE)")
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} SELECT seq4() + 1, DATEADD(day, MOD(seq4(), 3), '2026-01-01'::DATE) "
        f"FROM TABLE(GENERATOR(ROWCOUNT => {n}))"
    )
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("created_on", pa.date32())])
    catalog.create_namespace_if_not_exists("lake")
    t = catalog.create_table("lake.orders", schema=schema)
    t.append(
        pa.table(
            {"id": list(range(1, n + 1)), "created_on": [dt.date(2026, 1, 1 + i % 3) for i in range(n)]}, schema=schema
        ),
        snapshot_properties=props,
    )
    return t


def _stream_cfg(sfdb: Any, **volume: Any) -> Any:
    entry = {
        "name": "orders",
        "source": {"table": sfdb.table("SRC")},
        "target": "lake.orders",
        "primary_key": ["id"],
        "stream": {"name": sfdb.table("SRC_STREAM")},
        "volume": volume,
    }
    return parse_config({"tables": [entry]}).tables[0]


STREAM_PROPS = {
    "snowberg.stream-batch-id": "3",
    "snowberg.stream-consumed-at": "2026-01-05 10:00:00.123000-08:00",
    "snowberg.run-id": "s3",
    "snowberg.mode": "stream",
}


def test_a_stream_table_is_counted_per_day_against_the_source_as_of_the_consumed_offset(
    sfdb: Any, catalog: Any
) -> None:
    from snowberg.checks.volume import verify

    table = _count_seed(sfdb, catalog, STREAM_PROPS)
    cfg = _stream_cfg(sfdb, day_column="created_on")
    conn = TimeTravelToEmulator(sfdb.conn)
    report = verify(cfg, table, conn)
    assert report.ok and report.count_only, report.to_dict()
    assert report.lake_files_read == 1  # its one data file spans three days: counted by reading its one column
    assert report.as_of == "2026-01-05 18:00:00.123000+00:00"
    sql, params = conn.executed[-1]
    assert sql == (
        f'SELECT CAST("CREATED_ON" AS DATE) AS d, COUNT(*) FROM "{sfdb.name}"."S"."SRC" '
        "AT(TIMESTAMP => TO_TIMESTAMP_LTZ(%(as_of)s)) WHERE TRUE GROUP BY d"
    )
    assert params == {"as_of": "2026-01-05 18:00:00.123000+00:00"}
    table.delete("id = 4")  # day 2026-01-01 loses a row
    report = verify(cfg, table.refresh(), conn)
    assert not report.ok and report.differing_days == {"2026-01-01": (100, 99)}
    # without a day column: one count for the whole table (from the manifests where no delete file applies)
    whole = verify(_stream_cfg(sfdb), table.refresh(), conn)
    assert whole.differing_days == {"null": (300, 299)} and "CREATED_ON" not in conn.executed[-1][0]
    assert whole.lake_counts_from_metadata and whole.lake_files_read == 0


def test_a_stream_table_without_a_consumed_offset_or_commit_is_skipped_with_the_reason(sfdb: Any, catalog: Any) -> None:
    from snowberg.checks.volume import VolumeCheckSkipped, verify

    table = _count_seed(sfdb, catalog, {"snowberg.run-id": "x"})
    with pytest.raises(VolumeCheckSkipped, match="no stream batch applied yet"):
        verify(_stream_cfg(sfdb), table, sfdb.conn)


def _refresh_cfg(sfdb: Any, **extra: Any) -> Any:
    entry = {"name": "orders", "source": {"table": sfdb.table("SRC")}, "target": "lake.orders", **extra}
    return parse_config({"tables": [entry]}).tables[0]


REFRESH_PROPS = {
    "snowberg.watermark": "",
    "snowberg.cursor-kind": "",
    "snowberg.run-id": "fr1",
    "snowberg.mode": "full_refresh",
    "snowberg.rows": "300",
}


def test_a_cursorless_table_is_counted_against_the_source_as_of_its_refresh(sfdb: Any, catalog: Any) -> None:
    from snowberg.checks.volume import verify

    table = _count_seed(sfdb, catalog, REFRESH_PROPS)
    cfg = _refresh_cfg(sfdb, volume={"day_column": "created_on"})
    conn = TimeTravelToEmulator(sfdb.conn)
    report = verify(cfg, table, conn)
    committed = dt.datetime.fromtimestamp(table.current_snapshot().timestamp_ms / 1000, tz=dt.UTC)
    assert report.ok and report.as_of == committed.isoformat(sep=" ", timespec="microseconds")
    # the source changed after the refresh (here: the emulator reads it now): the lake holds exactly what the
    # refresh committed, so the result is inconclusive, not a pass and not a mismatch
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES (1000, '2026-01-01'::DATE)")
    report = verify(cfg, table, conn)
    assert report.inconclusive and not report.ok and "changed while the refresh ran" in report.note
    # a row lost from the lake is a mismatch
    table.delete("id = 5")
    report = verify(cfg, table.refresh(), conn)
    assert not report.inconclusive and not report.ok and report.differing_days["2026-01-02"] == (100, 99)


def test_a_source_the_check_cannot_read_fails_with_the_reason(sfdb: Any, catalog: Any) -> None:
    from snowberg.checks.volume import VolumeSourceError, verify

    table = _count_seed(sfdb, catalog, REFRESH_PROPS)
    sfdb.sql(f"DROP TABLE {sfdb.table('SRC')}")
    with pytest.raises(VolumeSourceError, match=f"cannot read the source {sfdb.table('SRC')}"):
        verify(_refresh_cfg(sfdb), table, sfdb.conn, dialect=hd.HashDialect.EMULATOR)


def test_a_lake_row_whose_source_row_moved_below_the_compared_ranges_is_a_difference(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    """An incremental check sees the lake's version in its range; the source's (an update that moved the cursor
    back, at or below the watermark) is outside it: the key lookup tells it from a pending update."""
    table = _seed(sfdb, catalog, 2000)
    cfg = _cfg(sfdb)
    assert _run(cfg, table, sfdb, variables).report.ok
    _grow_source(sfdb, 3000, 3059)
    _window(table, list(range(3000, 3060)), WATERMARK, "2026-01-04 02:00:00.000000", "r2")
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET UPDATED_AT = '2026-01-01 05:00:00'::TIMESTAMP_NTZ WHERE ID = 3010")
    out = _run(cfg, table, sfdb, variables)
    assert out.scope.kind.value == "incremental"
    assert [(d.key, d.kind, d.source_cursor, d.lake_cursor) for d in out.report.differences] == [
        (
            {"id": "3010"},
            hd.DiffKind.CURSOR_DIFFERS,
            "2026-01-01 05:00:00.000000",
            "2026-01-03 02:10:00.000000",
        )
    ]
    assert out.report.pending == 0


def test_an_append_tables_incremental_ranges_are_one_range(sfdb: Any, catalog: Any, variables: Any) -> None:
    table = _seed(sfdb, catalog, 2000)
    cfg = _cfg(sfdb, write_mode="append")
    assert _run(cfg, table, sfdb, variables).report.ok
    _grow_source(sfdb, 3000, 3009)
    _window(table, list(range(3000, 3010)), WATERMARK, "2026-01-04 02:00:00.000000", "r2")
    table.delete("id = 5")  # another engine rewrites the first day's file: its range joins the scope
    out = _run(cfg, table, sfdb, variables)
    assert out.scope.kind.value == "incremental" and len(out.scope.ranges) == 2
    assert out.report.ranges == ["[2026-01-01 00:01:00.000000, 2026-01-04 02:00:00.000000]"]  # their hull
    assert [d.key for d in out.report.differences] == [{"id": "5"}]


def test_the_lake_is_read_one_data_file_at_a_time_and_deeper_levels_read_only_the_differing_days(
    sfdb: Any, catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bounded memory: ArrowScan is handed one planned file per call (pyiceberg's batch reader would read a thread
    pool's worth of files at once, each held whole); the bisection's levels re-plan with the differing days as
    cursor ranges, so files of other days are not opened again."""
    import pyarrow as pa
    from pyiceberg.io.pyarrow import ArrowScan

    table = _seed(sfdb, catalog, 10)
    catalog.drop_table("lake.orders")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("updated_at", pa.timestamp("us"))])
    t = catalog.create_table("lake.orders", schema=schema)
    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')}")
    for day in range(3):  # one data file per day, 300 rows each
        ids = list(range(day * 1000, day * 1000 + 300))
        sfdb.sql(
            f"INSERT INTO {sfdb.table('SRC')} SELECT {day * 1000} + seq4(), "
            f"DATEADD(minute, seq4(), '2026-01-0{day + 1}'::TIMESTAMP_NTZ) FROM TABLE(GENERATOR(ROWCOUNT => 300))"
        )
        t.append(
            pa.table(
                {
                    "id": ids,
                    "updated_at": [dt.datetime(2026, 1, 1 + day) + dt.timedelta(minutes=i) for i in range(300)],
                },
                schema=schema,
            ),
            snapshot_properties={
                "snowberg.watermark": WATERMARK,
                "snowberg.cursor-kind": "timestamp_ntz",
                "snowberg.mode": "incremental",
            },
        )
    t.delete("id = 1007")  # a row of the second day is lost
    calls: list[int] = []
    real = ArrowScan.to_record_batches

    def spy(self: Any, tasks: Any) -> Any:
        tasks = list(tasks)
        calls.append(len(tasks))
        return real(self, tasks)

    monkeypatch.setattr(ArrowScan, "to_record_batches", spy)
    report = _verify(_cfg(sfdb), t.refresh(), sfdb, leaf_rows=50)
    assert [d.key for d in report.differences] == [{"id": "1007"}]
    assert set(calls) == {1}
    # level 0 reads the 3 files; each bisection level and the leaf fetch (one Snowflake query each, after the
    # describe and level 0) read the differing day's one file
    assert len(calls) == report.lake_files_read == 3 + (report.snowflake_queries - 2)
    del table


# ---------------------------------------------------------------------------
# deletes: propagate makes progress on every check, whatever the number of hard deletes


def _propagate_until_done(
    cfg: Any, table: Any, sfdb: Any, variables: Any, deleted: set[int], *, max_checks: int
) -> list[Any]:
    """Run checks (records kept, so the second one on is incremental) until the lake holds no deleted key."""
    reports = []
    for i in range(max_checks):
        out = _run(cfg, table, sfdb, variables, run_id=f"check-{i}")
        reports.append(out.report)
        left = deleted & set(table.refresh().scan(selected_fields=("id",)).to_arrow()["id"].to_pylist())
        if not left:
            return reports
    raise AssertionError(
        f"{len(left)} hard-deleted key(s) still in the lake after {max_checks} checks: "
        + "; ".join(f"check {i}: {r.summary_line()}, note {r.note!r}" for i, r in enumerate(reports))
    )


@pytest.mark.parametrize(
    ("rows", "deleted", "where"), [(3_000, 31, "MOD(ID, 97) = 5"), (6_000, 5_000, "MOD(ID, 6) <> 0")]
)
def test_more_hard_deletes_than_max_reported_keys_are_all_propagated(
    sfdb: Any, catalog: Any, variables: Any, rows: int, deleted: int, where: str
) -> None:
    """Before, a report with more differing buckets than ``max_reported_keys`` (20) was truncated and refused
    propagation on every check: the lake kept every row, run after run. The bisection now narrows down every
    differing bucket within the query budget, so one check removes them all."""
    table = _seed(sfdb, catalog, rows, unit="second")
    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')} WHERE {where}")  # keys spread over every hash bucket
    gone = set(range(1, rows + 1)) - {r[0] for r in sfdb.sql(f"SELECT ID FROM {sfdb.table('SRC')}")}
    assert len(gone) == deleted
    cfg = _cfg(sfdb, volume={"deletes": "propagate"})
    assert cfg.volume.max_reported_keys == 20 and deleted > 20
    reports = _propagate_until_done(cfg, table, sfdb, variables, gone, max_checks=3)
    print(
        f"{deleted:,} hard deletes among {rows:,} rows: {len(reports)} check(s), Snowflake queries "
        f"{[r.snowflake_queries for r in reports]}, rows removed {[r.propagated for r in reports]}"
    )
    assert len(reports) == 1 and reports[0].ok and reports[0].propagated == deleted
    assert reports[0].snowflake_queries <= cfg.volume.max_queries
    left = sorted(table.refresh().scan(selected_fields=("id",)).to_arrow()["id"].to_pylist())
    assert left == sorted(set(range(1, rows + 1)) - gone)  # nothing else removed


def test_a_check_that_cannot_narrow_down_every_hard_delete_removes_what_it_narrowed_down(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    """A fetch budget too small for every differing bucket (5 × 2 rows here): each check removes the keys it
    narrowed down and says that more remain; the deletes are all propagated after a bounded number of checks."""
    table = _seed(sfdb, catalog, 3_000, unit="second")
    gone = set(range(100, 3_000, 96))  # 31 keys
    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')} WHERE ID IN ({', '.join(map(str, sorted(gone)))})")
    cfg = _cfg(sfdb, volume={"deletes": "propagate", "max_reported_keys": 5, "leaf_rows": 2})
    reports = _propagate_until_done(cfg, table, sfdb, variables, gone, max_checks=8)
    print(
        f"31 hard deletes, 5 × 2 rows fetched per check: {len(reports)} checks, Snowflake queries "
        f"{[r.snowflake_queries for r in reports]}, rows removed {[r.propagated for r in reports]}"
    )
    assert all(r.propagated > 0 for r in reports)  # progress on every check
    assert sum(r.propagated for r in reports) == 31
    assert all(r.truncated and "the next check" in r.note for r in reports[:-1])
    assert len(reports) <= 4  # ceil(31 keys / 10 rows fetched per check)
    left = sorted(table.refresh().scan(selected_fields=("id",)).to_arrow()["id"].to_pylist())
    assert left == sorted(set(range(1, 3_001)) - gone)


def test_an_incomplete_report_whose_examined_buckets_differ_otherwise_propagates_nothing(
    sfdb: Any, catalog: Any
) -> None:
    """Removing what was narrowed down still needs every examined difference to be a hard delete."""
    from snowberg.checks.volume import run_check

    table = _seed(sfdb, catalog, 3_000, unit="second")
    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')} WHERE ID IN ({', '.join(map(str, range(100, 3_000, 96)))})")
    table.delete("id in (" + ", ".join(map(str, range(101, 3_000, 96))) + ")")  # and rows lost from the lake
    cfg = _cfg(sfdb, volume={"deletes": "propagate", "max_reported_keys": 5, "leaf_rows": 2})
    head = table.refresh().current_snapshot().snapshot_id
    out = run_check(cfg, table.refresh(), sfdb.conn, dialect=hd.HashDialect.EMULATOR)
    assert out.report.truncated and out.report.propagated == 0 and not out.report.ok
    assert table.refresh().current_snapshot().snapshot_id == head
    assert "other difference" in out.report.propagation.reason


def test_hard_deletes_among_many_pending_updates_are_propagated_not_left_inconclusive(sfdb: Any, catalog: Any) -> None:
    """An incomplete report whose examined differences are pending updates *and* hard deletes is not
    inconclusive (not every examined difference is pending): the deletes it narrowed down are removed."""
    from snowberg.checks.volume import run_check

    table = _seed(sfdb, catalog, 1000)
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET UPDATED_AT = '2026-02-01'::TIMESTAMP_NTZ WHERE ID <= 200")
    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')} WHERE ID > 200 AND MOD(ID, 10) = 0")  # 80 keys
    cfg = _cfg(sfdb, volume={"deletes": "propagate", "max_reported_keys": 5, "leaf_rows": 10})
    out = run_check(cfg, table.refresh(), sfdb.conn, dialect=hd.HashDialect.EMULATOR)
    assert out.report.truncated and out.report.pending > 0 and not out.report.inconclusive
    assert out.report.propagated > 0 and "the next check removes more" in out.report.advice
