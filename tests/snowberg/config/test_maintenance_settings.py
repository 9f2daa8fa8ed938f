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
    assert (m.target_file_size, m.small_file_ratio, m.min_input_files, m.delete_ratio) == (None, 0.75, 2, 0.3)


def test_a_table_configs_maintenance_section_is_read_with_durations() -> None:
    entry = {
        "name": "orders",
        "source": {"table": "DB.S.ORDERS"},
        "target": "shop.orders",
        "cursor": {"column": "updated_at"},
        "maintenance": {
            "snapshot_retention": "12h",
            "min_snapshots": 3,
            "orphan_age": "PT6H",
            "allow_short_orphan_age": True,
            "schedule": None,
        },
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
        ({"delete_ratio": 0}, "delete_ratio", "greater than 0"),
        ({"delete_ratio": 2}, "delete_ratio", "less than or equal to 1"),
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


@pytest.mark.parametrize("age", ["0s", "6h", "23h"])
def test_an_orphan_age_under_a_day_is_refused_naming_the_override(age: str) -> None:
    """A short orphan age lets the sweep delete files a running load or a delayed slice commit still needs."""
    with pytest.raises(ValidationError) as exc:
        MaintenanceSettings.model_validate({"orphan_age": age})
    (err,) = exc.value.errors()
    assert err["loc"] == ("orphan_age",)
    assert "at least 1 day" in err["msg"] and "allow_short_orphan_age: true" in err["msg"]


def test_an_orphan_age_under_a_day_is_accepted_with_the_explicit_override() -> None:
    m = MaintenanceSettings.model_validate({"orphan_age": "1h", "allow_short_orphan_age": True})
    assert m.orphan_age == timedelta(hours=1) and m.allow_short_orphan_age is True
    assert MaintenanceSettings.model_validate({"orphan_age": "1d"}).orphan_age == timedelta(days=1)
    assert MaintenanceSettings().allow_short_orphan_age is False


def test_a_short_orphan_age_fails_the_table_config_naming_table_and_field() -> None:
    entry = {
        "name": "orders",
        "source": {"table": "DB.S.ORDERS"},
        "target": "shop.orders",
        "cursor": {"column": "updated_at"},
        "maintenance": {"orphan_age": "0s"},
    }
    with pytest.raises(ConfigError, match=r"table 'orders': field 'maintenance\.orphan_age': .*allow_short_orphan_age"):
        parse_config({"tables": [entry]})
