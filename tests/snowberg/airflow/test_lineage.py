"""OpenLineage facets of a real load (emulator → SQLite catalog), built the way the provider's listener asks.

Each operator gathers its lineage facts in ``execute()``; the facets are then
built with every way to reach Snowflake, a catalog or an Airflow connection
cut off (``no_io``), as in the listener's forked process, which must not do
I/O. tests/scenarios/test_lineage_dags_test.py runs the same through
``airflow dags test`` with a 1 s listener budget, and tests/e2e/test_ecosystem.py
sees the events arrive from a real scheduler.
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
    # raising=False: the code before lineage_enabled existed runs these tests too (and fails them).
    monkeypatch.setattr("snowberg.airflow.lineage.lineage_enabled", lambda: True, raising=False)
    w = plan_run(cfg, sfdb.conn, None, run_id="r1")
    return cfg, w, tmp_path


class NoIO(Exception):
    """What the listener's fork would run into: a connection, a catalog or a socket opened after the task."""


@pytest.fixture
def no_io(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Cut off every way to Snowflake, a catalog or an Airflow connection; yield to build facets under it."""
    import socket
    import sqlite3

    from airflow.sdk import Connection
    from pyiceberg.catalog.sql import SqlCatalog

    def refuse(*_: Any, **__: Any) -> Any:
        raise NoIO("I/O while building lineage facets")

    def cut() -> None:
        monkeypatch.setattr("snowberg.iceberg.catalogs.open_catalog", refuse)
        monkeypatch.setattr("snowberg.snowflake.hook.snowflake_connection", refuse)
        monkeypatch.setattr("snowberg.snowflake.hook.snowflake_hook", refuse)
        monkeypatch.setattr(Connection, "get", classmethod(refuse))
        monkeypatch.setattr(SqlCatalog, "load_table", refuse)
        monkeypatch.setattr(socket.socket, "connect", refuse)
        monkeypatch.setattr(sqlite3, "connect", refuse)

    return cut


def _run_load(cfg: Any, w: Any) -> Any:
    """The factory's load operator for ``cfg``, executed on window ``w`` (lineage facts gathered)."""
    from snowberg.airflow.operators.arguments import operator_arguments
    from snowberg.airflow.operators.incremental import SnowbergLoadOperator

    op = SnowbergLoadOperator(task_id="load", window=w.to_dict(), **operator_arguments(SnowbergLoadOperator, cfg))
    result = op.execute({"run_id": "r1"})
    assert result["status"] == "committed" and result["rows"] == 321
    return op, result


def _event_json(obj: Any) -> Any:
    return json.loads(Serde.to_json(obj))


def test_a_load_reports_the_snowflake_table_in_and_the_iceberg_table_out(loaded: Any, no_io: Any) -> None:
    """Built with no connection, catalog or socket: everything came from what execute() held."""
    cfg, w, tmp_path = loaded
    op, _ = _run_load(cfg, w)
    no_io()
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


def test_a_custom_query_source_has_no_input_table_to_guess(loaded: Any, no_io: Any) -> None:
    from snowberg.airflow.lineage import build_lineage, facts_of, record_load
    from snowberg.iceberg.catalogs import open_catalog

    cfg, w, _ = loaded
    op, result = _run_load(cfg, w)
    record_load(
        op,
        source_table=None,
        snowflake_conn_id="sf_lineage",
        conn=None,
        catalog_ref="olcat",
        catalog=open_catalog("olcat"),
        target=cfg.target,
        result=result,
    )
    facts = facts_of(op)
    assert facts is not None
    no_io()
    lineage = build_lineage(facts)
    assert lineage.inputs == []
    assert "columnLineage" not in lineage.outputs[0].facets
    assert lineage.outputs[0].outputFacets["outputStatistics"].rowCount == 321


def test_a_native_sync_reports_the_lake_table_in_and_the_snowflake_table_out(
    loaded: Any, sfdb: Any, no_io: Any
) -> None:
    from snowberg.airflow.operators.lake_to_snowflake import IcebergToSnowflakeNativeOperator

    cfg, w, tmp_path = loaded
    _run_load(cfg, w)
    op = IcebergToSnowflakeNativeOperator(
        task_id="sync",
        source_catalog="olcat",
        source_table="ol.orders",
        snowflake_conn_id="sf_lineage",
        target_table=sfdb.table("OUT"),
        state_table=sfdb.table("SYNC_STATE"),
    )
    assert op.execute({"run_id": "s1"})["rows"] == 321
    no_io()
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


def test_lineage_that_cannot_be_gathered_never_fails_the_task(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A catalog that cannot load the table: a warning, no facts, and the provider gets ``None`` (no datasets)."""
    from airflow.providers.openlineage.extractors.base import DefaultExtractor

    from snowberg.airflow.lineage import facts_of, record_load
    from snowberg.airflow.operators.arguments import operator_arguments
    from snowberg.airflow.operators.incremental import SnowbergLoadOperator

    monkeypatch.setattr("snowberg.airflow.lineage.lineage_enabled", lambda: True)
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

    class Broken:
        name = "nowhere"

        def load_table(self, _: Any) -> Any:
            raise RuntimeError("catalog unreachable")

    record_load(
        op,
        source_table="DB.S.X",
        snowflake_conn_id="snowflake_default",
        conn=None,
        catalog_ref="nowhere",
        catalog=Broken(),
        target="n.x",
        result={"status": "committed", "rows": 1},
    )
    assert facts_of(op) is None
    assert "no lineage facts gathered" in caplog.text
    assert DefaultExtractor(op).extract_on_complete(None) is None


def test_nothing_is_gathered_when_openlineage_is_off(loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """No transport configured: the provider emits nothing, so the task does no extra query or catalog read."""
    from snowberg.airflow.lineage import facts_of

    cfg, w, _ = loaded
    monkeypatch.setattr("snowberg.airflow.lineage.lineage_enabled", lambda: False)
    op, _ = _run_load(cfg, w)
    assert facts_of(op) is None
    assert op.get_openlineage_facets_on_complete(task_instance=None) is None


def test_a_stream_load_reports_the_table_the_stream_tracks(
    loaded: Any, sfdb: Any, monkeypatch: pytest.MonkeyPatch, no_io: Any
) -> None:
    """The emulator has no streams: the load step answers as it does after a commit (rows_appended, snapshot)."""
    from snowberg.airflow.operators.streams import SnowbergStreamLoadOperator

    cfg, w, tmp_path = loaded
    _, result = _run_load(cfg, w)
    monkeypatch.setattr(
        "snowberg.streams.steps.load_step",
        lambda *a, **k: {"status": "committed", "rows_appended": 7, "snapshot_id": result["snapshot_id"]},
    )
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
    op.execute({"run_id": "st1"})
    no_io()
    lineage = op.get_openlineage_facets_on_complete(task_instance=None)
    [src] = lineage.inputs
    assert (src.namespace, src.name) == ("snowflake://myorg-myacct", sfdb.table("SRC"))
    assert [f.name for f in src.facets["schema"].fields] == ["ID", "NOTE", "UPDATED_AT"]
    assert lineage.outputs[0].name == f"{tmp_path}/wh/ol/orders"
    assert lineage.outputs[0].outputFacets["outputStatistics"].rowCount == 7
    assert set(lineage.outputs[0].facets["columnLineage"].fields) == {"id", "note", "updated_at"}


def test_an_iceberg_sync_reports_the_lake_table_in_and_the_target_iceberg_table_out(
    loaded: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_io: Any
) -> None:
    """A target catalog that is not Horizon (here a second SQLite catalog): the output is named as an Iceberg table."""
    from snowberg.airflow.operators.lake_to_snowflake import IcebergToSnowflakeIcebergOperator

    cfg, w, _ = loaded
    _run_load(cfg, w)
    (tmp_path / "wh2").mkdir()
    for k, v in {"TYPE": "sql", "URI": f"sqlite:///{tmp_path}/c2.db", "WAREHOUSE": f"file://{tmp_path}/wh2"}.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__OLCOPY__{k}", v)
    op = IcebergToSnowflakeIcebergOperator(
        task_id="sync",
        source_catalog="olcat",
        source_table="ol.orders",
        target_catalog="olcopy",
        target_table="copy.orders",
        create_if_missing=True,
    )
    assert op.execute({"run_id": "i1"})["rows"] == 321
    no_io()
    lineage = op.get_openlineage_facets_on_complete(task_instance=None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("file", f"{tmp_path}/wh/ol/orders")]
    [out] = lineage.outputs
    assert (out.namespace, out.name) == ("file", f"{tmp_path}/wh2/copy/orders")
    assert out.facets["symlinks"].identifiers[0].name == "copy.orders"
    assert out.outputFacets["outputStatistics"].rowCount == 321


def test_a_horizon_sync_names_its_output_as_the_snowflake_table(
    loaded: Any, monkeypatch: pytest.MonkeyPatch, no_io: Any
) -> None:
    """Horizon needs real Snowflake: the gathering runs on the loaded source and a Horizon connection."""
    from airflow.sdk.bases.operator import BaseOperator

    from snowberg.airflow.lineage import build_lineage, facts_of, record_iceberg_sync
    from snowberg.iceberg.catalogs import open_catalog

    cfg, w, tmp_path = loaded
    _run_load(cfg, w)
    monkeypatch.setenv(
        "AIRFLOW_CONN_HZ_OL",
        json.dumps({"conn_type": "snowflake", "password": "p", "extra": {"account": "myorg-myacct", "database": "AN"}}),
    )
    op = BaseOperator(task_id="sync")
    op.source_table = "ol.orders"  # type: ignore[attr-defined]
    source = open_catalog("olcat").load_table(("ol", "orders"))
    record_iceberg_sync(
        op,
        source_catalog="olcat",
        source=source,
        target_catalog_ref="hz_ol",
        target_catalog=None,
        target_table="SALES.ORDERS",
        result={"status": "committed", "rows": 5},
    )
    facts = facts_of(op)
    assert facts is not None
    no_io()
    lineage = build_lineage(facts)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("file", f"{tmp_path}/wh/ol/orders")]
    [out] = lineage.outputs
    assert (out.namespace, out.name) == ("snowflake://myorg-myacct", "AN.SALES.ORDERS")
    assert out.outputFacets["outputStatistics"].rowCount == 5
