"""Live lane of the COPY paths: a real Snowflake account reading a lake on cloud storage. Skipped without it.

What the emulator cannot show: ``NUMBER(38,0)`` values beyond 2^63, an ``s3://`` (or ``gcs://``, ``azure://``)
external stage, Snowflake's own Parquet scanner (vectorized, logical types) and its load metadata.

    SNOWBERG_LIVE_SNOWFLAKE_{ACCOUNT,USER,PASSWORD,WAREHOUSE}   (and optionally _ROLE)
    SNOWBERG_LIVE_SYNC_STAGE       an external stage DB.SCHEMA.NAME over storage the lake can write with the
                                   ambient credentials (pyiceberg's FileIO, e.g. AWS_* for s3://)
    SNOWBERG_LIVE_SYNC_STAGE_URL   that stage's URL (DESC STAGE); the test's lake lives in a fresh folder under it

The role needs CREATE DATABASE (the test creates and drops its own) and USAGE on the stage.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from snowberg.core.identifiers import TableName
from snowberg.sync.copy_load import CopyPaths
from snowberg.sync.copy_sql import CopyLoadError, LakeStage, check_copied, copy_sql, parse_copy_result
from snowberg.sync.ddl import target_columns
from snowberg.sync.native import load_native

LIVE = (
    "SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT",
    "SNOWBERG_LIVE_SNOWFLAKE_USER",
    "SNOWBERG_LIVE_SNOWFLAKE_PASSWORD",
    "SNOWBERG_LIVE_SNOWFLAKE_WAREHOUSE",
    "SNOWBERG_LIVE_SYNC_STAGE",
    "SNOWBERG_LIVE_SYNC_STAGE_URL",
)
pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not all(os.environ.get(k) for k in LIVE), reason="needs SNOWBERG_LIVE_* and a lake stage"),
]


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[Any, str, Any, LakeStage]]:
    """(connection, database, lake catalog under the stage's URL, the stage)."""
    import snowflake.connector
    from pyiceberg.catalog.sql import SqlCatalog

    from snowberg.snowflake.session import session_parameters

    kw: dict[str, Any] = {
        k: os.environ[f"SNOWBERG_LIVE_SNOWFLAKE_{k.upper()}"] for k in ("account", "user", "password", "warehouse")
    }
    if os.environ.get("SNOWBERG_LIVE_SNOWFLAKE_ROLE"):
        kw["role"] = os.environ["SNOWBERG_LIVE_SNOWFLAKE_ROLE"]
    conn = snowflake.connector.connect(**kw, session_parameters=session_parameters(None))
    db = f"SNOWBERG_TEST_COPY_{uuid.uuid4().hex[:8].upper()}"
    url = os.environ["SNOWBERG_LIVE_SYNC_STAGE_URL"].rstrip("/") + "/"
    folder = f"snowberg-live-copy-{db.lower()}"
    lake = SqlCatalog("live", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"{url}{folder}")
    lake.create_namespace("shop")
    cur = conn.cursor()
    cur.execute(f"CREATE DATABASE {db}")
    cur.execute(f"CREATE SCHEMA {db}.SHOP")
    try:
        yield conn, db, lake, LakeStage(stage=os.environ["SNOWBERG_LIVE_SYNC_STAGE"], stage_url=url)
    finally:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()


def test_live_every_type_lands_the_same_on_every_path(live) -> None:
    """decimal(38,0) beyond 2^63, decimal(p,s), NaN/±inf, unicode, binary, microseconds, UTC offsets, JSON text,
    nested lists and structs: the same rows through the stage, PUT + COPY and INSERT."""
    import pyarrow as pa

    conn, db, lake, stage = live
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("big", pa.decimal128(38, 0)),
            ("price", pa.decimal128(12, 3)),
            ("ratio", pa.float64()),
            ("name", pa.string()),
            ("raw", pa.binary()),
            ("day", pa.date32()),
            ("at_time", pa.time64("us")),
            ("local_ts", pa.timestamp("us")),
            ("utc_ts", pa.timestamp("us", tz="UTC")),
            ("doc", pa.string()),
        ]
    )
    rows = [
        {
            "id": 1,
            "big": Decimal("12345678901234567890123456789012345678"),
            "price": Decimal("123456789.125"),
            "ratio": float("nan"),
            "name": "ünïcode ☃ 'q'",
            "raw": b"\x00\xff",
            "day": dt.date(2026, 2, 28),
            "at_time": dt.time(23, 59, 59, 999_999),
            "local_ts": dt.datetime(2026, 1, 2, 3, 4, 5, 6),
            "utc_ts": dt.datetime(2026, 1, 2, 3, 4, 5, 7, tzinfo=dt.UTC),
            "doc": '{"a": [1, 2.50]}',
        },
        {"id": 2, "big": Decimal("-9223372036854775809"), "ratio": float("inf")},
        {"id": 3, "ratio": float("-inf")},
    ]
    nested = pa.schema([*schema, ("tags", pa.list_(pa.string())), ("attrs", pa.struct([("d", pa.decimal128(5, 2))]))])
    for name, sch in (("scalars", schema), ("nested", nested)):
        src = lake.create_table(f"shop.{name}", schema=sch)
        extra = {"tags": ["a"], "attrs": {"d": Decimal("1.50")}} if name == "nested" else {}
        src.append(pa.Table.from_pylist([{**r, **(extra if r["id"] == 1 else {})} for r in rows], schema=sch))
        got = {}
        for path, copy in (
            ("insert", None),
            ("put_copy", CopyPaths(copy_min_rows=0)),
            ("stage_copy", CopyPaths(lake_stage=stage, copy_min_rows=0)),
        ):
            target = TableName(database=db, schema="SHOP", table=f"{name}_{path}".upper())
            r = load_native(src, conn, target=target, source_label="live", run_id="live-1", copy=copy)
            assert r.rows == 3
            cur = conn.cursor()
            cur.execute(f'SELECT * FROM {target.quoted()} ORDER BY "ID"')
            got[path] = repr([tuple(x) for x in cur.fetchall()])
            cur.close()
        assert got["put_copy"] == got["insert"] and got["stage_copy"] == got["insert"]


