"""An independent engine reads what snowberg writes: DuckDB's iceberg extension (C++), beside pyiceberg and the source.

Snowflake, Trino and Spark read these tables with their own Iceberg readers; pyiceberg reading back what
pyiceberg-based code wrote cannot catch a table that only pyiceberg reads right. Here every table shape the
writers make is read by DuckDB's ``iceberg_scan`` from the state's metadata file and must equal pyiceberg's
read of that state, with exact types (DuckDB's own column types against the Iceberg schema, then the Arrow
types of its result; decimals with their scale, timestamps with and without zone, NaN and -0.0, binary), and
the source's rows: an append of every mapped type; merge-on-read with several position-delete files;
copy-on-write; an evolved schema; and the same table after compaction, after propagated hard deletes and
after a rollback.

DuckDB's extension (PyPI ``duckdb-extension-iceberg`` 1.5.5) requires ``duckdb==1.5.5`` while the emulator
needs duckdb 2.x, so it runs in a side venv (``duckdb_reader.py``), as the install tests' venvs do. The
tables are built by snowberg's real writers (plan → load → publish, compaction, the volume check's
propagate commit, rollback) against the emulator and a SQLite catalog with a local warehouse.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "install"))
sys.path.insert(0, str(REPO / "tests" / "snowberg" / "iceberg"))
from maint_harness import load, table_cfg  # noqa: E402
from wheel_env import run, uv_command  # noqa: E402

pytestmark = pytest.mark.slow

READER = Path(__file__).with_name("duckdb_reader.py")
DUCKDB = (
    "duckdb==1.5.5",
    "duckdb-extension-iceberg==1.5.5",
    "duckdb-extension-avro==1.5.5",
    "duckdb-extensions==1.5.5",
)
# DuckDB's type for each Iceberg primitive (DuckDB's iceberg extension documentation, "Type mapping").
DUCKDB_TYPE = {
    "boolean": "BOOLEAN",
    "int": "INTEGER",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "date": "DATE",
    "time": "TIME",
    "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMP WITH TIME ZONE",
    "string": "VARCHAR",
    "binary": "BLOB",
}


@pytest.fixture(scope="module")
def duckdb_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("duckdb-venv") / "venv"
    run([*uv_command(), "venv", "--quiet", "--python", sys.executable, str(root)])
    run([*uv_command(), "pip", "install", "--quiet", "--python", str(root / "bin" / "python"), *DUCKDB])
    return str(root / "bin" / "python")


@dataclass
class State:
    """One committed state of a lake table: its metadata file, pyiceberg's read of it, the source's rows then."""

    label: str
    metadata: str
    schema: Any
    iceberg: Any  # pyarrow.Table
    source: list[dict[str, Any]]


def capture(label: str, catalog: Any, sfdb: Any, name: str = "ns.t") -> State:
    table = catalog.load_table(name)
    cur = sfdb.conn.cursor()
    try:
        cur.execute(f"SELECT * FROM {sfdb.table('SRC')}")
        cols = [d[0].lower() for d in cur.description]
        source = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    finally:
        cur.close()
    return State(label, table.metadata_location, table.schema(), table.scan().to_arrow(), source)


def duckdb_reads(python: str, states: list[State], tmp_path: Path) -> dict[str, tuple[dict[str, str], Any]]:
    """DuckDB's column types and rows for each state (one side-venv process for all of them)."""
    import pyarrow.parquet as pq

    requests = [
        {"label": s.label, "metadata": s.metadata.removeprefix("file://"), "out": str(tmp_path / f"{s.label}.parquet")}
        for s in states
    ]
    (tmp_path / "requests.json").write_text(json.dumps(requests))
    res = run([python, str(READER), str(tmp_path / "requests.json")], timeout=300)
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("RESULT "))
    got = json.loads(line[len("RESULT ") :])
    out = {}
    for r in requests:
        answer = got[r["label"]]
        assert "error" not in answer, f"DuckDB cannot read {r['label']}: {answer['error']}"
        out[r["label"]] = (answer["types"], pq.read_table(r["out"]))
    return out


