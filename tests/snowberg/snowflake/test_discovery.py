"""``snowberg discover`` on the emulator: a schema of eleven objects of different shapes → a valid tables config.

What the emulator (fakesnow 0.12.1) serves and does not, checked here: INFORMATION_SCHEMA.TABLES lists base
tables only (views are read from INFORMATION_SCHEMA.VIEWS), COLUMNS has no DATETIME_PRECISION,
``SHOW PRIMARY KEYS`` answers with its own constraint names, ``rely`` false and every ``key_sequence`` 1,
and ``SHOW TABLES`` reports change tracking OFF (``ALTER TABLE … SET CHANGE_TRACKING`` is refused). RELY,
key order and change tracking ON are tested against answers shaped from Snowflake's documentation in
``tests/snowberg/config/test_discovered.py``; ``test_discovery_live.py`` runs this on an account.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from snowberg import cli
from snowberg.airflow.config_check import entry_problems
from snowberg.config.validate import validate_files
from snowberg.snowflake.discovery import discover, read_schema
from snowberg.sync.specs import SPECS

SHAPES = [
    # key, TIMESTAMP_NTZ(9) cursor, wide NUMBER key, VARIANT
    "CREATE TABLE {db}.S.ORDERS (ID NUMBER(38,0) NOT NULL, UPDATED_AT TIMESTAMP_NTZ(9), AMOUNT NUMBER(12,2),"
    " PAYLOAD VARIANT, PRIMARY KEY (ID))",
    # no key, an instant cursor among other timestamps
    "CREATE TABLE {db}.S.EVENTS (EVENT_ID NUMBER(38,0), CREATED_AT TIMESTAMP_NTZ(9), LAST_MODIFIED TIMESTAMP_LTZ(3),"
    " BODY VARCHAR)",
    # key, no cursor
    "CREATE TABLE {db}.S.CUSTOMERS (CUSTOMER_ID NUMBER(10,0) NOT NULL, NAME VARCHAR(100), PRIMARY KEY (CUSTOMER_ID))",
    # no key, no cursor (PRICE_CHANGE is an amount, not a change time)
    "CREATE TABLE {db}.S.RATES (CCY VARCHAR(3), RATE FLOAT, PRICE_CHANGE NUMBER(10,0))",
    # NUMBER cursor with a sequence word, a wide NUMBER amount
    "CREATE TABLE {db}.S.LEDGER (ENTRY_ID NUMBER(18,0) NOT NULL, BALANCE NUMBER(38,0), CHANGE_SEQ NUMBER(38,0),"
    " PRIMARY KEY (ENTRY_ID))",
    # composite key, TIMESTAMP_NTZ(9) columns, DATE cursor, semi-structured columns
    "CREATE TABLE {db}.S.READINGS (SENSOR_ID NUMBER(9,0) NOT NULL, READ_AT TIMESTAMP_NTZ(9) NOT NULL,"
    " MODIFIED_ON DATE, TAGS ARRAY, META OBJECT, PRIMARY KEY (SENSOR_ID, READ_AT))",
    # views: with and without a cursor
    "CREATE VIEW {db}.S.V_ORDERS AS SELECT ID, UPDATED_AT, AMOUNT FROM {db}.S.ORDERS",
    "CREATE VIEW {db}.S.V_RATES AS SELECT CCY, RATE FROM {db}.S.RATES",
    # a stream's staging table snowberg created, and a name the config cannot write
    "CREATE TABLE {db}.S.ORDERS_SNOWBERG_STAGING (ID NUMBER(38,0))",
    'CREATE TABLE {db}.S."lower_case" (ID NUMBER(38,0))',
    # a table with an unusual but plain name
    "CREATE TABLE {db}.S.T2024_ARCHIVE (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_TZ(9))",
]


@pytest.fixture
def shapes(sfdb: Any) -> Any:
    for sql in SHAPES:
        sfdb.sql(sql.format(db=sfdb.name))
    return sfdb


def run(db: Any, text: str = "", **kw: Any) -> tuple[Any, str]:
    cur = db.conn.cursor()
    try:
        return discover(cur, db.name, "S", text=text, source="tables.yaml", **kw)
    finally:
        cur.close()


def entries(text: str) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in yaml.safe_load(text)["tables"]}


def test_the_emulator_serves_what_discovery_reads_and_lacks_what_the_docs_based_tests_cover(shapes: Any) -> None:
    tables = {t.name: t for t in read_schema(shapes.conn.cursor(), shapes.name, "S")}
    assert {"ORDERS", "V_ORDERS", "V_RATES", "lower_case"} <= set(tables)
    assert tables["V_ORDERS"].kind == "view" and tables["ORDERS"].kind == "table"
    assert tables["ORDERS"].primary_key is not None and tables["ORDERS"].primary_key.columns == ("ID",)
    assert tables["ORDERS"].primary_key.rely is False  # the emulator never says RELY
    assert tables["READINGS"].primary_key is not None
    assert tables["READINGS"].primary_key.columns == ("SENSOR_ID", "READ_AT")
    assert tables["ORDERS"].change_tracking is False  # OFF; the emulator cannot turn it on
    assert tables["ORDERS"].column("UPDATED_AT").datetime_precision is None  # not served: "not reported"
    with pytest.raises(Exception, match="(?i)syntax|parser"):
        shapes.sql(f"ALTER TABLE {shapes.table('ORDERS')} SET CHANGE_TRACKING = TRUE")


def test_one_entry_per_table_each_value_with_its_reason_and_the_file_validates(
    shapes: Any, tmp_path: Path, catalog_env: Any, monkeypatch: Any, airflow_db: str, capsys: Any
) -> None:
    plan, text = run(shapes)
    got = entries(text)
    assert set(got) == {"orders", "events", "customers", "rates", "ledger", "readings", "v_orders", "v_rates"} | {
        "t2024_archive"
    }
    assert {ref.split(".")[-1]: why for ref, why in plan.skipped} == {
        "ORDERS_SNOWBERG_STAGING": "created by snowberg (stream staging or sync state)",
        "lower_case": "its name is not a plain upper- or mixed-case identifier the config can name",
    }
    o = got["orders"]
    assert o["source"] == {"table": f"{shapes.name}.S.ORDERS"} and o["target"] == "s.orders"
    assert o["primary_key"] == ["id"] and o["cursor"]["column"] == "updated_at" and o["cursor"]["commit_lag"] == "5m"
    assert (o["write_mode"], o["merge_strategy"]) == ("merge", "merge_on_read")
    assert o["number_as_long"] == ["id"] and o["timestamp_nanos"] == "error"
    assert got["events"]["cursor"]["column"] == "last_modified" and got["events"]["write_mode"] == "append"
    assert "primary_key" not in got["events"]
    for cursorless in ("customers", "rates"):
        assert not {"cursor", "stream", "write_mode"} & set(got[cursorless]), got[cursorless]
    assert got["ledger"]["cursor"] == {"column": "change_seq"}  # NUMBER: no clock, no lag, no zone
    assert got["ledger"]["number_as_long"] == ["balance", "change_seq"]
    assert got["readings"]["primary_key"] == ["sensor_id", "read_at"]
    assert got["readings"]["cursor"]["column"] == "modified_on"
    assert got["v_orders"]["cursor"]["column"] == "updated_at" and "primary_key" not in got["v_orders"]
    assert got["v_orders"]["write_mode"] == "append" and "watch" not in got["v_orders"]
    assert got["v_rates"]["schedule"] == "@daily" and "cursor" not in got["v_rates"]
    # Every proposed value carries its reason on its line.
    lines = text.splitlines()
    assert any("primary_key: [id]  # key from PRIMARY KEY" in ln for ln in lines)
    assert any("column: updated_at  # cursor: UPDATED_AT TIMESTAMP_NTZ, named for changes" in ln for ln in lines)
    assert any("# no cursor: each run reloads the whole table when its LAST_ALTERED" in ln for ln in lines)
    for ln in lines:
        if ln.strip().startswith(("primary_key", "write_mode", "number_as_long", "timestamp_nanos", "column:")):
            assert "  # " in ln, ln
    cfg = tmp_path / "tables.yaml"
    cfg.write_text(text)
    report = validate_files([cfg], specs=SPECS, entry_check=entry_problems)
    assert report.ok and not report.issues, report.render(verbose=True)
    # Online: every source, cursor column and key found in Snowflake, the catalog and namespace writable.
    monkeypatch.setenv("AIRFLOW_CONN_SNOWFLAKE_DEFAULT", shapes.airflow_connection())
    catalog_env("lake")
    assert cli.main(["pools", str(cfg), "--create"]) == 0
    capsys.readouterr()
    code = cli.main(["validate", str(cfg), "--connect", "--json"])
    issues = json.loads(capsys.readouterr().out)["issues"]
    assert code == 0 and not [i for i in issues if i["severity"] != "ok"], issues
    found = {(i["name"], i["field"]) for i in issues}
    assert {(n, "cursor.column") for n in got if "cursor" in got[n]} <= found, sorted(found)
    assert {(n, "primary_key") for n in got if "primary_key" in got[n]} <= found, sorted(found)


def test_a_second_run_adds_new_tables_reports_dropped_and_renamed_ones_and_never_changes_an_entry(
    shapes: Any,
) -> None:
    _, first = run(shapes, include=["ORDERS", "EVENTS", "CUSTOMERS", "RATES"])
    # A person edits an entry (a value and a comment) and adds a section after the list.
    edited = first.replace("commit_lag: 5m", "commit_lag: 30m  # our ETL commits slowly") + (
        "# the team's defaults\ndefaults:\n  owner: sales-data\n"
    )
    plan, again = run(shapes, text=edited, include=["ORDERS", "EVENTS", "CUSTOMERS", "RATES"])
    assert again == edited and not plan.added and len(plan.kept) == 4
    shapes.sql(f"DROP TABLE {shapes.table('RATES')}")
    shapes.sql(f"ALTER TABLE {shapes.table('CUSTOMERS')} RENAME TO {shapes.table('CLIENTS')}")
    shapes.sql(f"CREATE TABLE {shapes.table('PAYMENTS')} (PAYMENT_ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    plan, third = run(shapes, text=edited, exclude=["V_*", "LEDGER", "READINGS", "T2024*"])
    assert third.startswith(edited.split("# the team's defaults")[0])  # every existing byte up to the list's end
    assert third.endswith("# the team's defaults\ndefaults:\n  owner: sales-data\n")
    assert [p.name for p in plan.added] == ["payments"]
    assert plan.dropped == [("rates", f"{shapes.name}.S.RATES")]
    assert plan.renamed == [("customers", f"{shapes.name}.S.CUSTOMERS", f"{shapes.name}.S.CLIENTS")]
    got = entries(third)
    assert "clients" not in got and got["orders"]["cursor"]["commit_lag"] == "30m"
    assert got["payments"]["cursor"]["column"] == "updated_at"


def test_profile_counts_null_cursors_with_one_query_per_new_table(shapes: Any) -> None:
    t = shapes.table
    shapes.sql(f"INSERT INTO {t('ORDERS')} (ID, UPDATED_AT) VALUES (1, '2026-01-01 00:00:00'), (2, NULL)")
    shapes.sql(f"INSERT INTO {t('EVENTS')} (EVENT_ID, LAST_MODIFIED) VALUES (1, NULL), (2, '2026-02-01 00:00:00')")
    shapes.sql(f"INSERT INTO {t('LEDGER')} (ENTRY_ID, BALANCE, CHANGE_SEQ) VALUES (1, 5, 7)")
    plan, text = run(shapes, include=["ORDERS", "EVENTS", "LEDGER"], profile=True)
    got = entries(text)
    # A key: NULL-cursor rows are re-read and merge. No key: no cursor rather than a silent loss.
    assert got["orders"]["cursor"]["null_policy"] == "include"
    assert "1 NULLs of 2 rows" in text
    assert "cursor" not in got["events"] and "no cursor is proposed" in text
    assert "0 NULLs of 1 rows, max 7" in text and "profiled within range" in text
    # Five metadata statements for the schema, then one per profiled table; configured tables are not profiled.
    assert len(plan.added) == 3 and counted(shapes, text="", profile=True, include=["ORDERS", "EVENTS", "LEDGER"]) == 8
    assert counted(shapes, text=text, profile=True, include=["ORDERS", "EVENTS", "LEDGER"]) == 5


class Counting:
    """A cursor that counts the statements it runs."""

    def __init__(self, cur: Any) -> None:
        self.cur, self.sql = cur, []

    def execute(self, sql: str, params: Any = None) -> Any:
        self.sql.append(sql)
        return self.cur.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cur, name)


def counted(db: Any, **kw: Any) -> int:
    cur = Counting(db.conn.cursor())
    discover(cur, db.name, "S", source="tables.yaml", **kw)
    return len(cur.sql)


# ------------------------------------------------------------------ answers shaped from Snowflake's documentation


class DocumentedMetadata:
    """A cursor answering discovery's five metadata statements as Snowflake's documentation shapes them.

    Written from the docs, not recorded from an account (``test_discovery_live.py`` runs the statements on
    one): INFORMATION_SCHEMA.TABLES lists views too, with TABLE_TYPE ``VIEW`` and no ROW_COUNT
    (https://docs.snowflake.com/en/sql-reference/info-schema/tables); COLUMNS carries DATETIME_PRECISION
    (https://docs.snowflake.com/en/sql-reference/info-schema/columns); ``SHOW PRIMARY KEYS`` answers
    ``created_on, database_name, schema_name, table_name, column_name, key_sequence, constraint_name, rely,
    comment``, one row per key column, ``rely`` ``true``/``false``
    (https://docs.snowflake.com/en/sql-reference/sql/show-primary-keys); ``SHOW TABLES`` has
    ``change_tracking`` ``ON``/``OFF`` (https://docs.snowflake.com/en/sql-reference/sql/show-tables).
    """

    def __init__(self) -> None:
        self.description: list[tuple[str]] = []
        self._rows: list[tuple[Any, ...]] = []
        self.sql: list[str] = []

    def _answer(self, names: list[str], rows: list[tuple[Any, ...]]) -> None:
        self.description = [(n,) for n in names]
        self._rows = rows

    def execute(self, sql: str, params: Any = None) -> None:
        self.sql.append(sql)
        if ".TABLES" in sql:
            self._answer(
                ["TABLE_NAME", "TABLE_TYPE", "ROW_COUNT", "BYTES", "LAST_ALTERED"],
                [
                    ("LINES", "BASE TABLE", 1200, 48_000, None),
                    ("ACCOUNTS", "BASE TABLE", 50_000_000, 9_000_000_000, None),
                    ("CLICKS", "BASE TABLE", 2_000_000_000, 300_000_000_000, None),
                    ("V_LINES", "VIEW", None, None, None),
                    ("TMP_WORK", "TEMPORARY TABLE", 10, 1024, None),
                ],
            )
        elif ".VIEWS" in sql:
            self._answer(["TABLE_NAME"], [("V_LINES",)])
        elif ".COLUMNS" in sql:
            cols = ["TABLE_NAME", "COLUMN_NAME", "ORDINAL_POSITION", "IS_NULLABLE", "DATA_TYPE"]
            cols += ["NUMERIC_PRECISION", "NUMERIC_SCALE", "DATETIME_PRECISION"]
            self._answer(
                cols,
                [
                    ("LINES", "ORDER_ID", 1, "NO", "NUMBER", 38, 0, None),
                    ("LINES", "LINE_NO", 2, "NO", "NUMBER", 4, 0, None),
                    ("LINES", "CREATED_AT", 3, "YES", "TIMESTAMP_NTZ", None, None, 6),
                    ("ACCOUNTS", "ACCOUNT_ID", 1, "NO", "NUMBER", 18, 0, None),
                    ("ACCOUNTS", "UPDATED_AT", 2, "NO", "TIMESTAMP_LTZ", None, None, 9),
                    ("CLICKS", "CLICK_ID", 1, "NO", "NUMBER", 18, 0, None),
                    ("CLICKS", "MODIFIED_AT", 2, "NO", "TIMESTAMP_NTZ", None, None, 3),
                    ("V_LINES", "ORDER_ID", 1, "YES", "NUMBER", 38, 0, None),
                    ("TMP_WORK", "X", 1, "YES", "NUMBER", 38, 0, None),
                ],
            )
        elif "PRIMARY KEYS" in sql:
            names = "created_on database_name schema_name table_name column_name key_sequence constraint_name rely"
            self._answer(
                [*names.split(), "comment"],
                [  # a composite key listed out of key order, and a key its owner vouches for
                    (None, "DB", "SALES", "LINES", "LINE_NO", 2, "PK_LINES", "false", None),
                    (None, "DB", "SALES", "LINES", "ORDER_ID", 1, "PK_LINES", "false", None),
                    (None, "DB", "SALES", "ACCOUNTS", "ACCOUNT_ID", 1, "PK_ACCOUNTS", "true", None),
                ],
            )
        elif "SHOW TABLES" in sql:
            self._answer(
                ["created_on", "name", "kind", "database_name", "schema_name", "rows", "bytes", "change_tracking"],
                [
                    (None, "LINES", "TABLE", "DB", "SALES", 1200, 48_000, "ON"),
                    (None, "ACCOUNTS", "TABLE", "DB", "SALES", 50_000_000, 9_000_000_000, "OFF"),
                    (None, "CLICKS", "TABLE", "DB", "SALES", 2_000_000_000, 300_000_000_000, "OFF"),
                ],
            )
        else:
            raise AssertionError(f"unexpected statement {sql}")

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def close(self) -> None:
        pass


def test_keys_rely_change_tracking_and_sizes_as_snowflake_documents_them() -> None:
    cur = DocumentedMetadata()
    plan, text = discover(cur, "DB", "SALES", text="", source="tables.yaml")
    assert len(cur.sql) == 5  # one statement each, whatever the schema holds
    got = entries(text)
    assert set(got) == {"lines", "accounts", "clicks", "v_lines"}  # the temporary table is not loaded
    # Key columns in key_sequence order; RELY said in the comment; a stream where change tracking is ON.
    assert got["lines"]["primary_key"] == ["order_id", "line_no"]
    assert got["lines"]["stream"] == {"name": "DB.SALES.LINES_SNOWBERG_STREAM", "create": True}
    assert got["lines"]["write_mode"] == "merge" and "cursor" not in got["lines"]
    assert "timestamp_nanos" not in got["lines"]  # TIMESTAMP_NTZ(6) holds no nanoseconds
    assert "key from PRIMARY KEY PK_ACCOUNTS (RELY: its owner vouches it is unique)" in text
    assert "key from PRIMARY KEY PK_LINES (NORELY;" in text
    # 50M rows: mapped slices, month partitions; 2B rows: day partitions.
    a = got["accounts"]
    assert (a["scale_out"], a["max_rows_per_slice"], a["max_parallel_slices"]) == (True, 3_000_000, 4)
    assert a["partition_by"] == ["month(updated_at)"] and a["timestamp_nanos"] == "error"
    assert "timezone" not in a["cursor"]  # TIMESTAMP_LTZ is an instant
    c = got["clicks"]
    assert c["partition_by"] == ["day(modified_at)"] and c["max_rows_per_slice"] == 10_000_000
    assert "timestamp_nanos" not in c and "primary_key" not in c and c["write_mode"] == "append"
    assert "stream" not in got["v_lines"] and got["v_lines"]["schedule"] == "@daily"
    assert not plan.skipped


def test_the_connection_and_pool_are_written_only_where_the_files_defaults_do_not_already_say_them() -> None:
    defaults = "defaults:\n  snowflake_conn_id: sf_sales\n  pool: sales_loads\ntables:\n"
    _, text = discover(DocumentedMetadata(), "DB", "SALES", text=defaults, source="t.yaml", conn_id="sf_sales")
    assert text.startswith(defaults) and not {"snowflake_conn_id", "pool"} & set(entries(text)["lines"])
    _, text = discover(DocumentedMetadata(), "DB", "SALES", text="", source="t.yaml", conn_id="sf_other")
    got = entries(text)["lines"]
    assert (got["snowflake_conn_id"], got["pool"]) == ("sf_other", "snowberg_sf_other")


def test_discovery_costs_five_metadata_statements_whatever_the_number_of_tables(sfdb: Any) -> None:
    """Measured at two sizes: 2 tables and 32 tables of one schema, the same five statements."""
    for i in range(2):
        sfdb.sql(f"CREATE TABLE {sfdb.table(f'A{i}')} (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    small = Counting(sfdb.conn.cursor())
    plan, _ = discover(small, sfdb.name, "S", text="", source="t.yaml")
    assert len(plan.added) == 2
    for i in range(30):
        sfdb.sql(f"CREATE TABLE {sfdb.table(f'B{i}')} (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    large = Counting(sfdb.conn.cursor())
    plan, _ = discover(large, sfdb.name, "S", text="", source="t.yaml")
    assert len(plan.added) == 32 and len(small.sql) == len(large.sql) == 5
