"""``snowberg validate --connect``: a config checked against the emulator, a SQLite lake and documented grant shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from snowberg.checks.config_online import check_online, iter_probe_tables, probe_namespace, stream_findings
from snowberg.config.table_config import TableConfig
from snowberg.config.validate import Report, Severity, validate_files
from snowberg.sync.specs import SPECS


def findings(issues: list[Any]) -> list[tuple[str | None, str | None, str, str]]:
    return [(i.name, i.field, str(i.severity), i.message) for i in issues]


def only(issues: list[Any], name: str, field: str | None = None) -> list[tuple[str, str]]:
    return [(str(i.severity), i.message) for i in issues if i.name == name and (field is None or i.field == field)]


TABLES = """\
defaults:
  snowflake_conn_id: sf
  catalog: lake
tables:
  - name: good
    source: {table: DB.S.ORDERS}
    target: shop.orders
    cursor: {column: updated_at}
    primary_key: [id]
    partition_by: ["day(updated_at)"]
  - name: no_source
    source: {table: DB.S.MISSING}
    target: shop.missing
  - name: text_cursor
    source: {query: "SELECT ID, NOTE FROM DB.S.ORDERS"}
    target: shop.text_cursor
    cursor: {column: note}
  - name: bad_key
    source: {table: DB.S.ORDERS}
    target: fresh_ns.bad_key
    primary_key: [order_id]
    partition_by: ["bucket[4](customer)"]
    number_as_long: [big]
  - name: other_conn
    snowflake_conn_id: nope
    catalog: nolake
    source: {table: DB.S.ORDERS}
    target: shop.other
  - name: drifted
    source: {table: DB.S.ORDERS}
    target: shop.drifted
    cursor: {column: updated_at}
  - name: float_key
    source: {table: DB.S.ORDERS}
    target: shop.float_key
    cursor: {column: updated_at}
    primary_key: [score]
  - name: hashed
    source: {table: DB.S.ORDERS}
    target: shop.hashed
    cursor: {column: updated_at}
    primary_key: [id]
    columns: {exclude: [note], hash: [id]}
"""

SYNCS = """\
syncs:
  - name: to_native
    source: {catalog: lake, table: shop.orders}
    target: {kind: native, snowflake_conn_id: sf, table: DB.S.ORDERS}
  - name: not_yet
    source: {catalog: lake, table: shop.not_loaded}
    target: {kind: native, snowflake_conn_id: sf, table: DB.S.NOT_THERE}
