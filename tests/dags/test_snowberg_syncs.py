"""dags/snowberg_syncs.py: one DAG per sync, cheap to parse, strict config, and a real run on the emulator."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowberg" / "sync"))
import l2s_services  # noqa: E402
from l2s_data import orders, orders_schema  # noqa: E402

from snowberg.sync.config import SyncConfigError, load_syncs, parse_syncs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DAG_FILE = ROOT / "dags" / "snowberg_syncs.py"
HEAVY = ("pyiceberg", "pyarrow", "snowflake.connector", "fakesnow", "duckdb", "pandas")

# The lake → Snowflake service fixtures (tests/snowberg/sync/l2s_services.py); the emulator is tests/conftest.py's.
connection = l2s_services.connection
snowflake = l2s_services.snowflake
lake = l2s_services.lake


def _load_dags(monkeypatch: pytest.MonkeyPatch, config: Path | None = None) -> dict[str, Any]:
    if config is not None:
        monkeypatch.setenv("SNOWBERG_SYNCS_CONFIG", str(config))
    spec = importlib.util.spec_from_file_location(f"snowberg_syncs_{os.getpid()}_{id(config)}", DAG_FILE)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from airflow.sdk import DAG

    return {k: v for k, v in vars(mod).items() if isinstance(v, DAG)}


def test_one_dag_per_sync_with_owner_retries_tags_and_docs(monkeypatch) -> None:
    monkeypatch.delenv("SNOWBERG_SYNCS_CONFIG", raising=False)
    cfg = load_syncs(ROOT / "include" / "syncs.yaml")
    dags = _load_dags(monkeypatch)
    assert sorted(dags) == sorted(s.dag_id for s in cfg.syncs)
    for s in cfg.syncs:
        dag = dags[s.dag_id]
        assert {"snowberg", "lake-to-snowflake", s.target.kind} <= set(dag.tags)
        assert dag.default_args["owner"] == s.owner and dag.default_args["retries"] == s.retries
        assert dag.doc_md and s.source.table in dag.doc_md and dag.max_active_runs == 1 and not dag.catchup
        assert dag.task_dict["sync"].downstream_task_ids == {"check_visible"}
        assert dag.task_dict["check_visible"].retries == 0
        # the check re-reads a keyed change's touched keys from the sync's source
        check = dag.task_dict["check_visible"]
        assert (check.source_catalog, check.source_table) == (s.source.catalog, s.source.table)
    native_dag = dags["snowberg_sync_menu_to_native"]  # schedule: on_source_change
    assert [a.uri for a in native_dag.timetable.asset_condition.objects] == ["iceberg://lake/shop/menu"]
    assert [a.uri for a in native_dag.task_dict["sync"].outlets] == [
        "snowflake://snowflake_default/snowberg_demo/shop/menu_from_lake"
    ]
    assert type(native_dag.task_dict["sync"]).__name__ == "IcebergToSnowflakeNativeOperator"
    assert (
        type(dags["snowberg_sync_orders_to_horizon"].task_dict["sync"]).__name__ == "IcebergToSnowflakeIcebergOperator"
    )


def test_parsing_imports_no_heavy_library() -> None:
    code = textwrap.dedent(f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("d", {str(DAG_FILE)!r})
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        print(sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r} or m in {HEAVY!r}))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**os.environ, "SNOWBERG_SYNCS_CONFIG": str(ROOT / "include" / "syncs.yaml")},
    )
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-2000:]


@pytest.mark.slow
def test_dag_test_runs_sync_then_check_on_the_emulator(lake, snowflake, connection, tmp_path, monkeypatch) -> None:
    """``dag.test()``: the real task runner, XCom from ``sync`` into ``check_visible``, connections from env."""
    conn_id, conn, db = snowflake
    env = {**os.environ}
    migrate = subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), "db", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    connection(
        "lake",
        {
            "conn_type": "sqlite",
            "host": lake.properties["uri"].removeprefix("sqlite:///"),
            "extra": {"warehouse": lake.properties["warehouse"]},
        },
    )
    src = lake.create_table("shop.orders", schema=orders_schema())
    src.append(orders([1, 2, 3]))
    config = tmp_path / "syncs.yaml"
    config.write_text(
        json.dumps(
            {
                "syncs": [
                    {
                        "name": "orders_native",
                        "schedule": None,
                        "source": {"catalog": "lake", "table": "shop.orders"},
                        "target": {"kind": "native", "snowflake_conn_id": conn_id, "table": f"{db}.SHOP.ORDERS"},
                    }
                ]
            }
        )
    )
    dag = _load_dags(monkeypatch, config)["snowberg_sync_orders_native"]
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"sync": "success", "check_visible": "success"}, states
    cur = conn.cursor()
    cur.execute(f'SELECT COUNT(*) FROM "{db}"."SHOP"."ORDERS"')
    assert cur.fetchone()[0] == 3
    cur.close()


def test_a_syncs_alerts_become_the_failure_callbacks_of_its_tasks(tmp_path, monkeypatch) -> None:
    import yaml

    cfg = tmp_path / "syncs.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "defaults": {"alerts": {"webhook_url": "https://hooks.example.com/a", "events": ["load_failure"]}},
                "syncs": [
                    {
                        "name": "alerting",
                        "source": {"catalog": "lake", "table": "shop.orders"},
                        "target": {"kind": "native", "table": "DB.S.ORDERS"},
                    },
                    {
                        "name": "quiet",
                        "source": {"catalog": "lake", "table": "shop.menu"},
                        "target": {"kind": "native", "table": "DB.S.MENU"},
                        "alerts": None,
                    },
                ],
            }
        )
    )
    dags = _load_dags(monkeypatch, cfg)
    for task in dags["snowberg_sync_alerting"].tasks:
        [notifier] = task.on_failure_callback
        assert type(notifier).__name__ == "WebhookNotifier"
        assert (notifier.table, notifier.dag_id, notifier.events) == (
            "alerting",
            "snowberg_sync_alerting",
            ("load_failure",),
        )
    assert all(not t.on_failure_callback for t in dags["snowberg_sync_quiet"].tasks)
    with pytest.raises(SyncConfigError, match="alerting.*alerts"):
        parse_syncs(
            {
                "syncs": [
                    {
                        "name": "alerting",
                        "source": {"catalog": "lake", "table": "shop.orders"},
                        "target": {"kind": "native", "table": "DB.S.ORDERS"},
                        "alerts": {"webhook_url": "ftp://nope"},
                    }
                ]
            }
        )


def test_a_merge_table_syncs_its_changes_by_key_from_config_alone(
    lake, snowflake, connection, tmp_path, monkeypatch
) -> None:
    """A syncs.yaml entry without on_rewrite or key_columns: the source's identifier fields (what snowberg's merge
    tables declare) key the change, so a merge-on-read update and a delete reach the target through ``dag.test()``."""
    import pyarrow as pa

    from snowberg.iceberg.merge import write_position_deletes

    conn_id, conn, db = snowflake
    env = {**os.environ}
    migrate = subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), "db", "migrate"], env=env, capture_output=True, text=True
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    connection(
        "lake",
        {
            "conn_type": "sqlite",
            "host": lake.properties["uri"].removeprefix("sqlite:///"),
            "extra": {"warehouse": lake.properties["warehouse"]},
        },
    )
    src = lake.create_table("shop.orders", schema=orders_schema())
    with src.update_schema(allow_incompatible_changes=True) as upd:
        upd.update_column("order_id", required=True)
        upd.set_identifier_fields("order_id")
    schema = pa.schema([f.with_nullable(f.name != "order_id") for f in orders_schema()])
    src.append(orders([1, 2, 3]).cast(schema))
    config = tmp_path / "syncs.yaml"
    entry = {
        "name": "orders_native",
        "schedule": None,
        "source": {"catalog": "lake", "table": "shop.orders"},
        "target": {"kind": "native", "snowflake_conn_id": conn_id, "table": f"{db}.SHOP.ORDERS"},
    }
    config.write_text(json.dumps({"syncs": [entry]}))
    dag = _load_dags(monkeypatch, config)["snowberg_sync_orders_native"]
    assert dag.test().get_task_instance("sync").state == "success"

    src = lake.load_table("shop.orders")
    tx = src.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array([2], pa.int64())}), {}, io=src.io)
    tx.append(orders([2, 4]).set_column(1, "customer", pa.array(["v2", "v2"])).cast(schema))
    src = tx.commit_transaction()
    src.delete("order_id = 3")
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"sync": "success", "check_visible": "success"}, states
    cur = conn.cursor()
    cur.execute(f'SELECT "ORDER_ID", "CUSTOMER" FROM "{db}"."SHOP"."ORDERS" ORDER BY 1')
    assert cur.fetchall() == [(1, "customer '1'"), (2, "v2"), (4, "v2")]
    cur.execute(f'SELECT "MODE" FROM "{db}"."SHOP"."SNOWBERG_SYNC_STATE"')
    assert cur.fetchone()[0] == "changes"
    cur.close()
