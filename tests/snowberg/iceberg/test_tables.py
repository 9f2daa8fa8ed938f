"""Schema evolution rules every writer shares: dropped columns, missing keys, schema_change events."""

from __future__ import annotations

from typing import Any

import pytest

from snowberg.config.check_settings import AlertEvent
from snowberg.config.table_config import TableConfig, parse_config
from snowberg.load.extract import load_window
from snowberg.load.plan import plan_run
from snowberg.load.publish import publish, reconcile_before_plan
from snowberg.mapping.columns import SchemaEvolutionError

DDL = "CREATE TABLE {t} (ID NUMBER(38,0), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ(9))"
NOW = "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)"


def cfg_for(sfdb: Any, query: str | None = None, **over: Any) -> TableConfig:
    source = {"query": query} if query else {"table": sfdb.table("SRC")}
    entry = {"name": "t", "source": source, "target": "ns.t", "cursor": {"column": "updated_at"}}
    entry.setdefault("primary_key", ["id"])
    entry.update(over)
    return parse_config({"tables": [entry]}).tables[0]


def run(cfg: TableConfig, sfdb: Any, catalog: Any, variables: Any, run_id: str) -> Any:
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, sfdb.conn, table, run_id=run_id)
    r = load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)
    return r


@pytest.fixture
def src(sfdb: Any) -> Any:
    sfdb.sql(DDL.format(t=sfdb.table("SRC")))
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES (1, 'a', '2026-01-01'::TIMESTAMP_NTZ)")
    return sfdb


def _more(sfdb: Any, i: int) -> None:
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES ({i}, 'b', {NOW})")


def _all(sfdb: Any) -> str:
    return f"SELECT ID, NOTE, UPDATED_AT FROM {sfdb.table('SRC')}"


def test_a_dropped_source_column_fails_before_anything_is_written(src: Any, catalog: Any, variables: Any) -> None:
    run(cfg_for(src, _all(src)), src, catalog, variables, "r1")
    snap = catalog.load_table("ns.t").current_snapshot().snapshot_id
    _more(src, 2)
    without_note = f"SELECT ID, UPDATED_AT FROM {src.table('SRC')}"
    with pytest.raises(SchemaEvolutionError) as exc:
        run(cfg_for(src, without_note), src, catalog, variables, "r2")
    msg = str(exc.value)
    assert "table 't'" in msg and "'note'" in msg and "on_column_dropped: keep_null" in msg
    assert catalog.load_table("ns.t").current_snapshot().snapshot_id == snap


def test_keep_null_writes_null_into_a_dropped_column_and_reports_it(
    src: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import snowberg.airflow.alerts

    events: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(snowberg.airflow.alerts, "send_event", lambda event, **kw: events.append((event, kw)))
    run(cfg_for(src, _all(src)), src, catalog, variables, "r1")
    assert events == []  # creating the table is not a change
    _more(src, 2)
    without_note = f"SELECT ID, UPDATED_AT, 'x' AS EXTRA FROM {src.table('SRC')}"
    r = run(cfg_for(src, without_note, on_column_dropped="keep_null"), src, catalog, variables, "r2")
    assert r.status == "committed"
    rows = sorted(catalog.load_table("ns.t").scan().to_arrow().to_pylist(), key=lambda x: x["id"])
    assert [(x["id"], x["note"], x["extra"]) for x in rows] == [(1, "a", None), (2, None, "x")]
    ((event, kw),) = events
    assert event == AlertEvent.SCHEMA_CHANGE and kw["table"] == "t" and kw["lake_table"] == "ns.t"
    assert kw["details"] == {"added": ["extra string"], "dropped": ["note (keep_null)"]}
    _more(src, 3)
    run(cfg_for(src, without_note, on_column_dropped="keep_null"), src, catalog, variables, "r3")
    assert len(events) == 1  # a column kept as NULL is reported once, not on every run


def test_a_primary_key_missing_from_the_source_is_named_before_any_write(
    src: Any, catalog: Any, variables: Any
) -> None:
    cfg = cfg_for(src, primary_key=["order_id"])
    with pytest.raises(SchemaEvolutionError) as exc:
        run(cfg, src, catalog, variables, "r1")
    msg = str(exc.value)
    assert "table 't'" in msg and "field 'primary_key'" in msg and "'order_id'" in msg
    assert not catalog.table_exists("ns.t")
