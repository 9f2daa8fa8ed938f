"""Test data and constants shared by the lake → Snowflake tests."""

from __future__ import annotations

from typing import Any

PAT = "pat-0123456789abcdef-SECRET"
ROLE = "SYNC_ROLE"
DATABASE = "LAKEHOUSE"


def orders_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("order_id", pa.int64()),
            ("customer", pa.string()),
            ("amount", pa.decimal128(10, 2)),
            ("placed_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def orders(ids: list[int]) -> Any:
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    return pa.table(
        {
            "order_id": ids,
            "customer": [f"customer '{i}'" for i in ids],
            "amount": pa.array([Decimal(i) + Decimal("0.25") for i in ids], pa.decimal128(10, 2)),
            "placed_at": [
                dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=i, microseconds=i) for i in ids
            ],
        },
        schema=orders_schema(),
    )


def remove_orders(table: Any, ids: list[int], strategy: str) -> Any:
    """Remove orders from a source table as another writer would: ``copy_on_write`` (pyiceberg's delete
    rewrites or drops their files) or ``merge_on_read`` (position delete files); returns the table."""
    import pyarrow as pa

    from snowberg.iceberg.merge import write_position_deletes

    if strategy == "copy_on_write":
        table.delete(f"order_id in ({', '.join(map(str, ids))})")
        return table
    tx = table.transaction()
    write_position_deletes(tx, pa.table({"order_id": pa.array(ids, pa.int64())}), {}, io=table.io)
    return tx.commit_transaction()
