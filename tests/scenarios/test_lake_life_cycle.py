"""The whole table life cycle on every lake backend (``tests/lakes``), through real DAG runs.

One scenario, four lakes: a ``file://`` warehouse with a SQLite SQL catalog,
S3 with a PostgreSQL SQL catalog, AWS Glue + S3, and an Iceberg REST catalog
on S3 that vends the storage credentials. Each catalog is an Airflow
connection the way docs/lakes.md writes it; no AWS variable or credentials
file exists, and moto checks every request's signature, so storage opened any
way but through the table's own FileIO fails the run.

The Snowflake side is the emulator (fakesnow); it has no Streams, so the
stream table's capture runs through the stream double of
``tests/snowberg/streams`` (the operators send the SQL they send to Snowflake;
the double rewrites the stream statements) — inside the real DAG run.

Every step runs DAGs from ``dags/snowberg_tables.py`` and
``dags/snowberg_syncs.py`` with ``dag.test()`` (Airflow's task runner, in
this process), then checks that the lake equals the source, value by value,
with no duplicate key:

1. first load of a merge-on-read table, a copy-on-write table, an append
   table and a stream table;
2. two more runs of each merge table with inserts and updates (keys updated
   again in the second), one more of the append table, and one of the stream
   table with an update, a delete and inserts;
3. a lake → Snowflake native sync (``snowberg.airflow.sync_dags``), its rows
   PUT as Parquet and COPYed;
4. ``snowberg rollback --before-run`` (the CLI), then the next run;
5. a backfill window that repairs rows changed without moving the cursor;
6. the ``__maintenance`` DAG: compaction with position delete files present,
   snapshot expiry and orphan removal, run as if ten days later (the settings
   keep ``orphan_age`` at 3 days and ``snapshot_retention`` at 1 day), then a
   run to show the watermark survived;
7. the ``__checks`` DAG, whose volume check propagates hard deletes
   (``deletes: propagate``);
8. a full refresh, and the native sync once more (a full reload: the lake was
   rolled back and rewritten).

The time of each step is printed (``-s``); a backend's whole run takes about
a minute and a half on two busy cores.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from lakes import Lake, LakeBackend, lake_fixtures

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowberg" / "streams"))
from stream_double import StreamDouble  # noqa: E402

pytestmark = pytest.mark.slow

lake, lake_services = lake_fixtures()

ROOT = Path(__file__).resolve().parents[2]
SF_CONN = "sf_lake"
ORDER_COLS = ("ID", "CUSTOMER", "AMOUNT", "UPDATED_AT")
DAYS_LATER = dt.timedelta(days=10)  # maintenance runs as if this much later (files and snapshots look old)


def utc_now() -> dt.datetime:
    """Naive UTC wall time: what the NTZ cursor columns hold (the tables' cursor timezone is UTC)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def norm(v: Any) -> Any:
    """Values compared across Snowflake and Iceberg: numbers by value, everything else as is."""
    if isinstance(v, Decimal) and v == v.to_integral_value():
        return int(v)
    return v


class Source:
    """The Snowflake side: the source tables of the scenario, in the test's emulator database."""

    def __init__(self, sfdb: Any) -> None:
        self.db = sfdb
        self.clock = utc_now() - dt.timedelta(days=2)
        self.base = self.clock
        for t in ("ORDERS_MOR", "ORDERS_COW"):
            sfdb.sql(
                f"CREATE TABLE {sfdb.table(t)} (ID NUMBER(38,0), CUSTOMER VARCHAR, AMOUNT NUMBER(10,2), "
                "UPDATED_AT TIMESTAMP_NTZ(6))"
            )
        sfdb.sql(
            f"CREATE TABLE {sfdb.table('EVENTS')} (EVENT_ID NUMBER(38,0), KIND VARCHAR, HAPPENED_AT TIMESTAMP_NTZ(6))"
        )
        sfdb.sql(f"CREATE TABLE {sfdb.table('ORDERS_CDC')} (ID NUMBER(38,0), STATUS VARCHAR, AMOUNT NUMBER(10,2))")
        # DML on the stream table goes through the double, which versions the rows the stream returns.
        self.cdc = StreamDouble(
            sfdb.server.connect(database=sfdb.name, schema="S"),
            database=sfdb.name,
            keys={f"{sfdb.name}.S.ORDERS_CDC": ["ID"]},
        )

    def tick(self) -> dt.datetime:
        """A cursor value later than every earlier one (minutes apart in the past, then the wall clock)."""
        self.clock = max(self.clock + dt.timedelta(minutes=1), utc_now() - dt.timedelta(hours=1))
        return self.clock

    def upsert_orders(self, table: str, ids: list[int], tag: str) -> None:
        have = {int(r[0]) for r in self.db.sql(f"SELECT ID FROM {self.db.table(table)}")}
        for i in ids:
            at = self.tick().isoformat(sep=" ")
            params = {"i": i, "c": f"{tag} '{i}'", "a": Decimal(i) + Decimal("0.25"), "t": at}
            if i in have:
                self.db.sql(
                    f"UPDATE {self.db.table(table)} SET CUSTOMER = %(c)s, AMOUNT = %(a)s, UPDATED_AT = %(t)s "
                    "WHERE ID = %(i)s",
                    params,
                )
            else:
                self.db.sql(f"INSERT INTO {self.db.table(table)} VALUES (%(i)s, %(c)s, %(a)s, %(t)s)", params)

    def first_orders(self, table: str, n: int) -> None:
        """``n`` rows with cursor values one minute apart from two days ago (the backfill window reaches them)."""
        rows = ", ".join(
            f"({i}, 'first {i}', {i}.50, '{(self.base + dt.timedelta(minutes=i)).isoformat(sep=' ')}')"
            for i in range(n)
        )
        self.db.sql(f"INSERT INTO {self.db.table(table)} VALUES {rows}")
        self.clock = max(self.clock, self.base + dt.timedelta(minutes=n))

    def add_events(self, ids: range, kind: str) -> None:
        vals = ", ".join(f"({i}, '{kind}', '{self.tick().isoformat(sep=' ')}')" for i in ids)
        self.db.sql(f"INSERT INTO {self.db.table('EVENTS')} VALUES {vals}")

    def cdc_sql(self, text: str) -> None:
        cur = self.cdc.cursor()
        cur.execute(text)
        cur.close()

    def rows(self, table: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
        cur = self.db.conn.cursor()
        cur.execute(f"SELECT {', '.join(columns)} FROM {self.db.table(table)}")
        out = [{c.lower(): norm(v) for c, v in zip(columns, r, strict=True)} for r in cur.fetchall()]
        cur.close()
        return out


class Scenario:
    """The tables config, the DAGs built from it, and the checks every step ends with."""

    def __init__(self, lake: Lake, src: Source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lake, self.src, self.tmp, self.mp = lake, src, tmp_path, monkeypatch
        self.tag = lake.backend.value
        self.timings: dict[str, float] = {}
        self.run_seconds: list[tuple[str, float]] = []
        dags = tmp_path / "dags"
        dags.mkdir()
        for f in ("snowberg_tables.py", "snowberg_syncs.py"):
            shutil.copy(ROOT / "dags" / f, dags)
        monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
        monkeypatch.setenv("SNOWBERG_TABLES_CONFIG", str(tmp_path / "tables.yaml"))
        monkeypatch.setenv("SNOWBERG_SYNCS_CONFIG", str(tmp_path / "syncs.yaml"))
        sf = json.loads(src.db.airflow_connection())
        # The emulator runs COPY … FROM (SELECT … FROM @stage) only in a session with a current schema
        # (Snowflake needs none: every name in it is qualified).
        sf["schema"] = "S"
        monkeypatch.setenv(f"AIRFLOW_CONN_{SF_CONN.upper()}", json.dumps(sf))
        self.targets = {
            "mor": "orders_mor",
            "cow": "orders_cow",
            "app": "events",
            "cdc": "orders_cdc",
        }
        self.native = f"{src.db.name}.S.MOR_FROM_LAKE"
        self.write_config()
        self.bag = self.dags()

    # -- configuration -----------------------------------------------------------------------------------
    def name(self, short: str) -> str:
        return f"{short}_{self.tag}"

    def target(self, short: str) -> str:
        return f"{self.lake.namespace}.{self.targets[short]}"

    def write_config(self) -> None:
        import yaml

        db = self.src.db
        orders = {"cursor": {"column": "updated_at"}, "primary_key": ["id"]}
        # Only the merge-on-read table runs maintenance: fewer DAGs, and dag.test() re-syncs them all each run.
        off = {"maintenance": {"enabled": False}}
        tables = [
            {
                "name": self.name("mor"),
                "source": {"table": db.table("ORDERS_MOR")},
                "target": self.target("mor"),
                **orders,
                "volume": {"deletes": "propagate"},
                "maintenance": {"orphan_age": "3d", "snapshot_retention": "1d", "min_snapshots": 1},
            },
            {
                "name": self.name("cow"),
                "source": {"table": db.table("ORDERS_COW")},
                "target": self.target("cow"),
                **orders,
                "merge_strategy": "copy_on_write",
                **off,
            },
            {
                "name": self.name("app"),
                "source": {"table": db.table("EVENTS")},
                "target": self.target("app"),
                "cursor": {"column": "happened_at"},
                **off,
            },
            {
                "name": self.name("cdc"),
                "source": {"table": db.table("ORDERS_CDC")},
                "target": self.target("cdc"),
                "primary_key": ["id"],
                "stream": {
                    "name": f"{db.name}.S.ORDERS_CDC_STREAM",
                    "create": True,
                    "staging_table": f"{db.name}.S.ORDERS_CDC_STAGING",
                },
                **off,
            },
        ]
        config = {
            "defaults": {"snowflake_conn_id": SF_CONN, "catalog": self.lake.conn_id, "retries": 0},
            "tables": tables,
        }
        (self.tmp / "tables.yaml").write_text(yaml.safe_dump(config))
        syncs = {
            "syncs": [
                {
                    "name": self.name("mor_native"),
                    "schedule": None,
                    "retries": 0,
                    "source": {"catalog": self.lake.conn_id, "table": self.target("mor")},
                    # copy_min_rows 0: the rows go as Parquet the worker reads through this lake's FileIO,
                    # PUTs and COPYs (the lake Snowflake cannot reach), on every backend
                    "target": {
                        "kind": "native",
                        "snowflake_conn_id": SF_CONN,
                        "table": self.native,
                        "copy_min_rows": 0,
                    },
                    "on_rewrite": "full_reload",
                }
            ]
        }
        (self.tmp / "syncs.yaml").write_text(yaml.safe_dump(syncs))

    def dags(self) -> dict[str, Any]:
        import os

        from airflow.dag_processing.dagbag import DagBag

        bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
        assert not bag.import_errors, bag.import_errors
        return bag.dags

    # -- running DAGs ------------------------------------------------------------------------------------
    def run(self, dag_id: str, **conf: Any) -> Any:
        """One DAG run through Airflow's task runner; fails the test naming the failed tasks."""
        started = time.monotonic()
        dr = self.bag[dag_id].test(run_conf=conf or None)
        self.run_seconds.append((dag_id, time.monotonic() - started))
        if conf:
            # In-process, dag.test() leaves the run's conf in the DAG object's params: the next run of the
            # same object would repeat it. A DAG processor parses afresh; so do we.
            self.bag = self.dags()
        failed = {ti.task_id: ti.state for ti in dr.get_task_instances() if ti.state not in ("success", "skipped")}
        assert dr.state == "success" and not failed, f"{dag_id}: run {dr.run_id} {dr.state}, tasks {failed}"
        return dr

    def load(self, short: str, **conf: Any) -> Any:
        return self.run(f"snowberg_{self.name(short)}", **conf)

    def step(self, label: str, fn: Callable[[], None]) -> None:
        started = time.monotonic()
        fn()
        self.timings[label] = time.monotonic() - started

    # -- lake equals source ------------------------------------------------------------------------------
    def lake_rows(self, short: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
        data = self.lake.table(self.targets[short]).scan().to_arrow()
        names = [c.lower() for c in columns]
        return [{c: norm(r[c]) for c in names} for r in data.select(names).to_pylist()]

    def assert_equal(self, short: str, source_table: str, columns: tuple[str, ...], key: str | None = "id") -> None:
        src = self.src.rows(source_table, columns)
        got = self.lake_rows(short, columns)
        if key is not None:
            keys = Counter(r[key] for r in got)
            dupes = {k: n for k, n in keys.items() if n > 1}
            assert not dupes, f"{short} on {self.tag}: duplicate keys in the lake {dupes}"
            assert {r[key]: r for r in got} == {r[key]: r for r in src}, f"{short} on {self.tag}: lake != source"
        else:
            frozen = [tuple(sorted(r.items())) for r in got]
            assert Counter(frozen) == Counter(tuple(sorted(r.items())) for r in src), f"{short} on {self.tag}"

    def assert_all(self, *shorts: str) -> None:
        for s in shorts:
            if s == "mor":
                self.assert_equal("mor", "ORDERS_MOR", ORDER_COLS)
            elif s == "cow":
                self.assert_equal("cow", "ORDERS_COW", ORDER_COLS)
            elif s == "app":
                self.assert_equal("app", "EVENTS", ("EVENT_ID", "KIND", "HAPPENED_AT"), key=None)
            elif s == "cdc":
                self.assert_equal("cdc", "ORDERS_CDC", ("ID", "STATUS", "AMOUNT"))

    def assert_native_equals_source(self) -> None:
        cur = self.src.db.conn.cursor()
        cur.execute(f"SELECT ID, CUSTOMER, AMOUNT, UPDATED_AT FROM {self.native}")
        native = {norm(r[0]): tuple(norm(v) for v in r) for r in cur.fetchall()}
        cur.close()
        src = {r["id"]: tuple(r[c.lower()] for c in ORDER_COLS) for r in self.src.rows("ORDERS_MOR", ORDER_COLS)}
        assert native == src, f"native copy of mor on {self.tag} != source"

    # -- lake facts --------------------------------------------------------------------------------------
    def summary(self, short: str) -> dict[str, str]:
        snap = self.lake.table(self.targets[short]).current_snapshot()
        return dict(snap.summary.additional_properties) if snap and snap.summary else {}

    def watermark(self, short: str) -> str | None:
        from snowberg.iceberg.state import read_state

        st = read_state(self.lake.table(self.targets[short]))
        return st.watermark if st else None

    def delete_files(self, short: str) -> int:
        return len(self.lake.table(self.targets[short]).inspect.delete_files())


@pytest.fixture
def stream_double(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The stream operators' Snowflake connection goes through the stream double (the emulator has no Streams)."""
    from snowberg.snowflake.hook import snowflake_hook

    def connect(self: Any, cfg: Any) -> Any:
        raw = snowflake_hook(cfg.snowflake_conn_id, cfg).get_conn()
        db = cfg.source.table.split(".")[0]
        return StreamDouble(raw, database=db, keys={cfg.source.table.upper(): [k.upper() for k in cfg.primary_key]})

    monkeypatch.setattr("snowberg.airflow.operators.streams._StreamOperator.connect", connect)
    yield


class _TenDaysLater(dt.datetime):
    """``datetime`` whose ``now`` is ``DAYS_LATER`` ahead: what the maintenance module sees as the present."""

    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> Any:
        return dt.datetime.now(tz) + DAYS_LATER


@pytest.mark.parametrize("lake", list(LakeBackend), indirect=True)
def test_table_life_cycle_through_dag_runs(
    lake: Lake, sfdb: Any, airflow_db: str, stream_double: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = time.monotonic()
    src = Source(sfdb)
    sc = Scenario(lake, src, tmp_path, monkeypatch)
    runs: dict[str, str] = {}

    # 1. first loads
    def first_loads() -> None:
        src.first_orders("ORDERS_MOR", 30)
        src.first_orders("ORDERS_COW", 30)
        src.add_events(range(1, 21), "created")
        for i in range(1, 11):
            src.cdc_sql(f"INSERT INTO {sfdb.table('ORDERS_CDC')} VALUES ({i}, 'new', {i}.25)")
        for short in sc.targets:
            sc.load(short)
        sc.assert_all(*sc.targets)

    sc.step("first load (4 tables)", first_loads)

    # 2. merges with both strategies (two runs each), an append, stream changes
    def more_runs() -> None:
        src.add_events(range(21, 26), "run2")
        src.cdc_sql(f"UPDATE {sfdb.table('ORDERS_CDC')} SET STATUS = 'paid' WHERE ID IN (1, 5)")
        src.cdc_sql(f"DELETE FROM {sfdb.table('ORDERS_CDC')} WHERE ID = 8")
        src.cdc_sql(f"INSERT INTO {sfdb.table('ORDERS_CDC')} VALUES (20, 'new', 1.00), (21, 'new', 2.00)")
        for short in ("app", "cdc"):
            sc.load(short)
        # Nothing changed since: the stream run ends in consume, every later task skipped, the lake unchanged.
        states = {ti.task_id: ti.state for ti in sc.load("cdc").get_task_instances()}
        assert states["consume"] == "success" and states["load"] == states["cleanup"] == "skipped", states
        for n, merge_ids in enumerate([[1, 2, 3, 30, 31], [2, 3, 4, 31, 32, 33]], start=2):
            src.upsert_orders("ORDERS_MOR", merge_ids, f"v{n}")
            src.upsert_orders("ORDERS_COW", merge_ids, f"v{n}")
            for short in ("mor", "cow"):
                runs[f"{short}{n}"] = sc.load(short).run_id
            sc.assert_all("mor", "cow")
        sc.assert_all(*sc.targets)
        assert sc.delete_files("mor") > 0, "merge-on-read wrote no position delete files"
        assert sc.delete_files("cow") == 0, "copy-on-write wrote position delete files"

    sc.step("more runs (2 per merge strategy, append, stream changes)", more_runs)

    # 3. lake → Snowflake native sync
    def sync() -> None:
        sc.run(f"snowberg_sync_{sc.name('mor_native')}")
        sc.assert_native_equals_source()

    sc.step("native sync", sync)

    # 4. rollback before the last merge run, then the next run reloads its rows
    def rollback() -> None:
        from snowberg.cli import main

        wm_before = sc.watermark("mor")
        code = main(
            ["rollback", sc.name("mor"), "--before-run", runs["mor3"], "--config", str(tmp_path / "tables.yaml")]
        )
        assert code == 0
        assert sc.watermark("mor") < wm_before  # type: ignore[operator]
        sc.load("mor")
        sc.assert_all("mor")
        assert sc.watermark("mor") == wm_before

    sc.step("rollback --before-run, next run", rollback)

    # 5. a backfill window repairs rows changed without moving the cursor
    def backfill() -> None:
        sfdb.sql(f"UPDATE {sfdb.table('ORDERS_MOR')} SET CUSTOMER = 'repaired' WHERE ID IN (10, 11, 12)")
        wm = sc.watermark("mor")
        start = (src.base + dt.timedelta(minutes=10)).replace(tzinfo=dt.UTC).isoformat()
        end = (src.base + dt.timedelta(minutes=13)).replace(tzinfo=dt.UTC).isoformat()
        sc.load("mor", window_start=start, window_end=end)
        sc.assert_all("mor")
        assert sc.summary("mor")["snowberg.mode"] == "backfill" and sc.watermark("mor") == wm

    sc.step("backfill window", backfill)

    # 6. maintenance: compaction with delete files present, expiry, orphans (as if ten days later)
    def maintenance() -> None:
        table = lake.table("orders_mor")
        orphan = f"{table.location()}/data/00000-0-orphan-of-a-killed-writer.parquet"
        with table.io.new_output(orphan).create(overwrite=True) as f:
            f.write(b"left behind by a killed task")
        snapshots_before = len(table.metadata.snapshots)
        assert sc.delete_files("mor") > 0
        wm = sc.watermark("mor")
        with monkeypatch.context() as m:
            m.setattr("snowberg.iceberg.maintenance.datetime", _TenDaysLater)
            dr = sc.run(f"snowberg_{sc.name('mor')}__maintenance")
        xcom = {ti.task_id: ti.xcom_pull(task_ids=ti.task_id) for ti in dr.get_task_instances()}
        assert xcom["compact"]["status"] == "committed" and xcom["compact"]["delete_files_removed"] > 0
        assert xcom["expire_snapshots"]["expired"], xcom["expire_snapshots"]
        assert orphan in xcom["remove_orphan_files"]["orphans"]
        table = lake.table("orders_mor")
        assert not table.io.new_input(orphan).exists()
        assert len(table.metadata.snapshots) < snapshots_before and sc.delete_files("mor") == 0
        assert sc.watermark("mor") == wm
        sc.assert_all("mor")
        src.upsert_orders("ORDERS_MOR", [5, 40], "after maintenance")
        sc.load("mor")
        sc.assert_all("mor")

    sc.step("maintenance DAG + next run", maintenance)

    # 7. the checks DAG propagates hard deletes
    def checks() -> None:
        sfdb.sql(f"DELETE FROM {sfdb.table('ORDERS_MOR')} WHERE ID IN (7, 8, 33)")
        sc.run(f"snowberg_{sc.name('mor')}__checks")
        sc.assert_all("mor")

    sc.step("checks DAG (volume, deletes: propagate)", checks)

    # 8. a full refresh, and the native sync again
    def refresh_and_sync() -> None:
        src.upsert_orders("ORDERS_MOR", [9, 50], "before refresh")
        sc.load("mor", full_refresh=True)
        assert sc.summary("mor")["snowberg.mode"] == "full_refresh"
        sc.assert_all("mor")
        sync()

    sc.step("full refresh + native sync", refresh_and_sync)

    total = time.monotonic() - started
    print(f"\nlake life cycle on {lake.backend.value}: {total:.1f} s")
    for label, secs in sc.timings.items():
        print(f"  {secs:6.1f} s  {label}")
    print(json.dumps({"backend": lake.backend.value, "seconds": round(total, 1)}))
    for dag_id, secs in sc.run_seconds:
        print(f"  {secs:6.1f} s  {dag_id}")
