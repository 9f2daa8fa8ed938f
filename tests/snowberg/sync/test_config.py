"""Declarative lake → Snowflake syncs (``syncs.yaml``): strict validation with messages naming the sync and field."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from snowberg.sync.config import IcebergTarget, NativeTarget, SyncConfigError, load_syncs, parse_syncs
from snowberg.sync.copy_sql import DEFAULT_COPY_MIN_ROWS

ROOT = Path(__file__).resolve().parents[3]
NATIVE = {
    "name": "s1",
    "source": {"catalog": "lake", "table": "shop.orders"},
    "target": {"kind": "native", "table": "DB.S.T"},
}


@pytest.mark.parametrize(
    "entry,message",
    [
        ({"target": {"kind": "native", "table": "DB.S.T", "bogus": 1}}, "field 'target.bogus': unknown key"),
        ({"target": {"kind": "native", "table": "S.T"}}, "field 'target.table'"),
        (
            {"target": {"kind": "iceberg", "catalog": "h", "table": "S.T"}},
            "needs check.snowflake_conn_id and check.table",
        ),
        ({"target": {"kind": "native", "table": "DB.S.T"}, "on_rewrite": "maybe"}, "field 'on_rewrite'"),
        ({"source": {"catalog": "lake", "table": "no_namespace"}}, "field 'source.table'"),
        ({"target": {"kind": "native", "table": "DB.S.T", "stage": "DB.S.LAKE"}}, "stage and stage_url go together"),
        (
            {"target": {"kind": "native", "table": "DB.S.T", "stage": "LAKE", "stage_url": "s3://l/"}},
            "expected database.schema.stage",
        ),
        (
            {"target": {"kind": "native", "table": "DB.S.T", "stage": "D.S.L", "stage_url": "/l"}},
            "must be a URL",
        ),
        ({"target": {"kind": "native", "table": "DB.S.T", "copy_min_rows": -1}}, "field 'target.copy_min_rows'"),
    ],
)
def test_config_errors_name_the_sync_and_field(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(SyncConfigError, match="sync 's1'") as exc:
        parse_syncs({"syncs": [{**NATIVE, **entry}]})
    assert message in str(exc.value)


def test_two_syncs_into_one_target_are_refused() -> None:
    s = {"source": {"catalog": "lake", "table": "shop.orders"}, "target": {"kind": "native", "table": "DB.S.T"}}
    with pytest.raises(SyncConfigError, match="another sync already writes DB.S.T"):
        parse_syncs({"syncs": [{"name": "a", **s}, {"name": "b", **s}]})


def test_sync_config_create_in_snowflake_defaults_to_the_check() -> None:
    entry = {
        "name": "s",
        "source": {"catalog": "lake", "table": "shop.orders"},
        "target": {
            "kind": "iceberg",
            "catalog": "horizon",
            "table": "SHOP.ORDERS",
            "create_in_snowflake": {"external_volume": "VOL", "base_location": "shop/orders/"},
        },
        "check": {"snowflake_conn_id": "sf", "table": "LAKEHOUSE.SHOP.ORDERS"},
    }
    cfg = parse_syncs({"syncs": [entry]}).syncs[0]
    assert cfg.snowflake_create == {
        "snowflake_conn_id": "sf",
        "table": "LAKEHOUSE.SHOP.ORDERS",
        "external_volume": "VOL",
        "base_location": "shop/orders/",
    }
    with pytest.raises(SyncConfigError, match="create_in_snowflake needs"):
        parse_syncs({"syncs": [{**entry, "check": None, "check_enabled": False}]})


def test_a_native_sync_checks_its_own_target_and_takes_the_defaults() -> None:
    cfg = parse_syncs({"syncs": [NATIVE]}).syncs[0]
    assert isinstance(cfg.target, NativeTarget)
    assert (cfg.dag_id, cfg.check_conn_id, cfg.check_table) == ("snowberg_sync_s1", "snowflake_default", "DB.S.T")
    assert (cfg.on_rewrite, cfg.schedule, cfg.retries, cfg.retry_delay) == ("fail", "@hourly", 2, timedelta(minutes=2))
    assert cfg.target.lineage_column == "_SNOWBERG_SOURCE_SNAPSHOT_ID" and cfg.target.insert_batch_rows == 1_000
    assert cfg.snowflake_create is None
    assert (cfg.target.stage, cfg.target.stage_url, cfg.target.copy_min_rows) == (None, None, DEFAULT_COPY_MIN_ROWS)
    checked = parse_syncs({"syncs": [{**NATIVE, "check": {"snowflake_conn_id": "sf2", "table": "DB.S.V"}}]}).syncs[0]
    assert (checked.check_conn_id, checked.check_table) == ("sf2", "DB.S.V")


def test_an_iceberg_target_is_namespace_dot_table_and_may_skip_the_check_only_explicitly() -> None:
    iceberg = {**NATIVE, "target": {"kind": "iceberg", "catalog": "horizon", "table": "SHOP.ORDERS"}}
    cfg = parse_syncs({"syncs": [{**iceberg, "check_enabled": False}]}).syncs[0]
    assert isinstance(cfg.target, IcebergTarget) and cfg.target.batch_rows == 250_000 and cfg.check is None
    with pytest.raises(SyncConfigError, match="needs check.snowflake_conn_id and check.table"):
        parse_syncs({"syncs": [iceberg]})
    three_parts = {**iceberg, "target": {**iceberg["target"], "table": "DB.SHOP.ORDERS"}, "check_enabled": False}
    with pytest.raises(SyncConfigError, match="expected namespace.table"):
        parse_syncs({"syncs": [three_parts]})


@pytest.mark.parametrize("name", ["Orders", "1orders", "orders-to-lake", "", "x" * 65])
def test_a_sync_name_must_be_a_lower_case_dag_id_part(name: str) -> None:
    with pytest.raises(SyncConfigError, match="name must be lower-case letters, digits or '_'"):
        parse_syncs({"syncs": [{**NATIVE, "name": name}]})


def test_two_syncs_with_one_name_are_refused() -> None:
    other = {**NATIVE, "target": {"kind": "native", "table": "DB.S.OTHER"}}
    with pytest.raises(SyncConfigError, match="sync 's1': duplicate name"):
        parse_syncs({"syncs": [NATIVE, other]})


def test_one_target_written_in_another_case_is_still_one_target() -> None:
    lower = {**NATIVE, "name": "s2", "target": {"kind": "native", "table": "db.s.t"}}
    with pytest.raises(SyncConfigError, match="sync 's2': another sync already writes db.s.t"):
        parse_syncs({"syncs": [NATIVE, lower]})
    elsewhere = {**lower, "target": {**lower["target"], "snowflake_conn_id": "other_account"}}
    assert len(parse_syncs({"syncs": [NATIVE, elsewhere]}).syncs) == 2  # same name, another account


def test_load_syncs_merges_the_defaults_and_names_the_file_in_errors(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "syncs.yaml"
    path.write_text(yaml.safe_dump({"defaults": {"owner": "lake-team", "retries": 0}, "syncs": [NATIVE]}))
    cfg = load_syncs(path).syncs[0]
    assert (cfg.owner, cfg.retries) == ("lake-team", 0)
    path.write_text("syncs: [unclosed")
    with pytest.raises(SyncConfigError, match=re.escape(f"{path}: not valid YAML")):
        load_syncs(path)
    path.write_text(yaml.safe_dump({"syncs": [{**NATIVE, "retries": 99}]}))
    with pytest.raises(
        SyncConfigError, match=rf"(?s){re.escape(str(path))}: .*sync 's1': field 'retries': .*less than or equal to 20"
    ):
        load_syncs(path)


def test_the_shipped_syncs_file_is_valid() -> None:
    cfg = load_syncs(ROOT / "include" / "syncs.yaml")
    assert [s.name for s in cfg.syncs] and all(s.owner == "data-engineering" for s in cfg.syncs)


def test_key_columns_are_accepted_and_reach_the_sync_operator() -> None:
    from snowberg.airflow.sync_dags import build_sync_dag

    cfg = parse_syncs({"syncs": [{**NATIVE, "key_columns": ["ORDER_ID"]}]}).syncs[0]
    assert cfg.key_columns == ["ORDER_ID"]
    assert build_sync_dag(cfg).task_dict["sync"].key_columns == ["ORDER_ID"]
    unset = parse_syncs({"syncs": [NATIVE]}).syncs[0]
    assert unset.key_columns is None  # the source's identifier fields, read when the sync runs
    assert build_sync_dag(unset).task_dict["sync"].key_columns is None


def test_key_columns_must_be_plain_column_names() -> None:
    with pytest.raises(SyncConfigError, match="sync 's1'") as exc:
        parse_syncs({"syncs": [{**NATIVE, "key_columns": ["id; DROP TABLE x"]}]})
    assert "key_columns" in str(exc.value)