"""


@pytest.fixture(scope="module")
def online(tmp_path_factory: pytest.TempPathFactory, fakesnow_server: Any) -> Iterator[tuple[Report, Any, list[Any]]]:
    """The configs above, an emulator database DB.S with ORDERS, catalog ``lake`` with namespace ``shop``: checked once.

    The environment (an Airflow connection ``sf`` and the catalog's settings) stays set for the module's tests.
    """
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from snowberg.config.table_config import parse_config
    from snowberg.iceberg.catalogs import open_catalog
    from snowberg.iceberg.identity import identity_properties
    from snowberg.local.stack import snowflake_connection_uri

    tmp_path = tmp_path_factory.mktemp("online")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW_CONN_SF", snowflake_connection_uri(fakesnow_server.port, "DB"))
        (tmp_path / "wh").mkdir()
        mp.setenv("PYICEBERG_CATALOG__LAKE__TYPE", "sql")
        mp.setenv("PYICEBERG_CATALOG__LAKE__URI", f"sqlite:///{tmp_path}/c.db")
        mp.setenv("PYICEBERG_CATALOG__LAKE__WAREHOUSE", f"file://{tmp_path}/wh")
        conn = fakesnow_server.connect()
        cur = conn.cursor()
        cur.execute("CREATE DATABASE IF NOT EXISTS DB")
        cur.execute("CREATE SCHEMA IF NOT EXISTS DB.S")
        cur.execute(
            "CREATE OR REPLACE TABLE DB.S.ORDERS "
            "(ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9), NOTE VARCHAR, SCORE FLOAT)"
        )
        conn.close()
        lake = open_catalog("lake")
        lake.create_namespace("shop")
        # A lake table loaded from another source: its recorded identity differs from the config's.
        other = parse_config(
            {"tables": [{"name": "drifted", "source": {"table": "DB.S.OLD"}, "target": "shop.drifted"}]}
        ).tables[0]
        lake.create_table(
            ("shop", "drifted"),
            schema=Schema(NestedField(field_id=1, name="id", field_type=LongType())),
            properties=identity_properties(other),
        )
        (tmp_path / "tables.yaml").write_text(TABLES)
        (tmp_path / "syncs.yaml").write_text(SYNCS)
        report = validate_files([tmp_path / "tables.yaml", tmp_path / "syncs.yaml"], specs=SPECS)
        assert report.ok, report.render()
        yield report, lake, check_online(report)


def test_each_connection_and_catalog_opens_once_and_a_failure_names_its_field(
    online: tuple[Report, Any, list[Any]],
) -> None:
    issues = online[2]
    opened = [i for i in issues if "opens" in i.message or "does not open" in i.message]
    assert [(i.name, i.field, str(i.severity)) for i in opened] == [
        ("good", "snowflake_conn_id", "ok"),
        ("other_conn", "snowflake_conn_id", "error"),
        ("good", "catalog", "ok"),
        ("other_conn", "catalog", "error"),
    ]
    assert opened[0].message.endswith(
        "(also used by 'bad_key', 'drifted', 'float_key', 'hashed', 'no_source', 'not_yet', 'text_cursor', 'to_native')"
    )
    assert opened[0].message.startswith("Snowflake connection 'sf' opens (role ")
    assert "nope" in opened[1].message and "isn't defined" in opened[1].message
    assert opened[3].message.startswith("catalog 'nolake' does not open: CatalogConfigError: catalog 'nolake' is not")
    # The connection's own finding is at the line where defaults name it (every entry inherits it).
    assert opened[0].line == 2 and opened[1].line == 25


def test_sources_are_checked_with_the_loads_own_rules(online: tuple[Report, Any, list[Any]]) -> None:
    issues = online[2]
    assert only(issues, "good", "cursor.column") == [
        ("ok", "UPDATED_AT is TIMESTAMP_NTZ(9): a timestamp_ntz watermark")
    ]
    assert only(issues, "good", "primary_key") == [("ok", "key column(s) id are in the source")]
    assert only(issues, "good", "partition_by") == [("ok", "every partition transform applies to its column")]
    [(sev, msg)] = only(issues, "no_source", "source.table")
    assert sev == "error" and msg.startswith("the source cannot be read: ProgrammingError: ") and "MISSING" in msg
    assert only(issues, "text_cursor", "cursor.column") == [
        ("error", "cursor column 'NOTE' is VARCHAR(16777216); a watermark cursor must be TIMESTAMP_*, DATE or NUMBER")
    ]
    bad_key = only(issues, "bad_key")
    assert ("error", "partition_by") != bad_key
    assert any(s == "error" and m.startswith("column(s) ['order_id'] are not in the source") for s, m in bad_key)
    assert ("error", "partition_by column 'customer' is not a column of the source") in bad_key
    assert any(s == "warning" and m.startswith("'big' not in the source") for s, m in bad_key)
    [(sev, msg)] = [(str(i.severity), i.message) for i in issues if i.name == "drifted" and i.field is None]
    assert sev == "error" and "the config changed what Iceberg table shop.drifted was loaded with" in msg
    assert only(issues, "other_conn", "source.table") == []  # its connection did not open: nothing more to ask
    [(sev, msg)] = [(s, m) for s, m in only(issues, "float_key", "primary_key") if s != "ok"]
    assert sev == "error" and msg.startswith("the volume check cannot compare it: table 'float_key': column 'score' is")
    assert msg.endswith("use a NUMBER, text, DATE or TIMESTAMP key, or set volume.count_only")


def test_a_columns_section_is_checked_as_the_load_reads_the_source(online: tuple[Report, Any, list[Any]]) -> None:
    """Excluded columns are not in what the load reads; a hashed key is text, which the volume check compares."""
    issues = online[2]
    assert ("ok", "the source answers with 3 columns") in only(issues, "hashed", "source.table")
    assert only(issues, "hashed", "primary_key") == [("ok", "key column(s) id are in the source")]
    assert [s for s, _ in only(issues, "hashed")] == ["ok"] * len(only(issues, "hashed"))


def test_sources_are_asked_for_masking_and_row_access_policies(online: tuple[Report, Any, list[Any]]) -> None:
    """The emulator has no policies (its POLICY_REFERENCES answers no row); a query source cannot be asked."""
    issues = online[2]
    assert only(issues, "good", "on_policy") == [("ok", "no masking or row access policy applies to the source")]
    [(sev, msg)] = only(issues, "text_cursor", "on_policy")
    assert sev == "warning" and "custom query" in msg


def test_a_policy_is_an_error_under_fail_and_a_warning_under_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    """POLICY_REFERENCES rows shaped from Snowflake's documentation (tests/snowberg/snowflake/test_policies.py)."""
    from snowberg.checks.config_online import policy_findings
    from snowberg.config.table_config import parse_config
    from snowberg.snowflake import policies

    row = {"POLICY_DB": "GOV", "POLICY_SCHEMA": "P", "POLICY_NAME": "EMAIL_MASK", "POLICY_KIND": "MASKING_POLICY"}
    monkeypatch.setattr(policies, "read_references", lambda conn, name: policies.parse_references([
        {**row, "REF_COLUMN_NAME": "EMAIL"}]))  # fmt: skip
    monkeypatch.setattr(policies, "current_role", lambda conn: "LOADER")

    def cfg(**over: Any) -> TableConfig:
        entry = {"name": "t", "source": {"table": "DB.S.T"}, "target": "ns.t", **over}
        return parse_config({"tables": [entry]}).tables[0]

    [(fld, sev, msg)] = policy_findings(None, cfg())
    assert (fld, sev) == ("on_policy", Severity.ERROR) and "EMAIL_MASK" in msg and "role LOADER" in msg
    [(fld, sev, msg)] = policy_findings(None, cfg(on_policy="warn"))
    assert sev == Severity.WARNING and "column EMAIL carries masking policy GOV.P.EMAIL_MASK" in msg
    [(fld, sev, msg)] = policy_findings(None, cfg(on_policy="allow"))
    assert sev == Severity.OK and "each commit records it" in msg


def test_namespaces_are_probed_by_creating_and_purging_a_table_and_nothing_is_left(
    online: tuple[Report, Any, list[Any]],
) -> None:
    _, lake, issues = online
    probes = [i for i in issues if "probe table" in i.message]
    assert [(i.name, i.field, str(i.severity)) for i in probes] == [
        ("good", "target", "ok"),
        ("bad_key", "target", "ok"),
    ]
    assert probes[0].message.startswith("catalog 'lake': namespace 'shop' is writable: probe table shop.")
    assert probes[0].message.endswith(" created and purged")
    assert "namespace 'fresh_ns' does not exist yet; the first load creates it" in probes[1].message
    assert list(iter_probe_tables(lake, "shop")) == []
    assert not lake.namespace_exists("fresh_ns")
    assert sorted(t[1] for t in lake.list_tables("shop")) == ["drifted"]


def test_a_namespace_that_refuses_writes_is_an_error(catalog: Any) -> None:
    catalog.create_namespace("ro")

    class ReadOnly:
        def __getattr__(self, name: str) -> Any:
            return getattr(catalog, name)

        def create_table(self, *a: Any, **kw: Any) -> Any:
            raise PermissionError("403 Forbidden: not allowed to create tables in ro")

    sev, msg = probe_namespace(ReadOnly(), "ro")
    assert sev is Severity.ERROR
    assert msg == (
        "namespace 'ro' is not writable (creating a probe table failed): PermissionError: 403 Forbidden: not allowed "
        "to create tables in ro"
    )


def test_syncs_sources_and_targets(online: tuple[Report, Any, list[Any]]) -> None:
    issues = online[2]
    assert only(issues, "to_native", "target.table") == [("ok", "DB.S.ORDERS answers in Snowflake")]
    assert only(issues, "to_native", "source.table") == [
        ("warning", "shop.orders does not exist yet: runs fail until it is loaded")
    ]
    [(sev, msg)] = only(issues, "not_yet", "target.table")
    assert sev == "warning" and msg.startswith(
        "DB.S.NOT_THERE does not exist or this role cannot see it (the first run"
    )


def test_the_cli_runs_the_online_checks_with_connect(online: tuple[Report, Any, list[Any]], capsys: Any) -> None:
    from snowberg import cli

    paths = [f.path for f in online[0].files]
    assert cli.main(["validate", *paths]) == 0
    text = capsys.readouterr().out
    assert "opens" not in text  # offline by default
    assert cli.main(["validate", *paths, "--connect", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["errors"] >= 6
    assert {"ok", "warning", "error"} <= {i["severity"] for i in data["issues"]}


# -- streams and grants, against result shapes written from Snowflake's documentation ---------------------
#
# The emulator has no Streams, no SHOW GRANTS and no IS_ROLE_IN_SESSION. The rows below follow the documented
# columns of SHOW STREAMS, SHOW GRANTS ON <object> and SHOW TABLES (docs.snowflake.com, "SHOW STREAMS",
# "SHOW GRANTS", "SHOW TABLES"; IS_ROLE_IN_SESSION returns TRUE for a role active in the session or inherited
# by one); they are not recorded from an account. The live lane (test_config_online_live.py) runs the same checks.

SHOW_STREAMS = [
    "created_on", "name", "database_name", "schema_name", "owner", "comment", "table_name", "source_type",
    "base_tables", "type", "stale", "mode", "stale_after", "invalid_reason", "owner_role_type",
]  # fmt: skip
SHOW_GRANTS = [
    "created_on",
    "privilege",
    "granted_on",
    "name",
    "granted_to",
    "grantee_name",
    "grant_option",
    "granted_by",
]
SHOW_TABLES = [
    "created_on",
    "name",
    "database_name",
    "schema_name",
    "kind",
    "owner",
    "change_tracking",
    "owner_role_type",
]


class Desc:
    """A result column as the connector describes it (name first; a NUMBER(38,0) for the LIMIT 0 describes)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.type_code, self.precision, self.scale, self.internal_size, self.is_nullable = 0, 38, 0, None, True

    def __getitem__(self, i: int) -> str:
        return self.name


class DocShapedSnowflake:
    """Answers the statements the stream checks send, as Snowflake documents their results."""

    def __init__(
        self,
        *,
        streams: list[dict[str, Any]],
        grants: dict[str, list[tuple[str, str, str]]],  # "SCHEMA DB.S" → [(privilege, granted_to, grantee)]
        session_roles: set[str],
        tables: dict[str, dict[str, Any]],  # readable tables and streams ("DB.S.T") → SHOW TABLES row fields
    ) -> None:
        self.streams, self.grants, self.session_roles, self.tables = streams, grants, session_roles, tables
        self.sql: list[str] = []

    def cursor(self) -> Any:
        return Cursor(self)


class Cursor:
    def __init__(self, db: DocShapedSnowflake) -> None:
        self.db = db
        self.description: list[Any] = []
        self._rows: list[tuple[Any, ...]] = []

    def execute(self, sql: str, params: dict[str, Any] | None = None) -> None:
        self.db.sql.append(sql)
        params = params or {}
        if sql.startswith("SHOW STREAMS LIKE"):
            self._answer(SHOW_STREAMS, [s for s in self.db.streams if s["name"] == params["stream_like"]])
        elif sql.startswith("SHOW GRANTS ON "):
            on, name = sql[len("SHOW GRANTS ON ") :].split(" ", 1)
            key = f"{on} {name.replace(chr(34), '')}"
            if key not in self.db.grants:
                raise RuntimeError(f"003001 (42501): SQL access control error: Insufficient privileges on {key}")
            rows = [
                {"privilege": p, "granted_on": on, "name": name, "granted_to": kind, "grantee_name": role}
                for p, kind, role in self.db.grants[key]
            ]
            self._answer(SHOW_GRANTS, rows)
        elif sql == "SELECT CURRENT_ROLE()":
            self.description, self._rows = [Desc("CURRENT_ROLE()")], [(sorted(self.db.session_roles or {"PUBLIC"})[0],)]
        elif sql.startswith("SELECT IS_ROLE_IN_SESSION(") or sql.startswith("SELECT IS_DATABASE_ROLE_IN_SESSION("):
            self.description, self._rows = [Desc("X")], [(params["role"] in self.db.session_roles,)]
        elif sql.startswith("SHOW TABLES LIKE"):
            rows = [dict(r, name=k.split(".")[-1]) for k, r in self.db.tables.items() if k.endswith("." + params["t"])]
            self._answer(SHOW_TABLES, rows)
        elif sql.startswith("SELECT * FROM ") and sql.endswith(" LIMIT 0"):
            name = sql[len("SELECT * FROM ") : -len(" LIMIT 0")].replace('"', "")
            if name not in self.db.tables:
                raise RuntimeError(f"002003 (42S02): Object '{name}' does not exist or not authorized.")
            self.description, self._rows = [Desc("ID")], []
        else:
            raise AssertionError(f"unexpected statement {sql}")

    def _answer(self, columns: list[str], rows: list[dict[str, Any]]) -> None:
        self.description = [Desc(c) for c in columns]
        self._rows = [tuple(r.get(c) for c in columns) for r in rows]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def close(self) -> None:
        pass


def stream_cfg(**stream: Any) -> TableConfig:
    return TableConfig.model_validate(
        {
            "name": "orders_cdc",
            "source": {"table": "DB.S.ORDERS"},
            "target": "shop.orders_cdc",
            "primary_key": ["id"],
            "stream": {"name": "DB.S.ORDERS_STREAM", **stream},
        }
    )


def stream_row(**kw: Any) -> dict[str, Any]:
    row = {
        "created_on": datetime(2026, 11, 1),
        "name": "ORDERS_STREAM",
        "database_name": "DB",
        "schema_name": "S",
        "owner": "SNOWBERG",
        "table_name": "DB.S.ORDERS",
        "source_type": "Table",
        "type": "DELTA",
        "stale": "false",
        "mode": "DEFAULT",
        "stale_after": datetime(2026, 12, 14),
        "invalid_reason": "N/A",
        "owner_role_type": "ROLE",
    }
    return {**row, **kw}


def test_an_existing_stream_is_read_without_consuming_and_its_mode_and_grants_checked() -> None:
    db = DocShapedSnowflake(
        streams=[stream_row(mode="APPEND_ONLY", owner="ADMIN")],
        grants={
            "STREAM DB.S.ORDERS_STREAM": [("OWNERSHIP", "ROLE", "ADMIN"), ("SELECT", "ROLE", "SNOWBERG")],
            # The staging table's privileges come to the session through an inherited role.
            "TABLE DB.S.ORDERS_STREAM_SNOWBERG_STAGING": [("OWNERSHIP", "ROLE", "LOADERS")],
        },
        session_roles={"SNOWBERG", "LOADERS"},
        tables={"DB.S.ORDERS_STREAM": {}, "DB.S.ORDERS_STREAM_SNOWBERG_STAGING": {}},
    )
    got = [(f, str(s), m) for f, s, m in stream_findings(db, stream_cfg())]
    assert got == [
        ("stream.name", "ok", "stream DB.S.ORDERS_STREAM exists (mode APPEND_ONLY)"),
        (
            "stream.append_only",
            "error",
            "stream DB.S.ORDERS_STREAM is APPEND_ONLY but the config says append_only: false; fix the config (or "
            "re-create the stream with recover_stale_stream=true)",
        ),
        ("stream.name", "ok", "SELECT on DB.S.ORDERS_STREAM and its table (read with LIMIT 0, nothing consumed)"),
        (
            "stream.name",
            "warning",
            "the connection's roles lack OWNERSHIP on STREAM DB.S.ORDERS_STREAM (recover_stale_stream re-creates the "
            "stream): GRANT OWNERSHIP ON STREAM DB.S.ORDERS_STREAM TO ROLE <snowberg's role>",
        ),
        (
            "stream.staging_table",
            "ok",
            "SELECT, INSERT, DELETE on TABLE DB.S.ORDERS_STREAM_SNOWBERG_STAGING held through role LOADERS (the "
            "staging table)",
        ),
    ]
    assert not any("CHANGES" in s or "INSERT INTO" in s for s in db.sql)  # nothing consumed, nothing written


def test_a_missing_stream_without_create_is_an_error() -> None:
    db = DocShapedSnowflake(
        streams=[],
        grants={"SCHEMA DB.S": [("CREATE TABLE", "ROLE", "SNOWBERG")]},
        session_roles={"SNOWBERG"},
        tables={},
    )
    got = stream_findings(db, stream_cfg())
    assert (got[0][0], str(got[0][1])) == ("stream.name", "error")
    assert "does not exist or this role cannot see it, and stream.create is false (the default)" in got[0][2]
    assert got[1] == (
        "stream.staging_table",
        Severity.OK,
        "CREATE TABLE on SCHEMA DB.S held through role SNOWBERG (to create the staging table)",
    )


def test_a_stream_to_create_needs_create_stream_change_tracking_and_a_staging_schema_grant() -> None:
    db = DocShapedSnowflake(
        streams=[],
        grants={
            "SCHEMA DB.S": [("CREATE STREAM", "ROLE", "SNOWBERG"), ("USAGE", "ROLE", "SNOWBERG")],
            "SCHEMA DB.STAGE": [("USAGE", "ROLE", "SNOWBERG"), ("CREATE TABLE", "ROLE", "OTHER_TEAM")],
        },
        session_roles={"SNOWBERG"},
        tables={"DB.S.ORDERS": {"change_tracking": "OFF", "owner": "SALES_ADMIN", "owner_role_type": "ROLE"}},
    )
    got = [(f, str(s), m) for f, s, m in stream_findings(db, stream_cfg(create=True, staging_table="DB.STAGE.ST"))]
    assert got == [
        ("stream.create", "ok", "CREATE STREAM on SCHEMA DB.S held through role SNOWBERG (to create the stream)"),
        (
            "stream.on_table",
            "error",
            "CHANGE_TRACKING is off for DB.S.ORDERS and only its owner (SALES_ADMIN) can turn it on: have the owner "
            "run ALTER TABLE DB.S.ORDERS SET CHANGE_TRACKING = TRUE",
        ),
        (
            "stream.staging_table",
            "error",
            "the connection's roles lack CREATE TABLE on SCHEMA DB.STAGE (to create the staging table): GRANT CREATE "
            "TABLE ON SCHEMA DB.STAGE TO ROLE <snowberg's role>",
        ),
    ]


def test_change_tracking_already_on_or_owned_by_the_session_passes() -> None:
    for row, expected in [
        ({"change_tracking": "ON", "owner": "X"}, "CHANGE_TRACKING is on for DB.S.ORDERS"),
        (
            {"change_tracking": "OFF", "owner": "SNOWBERG", "owner_role_type": "ROLE"},
            "CHANGE_TRACKING is off for DB.S.ORDERS; the stream turns it on (role SNOWBERG)",
        ),
    ]:
        db = DocShapedSnowflake(
            streams=[],
            grants={"SCHEMA DB.S": [("OWNERSHIP", "ROLE", "SNOWBERG")]},
            session_roles={"SNOWBERG"},
            tables={"DB.S.ORDERS": row},
        )
        got = stream_findings(db, stream_cfg(create=True))
        assert ("stream.on_table", Severity.OK, expected) in got


def test_a_grant_listing_that_fails_is_a_warning_never_a_pass() -> None:
    db = DocShapedSnowflake(streams=[], grants={}, session_roles={"SNOWBERG"}, tables={})
    got = stream_findings(db, stream_cfg(create=True, on_table="DB.S.ORDERS"))
    create = [(s, m) for f, s, m in got if f == "stream.create"]
    assert len(create) == 1 and create[0][0] is Severity.WARNING
    assert create[0][1].startswith("could not verify CREATE STREAM on SCHEMA DB.S (to create the stream): RuntimeError")


def test_the_online_stream_check_runs_inside_check_online(tmp_path: Path) -> None:
    """check_online hands a stream table's own connection to the stream checks (connection and catalog seams)."""
    p = tmp_path / "tables.yaml"
    p.write_text(
        "tables:\n  - name: orders_cdc\n    source: {table: DB.S.ORDERS}\n    target: shop.orders_cdc\n"
        "    primary_key: [id]\n    stream: {name: DB.S.ORDERS_STREAM}\n"
    )
    report = validate_files([p], specs=SPECS)
    db = DocShapedSnowflake(
        streams=[stream_row()], grants={}, session_roles=set(), tables={"DB.S.ORDERS_STREAM": {}, "DB.S.ORDERS": {}}
    )

    @contextmanager
    def connect(conn_id: str) -> Any:
        assert conn_id == "snowflake_default"
        yield db

    def no_catalog(ref: str) -> Any:
        raise RuntimeError("no lake here")

    issues = check_online(report, connect=connect, open_catalog=no_catalog)
    lines = {(i.field, str(i.severity)): i.line for i in issues}
    assert ("source.table", "ok") in lines and ("primary_key", "ok") in lines  # the source checks ran too
    assert lines[("snowflake_conn_id", "ok")] == 2  # the entry: the field is not written, its default applies
    assert lines[("catalog", "error")] == 2
    assert any(i.field == "stream.name" and i.line == 6 and "exists (mode DEFAULT)" in i.message for i in issues)


# -- the write probe: what it leaves behind (issue 28) ------------------------------------------------------


def _warehouse(catalog: Any) -> Path:
    return Path(catalog.properties["warehouse"].removeprefix("file://"))


def test_the_probe_leaves_no_table_no_file_and_no_folder(catalog: Any) -> None:
    """Before the fix every run left an empty ``<warehouse>/<ns>/snowberg_validate_probe_<hex>/`` folder (and
    ``<warehouse>/<ns>/`` for a namespace created for the probe)."""
    catalog.create_namespace("shop")
    sev, msg = probe_namespace(catalog, "shop")
    assert sev is Severity.OK and msg.endswith(" created and purged"), msg
    sev, msg = probe_namespace(catalog, "fresh_ns")
    assert sev is Severity.OK and "(both removed" in msg, msg
    assert list(iter_probe_tables(catalog, "shop")) == [] and not catalog.namespace_exists("fresh_ns")
    assert [p.relative_to(_warehouse(catalog)) for p in _warehouse(catalog).rglob("*")] == [Path("shop")]


class _RefusesCleanup:
    """A catalog whose role may create tables and namespaces but not drop them (least privilege)."""

    def __init__(self, catalog: Any, *, drop_table: bool = False, drop_namespace: bool = False) -> None:
        self.catalog, self.refuse_table, self.refuse_namespace = catalog, not drop_table, not drop_namespace

    def __getattr__(self, name: str) -> Any:
        return getattr(self.catalog, name)

    def purge_table(self, ident: Any) -> None:
        raise PermissionError("403 Forbidden: purge not allowed")

    def drop_table(self, ident: Any) -> None:
        if self.refuse_table:
            raise PermissionError("403 Forbidden: drop not allowed")
        self.catalog.drop_table(ident)

    def drop_namespace(self, ns: Any) -> None:
        if self.refuse_namespace:
            raise PermissionError("403 Forbidden: drop namespace not allowed")
        self.catalog.drop_namespace(ns)


def test_a_probe_that_cannot_be_removed_is_an_error_naming_what_remains(catalog: Any) -> None:
    """Before the fix: ``ok``, "probe table … created and dropped", with only a log line saying the drop failed."""
    catalog.create_namespace("shop")
    sev, msg = probe_namespace(_RefusesCleanup(catalog), "shop")
    [left] = iter_probe_tables(catalog, "shop")
    assert sev is Severity.ERROR, msg
    assert msg.startswith(f"namespace 'shop' is writable (probe table {left} created), but the probe was not removed: ")
    assert f"the table {left} remains" in msg and "403 Forbidden: drop not allowed" in msg
    assert msg.endswith("the next validate removes it, or drop it by hand")


def test_a_dropped_probe_leaves_no_metadata_file(catalog: Any) -> None:
    """A catalog that cannot purge but can drop: the probe's metadata file is deleted by snowberg, not left."""
    catalog.create_namespace("shop")
    sev, msg = probe_namespace(_RefusesCleanup(catalog, drop_table=True, drop_namespace=True), "shop")
    assert sev is Severity.OK and msg.endswith(" created and dropped"), msg
    assert [p.relative_to(_warehouse(catalog)) for p in _warehouse(catalog).rglob("*")] == [Path("shop")]


def test_a_namespace_created_for_the_probe_that_cannot_be_dropped_is_an_error(catalog: Any) -> None:
    """Before the fix: ``ok``, "(both removed, …)" while the namespace stayed."""
    sev, msg = probe_namespace(_RefusesCleanup(catalog, drop_table=True), "fresh_ns")
    assert sev is Severity.ERROR, msg
    assert "the namespace 'fresh_ns' (created for the probe) remains" in msg and "drop namespace not allowed" in msg
    assert catalog.namespace_exists("fresh_ns") and list(iter_probe_tables(catalog, "fresh_ns")) == []


def test_a_probe_left_by_a_killed_validate_is_removed_by_the_next_one(catalog: Any, tmp_path: Path) -> None:
    """A validate killed between creating its probe and removing it (a real process death at the failpoint)."""
    import os
    import subprocess
    import sys

    catalog.create_namespace("shop")
    code = (
        "import sys; from pyiceberg.catalog.sql import SqlCatalog; "
        "from snowberg.checks.config_online import probe_namespace; "
        "probe_namespace(SqlCatalog(sys.argv[1], uri=sys.argv[2], warehouse=sys.argv[3]), 'shop')"
    )
    died = subprocess.run(
        [sys.executable, "-c", code, catalog.name, catalog.properties["uri"], catalog.properties["warehouse"]],
        env={**os.environ, "SNOWBERG_FAULT": "validate_probe_created"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert died.returncode == 137, died.stderr[-2000:]
    [left] = iter_probe_tables(catalog, "shop")
    sev, msg = probe_namespace(catalog, "shop")
    assert sev is Severity.OK, msg
    assert msg.endswith(f"; removed 1 probe table an earlier validate left: {left}"), msg
    assert list(iter_probe_tables(catalog, "shop")) == []
    assert [p.relative_to(_warehouse(catalog)) for p in _warehouse(catalog).rglob("*")] == [Path("shop")]


def test_read_only_skips_the_write_probe(online: tuple[Report, Any, list[Any]]) -> None:
    report, lake, _ = online
    before = sorted(lake.list_tables("shop"))
    issues = check_online(report, write_probe=False)
    probes = [(i.name, i.field, str(i.severity), i.message) for i in issues if "probed for writes" in i.message]
    assert probes == [
        ("good", "target", "ok", "catalog 'lake': namespace 'shop' exists (not probed for writes: --read-only)"),
        (
            "bad_key",
            "target",
            "warning",
            "catalog 'lake': namespace 'fresh_ns' does not exist yet; the first load creates it (not probed for "
            "writes: --read-only)",
        ),
    ]
    assert sorted(lake.list_tables("shop")) == before and not lake.namespace_exists("fresh_ns")


def test_validate_help_says_the_check_creates_and_drops_a_table(capsys: Any) -> None:
    from snowberg import cli

    with pytest.raises(SystemExit):
        cli.main(["validate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "creating and dropping a one-column table snowberg_validate_probe_<hex>" in text
    assert "--read-only" in text
