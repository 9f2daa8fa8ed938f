"""The load-side guards against racing runs, with the interleavings forced step by step.

Real Snowflake emulator and a real SQLite-catalog Iceberg lake, snowberg's own
plan/load functions, no Airflow: each test fixes one order of plan and commit
that a real scheduler may produce (see ``test_api_race.py`` for the Airflow
side) and checks what the table holds afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_data import DATABASE, SCHEMA, create_source, day, ntz, query, source_ids, table_entry

from snowberg.config.table_config import TableConfig
from snowberg.core import faults
from snowberg.core.window import Mode
from snowberg.iceberg import state
from snowberg.iceberg.tables import load_table_or_none
from snowberg.load.extract import load_window
from snowberg.load.plan import plan_run
from snowberg.local.stack import FakesnowServer
from snowberg.snowflake.session import session_parameters

pytestmark = pytest.mark.slow


@pytest.fixture
def guard(
    fakesnow_server: FakesnowServer, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[TableConfig, Any, Any]]:
    import snowflake.connector
    from pyiceberg.catalog.sql import SqlCatalog

    name = f"guard_{request.node.name.split('_', 1)[1][:40]}".lower()
    source = name.upper()
    cfg = TableConfig.model_validate(table_entry(name, schedule="@daily", source_table=source))
    kwargs = dict(fakesnow_server.connect_kwargs())
    kwargs["session_parameters"] = session_parameters(cfg, kwargs.get("session_parameters"))  # type: ignore[arg-type]
    conn = snowflake.connector.connect(**kwargs, arrow_number_to_decimal=True)
    create_source(conn, source, rows=200)
    (tmp_path / "warehouse").mkdir()
    catalog = SqlCatalog(
        "lake", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{tmp_path / 'warehouse'}"
    )
    catalog.create_namespace("e2e")
    yield cfg, conn, catalog
    conn.close()


def _plan(
    cfg: TableConfig,
    conn: Any,
    catalog: Any,
    run_id: str,
    mode: str = Mode.INCREMENTAL,
    start: Any = None,
    end: Any = None,
) -> Any:
    table = load_table_or_none(catalog, cfg)
    return plan_run(
        cfg,
        conn,
        table,
        run_id=run_id,
        mode=mode,
        start=start.isoformat() if start else None,
        end=end.isoformat() if end else None,
    )


def _ids(catalog: Any, cfg: TableConfig) -> list[int]:
    t = load_table_or_none(catalog, cfg)
    return [] if t is None else [int(x) for x in t.scan().to_arrow().column("order_id").to_pylist()]


def test_backfill_planned_before_an_incremental_commit_keeps_the_new_watermark(
    guard: tuple[TableConfig, Any, Any],
) -> None:
    cfg, conn, catalog = guard
    first = _plan(cfg, conn, catalog, "scheduled__1")
    assert load_window(cfg, conn, catalog, first).status == "committed"
    query(
        conn,
        f"INSERT INTO {cfg.source.table} SELECT 9001, 1, 'new', TRUE, CURRENT_DATE(), '{ntz(day(10))}'::TIMESTAMP_NTZ",
    )
    incremental = _plan(cfg, conn, catalog, "scheduled__2")
    backfill = _plan(cfg, conn, catalog, "backfill__1", Mode.BACKFILL, day(2), day(3))
    assert backfill.base_watermark == first.new_watermark

    assert load_window(cfg, conn, catalog, incremental).status == "committed"
    wm = state.read_state(load_table_or_none(catalog, cfg)).watermark  # type: ignore[union-attr]
    assert wm == incremental.new_watermark != first.new_watermark

    # The backfill was planned on the old state; it must neither fail nor move the watermark back.
    result = load_window(cfg, conn, catalog, backfill)
    assert result.status == "committed" and result.watermark == wm
    assert state.read_state(load_table_or_none(catalog, cfg)).watermark == wm  # type: ignore[union-attr]
    ids = _ids(catalog, cfg)
    assert len(ids) == len(set(ids)) and set(ids) == source_ids(conn, cfg.source.table.rsplit(".", 1)[1])  # type: ignore[union-attr]


def test_two_incremental_runs_never_both_commit_one_window(guard: tuple[TableConfig, Any, Any]) -> None:
    cfg, conn, catalog = guard
    first = _plan(cfg, conn, catalog, "manual__1")
    second = _plan(cfg, conn, catalog, "manual__2")
    assert load_window(cfg, conn, catalog, first).status == "committed"
    snapshots = len(load_table_or_none(catalog, cfg).snapshots())  # type: ignore[union-attr]
    with pytest.raises(state.ConcurrentCommitError, match="watermark moved"):
        load_window(cfg, conn, catalog, second)
    table = load_table_or_none(catalog, cfg)
    assert table is not None and len(table.snapshots()) == snapshots
    ids = _ids(catalog, cfg)
    assert len(ids) == len(set(ids))


def test_a_commit_landing_between_read_and_commit_fails_without_retry(
    guard: tuple[TableConfig, Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg, conn, catalog = guard
    from pyiceberg.exceptions import CommitFailedException

    assert load_window(cfg, conn, catalog, _plan(cfg, conn, catalog, "scheduled__1")).status == "committed"
    table = load_table_or_none(catalog, cfg)
    assert table is not None and table.properties["commit.retry.num-retries"] == "0"
    outer = _plan(cfg, conn, catalog, "backfill__a", Mode.BACKFILL, day(1), day(2))
    inner = _plan(cfg, conn, catalog, "backfill__b", Mode.BACKFILL, day(4), day(5))

    real = faults.crash_point
    fired: list[str] = []

    def interleave(point: str) -> None:
        # Another run commits after the outer load read the table and wrote its files.
        if point == "before_commit" and not fired:
            fired.append(point)
            assert load_window(cfg, conn, catalog, inner).status == "committed"
        real(point)

    monkeypatch.setattr(faults, "crash_point", interleave)
    with pytest.raises(CommitFailedException):
        load_window(cfg, conn, catalog, outer)
    monkeypatch.setattr(faults, "crash_point", real)
    runs = [s.summary.additional_properties.get(state.RUN_ID) for s in load_table_or_none(catalog, cfg).snapshots()]  # type: ignore[union-attr]
    assert "backfill__b" in runs and "backfill__a" not in runs

    # Airflow's retry of the load (same plan) then commits on top of the new state.
    assert load_window(cfg, conn, catalog, outer).status == "committed"
    ids = _ids(catalog, cfg)
    src = cfg.source.table.rsplit(".", 1)[1]  # type: ignore[union-attr]
    assert len(ids) == len(set(ids)) and set(ids) == source_ids(conn, src)
    assert f"{DATABASE}.{SCHEMA}." in (cfg.source.table or "")


@pytest.mark.parametrize(
    ("extra", "committer"), [({}, "load"), ({"scale_out": True}, "commit")], ids=["load", "sliced-commit"]
)
def test_the_committing_task_runs_one_at_a_time_across_all_runs(extra: dict[str, Any], committer: str) -> None:
    """What keeps a backfill's load away from the scheduled run's load, as the scheduler reads it."""
    from airflow.serialization.serialized_objects import DagSerialization

    from snowberg.airflow.dag_factory import build_dag

    cfg = TableConfig.model_validate(table_entry("guard_dag", schedule="@daily", source_table="GUARD_DAG", **extra))
    dag = build_dag(cfg)
    scheduler_view = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert scheduler_view.get_task(committer).max_active_tis_per_dag == 1
    assert scheduler_view.max_active_runs == 1
    # Backfills need real data intervals: the run's interval is its window.
    assert type(scheduler_view.timetable).__name__ == "CronDataIntervalTimetable"
