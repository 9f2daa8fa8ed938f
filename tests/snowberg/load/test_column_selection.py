"""``columns.exclude`` and ``columns.hash`` through real loads on the emulator: a merge table with a cursor, a
table without a cursor (full refresh), schema changes of either list, the volume check on hashed keys, and the
salt read from its Airflow Variable by the hook (stream tables: ``tests/snowberg/streams/test_stream_columns.py``).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from snowberg.config.table_config import TableConfig, parse_config
from snowberg.iceberg.identity import ConfigDriftError
from snowberg.load.extract import load_window
from snowberg.load.plan import plan_run
from snowberg.load.publish import publish, reconcile_before_plan
from snowberg.mapping.columns import TypeMappingError
from snowberg.snowflake.projection import HashSaltError, set_salt

SALT = "pepper-7f3a"
DDL = (
    "CREATE TABLE {t} (CODE VARCHAR(20), EMAIL VARCHAR(100), SSN VARCHAR(11), AMOUNT NUMBER(10,2), "
    "UPDATED_AT TIMESTAMP_NTZ(9))"
)


def sha(value: Any, salt: str = SALT) -> str:
    """What Snowflake's ``SHA2(TO_VARCHAR(v) || salt, 256)`` gives for a text value."""
    return hashlib.sha256(f"{value}{salt}".encode()).hexdigest()


def ts(hours_ago: float) -> str:
    at = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=hours_ago)
    return f"'{at:%Y-%m-%d %H:%M:%S.%f}'::TIMESTAMP_NTZ"


def config(sfdb: Any, **over: Any) -> TableConfig:
    entry = {"name": "c", "source": {"table": sfdb.table("CUSTOMERS")}, "target": "ns.c", **over}
    return parse_config({"tables": [entry]}).tables[0]


def run(cfg: TableConfig, sfdb: Any, catalog: Any, variables: Any, run_id: str, **plan: Any) -> Any:
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, sfdb.conn, table, run_id=run_id, **plan)
    r = load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)
    return r


def lake(catalog: Any) -> list[dict[str, Any]]:
    return sorted(catalog.load_table("ns.c").scan().to_arrow().to_pylist(), key=lambda r: r["code"])


def lake_bytes(tmp_path: Path) -> bytes:
    """Every file the lake wrote (data, manifests, metadata): a clear value must be in none of them."""
    return b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and "wh" in p.parts)


@pytest.fixture
def source(sfdb: Any) -> Any:
    sfdb.sql(DDL.format(t=sfdb.table("CUSTOMERS")))
    sfdb.sql(
        f"INSERT INTO {sfdb.table('CUSTOMERS')} VALUES ('C1', 'ann@example.org', '111-22-3333', 10.50, {ts(3)}), "
        f"('C2', 'bob@example.org', '444-55-6666', 20.00, {ts(3)})"
    )
    set_salt(sfdb.conn, SALT)
    return sfdb


def test_a_merge_table_never_reads_an_excluded_column_and_merges_on_a_hashed_key(
    source: Any, catalog: Any, variables: Any, tmp_path: Path
) -> None:
    cfg = config(
        source,
        cursor={"column": "updated_at"},
        primary_key=["code"],
        columns={"exclude": ["ssn"], "hash": ["code", "email"]},
    )
    run(cfg, source, catalog, variables, "r1")
    schema = catalog.load_table("ns.c").schema()
    assert [f.name for f in schema.fields] == ["code", "email", "amount", "updated_at"]  # no ssn
    assert [(r["code"], r["email"]) for r in lake(catalog)] == sorted(
        [(sha("C1"), sha("ann@example.org")), (sha("C2"), sha("bob@example.org"))]
    )
    # An update of C1 merges on the hashed key: one row per key, the new values.
    source.sql(
        f"UPDATE {source.table('CUSTOMERS')} SET EMAIL = 'ann@new.org', AMOUNT = 11, UPDATED_AT = {ts(2)} "
        "WHERE CODE = 'C1'"
    )
    assert run(cfg, source, catalog, variables, "r2").rows == 1
    rows = {r["code"]: r for r in lake(catalog)}
    assert len(rows) == 2 and rows[sha("C1")]["email"] == sha("ann@new.org")
    assert str(rows[sha("C1")]["amount"]) == "11.00"
    data = lake_bytes(tmp_path)
    for clear in (b"ann@example.org", b"ann@new.org", b"bob@example.org", b"111-22-3333", b"C1", SALT.encode()):
        assert clear not in data, clear


def test_a_table_without_a_cursor_reloads_with_the_same_columns_left_out_and_hashed(
    source: Any, catalog: Any, variables: Any, tmp_path: Path
) -> None:
    cfg = config(source, columns={"exclude": ["ssn", "updated_at"], "hash": ["email"]})
    run(cfg, source, catalog, variables, "r1")
    assert [f.name for f in catalog.load_table("ns.c").schema().fields] == ["code", "email", "amount"]
    source.sql(f"INSERT INTO {source.table('CUSTOMERS')} VALUES ('C3', NULL, '777-88-9999', 1, {ts(1)})")
    run(cfg, source, catalog, variables, "r2")
    assert [(r["code"], r["email"]) for r in lake(catalog)] == [
        ("C1", sha("ann@example.org")),
        ("C2", sha("bob@example.org")),
        ("C3", None),  # NULL stays NULL
    ]
    assert b"777-88-9999" not in lake_bytes(tmp_path) and b"ann@example.org" not in lake_bytes(tmp_path)


