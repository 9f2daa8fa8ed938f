"""The inspect / read / rollback / tag / maintain commands against a real SQLite-catalog table."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "iceberg"))
from maint_harness import small_table  # noqa: E402

from snowberg import cli  # noqa: E402


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: Any, catalog: Any) -> Any:
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__URI", catalog.properties["uri"])
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__WAREHOUSE", catalog.properties["warehouse"])
    cfg = tmp_path / "tables.yaml"
    cfg.write_text(
        "tables:\n  - name: things\n    source: {table: DB.S.T}\n    target: ns.t\n"
        "    cursor: {column: updated_at}\n    maintenance: {min_snapshots: 1, snapshot_retention: 0s}\n"
    )
    monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(cfg))
    return catalog


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_inspect_snapshots_as_a_table_and_as_json(lake: Any, capsys: Any) -> None:
    small_table(lake, 3)
    code, out, _ = run(capsys, "inspect", "things", "snapshots")
    assert code == 0
    header = out.splitlines()[1]
    assert header.split() == [
        "committed_at",
        "snapshot_id",
        "parent_id",
        "operation",
        "run_id",
        "watermark",
        "rows",
        "partial_of",
    ]
    assert "run3" in out and out.count("append") == 3
    code, out, _ = run(capsys, "inspect", "ns.t", "snapshots", "--catalog", "lake", "--json")
    rows = json.loads(out)
    assert [r["watermark"] for r in rows] == ["1", "2", "3"] and rows[0]["summary"]["snowberg.run-id"] == "run1"


@pytest.mark.parametrize("what", ["history", "files", "manifests", "partitions", "refs"])
def test_inspect_every_metadata_table(lake: Any, capsys: Any, what: str) -> None:
    small_table(lake, 2, partitioned=True)
    code, out, _ = run(capsys, "inspect", "things", what, "--json")
    assert code == 0 and isinstance(json.loads(out), list) and json.loads(out)
    code, out, _ = run(capsys, "inspect", "things", what)
    assert code == 0 and len(out.splitlines()) >= 4


def test_read_as_of_snapshot_time_with_filter_and_limit(lake: Any, capsys: Any) -> None:
    t = small_table(lake, 2)
    first = list(t.snapshots())[0]
    time.sleep(0.01)
    _, out, _ = run(capsys, "read", "things", "--json", "--limit", "100")
    assert len(json.loads(out)) == 20
    _, out, _ = run(capsys, "read", "things", "--json", "--as-of-snapshot", str(first.snapshot_id))
    assert sorted(r["id"] for r in json.loads(out)) == list(range(10))
    at = datetime.fromtimestamp(first.timestamp_ms / 1000, tz=UTC).isoformat()
    _, out, _ = run(capsys, "read", "things", "--json", "--as-of-time", at, "--where", "id >= 5")
    assert sorted(r["id"] for r in json.loads(out)) == list(range(5, 10))
    _, out, _ = run(capsys, "read", "things", "--limit", "3")
    assert out.strip().endswith("(3 rows)")
    code, _, err = run(capsys, "read", "things", "--as-of-time", "2000-01-01")
    assert code == 2 and "no snapshot at or before" in err
    code, _, err = run(capsys, "read", "things", "--where", "id >>> 3")
    assert code == 2 and "not a filter expression" in err


def test_rollback_dry_run_then_rollback_and_tags(lake: Any, capsys: Any) -> None:
    t = small_table(lake, 3)
    first = list(t.snapshots())[0].snapshot_id
    code, out, _ = run(capsys, "tag", "things", "first", "--snapshot", str(first))
    assert code == 0 and f"snapshot {first}" in out
    _, out, _ = run(capsys, "inspect", "things", "refs")
    assert "first" in out and "TAG" in out
    code, out, _ = run(capsys, "rollback", "things", "--before-run", "run3", "--dry-run")
    assert code == 0 and "would roll back" in out and "'3' → '2'" in out
    assert lake.load_table("ns.t").current_snapshot().snapshot_id == t.current_snapshot().snapshot_id
    code, out, _ = run(capsys, "rollback", "things", "--to-tag", "first", "--no-variable")
    assert code == 0 and "airflow variables set snowberg__ns__t__watermark" in out
    assert lake.load_table("ns.t").current_snapshot().snapshot_id == first
    code, _, err = run(capsys, "rollback", "things", "--to-tag", "nope", "--no-variable")
    assert code == 2 and "no tag 'nope'" in err


def test_after_a_rollback_with_no_variable_the_next_run_adopts_the_rolled_back_table(
    lake: Any, capsys: Any, variables: Any
) -> None:
    """``--no-variable`` leaves the Variable on the undone head: the rollback's record of it lets the run adopt."""
    from snowberg.iceberg import state

    t = small_table(lake, 3)
    variables["snowberg__ns__t__watermark"] = state.mirror_value(state.read_state(t))
    code, out, _ = run(capsys, "rollback", "things", "--before-run", "run3", "--no-variable")
    assert code == 0 and "next run adopts the rolled-back state" in out
    t = lake.load_table("ns.t")
    done = state.reconcile("snowberg__ns__t__watermark", state.read_state(t), variables, t)
    assert "was rolled back" in done and json.loads(variables["snowberg__ns__t__watermark"])["run_id"] == "run2"


