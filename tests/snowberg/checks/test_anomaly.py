"""Volume anomalies from snapshot summaries: median ± k·MAD over the table's own runs."""

from __future__ import annotations

from typing import Any

from snowberg.checks.anomaly import RunVolume, evaluate, run_history


def _runs(rows: list[int]) -> list[RunVolume]:
    return [
        RunVolume(snapshot_id=i, run_id=f"r{i}", rows=n, rows_planned=None, rows_extracted=None)
        for i, n in enumerate(rows)
    ]


def test_a_run_inside_the_usual_range_is_normal() -> None:
    a = evaluate(_runs([1010, 1000, 990, 1005, 995, 1020, 980]), k=5, min_history=5)
    assert not a.anomalous and a.median == 997.5


def test_ten_times_the_usual_rows_is_an_anomaly() -> None:
    a = evaluate(_runs([10_000, 1000, 990, 1005, 995, 1020, 980]), k=5, min_history=5)
    assert a.anomalous and "10,000 rows" in a.reason


def test_zero_rows_where_the_table_usually_loads_many_is_an_anomaly() -> None:
    a = evaluate(_runs([0, 1000, 990, 1005, 995, 1020]), k=50, min_history=5)
    assert a.anomalous and "0 rows" in a.reason


def test_too_little_history_is_never_anomalous() -> None:
    a = evaluate(_runs([0, 1000, 1000]), k=5, min_history=5)
    assert not a.anomalous and "5 needed" in a.reason


def test_history_reads_incremental_commits_only(catalog: Any, lake: Any) -> None:
    t = catalog.create_table("lake.hist", schema=lake.schema())
    for i, n in enumerate([5, 7, 9]):
        t.append(
            lake.batch(list(range(n))),
            snapshot_properties=dict(lake.props, **{"snowberg.rows": str(n), "snowberg.run-id": f"r{i}"}),
        )
    t.append(
        lake.batch([1]),
        snapshot_properties=dict(
            lake.props, **{"snowberg.rows": "1", "snowberg.mode": "backfill", "snowberg.run-id": "backfill1"}
        ),
    )
    t.append(lake.batch([2]))  # another writer: no snowberg properties
    assert [r.rows for r in run_history(t, 10)] == [9, 7, 5]


def test_a_run_committed_as_two_snapshots_counts_once(catalog: Any, lake: Any) -> None:
    """A merge-on-read run stages a delete snapshot and an append snapshot, both carrying the run's state."""
    t = catalog.create_table("lake.mor", schema=lake.schema())
    for i, n in enumerate([5, 7]):
        props = dict(lake.props, **{"snowberg.rows": str(n), "snowberg.run-id": f"r{i}"})
        t.append(lake.batch(list(range(n))), snapshot_properties=props)  # stands for the run's delete snapshot
        t.append(lake.batch(list(range(n))), snapshot_properties=props)  # and its append
    assert [(r.run_id, r.rows) for r in run_history(t, 10)] == [("r1", 7), ("r0", 5)]


def test_a_compaction_that_carries_the_state_is_not_a_run(catalog: Any, lake: Any) -> None:
    t = catalog.create_table("lake.compacted", schema=lake.schema())
    for i, n in enumerate([5, 7]):
        props = dict(lake.props, **{"snowberg.rows": str(n), "snowberg.run-id": f"r{i}"})
        t.append(lake.batch(list(range(n))), snapshot_properties=props)
    carried = dict(lake.props, **{"snowberg.rows": "0", "snowberg.run-id": "r1", "snowberg.maintenance": "compact"})
    t.append(lake.batch([1]), snapshot_properties=carried)
    assert [(r.run_id, r.rows) for r in run_history(t, 10)] == [("r1", 7), ("r0", 5)]