def test_a_query_source_takes_the_same_columns_section(source: Any, catalog: Any, variables: Any) -> None:
    query = f"SELECT CODE, EMAIL, SSN FROM {source.table('CUSTOMERS')}"
    cfg = parse_config(
        {
            "tables": [
                {
                    "name": "c",
                    "source": {"query": query},
                    "target": "ns.c",
                    "columns": {"exclude": ["ssn"], "hash": ["email"]},
                }
            ]
        }
    ).tables[0]
    run(cfg, source, catalog, variables, "r1")
    assert lake(catalog)[0] == {"code": "C1", "email": sha("ann@example.org")}


def test_a_newly_excluded_column_is_a_dropped_column(source: Any, catalog: Any, variables: Any) -> None:
    cursor = {"column": "updated_at"}
    run(config(source, cursor=cursor, primary_key=["code"]), source, catalog, variables, "r1")
    source.sql(f"UPDATE {source.table('CUSTOMERS')} SET AMOUNT = 12, UPDATED_AT = {ts(2)} WHERE CODE = 'C2'")
    excluded = config(source, cursor=cursor, primary_key=["code"], columns={"exclude": ["ssn"]})
    with pytest.raises(TypeMappingError, match="ssn"):
        run(excluded, source, catalog, variables, "r2")  # on_column_dropped: fail (the default)
    kept = config(
        source, cursor=cursor, primary_key=["code"], columns={"exclude": ["ssn"]}, on_column_dropped="keep_null"
    )
    run(kept, source, catalog, variables, "r3")
    rows = {r["code"]: r for r in lake(catalog)}
    assert rows["C2"]["ssn"] is None and rows["C1"]["ssn"] == "111-22-3333"  # kept, NULL from now on


def test_a_newly_hashed_column_is_refused_unless_the_table_is_reloaded(
    source: Any, catalog: Any, variables: Any
) -> None:
    cursor = {"column": "updated_at"}
    run(config(source, cursor=cursor, primary_key=["code"]), source, catalog, variables, "r1")
    hashed = config(source, cursor=cursor, primary_key=["code"], columns={"hash": ["email"]})
    with pytest.raises(ConfigDriftError, match=r"columns.hash was '\(none\)', is now 'email'"):
        run(hashed, source, catalog, variables, "r2")
    run(hashed, source, catalog, variables, "r3", mode="full_refresh")
    assert {r["email"] for r in lake(catalog)} == {sha("ann@example.org"), sha("bob@example.org")}
    # Back to clear values: refused as well (a column would mix hashes and clear values).
    with pytest.raises(ConfigDriftError, match="columns.hash was 'email', is now"):
        run(config(source, cursor=cursor, primary_key=["code"]), source, catalog, variables, "r4")


def test_the_volume_check_compares_hashed_keys(source: Any, catalog: Any, variables: Any) -> None:
    from snowberg.checks import hashdiff as hd
    from snowberg.checks.volume import verify

    cfg = config(source, cursor={"column": "updated_at"}, primary_key=["code"], columns={"hash": ["code"]})
    run(cfg, source, catalog, variables, "r1")
    table = catalog.load_table("ns.c")
    report = verify(cfg, table, source.conn, settings=cfg.volume, dialect=hd.HashDialect.EMULATOR)
    assert report.ok and report.source_rows == report.lake_rows == 2, report.to_dict()
    # Under another salt the source's hashes are not the lake's: the check compares the hashes themselves
    # (strict checksums: the default level compares a text key by its length, which a hash always has).
    strict = cfg.volume.model_copy(update={"strict_checksums": True})
    assert verify(cfg, table, source.conn, settings=strict, dialect=hd.HashDialect.EMULATOR).ok
    set_salt(source.conn, "another salt")
    bad = verify(cfg, table, source.conn, settings=strict, dialect=hd.HashDialect.EMULATOR)
    assert not bad.ok, json.dumps(bad.to_dict(), default=str)