def exact(value: Any) -> Any:
    """A value as a token that is equal only for the same type and the same value (NaN, -0.0, scale, zone)."""
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, Decimal):
        return ("decimal", value.as_tuple())
    if isinstance(value, datetime):
        return ("datetime", value.isoformat(), value.utcoffset())
    if isinstance(value, bytes):
        return ("bytes", value.hex())
    return (type(value).__name__, value)


def arrow_type(t: Any) -> str:
    """An Arrow type as text; large_* are the same logical type as their small forms, and UTC is UTC however named."""
    return str(t).replace("large_", "").replace("tz=+00:00", "tz=UTC")


def assert_same_as_pyiceberg(state: State, duck_types: dict[str, str], duck: Any, key: str) -> None:
    expected = {}
    for f in state.schema.fields:
        t = str(f.field_type)
        expected[f.name] = (
            t.replace("decimal(", "DECIMAL(").replace(", ", ",") if t.startswith("decimal") else DUCKDB_TYPE[t]
        )
    assert duck_types == expected, state.label
    assert [(f.name, arrow_type(f.type)) for f in duck.schema] == [
        (f.name, arrow_type(f.type)) for f in state.iceberg.schema
    ], state.label

    def rows(t: Any) -> list[tuple[Any, ...]]:
        return sorted((tuple(exact(v) for v in r.values()) for r in t.to_pylist()), key=lambda r: repr(r[0]))

    assert duck.num_rows == state.iceberg.num_rows, state.label
    assert rows(duck.select(state.iceberg.column_names)) == rows(state.iceberg), state.label


def same_value(source: Any, lake: Any, *, as_json: bool) -> bool:
    if as_json and source is not None:
        return bool(json.loads(source) == json.loads(lake))
    if isinstance(source, float) and isinstance(lake, float) and math.isnan(source):
        return math.isnan(lake)
    return bool(source == lake)


def assert_same_as_source(state: State, key: str, json_columns: tuple[str, ...] = ()) -> None:
    lake = {r[key]: r for r in state.iceberg.to_pylist()}
    source = {r[key]: r for r in state.source}
    assert sorted(map(str, lake)) == sorted(map(str, source)), state.label
    for k, row in source.items():
        got = lake[k]
        for col, value in row.items():
            assert same_value(value, got[col], as_json=col in json_columns), (state.label, k, col, value, got[col])


def check(python: str, states: list[State], tmp_path: Path, *, key: str, json_columns: tuple[str, ...] = ()) -> None:
    reads = duckdb_reads(python, states, tmp_path)
    for s in states:
        assert_same_as_pyiceberg(s, *reads[s.label], key=key)
        assert_same_as_source(s, key, json_columns)


# -- the table shapes ---------------------------------------------------------------------------------------

EVERY_TYPE = """CREATE TABLE {t} (
  ID NUMBER(38,0), N18 NUMBER(18,0), N38 NUMBER(38,0), D NUMBER(12,4), F FLOAT, S VARCHAR(30), B BOOLEAN,
  DT DATE, TM TIME, NTZ TIMESTAMP_NTZ(6), LTZ TIMESTAMP_LTZ, TZ TIMESTAMP_TZ, V VARIANT, BIN BINARY,
  UPDATED_AT TIMESTAMP_NTZ(9))"""


def _every_type_rows(sfdb: Any, ids: range, updated: str) -> None:
    values = []
    for i in ids:
        special = ("'NaN'", "'-0.0'", "'Infinity'", "NULL")[i % 4]
        values.append(
            f"SELECT {i}, {-123456789012345678 if i % 2 else 123456789012345678}, {i * 10**15 + 7}, "
            f"{'-' if i % 2 else ''}{i}.{i:04d}, {special}::FLOAT, {'NULL' if i % 5 == 0 else repr(f'é{i}')}, "
            f"{'TRUE' if i % 2 else 'FALSE'}, '2026-02-{i % 28 + 1:02d}'::DATE, '04:05:06.{i:06d}'::TIME, "
            f"'2026-02-03 04:05:06.{i:06d}'::TIMESTAMP_NTZ, '2026-02-03 04:05:{i % 60:02d}'::TIMESTAMP_LTZ, "
            f"'2026-02-03 04:05:06+0{i % 9}:00'::TIMESTAMP_TZ, PARSE_JSON('{{\"k\": [{i}, \"x\"]}}'), "
            f"TO_BINARY('{i:02X}CAFE00', 'HEX'), '{updated}'::TIMESTAMP_NTZ"
        )
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} " + " UNION ALL ".join(values))