def test_live_copy_load_metadata_follows_the_transaction_and_skips_are_caught(live) -> None:
    """A COPY rolled back leaves no load metadata (the retry loads the file without FORCE); a file loaded before is
    left out of COPY's answer, which the check turns into a failure naming it."""
    import pyarrow as pa

    conn, db, lake, stage = live
    src = lake.create_table("shop.t", schema=pa.schema([("id", pa.int64())]))
    src.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    (task,) = src.scan().plan_files()
    rel = stage.relative(task.file.file_path)
    assert rel is not None
    target = TableName(database=db, schema="SHOP", table="T")
    cur = conn.cursor()
    cur.execute(f'CREATE TABLE {target.quoted()} ("ID" NUMBER(19,0))')
    sql = copy_sql(
        target,
        target_columns(src.schema()),
        {"id": "id"},
        location=stage.location,
        lineage_column=None,
        lineage=None,
        files=[rel],
    )
    cur.execute("BEGIN")
    cur.execute(sql)
    assert check_copied({rel: 3}, parse_copy_result(cur.fetchall(), cur.description), target) == 3
    cur.execute("ROLLBACK")
    cur.execute(sql)  # no FORCE: loaded again, the rolled-back load left no metadata
    assert check_copied({rel: 3}, parse_copy_result(cur.fetchall(), cur.description), target) == 3
    cur.execute(sql)
    with pytest.raises(CopyLoadError, match=f"{rel}: not loaded"):
        check_copied({rel: 3}, parse_copy_result(cur.fetchall(), cur.description), target)
    cur.close()
