"""``columns`` on a stream table: excluded columns are never staged nor written, hashed ones are staged as their
salted SHA-256 (the clear value never reaches the staging table) and a hashed key still merges inserts, updates
and deletes. On the emulator with the stream double (``stream_double.py``)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from streams_harness import Harness

from snowberg.config.table_config import TableConfig
from snowberg.iceberg.identity import ConfigDriftError
from snowberg.mapping.columns import TypeMappingError
from snowberg.snowflake.projection import set_salt
from snowberg.streams.steps import cleanup_step, consume_step, load_step

SALT = "stream-salt-42"


def sha(value: Any) -> str:
    return hashlib.sha256(f"{value}{SALT}".encode()).hexdigest()


def with_columns(h: Harness, **columns: Any) -> None:
    h.cfg = TableConfig.model_validate({**h.cfg.model_dump(mode="json", exclude_defaults=True), "columns": columns})
    if h._pipeline_conn is None:
        h._pipeline_conn = h.connect()
    set_salt(h._pipeline_conn, SALT)


def lake(h: Harness) -> list[dict[str, Any]]:
    return sorted(h.catalog().load_table("shop.orders").scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def test_a_stream_table_stages_and_writes_hashed_and_never_excluded_columns(harness: Harness) -> None:
    h = harness
    with_columns(h, exclude=["amount"], hash=["id", "status"])
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    h.run()
    assert "amount" not in h.catalog().load_table("shop.orders").schema().column_names
    assert [(r["id"], r["status"]) for r in lake(h)] == sorted([(sha(1), sha("new")), (sha(2), sha("new"))])
    h.update(1, "paid")
    h.delete(2)
    h.insert((3, "new", "30.00"))
    # What the consume stages, before the load reads it: hashes, and no AMOUNT column at all.
    consumed = consume_step(h.cfg, h.stream, h._pipeline_conn, h.catalog(), run_id="manual__peek")
    staging = f'"{h.db}"."STAGE"."ORDERS_STAGING"'
    names = [r[0] for r in h.sql(f"SELECT COLUMN_NAME FROM {h.db}.INFORMATION_SCHEMA.COLUMNS "
                                 "WHERE TABLE_NAME = 'ORDERS_STAGING'")]  # fmt: skip
    assert "AMOUNT" not in names and "STATUS" in names
    staged = h.sql(f'SELECT "ID", "STATUS" FROM {staging} WHERE "STATUS" IS NOT NULL')
    assert staged and {s for _, s in staged} <= {sha("new"), sha("paid")}, staged
    assert {i for i, _ in staged} <= {sha(1), sha(2), sha(3)}, staged
    cat = h.catalog()
    load_step(h.cfg, h.stream, h._pipeline_conn, cat, run_id="manual__peek", consumed=consumed)
    cleanup_step(h.cfg, h.stream, h._pipeline_conn, cat)
    # The hashed key merged: one row per key, the update applied, the delete too.
    assert [(r["id"], r["status"]) for r in lake(h)] == sorted([(sha(1), sha("paid")), (sha(3), sha("new"))])


def test_a_newly_hashed_column_is_refused_and_a_newly_excluded_one_is_a_dropped_column(harness: Harness) -> None:
    h = harness
    h.insert((1, "new", "10.00"))
    h.run()
    with_columns(h, hash=["status"])
    with pytest.raises(ConfigDriftError, match="columns.hash"):
        h.run()
    with_columns(h, exclude=["amount"])
    h.update(1, "paid")
    with pytest.raises(TypeMappingError, match="amount"):
        h.run()  # on_column_dropped: fail (the default)


def test_a_changes_backfill_reads_through_the_same_columns(harness: Harness) -> None:
    import time

    from snowberg.streams.changes import backfill_changes

    def now() -> Any:
        time.sleep(0.05)
        (ts,) = h.sql("SELECT CURRENT_TIMESTAMP()")[0]
        time.sleep(0.05)
        return ts

    h = harness
    with_columns(h, exclude=["amount"], hash=["id", "status"])
    h.sql(f'ALTER TABLE "{h.db}"."SRC"."ORDERS" SET CHANGE_TRACKING = TRUE')
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    t0 = now()
    h.update(1, "paid")
    h.delete(2)
    t1 = now()
    res = backfill_changes(
        h.cfg, h.stream, h._pipeline_conn, h.catalog(), start=t0, end=t1, run_id="bf", target="table"
    )
    assert res["keys"] == 2
    rows = lake(h)
    assert [(r["id"], r["status"]) for r in rows] == [(sha(1), sha("paid"))] and "amount" not in rows[0]
