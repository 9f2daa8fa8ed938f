"""Watermark loads against the real emulator and a real Iceberg catalog.

The crashes at named failpoints (real process deaths in a child process) are
in ``tests/scenarios/test_load_crash_points.py``.
"""

from __future__ import annotations

import json
import time
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from snowberg.config.table_config import TableConfig, parse_config
from snowberg.iceberg import state
from snowberg.load.extract import load_window
from snowberg.load.plan import plan_run
from snowberg.load.publish import publish, reconcile_before_plan
from snowberg.mapping.columns import SchemaEvolutionError

DDL = "CREATE TABLE {t} (ID NUMBER(38,0), AMOUNT NUMBER(10,2), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ(9))"


def cfg_for(sfdb: Any, **over: Any) -> TableConfig:
    entry: dict[str, Any] = {
        "name": "t",
        "source": {"table": sfdb.table("SRC")},
        "target": "ns.t",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
    }
    for k, v in over.items():
        if k == "cursor":
            entry["cursor"].update(v)
        else:
            entry[k] = v
    return parse_config({"tables": [entry]}).tables[0]


NOW = "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)"


def insert(sfdb: Any, ids: range, updated: str, note: str = "a") -> None:
    ts = NOW if updated == "now" else f"'{updated}'::TIMESTAMP_NTZ"
    rows = ", ".join(f"({i}, {i}.25, '{note}', {ts})" for i in ids)
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES {rows}")


def run(cfg: TableConfig, sfdb: Any, catalog: Any, variables: Any, run_id: str) -> tuple[Any, Any, dict[str, Any]]:
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, sfdb.conn, table, run_id=run_id)
    r = load_window(cfg, sfdb.conn, catalog, w)
    return w, r, publish(cfg, catalog, w, variables)


def lake_rows(catalog: Any, name: str = "ns.t") -> list[dict[str, Any]]:
    return sorted(catalog.load_table(name).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def snapshots(catalog: Any, name: str = "ns.t") -> list[Any]:
    return list(catalog.load_table(name).snapshots())


@pytest.fixture
def src(sfdb: Any) -> Any:
    sfdb.sql(DDL.format(t=sfdb.table("SRC")))
    insert(sfdb, range(1, 101), "2026-01-01 00:00:00")
    return sfdb


def test_updated_rows_are_picked_up_by_the_next_run(src: Any, catalog: Any, variables: Any) -> None:
    cfg = cfg_for(src)
    _, r1, p1 = run(cfg, src, catalog, variables, "r1")
    assert (r1.status, r1.rows) == ("committed", 100)
    src.sql(f"UPDATE {src.table('SRC')} SET NOTE = 'changed', UPDATED_AT = {NOW} WHERE ID <= 10")
    insert(src, range(101, 106), "now")
    _, r2, p2 = run(cfg, src, catalog, variables, "r2")
    assert (r2.status, r2.rows) == ("committed", 15)
    rows = lake_rows(catalog)
    assert [r["id"] for r in rows] == list(range(1, 106))
    assert [r["note"] for r in rows[:10]] == ["changed"] * 10 and rows[10]["note"] == "a"
    snap = catalog.load_table("ns.t").current_snapshot()
    props = snap.summary.additional_properties
    assert props["snowberg.run-id"] == "r2" and props["snowberg.watermark"] == r2.watermark
    assert props["snowberg.window-low"] == r1.watermark and props["snowberg.window-high"] == r2.watermark
    assert props["snowberg.rows-deleted"] == "10"  # the ten updated rows' earlier versions
    assert json.loads(variables[cfg.variable_key])["snapshot_id"] == snap.snapshot_id


def test_retried_load_appends_nothing(src: Any, catalog: Any, variables: Any) -> None:
    cfg = cfg_for(src, write_mode="append", primary_key=[])
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, src.conn, table, run_id="r1")
    first = load_window(cfg, src.conn, catalog, w)
    insert(src, range(200, 210), "2025-12-31 00:00:00")  # inside the same window
    again = load_window(cfg, src.conn, catalog, w)  # Airflow retry of the same task
    assert (first.status, again.status) == ("committed", "already_committed")
    assert again.snapshot_id == first.snapshot_id
    assert len(lake_rows(catalog)) == 100
    assert len(snapshots(catalog)) == 1


