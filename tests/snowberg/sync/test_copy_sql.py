"""The COPY statements of native syncs and the check of COPY's answer (no Snowflake needed).

COPY's answers below are shaped from Snowflake's documentation of ``COPY INTO <table>`` (its output
columns FILE, STATUS, ROWS_PARSED, ROWS_LOADED, ERROR_LIMIT, ERRORS_SEEN, FIRST_ERROR, …; a COPY
whose files were all loaded before answers the single row ``Copy executed with 0 files processed.``
in a ``status`` column). The emulator answers ``LOAD_SKIPPED`` rows instead; both must fail.
"""

from __future__ import annotations

import pytest

from snowberg.core.identifiers import TableName
from snowberg.sync.copy_sql import (
    CopiedFile,
    CopyLoadError,
    LakeStage,
    check_copied,
    copy_sql,
    parse_copy_result,
    raw_copy_problem,
    stage_location,
)
from snowberg.sync.ddl import TargetColumn

TARGET = TableName(database="DB", schema="SHOP", table="ORDERS")
DOC_COLUMNS = [
    (n,)
    for n in (
        "file",
        "status",
        "rows_parsed",
        "rows_loaded",
        "error_limit",
        "errors_seen",
        "first_error",
        "first_error_line",
        "first_error_character",
        "first_error_column_name",
    )
]


def _col(name: str, sql_type: str, semi: bool = False) -> TargetColumn:
    return TargetColumn(source_name=name, name=name.upper(), sql_type=sql_type, semi_structured=semi)


def test_the_lake_files_copy_names_files_casts_and_sets_lineage() -> None:
    cols = [_col("order_id", "NUMBER(38,0)"), _col("placed_at", "TIMESTAMP_TZ(6)"), _col("note", "VARCHAR")]
    sql = copy_sql(
        TARGET,
        cols,
        {"order_id": "order_id", "placed_at": "placed", "note": None},
        location=LakeStage(stage="DB.SHOP.LAKE", stage_url="s3://lake/wh/").location,
        lineage_column="_SNOWBERG_SOURCE_SNAPSHOT_ID",
        lineage=123,
        files=["shop/orders/data/a.parquet", "shop/orders/data/day=2026-01-01/b.parquet"],
        force=True,
    )
    assert sql == (
        'COPY INTO "DB"."SHOP"."ORDERS" ("ORDER_ID", "PLACED_AT", "NOTE", "_SNOWBERG_SOURCE_SNAPSHOT_ID") '
        'FROM (SELECT $1:"order_id"::NUMBER(38,0), $1:"placed"::TIMESTAMP_TZ(6), CAST(NULL AS VARCHAR), '
        '123::NUMBER(19,0) FROM @"DB"."SHOP"."LAKE") '
        "FILES = ('shop/orders/data/a.parquet', 'shop/orders/data/day=2026-01-01/b.parquet') "
        "FILE_FORMAT = (TYPE = PARQUET USE_VECTORIZED_SCANNER = TRUE BINARY_AS_TEXT = FALSE USE_LOGICAL_TYPE = TRUE) "
        "FORCE = TRUE"
    )


def test_the_worker_files_copy_parses_json_and_reads_the_lineage_field() -> None:
    sql = copy_sql(
        TARGET,
        [_col("tags", "ARRAY", semi=True)],
        {"tags": "tags"},
        location=stage_location("DB.SHOP.SNOWBERG_SYNC_1", "rows"),
        lineage_column="LIN",
        lineage="__snowberg_lineage",
        json_text=True,
        purge=True,
    )
    assert (
        'PARSE_JSON($1:"tags"), $1:"__snowberg_lineage"::NUMBER(19,0) FROM @"DB"."SHOP"."SNOWBERG_SYNC_1"/rows/)' in sql
    )
    assert "FILES" not in sql and sql.endswith("PURGE = TRUE") and "FORCE" not in sql


def test_nothing_unchecked_reaches_the_statement() -> None:
    cols = [_col("a", "VARCHAR")]
    with pytest.raises(ValueError, match="cannot be named in FILES"):
        copy_sql(TARGET, cols, {"a": "a"}, location="@x", lineage_column=None, lineage=None, files=["a'; DROP x"])
    with pytest.raises(ValueError, match="Parquet field"):
        copy_sql(TARGET, cols, {"a": 'a"b'}, location="@x", lineage_column=None, lineage=None)
    with pytest.raises(ValueError, match="at most 1000"):
        copy_sql(TARGET, cols, {"a": "a"}, location="@x", lineage_column=None, lineage=None, files=["f"] * 1001)
    with pytest.raises(ValueError, match="JSON text"):  # nested values only ever come from the worker's JSON
        copy_sql(TARGET, [_col("t", "ARRAY", semi=True)], {"t": "t"}, location="@x", lineage_column=None, lineage=None)
    with pytest.raises(ValueError, match="DB.SCHEMA.STAGE"):
        LakeStage(stage="LAKE", stage_url="s3://lake/")
    with pytest.raises(ValueError, match="stage folder"):
        stage_location("DB.S.ST", "../x")


