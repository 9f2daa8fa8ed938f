"""Push-down unload: Snowflake writes Parquet to a stage in the lake, snowberg registers the files.

The emulator (fakesnow 0.12) cannot run ``COPY INTO @stage``, so
``UnloadingSnowflake`` adds exactly that to it: it runs the COPY's own SELECT
on the emulator (so the generated SQL is executed for real) and writes the
result the way Snowflake documents its Parquet unload with
``ENABLE_UNLOAD_PHYSICAL_TYPE_OPTIMIZATION = FALSE`` and ``HEADER = TRUE``:
column names as selected, logical types (NUMBER → DECIMAL(p,s), timestamps
in microseconds, TIMESTAMP_TZ/LTZ as UTC instants), no Iceberg field ids,
snappy, ``data_<query id>_<n>_0_0.snappy.parquet`` files split by size and by
``PARTITION BY`` folder, and answers with DETAILED_OUTPUT rows (FILE_NAME,
FILE_SIZE, ROW_COUNT). The live lane runs the real statement.

What these prove
* The COPY statement: stage path validated and quoted, columns aliased to
  their Iceberg names, JSON text for VARIANT, the window's bounds bound as
  parameters (never in the text), HEADER/DETAILED_OUTPUT/INCLUDE_QUERY_ID and
  PARTITION BY for time partitions; bucket partitions refused.
* A push-down load registers the files in place (no data file rewritten, no
  row through the worker), in one commit with the watermark; a retry after
  the commit registers nothing; a retry after a failed commit clears the
  stage folder and registers once.
* Files are refused before anything is committed when their schema is not
  the table's (a long column unloaded as DECIMAL, an extra or missing
  column, nanosecond timestamps, field ids) or when the rows disagree with
  COPY's report; a merge table that already holds data is refused.
* A day-partitioned table gets each file's partition from its statistics.
* live: the real COPY INTO an external stage, registered and read back.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from snowberg.config.table_config import parse_config
from snowberg.load.unload import (
    UnloadError,
    UnloadTarget,
    copy_sql,
    parse_copy_output,
    register_files,
    schema_problems,
    unload_window,
)

COPY_RE = re.compile(
    r"^COPY INTO @(?P<stage>\S+?)/(?P<path>[^ ]+)/ FROM \((?P<query>SELECT .*?)\) "
    r"(?:PARTITION BY \((?P<part>.*)\) )?FILE_FORMAT = \(TYPE = PARQUET COMPRESSION = SNAPPY\) "
    r"HEADER = TRUE MAX_FILE_SIZE = (?P<size>\d+) DETAILED_OUTPUT = TRUE INCLUDE_QUERY_ID = TRUE$",
    re.S,
)


def _snowflake_arrow_type(md: Any, arrow_t: pa.DataType) -> pa.DataType:
    """The Parquet type Snowflake writes for a result column (logical types, microseconds)."""
    from snowberg.mapping.columns import SnowflakeColumn

    col = SnowflakeColumn.from_metadata(md)
    if col.type == "NUMBER":
        return pa.decimal128(col.precision or 38, col.scale or 0)
    if col.type == "TIMESTAMP_NTZ":
        return pa.timestamp("us")
    if col.type in ("TIMESTAMP_LTZ", "TIMESTAMP_TZ"):
        return pa.timestamp("us", tz="UTC")
    if col.type == "TIME":
        return pa.time64("us")
    if col.type in ("TEXT", "VARIANT", "OBJECT", "ARRAY"):
        return pa.string()
    return arrow_t


class UnloadingSnowflake:
    """The emulator, plus COPY INTO @stage … PARQUET as Snowflake documents it (see module docstring)."""

    def __init__(
        self,
        conn: Any,
        stage_root: Path,
        *,
        rows_per_file: int = 700,
        nanos: bool = False,
        ignore_partition_by: bool = False,
        misreport_rows: int = 0,
    ) -> None:
        self.conn, self.root = conn, stage_root
        self.rows_per_file, self.nanos, self.ignore_partition_by, self.misreport_rows = (
            rows_per_file,
            nanos,
            ignore_partition_by,
            misreport_rows,
        )
        self.statements: list[str] = []
        self.copies = 0

    def cursor(self) -> Any:
        return _Cursor(self)

    def copy(self, m: re.Match[str], params: Any) -> tuple[list[tuple[Any, ...]], list[tuple[str]]]:
        self.copies += 1
        query, part = m.group("query"), None if self.ignore_partition_by else m.group("part")
        if part:
            query = query.replace("SELECT ", f'SELECT ({part}) AS "__part", ', 1)
        cur = self.conn.cursor()
        cur.execute(query, params)
        mds = list(cur._description if getattr(cur, "_description", None) else cur.description)
        table = cur.fetch_arrow_all()
        cur.close()
        folder = self.root / m.group("path")
        qid = uuid.uuid4()
        out = []
        if table is None:
            return [], [("FILE_NAME",), ("FILE_SIZE",), ("ROW_COUNT",)]
        fields, arrays = [], []
        for md, name in zip(mds, table.column_names, strict=True):
            if name == "__part":
                continue
            t = _snowflake_arrow_type(md, table.schema.field(name).type)
            if self.nanos and pa.types.is_timestamp(t):
                t = pa.timestamp("ns", tz=t.tz)
            fields.append(pa.field(name, t))
            arrays.append(table.column(name).cast(t))
        shaped = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
        groups: dict[str, list[int]] = {}
        parts = table.column("__part").to_pylist() if part else [""] * table.num_rows
        for i, p in enumerate(parts):
            groups.setdefault(p, []).append(i)
        n = 0
        for p, idx in sorted(groups.items()):
            sub = shaped.take(pa.array(idx))
            for start in range(0, sub.num_rows, self.rows_per_file):
                chunk = sub.slice(start, self.rows_per_file)
                name = f"{p + '/' if p else ''}data_{qid}_{n}_0_0.snappy.parquet"
                path = folder / name
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(chunk, path, compression="snappy", store_schema=False)
                out.append((name, path.stat().st_size, chunk.num_rows + (self.misreport_rows if n == 0 else 0)))
                n += 1
        return out, [("FILE_NAME",), ("FILE_SIZE",), ("ROW_COUNT",)]


class _Cursor:
    def __init__(self, outer: UnloadingSnowflake) -> None:
        self.outer = outer
        self.cur = outer.conn.cursor()
        self._rows: list[tuple[Any, ...]] | None = None
        self._desc: Any = None

    def execute(self, sql: str, params: Any = None) -> Any:
        self.outer.statements.append(sql)
        self._rows = None
        if sql == "ALTER SESSION SET ENABLE_UNLOAD_PHYSICAL_TYPE_OPTIMIZATION = FALSE":
            self._rows = []
            return self
        if sql.startswith("REMOVE @"):
            path = sql.split("/", 1)[1].rstrip("/")
            shutil.rmtree(self.outer.root / path, ignore_errors=True)
            self._rows = []
            return self
        m = COPY_RE.match(sql)
        if sql.startswith("COPY INTO"):
            assert m, f"COPY statement not in the expected shape: {sql}"
            self._rows, self._desc = self.outer.copy(m, params)
            return self
        return self.cur.execute(sql, params)

    def fetchall(self) -> Any:
        return self._rows if self._rows is not None else self.cur.fetchall()

    @property
    def description(self) -> Any:
        return self._desc if self._rows is not None else self.cur.description

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cur, name)


def make_source(db: Any, n: int = 3_000, *, customer_type: str = "NUMBER(38,0)") -> str:
    name = db.table("ORDERS")
    db.sql(
        f"CREATE OR REPLACE TABLE {name} (\n"
        f"        ORDER_ID NUMBER(38,0), CUSTOMER_ID {customer_type}, AMOUNT NUMBER(12,2), RATE FLOAT, "
        "CHANNEL VARCHAR(16),\n"
        "        IS_DELIVERY BOOLEAN, ORDER_DATE DATE, DETAILS VARIANT, PLACED_AT TIMESTAMP_TZ(6), "
        "UPDATED_AT TIMESTAMP_NTZ(6))"
    )
    db.sql(f"""INSERT INTO {name}
        SELECT seq4() + 1, MOD(seq4() * 7919, 25000) + 1, (MOD(seq4() * 53, 1500) + 300) / 100, MOD(seq4(), 10) / 40,
               CASE MOD(seq4(), 3) WHEN 0 THEN 'app' WHEN 1 THEN 'walk-up' ELSE 'phone' END, MOD(seq4(), 5) = 0,
               CAST(DATEADD(second, -MOD(seq4() * 7919, 432000), '2026-10-01 00:00:00'::TIMESTAMP_NTZ) AS DATE),
               OBJECT_CONSTRUCT('n', seq4(), 'tag', 'x'),
               DATEADD(second, -MOD(seq4() * 7919, 432000), '2026-10-01 00:00:00'::TIMESTAMP_TZ),
               DATEADD(second, 60 - MOD(seq4() * 7919, 432000), '2026-10-01 00:00:00'::TIMESTAMP_NTZ)
        FROM TABLE(GENERATOR(ROWCOUNT => {n}))""")
    return name


def cfg_for(src: str, **over: Any) -> Any:
    entry = {
        "name": "orders",
        "source": {"table": src},
        "target": "shop.orders",
        "cursor": {"column": "updated_at"},
        "primary_key": ["order_id"],
    }
    entry.update(over)
    return parse_config({"tables": [entry]}).tables[0]


def plan(cfg: Any, conn: Any, catalog: Any, run_id: str, **kw: Any) -> Any:
    from snowberg.iceberg.tables import load_table_or_none
    from snowberg.load.plan import plan_run

    return plan_run(cfg, conn, load_table_or_none(catalog, cfg), run_id=run_id, **kw)


@pytest.fixture
def stage(tmp_path: Path) -> tuple[Path, UnloadTarget]:
    root = tmp_path / "stage"
    root.mkdir()
    return root, UnloadTarget(stage="LAKE_DB.PUBLIC.LAKE_STAGE", stage_url=f"file://{root}")


def data_files(catalog: Any, ident: str = "shop.orders") -> set[str]:
    return {t.file.file_path for t in catalog.load_table(ident).scan().plan_files()}


# ---------------------------------------------------------------------------
# the statement


def test_the_copy_writes_the_attempts_folder_partitioned_like_the_table_and_binds_the_bound(
    sfdb: Any, catalog: Any
) -> None:
    from snowberg.load.extract import mapping_options
    from snowberg.mapping.rules import map_columns
    from snowberg.snowflake.source import result_columns

    src = make_source(sfdb, 10)
    cfg = cfg_for(src, partition_by=["day(order_date)", "month(placed_at)"])
    w = plan(cfg, sfdb.conn, catalog, "scheduled__2026-10-01T00:00:00+00:00")
    cur = sfdb.conn.cursor()
    cur.execute(f"SELECT * FROM {src} LIMIT 0")
    cols = map_columns(result_columns(cur), mapping_options(cfg))
    target = UnloadTarget(stage="LAKE_DB.PUBLIC.LAKE_STAGE", stage_url="s3://lake/wh/shop/orders/data")
    sql, params = copy_sql(cfg, w, cols, target)
    assert re.match(
        r'COPY INTO @"LAKE_DB"\."PUBLIC"\."LAKE_STAGE"/snowberg-unload/orders/'
        r"scheduled__2026-10-01T00_00_00_00_00-[0-9a-f]{16}/try-1/ FROM \(SELECT ",
        sql,
    )
    assert 'TO_JSON("DETAILS") AS "details"' in sql and '"ORDER_ID" AS "order_id"' in sql
    assert (
        "PARTITION BY ('order_date_day=' || COALESCE(TO_VARCHAR(\"ORDER_DATE\", 'YYYY-MM-DD'), '_null') || '/' || "
        in sql
    )
    assert "CONVERT_TIMEZONE('UTC', \"PLACED_AT\")" in sql  # time partitions of instants are UTC
    for option in (
        "TYPE = PARQUET",
        "HEADER = TRUE",
        "DETAILED_OUTPUT = TRUE",
        "INCLUDE_QUERY_ID = TRUE",
        "MAX_FILE_SIZE = 268435456",
    ):
        assert option in sql
    assert params == {"high": w.high} and w.high not in sql  # the window's bound is a bind parameter
    assert COPY_RE.match(sql)
    assert re.fullmatch(
        r"s3://lake/wh/shop/orders/data/snowberg-unload/orders/scheduled__2026-10-01T00_00_00_00_00-[0-9a-f]{16}/"
        r"try-1/order_date_day=2026-10-01/data_x_0_0_0\.snappy\.parquet",
        target.lake_path(cfg, w.run_id, "order_date_day=2026-10-01/data_x_0_0_0.snappy.parquet"),
    )


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"stage": 'DB.S.X"; DROP TABLE T; --'}, "stage name"),
        ({"stage": "STG"}, "stage name"),
        ({"prefix": "a/../b"}, "prefix"),
        ({"prefix": "a b"}, "prefix"),
        ({"stage_url": "lake/wh"}, "URL"),
        ({"max_file_size": 10}, "max_file_size"),
    ],
)
def test_target_is_validated(kw: dict[str, Any], match: str) -> None:
    args = {"stage": "DB.S.STG", "stage_url": "s3://lake/wh", **kw}
    with pytest.raises(ValueError, match=match):
        UnloadTarget(**args)


@pytest.mark.parametrize("prefix", ["runs\n", "runs/\n/x", "r\u0663"])
def test_an_unload_prefix_with_a_newline_or_a_non_ascii_character_is_refused(prefix: str) -> None:
    # `$` in re.match matches before a trailing newline, and [A-Za-z0-9] is ASCII already; the whole part
    # must be checked (fullmatch), or "runs\n" becomes a folder name with a newline in the stage path.
    with pytest.raises(ValueError, match="unload prefix"):
        UnloadTarget(stage="DB.S.STG", stage_url="s3://lake/wh", prefix=prefix)


def test_file_names_from_copy_cannot_escape_the_run_folder() -> None:
    cfg = cfg_for("DB.S.T")
    t = UnloadTarget(stage="DB.S.STG", stage_url="s3://lake/wh")
    with pytest.raises(UnloadError):
        t.lake_path(cfg, "r1", "../../other/data.parquet")


def test_bucket_partitions_are_refused(sfdb: Any, catalog: Any) -> None:
    from snowberg.load.extract import mapping_options
    from snowberg.mapping.rules import map_columns
    from snowberg.snowflake.source import result_columns

    src = make_source(sfdb, 10)
    cfg = cfg_for(src, partition_by=["bucket[16](order_id)"])
    cur = sfdb.conn.cursor()
    cur.execute(f"SELECT * FROM {src} LIMIT 0")
    cols = map_columns(result_columns(cur), mapping_options(cfg))
    with pytest.raises(UnloadError, match="bucket"):
        copy_sql(cfg, plan(cfg, sfdb.conn, catalog, "r1"), cols, UnloadTarget(stage="D.S.STG", stage_url="s3://l/w"))


def test_parse_copy_output_by_column_name() -> None:
    rows = [(10, "data_1.parquet", 3), (20, "data_2.parquet", 4)]
    desc = [("FILE_SIZE",), ("FILE_NAME",), ("ROW_COUNT",)]
    files = parse_copy_output(rows, desc)
    assert [(f.name, f.size, f.rows) for f in files] == [("data_1.parquet", 10, 3), ("data_2.parquet", 20, 4)]


# ---------------------------------------------------------------------------
# registering (emulator + Snowflake-shaped files)


def test_push_down_first_load_registers_files_in_place_once(
    sfdb: Any, catalog: Any, stage: Any, monkeypatch: Any
) -> None:
    root, target = stage
    src = make_source(sfdb, 3_000)
    cfg = cfg_for(src)
    sf = UnloadingSnowflake(sfdb.conn, root)
    w = plan(cfg, sf, catalog, "r1")

    # the first attempt unloads, then its commit fails: nothing registered
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:before_commit")
    with pytest.raises(RuntimeError, match="injected"):
        unload_window(cfg, sf, catalog, w, target)
    monkeypatch.delenv("SNOWBERG_FAULT")
    assert catalog.load_table("shop.orders").current_snapshot() is None
    first_files = {p for p in (root).rglob("*.parquet")}
    assert first_files

    # the retry clears the run's folder, unloads again and registers once
    out = unload_window(cfg, sf, catalog, w, target)
    assert out["status"] == "committed" and out["rows"] == 3_000 and out["data_files"] >= 4
    assert any(s.startswith("REMOVE @") for s in sf.statements)
    assert "ALTER SESSION SET ENABLE_UNLOAD_PHYSICAL_TYPE_OPTIMIZATION = FALSE" in sf.statements
    unloaded = {f"file://{p}" for p in root.rglob("*.parquet")}
    assert data_files(catalog) == unloaded  # registered where Snowflake wrote them: nothing rewritten
    assert not (first_files & {Path(p.removeprefix("file://")) for p in unloaded})

    t = catalog.load_table("shop.orders")
    rows = t.scan().to_arrow()
    assert rows.num_rows == 3_000 and len(set(rows.column("order_id").to_pylist())) == 3_000
    assert rows.column("details").to_pylist()[0].startswith("{")
    assert str(rows.schema.field("placed_at").type) == "timestamp[us, tz=UTC]"
    snap = t.current_snapshot()
    assert snap is not None and snap.summary.additional_properties["snowberg.watermark"] == w.new_watermark
    assert snap.summary.additional_properties["snowberg.rows"] == "3000"

    # a retry after the commit landed registers nothing, and does not even unload
    copies = sf.copies
    again = unload_window(cfg, sf, catalog, w, target)
    assert again["status"] == "already_committed" and sf.copies == copies
    assert catalog.load_table("shop.orders").scan().to_arrow().num_rows == 3_000


def test_unload_folder_is_keyed_by_the_whole_run_id_and_the_try() -> None:
    cfg = cfg_for("DB.S.T")
    target = UnloadTarget(stage="LAKE_DB.PUBLIC.LAKE_STAGE", stage_url="s3://lake/wh")
    long = "backfill__" + "x" * 120
    paths = {target.run_path(cfg, long + "a"), target.run_path(cfg, long + "b"), target.run_path(cfg, long + "a", 2)}
    assert len(paths) == 3  # ids sharing their first 100+ characters, and two tries of one run: three folders
    assert all(len(p) < 160 for p in paths)


def test_a_cleared_run_never_removes_files_a_snapshot_references(sfdb: Any, catalog: Any, stage: Any) -> None:
    root, target = stage
    src = make_source(sfdb, 1_000)
    cfg = cfg_for(src, primary_key=[])
    sf = UnloadingSnowflake(sfdb.conn, root)
    run_id = "manual__" + "2026-10-01T00:00:00.000000+00:00" * 4  # longer than 100 characters
    w1 = plan(cfg, sf, catalog, run_id)
    assert unload_window(cfg, sf, catalog, w1, target, try_number=1)["status"] == "committed"
    committed_files = data_files(catalog)
    # the run is cleared and re-planned (a new window high, so not "already committed"); it runs as try 2
    sfdb.sql(
        f"UPDATE {src} SET UPDATED_AT = CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ) "
        "WHERE ORDER_ID <= 10"
    )
    w2 = plan(cfg, sf, catalog, run_id)
    assert w2.high != w1.high
    assert unload_window(cfg, sf, catalog, w2, target, try_number=2)["rows"] == 10
    assert all(Path(p.removeprefix("file://")).exists() for p in committed_files)
    assert catalog.load_table("shop.orders").scan().to_arrow().num_rows == 1_010
    # even a try number seen before (a reset count) never clears a folder whose files a snapshot references
    sfdb.sql(
        f"UPDATE {src} SET UPDATED_AT = CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ) "
        "WHERE ORDER_ID <= 5"
    )
    w3 = plan(cfg, sf, catalog, run_id)
    removes = sum(s.startswith("REMOVE") for s in sf.statements)
    with pytest.raises(UnloadError, match="referenced by snapshots"):
        unload_window(cfg, sf, catalog, w3, target, try_number=1)
    assert sum(s.startswith("REMOVE") for s in sf.statements) == removes
    assert all(Path(p.removeprefix("file://")).exists() for p in committed_files)
    assert catalog.load_table("shop.orders").scan().to_arrow().num_rows == 1_010


def test_a_long_column_unloaded_as_decimal_is_refused(sfdb: Any, catalog: Any, stage: Any) -> None:
    root, target = stage
    src = make_source(sfdb, 500, customer_type="NUMBER(10,0)")  # maps to long; Snowflake writes DECIMAL(10,0)
    cfg = cfg_for(src)
    sf = UnloadingSnowflake(sfdb.conn, root)
    with pytest.raises(UnloadError, match=r"customer_id.*decimal128\(10, 0\).*int64.*extract path"):
        unload_window(cfg, sf, catalog, plan(cfg, sf, catalog, "r1"), target)
    assert catalog.load_table("shop.orders").current_snapshot() is None


def test_nanosecond_files_and_row_count_mismatch_are_refused(sfdb: Any, catalog: Any, stage: Any) -> None:
    root, target = stage
    src = make_source(sfdb, 500)
    cfg = cfg_for(src)
    with pytest.raises(UnloadError, match="timestamp_nanos"):
        unload_window(
            cfg, UnloadingSnowflake(sfdb.conn, root, nanos=True), catalog, plan(cfg, sfdb.conn, catalog, "r1"), target
        )
    with pytest.raises(UnloadError, match="COPY reported"):
        unload_window(
            cfg,
            UnloadingSnowflake(sfdb.conn, root, misreport_rows=1),
            catalog,
            plan(cfg, sfdb.conn, catalog, "r2"),
            target,
        )
    assert catalog.load_table("shop.orders").current_snapshot() is None


def test_schema_problems_names_every_column() -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import DecimalType, LongType, NestedField, StringType, TimestampType

    table = Schema(
        NestedField(1, "id", LongType()),
        NestedField(2, "amount", DecimalType(12, 2)),
        NestedField(3, "name", StringType()),
        NestedField(4, "ts", TimestampType()),
    )
    ok = pa.schema(
        [("id", pa.int32()), ("amount", pa.decimal128(10, 2)), ("name", pa.string()), ("ts", pa.timestamp("us"))]
    )
    assert schema_problems(table, ok) == []  # int → long and decimal(10,2) → decimal(12,2) are Iceberg promotions
    bad = pa.schema(
        [
            pa.field("id", pa.decimal128(18, 0), metadata={b"PARQUET:field_id": b"1"}),
            ("amount", pa.decimal128(12, 3)),
            ("ts", pa.timestamp("ns")),
            ("extra", pa.string()),
        ]
    )
    problems = "\n".join(schema_problems(table, bad))
    for needle in (
        "field id",
        "'extra' is in the file but not in the table",
        "'name' is in the table but not in the file",
        "'id': the file has decimal128(18, 0)",
        "'amount'",
        "'ts': the file has timestamp[ns]",
    ):
        assert needle in problems, problems


def test_merge_table_with_data_is_refused(sfdb: Any, catalog: Any, stage: Any, variables: Any) -> None:
    from snowberg.load.publish import publish

    root, target = stage
    src = make_source(sfdb, 500)
    cfg = cfg_for(src)
    sf = UnloadingSnowflake(sfdb.conn, root)
    w = plan(cfg, sf, catalog, "r1")
    unload_window(cfg, sf, catalog, w, target)
    publish(cfg, catalog, w, variables)
    sfdb.sql(
        f"UPDATE {src} SET AMOUNT = 0, "
        "UPDATED_AT = CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ(6)) WHERE ORDER_ID <= 10"
    )
    w2 = plan(cfg, sf, catalog, "r2")
    assert w2.rows_in_window == 10
    with pytest.raises(UnloadError, match="extract path"):
        unload_window(cfg, sf, catalog, w2, target)
    # a full refresh replaces everything: allowed
    w3 = plan(cfg, sf, catalog, "r3", mode="full_refresh")
    assert unload_window(cfg, sf, catalog, w3, target)["rows"] == 500
    rows = catalog.load_table("shop.orders").scan().to_arrow()
    assert rows.num_rows == 500 and sum(1 for a in rows.column("amount").to_pylist() if a == 0) == 10


def test_day_partitioned_table_gets_partitions_from_file_statistics(
    sfdb: Any, catalog: Any, stage: Any, tmp_path: Path
) -> None:
    root, target = stage
    src = make_source(sfdb, 2_000)
    cfg = cfg_for(src, partition_by=["day(order_date)"])
    sf = UnloadingSnowflake(sfdb.conn, root)
    out = unload_window(cfg, sf, catalog, plan(cfg, sf, catalog, "r1"), target)
    assert out["rows"] == 2_000
    t = catalog.load_table("shop.orders")
    days = {}
    for task in t.scan().plan_files():
        days.setdefault(task.file.partition[0], 0)
        days[task.file.partition[0]] += task.file.record_count
    assert len(days) >= 5 and sum(days.values()) == 2_000  # orders over 5 days
    counts = {
        d: c
        for d, c in sfdb.sql(f"SELECT DATEDIFF(day, '1970-01-01'::DATE, ORDER_DATE), COUNT(*) FROM {src} GROUP BY 1")
    }
    assert days == counts
    from pyiceberg.expressions import EqualTo

    one_day = min(counts)
    assert (
        t.scan(
            row_filter=EqualTo(
                "order_date",
                str(__import__("datetime").date(1970, 1, 1) + __import__("datetime").timedelta(days=one_day)),
            )
        )
        .to_arrow()
        .num_rows
        == counts[one_day]
    )

    # without PARTITION BY a file spans several days: refused, nothing registered
    other = tmp_path / "stage2"
    other.mkdir()
    cfg2 = cfg_for(src, partition_by=["day(order_date)"], target="shop.orders2", name="orders2")
    sf2 = UnloadingSnowflake(sfdb.conn, other, ignore_partition_by=True, rows_per_file=5_000)
    with pytest.raises(ValueError, match="partition"):
        unload_window(
            cfg2,
            sf2,
            catalog,
            plan(cfg2, sf2, catalog, "r1"),
            UnloadTarget(stage="D.S.STG", stage_url=f"file://{other}"),
        )
    assert catalog.load_table("shop.orders2").current_snapshot() is None


def test_register_files_on_its_own_refuses_files_already_in_the_table(sfdb: Any, catalog: Any, stage: Any) -> None:
    """``register_files`` is usable on its own (files unloaded by another tool into the lake)."""
    root, target = stage
    src = make_source(sfdb, 800)
    cfg = cfg_for(src, primary_key=[])  # append mode: registering more files is allowed, the same files are not
    sf = UnloadingSnowflake(sfdb.conn, root)
    w = plan(cfg, sf, catalog, "r1")
    unload_window(cfg, sf, catalog, w, target)
    paths = sorted(data_files(catalog))
    with pytest.raises(RuntimeError, match="already in the table"):  # the gate's duplicate check, under another run id
        from dataclasses import replace

        register_files(cfg, catalog, replace(w, run_id="r9", base_watermark=w.new_watermark), paths)
    assert catalog.load_table("shop.orders").scan().to_arrow().num_rows == 800


# ---------------------------------------------------------------------------
# live lane: the real COPY INTO an external stage

LIVE = (
    "SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT",
    "SNOWBERG_LIVE_SNOWFLAKE_USER",
    "SNOWBERG_LIVE_SNOWFLAKE_PASSWORD",
    "SNOWBERG_LIVE_SNOWFLAKE_WAREHOUSE",
    "SNOWBERG_LIVE_UNLOAD_STAGE",
    "SNOWBERG_LIVE_UNLOAD_STAGE_URL",
)


@pytest.mark.live
@pytest.mark.skipif(
    not all(os.environ.get(k) for k in LIVE), reason="needs SNOWBERG_LIVE_* credentials and an unload stage"
)
def test_live_copy_into_stage_and_register(tmp_path: Path) -> None:
    """Real Snowflake: the generated COPY runs, DESC STAGE matches stage_url, the files pass the schema check.

    SNOWBERG_LIVE_UNLOAD_STAGE is an external stage (DB.SCHEMA.NAME) on storage the
    lake can read with the ambient credentials (pyiceberg's FileIO, e.g. AWS_* for s3://);
    SNOWBERG_LIVE_UNLOAD_STAGE_URL is that stage's URL.
    """
    import snowflake.connector
    from pyiceberg.catalog.sql import SqlCatalog

    from snowberg.snowflake.session import session_parameters

    kw: dict[str, Any] = {
        k: os.environ[f"SNOWBERG_LIVE_SNOWFLAKE_{k.upper()}"] for k in ("account", "user", "password", "warehouse")
    }
    if os.environ.get("SNOWBERG_LIVE_SNOWFLAKE_ROLE"):
        kw["role"] = os.environ["SNOWBERG_LIVE_SNOWFLAKE_ROLE"]
    conn = snowflake.connector.connect(**kw, session_parameters=session_parameters(None))
    db = f"SNOWBERG_TEST_UNLOAD_{uuid.uuid4().hex[:8].upper()}"
    cur = conn.cursor()
    try:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE SCHEMA {db}.S")
        cur.execute(
            f"CREATE TABLE {db}.S.ORDERS (ORDER_ID NUMBER(38,0), AMOUNT NUMBER(12,2), RATE FLOAT, "
            "CHANNEL VARCHAR(16),\n"
            "            IS_DELIVERY BOOLEAN, ORDER_DATE DATE, DETAILS VARIANT, PLACED_AT TIMESTAMP_TZ(6), "
            "UPDATED_AT TIMESTAMP_NTZ(6))"
        )
        cur.execute(f"""INSERT INTO {db}.S.ORDERS SELECT seq4() + 1, (MOD(seq4() * 53, 1500) + 300) / 100, \
MOD(seq4(), 10) / 40,
            'app', MOD(seq4(), 5) = 0, DATEADD(day, -MOD(seq4(), 5), '2026-10-01'::DATE), OBJECT_CONSTRUCT('n', seq4()),
            DATEADD(second, -seq4(), '2026-10-01 00:00:00 +02:00'::TIMESTAMP_TZ),
            DATEADD(second, -seq4(), '2026-10-01 00:00:00'::TIMESTAMP_NTZ) FROM TABLE(GENERATOR(ROWCOUNT => 5000))""")
        stage_name, stage_url = os.environ["SNOWBERG_LIVE_UNLOAD_STAGE"], os.environ["SNOWBERG_LIVE_UNLOAD_STAGE_URL"]
        cur.execute(f"DESC STAGE {stage_name}")
        desc = {str(r[1]).upper(): str(r[3]) for r in cur.fetchall()}
        assert stage_url.rstrip("/").split("://", 1)[1] in desc.get("URL", "").replace('"', "").replace(
            "[", ""
        ).replace("]", "")
        cfg = cfg_for(f"{db}.S.ORDERS", partition_by=["day(order_date)"])
        (tmp_path / "wh").mkdir()
        catalog = SqlCatalog("live", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
        target = UnloadTarget(stage=stage_name, stage_url=stage_url, prefix=f"snowberg-live-test/{db.lower()}")
        w = plan(cfg, conn, catalog, "live-1")
        try:
            out = unload_window(cfg, conn, catalog, w, target)
        except UnloadError as exc:  # show exactly what Snowflake wrote, then fail
            pytest.fail(f"Snowflake's Parquet does not match the mapping:\n{exc}")
        assert out["rows"] == 5_000
        assert catalog.load_table("shop.orders").scan().to_arrow().num_rows == 5_000
    finally:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()


def test_unload_operator_is_keyword_only_templated_and_runs_push_down(
    sfdb: Any, catalog: Any, stage: Any, monkeypatch: Any
) -> None:
    import snowberg.iceberg.catalogs
    import snowberg.snowflake.hook
    from snowberg.airflow.operators.arguments import operator_arguments
    from snowberg.airflow.operators.scale import SnowbergUnloadOperator

    root, target = stage
    src = make_source(sfdb, 700)
    cfg = cfg_for(src)
    raw = cfg.model_dump(mode="json")
    with pytest.raises(TypeError):
        SnowbergUnloadOperator("unload", raw)  # type: ignore[misc]  # keyword-only
    sf = UnloadingSnowflake(sfdb.conn, root)
    w = plan(cfg, sf, catalog, "r1")
    args = operator_arguments(SnowbergUnloadOperator, cfg)
    args["unload"] = {"stage": target.stage, "stage_url": target.stage_url}
    op = SnowbergUnloadOperator(task_id="unload", window=w.to_dict(), **args)
    assert {"window", "unload"} <= set(op.template_fields)

    class Hook:
        def get_conn(self) -> Any:
            class Conn(UnloadingSnowflake):
                def close(self) -> None:  # the operator closes its connection; the test's stays open
                    pass

            return Conn(sfdb.conn, root)

    monkeypatch.setattr(snowberg.snowflake.hook, "snowflake_hook", lambda conn_id, cfg=None: Hook())
    monkeypatch.setattr(snowberg.iceberg.catalogs, "open_catalog", lambda name: catalog)
    out = op.execute({})
    assert out["status"] == "committed" and out["rows"] == 700
    assert catalog.load_table("shop.orders").scan().to_arrow().num_rows == 700


def zero_five_and_extract(cfg: Any, src: str, sfdb: Any, catalog: Any, variables: Any, run_id: str) -> None:
    """Set AMOUNT of orders 1–5 to 0 in the source (a new cursor value), then one scheduled extract run."""
    from snowberg.load.extract import load_window
    from snowberg.load.publish import publish

    sfdb.sql(
        f"UPDATE {src} SET AMOUNT = 0, "
        "UPDATED_AT = CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ(6)) WHERE ORDER_ID <= 5"
    )
    w = plan(cfg, sfdb.conn, catalog, run_id)
    load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)


def test_a_push_down_full_refresh_of_a_table_with_identifier_fields_loads_the_whole_source(
    sfdb: Any, catalog: Any, stage: Any, variables: Any
) -> None:
    """The extract path made the table (its key as required identifier fields), then a full refresh unloads.

    Snowflake's Parquet declares every column optional; the table's key columns are required. The refresh
    must still register the files (the key holds no NULL), not fail on the schema.
    """
    from snowberg.load.extract import load_window
    from snowberg.load.publish import publish

    root, target = stage
    src = make_source(sfdb, 300)
    cfg = cfg_for(src)
    w1 = plan(cfg, sfdb.conn, catalog, "r1")
    load_window(cfg, sfdb.conn, catalog, w1)
    publish(cfg, catalog, w1, variables)
    table = catalog.load_table("shop.orders")
    assert table.schema().identifier_field_ids, "the extract path declares the key as identifier fields"
    sf = UnloadingSnowflake(sfdb.conn, root)
    w2 = plan(cfg, sf, catalog, "r2", mode="full_refresh")
    assert unload_window(cfg, sf, catalog, w2, target)["rows"] == 300
    publish(cfg, catalog, w2, variables)
    rows = catalog.load_table("shop.orders").scan().to_arrow()
    assert rows.num_rows == 300 and len(set(rows.column("order_id").to_pylist())) == 300
    # The next extract run declares the key again (no key is NULL).
    zero_five_and_extract(cfg, src, sfdb, catalog, variables, "r3")
    after = catalog.load_table("shop.orders")
    assert after.schema().identifier_field_ids == table.schema().identifier_field_ids
    rows = after.scan().to_arrow()
    assert rows.num_rows == 300 and sum(1 for a in rows.column("amount").to_pylist() if a == 0) == 5


@pytest.mark.parametrize("strategy", ["merge_on_read", "copy_on_write"])
def test_updates_after_a_push_down_first_load_replace_the_unloaded_rows(
    sfdb: Any, catalog: Any, stage: Any, variables: Any, strategy: str
) -> None:
    """The documented path for a big table: push-down for the first load, scheduled extract runs after it.

    Snowflake's files carry no Iceberg field ids (they are read through the table's name mapping). The merge
    found no key column in them and so replaced nothing: each updated key was in the lake twice.
    """
    from snowberg.load.publish import publish

    root, target = stage
    src = make_source(sfdb, 300)
    cfg = cfg_for(src, merge_strategy=strategy)
    sf = UnloadingSnowflake(sfdb.conn, root)
    w1 = plan(cfg, sf, catalog, "r1")
    unload_window(cfg, sf, catalog, w1, target)
    publish(cfg, catalog, w1, variables)
    zero_five_and_extract(cfg, src, sfdb, catalog, variables, "r2")
    rows = catalog.load_table("shop.orders").scan().to_arrow()
    ids = rows.column("order_id").to_pylist()
    assert len(ids) == 300 and len(set(ids)) == 300, "an updated key is in the lake twice"
    assert sum(1 for a in rows.column("amount").to_pylist() if a == 0) == 5


def test_compaction_after_a_push_down_first_load_and_merges_keeps_every_row_once(
    sfdb: Any, catalog: Any, stage: Any, variables: Any
) -> None:
    """Maintenance crossing the push-down path: compaction rewrites Snowflake's files (no field ids) and the
    merge-on-read deletes on them; the rows are the source's, once each, and the next merge still replaces."""
    from snowberg.iceberg import maintenance as m
    from snowberg.load.publish import publish

    root, target = stage
    src = make_source(sfdb, 300)
    cfg = cfg_for(src, merge_strategy="merge_on_read")
    sf = UnloadingSnowflake(sfdb.conn, root)
    w1 = plan(cfg, sf, catalog, "r1")
    unload_window(cfg, sf, catalog, w1, target)
    publish(cfg, catalog, w1, variables)
    zero_five_and_extract(cfg, src, sfdb, catalog, variables, "r2")
    table = catalog.load_table("shop.orders")
    assert len(table.inspect.delete_files()) > 0, "the merge wrote no position deletes"
    out = m.compact(table, target_size=64 * 1024 * 1024, min_input_files=1, delete_ratio=0.0)
    assert out.status == "committed", out
    after = catalog.load_table("shop.orders")
    assert len(after.inspect.delete_files()) == 0
    rows = after.scan().to_arrow()
    ids = rows.column("order_id").to_pylist()
    assert len(ids) == 300 and len(set(ids)) == 300
    assert sum(1 for a in rows.column("amount").to_pylist() if a == 0) == 5
    # A merge after the compaction replaces rows in the rewritten files.
    sfdb.sql(
        f"UPDATE {src} SET AMOUNT = 1, "
        "UPDATED_AT = CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ(6)) WHERE ORDER_ID <= 2"
    )
    from snowberg.load.extract import load_window

    w3 = plan(cfg, sfdb.conn, catalog, "r3")
    load_window(cfg, sfdb.conn, catalog, w3)
    publish(cfg, catalog, w3, variables)
    rows = catalog.load_table("shop.orders").scan().to_arrow()
    ids = rows.column("order_id").to_pylist()
    assert len(ids) == 300 and len(set(ids)) == 300
    assert sorted(a for a in rows.column("amount").to_pylist() if a in (0, 1)) == [0, 0, 0, 1, 1]
