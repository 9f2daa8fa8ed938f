"""The DAG factory: what it wires into each table's DAGs (alert targets, check settings, each operator's arguments)."""

from __future__ import annotations

from snowberg.airflow.dag_factory import build_checks_dag, build_dag, build_unload_dag
from snowberg.config.table_config import TableConfig, parse_config


def test_every_dag_of_a_table_alerts_with_its_own_dag_id() -> None:
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "orders",
                    "source": {"table": "DB.S.ORDERS"},
                    "target": "shop.orders",
                    "cursor": {"column": "updated_at"},
                    "freshness_sla": "1h",
                    "unload": {"stage": "DB.S.LAKE_STAGE", "stage_url": "s3://lake/unload"},
                    "alerts": {"webhook_url": "https://hooks.example.com/a"},
                }
            ]
        }
    ).tables[0]
    dags = [build_dag(cfg), build_checks_dag(cfg), build_unload_dag(cfg)]
    assert len({d.dag_id for d in dags}) == 3
    for dag in dags:
        for task in dag.tasks:
            [notifier] = task.on_failure_callback
            assert (notifier.dag_id, notifier.table) == (dag.dag_id, "orders"), (dag.dag_id, task.task_id)


def test_freshness_reads_the_watermark_on_the_cursors_clock() -> None:
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "orders",
                    "source": {"table": "DB.S.ORDERS"},
                    "target": "shop.orders",
                    "cursor": {"column": "updated_at", "timezone": "America/Los_Angeles"},
                    "freshness_sla": "1h",
                    "max_watermark_lag": "6h",
                }
            ]
        }
    ).tables[0]
    task = build_checks_dag(cfg).get_task("check_freshness")
    assert task.cursor_timezone == "America/Los_Angeles"
    assert task.max_watermark_lag is not None


def _table(**entry: object) -> TableConfig:
    base: dict[str, object] = {
        "name": "orders",
        "source": {"table": "DB.S.ORDERS"},
        "target": "shop.orders",
        "snowflake_conn_id": "sf_shop",
        "catalog": "shop_lake",
    }
    return parse_config({"tables": [{**base, **entry}]}).tables[0]


def test_the_load_tasks_get_the_tables_settings_as_their_arguments() -> None:
    cfg = _table(
        cursor={"column": "updated_at", "lookback": "15m", "timezone": "America/New_York"},
        primary_key=["id"],
        merge_strategy="copy_on_write",
        partition_by=["day(updated_at)"],
        number_as_long=["id"],
        geo_format="wkt",
        batch_rows=5000,
        on_column_dropped="keep_null",
        max_rows_per_slice=3000,
    )
    dag = build_dag(cfg)
    plan, load, publish = (dag.get_task(t) for t in ("plan", "load", "publish"))
    assert (plan.table_name, plan.target, plan.source) == (
        "orders",
        "shop.orders",
        {"table": "DB.S.ORDERS", "query": None},
    )
    assert plan.cursor["column"] == "updated_at" and plan.cursor["timezone"] == "America/New_York"
    assert plan.max_rows_per_slice == 3000 and plan.snowflake_conn_id == "sf_shop" and plan.catalog == "shop_lake"
    assert (load.merge_strategy, load.on_column_dropped, load.geo_format) == ("copy_on_write", "keep_null", "wkt")
    assert load.partition_by == [{"column": "updated_at", "transform": "day"}] and load.batch_rows == 5000
    assert load.number_as_long == ["id"] and load.primary_key == ["id"] and load.max_active_tis_per_dag == 1
    assert publish.target == "shop.orders" and publish.catalog == "shop_lake"
    assert publish.build_config().variable_key == cfg.variable_key  # the Variable the load's watermark goes to
    built = load.build_config()  # what the load hands the library
    assert (built.cursor, built.partition_by, built.effective_write_mode) == (
        cfg.cursor,
        cfg.partition_by,
        cfg.effective_write_mode,
    )


