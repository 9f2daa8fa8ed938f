"""The UI page's data: each table's run history, read from its snapshot metadata."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest


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
    assert check_outcome("failed", {"ok": False}) == (CheckOutcome.FAILED, "failed: see the task log")
    assert check_outcome("failed", {"ok": False, "error": "no access"}) == (CheckOutcome.FAILED, "no access")
    assert check_outcome("running", None) == (CheckOutcome.NOT_FINISHED, None)


def test_the_page_judges_freshness_as_the_tables_check_does_from_the_last_proof_of_currency(
    catalog_env: Any, airflow_db: str
) -> None:
    """A quiet source: the last data is older than the SLA, a later idle run proved the lake current.

    The table's check (``freshness_measure: proven_current``, the default) passes; the page must not say STALE.
    """
    from datetime import UTC, datetime, timedelta

    from snowberg.airflow.ui_data import table_status
    from snowberg.config.table_config import TableConfig
    from snowberg.iceberg.catalogs import open_catalog
    from snowberg.iceberg.current import CurrentProof, record_proof
    from snowberg.iceberg.state import MetadataDbVariables, read_state

    catalog_env("uicat")
    cfg = TableConfig(
        name="quiet_page",
        source={"table": "DB.S.SRC"},
        target="ui.quiet",
        cursor={"column": "updated_at"},
        catalog="uicat",
        freshness_sla="2s",
    )
    cat = open_catalog("uicat")
    cat.create_namespace("ui")
    t = cat.create_table(("ui", "quiet"), schema=pa.schema([pa.field("id", pa.int64())]))
    _commit(t, 3, "2026-01-01 00:00:00", "r1")
    st = read_state(cat.load_table(("ui", "quiet")))
    assert st is not None
    # Judged at fixed instants after the commit (no sleep, no race with a loaded machine): the last data
    # is 4 s old, over the SLA of 2 s; an idle run proved the lake current 1 s before.
    written = datetime.fromtimestamp(st.timestamp_ms / 1000, tz=UTC)
    now = written + timedelta(seconds=4)
    proof = CurrentProof(
        proven_at=(written + timedelta(seconds=3)).isoformat(),
        run_id="idle-1",
        dag_id=cfg.dag_id,
        watermark=st.watermark,
        snapshot_id=st.snapshot_id,
    )
    record_proof(cfg.target, proof, MetadataDbVariables())
    status = table_status(cfg, session=None, now=now)
    assert status.fresh is True, status.freshness_reasons
    # The age shown is the one judged: since the proof (the check's figures are hours to 4 decimals: ±0.36 s).
    assert status.freshness_age_seconds == pytest.approx(1.0, abs=0.5)
    # With "time since last data" chosen, the same table is stale on the page too, 4 s old.
    last_data = table_status(cfg.model_copy(update={"freshness_measure": "last_data"}), session=None, now=now)
    assert last_data.fresh is False and last_data.freshness_age_seconds == pytest.approx(4.0, abs=0.5)
    # Past the proof's SLA it is stale on the proof's measure too.
    late = table_status(cfg, session=None, now=written + timedelta(seconds=5.5))
    assert late.fresh is False and late.freshness_age_seconds == pytest.approx(2.5, abs=0.5)


def test_the_page_shows_the_policies_a_load_allowed(catalog_env: Any, airflow_db: str) -> None:
    """``on_policy: allow``: the commit's snapshot summary names the policies, and the page's data carries them."""
    from snowberg.airflow.ui_data import table_status
    from snowberg.config.table_config import TableConfig
    from snowberg.iceberg import state
    from snowberg.iceberg.catalogs import open_catalog

    catalog_env("uipol")
    cfg = TableConfig(
        name="masked_page", source={"table": "DB.S.SRC"}, target="ui.masked", catalog="uipol", on_policy="allow"
    )
    cat = open_catalog("uipol")
    cat.create_namespace("ui")
    t = cat.create_table(("ui", "masked"), schema=pa.schema([pa.field("id", pa.int64())]))
    _commit(t, 1, "2026-01-01 00:00:00", "r1")
    assert table_status(cfg, session=None).policies_allowed is None
    allowed = "MASKING_POLICY GOV.P.EMAIL_MASK on EMAIL (role LOADER)"
    t.append(
        pa.table({"id": pa.array([2], pa.int64())}),
        snapshot_properties={
            state.WATERMARK: "2026-01-02 00:00:00",
            state.CURSOR_KIND: "timestamp_ntz",
            state.RUN_ID: "r2",
            state.MODE: "incremental",
            state.ROWS: "1",
            state.POLICIES_ALLOWED: allowed,
        },  # fmt: skip
    )
    assert table_status(cfg, session=None).policies_allowed == allowed