def test_maintain_uses_the_tables_settings(lake: Any, capsys: Any, airflow_db: str) -> None:
    small_table(lake, 5)
    code, out, _ = run(capsys, "maintain", "things", "--dry-run")
    r = json.loads(out)
    assert code == 0 and r["compact"]["status"] == "dry_run" and len(r["expire"]["expired"]) == 4
    code, out, _ = run(capsys, "maintain", "things")
    r = json.loads(out)
    assert r["compact"]["status"] == "committed" and r["compact"]["files_after"] == 1
    t = lake.load_table("ns.t")
    assert len(list(t.snapshots())) == 1 and len(t.scan().to_arrow()) == 50


def test_unknown_table_name_is_refused(lake: Any, capsys: Any) -> None:
    code, _, err = run(capsys, "inspect", "nope", "refs")
    assert code == 2 and "'nope' is not a table name" in err


def test_rollback_sets_the_watermark_variable_in_airflow(lake: Any, capsys: Any, airflow_db: str) -> None:
    from airflow.models import Variable

    small_table(lake, 3)
    Variable.set("snowberg__ns__t__watermark", json.dumps({"snapshot_id": 1, "watermark": "3"}))
    code, out, _ = run(capsys, "rollback", "things", "--before-run", "run3")
    assert code == 0 and "Variable snowberg__ns__t__watermark is set to" in out
    mirror = json.loads(Variable.get("snowberg__ns__t__watermark"))
    assert mirror["watermark"] == "2" and mirror["run_id"] == "run2"