def test_lake_paths_relative_to_the_stage() -> None:
    stage = LakeStage(stage="DB.S.LAKE", stage_url="s3://lake/wh")
    assert stage.relative("s3://lake/wh/shop/orders/data/00000-0-ab.parquet") == "shop/orders/data/00000-0-ab.parquet"
    assert stage.relative("s3://lake/wh/shop/orders/data/cat=a%2Fb/f.parquet") == "shop/orders/data/cat=a%2Fb/f.parquet"
    assert stage.relative("s3://other/wh/x.parquet") is None  # outside the stage: the worker sends it
    assert stage.relative("s3://lake/wharf/x.parquet") is None  # a sibling prefix is not inside
    assert stage.relative("s3://lake/wh/it's.parquet") is None  # FILES could not hold the name


def test_which_types_the_lake_files_load_as_they_are() -> None:
    from pyiceberg import types as it

    for t in (it.LongType(), it.DecimalType(38, 0), it.TimestamptzType(), it.BinaryType(), it.StringType()):
        assert raw_copy_problem(t) is None
    assert "nested" in (raw_copy_problem(it.ListType(1, it.StringType())) or "")
    assert "uuid" in (raw_copy_problem(it.UUIDType()) or "")


def test_copy_answer_every_file_once_with_its_rows() -> None:
    rows = [
        ("s3://lake/wh/shop/o/data/a.parquet", "LOADED", 10, 10, 1, 0, None, None, None, None),
        ("s3://lake/wh/shop/o/data/b.parquet", "LOADED", 5, 5, 1, 0, None, None, None, None),
    ]
    copied = parse_copy_result(rows, DOC_COLUMNS)
    assert check_copied({"shop/o/data/a.parquet": 10, "shop/o/data/b.parquet": 5}, copied, TARGET) == 15


@pytest.mark.parametrize(
    ("rows", "expected", "message"),
    [
        # Snowflake: a file loaded before (load metadata, 64 days) is not listed at all.
        ([("Copy executed with 0 files processed.",)], {"a.parquet": 3}, "a.parquet: not loaded"),
        # The emulator lists it as LOAD_SKIPPED.
        (
            [("x/a.parquet", "LOAD_SKIPPED", 0, 0, None, 1, "File was loaded before.", None, None, None)],
            {"a.parquet": 3},
            "a.parquet: skipped as already loaded",
        ),
        ([("x/a.parquet", "LOADED", 3, 3, 1, 0, None, None, None, None)] * 2, {"a.parquet": 3}, "loaded twice"),
        ([("x/a.parquet", "LOADED", 2, 2, 1, 0, None, None, None, None)], {"a.parquet": 3}, "loaded 2 rows"),
        ([("x/zzz.parquet", "LOADED", 3, 3, 1, 0, None, None, None, None)], {"a.parquet": 3}, "not a file this run"),
        (
            [("x/a.parquet", "PARTIALLY_LOADED", 3, 2, 1, 1, "bad value", 2, 1, "A")],
            {"a.parquet": 3},
            "PARTIALLY_LOADED",
        ),
    ],
)
def test_copy_answers_that_fail_the_run(rows: list, expected: dict, message: str) -> None:
    description = [("status",)] if len(rows[0]) == 1 else DOC_COLUMNS
    with pytest.raises(CopyLoadError, match=message):
        check_copied(expected, parse_copy_result(rows, description), TARGET)


def test_a_staged_file_is_matched_by_its_path_in_the_stage() -> None:
    assert (
        check_copied(
            {"rows/part-1.parquet": 2},
            [CopiedFile(file="snowberg_sync_1/rows/part-1.parquet", status="LOADED", rows_loaded=2)],
            TARGET,
        )
        == 2
    )
    with pytest.raises(CopyLoadError):  # a name that only ends like ours is not ours
        check_copied(
            {"rows/part-1.parquet": 2},
            [CopiedFile(file="xrows/part-1.parquet", status="LOADED", rows_loaded=2)],
            TARGET,
        )
