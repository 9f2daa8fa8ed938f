"""A table's settings as operator arguments: read from the signatures, documented, validated, passed through."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path
from typing import Any

import pytest

from snowberg.airflow.operators.arguments import TABLE_NAME, config_parameters, operator_arguments
from snowberg.airflow.operators.incremental import (
    SnowbergLoadOperator,
    SnowbergPlanOperator,
    SnowbergPublishOperator,
)
from snowberg.airflow.operators.maintenance import SnowbergMaintenanceOperator
from snowberg.airflow.operators.scale import (
    SnowbergSliceCommitOperator,
    SnowbergSliceLoadOperator,
    SnowbergSlicePlanOperator,
    SnowbergUnloadOperator,
)
from snowberg.airflow.operators.streams import (
    SnowbergStreamChangesOperator,
    SnowbergStreamCleanupOperator,
    SnowbergStreamConsumeOperator,
    SnowbergStreamLoadOperator,
    SnowbergStreamStalenessOperator,
)
from snowberg.airflow.operators.volume import VolumeCheckOperator
from snowberg.config.table_config import TableConfig

REPO = Path(__file__).resolve().parents[4]

OPERATORS: tuple[type, ...] = (
    SnowbergPlanOperator,
    SnowbergLoadOperator,
    SnowbergPublishOperator,
    SnowbergSlicePlanOperator,
    SnowbergSliceLoadOperator,
    SnowbergSliceCommitOperator,
    SnowbergUnloadOperator,
    SnowbergStreamConsumeOperator,
    SnowbergStreamLoadOperator,
    SnowbergStreamCleanupOperator,
    SnowbergStreamStalenessOperator,
    SnowbergStreamChangesOperator,
    SnowbergMaintenanceOperator,
    VolumeCheckOperator,
)
IDS = [o.__name__ for o in OPERATORS]

WATERMARK_TABLE = {
    "name": "orders",
    "source": {"table": "SHOP.PUBLIC.ORDERS"},
    "target": "shop.orders",
    "cursor": {"column": "updated_at", "lookback": "10m", "timezone": "Europe/Paris"},
    "primary_key": ["id"],
    "merge_strategy": "copy_on_write",
    "partition_by": ["day(updated_at)", "bucket[8](id)"],
    "number_as_long": ["id"],
    "timestamp_nanos": "truncate",
    "geo_format": "wkt",
    "batch_rows": 5000,
    "on_column_dropped": "keep_null",
    "on_column_added": "backfill",
    "max_rows_per_slice": 2000,
    "snowflake_conn_id": "sf_shop",
    "catalog": "shop_lake",
    "unload": {"stage": "LAKE.PUBLIC.STG", "stage_url": "s3://lake/wh", "max_file_size": 2_000_000},
    "volume": {"deletes": "propagate", "max_reported_keys": 5},
    "maintenance": {"min_snapshots": 48, "snapshot_retention": "7d"},
}
STREAM_TABLE = {
    "name": "orders_cdc",
    "source": {"table": "SHOP.PUBLIC.ORDERS"},
    "target": "shop.orders_cdc",
    "primary_key": ["id"],
    "schedule": "*/10 * * * *",
    "geo_format": "wkt",
    "batch_rows": 5000,
    "stream": {"name": "SHOP.PUBLIC.ORDERS_STREAM", "create": True, "changelog_target": "shop.orders_log"},
    "snowflake_conn_id": "sf_shop",
}


def _table_for(operator: type) -> TableConfig:
    raw = STREAM_TABLE if "stream" in config_parameters(operator) else WATERMARK_TABLE
    return TableConfig.model_validate(raw)


def _extra(operator: type) -> dict[str, Any]:
    """Each operator's arguments that are not table settings."""
    return {
        SnowbergLoadOperator: {"window": {}},
        SnowbergPublishOperator: {"window": {}},
        SnowbergSlicePlanOperator: {"window": {}},
        SnowbergSliceLoadOperator: {"slice_task": {}},
        SnowbergSliceCommitOperator: {"window": {}, "slice_results": []},
        SnowbergUnloadOperator: {"window": {}},
        SnowbergStreamLoadOperator: {"consumed": None},
        SnowbergMaintenanceOperator: {"step": "compact"},
    }.get(operator, {})


