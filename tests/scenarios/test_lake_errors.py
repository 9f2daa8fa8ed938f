"""Bad lake input: the run fails naming the connection and what to check, commits nothing, and the fix loses nothing.

Each test loads a keyed table through the factory's load DAG (``dag.test()``)
on one lake of ``tests/lakes``, changes rows in the source (the window the
broken run will miss), breaks the lake in one way, and runs the DAG again:

* the run fails with ``LakeAccessError`` naming the Airflow connection id and
  the fields to check; no secret (the writer's key, the wrong key typed, the
  REST client secret, the vended keys) appears in the message or anywhere in
  the task log;
* the table is where it was (same snapshot, same rows) and so is the
  watermark Variable;
* after the fix the next run loads exactly the missed window (its commit
  says so: ``snowberg.rows``) and the lake equals the source, with no
  duplicate key.

The broken things are real: moto checks every request's signature and
session token, a port where nothing listens, a bucket that does not exist,
and the REST stand-in answering 503/500 to a commit (applying nothing) or
vending a session token moto refuses.
"""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from lakes import Lake, LakeBackend, lake_fixtures
from lakes.moto import free_port

pytestmark = pytest.mark.slow

lake, lake_services = lake_fixtures()

ROOT = Path(__file__).resolve().parents[2]
SF_CONN = "sf_lake_errors"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


@dataclass
class Run:
    state: str
    failed: dict[str, str]  # task id → state
    log: str  # everything the run printed (the task logs of an in-process run)


class Loads:
    """One keyed table (``primary_key: [id]``, merge-on-read), its source rows and its load DAG."""

    def __init__(self, lake: Lake, sfdb: Any, tmp: Path, mp: pytest.MonkeyPatch, capfd: Any) -> None:
        import yaml

        self.lake, self.sfdb, self.capfd = lake, sfdb, capfd
        self.src = sfdb.table("ORDERS")
        sfdb.sql(
            f"CREATE TABLE {self.src} (ID NUMBER(38,0), CUSTOMER VARCHAR, AMOUNT NUMBER(10,2), "
            "UPDATED_AT TIMESTAMP_NTZ(6))"
        )
        self.name = f"errs_{lake.backend.value}"
        self.target = f"{lake.namespace}.orders"
        dags = tmp / "dags"
        dags.mkdir()
        shutil.copy(ROOT / "dags" / "snowberg_tables.py", dags)
        entry = {
            "name": self.name,
            "source": {"table": self.src},
            "target": self.target,
            "cursor": {"column": "updated_at"},
            "primary_key": ["id"],
            "snowflake_conn_id": SF_CONN,
            "catalog": lake.conn_id,
            "retries": 0,
        }
        (tmp / "tables.yaml").write_text(yaml.safe_dump({"tables": [entry]}))
        mp.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
        mp.setenv("SNOWBERG_TABLES_CONFIG", str(tmp / "tables.yaml"))
        mp.setenv(f"AIRFLOW_CONN_{SF_CONN.upper()}", sfdb.airflow_connection())
        from airflow.dag_processing.dagbag import DagBag

        bag = DagBag(dag_folder=str(dags))
        assert not bag.import_errors, bag.import_errors
        self.dag = bag.dags[f"snowberg_{self.name}"]
        self.variable_key = f"snowberg__{lake.namespace}__orders__watermark"
        self.clock = _now() - dt.timedelta(hours=2)

    def change(self, ids: list[int], tag: str) -> None:
        """Insert or update ``ids`` in the source, each with a new cursor value."""
        have = {int(r[0]) for r in self.sfdb.sql(f"SELECT ID FROM {self.src}")}
        for i in ids:
            self.clock += dt.timedelta(seconds=1)
            p = {"i": i, "c": f"{tag} {i}", "a": Decimal(i) + Decimal("0.50"), "t": self.clock.isoformat(sep=" ")}
            if i in have:
                self.sfdb.sql(
                    f"UPDATE {self.src} SET CUSTOMER = %(c)s, AMOUNT = %(a)s, UPDATED_AT = %(t)s WHERE ID = %(i)s", p
                )
            else:
                self.sfdb.sql(f"INSERT INTO {self.src} VALUES (%(i)s, %(c)s, %(a)s, %(t)s)", p)

    def run(self) -> Run:
        self.capfd.readouterr()
        dr = self.dag.test()
        out, err = self.capfd.readouterr()
        failed = {ti.task_id: ti.state for ti in dr.get_task_instances() if ti.state not in ("success", "skipped")}
        return Run(state=str(dr.state), failed=failed, log=out + err)

    def table(self) -> Any:
        from snowberg.iceberg.tables import find_table

        return find_table(self.lake.catalog(), self.target)

    def snapshot_id(self) -> int | None:
        t = self.table()
        snap = t.current_snapshot() if t is not None else None
        return snap.snapshot_id if snap is not None else None

    def variable(self) -> str | None:
        from airflow.models import Variable

        return Variable.get(self.variable_key, default_var=None)  # type: ignore[no-any-return]

    def assert_lake_equals_source(self) -> None:
        def norm(v: Any) -> Any:
            return int(v) if isinstance(v, Decimal) and v == v.to_integral_value() else v

        src = {
            norm(r[0]): tuple(norm(v) for v in r)
            for r in self.sfdb.sql(f"SELECT ID, CUSTOMER, AMOUNT, UPDATED_AT FROM {self.src}")
        }
        rows = self.table().scan().to_arrow().select(["id", "customer", "amount", "updated_at"]).to_pylist()
        ids = [norm(r["id"]) for r in rows]
        assert len(ids) == len(set(ids)), f"duplicate keys in the lake: {sorted(ids)}"
        assert {norm(r["id"]): tuple(norm(v) for v in r.values()) for r in rows} == src


