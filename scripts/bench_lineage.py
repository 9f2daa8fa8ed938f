"""What lineage costs a load: ``airflow dags test`` of one table's load DAG with OpenLineage on and off.

Each run is a fresh table (a first load of ROWS rows from the emulator into a
SQLite catalog) in a fresh ``airflow dags test`` process; "on" sends events
to the file transport with the provider's default budget (10 s), "off" sets
``[openlineage] disabled``. Reported: the median wall time of the whole
process and of the load task (its start to the publish task's start, which
includes the listener's wait after the task), per side and size, and the ratio.

    python scripts/bench_lineage.py [--runs 3] [--rows 2500 50000]

To measure another checkout's code, put its ``plugins`` first:
``PYTHONPATH=/path/to/checkout/plugins python scripts/bench_lineage.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", type=int, nargs="+", default=[2_500, 50_000])
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="snowberg-bench-lineage-"))
    os.environ.update(
        {
            "AIRFLOW_HOME": str(root / "airflow"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
            "PYICEBERG_CATALOG__BENCH__TYPE": "sql",
            "PYICEBERG_CATALOG__BENCH__URI": f"sqlite:///{root}/c.db",
            "PYICEBERG_CATALOG__BENCH__WAREHOUSE": f"file://{root}/wh",
            "SNOWBERG_TABLES_CONFIG": str(root / "tables.yaml"),
        }
    )
    (root / "dags").mkdir()
    (root / "wh").mkdir()
    shutil.copy(REPO / "dags" / "snowberg_tables.py", root / "dags")
    airflow = str(Path(sys.executable).with_name("airflow"))
    subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True)

    import yaml

    import snowberg
    from snowberg.local.stack import FakesnowServer

    print(f"snowberg from {Path(snowberg.__file__).parent}")
    server = FakesnowServer(root / "fakesnow").start()
    try:
        conn = server.connect()
        cur = conn.cursor()
        cur.execute("CREATE DATABASE IF NOT EXISTS BENCH")
        cur.execute("CREATE SCHEMA IF NOT EXISTS BENCH.S")
        for n in args.rows:
            cur.execute(
                f"CREATE OR REPLACE TABLE BENCH.S.SRC_{n} (ID NUMBER(38,0), AMOUNT NUMBER(12,2), NOTE VARCHAR(40), "
                "UPDATED_AT TIMESTAMP_NTZ(9))"
            )
            # n is an int from argparse; the emulator's GENERATOR takes no bind parameter.
            insert = (
                f"INSERT INTO BENCH.S.SRC_{n} SELECT seq4() + 1, (seq4() % 1000) / 100, 'note ' || seq4(), "  # noqa: S608
                f"DATEADD(second, seq4(), '2026-01-01'::TIMESTAMP_NTZ) FROM TABLE(GENERATOR(ROWCOUNT => {n}))"
            )
            cur.execute(insert)
        conn.close()
        extra = {"account": "fakesnow", "host": "127.0.0.1", "port": server.port, "protocol": "http"}
        extra["database"] = "BENCH"
        os.environ["AIRFLOW_CONN_SF_BENCH"] = json.dumps(
            {"conn_type": "snowflake", "login": "fake", "password": "snow", "extra": extra}
        )
        names = [f"b{n}_{side}_{i}" for n in args.rows for side in ("on", "off") for i in range(args.runs)]
        tables = [
            {
                "name": name,
                "source": {"table": f"BENCH.S.SRC_{name.split('_')[0][1:]}"},
                "target": f"bench.{name}",
                "cursor": {"column": "updated_at"},
                "primary_key": ["id"],
                "snowflake_conn_id": "sf_bench",
                "catalog": "bench",
                "schedule": None,
                "retries": 0,
            }
            for name in names
        ]
        (root / "tables.yaml").write_text(yaml.safe_dump({"tables": tables}, sort_keys=False))
        results: dict[tuple[int, str], list[tuple[float, float]]] = {}
        # Interleave on/off so drift in the machine's load hits both sides alike.
        for i in range(args.runs):
            for n in args.rows:
                for side in ("on", "off"):
                    name = f"b{n}_{side}_{i}"
                    env = dict(os.environ)
                    if side == "on":
                        env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps(
                            {"type": "file", "log_file_path": str(root / "events.jsonl"), "append": True}
                        )
                    else:
                        env["AIRFLOW__OPENLINEAGE__DISABLED"] = "True"
                    started = time.monotonic()
                    done = subprocess.run(
                        [airflow, "dags", "test", f"snowberg_{name}"], env=env, capture_output=True, text=True
                    )
                    wall = time.monotonic() - started
                    if done.returncode != 0:
                        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
                    load = task_seconds(f"snowberg_{name}")
                    expired = "expired" in done.stdout + done.stderr
                    note = " (listener EXPIRED)" if expired else ""
                    print(f"{name}: wall {wall:.1f} s, load→publish {load:.1f} s{note}")
                    results.setdefault((n, side), []).append((wall, load))
        print("\nmedians (wall s / load task s):")
        for n in args.rows:
            on, off = results[(n, "on")], results[(n, "off")]
            w_on, w_off = statistics.median(w for w, _ in on), statistics.median(w for w, _ in off)
            l_on, l_off = statistics.median(t for _, t in on), statistics.median(t for _, t in off)
            print(
                f"{n:>8,} rows: lineage on {w_on:.1f} / {l_on:.1f}, off {w_off:.1f} / {l_off:.1f}, "
                f"on/off {w_on / w_off:.2f} / {l_on / l_off:.2f}"
            )
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def task_seconds(dag_id: str) -> float:
    """The load task's start to the publish task's start: the task plus what runs after it before the next."""
    from airflow.models import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        tis = {
            ti.task_id: ti for ti in session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag_id)).all()
        }
    return (tis["publish"].start_date - tis["load"].start_date).total_seconds()


if __name__ == "__main__":
    main()