@pytest.mark.parametrize("operator", OPERATORS, ids=IDS)
def test_the_table_settings_are_the_keyword_only_arguments_named_after_config_fields(operator: type) -> None:
    params = config_parameters(operator)
    assert {TABLE_NAME, "source", "target"} <= set(params)  # every TableConfig needs them
    assert params[TABLE_NAME] == "name"
    assert all(f in TableConfig.model_fields for f in params.values())
    # Airflow's own arguments that share a config field's name are never taken from the config.
    assert not {"owner", "retries", "retry_delay", "tags"} & set(params)
    signature = inspect.signature(operator.__init__)
    assert all(signature.parameters[p].kind is inspect.Parameter.KEYWORD_ONLY for p in params)


@pytest.mark.parametrize("operator", OPERATORS, ids=IDS)
def test_every_argument_is_documented(operator: type) -> None:
    doc = inspect.getdoc(operator) or ""
    for p in inspect.signature(operator.__init__).parameters.values():
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            assert f":param {p.name}:" in doc, f"{operator.__name__}: {p.name} is not documented"


@pytest.mark.parametrize("operator", OPERATORS, ids=IDS)
def test_an_omitted_setting_means_the_table_configs_default(operator: type) -> None:
    """The signature's default is the config's: an operator written by hand loads like the factory's."""
    for p, f in config_parameters(operator).items():
        default = inspect.signature(operator.__init__).parameters[p].default
        if default is inspect.Parameter.empty:
            continue
        field = TableConfig.model_fields[f]
        expected = field.get_default(call_default_factory=True)
        if isinstance(default, tuple):
            default = list(default)
        if default is None and field.default_factory is not None:
            continue  # None: the settings model's defaults (volume, maintenance)
        assert default == expected, f"{operator.__name__}.{p}: {default!r} != {expected!r}"


@pytest.mark.parametrize("operator", OPERATORS, ids=IDS)
def test_an_operator_built_from_a_config_rebuilds_that_configs_settings(operator: type) -> None:
    cfg = _table_for(operator)
    op = operator(task_id="t", **_extra(operator), **operator_arguments(operator, cfg))
    rebuilt = op.build_config()
    for f in config_parameters(operator).values():
        assert getattr(rebuilt, f) == getattr(cfg, f), f
    # What the operator keeps is JSON (it serializes with the DAG).
    import json

    for p in config_parameters(operator):
        json.dumps(getattr(op, p))


@pytest.mark.parametrize("operator", OPERATORS, ids=IDS)
def test_a_bad_setting_fails_when_the_operator_is_built_naming_the_argument(operator: type) -> None:
    args = operator_arguments(operator, _table_for(operator))
    with pytest.raises(ValueError, match=r"'t': invalid argument\(s\): table_name: .*lower-case"):
        operator(task_id="t", **_extra(operator), **{**args, TABLE_NAME: "Orders!"})
    with pytest.raises(ValueError, match=r"source: .*exactly one of 'table' or 'query'"):
        operator(task_id="t", **_extra(operator), **{**args, "source": {}})


def test_nested_settings_are_validated_where_they_sit() -> None:
    args = operator_arguments(SnowbergLoadOperator, TableConfig.model_validate(WATERMARK_TABLE))
    with pytest.raises(ValueError, match=r"cursor\.timezone: .*IANA"):
        SnowbergLoadOperator(task_id="t", window={}, **{**args, "cursor": {"column": "u", "timezone": "Mars/Base"}})
    with pytest.raises(ValueError, match=r"partition_by\.0: .*bad partition transform"):
        SnowbergLoadOperator(task_id="t", window={}, **{**args, "partition_by": ["weekly(u)"]})
    with pytest.raises(ValueError, match="cursor.lookback .* needs a merge table"):
        SnowbergLoadOperator(task_id="t", window={}, **{**args, "primary_key": []})


