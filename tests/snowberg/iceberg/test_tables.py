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
    details = dict(kw["details"])
    assert "on_column_added: null" in details.pop("existing_rows")
    assert details == {"added": ["extra string"], "dropped": ["note (keep_null)"]}
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


def test_a_new_merge_table_declares_its_primary_key_as_required_identifier_fields(
    src: Any, catalog: Any, variables: Any
) -> None:
    run(cfg_for(src), src, catalog, variables, "r1")
    schema = catalog.load_table("ns.t").schema()
    assert schema.identifier_field_names() == {"id"}
    assert schema.find_field("id").required
    assert not schema.find_field("note").required
    # a merge run on top keeps working against the required key column
    _more(src, 2)
    run(cfg_for(src), src, catalog, variables, "r2")
    assert sorted(r["id"] for r in catalog.load_table("ns.t").scan().to_arrow().to_pylist()) == [1, 2]


def test_an_append_table_declares_no_identifier_fields(src: Any, catalog: Any, variables: Any) -> None:
    run(cfg_for(src, primary_key=[]), src, catalog, variables, "r1")
    assert catalog.load_table("ns.t").schema().identifier_field_ids == []


def test_a_merge_table_created_without_identifier_fields_gets_them_on_its_next_load(
    src: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table older snowberg versions created (all columns optional, no key) is upgraded in the next commit."""
    from snowberg.iceberg import tables

    with monkeypatch.context() as m:
        m.setattr(tables, "identifier_key", lambda cfg, columns: [])  # the old behaviour: no key declared
        run(cfg_for(src), src, catalog, variables, "r1")
    old = catalog.load_table("ns.t")
    assert old.schema().identifier_field_ids == [] and not old.schema().find_field("id").required
    old_snap = old.current_snapshot().snapshot_id
    before = old.scan().to_arrow().to_pylist()

    src.sql(f"UPDATE {src.table('SRC')} SET NOTE = 'c', UPDATED_AT = {NOW} WHERE ID = 1")
    _more(src, 2)
    run(cfg_for(src), src, catalog, variables, "r2")

    t = catalog.load_table("ns.t")
    assert t.schema().identifier_field_names() == {"id"} and t.schema().find_field("id").required
    # the snapshots of the run are written under the new schema, the old one under the old schema
    assert t.current_snapshot().schema_id == t.schema().schema_id != t.snapshot_by_id(old_snap).schema_id
    assert sorted((r["id"], r["note"]) for r in t.scan().to_arrow().to_pylist()) == [(1, "c"), (2, "b")]
    # the old snapshot still reads as it was
    assert t.scan(snapshot_id=old_snap).to_arrow().to_pylist() == before


def test_no_identifier_fields_when_a_live_file_may_hold_a_null_key(
    src: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Making a column required is only safe when the manifests prove no live row holds NULL in it."""
    import pyarrow as pa

    from snowberg.iceberg import tables

    with monkeypatch.context() as m:
        m.setattr(tables, "identifier_key", lambda cfg, columns: [])
        run(cfg_for(src), src, catalog, variables, "r1")
    t = catalog.load_table("ns.t")
    t.append(
        pa.table({"id": pa.array([None], pa.decimal128(38, 0)), "note": ["x"], "updated_at": [None]}).cast(
            tables.arrow_schema(t.schema())
        )
    )
    _more(src, 2)
    run(cfg_for(src), src, catalog, variables, "r2")
    t = catalog.load_table("ns.t")
    assert t.schema().identifier_field_ids == [] and not t.schema().find_field("id").required


def test_a_namespace_another_first_load_created_at_the_same_moment_is_no_error(catalog: Any) -> None:
    """Two tables' first loads in one new namespace: both find it missing, one creates it first.

    The SQL catalog refuses the second creation with a bare IntegrityError (seen in an end-to-end run of
    two first loads); the table must still be created.
    """
    from snowberg.iceberg.tables import create_table
    from snowberg.mapping.columns import SnowflakeColumn
    from snowberg.mapping.rules import map_columns

    catalog.create_namespace("raced")  # the other first load's namespace, created a moment ago
    real, calls = catalog.namespace_exists, []

    def exists(namespace: Any) -> bool:
        calls.append(namespace)
        return False if len(calls) == 1 else bool(real(namespace))  # the first check ran before that create

    catalog.namespace_exists = exists
    cfg = parse_config(
        {"tables": [{"name": "t", "source": {"table": "DB.S.T"}, "target": "raced.t", "cursor": {"column": "u"}}]}
    ).tables[0]
    columns = map_columns([SnowflakeColumn(name="U", type="TIMESTAMP_NTZ", scale=6)])
    table = create_table(catalog, cfg, columns)
    assert table.name() == ("raced", "t") and len(calls) >= 2


def _capture_events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict[str, Any]]]:
    import snowberg.airflow.alerts

    events: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(snowberg.airflow.alerts, "send_event", lambda event, **kw: events.append((event, kw)))
    return events


def test_an_added_column_announces_that_rows_already_loaded_stay_null(
    src: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """on_column_added: null (the default): the lake keeps NULL for the loaded rows, and the event says so."""
    events = _capture_events(monkeypatch)
    run(cfg_for(src), src, catalog, variables, "r1")
    src.sql(f"ALTER TABLE {src.table('SRC')} ADD COLUMN EXTRA VARCHAR(10) DEFAULT 'x'")
    src.sql(f"INSERT INTO {src.table('SRC')} (ID, NOTE, UPDATED_AT) VALUES (2, 'b', {NOW})")
    r = run(cfg_for(src), src, catalog, variables, "r2")
    assert r.status == "committed"
    rows = sorted(catalog.load_table("ns.t").scan().to_arrow().to_pylist(), key=lambda x: x["id"])
    assert [(x["id"], x["extra"]) for x in rows] == [(1, None), (2, "x")]  # Snowflake holds 'x' for id 1
    ((event, kw),) = events
    assert event == AlertEvent.SCHEMA_CHANGE and kw["details"]["added"] == ["extra string"]
    said = kw["details"]["existing_rows"]
    assert "on_column_added: null" in said and "NULL" in said and "'extra'" in said
    assert "DEFAULT" in said and "on_column_added: backfill" in said


def test_an_added_column_of_a_table_without_cursor_says_the_reload_fills_it(
    src: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _capture_events(monkeypatch)
    cfg = cfg_for(src, cursor=None)
    run(cfg, src, catalog, variables, "r1")
    src.sql(f"ALTER TABLE {src.table('SRC')} ADD COLUMN EXTRA VARCHAR(10) DEFAULT 'x'")
    run(cfg, src, catalog, variables, "r2")
    assert [x["extra"] for x in catalog.load_table("ns.t").scan().to_arrow().to_pylist()] == ["x"]
    ((_, kw),) = events
    assert "reloads the whole table" in kw["details"]["existing_rows"]