def test_an_append_of_every_mapped_type_reads_the_same_in_duckdb(
    sfdb: Any, catalog: Any, variables: Any, duckdb_python: str, tmp_path: Path
) -> None:
    sfdb.sql(EVERY_TYPE.format(t=sfdb.table("SRC")))
    cfg = table_cfg(sfdb, primary_key=[], partition_by=["month(dt)"])
    _every_type_rows(sfdb, range(1, 9), "2026-01-01 00:00:00")
    load(cfg, sfdb, catalog, variables, "r1")
    _every_type_rows(sfdb, range(9, 13), "2026-01-02 00:00:00")
    load(cfg, sfdb, catalog, variables, "r2")
    state = capture("every_type", catalog, sfdb)
    types = {f.name: str(f.field_type) for f in state.schema.fields}
    assert set(types.values()) >= {"decimal(38, 0)", "long", "decimal(12, 4)", "double", "string", "boolean"}
    assert set(types.values()) >= {"date", "time", "timestamp", "timestamptz", "binary"}
    assert [s.summary.operation.value for s in catalog.load_table("ns.t").snapshots()] == ["append", "append"]
    check(duckdb_python, [state], tmp_path, key="id", json_columns=("v",))


KEYED = "CREATE TABLE {t} (ID NUMBER(38,0), AMOUNT NUMBER(10,2), TZ TIMESTAMP_TZ, NOTE VARCHAR(20), UPDATED_AT {c})"
NOW = "CAST(CONVERT_TIMEZONE('UTC', CURRENT_TIMESTAMP()) AS TIMESTAMP_NTZ)"


def _keyed_rows(sfdb: Any, ids: range, note: str) -> None:
    tz = "'2026-03-0{d} 10:00:00.{i:06d}+02:00'::TIMESTAMP_TZ"
    rows = ", ".join(f"({i}, {i}.25, {tz.format(d=i % 9 + 1, i=i)}, '{note}', {NOW})" for i in ids)
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES {rows}")


def _update(sfdb: Any, where: str, note: str) -> None:
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET NOTE = '{note}', AMOUNT = -AMOUNT, UPDATED_AT = {NOW} WHERE {where}")


def _delete_files(catalog: Any) -> int:
    files = catalog.load_table("ns.t").inspect.files().to_pylist()
    return sum(1 for f in files if f["content"] == 1)


