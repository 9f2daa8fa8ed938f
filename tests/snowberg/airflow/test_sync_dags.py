"""snowberg.airflow.sync_dags: the Assets a sync DAG schedules on and emits, and config lookup."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from snowberg.airflow.sync_dags import build_sync_dags, source_asset, target_asset
from snowberg.config.locations import ConfigNotFoundError
from snowberg.sync.config import parse_syncs

SYNCS = {
    "syncs": [
        {
            "name": "to_native",
            "source": {"catalog": "lake", "table": "shop.menu"},
            "target": {"kind": "native", "snowflake_conn_id": "sf_prod", "table": "DB.SHOP.MENU"},
        },
        {
            "name": "to_horizon_unchecked",
            "source": {"catalog": "lake", "table": "shop.orders"},
            "target": {"kind": "iceberg", "catalog": "horizon", "table": "SHOP.ORDERS_ICEBERG"},
            "check_enabled": False,
        },
    ]
}


def test_the_target_asset_is_a_uri_the_snowflake_provider_accepts() -> None:
    from urllib.parse import urlsplit

    from airflow.providers.snowflake.assets.snowflake import sanitize_uri

    native, horizon = parse_syncs(SYNCS).syncs
    assert target_asset(native).uri == "snowflake://sf_prod/db/shop/menu"
    sanitize_uri(urlsplit(target_asset(native).uri))
    # No check table: the target is named as the Iceberg table it is, in its catalog.
    assert target_asset(horizon).uri == "iceberg://horizon/SHOP/ORDERS_ICEBERG"
    assert source_asset(native).uri == "iceberg://lake/shop/menu"


def test_build_sync_dags_reads_the_given_file_and_refuses_to_guess(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("SNOWBERG_SYNCS_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigNotFoundError):
        build_sync_dags()
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SYNCS))
    assert sorted(build_sync_dags(path)) == ["snowberg_sync_to_horizon_unchecked", "snowberg_sync_to_native"]


def test_a_native_sync_hands_its_stage_and_copy_threshold_to_the_operator(tmp_path: Path) -> None:
    entry = dict(SYNCS["syncs"][0])
    entry["target"] = {**entry["target"], "stage": "DB.SHOP.LAKE", "stage_url": "s3://lake/wh/", "copy_min_rows": 0}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"syncs": [entry]}))
    op = build_sync_dags(path)["snowberg_sync_to_native"].task_dict["sync"]
    assert (op.stage, op.stage_url, op.copy_min_rows) == ("DB.SHOP.LAKE", "s3://lake/wh/", 0)