def test_nothing_new_writes_no_file_and_no_commit(src: Any, catalog: Any, variables: Any, tmp_path: Path) -> None:
    cfg = cfg_for(src)
    run(cfg, src, catalog, variables, "r1")
    files_before = sorted(p for p in (tmp_path / "wh").rglob("*") if p.is_file())
    n_snaps = len(snapshots(catalog))
    t = time.monotonic()
    _, r, p = run(cfg, src, catalog, variables, "r2")
    elapsed = time.monotonic() - t
    assert r.status == "nothing_new" and r.data_files == 0
    assert len(snapshots(catalog)) == n_snaps  # no empty snapshot: metadata does not grow with idle runs
    assert sorted(p for p in (tmp_path / "wh").rglob("*") if p.is_file()) == files_before
    assert elapsed < 5, elapsed


def test_an_empty_window_sends_no_extract_query(src: Any, catalog: Any, variables: Any) -> None:
    """README: "nothing new — plan's one query sees 0 rows; no extract query". The gate stops the load first."""
    cfg = cfg_for(src)
    run(cfg, src, catalog, variables, "r1")
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, src.conn, table, run_id="r2")
    assert w.rows_in_window == 0

    class NoSql:
        def cursor(self) -> Any:
            raise AssertionError("an empty window sent a query to Snowflake")

    assert load_window(cfg, NoSql(), catalog, w).status == "nothing_new"


def test_window_is_fixed_at_plan_time(src: Any, catalog: Any, variables: Any) -> None:
    cfg = cfg_for(src)
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, src.conn, table, run_id="r1")
    # a row written after planning, with a cursor beyond the planned high
    src.sql(
        f"INSERT INTO {src.table('SRC')} SELECT 500, 1, 'late', "
        "DATEADD(second, 5, CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ))"
    )
    r = load_window(cfg, src.conn, catalog, w)
    assert r.rows == 100 and w.rows_in_window == 100
    time.sleep(6)
    _, r2, _ = run(cfg, src, catalog, variables, "r2")
    assert r2.rows == 1
    assert len(lake_rows(catalog)) == 101


def test_ties_at_the_boundary_belong_to_the_run_that_planned_them(src: Any, catalog: Any, variables: Any) -> None:
    cfg = cfg_for(src)
    _, r1, _ = run(cfg, src, catalog, variables, "r1")
    high = r1.watermark
    # a row exactly at the committed watermark is not read again (window is (low, high])
    src.sql(f"INSERT INTO {src.table('SRC')} VALUES (900, 1, 'tie', '{high}'::TIMESTAMP_NTZ)")
    _, r2, _ = run(cfg, src, catalog, variables, "r2")
    assert r2.rows == 0
    assert 900 not in [r["id"] for r in lake_rows(catalog)]


def test_lookback_catches_late_rows_without_duplicates(src: Any, catalog: Any, variables: Any) -> None:
    cfg = cfg_for(src, cursor={"lookback": "1d"})
    _, r1, _ = run(cfg, src, catalog, variables, "r1")
    from datetime import datetime, timedelta

    wm = datetime.fromisoformat(r1.watermark)
    late = (wm - timedelta(hours=3)).isoformat(sep=" ")
    too_late = (wm - timedelta(days=2)).isoformat(sep=" ")
    src.sql(
        f"INSERT INTO {src.table('SRC')} VALUES (700, 1, 'late', '{late}'::TIMESTAMP_NTZ), "
        f"(701, 1, 'too late', '{too_late}'::TIMESTAMP_NTZ)"
    )
    _, r2, _ = run(cfg, src, catalog, variables, "r2")
    ids = [r["id"] for r in lake_rows(catalog)]
    assert 700 in ids and 701 not in ids
    assert len(ids) == len(set(ids)) == 101


