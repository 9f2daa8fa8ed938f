"""Parse time of the DAG file at 1,000 tables: what each task process pays, and the dag-processor.

The benchmark is ``bench/parse_time.py`` (figures in docs/performance.md).
Every measurement is a fresh interpreter that has imported Airflow, as both a
task process and the dag-processor have, parsing ``dags/snowberg_tables.py``
with a generated config (table and query sources, partitions, keys,
lookbacks, SLAs, maintenance). Seconds on a shared 2-core machine measure the
neighbours as much as the code (this test failed under load when it asserted
wall seconds), so the tests assert ratios of CPU time
(``time.process_time``) between two measurements taken side by side, which
load slows alike:

(a) a task's parse (Airflow's parsing context set to one table's DAG) with
    1,000 tables against the same with 1 table, median of three back-to-back
    pairs: within 1.5x.
    The old code built every table's DAGs in every task: ~29x.
(b) the dag-processor's full parse of 1,000 tables (3,000 DAGs) against a
    yardstick of plain Airflow DAGs in the same process: within
    ``FULL_PARSE_RATIO``, median of three (main measured above it).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TABLES = 1000
TASK_RATIO = 1.5


def bench() -> Any:
    sys.path.insert(0, str(REPO))
    try:
        import bench.parse_time as module
    finally:
        sys.path.remove(str(REPO))
    return module


@pytest.mark.slow
@pytest.mark.timeout(1800)  # eight fresh interpreters that import Airflow: minutes on a loaded machine
def test_a_tasks_parse_with_1000_tables_costs_what_it_costs_with_1(tmp_path: Path) -> None:
    b = bench()
    b.parse_once(TABLES, workdir=tmp_path, dag_id="snowberg_t0000")  # warm bytecode
    ratios = []
    for _ in range(3):
        one = b.parse_once(1, workdir=tmp_path, dag_id="snowberg_t0000")
        many = b.parse_once(TABLES, workdir=tmp_path, dag_id="snowberg_t0000")
        for r in (one, many):
            assert r["errors"] == {} and r["heavy"] == []
            # Only the task's table: its load, checks and maintenance DAGs.
            assert r["ids"] == ["snowberg_t0000", "snowberg_t0000__checks", "snowberg_t0000__maintenance"]
        ratios.append(many["cpu_s"] / one["cpu_s"])
        print(f"task parse CPU s: 1 table {one['cpu_s']:.3f}, {TABLES} tables {many['cpu_s']:.3f}")
    print(f"ratios {[round(r, 2) for r in ratios]}")
    assert statistics.median(ratios) <= TASK_RATIO


# The full parse's CPU time against a yardstick of plain Airflow DAGs in the same process (200 scheduled DAGs,
# six trigger-form Params and two tasks each). Measured (docs/performance.md): 24.5 and 26.3 before the parse
# work; 16.7, 16.9 and 18.2 with the parsing context, libyaml and draft-7 Params; 11.4 and 12.7 once the trigger
# forms were attached after the tasks; 9.1 and 9.9 since each distinct Param default and each table's settings
# are validated once. With this round's per-table settings (columns, policies, pool, the plan's inline load and
# its Asset alias): 10.1, 11.2 and 13.9 on a quiet machine (median 11.2), 14.7 once beside the suite's other
# worker; the yardstick alone moved 0.62–1.15 s, hence the median of three. The bound still fails the code before
# the trigger-form change (16.7–18.2 quiet) and leaves room for a loaded CI.
FULL_PARSE_RATIO = 14.0


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_full_parse_of_1000_tables_stays_within_its_bound_against_a_yardstick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bound is the CPU ratio; Airflow's import timeout counts wall seconds, which a loaded machine stretches.
    monkeypatch.setenv("AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT", "1700")
    b = bench()
    b.parse_once(1, workdir=tmp_path, timeout=1700)  # compile the bytecode first: a fresh clone has none
    # The median of three: the yardstick is under a second of CPU, and one measurement on a loaded machine
    # (the suite's other worker beside it) was seen at 0.62 s where a quiet one reads 0.95 s.
    ratios = []
    for _ in range(3):
        r = b.parse_once(TABLES, workdir=tmp_path, reference=True, timeout=1700)
        print(f"full parse: {r['parse_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, yardstick {r['reference_cpu_s']:.2f} s")
        assert r["errors"] == {} and r["heavy"] == []
        assert r["dags"] == 3 * TABLES  # each table's load, checks and maintenance DAG
        ratios.append(r["cpu_s"] / r["reference_cpu_s"])
    print(f"ratios {[round(x, 2) for x in ratios]}")
    assert statistics.median(ratios) <= FULL_PARSE_RATIO