def test_a_templated_catalog_is_validated_once_rendered() -> None:
    args = operator_arguments(SnowbergPublishOperator, TableConfig.model_validate(WATERMARK_TABLE))
    op = SnowbergPublishOperator(task_id="t", window={}, **{**args, "catalog": "{{ params.catalog }}"})
    assert op.catalog == "{{ params.catalog }}"
    op.catalog = "lake two"  # as rendered
    with pytest.raises(Exception, match="catalog"):
        op.build_config()


def _documented_table() -> dict[str, list[str]]:
    """The table of operator arguments in docs/configuration.md: operator → the settings it lists."""
    text = (REPO / "docs" / "configuration.md").read_text()
    section = text[text.index("## The operators in your own DAGs") :]
    out: dict[str, list[str]] = {}
    for line in section.splitlines():
        m = re.match(r"\| (`Snowberg.*?|`VolumeCheck.*?) \| (.*) \|$", line)
        if m:
            settings = re.findall(r"`(\w+)`", m.group(2))
            for name in re.findall(r"`(\w+Operator)`", m.group(1)):
                out[name] = settings
    return out


def test_the_docs_list_each_operators_settings_as_its_signature_does() -> None:
    documented = _documented_table()
    assert set(documented) == set(IDS)
    for operator in OPERATORS:
        assert sorted(documented[operator.__name__]) == sorted(config_parameters(operator)), operator.__name__


def test_the_docs_example_builds_a_dag() -> None:
    import pendulum
    from airflow.sdk import DAG

    text = (REPO / "docs" / "configuration.md").read_text()
    section = text[text.index("## The operators in your own DAGs") :]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    with DAG("docs_example", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        exec(compile(code, "docs/configuration.md", "exec"), {})  # noqa: S102 - the documented example
    assert [t.task_id for t in dag.topological_sort()] == ["plan", "load", "publish"]
    assert dag.get_task("load").cursor["column"] == "updated_at"


def test_the_argument_types_name_the_settings_models() -> None:
    """Nested settings take their model or its dict: the signature says which model."""
    hints = typing.get_type_hints(SnowbergLoadOperator.__init__)
    assert "Cursor" in str(hints["cursor"]) and "Source" in str(hints["source"])
    assert "StreamSource" in str(typing.get_type_hints(SnowbergStreamLoadOperator.__init__)["stream"])


def test_a_tables_operators_validate_its_settings_once_and_a_bad_setting_fails_every_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parsing many tables validated each table's settings once per task; now once per distinct set of arguments.

    A failure is not remembered: every operator given the bad value raises, naming its own task.
    """
    from snowberg.airflow.operators import arguments

    built: list[dict[str, Any]] = []

    class CountingConfig(TableConfig):
        def __init__(self, **data: Any) -> None:
            built.append(data)
            super().__init__(**data)

    arguments._validated_arguments.cache_clear()
    monkeypatch.setattr(arguments, "TableConfig", CountingConfig)
    args = operator_arguments(SnowbergLoadOperator, TableConfig.model_validate(WATERMARK_TABLE))
    ops = [SnowbergLoadOperator(task_id=f"t{i}", window={}, **args) for i in range(5)]
    assert len(built) == 1
    assert ops[0].cursor == ops[4].cursor and ops[0].cursor is not ops[4].cursor  # each task its own values
    for i in range(2):
        with pytest.raises(ValueError, match=rf"'bad{i}': invalid argument\(s\): cursor\.timezone"):
            SnowbergLoadOperator(task_id=f"bad{i}", window={}, **{**args, "cursor": {"column": "u", "timezone": "X/Y"}})
    assert len(built) == 3