def test_null_cursor_policies(src: Any, catalog: Any, variables: Any) -> None:
    src.sql(f"INSERT INTO {src.table('SRC')} VALUES (800, 1, 'null', NULL), (801, 1, 'null', NULL)")
    with pytest.raises(ValueError, match=r"2 source rows have NULL in cursor column 'updated_at'"):
        run(cfg_for(src), src, catalog, variables, "r1")
    assert not catalog.table_exists("ns.t")
    _, r, _ = run(cfg_for(src, cursor={"null_policy": "exclude"}), src, catalog, variables, "r2")
    assert r.rows == 100
    inc = cfg_for(src, cursor={"null_policy": "include"})
    run(inc, src, catalog, variables, "r3")
    run(inc, src, catalog, variables, "r4")
    ids = [r["id"] for r in lake_rows(catalog)]
    assert ids.count(800) == 1 and ids.count(801) == 1 and len(ids) == 102


def test_two_runs_never_both_commit_the_same_window(src: Any, catalog: Any, variables: Any) -> None:
    cfg = cfg_for(src, write_mode="append", primary_key=[])
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w1 = plan_run(cfg, src.conn, table, run_id="a")
    w2 = plan_run(cfg, src.conn, table, run_id="b")
    assert load_window(cfg, src.conn, catalog, w1).status == "committed"
    with pytest.raises(state.ConcurrentCommitError, match="moved"):
        load_window(cfg, src.conn, catalog, w2)
    assert len(lake_rows(catalog)) == 100


def test_commit_conflict_is_not_retried_onto_the_new_head(src: Any, catalog: Any, variables: Any) -> None:
    """Both runs pass the watermark check; the catalog's snapshot assertion stops the second."""
    from pyiceberg.exceptions import CommitFailedException

    cfg = cfg_for(src, write_mode="append", primary_key=[])
    run(cfg, src, catalog, variables, "r0")
    t = catalog.load_table("ns.t")
    assert t.properties["commit.retry.num-retries"] == "0"
    import pyarrow as pa

    tx1, tx2 = t.transaction(), catalog.load_table("ns.t").transaction()
    batch = t.scan().to_arrow().slice(0, 1)
    tx1.append(batch)
    tx2.append(pa.Table.from_batches(batch.to_batches(), batch.schema))
    tx1.commit_transaction()
    with pytest.raises(CommitFailedException):
        tx2.commit_transaction()


def test_variable_ahead_of_table_fails_loudly(src: Any, catalog: Any, variables: Any) -> None:
    cfg = cfg_for(src)
    run(cfg, src, catalog, variables, "r1")
    v = json.loads(variables[cfg.variable_key])
    v.update(watermark="2099-01-01 00:00:00.000000", snapshot_id=123)
    variables[cfg.variable_key] = json.dumps(v)
    with pytest.raises(state.StateError, match="ahead of the table"):
        run(cfg, src, catalog, variables, "r2")


def test_schema_evolution_add_widen_and_refuse(sfdb: Any, catalog: Any, variables: Any) -> None:
    sfdb.sql(DDL.format(t=sfdb.table("SRC")))
    insert(sfdb, range(1, 11), "2026-01-01 00:00:00")
    q1 = f"SELECT ID, CAST(AMOUNT AS NUMBER(10,2)) AS AMOUNT, UPDATED_AT FROM {sfdb.table('SRC')}"
    run(cfg_for(sfdb, source={"query": q1}), sfdb, catalog, variables, "r1")
    insert(sfdb, range(11, 21), "now")
    q2 = f"SELECT ID, CAST(AMOUNT AS NUMBER(14,2)) AS AMOUNT, NOTE, UPDATED_AT FROM {sfdb.table('SRC')}"
    run(cfg_for(sfdb, source={"query": q2}), sfdb, catalog, variables, "r2")
    t = catalog.load_table("ns.t")
    from pyiceberg.types import DecimalType, StringType

    assert t.schema().find_field("amount").field_type == DecimalType(14, 2)
    assert t.schema().find_field("note").field_type == StringType()
    rows = lake_rows(catalog)
    assert rows[0]["note"] is None and rows[-1]["note"] == "a"
    snap = t.current_snapshot().snapshot_id
    insert(sfdb, range(21, 31), "now")
    q3 = f"SELECT ID, CAST(AMOUNT AS VARCHAR) AS AMOUNT, NOTE, UPDATED_AT FROM {sfdb.table('SRC')}"
    with pytest.raises(SchemaEvolutionError, match=r"column 'AMOUNT'.*decimal\(14, 2\).*VARCHAR.*string"):
        run(cfg_for(sfdb, source={"query": q3}), sfdb, catalog, variables, "r3")
    assert catalog.load_table("ns.t").current_snapshot().snapshot_id == snap
    assert len(lake_rows(catalog)) == 20