@pytest.fixture
def loads(lake: Lake, sfdb: Any, airflow_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: Any) -> Any:
    return Loads(lake, sfdb, tmp_path, monkeypatch, capfd)


def secrets_of(lake: Lake, *more: str) -> list[str]:
    out = [s for s in more if s]
    if lake.moto is not None:
        out.append(lake.moto.secret)
    if lake.connection.get("password"):
        out.append(lake.connection["password"])
    if lake.rest is not None:
        out += [lake.rest.vended["s3.secret-access-key"], lake.rest.vended["s3.session-token"]]
    return out


def fails_clearly(run: Run, lake: Lake, *, task: str, problem: str, check: str, secrets: list[str]) -> None:
    from snowberg.iceberg.catalogs import LakeProblem, describe_lake_error

    assert run.state == "failed" and task in run.failed, (run.state, run.failed)
    marker = f"LakeAccessError: lake connection {lake.conn_id!r}: "
    lines = [line for line in run.log.splitlines() if marker in line]
    assert lines, f"no LakeAccessError naming {lake.conn_id!r} in the task log:\n{run.log[-4000:]}"
    assert check in lines[0], lines[0]
    # The problem the error was classified as: its "what went wrong" sentence is in the message.
    what = (
        describe_lake_error(lake.conn_id, LakeProblem(problem), RuntimeError()).split(": ", 1)[1].split(". Check ")[0]
    )
    assert what in lines[0], (problem, lines[0])
    for s in secrets:
        assert s not in run.log, "a secret is in the task log"


def broken_then_fixed(
    loads: Loads, lake: Lake, *, breaks: Any, fixes: Any, task: str, problem: str, check: str, secrets: list[str]
) -> None:
    """First load; change 3 rows; break → the run fails clearly, nothing moves; fix → exactly those 3 rows load."""
    loads.change(list(range(1, 11)), "first")
    first = loads.run()
    assert first.state == "success", first.failed
    snap, variable = loads.snapshot_id(), loads.variable()
    assert snap is not None and variable is not None
    loads.change([2, 3, 11], "missed")  # two updates and an insert: the window the broken run misses

    breaks()
    broken = loads.run()
    fails_clearly(broken, lake, task=task, problem=problem, check=check, secrets=secrets)
    fixes()
    assert loads.snapshot_id() == snap, "the failed run committed something"
    assert loads.variable() == variable, "the failed run moved the watermark Variable"

    fixed = loads.run()
    assert fixed.state == "success", fixed.failed
    summary = loads.table().current_snapshot().summary
    assert summary["snowberg.rows"] == "3", dict(summary.additional_properties)
    loads.assert_lake_equals_source()


# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lake", [LakeBackend.GLUE_S3, LakeBackend.S3_POSTGRES], indirect=True)
def test_a_wrong_secret_key(lake: Lake, loads: Loads) -> None:
    wrong = "wrong-secret-access-key-0000"
    if lake.backend is LakeBackend.GLUE_S3:
        broken = lake.altered(password=wrong)
    else:
        broken = lake.altered(extra={"s3.secret-access-key": wrong})
    broken_then_fixed(
        loads,
        lake,
        breaks=lambda: lake.use_connection(broken),
        fixes=lake.restore_connection,
        task="plan",
        # Glue's API says the signature is wrong; S3 answers the signed HEAD of the first file read with a
        # bare 403, which cannot be told from a missing permission: the message says both.
        problem="credentials" if lake.backend is LakeBackend.GLUE_S3 else "access_denied",
        check="s3.secret-access-key",
        secrets=secrets_of(lake, wrong),
    )


@pytest.mark.parametrize("lake", [LakeBackend.GLUE_S3, LakeBackend.REST_S3], indirect=True)
def test_an_unreachable_endpoint(lake: Lake, loads: Loads) -> None:
    """Glue and S3 (``extra.endpoint_url``), or the REST catalog itself (``host``), on a port where nothing listens."""
    dead = f"http://127.0.0.1:{free_port()}"
    if lake.backend is LakeBackend.GLUE_S3:
        broken = lake.altered(extra={"endpoint_url": dead})
    else:
        broken = lake.altered(host=lake.connection["host"].replace(lake.rest.uri.split("/polaris")[0], dead))
    broken_then_fixed(
        loads,
        lake,
        breaks=lambda: lake.use_connection(broken),
        fixes=lake.restore_connection,
        task="plan",
        problem="unreachable",
        check="extra.endpoint_url",
        secrets=secrets_of(lake),
    )


@pytest.mark.parametrize("lake", [LakeBackend.S3_POSTGRES, LakeBackend.GLUE_S3], indirect=True)
def test_a_missing_bucket(lake: Lake, loads: Loads) -> None:
    """The warehouse names a bucket nobody created: the first load fails; once it exists the first load runs whole."""
    assert lake.moto is not None
    missing = f"{lake.bucket}-not-created"
    broken = lake.altered(extra={"warehouse": lake.warehouse.replace(lake.bucket or "", missing)})
    lake.use_connection(broken)
    loads.change(list(range(1, 8)), "first")
    run = loads.run()
    fails_clearly(run, lake, task="plan", problem="no_bucket", check="extra.warehouse", secrets=secrets_of(lake))
    assert loads.table() is None and loads.variable() is None, "the failed first load left a table or a watermark"
    lake.moto.create_bucket(missing)
    fixed = loads.run()
    assert fixed.state == "success", fixed.failed
    assert loads.table().current_snapshot().summary["snowberg.rows"] == "7"
    assert loads.table().location().startswith(f"s3://{missing}/")
    loads.assert_lake_equals_source()


@pytest.mark.parametrize("status", [503, 500])
@pytest.mark.parametrize("lake", [LakeBackend.REST_S3], indirect=True)
def test_the_catalog_answers_a_server_error_to_the_commit(lake: Lake, loads: Loads, status: int) -> None:
    """503: unavailable; 500: pyiceberg cannot know whether the commit applied. Here neither applied it."""

    def breaks() -> None:
        lake.rest.refuse_status = status
        lake.rest.refuse_next_commits = 1

    broken_then_fixed(
        loads,
        lake,
        breaks=breaks,
        fixes=lambda: setattr(lake.rest, "refuse_next_commits", 0),
        task="plan",  # a window of a few rows is written and committed in the plan task (inline_load_rows)
        problem="catalog_unavailable" if status == 503 else "commit_state_unknown",
        check="the catalog service",
        secrets=secrets_of(lake),
    )


@pytest.mark.parametrize("lake", [LakeBackend.REST_S3], indirect=True)
def test_an_expired_vended_credential(lake: Lake, loads: Loads) -> None:
    """The REST catalog vends a session token S3 no longer accepts; the next vend is a good one."""
    good = dict(lake.rest.vended)
    stale = {**good, "s3.session-token": "FwoGZXIvYXdzEXPIRED-session-token"}

    def breaks() -> None:
        lake.rest.vended = stale

    def fixes() -> None:
        lake.rest.vended = good

    broken_then_fixed(
        loads,
        lake,
        breaks=breaks,
        fixes=fixes,
        task="plan",  # a window of a few rows is written and committed in the plan task (inline_load_rows)
        problem="session_token",
        check="the storage role or integration",
        secrets=secrets_of(lake, stale["s3.session-token"]),
    )
