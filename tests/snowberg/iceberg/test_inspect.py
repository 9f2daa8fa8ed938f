"""Reading the past of a real SQLite-catalog table: metadata rows, JSON-safe values, as-of reads and their refusals."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from maint_harness import small_table

from snowberg.iceberg.inspect import (
    TERMINAL_COLUMNS,
    InspectError,
    MetadataTable,
    json_safe,
    metadata_rows,
    parse_time,
    read,
    render_metadata,
    render_rows,
    snapshot_for,
    to_json,
)


def test_snapshot_rows_come_oldest_first_with_snowbergs_state_lifted_out(catalog: Any) -> None:
    t = small_table(catalog, 3)
    rows = metadata_rows(t, "snapshots")
    assert [r["run_id"] for r in rows] == ["run1", "run2", "run3"]
    assert [r["watermark"] for r in rows] == ["1", "2", "3"] and [r["rows"] for r in rows] == ["10"] * 3
    assert isinstance(rows[0]["summary"], dict) and rows[0]["summary"]["snowberg.run-id"] == "run1"
    assert [r["snapshot_id"] for r in rows] == [s.snapshot_id for s in t.snapshots()]


def test_history_rows_come_in_the_order_they_became_current(catalog: Any) -> None:
    t = small_table(catalog, 3)
    rows = metadata_rows(t, MetadataTable.HISTORY)
    assert [r["snapshot_id"] for r in rows] == [s.snapshot_id for s in t.snapshots()]
    assert all(r["is_current_ancestor"] for r in rows)


def test_an_unknown_metadata_table_is_refused() -> None:
    with pytest.raises(ValueError, match="'snapshot' is not a valid MetadataTable"):
        metadata_rows(None, "snapshot")  # type: ignore[arg-type]


@pytest.mark.parametrize("which", list(MetadataTable))
def test_every_metadata_table_renders_its_terminal_columns_and_dumps_as_json(
    catalog: Any, which: MetadataTable
) -> None:
    t = small_table(catalog, 2, partitioned=True)
    if which is MetadataTable.STAGING:  # a run staged for a later commit (tests/snowberg/iceberg/test_staging.py)
        from snowberg.iceberg import staging

        record = staging.RunRecord(
            run_id="r",
            dag_id="d",
            mode="incremental",
            identity={},
            base_watermark="2",
            base_run_id=None,
            watermarked=True,
        )
        staging.write_run_record(t, record)
    rows = metadata_rows(t, which)
    assert rows
    text = render_metadata(rows, which)
    assert text.splitlines()[0].split() == TERMINAL_COLUMNS[which]
    assert len(text.splitlines()) == len(rows) + 2
    assert json.loads(to_json(rows))[0].keys() == rows[0].keys()


def test_json_safe_turns_every_iceberg_value_into_json() -> None:
    value = {
        1: [datetime(2026, 1, 2, 3, 4, 5), datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)],
        "d": (date(2026, 1, 2),),
        "n": Decimal("1.10"),
        "b": b"\x00\xff",
        "x": None,
    }
    # An Iceberg ``timestamp`` (no zone) is a wall-clock time: labelling it +00:00 would invent a zone.
    assert json_safe(value) == {
        "1": ["2026-01-02T03:04:05", "2026-01-02T03:04:05+00:00"],
        "d": ["2026-01-02"],
        "n": "1.10",
        "b": "AP8=",
        "x": None,
    }


def test_rendered_rows_are_aligned_and_long_values_keep_their_end() -> None:
    rows = [{"path": "s3://bucket/" + "x" * 100 + "/file-1.parquet", "n": 1, "s": None}, {"path": "short", "n": 22}]
    lines = render_rows(rows).splitlines()
    assert lines[0].split() == ["path", "n", "s"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].split()[0].startswith("…") and lines[2].split()[0].endswith("/file-1.parquet")
    assert len(lines[2].split()[0]) == 60
    assert lines[2].split()[1:] == ["1", "-"] and lines[3].split() == ["short", "22", "-"]
    col = lines[0].index(" n ") + 1  # every row's values start under their header
    assert lines[2][col] == "1" and lines[3][col : col + 2] == "22"
    assert render_rows([]) == "(no rows)"
    assert render_rows([{"a": 1, "b": 2}], ["b"]).splitlines()[0] == "b"


def test_rendered_times_keep_their_fractional_seconds_and_their_zone_or_its_absence() -> None:
    """``snowberg read`` shows what the table holds; before the fix it cut ``04:05:06.123456`` to ``04:05:06``."""
    rows = [
        {
            "ntz": datetime(2026, 1, 2, 3, 4, 5, 123456),
            "tz": datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC),
            "whole": datetime(2026, 1, 2, 3, 4, 5),
        }
    ]
    cells = render_rows(rows).splitlines()[2].split("  ")
    assert [c.strip() for c in cells if c.strip()] == [
        "2026-01-02 03:04:05.123456",
        "2026-01-02 03:04:05.120000+00:00",
        "2026-01-02 03:04:05",
    ]


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1764590400000", 1764590400000),
        ("2025-12-01T12:00:00Z", 1764590400000),
        ("2025-12-01T12:00:00", 1764590400000),
        ("2025-12-01T13:00:00+01:00", 1764590400000),
    ],
)
def test_a_time_is_iso_or_epoch_milliseconds_and_naive_means_utc(text: str, ms: int) -> None:
    assert parse_time(text) == ms


def test_an_unparsable_time_is_refused_saying_what_works() -> None:
    with pytest.raises(InspectError, match=r"--as-of-time 'yesterday': use ISO 8601 .* or epoch ms"):
        parse_time("yesterday")


def test_snapshot_for_resolves_an_id_a_time_or_the_head(catalog: Any) -> None:
    t = small_table(catalog, 1)
    time.sleep(0.01)
    t.append(t.scan().to_arrow().slice(0, 1))
    t = catalog.load_table("ns.t")
    first, second = list(t.snapshots())
    assert snapshot_for(t) is None
    assert snapshot_for(t, snapshot_id=first.snapshot_id) == first.snapshot_id
    at_first = datetime.fromtimestamp(first.timestamp_ms / 1000, tz=UTC).isoformat()
    assert snapshot_for(t, as_of_time=at_first) == first.snapshot_id
    assert snapshot_for(t, as_of_time=str(second.timestamp_ms)) == second.snapshot_id


def test_snapshot_for_refuses_a_missing_snapshot_a_time_before_the_table_and_both_at_once(catalog: Any) -> None:
    t = small_table(catalog, 1)
    with pytest.raises(InspectError, match="snapshot 123 is not in the table"):
        snapshot_for(t, snapshot_id=123)
    with pytest.raises(InspectError, match="no snapshot at or before 2000-01-01"):
        snapshot_for(t, as_of_time="2000-01-01")
    with pytest.raises(InspectError, match="not both"):
        snapshot_for(t, snapshot_id=t.current_snapshot().snapshot_id, as_of_time="2000-01-01")


def test_read_as_of_an_older_snapshot_with_a_filter_and_a_limit(catalog: Any) -> None:
    t = small_table(catalog, 2)
    first = list(t.snapshots())[0]
    assert sorted(read(t).column("id").to_pylist()) == list(range(20))
    assert sorted(read(t, snapshot_id=first.snapshot_id).column("id").to_pylist()) == list(range(10))
    got = read(t, snapshot_id=first.snapshot_id, where="id >= 5 and note != 'row 7'")
    assert sorted(got.column("id").to_pylist()) == [5, 6, 8, 9]
    assert read(t, limit=3).num_rows == 3


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"where": "id >>> 3"}, "--where 'id >>> 3' is not a filter expression"),
        ({"where": "colour = 'red'"}, "--where \"colour = 'red'\""),
        ({"limit": -1}, "--limit must be positive"),
    ],
)
def test_read_refuses_bad_arguments_before_reading(catalog: Any, kw: dict[str, Any], words: str) -> None:
    t = small_table(catalog, 1)
    with pytest.raises(InspectError, match=re.escape(words)):
        read(t, **kw)


def _corrupt_data_files(table: Any) -> None:
    from pathlib import Path

    for row in table.inspect.files().to_pylist():
        Path(row["file_path"].removeprefix("file://")).write_bytes(b"not a parquet file")


def test_a_scan_that_fails_without_a_filter_says_which_table_failed_and_invents_no_where_clause(catalog: Any) -> None:
    t = small_table(catalog, 1)
    _corrupt_data_files(t)
    with pytest.raises(InspectError, match=r"^reading ns\.t failed: .*Parquet magic bytes not found") as raised:
        read(t)
    assert "--where" not in str(raised.value)


def test_a_scan_that_fails_with_a_valid_filter_blames_the_read_not_the_filter(catalog: Any) -> None:
    t = small_table(catalog, 1)
    sid = t.current_snapshot().snapshot_id
    _corrupt_data_files(t)
    with pytest.raises(InspectError, match=rf"^reading ns\.t at snapshot {sid} failed: .*Parquet magic") as raised:
        read(t, snapshot_id=sid, where="id >= 5")
    assert "--where" not in str(raised.value)


@pytest.mark.parametrize("text", ["²", "١٢٣", "１２３"])
def test_a_time_of_digits_that_are_not_ascii_is_refused_as_bad_input(text: str) -> None:
    with pytest.raises(InspectError, match="--as-of-time"):
        parse_time(text)


def test_snapshot_rows_name_the_last_snapshot_of_a_commit_for_its_earlier_ones(catalog: Any) -> None:
    from pyiceberg.expressions import In

    from snowberg.iceberg import gate, state

    t = small_table(catalog, 1)
    gate.commit(
        t,
        t.transaction(),
        state_props=state.current_state_props(t),
        summary={state.RUN_ID: "r2", state.MODE: "propagate"},
        replaced=gate.Replacement(rows=In("id", {1})),
        crash_points=None,
        dag_id="d",
    )
    rows = metadata_rows(catalog.load_table("ns.t"), "snapshots")
    last = rows[-1]["snapshot_id"]
    assert [r["partial_of"] for r in rows] == [None] + [last] * (len(rows) - 2) + [None]
    assert rows[-1]["dag_id"] == "d" and "partial_of" in render_metadata(rows, "snapshots").splitlines()[0]
