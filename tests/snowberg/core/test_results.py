"""What a write run hands back: four named outcomes and a keyword-built result that survives XCom."""

from __future__ import annotations

import json

import pytest

from snowberg.core.results import LoadResult, Status


def test_the_outcomes_are_one_closed_set_equal_to_their_text() -> None:
    assert [str(s) for s in Status] == ["committed", "already_committed", "nothing_new", "dry_run"]
    assert Status("nothing_new") is Status.NOTHING_NEW and Status.COMMITTED == "committed"
    with pytest.raises(ValueError, match="'comitted' is not a valid Status"):
        Status("comitted")


def test_a_result_is_built_by_keyword_only() -> None:
    with pytest.raises(TypeError):
        LoadResult(Status.COMMITTED, 10)  # type: ignore[misc]


def test_a_result_becomes_plain_json_with_the_status_as_text() -> None:
    r = LoadResult(
        status=Status.COMMITTED,
        rows=10,
        bytes=2048,
        data_files=1,
        snapshot_id=42,
        watermark="2026-01-01 00:00:00.000000",
        seconds=1.5,
        window={"low": None, "high": "2026-01-01"},
        rows_planned=10,
        rows_extracted=10,
    )
    d = r.to_dict()
    assert type(d["status"]) is str and d["status"] == "committed"
    assert json.loads(json.dumps(d)) == {
        "status": "committed",
        "rows": 10,
        "bytes": 2048,
        "data_files": 1,
        "snapshot_id": 42,
        "watermark": "2026-01-01 00:00:00.000000",
        "seconds": 1.5,
        "window": {"low": None, "high": "2026-01-01"},
        "rows_planned": 10,
        "rows_extracted": 10,
    }


def test_a_run_that_wrote_nothing_reports_zeros_and_no_snapshot() -> None:
    d = LoadResult(status=Status.NOTHING_NEW).to_dict()
    assert d["status"] == "nothing_new" and d["rows"] == d["bytes"] == d["data_files"] == 0
    assert d["snapshot_id"] is None and d["window"] == {} and d["rows_planned"] is None


def test_each_result_gets_its_own_window() -> None:
    a, b = LoadResult(status=Status.DRY_RUN), LoadResult(status=Status.DRY_RUN)
    a.window["low"] = "x"
    assert b.window == {}