def test_scale_out_and_unload_tasks_get_the_tables_settings() -> None:
    cfg = _table(
        cursor={"column": "updated_at"},
        primary_key=["id"],
        scale_out=True,
        max_rows_per_slice=4000,
        max_parallel_slices=3,
        unload={"stage": "DB.S.LAKE_STAGE", "stage_url": "s3://lake/unload", "prefix": "pushdown"},
    )
    dag = build_dag(cfg)
    prepare, commit = dag.get_task("plan_slices"), dag.get_task("commit")
    assert prepare.max_rows_per_slice == 4000 and prepare.target == "shop.orders"
    assert commit.primary_key == ["id"] and commit.catalog == "shop_lake" and commit.max_active_tis_per_dag == 1
    slices = dag.get_task("load_slice")
    assert slices.partial_kwargs["max_active_tis_per_dagrun"] == 3
    assert slices.partial_kwargs["snowflake_conn_id"] == "sf_shop"
    unload = build_unload_dag(cfg).get_task("unload")
    assert unload.unload == {
        "stage": "DB.S.LAKE_STAGE",
        "stage_url": "s3://lake/unload",
        "prefix": "pushdown",
        "max_file_size": None,
    }


def test_stream_maintenance_and_volume_tasks_get_the_tables_settings() -> None:
    from snowberg.airflow.dag_factory import build_maintenance_dag

    stream = _table(
        primary_key=["id"],
        schedule="*/5 * * * *",
        stream={"name": "DB.S.ORDERS_STREAM", "create": True, "stale_alert_intervals": 4},
    )
    dag = build_dag(stream)
    assert dag.get_task("consume").stream["name"] == "DB.S.ORDERS_STREAM"
    assert dag.get_task("load").primary_key == ["id"] and dag.get_task("cleanup").catalog == "shop_lake"
    staleness = dag.get_task("stream_staleness")
    assert staleness.schedule == "*/5 * * * *" and staleness.stream["stale_alert_intervals"] == 4
    watermark = _table(
        cursor={"column": "updated_at"},
        primary_key=["id"],
        maintenance={"min_snapshots": 48},
        volume={"deletes": "propagate"},
    )
    steps = build_maintenance_dag(watermark)
    assert {steps.get_task(s).maintenance["min_snapshots"] for s in ("compact", "expire_snapshots")} == {48}
    volume = build_checks_dag(watermark).get_task("check_volume")
    assert volume.volume["deletes"] == "propagate" and volume.cursor["column"] == "updated_at"
    assert volume.snowflake_conn_id == "sf_shop"


def test_a_pool_holds_every_task_of_the_load_stream_and_unload_dags_and_no_check_or_maintenance_task() -> None:
    """Issue 29 item 6: one pool per Snowflake connection caps the loads that query it at once."""
    from snowberg.airflow.dag_factory import build_maintenance_dag

    cfg = _table(
        cursor={"column": "updated_at"},
        primary_key=["id"],
        scale_out=True,
        pool="snowberg_sf_shop",
        unload={"stage": "DB.S.LAKE_STAGE", "stage_url": "s3://lake/unload"},
    )
    load = build_dag(cfg)
    assert {t.task_id: t.pool for t in load.tasks} == dict.fromkeys(
        ("plan", "plan_slices", "load_slice", "commit", "publish", "table_health"), "snowberg_sf_shop"
    )
    assert {t.pool for t in build_unload_dag(cfg).tasks} == {"snowberg_sf_shop"}
    stream = build_dag(
        _table(primary_key=["id"], pool="snowberg_sf_shop", stream={"name": "DB.S.ORDERS_STREAM", "create": True})
    )
    assert {t.pool for t in stream.tasks} == {"snowberg_sf_shop"}
    for other in (build_checks_dag(cfg), build_maintenance_dag(cfg)):
        assert {t.pool for t in other.tasks} == {"default_pool"}, other.dag_id
    assert {t.pool for t in build_dag(_table(cursor={"column": "updated_at"})).tasks} == {"default_pool"}
