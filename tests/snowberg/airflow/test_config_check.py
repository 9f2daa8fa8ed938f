"""What validate asks Airflow: schedules it refuses, DAGs that would not build, and the DAG ids they get."""

from __future__ import annotations

from pathlib import Path

from snowberg.airflow.config_check import entry_problems
from snowberg.airflow.dag_factory import build_dags
from snowberg.airflow.sync_dags import build_sync_dags
from snowberg.config.table_config import parse_config
from snowberg.config.validate import table_dag_ids, validate_files
from snowberg.sync.config import parse_syncs
from snowberg.sync.specs import SPECS, SYNCS

TABLES = """\
tables:
  - {name: plain, source: {table: D.S.A}, target: n.a, cursor: {column: u}}
  - {name: no_maint, source: {table: D.S.B}, target: n.b, maintenance: {enabled: false}}
  - name: unloaded
    source: {table: D.S.C}
    target: n.c
    cursor: {column: u}
    unload: {stage: D.S.STAGE, stage_url: "s3://b/p"}
  - name: streamed
    source: {table: D.S.D}
    target: n.d
    primary_key: [id]
    unload: {stage: D.S.STAGE, stage_url: "s3://b/p"}
    stream: {name: D.S.D_STREAM}
"""


def test_validate_predicts_exactly_the_dag_ids_the_factories_build(tmp_path: Path) -> None:
    tables = tmp_path / "tables.yaml"
    tables.write_text(TABLES)
    syncs = Path(__file__).resolve().parents[3] / "include" / "syncs.yaml"
    report = validate_files([tables, syncs], specs=SPECS, entry_check=entry_problems)
    assert report.ok, report.render()
    predicted = {d for f in report.files for _, e in f.entries for d in (f.spec.dag_ids(e) if f.spec else [])}
    built = set(build_dags(tables)) | set(build_sync_dags(syncs))
    assert predicted == built
    assert {"snowberg_unloaded__unload", "snowberg_plain__maintenance"} <= built
    assert "snowberg_streamed__unload" not in built and "snowberg_no_maint__maintenance" not in built


def test_a_schedule_airflow_refuses_is_named_by_field() -> None:
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "a",
                    "source": {"table": "D.S.T"},
                    "target": "n.a",
                    "schedule": "every hour",
                    "checks_schedule": "*/5 * * * *",
                    "maintenance": {"schedule": "61 * * * *"},
                }
            ]
        }
    ).tables[0]
    problems = entry_problems(cfg)
    assert [f for f, _ in problems] == ["schedule", "maintenance.schedule"]
    assert problems[0][1].startswith("Airflow refuses the schedule 'every hour': ")
    off = cfg.model_copy(update={"maintenance": cfg.maintenance.model_copy(update={"enabled": False})})
    assert [f for f, _ in entry_problems(off)] == ["schedule"]  # no maintenance DAG: its schedule is unused
    assert table_dag_ids(off) == ["snowberg_a", "snowberg_a__checks"]


def test_a_sync_on_source_change_has_no_cron_to_check_and_a_bad_cron_is_refused() -> None:
    base = {"source": {"catalog": "lake", "table": "s.m"}, "target": {"kind": "native", "table": "D.S.M"}}
    cfg = parse_syncs({"syncs": [{"name": "a", "schedule": "on_source_change", **base}]}).syncs[0]
    assert entry_problems(cfg) == []
    bad = cfg.model_copy(update={"schedule": "hourly"})
    assert [f for f, _ in entry_problems(bad)] == ["schedule"]
    assert SYNCS.dag_ids(cfg) == ["snowberg_sync_a"]


def test_valid_entries_of_the_shipped_configs_build() -> None:
    include = Path(__file__).resolve().parents[3] / "include"
    report = validate_files([include / "tables.yaml", include / "syncs.yaml"], specs=SPECS, entry_check=entry_problems)
    assert report.ok and report.all_issues == [], report.render()
