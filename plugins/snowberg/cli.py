"""``snowberg`` command line: the local stack, the demo, generated docs.

snowberg stack up      start the emulator + lake, seed demo data, write .snowberg/stack.env
snowberg stack down    stop the emulator
snowberg demo          quick start: stack up, then two DAG runs through Airflow
snowberg docs          regenerate docs/type-mapping.md from the mapping table
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _stack_dir(args: argparse.Namespace) -> Path:
    return Path(args.stack_dir or os.environ.get("SNOWBERG_STACK_DIR") or Path.cwd() / ".snowberg").resolve()


def cmd_stack(args: argparse.Namespace) -> int:
    from snowberg.local import stack

    d = _stack_dir(args)
    if args.action == "down":
        stack.down(d)
        print(f"stopped the local Snowflake emulator ({d})")
        return 0
    env = stack.up(d, port=args.port)
    if args.action == "up":
        counts = _seed(env, args.rows)
        print(f"local Snowflake (fakesnow) on 127.0.0.1:{env['SNOWBERG_FAKESNOW_PORT']}, data in {d / 'fakesnow'}")
        print(
            f"Iceberg lake: SQL catalog {env['PYICEBERG_CATALOG__LAKE__URI']}, warehouse {env['PYICEBERG_CATALOG__LAKE__WAREHOUSE']}"
        )
        print(f"demo data: {counts['orders']:,} orders, {counts['menu']} menu items")
        print(f"settings: source {d / 'stack.env'}")
    else:
        print((d / "stack.env").read_text(), end="")
    return 0


def _connect(env: dict[str, str]) -> object:
    import snowflake.connector

    conn = json.loads(env["AIRFLOW_CONN_SNOWFLAKE_DEFAULT"])
    extra = conn["extra"]
    return snowflake.connector.connect(
        user=conn["login"],
        password=conn["password"],
        account=extra["account"],
        host=extra["host"],
        port=extra["port"],
        protocol=extra["protocol"],
        database=extra.get("database"),
        session_parameters={"TIMEZONE": "UTC"},
    )


def _seed(env: dict[str, str], rows: int) -> dict[str, int]:
    from snowberg.local.seed import seed

    conn = _connect(env)
    try:
        return seed(conn, orders=rows)
    finally:
        conn.close()  # type: ignore[attr-defined]


def airflow_env(stack_dir: Path, stack_env: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(stack_env)
    env.update(
        {
            "AIRFLOW_HOME": str(stack_dir / "airflow"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        }
    )
    return env


def _airflow(env: dict[str, str], *argv: str, quiet: bool = False) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("airflow")
    res = subprocess.run([str(exe), *argv], env=env, text=True, capture_output=True)
    if res.returncode != 0:
        sys.stderr.write(res.stdout[-4000:] + res.stderr[-4000:])
        raise SystemExit(f"airflow {' '.join(argv)} failed ({res.returncode})")
    return res


def _report(env: dict[str, str], dag_id: str, target: str) -> dict[str, object]:
    """What the last run committed, read back from the Iceberg table."""
    for k, v in env.items():
        if k.startswith("PYICEBERG_"):
            os.environ[k] = v  # pyiceberg reads its env config when first imported
    from pyiceberg.catalog import load_catalog

    from snowberg.iceberg import state

    table = load_catalog("lake").load_table(target)
    snap = table.current_snapshot()
    props = snap.summary.additional_properties if snap and snap.summary else {}
    st = state.read_state(table)
    return {
        "rows_loaded": int(props.get(state.ROWS, 0)),
        "snapshot_id": snap.snapshot_id if snap else None,
        "watermark": st.watermark if st else None,
        "table_rows": table.scan().count() if hasattr(table.scan(), "count") else None,
    }


def cmd_demo(args: argparse.Namespace) -> int:
    from snowberg.local import stack
    from snowberg.local.seed import touch_orders

    d = _stack_dir(args)
    if args.fresh and d.exists():
        stack.down(d)
        import shutil

        shutil.rmtree(d)
    t0 = time.monotonic()
    senv = stack.up(d, port=args.port)
    counts = _seed(senv, args.rows)
    print(
        f"[1/5] local stack up: Snowflake emulator on :{senv['SNOWBERG_FAKESNOW_PORT']}, "
        f"{counts['orders']:,} demo orders seeded"
    )
    env = airflow_env(d, senv)
    _airflow(env, "db", "migrate")
    print(f"[2/5] Airflow metadata database ready ({env['AIRFLOW_HOME']})")
    dag_id, target = "snowberg_demo_orders", "shop.orders"
    t = time.monotonic()
    _airflow(env, "dags", "test", dag_id)
    r1 = _report(env, dag_id, target)
    print(
        f"[3/5] run 1 ({time.monotonic() - t:.1f} s): rows loaded {r1['rows_loaded']:,}, snapshot id "
        f"{r1['snapshot_id']}, watermark {r1['watermark']}, table rows {r1['table_rows']:,}"
    )
    conn = _connect(senv)
    changed = touch_orders(conn, args.changes)
    conn.close()  # type: ignore[attr-defined]
    time.sleep(1.5)  # the demo table's commit_lag is 1s
    print(f"[4/5] changed {changed} source orders (UPDATED_AT = now)")
    t = time.monotonic()
    _airflow(env, "dags", "test", dag_id)
    r2 = _report(env, dag_id, target)
    print(
        f"[5/5] run 2 ({time.monotonic() - t:.1f} s): rows loaded {r2['rows_loaded']:,}, snapshot id "
        f"{r2['snapshot_id']}, watermark {r2['watermark']}, table rows {r2['table_rows']:,}"
    )
    var = _airflow(env, "variables", "get", "snowberg__shop__orders__watermark").stdout.strip().splitlines()[-1]
    print(f"Variable snowberg__shop__orders__watermark = {var}")
    ok = r2["rows_loaded"] == changed and r1["table_rows"] == r2["table_rows"]
    print(
        f"demo {'OK' if ok else 'FAILED'} in {time.monotonic() - t0:.0f} s; stop the emulator with: snowberg stack down"
    )
    return 0 if ok else 1


def cmd_docs(args: argparse.Namespace) -> int:
    from snowberg.mapping.docs import render_markdown

    out = REPO / "docs" / "type-mapping.md"
    text = render_markdown()
    if args.check:
        if not out.exists() or out.read_text() != text:
            print(f"{out} is out of date: run `snowberg docs`")
            return 1
        return 0
    out.write_text(text)
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="snowberg")
    p.add_argument("--stack-dir", help="where the local stack keeps its data (default ./.snowberg)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stack", help="start/stop the local stack")
    s.add_argument("action", choices=["up", "down", "env"])
    s.add_argument("--port", type=int)
    s.add_argument("--rows", type=int, default=120_000)
    s.set_defaults(func=cmd_stack)
    dm = sub.add_parser("demo", help="quick start: load the demo table twice through Airflow")
    dm.add_argument("--port", type=int)
    dm.add_argument("--rows", type=int, default=120_000)
    dm.add_argument("--changes", type=int, default=500)
    dm.add_argument("--fresh", action="store_true", help="wipe the local stack first")
    dm.set_defaults(func=cmd_demo)
    dc = sub.add_parser("docs", help="render docs/type-mapping.md")
    dc.add_argument("--check", action="store_true")
    dc.set_defaults(func=cmd_docs)
    args = p.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