def test_the_hook_sets_the_salt_from_its_variable_masks_it_and_fails_naming_a_missing_one(
    sfdb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk import log as sdk_log

    from snowberg.snowflake.hook import snowflake_hook

    masked: list[Any] = []
    monkeypatch.setattr(sdk_log, "mask_secret", lambda secret, name=None: masked.append(secret))
    monkeypatch.setenv("AIRFLOW_CONN_SF_SALT", sfdb.airflow_connection())
    cfg = config(sfdb, columns={"hash": ["email"], "hash_salt": "crm_salt"}, snowflake_conn_id="sf_salt")
    monkeypatch.delenv("AIRFLOW_VAR_CRM_SALT", raising=False)
    with pytest.raises(HashSaltError, match="Airflow Variable 'crm_salt' is missing"):
        snowflake_hook("sf_salt", cfg).get_conn()
    monkeypatch.setenv("AIRFLOW_VAR_CRM_SALT", SALT)
    conn = snowflake_hook("sf_salt", cfg).get_conn()
    try:
        cur = conn.cursor()
        cur.execute("SELECT SHA2(TO_VARCHAR('x') || $SNOWBERG_HASH_SALT, 256)")
        assert cur.fetchone() == (sha("x"),)
    finally:
        conn.close()
    assert SALT in masked
    # A table without hashed columns needs no Variable.
    plain = snowflake_hook("sf_salt", config(sfdb, snowflake_conn_id="sf_salt")).get_conn()
    plain.close()


@pytest.mark.parametrize(
    ("columns", "over", "error"),
    [
        ({"exclude": ["id"]}, {"primary_key": ["id"]}, "columns.exclude leaves out 'id', which primary_key needs"),
        ({"exclude": ["updated_at"]}, {"cursor": {"column": "updated_at"}}, "which cursor.column needs"),
        ({"hash": ["updated_at"]}, {"cursor": {"column": "updated_at"}}, "cannot hash the cursor column"),
        ({"hash": ["big"]}, {"number_as_long": ["big"]}, "which number_as_long cannot take"),
        ({"hash": ["email"], "exclude": ["EMAIL"]}, {}, "are in both exclude and hash"),
        ({"hash": ["email"], "hash_salt": "not a name!"}, {}, "hash_salt"),
    ],
)
def test_columns_the_load_could_not_honour_are_refused_when_the_config_is_read(
    columns: dict[str, Any], over: dict[str, Any], error: str
) -> None:
    from snowberg.config.table_config import ConfigError

    entry = {"name": "c", "source": {"table": "DB.S.T"}, "target": "ns.c", "columns": columns, **over}
    with pytest.raises(ConfigError, match=error.replace("(", r"\(").replace(")", r"\)")):
        parse_config({"tables": [entry]})


def test_defaults_give_every_table_the_columns_section() -> None:
    data = {
        "defaults": {"columns": {"exclude": ["ssn"]}},
        "tables": [
            {"name": "a", "source": {"table": "DB.S.A"}, "target": "ns.a"},
            {"name": "b", "source": {"table": "DB.S.B"}, "target": "ns.b", "columns": {"hash": ["email"]}},
        ],
    }
    a, b = parse_config(data).tables
    assert a.columns.exclude == ["ssn"]
    assert (b.columns.exclude, b.columns.hash) == ([], ["email"])  # a table's own section replaces the default
    assert json.loads(a.columns.model_dump_json())["hash_salt"] == "snowberg_hash_salt"


def test_the_push_down_unload_copies_through_the_same_projection(source: Any, catalog: Any) -> None:
    """COPY INTO @stage runs on Snowflake only (the emulator has no unload): its statement is checked here."""
    from snowberg.config.table_config import UnloadSettings
    from snowberg.load.extract import mapping_options
    from snowberg.load.unload import UnloadTarget, copy_sql
    from snowberg.mapping.rules import map_columns
    from snowberg.snowflake.source import SourceQuery, result_columns

    cfg = config(source, cursor={"column": "updated_at"}, columns={"exclude": ["ssn"], "hash": ["email"]})
    w = plan_run(cfg, source.conn, None, run_id="r1")
    cur = source.conn.cursor()
    cur.execute(f"SELECT * FROM {SourceQuery(cfg).from_clause} LIMIT 0")
    cols = map_columns(result_columns(cur), mapping_options(cfg))
    assert [c.name for c in cols] == ["code", "email", "amount", "updated_at"]
    settings = UnloadSettings(stage="LAKE_DB.PUBLIC.LAKE_STAGE", stage_url="s3://lake/unload")
    sql, _ = copy_sql(cfg, w, cols, UnloadTarget(stage=settings.stage, stage_url=settings.stage_url))
    assert 'FROM (SELECT * EXCLUDE ("SSN") REPLACE (SHA2(TO_VARCHAR("EMAIL") || $SNOWBERG_HASH_SALT, 256)' in sql


def test_the_docs_example_and_its_projection_are_what_snowberg_builds() -> None:
    """docs/configuration.md, "Leaving out and hashing columns": the YAML validates and gives the SQL shown."""
    import re
    import textwrap

    import yaml

    from snowberg.snowflake.source import SourceQuery

    text = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text()
    section = text[text.index("## Leaving out and hashing columns") :]
    example, sql = re.findall(r"```(?:yaml|sql)\n(.*?)```", section, re.S)[:2]
    cfg = parse_config(yaml.safe_load(example)).tables[0]
    assert " ".join(SourceQuery(cfg).from_clause.split()) == " ".join(textwrap.dedent(sql).replace("\n", " ").split())
