"""Shared helpers for the maintenance, rollback and inspect tests: small snowberg-like tables and real loads."""

from __future__ import annotations

import time
from typing import Any

from snowberg.iceberg import state

DDL = "CREATE TABLE {t} (ID NUMBER(38,0), AMOUNT NUMBER(10,2), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ(9))"
NOW = "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)"


def state_props(i: int, run_id: str | None = None) -> dict[str, str]:
    return {
        state.WATERMARK: str(i),
        state.CURSOR_KIND: "number",
        state.RUN_ID: run_id or f"run{i}",
        state.MODE: "incremental",
        state.WINDOW_LOW: str(i - 1),
        state.WINDOW_HIGH: str(i),
        state.ROWS: "10",
        state.VERSION: "1",
    }


def small_table(catalog: Any, runs: int, *, rows: int = 10, partitioned: bool = False, name: str = "ns.t") -> Any:
    """A table written like snowberg writes it: one append per run, state in the summary, no rebase."""
    import pyarrow as pa
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "grp", LongType(), required=False),
        NestedField(3, "note", StringType(), required=False),
    )
    spec = (
        PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="grp"))
        if partitioned
        else PartitionSpec()
    )
    catalog.create_namespace_if_not_exists(name.split(".")[0])
    t = catalog.create_table(name, schema=schema, partition_spec=spec, properties={"commit.retry.num-retries": "0"})
    for i in range(1, runs + 1):
        ids = list(range((i - 1) * rows, i * rows))
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "grp": pa.array([x % 3 for x in ids], pa.int64()),
                "note": pa.array([f"row {x}" for x in ids], pa.string()),
            }
        )
        t.append(data, snapshot_properties=state_props(i))
    return catalog.load_table(name)


def rows_of(table: Any, **scan: Any) -> list[dict[str, Any]]:
    return sorted(table.scan(**scan).to_arrow().to_pylist(), key=lambda r: r["id"])


def wait_ms() -> None:
    """Snapshot timestamps are milliseconds: keep commits in distinct milliseconds."""
    time.sleep(0.002)


def table_cfg(sfdb: Any, **over: Any) -> Any:
    from snowberg.config.table_config import parse_config

    entry: dict[str, Any] = {
        "name": "t",
        "source": {"table": sfdb.table("SRC")},
        "target": "ns.t",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        **over,
    }
    return parse_config({"tables": [entry]}).tables[0]


def insert(sfdb: Any, ids: range, updated: str, note: str = "a") -> None:
    ts = NOW if updated == "now" else f"'{updated}'::TIMESTAMP_NTZ"
    rows = ", ".join(f"({i}, {i}.25, '{note}', {ts})" for i in ids)
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES {rows}")


def load(cfg: Any, sfdb: Any, catalog: Any, variables: Any, run_id: str) -> Any:
    """One scheduled run through the library: reconcile, plan, load, publish."""
    from snowberg.load.extract import load_window
    from snowberg.load.plan import plan_run
    from snowberg.load.publish import publish, reconcile_before_plan

    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, sfdb.conn, table, run_id=run_id)
    r = load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)
    return r


def source_rows(sfdb: Any) -> list[tuple[Any, ...]]:
    return sorted((int(r[0]), str(r[1])) for r in sfdb.sql(f"SELECT ID, NOTE FROM {sfdb.table('SRC')}"))


def lake_pairs(catalog: Any, name: str = "ns.t") -> list[tuple[Any, ...]]:
    return sorted((int(r["id"]), str(r["note"])) for r in catalog.load_table(name).scan().to_arrow().to_pylist())