def test_merge_on_read_then_compaction_propagated_deletes_and_rollback_read_the_same_in_duckdb(
    sfdb: Any, catalog: Any, variables: Any, duckdb_python: str, tmp_path: Path
) -> None:
    from snowberg.checks.hashdiff import HashDialect
    from snowberg.checks.volume import commit_hard_deletes, verify
    from snowberg.iceberg import maintenance
    from snowberg.iceberg import rollback as rb

    sfdb.sql(KEYED.format(t=sfdb.table("SRC"), c="TIMESTAMP_NTZ(9)"))
    cfg = table_cfg(sfdb, volume={"deletes": "propagate"})
    _keyed_rows(sfdb, range(1, 21), "a")
    load(cfg, sfdb, catalog, variables, "r1")
    _update(sfdb, "ID <= 5", "b")
    load(cfg, sfdb, catalog, variables, "r2")
    after_r2 = capture("after_r2", catalog, sfdb)
    _update(sfdb, "ID BETWEEN 3 AND 8", "c")
    _keyed_rows(sfdb, range(21, 23), "a")
    load(cfg, sfdb, catalog, variables, "r3")
    assert _delete_files(catalog) >= 2  # one per merge run
    states = [after_r2, capture("merge_on_read", catalog, sfdb)]

    done = maintenance.compact(catalog.load_table("ns.t"), min_input_files=2)
    assert done.status == "committed", done
    states.append(capture("compacted", catalog, sfdb))

    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')} WHERE ID IN (2, 4, 17)")
    table = catalog.load_table("ns.t")
    settings = cfg.volume.model_copy(update={"leaf_rows": 4})
    report = verify(cfg, table, sfdb.conn, settings=settings, dialect=HashDialect.EMULATOR)
    assert sorted(d.key["id"] for d in report.deleted_in_source) == ["17", "2", "4"], report.to_dict()
    head = table.current_snapshot().snapshot_id
    propagated = commit_hard_deletes(
        table, cfg, report.deleted_in_source, columns=report.key_columns, run_id="check-1", expected_snapshot_id=head
    )
    assert propagated.removed == 3
    states.append(capture("propagated_deletes", catalog, sfdb))

    plan = rb.rollback(catalog.load_table("ns.t"), "ns.t", variables=None, variable_key=None, before_run="r3")
    assert plan.committed
    rolled_back = capture("rolled_back", catalog, sfdb)
    rolled_back.source = after_r2.source  # the lake is back where it was after r2
    states.append(rolled_back)
    check(duckdb_python, states, tmp_path, key="id")


def test_copy_on_write_reads_the_same_in_duckdb(
    sfdb: Any, catalog: Any, variables: Any, duckdb_python: str, tmp_path: Path
) -> None:
    sfdb.sql(KEYED.format(t=sfdb.table("SRC"), c="TIMESTAMP_NTZ(9)"))
    cfg = table_cfg(sfdb, merge_strategy="copy_on_write", partition_by=["bucket[2](id)"])
    _keyed_rows(sfdb, range(1, 13), "a")
    load(cfg, sfdb, catalog, variables, "r1")
    _update(sfdb, "ID IN (1, 2, 11)", "b")
    load(cfg, sfdb, catalog, variables, "r2")
    assert _delete_files(catalog) == 0
    check(duckdb_python, [capture("copy_on_write", catalog, sfdb)], tmp_path, key="id")


def test_an_evolved_schema_reads_the_same_in_duckdb(
    sfdb: Any, catalog: Any, variables: Any, duckdb_python: str, tmp_path: Path
) -> None:
    """A column added at the source and a decimal widened: old files lack the column, or hold the narrow type."""
    src = sfdb.table("SRC")
    sfdb.sql(KEYED.format(t=src, c="TIMESTAMP_NTZ(9)"))
    _keyed_rows(sfdb, range(1, 9), "a")
    narrow: Callable[..., Any] = lambda: table_cfg(  # noqa: E731
        sfdb,
        source={"query": f"SELECT ID, CAST(AMOUNT AS NUMBER(10,2)) AS AMOUNT, TZ, UPDATED_AT FROM {src}"},
    )
    load(narrow(), sfdb, catalog, variables, "r1")
    _update(sfdb, "ID <= 3", "b")
    _keyed_rows(sfdb, range(9, 12), "c")
    wide = table_cfg(
        sfdb,
        source={"query": f"SELECT ID, CAST(AMOUNT AS NUMBER(14,2)) AS AMOUNT, TZ, NOTE, UPDATED_AT FROM {src}"},
    )
    load(wide, sfdb, catalog, variables, "r2")
    state = capture("evolved", catalog, sfdb)
    assert [(f.name, str(f.field_type)) for f in state.schema.fields][1:4] == [
        ("amount", "decimal(14, 2)"),
        ("tz", "timestamptz"),
        ("updated_at", "timestamp"),
    ] and str(state.schema.find_field("note").field_type) == "string"
    assert [r["note"] for r in state.iceberg.to_pylist() if 3 < r["id"] < 9] == [None] * 5
    for row in state.source:  # rows the first run loaded without NOTE keep it NULL in the lake
        if row["id"] <= 8 and row["id"] > 3:
            row["note"] = None
    check(duckdb_python, [state], tmp_path, key="id")
