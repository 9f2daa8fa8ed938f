"""Source tables for the end-to-end tests, and helpers to read what landed in the lake.

Each test table has its own source table ``E2E.SHOP.<NAME>`` in the emulator,
filled with rows whose ``UPDATED_AT`` spans ten known days
(2026-09-01 .. 2026-09-10, UTC), so a test can compute from the source itself
which rows a window holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

DATABASE, SCHEMA = "E2E", "SHOP"
FIRST_DAY = datetime(2026, 9, 1, tzinfo=UTC)
DAYS = 10
ROWS = 400

DDL = """CREATE OR REPLACE TABLE {db}.{schema}.{table} (
    ORDER_ID NUMBER(38,0),
    AMOUNT NUMBER(10,2),
    NOTE VARCHAR(40),
    IS_PAID BOOLEAN,
    ORDER_DATE DATE,
    UPDATED_AT TIMESTAMP_NTZ(9)
)"""

FILL = """INSERT INTO {db}.{schema}.{table}
SELECT seq4() + 1,
       (MOD(seq4() * 53, 1500) + 300) / 100,
       'v1',
       MOD(seq4(), 3) = 0,
       CAST(DATEADD(minute, MOD(seq4() * 37, {minutes}), '{first}'::TIMESTAMP_NTZ) AS DATE),
       DATEADD(minute, MOD(seq4() * 37, {minutes}), '{first}'::TIMESTAMP_NTZ)
FROM TABLE(GENERATOR(ROWCOUNT => {rows}))"""


def create_source(conn: Any, table: str, rows: int = ROWS) -> int:
    cur = conn.cursor()
    try:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {DATABASE}.{SCHEMA}")
        cur.execute(DDL.format(db=DATABASE, schema=SCHEMA, table=table))
        cur.execute(
            FILL.format(
                db=DATABASE,
                schema=SCHEMA,
                table=table,
                rows=rows,
                minutes=DAYS * 1440,
                first=FIRST_DAY.strftime("%Y-%m-%d %H:%M:%S"),
            )
        )
        cur.execute(f"SELECT COUNT(*) FROM {DATABASE}.{SCHEMA}.{table}")
        return int(cur.fetchone()[0])
    finally:
        cur.close()


def query(conn: Any, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    try:
        cur.execute(sql, params or {})
        return list(cur.fetchall()) if cur.description else []
    finally:
        cur.close()


def ntz(dt: datetime) -> str:
    """A UTC instant as the TIMESTAMP_NTZ literal the source stores."""
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def source_ids(
    conn: Any, table: str, start: datetime | None = None, end: datetime | None = None, where: str = "TRUE"
) -> set[int]:
    sql = f"SELECT ORDER_ID FROM {DATABASE}.{SCHEMA}.{table} WHERE {where}"
    params: dict[str, Any] = {}
    if start is not None:
        sql += " AND UPDATED_AT >= %(start)s::TIMESTAMP_NTZ"
        params["start"] = ntz(start)
    if end is not None:
        sql += " AND UPDATED_AT < %(end)s::TIMESTAMP_NTZ"
        params["end"] = ntz(end)
    return {int(r[0]) for r in query(conn, sql, params)}


def day(n: int) -> datetime:
    """Midnight UTC of the n-th seeded day (0 = 2026-09-01)."""
    return FIRST_DAY + timedelta(days=n)


# ---------------------------------------------------------------------------
# Table config for the test Airflow


def table_entry(name: str, *, schedule: str | None, source_table: str, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "description": f"e2e test table {name}",
        "source": {"table": f"{DATABASE}.{SCHEMA}.{source_table}"},
        "target": f"e2e.{name}",
        "cursor": {"column": "updated_at", "commit_lag": "1s"},
        "primary_key": ["order_id"],
        "number_as_long": ["order_id"],
        "schedule": schedule,
        "tags": ["e2e"],
    }
    entry.update(extra)
    return entry


# One Airflow DAG per entry; each test owns its table(s).
TABLES = [
    table_entry("e2e_sched", schedule="* * * * *", source_table="SCHED_ORDERS"),
    table_entry("e2e_backfill", schedule="@daily", source_table="BF_ORDERS", partition_by=["day(updated_at)"]),
    table_entry("e2e_params", schedule=None, source_table="PARAM_ORDERS"),
    # These two test the load task itself (its one-at-a-time guard; every task through a Celery worker):
    # inline_load_rows 0 keeps their small windows out of the plan task.
    table_entry("e2e_race", schedule="@daily", source_table="RACE_ORDERS", inline_load_rows=0),
    table_entry("e2e_celery", schedule=None, source_table="CELERY_ORDERS", inline_load_rows=0),
    # Backfills of the other cursor kinds: a DATE cursor (whole days) and a NUMBER cursor (numeric bounds).
    table_entry("e2e_bf_date", schedule="@daily", source_table="BF_DATE_ORDERS", cursor={"column": "order_date"}),
    table_entry("e2e_bf_number", schedule="@daily", source_table="BF_NUMBER_ORDERS", cursor={"column": "order_id"}),
]
SOURCES = {t["name"]: t["source"]["table"].rsplit(".", 1)[1] for t in TABLES}


def dag_id(table: str) -> str:
    return f"snowberg_{table}"


def write_tables_config(path: Path, entries: Iterable[dict[str, Any]]) -> Path:
    doc = {
        "defaults": {
            "snowflake_conn_id": "snowflake_default",
            "catalog": "lake",
            "owner": "e2e",
            "retries": 0,
            "retry_delay": "5s",
        },
        "tables": list(entries),
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# ---------------------------------------------------------------------------
# The lake, read from the test process


class Lake:
    def __init__(self, env: dict[str, str]) -> None:
        self.props = {
            "type": "sql",
            "uri": env["PYICEBERG_CATALOG__LAKE__URI"],
            "warehouse": env["PYICEBERG_CATALOG__LAKE__WAREHOUSE"],
        }

    def catalog(self) -> Any:
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog("lake", **{k: v for k, v in self.props.items() if k != "type"})

    def table(self, name: str) -> Any:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.catalog().load_table(("e2e", name))
        except NoSuchTableError:
            return None

    def rows(self, name: str) -> list[dict[str, Any]]:
        t = self.table(name)
        return [] if t is None else list(t.scan().to_arrow().to_pylist())

    def snapshots(self, name: str) -> list[dict[str, str]]:
        """Summary properties of each snapshot on main, oldest first."""
        t = self.table(name)
        if t is None:
            return []
        out = []
        for s in t.snapshots():
            props = dict(s.summary.additional_properties) if s.summary else {}
            props["operation"] = str(s.summary.operation.value) if s.summary else ""
            props["snapshot_id"] = str(s.snapshot_id)
            out.append(props)
        return out

    def watermark(self, name: str) -> str | None:
        from snowberg.iceberg.state import read_state

        st = read_state(self.table(name))
        return st.watermark if st else None
