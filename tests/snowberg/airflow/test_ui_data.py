"""The UI page's data: each table's run history, read from its snapshot metadata."""

from __future__ import annotations

from typing import Any

import pyarrow as pa


def _commit(table: Any, rows: int, watermark: str, run_id: str) -> None:
    from snowberg.iceberg import state

    table.append(
        pa.table({"id": pa.array(range(rows), pa.int64())}),
        snapshot_properties={
            state.WATERMARK: watermark,
            state.CURSOR_KIND: "timestamp_ntz",
            state.RUN_ID: run_id,
            state.MODE: "incremental",
            state.ROWS: str(rows),
        },
    )


def test_history_lists_snowberg_commits_oldest_first_with_rows_and_lag(catalog: Any) -> None:
    from snowberg.airflow.ui_data import history

    catalog.create_namespace("n")
    t = catalog.create_table(("n", "t"), schema=pa.schema([pa.field("id", pa.int64())]))
    _commit(t, 3, "2026-01-01 00:00:00", "r1")
    t.append(pa.table({"id": pa.array([9], pa.int64())}))  # another writer: no snowberg state
    _commit(t, 5, "2026-01-02 00:00:00", "r2")
    points = history(catalog.load_table(("n", "t")))
    assert [(p.run_id, p.rows) for p in points] == [("r1", 3), ("r2", 5)]
    snaps = [s for s in t.snapshots() if (s.summary.additional_properties or {}).get("snowberg.run-id")]
    expected = snaps[0].timestamp_ms / 1000 - 1767225600  # 2026-01-01T00:00:00Z
    assert points[0].watermark_age_seconds == round(expected, 1)
    assert len(history(catalog.load_table(("n", "t")), limit=1)) == 1


def test_a_check_outcome_comes_from_the_result_as_well_as_the_task_state() -> None:
    """A skip is no pass: a check that could not compare says why; an inconclusive one too."""
    from snowberg.airflow.ui_data import CheckOutcome, check_outcome

    assert check_outcome("skipped", {"status": "not_run", "reason": "no table"}) == (CheckOutcome.NOT_RUN, "no table")
    assert check_outcome("skipped", {"ok": False, "inconclusive": True, "note": "source changed"}) == (
        CheckOutcome.NOT_RUN,
        "inconclusive: source changed",
    )
    assert check_outcome("skipped", None) == (CheckOutcome.NOT_RUN, "task skipped")
    assert check_outcome("success", {"ok": True}) == (CheckOutcome.PASSED, None)
    assert check_outcome("failed", {"ok": False}) == (CheckOutcome.FAILED, None)
    assert check_outcome("running", None) == (CheckOutcome.NOT_FINISHED, None)
