"""OpenLineage facets of a real load (emulator → SQLite catalog), built the way the provider's listener asks.

The end-to-end test (tests/e2e/test_ecosystem.py) sees the same events arrive
over the provider's HTTP transport from a real Airflow.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.serde import Serde

from snowberg.config.table_config import parse_config

SECRET = "pw-lineage-1"


@pytest.fixture
def loaded(sfdb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_env: Any) -> Any:
    from snowberg.iceberg.catalogs import open_catalog
    from snowberg.load.extract import load_window
    from snowberg.load.plan import plan_run

    sfdb.sql(f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} SELECT seq4() + 1, 'n', DATEADD(second, seq4(), '2026-01-01'::TIMESTAMP_NTZ) "
        "FROM TABLE(GENERATOR(ROWCOUNT => 321))"
    )
    conn = {
        "conn_type": "snowflake",
        "login": "fake",
        "password": SECRET,
        "extra": {
            "account": "myorg-myacct",
            "host": "127.0.0.1",
            "port": sfdb.server.port,
            "protocol": "http",
            "database": sfdb.name,
        },
    }
    monkeypatch.setenv("AIRFLOW_CONN_SF_LINEAGE", json.dumps(conn))
    catalog_env("olcat")
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "ol_orders",
                    "source": {"table": f"{sfdb.name.lower()}.s.src"},
                    "target": "ol.orders",
                    "cursor": {"column": "updated_at"},
                    "snowflake_conn_id": "sf_lineage",
                    "catalog": "olcat",
                }
            ]
        }
    ).tables[0]
    catalog = open_catalog("olcat")
    w = plan_run(cfg, sfdb.conn, None, run_id="r1")
    result = load_window(cfg, sfdb.conn, catalog, w)
    assert result.status == "committed" and result.rows == 321
    return cfg, result.to_dict(), tmp_path


def _event_json(obj: Any) -> Any:
    return json.loads(Serde.to_json(obj))


def test_a_load_reports_the_snowflake_table_in_and_the_iceberg_table_out(loaded: Any) -> None:
    from snowberg.airflow.lineage import remember_result
    from snowberg.airflow.operators.arguments import operator_arguments
    from snowberg.airflow.operators.incremental import SnowbergLoadOperator

    cfg, result, tmp_path = loaded
    op = SnowbergLoadOperator(task_id="load", window={}, **operator_arguments(SnowbergLoadOperator, cfg))
    remember_result(op, result)
    lineage = op.get_openlineage_facets_on_complete(task_instance=None)

    [src] = lineage.inputs
    # The Snowflake provider's namespace for an org-account identifier; the configured
    # lower-case name as Snowflake resolves it.
    assert src.namespace == "snowflake://myorg-myacct"
    assert src.name == f"{cfg.source.table.upper()}"
    # (The emulator reports every VARCHAR's length as the maximum, 16777216.)
    types = {f.name: f.type for f in src.facets["schema"].fields}
    assert list(types) == ["ID", "NOTE", "UPDATED_AT"]
    assert types["ID"] == "NUMBER(38,0)" and types["UPDATED_AT"] == "TIMESTAMP_NTZ(9)"
    assert types["NOTE"].startswith("VARCHAR(")

    [out] = lineage.outputs
    assert out.namespace == "file"
    assert out.name == f"{tmp_path}/wh/ol/orders"
    ev = _event_json(out)
    assert ev["facets"]["symlinks"]["identifiers"] == [
        {"namespace": f"sqlite:///{tmp_path}/c.db", "name": "ol.orders", "type": "TABLE"}
    ]
    catalog = ev["facets"]["catalog"]
    assert catalog["framework"] == "iceberg" and catalog["name"] == "olcat" and catalog["type"] == "sql"
    assert catalog["metadataUri"].endswith(".metadata.json")
    assert [f["name"] for f in ev["facets"]["schema"]["fields"]] == ["id", "note", "updated_at"]
    stats = ev["outputFacets"]["outputStatistics"]
    data_files = list((tmp_path / "wh" / "ol" / "orders" / "data").glob("*.parquet"))
    assert stats["rowCount"] == 321
    assert stats["size"] == sum(p.stat().st_size for p in data_files) and stats["fileCount"] == len(data_files)
    lineage_fields = ev["facets"]["columnLineage"]["fields"]
    assert set(lineage_fields) == {"id", "note", "updated_at"}
    assert lineage_fields["note"]["inputFields"] == [
        {"namespace": "snowflake://myorg-myacct", "name": src.name, "field": "NOTE", "transformations": []}
    ]
    assert SECRET not in json.dumps(ev)


def test_a_custom_query_source_has_no_input_table_to_guess(loaded: Any) -> None:
    from snowberg.airflow.lineage import snowflake_to_iceberg

    cfg, result, _ = loaded
    lineage = snowflake_to_iceberg(
        source_table=None, snowflake_conn_id="sf_lineage", catalog_ref="olcat", target=cfg.target, result=result
    )
    assert lineage.inputs == []
    assert "columnLineage" not in lineage.outputs[0].facets
    assert lineage.outputs[0].outputFacets["outputStatistics"].rowCount == 321


def test_a_native_sync_reports_the_lake_table_in_and_the_snowflake_table_out(loaded: Any, sfdb: Any) -> None:
    from snowberg.airflow.lineage import remember_result
    from snowberg.airflow.operators.lake_to_snowflake import IcebergToSnowflakeNativeOperator

    cfg, result, tmp_path = loaded
    sfdb.sql(f"CREATE TABLE {sfdb.table('OUT')} (ID NUMBER(38,0), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ(9))")
    op = IcebergToSnowflakeNativeOperator(
        task_id="sync",
        source_catalog="olcat",
        source_table="ol.orders",
        snowflake_conn_id="sf_lineage",
        target_table=sfdb.table("OUT"),
    )
    remember_result(op, {"status": "committed", "rows": 321})
    lineage = op.get_openlineage_facets_on_complete(task_instance=None)
    [src] = lineage.inputs
    assert (src.namespace, src.name) == ("file", f"{tmp_path}/wh/ol/orders")
    [out] = lineage.outputs
    assert (out.namespace, out.name) == ("snowflake://myorg-myacct", sfdb.table("OUT"))
    assert out.outputFacets["outputStatistics"].rowCount == 321
    assert out.facets["columnLineage"].fields["NOTE"].inputFields[0].field == "note"


def test_storage_names_follow_the_naming_spec() -> None:
    from snowberg.airflow.lineage import catalog_namespace, storage_name

    assert storage_name("s3://lake/warehouse/shop/orders") == ("s3://lake", "warehouse/shop/orders")
    assert storage_name("file:///data/wh/shop/orders/") == ("file", "/data/wh/shop/orders")
    assert storage_name("gs://b/p") == ("gs://b", "p")

    class Cat:
        name = "lake"
        properties = {"uri": "postgresql+psycopg2://me:pw@db:5432/cat"}

    assert catalog_namespace(Cat()) == "postgresql+psycopg2://db:5432/cat"
    Cat.properties = {}
    assert catalog_namespace(Cat()) == "iceberg://lake"


def test_a_horizon_target_is_named_as_the_snowflake_table(monkeypatch: pytest.MonkeyPatch) -> None:
    from snowberg.airflow.lineage import horizon_database, horizon_output

    monkeypatch.setenv(
        "AIRFLOW_CONN_HZ",
        json.dumps(
            {"conn_type": "snowflake", "password": "p", "extra": {"account": "myorg-myacct", "database": "ANALYTICS"}}
        ),
    )
    monkeypatch.setenv("AIRFLOW_CONN_REST_CAT", json.dumps({"conn_type": "iceberg", "host": "http://cat"}))
    assert horizon_output("hz", "SALES.ORDERS") == ("snowflake://myorg-myacct", "ANALYTICS.SALES.ORDERS")
    assert horizon_database("rest_cat") is None and horizon_database("no_such_conn") is None


def test_lineage_that_cannot_be_built_never_fails_the_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider's extractor logs and drops our exception (here: a catalog that is not configured)."""
    from airflow.providers.openlineage.extractors.base import DefaultExtractor

    from snowberg.airflow.lineage import remember_result
    from snowberg.airflow.operators.arguments import operator_arguments
    from snowberg.airflow.operators.incremental import SnowbergLoadOperator

    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "x",
                    "source": {"table": "DB.S.X"},
                    "target": "n.x",
                    "catalog": "nowhere",
                    "cursor": {"column": "u"},
                }
            ]
        }
    ).tables[0]
    op = SnowbergLoadOperator(task_id="load", window={}, **operator_arguments(SnowbergLoadOperator, cfg))
    remember_result(op, {"status": "committed", "rows": 1})
    assert DefaultExtractor(op).extract_on_complete(None) is None


def test_a_stream_load_reports_the_table_the_stream_tracks(loaded: Any, sfdb: Any) -> None:
    from snowberg.airflow.lineage import remember_result
    from snowberg.airflow.operators.streams import SnowbergStreamLoadOperator

    cfg, result, tmp_path = loaded
    stream = {"name": sfdb.table("SRC_STREAM"), "on_table": sfdb.table("SRC")}
    op = SnowbergStreamLoadOperator(
        task_id="load",
        table_name=cfg.name,
        source=cfg.source,
        target=cfg.target,
        primary_key=["id"],
        stream=stream,
        snowflake_conn_id=cfg.snowflake_conn_id,
        catalog=cfg.catalog,
    )
    remember_result(op, {"status": "committed", "rows_appended": 7, "snapshot_id": result["snapshot_id"]})
    lineage = op.get_openlineage_facets_on_complete(task_instance=None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("snowflake://myorg-myacct", sfdb.table("SRC"))]
    assert lineage.outputs[0].name == f"{tmp_path}/wh/ol/orders"
    assert lineage.outputs[0].outputFacets["outputStatistics"].rowCount == 7
