"""The ``volume:`` section and ``max_watermark_lag`` from YAML, and how the factory wires them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from snowberg.config.table_config import ConfigError, parse_config
from snowberg.config.volume_settings import AnomalyAction, DeletePolicy

BASE = {
    "name": "orders",
    "source": {"table": "DB.S.ORDERS"},
    "target": "lake.orders",
    "cursor": {"column": "updated_at"},
    "primary_key": ["id"],
}


def _table(**extra: object) -> object:
    return parse_config({"tables": [dict(BASE, **extra)]}).tables[0]


def test_volume_section_defaults_and_values() -> None:
    t = _table()
    assert t.volume.deletes is DeletePolicy.DETECT and t.volume.anomaly.on_anomaly is AnomalyAction.WARN  # type: ignore[attr-defined]
    t = _table(volume={"deletes": "propagate", "max_reported_keys": 5, "anomaly": {"k": 3, "on_anomaly": "fail"}})
    assert t.volume.deletes is DeletePolicy.PROPAGATE and t.volume.max_reported_keys == 5  # type: ignore[attr-defined]
    assert t.volume.anomaly.k == 3 and t.volume.anomaly.on_anomaly is AnomalyAction.FAIL  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("volume", "needle"),
    [
        ({"deletes": "erase"}, "volume.deletes"),
        ({"max_queries": 1}, "volume.max_queries"),
        ({"anomaly": {"runs": 1}}, "volume.anomaly.runs"),
        ({"colour": "red"}, "volume.colour"),
        ({"full_schedule": "every sunday"}, "volume.full_schedule"),
        ({"late_margin": "soon"}, "volume.late_margin"),
        ({"day_column": "created on"}, "volume.day_column"),
        ({"lake_memory_mb": 1}, "volume.lake_memory_mb"),
    ],
)
def test_bad_volume_settings_name_the_table_and_field(volume: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        _table(volume=volume)
    assert "orders" in str(err.value) and needle in str(err.value)


def test_checks_dag_gets_the_volume_task_and_the_yaml_watermark_lag() -> None:
    from snowberg.airflow.dag_factory import build_checks_dag

    dag = build_checks_dag(_table(freshness_sla="2h", max_watermark_lag="6h"))  # type: ignore[arg-type]
    assert dag.get_task("check_freshness").max_watermark_lag == timedelta(hours=6)
    vol = dag.get_task("check_volume")
    assert vol.retries == 0 and vol.volume["deletes"] == "detect"
    off = build_checks_dag(_table(volume={"enabled": False}))  # type: ignore[arg-type]
    assert "check_volume" not in off.task_ids
    # every table gets a volume check: a cursor-less table's counts the whole table (or per volume.day_column)
    no_cursor = build_checks_dag(_table(cursor=None, volume={"day_column": "created_on"}))  # type: ignore[arg-type]
    assert no_cursor.get_task("check_volume").volume["day_column"] == "created_on"
    assert dag.params["full_verification"] is False


def test_volume_failures_alert_as_their_own_events() -> None:
    from snowberg.airflow.alerts import build_alert
    from snowberg.airflow.operators.check_base import SnowbergCheckFailed

    for check, event, title in (
        ("volume", "volume_mismatch", "volume mismatch between Snowflake and the lake"),
        ("volume_anomaly", "volume_anomaly", "volume anomaly"),
    ):
        exc = SnowbergCheckFailed("x", table="lake.orders", check=check, observed={"source rows": 3}, expected="y")
        alert = build_alert({"exception": exc, "run_id": "r"}, table="orders", dag_id="snowberg_orders__checks")
        assert alert.event == event and alert.title == title
        assert ("observed", "source rows=3") in alert.rows()


def test_incremental_settings_defaults_and_values() -> None:
    t = _table()
    v = t.volume  # type: ignore[attr-defined]
    assert v.incremental and v.full_schedule == "@weekly" and v.late_margin == timedelta(hours=1)
    t = _table(volume={"full_schedule": "0 3 * * 0", "late_margin": "1d", "incremental": False, "day_column": "d"})
    v = t.volume  # type: ignore[attr-defined]
    assert (v.full_schedule, v.late_margin, v.incremental, v.day_column) == ("0 3 * * 0", timedelta(days=1), False, "d")
    assert _table(volume={"full_schedule": None}).volume.full_schedule is None  # type: ignore[attr-defined]


def test_stream_tables_get_a_volume_check_with_their_stream() -> None:
    from snowberg.airflow.dag_factory import build_checks_dag

    stream = parse_config(
        {
            "tables": [
                {
                    "name": "cdc",
                    "source": {"table": "DB.S.ORDERS"},
                    "target": "lake.orders",
                    "primary_key": ["id"],
                    "stream": {"name": "DB.S.ORDERS_STREAM"},
                }
            ]
        }
    ).tables[0]
    vol = build_checks_dag(stream).get_task("check_volume")
    assert vol.stream["name"] == "DB.S.ORDERS_STREAM" and vol.cursor is None
