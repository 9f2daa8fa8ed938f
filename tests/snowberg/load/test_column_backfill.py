"""on_column_added: backfill on the emulator: a column added with a DEFAULT reaches the rows loaded before, once."""

from __future__ import annotations

from typing import Any

import pytest

from snowberg.config.table_config import TableConfig, parse_config
from snowberg.iceberg import state
from snowberg.iceberg.rollback import resolve_target
from snowberg.iceberg.tables import BACKFILL_PENDING
from snowberg.load.column_backfill import COLUMNS, MODE, ROWS_BACKFILLED, backfill_added_columns
from snowberg.load.extract import load_window
from snowberg.load.plan import plan_run
from snowberg.load.publish import publish, reconcile_before_plan

NOW = "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)"


def cfg_for(sfdb: Any, **over: Any) -> TableConfig:
    entry: dict[str, Any] = {
        "name": "t",
        "source": {"table": sfdb.table("SRC")},
        "target": "ns.t",
        "cursor": {"column": "updated_at"},
        "primary_key": ["id"],
        "on_column_added": "backfill",
        **over,
    }
    return parse_config({"tables": [entry]}).tables[0]


def run(cfg: TableConfig, sfdb: Any, catalog: Any, variables: Any, run_id: str, **kw: Any) -> Any:
    """What the load task does: the window's load, then the backfill of columns it added (then publish)."""
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, sfdb.conn, table, run_id=run_id, dag_id="snowberg_t")
    r = load_window(cfg, sfdb.conn, catalog, w)
    b = backfill_added_columns(cfg, sfdb.conn, catalog, run_id=w.run_id, dag_id=w.dag_id, **kw)
    publish(cfg, catalog, w, variables)
    return r, b


def lake(catalog: Any) -> list[tuple[Any, ...]]:
    rows = catalog.load_table("ns.t").scan().to_arrow().to_pylist()
    return sorted((r["id"], r["note"], r.get("c")) for r in rows)


@pytest.fixture
def src(sfdb: Any, catalog: Any, variables: Any) -> Any:
    """Seven rows in the lake, in two data files, one of them with a position delete (id 2 updated)."""
    t = sfdb.table("SRC")
    sfdb.sql(f"CREATE TABLE {t} (ID NUMBER(38,0), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ(9))")
    sfdb.sql(f"INSERT INTO {t} VALUES " + ", ".join(f"({i}, 'a', '2026-01-01'::TIMESTAMP_NTZ)" for i in range(1, 5)))
    cfg = cfg_for(sfdb)
    run(cfg, sfdb, catalog, variables, "r1")
    sfdb.sql(f"INSERT INTO {t} VALUES " + ", ".join(f"({i}, 'a', {NOW})" for i in range(5, 8)))
    sfdb.sql(f"UPDATE {t} SET NOTE = 'b', UPDATED_AT = {NOW} WHERE ID = 2")
    run(cfg, sfdb, catalog, variables, "r2")
    assert lake(catalog) == [(i, "b" if i == 2 else "a", None) for i in range(1, 8)]
    return sfdb


class NoConnection:
    """A Snowflake connection that must not be used."""

    def cursor(self) -> Any:
        raise AssertionError("no Snowflake query expected")


def add_column_with_default(sfdb: Any) -> None:
    t = sfdb.table("SRC")
    sfdb.sql(f"ALTER TABLE {t} ADD COLUMN C VARCHAR(10) DEFAULT 'x'")
    sfdb.sql(f"INSERT INTO {t} (ID, NOTE, UPDATED_AT, C) VALUES (8, 'a', {NOW}, 'y')")


