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
    assert snap.parent_snapshot_id == head
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