ALL_TYPES = """CREATE TABLE {t} (
  ID NUMBER(38,0), N18 NUMBER(18,0), N38 NUMBER(38,0), D NUMBER(12,4), F FLOAT, S VARCHAR(30), B BOOLEAN,
  DT DATE, TM TIME, NTZ TIMESTAMP_NTZ(6), LTZ TIMESTAMP_LTZ, TZ TIMESTAMP_TZ, V VARIANT, O OBJECT, A ARRAY,
  BIN BINARY, UPDATED_AT TIMESTAMP_NTZ(9))"""


def test_every_emulator_type_round_trips(sfdb: Any, catalog: Any, variables: Any) -> None:
    from datetime import date, datetime, time
    from decimal import Decimal

    sfdb.sql(ALL_TYPES.format(t=sfdb.table("SRC")))
    sfdb.sql(
        f"INSERT INTO {sfdb.table('SRC')} SELECT 1, 123456789012345678, 12345678901234567, 12345678.1234, "
        "0.1, 'héllo',\n"
        "        TRUE, '2026-02-03'::DATE, '04:05:06.123456'::TIME, '2026-02-03 04:05:06.654321'::TIMESTAMP_NTZ,\n"
        "        '2026-02-03 04:05:06'::TIMESTAMP_LTZ, '2026-02-03 04:05:06+02:00'::TIMESTAMP_TZ, "
        "PARSE_JSON('{\"a\":[1,2]}'),\n"
        "        OBJECT_CONSTRUCT('k', 1), ARRAY_CONSTRUCT(1, 'x'), TO_BINARY('CAFE', 'HEX'), "
        "'2026-01-01'::TIMESTAMP_NTZ"
    )
    cfg = cfg_for(sfdb, partition_by=["month(dt)", "bucket[4](id)"])
    run(cfg, sfdb, catalog, variables, "r1")
    t = catalog.load_table("ns.t")
    types = {f.name: str(f.field_type) for f in t.schema().fields}
    assert types == {
        "id": "decimal(38, 0)",
        "n18": "long",
        "n38": "decimal(38, 0)",
        "d": "decimal(12, 4)",
        "f": "double",
        "s": "string",
        "b": "boolean",
        "dt": "date",
        "tm": "time",
        "ntz": "timestamp",
        "ltz": "timestamptz",
        "tz": "timestamptz",
        "v": "string",
        "o": "string",
        "a": "string",
        "bin": "binary",
        "updated_at": "timestamp",
    }
    row = t.scan().to_arrow().to_pylist()[0]
    assert row["n18"] == 123456789012345678 and row["n38"] == Decimal(12345678901234567)
    assert row["d"] == Decimal("12345678.1234")
    assert row["s"] == "héllo" and row["b"] is True and row["dt"] == date(2026, 2, 3)
    assert row["tm"] == time(4, 5, 6, 123456)
    assert row["ntz"] == datetime(2026, 2, 3, 4, 5, 6, 654321)
    assert row["tz"] == datetime(2026, 2, 3, 2, 5, 6, tzinfo=UTC)
    assert json.loads(row["v"]) == {"a": [1, 2]} and row["bin"] == b"\xca\xfe"
    assert len(t.spec().fields) == 2