def test_backfill_fills_the_added_column_of_the_rows_loaded_before_in_one_commit(
    src: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import snowberg.airflow.alerts

    events: list[dict[str, Any]] = []
    monkeypatch.setattr(snowberg.airflow.alerts, "send_event", lambda event, **kw: events.append(kw["details"]))
    add_column_with_default(src)
    before = catalog.load_table("ns.t")
    wm = state.read_state(before).watermark
    r, b = run(cfg_for(src), src, catalog, variables, "r3", batch_keys=2)
    assert r.status == "committed" and r.rows == 1  # the window held row 8 only
    ((details,),) = [events]  # the schema_change event says what follows, and what it costs
    assert details["added"] == ["c string"]
    assert "on_column_added: backfill" in details["existing_rows"]
    assert "one-time cost ∝ the table" in details["existing_rows"]
    # Seven rows loaded before, read back in batches of two keys: four Snowflake queries, one commit.
    assert (b.status, b.rows, b.rows_found, b.queries, b.batch_rows) == ("committed", 7, 7, 4, [2, 2, 2, 1])
    assert b.files_rewritten == 2
    assert lake(catalog) == [(i, "b" if i == 2 else "a", "x") for i in range(1, 8)] + [(8, "a", "y")]
    table = catalog.load_table("ns.t")
    head = table.current_snapshot()
    props = head.summary.additional_properties
    assert head.snapshot_id == b.snapshot_id
    assert props[state.MODE] == MODE and props[state.RUN_ID] == "r3" and props[state.DAG_ID] == "snowberg_t"
    assert (props[COLUMNS], props[ROWS_BACKFILLED], props[state.ROWS]) == ("c", "7", "0")
    commits = list(state.commits(table))
    assert [state.snowberg_props(s).get(state.MODE) for s in commits[:2]] == [MODE, "incremental"]
    assert state.read_state(table).watermark != wm  # the load's watermark, carried by the backfill's commit
    assert state.read_state(table).watermark == state.snowberg_props(commits[1])[state.WATERMARK]
    assert BACKFILL_PENDING not in table.properties
    assert int(props.get("total-position-deletes", "0")) == 0  # id 2's old version went with its file
    # Not a run of its own: the run's history (UI, volume anomalies) keeps the load's commit and its rows.
    assert [state.snowberg_props(s)[state.RUN_ID] for s in state.run_commits(table)] == ["r3", "r2", "r1"]
    assert next(state.run_commits(table)).snapshot_id == commits[1].snapshot_id
    # Part of the run: a rollback before it undoes the load and the backfill together.
    assert resolve_target(table, before_run="r3")[0] == commits[2].snapshot_id
    # Nothing left: the next run's call reads the table's properties and nothing else (no Snowflake query).
    assert backfill_added_columns(cfg_for(src), NoConnection(), catalog, run_id="r4", dag_id="snowberg_t") is None
    assert catalog.load_table("ns.t").current_snapshot().snapshot_id == head.snapshot_id


@pytest.mark.parametrize("point", ["column_backfill_before_commit", "column_backfill_after_commit"])
def test_a_crash_around_the_backfill_commit_then_the_retry_applies_it_once(
    src: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    add_column_with_default(src)
    cfg = cfg_for(src)
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, src.conn, table, run_id="r3")
    assert load_window(cfg, src.conn, catalog, w).status == "committed"
    monkeypatch.setenv("SNOWBERG_FAULT", f"raise:{point}")
    with pytest.raises(RuntimeError, match=point):
        backfill_added_columns(cfg, src.conn, catalog, run_id="r3", dag_id="snowberg_t", batch_keys=2)
    monkeypatch.delenv("SNOWBERG_FAULT")
    committed = point.endswith("after_commit")
    n_commits = len(list(state.commits(catalog.load_table("ns.t"))))
    assert lake(catalog)[0][2] == ("x" if committed else None)
    # The task's retry: the load finds its commit, the backfill runs only if its commit did not land.
    assert load_window(cfg, src.conn, catalog, w).status == "already_committed"
    again = backfill_added_columns(cfg, src.conn, catalog, run_id="r3", dag_id="snowberg_t", batch_keys=2)
    assert (again is None) == committed
    table = catalog.load_table("ns.t")
    assert len(list(state.commits(table))) == n_commits + (0 if committed else 1)
    assert sum(1 for s in state.commits(table) if state.snowberg_props(s).get(state.MODE) == MODE) == 1
    assert lake(catalog) == [(i, "b" if i == 2 else "a", "x") for i in range(1, 8)] + [(8, "a", "y")]


def test_with_on_column_added_null_nothing_is_backfilled(src: Any, catalog: Any, variables: Any) -> None:
    add_column_with_default(src)
    r, b = run(cfg_for(src, on_column_added=None), src, catalog, variables, "r3")
    assert r.status == "committed" and b is None
    assert lake(catalog) == [(i, "b" if i == 2 else "a", None) for i in range(1, 8)] + [(8, "a", "y")]
    assert BACKFILL_PENDING not in catalog.load_table("ns.t").properties


def test_a_composite_key_a_partitioned_copy_on_write_table_and_two_added_columns(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    """Keys of two columns (``(a, b) IN ((…), …)``); files the load's merge rewrote (NULLs, not a missing column)."""
    t = sfdb.table("SRC")
    sfdb.sql(f"CREATE TABLE {t} (ID NUMBER(38,0), REGION VARCHAR(5), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ(9))")
    values = ", ".join(f"({i}, '{r}', 'a', '2026-01-01'::TIMESTAMP_NTZ)" for i in range(1, 4) for r in ("eu", "us"))
    sfdb.sql(f"INSERT INTO {t} VALUES {values}")
    cfg = cfg_for(sfdb, primary_key=["id", "region"], merge_strategy="copy_on_write", partition_by=["identity(region)"])
    run(cfg, sfdb, catalog, variables, "r1")
    sfdb.sql(f"ALTER TABLE {t} ADD COLUMN C VARCHAR(10) DEFAULT 'x'")
    sfdb.sql(f"ALTER TABLE {t} ADD COLUMN N NUMBER(10,0) DEFAULT 7")
    sfdb.sql(f"UPDATE {t} SET NOTE = 'b', UPDATED_AT = {NOW} WHERE ID = 1 AND REGION = 'eu'")
    _, b = run(cfg, sfdb, catalog, variables, "r2", batch_keys=4)  # 4 key values: 2 rows of a 2-column key
    # The merge rewrote eu's file without (1, eu), its other rows NULL in the new columns; us's file predates
    # them: both are read back (5 rows). The new version of (1, eu) came with its values and is not.
    assert (b.status, b.columns, b.rows, b.rows_found) == ("committed", ["c", "n"], 5, 5)
    assert b.batch_rows == [2, 2, 1] and b.queries == 3
    rows = catalog.load_table("ns.t").scan().to_arrow().to_pylist()
    got = sorted((r["id"], r["region"], r["note"], r["c"], r["n"]) for r in rows)
    assert got == sorted((i, r, "b" if (i, r) == (1, "eu") else "a", "x", 7) for i in range(1, 4) for r in ("eu", "us"))