def test_validate_finds_the_configs_like_the_dags_and_exits_0_when_valid(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    include = tmp_path / "include"
    include.mkdir()
    (include / "tables.yaml").write_text("tables:\n  - {name: a, source: {table: D.S.T}, target: n.a}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SNOWBERG_TABLES_CONFIG", raising=False)
    monkeypatch.delenv("SNOWBERG_SYNCS_CONFIG", raising=False)
    code, out, _ = run(capsys, "validate")
    assert code == 0
    assert out.strip() == f"OK: 0 errors, 0 warnings in {include / 'tables.yaml'} (1 valid table)"


def test_validate_exits_1_and_lists_every_error_as_json_on_stdout(tmp_path: Path, capsys: Any) -> None:
    tables = tmp_path / "tables.yaml"
    tables.write_text(
        "tables:\n  - {name: a, source: {table: D.S.T}, target: n.a, schedule: hourly}\n"
        "  - {name: b, source: {table: D.S.T}, target: nodot}\n"
    )
    syncs = tmp_path / "syncs.yaml"
    syncs.write_text("syncs:\n  - {name: s, source: {catalog: lake, table: n.a}, target: {kind: native}}\n")
    code, out, _ = run(capsys, "validate", str(tables), str(syncs), "--json")
    assert code == 1
    data = json.loads(out)  # Airflow's log lines went to stderr
    assert [(Path(i["file"]).name, i["line"], i["name"], i["field"]) for i in data["issues"]] == [
        ("tables.yaml", 2, "a", "schedule"),
        ("tables.yaml", 3, "b", "target"),
        ("syncs.yaml", 2, "s", "target.table"),
    ]
    code, out, _ = run(capsys, "validate", str(tables))
    assert code == 1 and out.splitlines()[-1].startswith("FAILED: 2 errors, 0 warnings in ")
    assert out.splitlines()[0].startswith(f"{tables}:2: table 'a': field 'schedule': Airflow refuses the schedule")


def test_validate_without_a_tables_config_is_an_error(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SNOWBERG_TABLES_CONFIG", raising=False)
    monkeypatch.delenv("SNOWBERG_SYNCS_CONFIG", raising=False)
    code, out, _ = run(capsys, "validate")
    assert code == 1 and "no tables.yaml given" in out


def test_docs_writes_every_generated_file_and_check_names_the_stale_ones(tmp_path: Path, capsys: Any) -> None:
    code, out, _ = run(capsys, "docs", "--root", str(tmp_path))
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert code == 0 and written == sorted(cli.generated_files()) == [
        "docs/configuration-reference.md",
        "docs/type-mapping.md",
        "schemas/syncs.schema.json",
        "schemas/tables.schema.json",
    ]
    assert run(capsys, "docs", "--check", "--root", str(tmp_path))[0] == 0
    ref = tmp_path / "docs" / "configuration-reference.md"
    ref.write_text(ref.read_text().replace("| `scale_out` |", "| `scale_outt` |"))
    (tmp_path / "schemas" / "syncs.schema.json").unlink()
    code, out, _ = run(capsys, "docs", "--check", "--root", str(tmp_path))
    assert code == 1
    assert out.strip().endswith(": docs/configuration-reference.md, schemas/syncs.schema.json")
    assert "scale_outt" in ref.read_text()  # --check writes nothing


def test_validate_prints_what_docs_configuration_md_shows(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    """The example of "Checking a config before deploying it": its YAML, validated, prints its output block."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    section = doc[doc.index("## Checking a config before deploying it") : doc.index("## Editor support")]
    yaml_text = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    expected = section.split("prints:\n\n```\n", 1)[1].split("```", 1)[0]
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "tables.yaml").write_text(yaml_text)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "validate", "include/tables.yaml")
    assert code == 1
    assert out == expected


# ---------------------------------------------------------------- issue 20

DAG_ID = "snowberg.dag-id"  # the summary key the gate records with the run id


def _commit(table: Any, ids: list[int], props: dict[str, str]) -> int:
    import pyarrow as pa

    data = pa.table(
        {"id": pa.array(ids, pa.int64()), "grp": pa.array([0] * len(ids), pa.int64()), "note": ["x"] * len(ids)}
    )
    table.append(data, snapshot_properties=props)
    return int(table.current_snapshot().snapshot_id)


def test_rollback_before_run_matches_the_dag_id_too(lake: Any, capsys: Any) -> None:
    """A checks DAG's propagate commit carries the same run id form as the load DAG's (scheduled__<date>).

    Before the fix ``--before-run scheduled__B`` went back before the oldest commit with that run id: the
    checks DAG's propagate, which was not the run meant.
    """
    from maint_harness import state_props

    small_table(lake, 1)  # run1
    t = lake.load_table("ns.t")
    load_dag, checks_dag = "snowberg_things", "snowberg_things__checks"
    propagate = {**state_props(1, "run1"), "snowberg.run-id": "scheduled__B", "snowberg.mode": "propagate"}
    propagated = _commit(t, [100], {**propagate, DAG_ID: checks_dag})
    loaded = _commit(t, [101], {**state_props(2, "scheduled__B"), DAG_ID: load_dag})
    assert t.snapshot_by_id(loaded).parent_snapshot_id == propagated
    code, out, err = run(capsys, "rollback", "things", "--before-run", "scheduled__B", "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["target_snapshot_id"] == propagated  # only the load DAG's commit is undone
    code, out, _ = run(
        capsys, "rollback", "things", "--before-run", "scheduled__B", "--dag-id", checks_dag, "--dry-run", "--json"
    )
    assert code == 0 and json.loads(out)["target_snapshot_id"] == t.snapshot_by_id(propagated).parent_snapshot_id
    # namespace.table names no load DAG: a run id two DAGs used is ambiguous, and the DAGs are listed.
    code, _, err = run(capsys, "rollback", "ns.t", "--before-run", "scheduled__B", "--dry-run")
    assert code == 2 and load_dag in err and checks_dag in err and "--dag-id" in err


def test_maintain_makes_the_variable_follow_also_after_a_compaction_killed_after_its_commit(
    lake: Any, capsys: Any, airflow_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compaction commits, the process dies before the Variable; the next maintain finds nothing to compact.

    Before the fix no ``snowberg maintain`` touched the Variable: it kept naming a snapshot the expiry
    then removed, and the next load refused to run ("ahead of the table").
    """
    from airflow.models import Variable

    from snowberg.iceberg import state

    key = "snowberg__ns__t__watermark"
    small_table(lake, 5)
    Variable.set(key, state.mirror_value(state.read_state(lake.load_table("ns.t"))))
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:compact_after_commit")
    with pytest.raises(RuntimeError, match="injected failure at compact_after_commit"):
        run(capsys, "maintain", "things")
    monkeypatch.delenv("SNOWBERG_FAULT")
    assert lake.load_table("ns.t").current_snapshot().summary.operation.value == "replace"  # the commit landed
    code, out, _ = run(capsys, "maintain", "things")
    t = lake.load_table("ns.t")
    st = state.read_state(t)
    assert code == 0 and json.loads(Variable.get(key))["snapshot_id"] == st.snapshot_id
    assert json.loads(out)["compact"]["status"] == "nothing_to_do"


def test_small_input_holes_are_clear_errors(lake: Any, capsys: Any) -> None:
    t = small_table(lake, 2)
    code, _, err = run(capsys, "tag", "things", "v1\n")
    assert code == 2 and "invalid tag name" in err
    code, _, err = run(capsys, "read", "things", "--as-of-time", "²")
    assert code == 2 and "--as-of-time" in err
    head = str(t.current_snapshot().snapshot_id)
    wide = head.translate({ord(c): 0xFF10 + int(c) for c in "0123456789"})  # the id in full-width digits
    for flag, cmd in (("--to-snapshot", "rollback"), ("--snapshot", "tag"), ("--as-of-snapshot", "read")):
        argv = [cmd, "things", *(["v2"] if cmd == "tag" else []), flag, wide]
        code, _, err = run(capsys, *argv, *(["--no-variable"] if cmd == "rollback" else []))
        assert code == 2 and "ASCII digits" in err, (flag, err)


def test_maintain_a_table_that_is_not_in_the_config_uses_the_default_settings(lake: Any, capsys: Any) -> None:
    small_table(lake, 3)
    code, out, _ = run(capsys, "maintain", "ns.t", "--catalog", "lake", "--dry-run")
    assert code == 0 and json.loads(out)["compact"]["status"] == "dry_run"


# ---------------------------------------------------------------- issue 28: connections where Airflow's CLI finds them


def _catalog_connection(catalog: Any) -> dict[str, Any]:
    """The SQLite lake of the ``catalog`` fixture as an Airflow connection of snowberg's ``sqlite`` preset."""
    return {
        "conn_type": "sqlite",
        "host": catalog.properties["uri"].removeprefix("sqlite:///"),
        # SQL catalogs store their name with every table: the fixture's tables are catalog "lake"'s.
        "extra": {"warehouse": catalog.properties["warehouse"], "catalog_name": "lake"},
    }


@pytest.fixture
def metadata_db_connections(airflow_db: str) -> Iterator[Callable[[str, dict[str, Any]], None]]:
    """Store connections in Airflow's metadata database, as ``airflow connections add`` does; removed afterwards."""
    from airflow.models import Connection
    from airflow.utils.session import create_session

    added: list[str] = []

    def add(conn_id: str, fields: dict[str, Any]) -> None:
        extra = fields.get("extra")
        with create_session() as session:
            session.add(
                Connection(
                    conn_id=conn_id,
                    **{k: v for k, v in fields.items() if k != "extra"},
                    extra=json.dumps(extra) if extra is not None else None,
                )
            )
        added.append(conn_id)

    yield add
    with create_session() as session:
        session.query(Connection).filter(Connection.conn_id.in_(added)).delete(synchronize_session=False)


def test_read_finds_a_catalog_connection_in_airflows_metadata_database(
    lake: Any, capsys: Any, metadata_db_connections: Any
) -> None:
    """``airflow connections add lake_db …`` then ``snowberg read``: the CLI looks where Airflow's CLI looks.

    Before the fix: exit 2 (or a traceback), "catalog 'lake_db' is not configured": ``Connection.get`` reads the
    database only in a server process context, which Airflow's own CLI sets and snowberg's did not.
    """
    small_table(lake, 1)
    metadata_db_connections("lake_db", _catalog_connection(lake))
    code, out, err = run(capsys, "read", "ns.t", "--catalog", "lake_db", "--json")
    assert code == 0, err
    assert sorted(r["id"] for r in json.loads(out)) == list(range(10))
    assert os.environ.get("_AIRFLOW_PROCESS_CONTEXT") is None  # the command's context does not outlive it


def test_read_finds_a_catalog_connection_in_the_environment(lake: Any, capsys: Any, monkeypatch: Any) -> None:
    small_table(lake, 1)
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_ENV", json.dumps(_catalog_connection(lake)))
    code, out, err = run(capsys, "read", "ns.t", "--catalog", "lake_env", "--json")
    assert code == 0, err
    assert len(json.loads(out)) == 10


def test_read_finds_a_catalog_connection_in_a_secrets_backend(
    lake: Any, capsys: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    """A secrets backend configured in Airflow (here Airflow's own local-file backend, as Vault or AWS would be)."""
    from airflow.sdk import configuration

    small_table(lake, 1)
    secrets = tmp_path / "connections.json"
    secrets.write_text(json.dumps({"lake_vault": _catalog_connection(lake)}))
    monkeypatch.setenv("AIRFLOW__SECRETS__BACKEND", "airflow.secrets.local_filesystem.LocalFilesystemBackend")
    monkeypatch.setenv("AIRFLOW__SECRETS__BACKEND_KWARGS", json.dumps({"connections_file_path": str(secrets)}))
    # Airflow keeps the backends it built for the process: this test's backend must not outlive it.
    monkeypatch.setattr(configuration, "_secrets_backend_cache", {})
    code, out, err = run(capsys, "read", "ns.t", "--catalog", "lake_vault", "--json")
    assert code == 0, err
    assert len(json.loads(out)) == 10


def test_validate_connect_opens_connections_stored_in_airflows_metadata_database(
    sfdb: Any, catalog: Any, tmp_path: Path, capsys: Any, metadata_db_connections: Any
) -> None:
    """The deployer's first command after ``airflow connections add``: the Snowflake connection and the catalog open.

    Before the fix: "Snowflake connection 'sf_db' does not open: AirflowNotFoundException: The conn_id `sf_db`
    isn't defined", and the same for the catalog.
    """
    sfdb.sql(f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
    metadata_db_connections("sf_db", json.loads(sfdb.airflow_connection()))
    metadata_db_connections("lake_db", _catalog_connection(catalog))
    cfg = tmp_path / "tables.yaml"
    cfg.write_text(
        f"tables:\n  - {{name: a, snowflake_conn_id: sf_db, catalog: lake_db, source: {{table: {sfdb.table('SRC')}}},"
        " target: ns.a, cursor: {column: updated_at}}\n"
    )
    code, out, err = run(capsys, "validate", str(cfg), "--connect", "--json")
    issues = json.loads(out)["issues"]
    opened = {
        i["field"]: (i["severity"], i["message"]) for i in issues if i["field"] in ("snowflake_conn_id", "catalog")
    }
    assert opened["snowflake_conn_id"][0] == "ok" and "'sf_db' opens" in opened["snowflake_conn_id"][1], opened
    assert opened["catalog"] == ("ok", "catalog 'lake_db' opens"), opened
    assert code == 0, out


# ---------------------------------------------------------------- issue 28: rough edges a deployer meets first


def test_version_prints_the_packages_version(capsys: Any) -> None:
    import snowberg

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"snowberg {snowberg.__version__}"


def test_stack_up_without_the_local_extra_is_a_one_line_hint(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix: a traceback (``FileNotFoundError`` for the emulator's executable), no word of the extra."""
    monkeypatch.setitem(sys.modules, "fakesnow", None)  # what `import fakesnow` meets without the extra
    for argv in (["stack", "up"], ["demo"]):
        code, out, err = run(capsys, "--stack-dir", str(tmp_path / "stack"), *argv)
        assert code == 2 and out == ""
        assert err == f"snowberg {argv[0]}: {cli.LOCAL_EXTRA_HINT}\n"
    assert not (tmp_path / "stack").exists()


def test_a_broken_tables_config_is_one_line_and_exit_2_with_a_suggestion(
    lake: Any, capsys: Any, tmp_path: Path
) -> None:
    """Before the fix: a ``ConfigError`` traceback from every table command, and no "did you mean"."""
    cfg = tmp_path / "broken.yaml"
    cfg.write_text('tables:\n  - {name: things, source: {table: DB.S.T}, target: ns.t, schedul: "@daily"}\n')
    code, out, err = run(capsys, "read", "things", "--config", str(cfg))
    assert code == 2 and out == ""
    assert err == (
        f"snowberg read: {cfg}: invalid snowberg tables config:; table 'things': field 'schedul': unknown key "
        "(did you mean 'schedule'?)\n"
    )
    code, _, err = run(capsys, "inspect", "things", "refs", "--config", str(tmp_path / "missing.yaml"))
    assert (
        code == 2
        and err
        == f"snowberg inspect: the tables config {tmp_path / 'missing.yaml'} does not exist "
        "(--config or $SNOWBERG_TABLES_CONFIG)\n"
    )
    code, _, err = run(capsys, "read", "ns.t", "--catalog", "nowhere")
    assert code == 2 and err.startswith("snowberg read: catalog 'nowhere' is not configured: ") and err.count("\n") == 1


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dag_file: str) -> Path:
    for var in ("SNOWBERG_TABLES_CONFIG", "SNOWBERG_SYNCS_CONFIG", "SNOWBERG_SUMMARY_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "include").mkdir()
    (tmp_path / "dags").mkdir()
    (tmp_path / "include" / "tables.yaml").write_text("tables:\n  - {name: a, source: {table: D.S.T}, target: n.a}\n")
    (tmp_path / "dags" / "snowberg_tables.py").write_text(dag_file)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_validate_fails_when_a_dag_file_reads_a_config_that_does_not_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Before the fix: "OK: 0 errors, 0 warnings in …/include/tables.yaml", while the DAG file reads another file."""
    project = _project(
        tmp_path,
        monkeypatch,
        "from snowberg.airflow.dag_factory import build_dags\n\n"
        "globals().update(build_dags('include/orders.yaml', dag_file=__file__))\n",
    )
    code, out, _ = run(capsys, "validate")
    assert code == 1, out
    assert out.splitlines()[0] == (
        f"{project / 'dags' / 'snowberg_tables.py'}:3: build_dags reads {project / 'include' / 'orders.yaml'}, "
        "which does not exist"
    )


def test_validate_reads_the_configs_the_dag_files_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    project = _project(
        tmp_path,
        monkeypatch,
        "from snowberg.airflow import dag_factory\n\nglobals().update(dag_factory.build_dags('include/more.yaml'))\n",
    )
    (project / "include" / "more.yaml").write_text("tables:\n  - {name: b, source: {table: D.S.T}, target: n.b}\n")
    code, out, _ = run(capsys, "validate")
    assert code == 0, out
    assert out.strip() == (
        f"OK: 0 errors, 0 warnings in {project / 'include' / 'more.yaml'} (1 valid table), "
        f"{project / 'include' / 'tables.yaml'} (1 valid table)"
    )


def test_validate_warns_when_a_sync_reads_a_lake_table_no_entry_writes(tmp_path: Path, capsys: Any) -> None:
    """Before the fix: "OK: 0 errors, 0 warnings" for a sync whose source no table of the files loads."""
    tables = tmp_path / "tables.yaml"
    tables.write_text("tables:\n  - {name: a, source: {table: D.S.T}, target: n.a}\n")
    syncs = tmp_path / "syncs.yaml"
    syncs.write_text(
        "syncs:\n"
        "  - {name: s, source: {catalog: lake, table: n.a}, target: {kind: native, table: D.S.A}}\n"
        "  - {name: t, source: {catalog: lake, table: n.typo}, target: {kind: native, table: D.S.B}}\n"
        "  - {name: u, source: {catalog: other, table: n.a}, target: {kind: native, table: D.S.C}}\n"
    )
    code, out, _ = run(capsys, "validate", str(tables), str(syncs))
    assert code == 0, out
    assert out.splitlines() == [
        f"{syncs}:3: sync 't': field 'source.table': warning: no table of {tables} writes n.typo in catalog 'lake': "
        "the sync reads a table loaded by something else, or the name is mistyped",
        f"{syncs}:4: sync 'u': field 'source.table': warning: no table of {tables} writes n.a in catalog 'other': "
        "the sync reads a table loaded by something else, or the name is mistyped",
        f"OK: 0 errors, 2 warnings in {tables} (1 valid table), {syncs} (3 valid syncs)",
    ]


# ---------------------------------------------------------------- issue 29: snowberg discover


def test_discover_dry_run_prints_the_diff_then_writes_entries_that_validate_connected(
    sfdb: Any, catalog_env: Any, tmp_path: Path, capsys: Any, monkeypatch: Any, airflow_db: str
) -> None:
    """``discover --dry-run`` writes nothing; ``discover`` writes; ``pools --create`` creates the connection's pool;
    ``validate --connect`` opens what the entries name, the pool included (docs/onboarding.md's steps)."""
    sfdb.sql(
        f"CREATE TABLE {sfdb.table('ORDERS')} (ID NUMBER(38,0) NOT NULL, UPDATED_AT TIMESTAMP_NTZ(9), PRIMARY KEY (ID))"
    )
    sfdb.sql(f"CREATE TABLE {sfdb.table('NOTES')} (BODY VARCHAR, V VARIANT)")
    sfdb.sql(f"CREATE VIEW {sfdb.table('V_ORDERS')} AS SELECT * FROM {sfdb.table('ORDERS')}")
    monkeypatch.setenv("AIRFLOW_CONN_SF_DISC", sfdb.airflow_connection())
    catalog_env("lake")
    monkeypatch.chdir(tmp_path)  # an empty project: no dags/, no include/
    cfg = tmp_path / "include" / "tables.yaml"
    code, out, err = run(capsys, "discover", f"{sfdb.name}.S", "--conn-id", "sf_disc", "--dry-run")
    assert code == 0, err
    assert f"+++ {cfg}" in out and "+  - name: orders  # discovered:" in out and "dry run:" in out
    assert not cfg.exists()
    code, out, err = run(capsys, "discover", f"{sfdb.name}.S", "--conn-id", "sf_disc", "--exclude", "V_*")
    assert code == 0, err
    assert "2 new" in out and f"wrote 2 new entries to {cfg}; review them, then: snowberg pools --create;" in out
    assert "snowflake_conn_id: sf_disc" in cfg.read_text()
    code, out, err = run(capsys, "discover", f"{sfdb.name}.S", "--conn-id", "sf_disc", "--write", str(cfg))
    assert code == 0 and "1 new, 2 already configured" in out and "new      v_orders" in out, out
    assert cfg.read_text().count("pool: snowberg_sf_disc  # caps the loads querying this connection") == 3
    code, out, err = run(capsys, "validate", str(cfg), "--connect", "--json")
    missing = [i for i in json.loads(out)["issues"] if i["field"] == "pool"]
    assert code == 1 and {i["severity"] for i in missing} == {"error"} and len(missing) == 3, missing
    assert "pool 'snowberg_sf_disc' does not exist" in missing[0]["message"]
    code, out, _ = run(capsys, "pools", str(cfg), "--create", "--slots", "2")
    assert code == 0 and "pool snowberg_sf_disc: 3 tables on sf_disc; created with 2 slots" in out, out
    code, out, err = run(capsys, "validate", str(cfg), "--connect", "--json")
    issues = json.loads(out)["issues"]
    assert code == 0 and not [i for i in issues if i["severity"] == "error"], issues
    columns = [i for i in issues if i["field"] == "cursor.column" and i["severity"] == "ok"]
    assert len(columns) == 2, issues  # orders' and the view's cursor found in Snowflake
    assert {i["message"] for i in issues if i["field"] == "pool"} == {"pool 'snowberg_sf_disc' exists (2 slots)"}


def test_pools_lists_what_the_tables_name_and_creates_only_what_is_missing(
    tmp_path: Path, capsys: Any, airflow_db: str
) -> None:
    from airflow.models.pool import Pool

    Pool.create_or_update_pool("snowberg_t29_kept", 7, "set by a person", include_deferred=False)
    cfg = tmp_path / "tables.yaml"
    cfg.write_text(
        "tables:\n"
        "  - {name: a, source: {table: D.S.A}, target: s.a, pool: snowberg_t29_kept}\n"
        "  - {name: b, source: {table: D.S.B}, target: s.b, pool: snowberg_t29_new, snowflake_conn_id: sf2}\n"
        "  - {name: c, source: {table: D.S.C}, target: s.c}\n"
    )
    code, out, _ = run(capsys, "pools", str(cfg))
    assert code == 1 and "pool snowberg_t29_kept: 1 table on snowflake_default; exists, 7 slots" in out
    assert "pool snowberg_t29_new: 1 table on sf2; MISSING" in out and "airflow pools set snowberg_t29_new 4" in out
    assert "1 table set no pool: their tasks run in Airflow's default_pool" in out
    code, out, _ = run(capsys, "pools", str(cfg), "--create")
    assert code == 0 and "created with 4 slots" in out
    assert Pool.get_pool("snowberg_t29_kept").slots == 7 and Pool.get_pool("snowberg_t29_new").slots == 4


def test_discover_says_in_one_line_what_the_person_must_fix(
    sfdb: Any, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    code, _, err = run(capsys, "discover", "JUSTONE")
    assert code == 2 and "is not DATABASE.SCHEMA" in err
    cfg = tmp_path / "tables.yaml"
    code, _, err = run(capsys, "discover", "DB.S", "--conn-id", "sf_nowhere", "--write", str(cfg))
    assert code == 2 and "Snowflake connection 'sf_nowhere' does not open:" in err, err
    monkeypatch.setenv("AIRFLOW_CONN_SF_DISC", sfdb.airflow_connection())
    code, _, err = run(capsys, "discover", "NO_SUCH_DB.S", "--conn-id", "sf_disc", "--write", str(cfg))
    assert code == 2 and "cannot read the metadata of NO_SUCH_DB.S:" in err, err
    cfg.write_text("tables: [unclosed\n")
    code, _, err = run(capsys, "discover", f"{sfdb.name}.S", "--conn-id", "sf_disc", "--write", str(cfg))
    assert code == 2 and "the tables config is not valid YAML" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "include").exists()