def test_idle_runs_with_lookback_commit_nothing(src: Any, catalog: Any, variables: Any, tmp_path: Path) -> None:
    cfg = cfg_for(src, cursor={"lookback": "1d"})
    insert(src, range(101, 111), "now")  # rows inside the next runs' lookback range
    _, r1, _ = run(cfg, src, catalog, variables, "r1")
    assert r1.rows == 110
    n_snaps = len(snapshots(catalog))
    files_before = sorted(p for p in (tmp_path / "wh").rglob("*") if p.is_file())
    for run_id in ("r2", "r3"):
        w, r, _ = run(cfg, src, catalog, variables, run_id)
        assert w.rows_in_window == 10  # the plan counts the lookback range …
        assert (r.status, r.data_files) == ("nothing_new", 0)  # … but nothing in it is new
    assert len(snapshots(catalog)) == n_snaps
    assert sorted(p for p in (tmp_path / "wh").rglob("*") if p.is_file()) == files_before
    # a late row inside the lookback is still caught, once
    from datetime import datetime, timedelta

    late = (datetime.fromisoformat(r1.watermark) - timedelta(hours=3)).isoformat(sep=" ")
    src.sql(f"INSERT INTO {src.table('SRC')} VALUES (700, 1, 'late', '{late}'::TIMESTAMP_NTZ)")
    _, r4, _ = run(cfg, src, catalog, variables, "r4")
    assert r4.status == "committed"
    ids = [r["id"] for r in lake_rows(catalog)]
    assert 700 in ids and len(ids) == len(set(ids)) == 111
    # and an update of an already-loaded row re-read by the lookback is a change, not a re-read
    src.sql(f"UPDATE {src.table('SRC')} SET NOTE = 'edited' WHERE ID = 700")
    _, r5, _ = run(cfg, src, catalog, variables, "r5")
    assert r5.status == "committed"
    assert {r["id"]: r["note"] for r in lake_rows(catalog)}[700] == "edited"


def test_idle_runs_re_reading_null_cursor_rows_commit_nothing(src: Any, catalog: Any, variables: Any) -> None:
    src.sql(f"INSERT INTO {src.table('SRC')} VALUES (800, 1, 'null', NULL)")
    cfg = cfg_for(src, cursor={"null_policy": "include"})
    run(cfg, src, catalog, variables, "r1")
    n_snaps = len(snapshots(catalog))
    w2, r2, _ = run(cfg, src, catalog, variables, "r2")
    assert r2.status == "nothing_new" and len(snapshots(catalog)) == n_snaps, w2
    assert [r["id"] for r in lake_rows(catalog)].count(800) == 1


def test_null_primary_key_fails_before_any_data_file(src: Any, catalog: Any, variables: Any, tmp_path: Path) -> None:
    from snowberg.iceberg.keys import NullKeyError

    src.sql(f"INSERT INTO {src.table('SRC')} VALUES (NULL, 1, 'x', '2026-01-01'), (NULL, 2, 'y', '2026-01-01')")
    with pytest.raises(NullKeyError, match=r"2 row\(s\) have NULL in primary-key column 'id'"):
        run(cfg_for(src), src, catalog, variables, "r1")
    assert not list((tmp_path / "wh").rglob("*.parquet"))  # no data file written
    t = catalog.load_table("ns.t") if catalog.table_exists("ns.t") else None
    assert t is None or t.current_snapshot() is None


def test_null_primary_key_fails_on_a_table_with_data(src: Any, catalog: Any, variables: Any) -> None:
    from snowberg.iceberg.keys import NullKeyError

    cfg = cfg_for(src)
    run(cfg, src, catalog, variables, "r1")
    src.sql(f"INSERT INTO {src.table('SRC')} SELECT NULL, 1, 'x', {NOW}")
    before = len(snapshots(catalog))
    with pytest.raises(NullKeyError, match=r"1 row\(s\) have NULL in primary-key column 'id'"):
        run(cfg, src, catalog, variables, "r2")
    assert len(snapshots(catalog)) == before
