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
