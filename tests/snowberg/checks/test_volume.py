"""The volume check against the emulator (fakesnow) and a SQLite Iceberg catalog.

The Snowflake side runs the emulator dialect (``HashDialect.EMULATOR``): the
emulator has no ``TO_NUMBER(<hex>, 'XXXXXXX')``; the Snowflake text of the
same queries is checked in ``test_hashdiff.py``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from snowberg.checks import hashdiff as hd
from snowberg.checks.volume_settings import DeletePolicy, VolumeSettings
from snowberg.config.table_config import parse_config

WATERMARK = "2026-01-03 00:00:00.000000"
START = dt.datetime(2026, 1, 1)


def _cfg(sfdb: Any, **extra: Any) -> Any:
    entry = {
        "name": "orders",
        "source": {"table": sfdb.table("SRC")},
        "target": "lake.orders",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        **extra,
    }
    return parse_config({"tables": [entry]}).tables[0]


def _seed(sfdb: Any, catalog: Any, n: int, *, lake_ids: list[int] | None = None) -> Any:
    """``n`` source rows one minute apart from 2026-01-01 (ids 1..n); the lake gets the same rows (or ``lake_ids``)."""
    import pyarrow as pa

    sfdb.sql(f"CREATE OR REPLACE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} SELECT seq4() + 1, DATEADD(minute, seq4() + 1, '2026-01-01'::TIMESTAMP_NTZ) "
        f"FROM TABLE(GENERATOR(ROWCOUNT => {n}))"
    )
    ids = list(range(1, n + 1)) if lake_ids is None else lake_ids
    catalog.create_namespace_if_not_exists("lake")
    t = catalog.create_table(
        "lake.orders", schema=pa.schema([pa.field("id", pa.int64()), pa.field("updated_at", pa.timestamp("us"))])
    )
    t.append(
        pa.table(
            {"id": pa.array(ids, pa.int64()), "updated_at": [START + dt.timedelta(minutes=i) for i in ids]},
            schema=pa.schema([pa.field("id", pa.int64()), pa.field("updated_at", pa.timestamp("us"))]),
        ),
        snapshot_properties={
            "snowberg.watermark": WATERMARK,
            "snowberg.cursor-kind": "timestamp_ntz",
            "snowberg.run-id": "r1",
            "snowberg.mode": "incremental",
            "snowberg.rows": str(len(ids)),
        },
    )
    return t


def _verify(cfg: Any, table: Any, sfdb: Any, **settings: Any) -> Any:
    from snowberg.checks.volume import verify

    s = cfg.volume.model_copy(update=settings) if settings else cfg.volume
    return verify(cfg, table, sfdb.conn, settings=s, dialect=hd.HashDialect.EMULATOR)


def test_equal_tables_pass_with_one_aggregate_query(sfdb: Any, catalog: Any) -> None:
    table = _seed(sfdb, catalog, 2000)
    report = _verify(_cfg(sfdb), table, sfdb)
    assert report.ok, report.to_dict()
    assert report.source_rows == report.lake_rows == 2000
    assert report.snowflake_queries == 2  # describe (LIMIT 0) + per-day counts and checksums


def test_one_missing_lake_row_is_named_with_its_cursor(sfdb: Any, catalog: Any) -> None:
    ids = [i for i in range(1, 3001) if i != 1234]
    table = _seed(sfdb, catalog, 3000, lake_ids=ids)
    report = _verify(_cfg(sfdb), table, sfdb, leaf_rows=50, digits_per_level=1)
    assert not report.ok
    assert [(d.kind, d.key, d.source_cursor) for d in report.differences] == [
        (hd.DiffKind.SOURCE_ONLY, {"id": "1234"}, "2026-01-01 20:34:00.000000")
    ]
    assert report.differing_days == {"2026-01-01": (1439, 1438)}
    assert report.snowflake_queries <= 30
