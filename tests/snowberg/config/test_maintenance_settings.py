"""``maintenance:`` in a table config: defaults that suit an hourly load, bounds that refuse a useless setting."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from snowberg.config.maintenance_settings import MaintenanceSettings
from snowberg.config.table_config import ConfigError, parse_config


def test_defaults_expire_after_five_days_keep_a_day_of_hourly_snapshots_and_compact() -> None:
    m = MaintenanceSettings()
    assert (m.enabled, m.schedule, m.compact, m.remove_orphans) == (True, "@daily", True, True)
    assert m.snapshot_retention == timedelta(days=5) and m.min_snapshots == 24
    assert m.orphan_age == timedelta(days=3)
    assert (m.target_file_size, m.small_file_ratio, m.min_input_files) == (None, 0.75, 2)


def test_a_table_configs_maintenance_section_is_read_with_durations() -> None:
    entry = {
        "name": "orders",
        "source": {"table": "DB.S.ORDERS"},
        "target": "shop.orders",
        "cursor": {"column": "updated_at"},
        "maintenance": {"snapshot_retention": "12h", "min_snapshots": 3, "orphan_age": "PT6H", "schedule": None},
    }
    m = parse_config({"tables": [entry]}).tables[0].maintenance
    assert m.snapshot_retention == timedelta(hours=12) and m.orphan_age == timedelta(hours=6)
    assert (m.min_snapshots, m.schedule) == (3, None)


@pytest.mark.parametrize(
    ("doc", "field", "words"),
    [
        ({"min_snapshots": 0}, "min_snapshots", "greater than or equal to 1"),
        ({"min_input_files": 1}, "min_input_files", "greater than or equal to 2"),
        ({"small_file_ratio": 0}, "small_file_ratio", "greater than 0"),
        ({"small_file_ratio": 1.5}, "small_file_ratio", "less than or equal to 1"),
        ({"target_file_size": 100}, "target_file_size", "greater than or equal to 1024"),
        ({"snapshot_retention": "forever"}, "snapshot_retention", "not a duration"),
        ({"retention": "5d"}, "retention", "Extra inputs are not permitted"),
    ],
)
def test_a_useless_or_misspelt_setting_is_refused_naming_the_field(doc: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ValidationError) as exc:
        MaintenanceSettings.model_validate(doc)
    (err,) = exc.value.errors()
    assert err["loc"] == (field,) and words in err["msg"]


def test_a_bad_maintenance_setting_fails_the_table_config_naming_table_and_field() -> None:
    entry = {
        "name": "orders",
        "source": {"table": "DB.S.ORDERS"},
        "target": "shop.orders",
        "cursor": {"column": "updated_at"},
        "maintenance": {"min_snapshots": 0},
    }
    with pytest.raises(
        ConfigError, match=r"table 'orders': field 'maintenance\.min_snapshots': .*greater than or equal"
    ):
        parse_config({"tables": [entry]})
