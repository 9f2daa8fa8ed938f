"""``snowberg`` command line: the local stack, the demo, generated docs.

snowberg stack up      start the emulator + lake (data kept), seed empty demo tables, write .snowberg/stack.env
snowberg stack down    stop the emulator
snowberg demo          quick start: stack up, two loads through Airflow, then the Asset-driven summary DAG
snowberg docs          regenerate the generated docs (type mapping, configuration reference, JSON Schemas)
snowberg validate      check tables.yaml / syncs.yaml: every error with file, line, entry, field (--connect: online)
snowberg discover D.S  propose an entry per table of Snowflake schema D.S, appended to the tables config (--dry-run)
snowberg pools         the Airflow pools the tables name, and whether each exists (--create: create the missing)
snowberg init DIR      write the example project (two-line dags/*.py, include/*.yaml) into DIR
snowberg inspect T W   a metadata table of lake table T: snapshots|history|files|manifests|partitions|refs|staging
snowberg read T        rows of T, now or as of a snapshot/time, filtered, limited
snowberg rollback T    move T (and its watermark, and the Variable) back to a snapshot, before a run, or to a tag
snowberg tag T NAME    tag T's current (or a given) snapshot; tags survive snapshot expiry
snowberg maintain T    expire snapshots, compact small files, remove orphan files (the maintenance DAG's steps)

T is a table name from the tables config (its catalog from its config) or namespace.table with --catalog.
The tables config is --config, else $SNOWBERG_TABLES_CONFIG, else ./include/tables.yaml. The demo runs
the DAG files of the project in the current directory (./dags, ./include), as the quick start does.

Connections (Snowflake, catalogs) are looked up where Airflow's own CLI looks: the secrets backend, the
``AIRFLOW_CONN_*`` environment, the metadata database (``airflow_cli_context``). A mistake a person fixes
(a config, a table argument, a catalog setting) is one line on stderr and exit code 2 (``cli_errors``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from snowberg.config.validate import Issue, Report

# Commands that open Airflow connections, Variables or catalogs: they run in ``airflow_cli_context`` and, as
# Airflow may log to stdout once imported, with stdout sent to stderr and their results written by ``_emit``.
AIRFLOW_COMMANDS = frozenset({"inspect", "read", "rollback", "tag", "maintain", "validate", "discover", "pools"})
LOCAL_EXTRA_HINT = "the local stack needs the Snowflake emulator of the `local` extra: pip install 'snowberg[local]'"


@contextlib.contextmanager
def airflow_cli_context() -> Iterator[None]:
    """Connections are found where Airflow's own CLI finds them: secrets backend, environment, metadata database.

    ``airflow.sdk.Connection.get`` (what the provider hooks and snowberg's catalogs call) asks the metadata
    database only in a *server* process context; elsewhere outside a task it sees the secrets backend and
    ``AIRFLOW_CONN_*`` only, so a connection stored with ``airflow connections add`` was "not defined" here.
    Airflow's CLI declares that context for its own connection commands
    (``airflow/cli/commands/connection_command.py``: ``_AIRFLOW_PROCESS_CONTEXT=server``); so does snowberg's,
    for the command's duration only (a subprocess it starts, such as the demo's ``airflow dags test``, keeps
    its own).
    """
    key = "_AIRFLOW_PROCESS_CONTEXT"
    before = os.environ.get(key)
    os.environ[key] = "server"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def cli_errors() -> tuple[type[BaseException], ...]:
    """The errors a person fixes by changing an argument, a config or a setting: one line, exit code 2.

    Imported when a command fails, not when the CLI starts (some of these modules import pyiceberg).
    """
    from snowberg.config.discovered import DiscoveryError
    from snowberg.config.locations import ConfigNotFoundError
    from snowberg.config.table_config import ConfigError
    from snowberg.core.identifiers import IdentifierError
    from snowberg.iceberg.catalogs import CatalogConfigError, LakeAccessError
    from snowberg.iceberg.inspect import InspectError
    from snowberg.iceberg.rollback import RollbackError
    from snowberg.sync.config import SyncConfigError

    return (
        TableRefError,
        InspectError,
        RollbackError,
        ConfigError,
        SyncConfigError,
        ConfigNotFoundError,
        CatalogConfigError,
        LakeAccessError,
        IdentifierError,
        LocalExtraMissingError,
        DiscoveryError,
    )


def one_line(exc: BaseException) -> str:
    """An error's message on one line (a config error lists one problem per line; here they are joined)."""
    return "; ".join(part.strip() for part in str(exc).splitlines() if part.strip())


class LocalExtraMissingError(RuntimeError):
    """``stack``/``demo`` without the ``local`` extra (the emulator is not a runtime dependency)."""


def _require_local_extra() -> None:
    """Whether the emulator is installed, asked without importing it (it is no runtime dependency)."""
    import importlib.util

    if importlib.util.find_spec("fakesnow") is None:
        raise LocalExtraMissingError(LOCAL_EXTRA_HINT)


def _stack_dir(args: argparse.Namespace) -> Path:
    return Path(args.stack_dir or os.environ.get("SNOWBERG_STACK_DIR") or Path.cwd() / ".snowberg").resolve()


def cmd_stack(args: argparse.Namespace) -> int:
    from snowberg.local import stack

    d = _stack_dir(args)
    if args.action != "down":
        _require_local_extra()
    if args.action == "down":
        stack.down(d)
        print(f"stopped the local Snowflake emulator ({d})")
        return 0
    env = stack.up(d, port=args.port)
    if args.action == "up":
        counts = _seed(env, args.rows)
        print(
            f"local Snowflake (the fakesnow emulator) on 127.0.0.1:{env['SNOWBERG_FAKESNOW_PORT']}, "
            f"data kept in {d / 'fakesnow'}"
        )
        print(
            f"Iceberg lake: SQL catalog {env['PYICEBERG_CATALOG__LAKE__URI']}, "
            f"warehouse {env['PYICEBERG_CATALOG__LAKE__WAREHOUSE']}"
        )
        print(
            f"demo data: {counts['orders']:,} orders, {counts['menu']} menu items "
            f"({'seeded' if counts['inserted'] else 'kept from the last start, not seeded again'})"
        )
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


def airflow_env(stack_dir: Path, stack_env: dict[str, str], project: Path) -> dict[str, str]:
    """The demo's Airflow settings: its own home under the stack dir, the project's ``dags/``.

    The snowberg UI page registers through the package's ``airflow.plugins`` entry
    point, so no plugins folder is needed.
    """
    env = dict(os.environ)
    env.update(stack_env)
    env.update(
        {
            "AIRFLOW_HOME": str(stack_dir / "airflow"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(project / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        }
    )
    return env


def _airflow(
    env: dict[str, str], *argv: str, quiet: bool = False, python: bool = False
) -> subprocess.CompletedProcess[str]:
    """``airflow <argv>`` (or ``python <argv>`` with ``python``) in the demo's Airflow environment."""
    exe = sys.executable if python else str(Path(sys.executable).with_name("airflow"))
    res = subprocess.run([exe, *argv], env=env, text=True, capture_output=True)
    if res.returncode != 0:
        sys.stderr.write(res.stdout[-4000:] + res.stderr[-4000:])
        raise SystemExit(f"{'python' if python else 'airflow'} {' '.join(argv)} failed ({res.returncode})")
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


def _load_menu(env: dict[str, str], tables_config: Path) -> int:
    """Load the small menu dimension in this process (plan → load → publish, as its DAG would).

    A second ``airflow dags test`` would cost the quick start an Airflow start-up for
    60 rows; the menu's own DAG adopts this commit's state on its first run (the
    Variable mirror is rebuilt from the table).
    """
    for k, v in env.items():
        if k.startswith("PYICEBERG_"):
            os.environ[k] = v
    from pyiceberg.catalog import load_catalog

    from snowberg.config.table_config import load_config
    from snowberg.load.extract import load_window
    from snowberg.load.plan import plan_run
    from snowberg.load.publish import publish, reconcile_before_plan

    class _Mirror(dict[str, str]):
        def set(self, key: str, value: str) -> None:
            self[key] = value

    cfg = next(t for t in load_config(tables_config).tables if t.name == "demo_menu")
    catalog = load_catalog(cfg.catalog)
    conn = _connect(env)
    try:
        variables = _Mirror()
        table, _ = reconcile_before_plan(cfg, catalog, variables)
        w = plan_run(cfg, conn, table, run_id="demo_quickstart")
        load_window(cfg, conn, catalog, w)
        publish(cfg, catalog, w, variables)
    finally:
        conn.close()  # type: ignore[attr-defined]
    return len(catalog.load_table(cfg.target).scan().to_arrow())


def _summary_report(env: dict[str, str]) -> dict[str, object]:
    """The downstream summary as committed, read back from the lake."""
    for k, v in env.items():
        if k.startswith("PYICEBERG_"):
            os.environ[k] = v
    from pyiceberg.catalog import load_catalog

    cat = load_catalog("lake")
    rows = cat.load_table("shop.brand_margin").scan().to_arrow().to_pylist()
    best = max(rows, key=lambda r: r["margin_pct"])
    return {
        "rows": len(rows),
        "orders": sum(int(r["orders"]) for r in rows),
        "best": f"{best['truck_brand']} / {best['item_category']} {best['margin_pct']:.1f} %",
    }


def _demo_run(
    env: dict[str, str], dag_id: str, target: str, label: str, *, table_rows: bool = True
) -> dict[str, object]:
    """One ``airflow dags test`` of the demo's load DAG; print what it committed, read back from the lake."""
    t = time.monotonic()
    _airflow(env, "dags", "test", dag_id)
    r = _report(env, dag_id, target)
    line = (
        f"{label} ({time.monotonic() - t:.1f} s): rows loaded {r['rows_loaded']:,}, snapshot id "
        f"{r['snapshot_id']}, watermark {r['watermark']}"
    )
    print(line + (f", table rows {r['table_rows']:,}" if table_rows else ""))
    return r


def _instant(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S.%f UTC") if at else "unknown"


def cmd_demo(args: argparse.Namespace) -> int:
    from snowberg.local import stack
    from snowberg.local.seed import change_orders

    _require_local_extra()
    project = Path(args.project_dir or Path.cwd()).resolve()
    if not (project / "dags").is_dir() or not (project / "include" / "tables.yaml").is_file():
        raise SystemExit(
            f"snowberg demo: {project} has no dags/ and include/tables.yaml; run it from a snowberg checkout "
            "or pass --project-dir"
        )
    d = _stack_dir(args)
    if args.fresh and d.exists():
        stack.down(d)
        import shutil

        shutil.rmtree(d)
    t0 = time.monotonic()
    senv = stack.up(d, port=args.port)
    counts = _seed(senv, args.rows)
    print(
        f"[1/9] local stack up: Snowflake emulator on :{senv['SNOWBERG_FAKESNOW_PORT']}, "
        f"{counts['orders']:,} demo orders {'seeded' if counts['inserted'] else 'kept from the last start'}"
    )
    env = airflow_env(d, senv, project)
    _airflow(env, "db", "migrate")
    print(f"[2/9] Airflow metadata database ready ({env['AIRFLOW_HOME']})")
    dag_id, target = "snowberg_demo_orders", "shop.orders"
    r1 = _demo_run(env, dag_id, target, "[3/9] run 1")
    conn = _connect(senv)
    change = change_orders(conn, args.changes)
    conn.close()  # type: ignore[attr-defined]
    changed = change.rows
    time.sleep(1.5)  # the demo table's commit_lag is 1s
    print(
        f"[4/9] changed {changed} source orders (UPDATED_AT = now); ORDERS' LAST_ALTERED "
        f"{_instant(change.last_altered_before)} → {_instant(change.last_altered_after)}"
    )
    r2 = _demo_run(env, dag_id, target, "[5/9] run 2")
    # Loads driven by change: the table's watcher (the poll Airflow's triggerer runs) starts nothing while
    # the source is quiet and sees a change within one poll; run 3 is the run its event starts.
    watch = json.loads(
        _airflow(
            env,
            "-m",
            "snowberg.local.watch_demo",
            "--config",
            str(project / "include" / "tables.yaml"),
            "--table",
            "demo_orders",
            "--changes",
            str(max(1, args.changes // 10)),
            python=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    print(
        f"[6/9] watched: {watch['quiet_polls']} polls of the quiet source started {watch['quiet_fired']} runs; "
        f"{watch['changed']} orders changed, the watcher's event came {watch['seconds_to_event']} s after the "
        f"commit (poll interval {watch['poll_interval_s']:.0f} s, {watch['statements']} metadata statements)"
    )
    r3 = _demo_run(env, dag_id, target, "[7/9] run 3, started for the event", table_rows=False)
    var = _airflow(env, "variables", "get", "snowberg__shop__orders__watermark").stdout.strip().splitlines()[-1]
    print(f"Variable snowberg__shop__orders__watermark = {var}")
    t = time.monotonic()
    menu_rows = _load_menu(senv, project / "include" / "tables.yaml")
    print(f"[8/9] menu dimension loaded with the library ({time.monotonic() - t:.1f} s): {menu_rows} rows in shop.menu")
    t = time.monotonic()
    _airflow(env, "dags", "test", "snowberg_demo_brand_margin")
    s = _summary_report(env)
    print(
        f"[9/9] downstream DAG snowberg_demo_brand_margin (scheduled on the Asset of shop.orders, "
        f"{time.monotonic() - t:.1f} s): {s['rows']} (brand, category) rows in shop.brand_margin, "
        f"checked against {s['orders']:,} orders; best margin: {s['best']}"
    )
    ok = (
        r2["rows_loaded"] == changed
        and r1["table_rows"] == r2["table_rows"]
        and s["orders"] == r2["table_rows"]
        and watch["quiet_fired"] == 0
        and r3["rows_loaded"] == watch["changed"]
    )
    print(
        f"demo {'OK' if ok else 'FAILED'} in {time.monotonic() - t0:.0f} s; stop the emulator with: snowberg stack down"
    )
    return 0 if ok else 1


def generated_files() -> dict[str, Callable[[], str]]:
    """Every file ``snowberg docs`` writes, relative to the repository root, and what renders it."""
    from functools import partial

    from snowberg.config.reference import render_reference, schema_text
    from snowberg.mapping.docs import render_markdown
    from snowberg.sync.specs import SPECS

    out: dict[str, Callable[[], str]] = {
        "docs/type-mapping.md": render_markdown,
        "docs/configuration-reference.md": partial(render_reference, SPECS),
    }
    for spec in SPECS:
        out[spec.schema_file] = partial(schema_text, spec)
    return out


def cmd_docs(args: argparse.Namespace) -> int:
    root = Path(args.root)
    stale = []
    for rel, render in generated_files().items():
        out, text = root / rel, render()
        if args.check:
            if not out.exists() or out.read_text() != text:
                stale.append(rel)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}")
    if stale:
        print(f"out of date (run `snowberg docs` in {root.resolve()}): {', '.join(stale)}")
        return 1
    return 0


def configs_the_dags_read(dags: Path) -> tuple[list[Path], list[Issue]]:
    """The tables and syncs configs of a project, and the problems of its DAG files (``config.dag_files``).

    The configs the builder calls in ``dags`` read come first, then those found where a builder looks by
    default (syncs.yaml is optional); a DAG file that reads a config that does not exist is an error.
    """
    from snowberg.config.dag_files import dag_file_configs
    from snowberg.config.locations import ConfigFile, ConfigNotFoundError, config_path
    from snowberg.config.validate import Issue, Severity

    kinds = (ConfigFile.TABLES, ConfigFile.SYNCS)
    uses = dag_file_configs(dags) if dags.is_dir() else []
    paths: list[Path] = []
    issues: list[Issue] = []
    for u in uses:
        if u.problem or u.note:
            sev = Severity.ERROR if u.problem else Severity.WARNING
            issues.append(Issue(file=str(u.dag_file), line=u.line, message=str(u.problem or u.note), severity=sev))
        elif u.path is not None and u.kind in kinds:
            paths.append(u.path)
    for kind in kinds:
        try:
            paths.append(config_path(kind))
        except ConfigNotFoundError as exc:
            if kind is ConfigFile.TABLES and not any(u.kind is kind for u in uses):
                issues.append(Issue(file=kind.value, line=None, message=str(exc)))
    unique = {p.resolve(): p for p in reversed(paths)}  # one entry per file; the first spelling wins
    return list(reversed(unique.values())), issues


def cmd_validate(args: argparse.Namespace) -> int:
    from snowberg.airflow.config_check import entry_problems
    from snowberg.config.validate import validate_files
    from snowberg.sync.specs import SPECS

    paths: list[str | Path] = list(args.files)
    found: list[Issue] = []
    if not paths:  # the files the DAG files read
        dag_paths, found = configs_the_dags_read(Path(args.dags) if args.dags else Path.cwd() / "dags")
        paths += dag_paths
    report = validate_files(paths, specs=SPECS, entry_check=entry_problems)
    report.issues += found
    if args.connect:
        from snowberg.checks.config_online import check_online

        report.issues += check_online(report, write_probe=not args.read_only)
        report.issues += pool_issues(report)
    _emit(report.to_json() if args.json else report.render(verbose=args.connect))
    return 0 if report.ok else 1


def discover_target(explicit: str | None, dags: Path) -> Path:
    """Where ``discover`` writes: ``--write``, else the tables config ``validate`` finds, else ./include/tables.yaml.

    ``validate`` finds the tables config the project's DAG files read (``configs_the_dags_read``), else the
    one of ``$SNOWBERG_TABLES_CONFIG`` or ``./include/tables.yaml``; an empty project gets the latter, created.
    """
    from snowberg.config.dag_files import dag_file_configs
    from snowberg.config.locations import ConfigFile, ConfigNotFoundError, config_path

    if explicit:
        return Path(explicit)
    uses = dag_file_configs(dags) if dags.is_dir() else []
    found = next((u.path for u in uses if u.kind is ConfigFile.TABLES and u.path is not None), None)
    if found is not None:
        return found
    try:
        return config_path(ConfigFile.TABLES)
    except ConfigNotFoundError:
        return Path.cwd() / "include" / ConfigFile.TABLES.value


def cmd_discover(args: argparse.Namespace) -> int:
    """Propose an entry per table of a Snowflake schema and append the new ones to the tables config."""
    import difflib

    from snowberg.checks.config_online import describe
    from snowberg.config.discovered import DiscoveryError
    from snowberg.core.identifiers import validate_identifier
    from snowberg.snowflake.discovery import discover, render_plan
    from snowberg.snowflake.hook import snowflake_hook

    parts = args.schema.split(".")
    if len(parts) != 2:
        raise TableRefError(f"schema {args.schema[:80]!r} is not DATABASE.SCHEMA")
    database, schema = (validate_identifier(p, what) for p, what in zip(parts, ("database", "schema"), strict=True))
    path = discover_target(args.write, Path(args.dags) if args.dags else Path.cwd() / "dags")
    old = path.read_text() if path.is_file() else ""
    try:
        conn = snowflake_hook(args.conn_id).get_conn()
    except Exception as exc:  # any reason a connection does not open is the person's to fix: one line, exit 2
        raise DiscoveryError(f"Snowflake connection {args.conn_id!r} does not open: {describe(exc)}") from None
    try:
        plan, new = discover(
            conn.cursor(),
            database,
            schema,
            text=old,
            source=str(path),
            include=args.include or (),
            exclude=args.exclude or (),
            namespace=args.namespace,
            conn_id=args.conn_id,
            profile=args.profile,
        )
    finally:
        conn.close()
    if args.dry_run:
        diff = difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=str(path), tofile=str(path)
        )
        _emit("".join(diff), end="")
    elif new != old:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(new)
    _emit(render_plan(plan, database=database, schema=schema))
    if args.dry_run:
        _emit(f"dry run: {path} not written")
    elif new != old:
        pools = any(ln.key == "pool" for p in plan.added for ln in p.lines)
        _emit(
            f"wrote {len(plan.added)} new entries to {path}; review them, then: "
            + ("snowberg pools --create; " if pools else "")
            + "snowberg validate --connect"
        )
    else:
        _emit(f"{path} unchanged")
    return 0


def pool_issues(report: Report) -> list[Issue]:
    """``validate --connect``: each pool the tables name must exist (no task of a missing pool is ever scheduled)."""
    from snowberg.airflow.pools import pool_slots
    from snowberg.config.validate import Issue, Severity

    out: list[Issue] = []
    checked: dict[str, int | None | Exception] = {}
    for f in report.files:
        if f.spec is None or f.spec.list_key != "tables":
            continue
        for _, t in f.entries:
            if t.pool is None:
                continue
            if t.pool not in checked:
                try:
                    checked[t.pool] = pool_slots(t.pool)
                except Exception as exc:  # no metadata database here: say so, do not fail the other checks
                    checked[t.pool] = exc
            found = checked[t.pool]
            if isinstance(found, Exception):
                sev, msg = Severity.WARNING, f"cannot look pool {t.pool!r} up in Airflow's metadata database: {found}"
            elif found is None:
                sev = Severity.ERROR
                msg = (
                    f"pool {t.pool!r} does not exist: Airflow never schedules the tasks of a missing pool; "
                    "create it with `snowberg pools --create` (or `airflow pools set`)"
                )
            else:
                sev, msg = Severity.OK, f"pool {t.pool!r} exists ({found} slots)"
            out.append(
                Issue(file=f.path, line=None, message=msg, entity="table", name=t.name, field="pool", severity=sev)
            )
    return out


def tables_configs(files: list[str], dags: Path) -> list[Path]:
    """The tables configs a command reads: the files given, else those ``validate`` finds (DAG files, defaults)."""
    from snowberg.config.dag_files import dag_file_configs
    from snowberg.config.locations import ConfigFile, ConfigNotFoundError, config_path

    if files:
        return [Path(f) for f in files]
    uses = dag_file_configs(dags) if dags.is_dir() else []
    paths = [u.path for u in uses if u.kind is ConfigFile.TABLES and u.path is not None]
    try:
        paths.append(config_path(ConfigFile.TABLES))
    except ConfigNotFoundError:
        if not paths:
            raise
    return list({p.resolve(): p for p in paths}.values())


def cmd_pools(args: argparse.Namespace) -> int:
    """List the pools the tables name and whether each exists; ``--create`` creates the missing ones."""
    from snowberg.airflow.pools import create_pool, pool_slots, pool_uses
    from snowberg.config.table_config import load_config_isolated

    tables = []
    for path in tables_configs(args.files, Path(args.dags) if args.dags else Path.cwd() / "dags"):
        tables += load_config_isolated(path).tables
    uses = pool_uses(tables)
    missing = 0
    for use in uses:
        slots = pool_slots(use.name)
        where = f"{len(use.tables)} table{'' if len(use.tables) == 1 else 's'} on {', '.join(sorted(use.connections))}"
        if slots is not None:
            _emit(f"pool {use.name}: {where}; exists, {slots} slots")
        elif args.create:
            create_pool(use, args.slots)
            _emit(f"pool {use.name}: {where}; created with {args.slots} slots")
        else:
            missing += 1
            _emit(
                f"pool {use.name}: {where}; MISSING: Airflow never schedules their tasks. Create it: "
                f"snowberg pools --create --slots {args.slots} (or: airflow pools set {use.name} {args.slots} "
                f'"{use.description}")'
            )
    without = sum(1 for t in tables if t.pool is None)
    if without:
        _emit(f"{without} table{'' if without == 1 else 's'} set no pool: their tasks run in Airflow's default_pool")
    return 1 if missing else 0


def cmd_init(args: argparse.Namespace) -> int:
    """Write the example project shipped in the package (``snowberg.config.examples``) into a directory."""
    from snowberg.config.examples import ExampleConflictError, FileAction, write_examples

    project = Path(args.dir).resolve()
    try:
        plan = write_examples(project, force=args.force)
    except ExampleConflictError as exc:
        print(f"snowberg init: {exc}", file=sys.stderr)
        return 2
    for f in plan:
        print(f"{f.action.value:>9}  {project / f.relative}")
    if any(f.action is not FileAction.UNCHANGED for f in plan):
        print(
            f"next: edit {project / 'include' / 'tables.yaml'}; Airflow's dags folder is {project / 'dags'} "
            "(the DAG files find include/ beside it, or set SNOWBERG_TABLES_CONFIG)"
        )
    return 0


class TableRefError(ValueError):
    """A table argument names neither a configured table nor namespace.table."""


def _tables_config(args: argparse.Namespace) -> Path | None:
    from snowberg.config.locations import ConfigFile, ConfigNotFoundError, config_path

    try:
        return config_path(ConfigFile.TABLES, getattr(args, "config", None))
    except ConfigNotFoundError:
        return None


def resolve_table(ref: str, catalog: str | None, config_path: Path | None) -> tuple[str, str, object | None]:
    """(catalog, namespace.table, TableConfig or None) for a CLI table argument.

    A name from the tables config brings its catalog and target; ``namespace.table``
    is used as given, in ``--catalog`` (default ``lake``).
    """
    from snowberg.config.table_config import load_config
    from snowberg.core.identifiers import IcebergName

    if "." in ref:
        IcebergName.parse(ref)
        return catalog or "lake", ref, None
    if config_path is None:
        raise TableRefError(
            f"table {ref[:80]!r} is not namespace.table and no tables config was found (--config, "
            "$SNOWBERG_TABLES_CONFIG or ./include/tables.yaml)"
        )
    if not config_path.is_file():
        raise TableRefError(f"the tables config {config_path} does not exist (--config or $SNOWBERG_TABLES_CONFIG)")
    for t in load_config(config_path).tables:
        if t.name == ref:
            return catalog or t.catalog, t.target, t
    raise TableRefError(
        f"table {ref[:80]!r} is not a table name in {config_path}; give a configured name or namespace.table"
    )


def _open_table(args: argparse.Namespace) -> tuple[object, str, object | None]:
    from snowberg.iceberg.catalogs import open_catalog

    cat_name, target, cfg = resolve_table(args.table, args.catalog, _tables_config(args))
    ns, _, name = target.partition(".")
    return open_catalog(cat_name).load_table((ns, name)), target, cfg


_OUT: list[TextIO] = []


def _emit(*parts: object, end: str = "\n") -> None:
    """Command output to the real stdout; while a lake command runs, stdout is stderr.

    Airflow (imported when a catalog is opened) logs to stdout, which would
    corrupt ``--json`` output; logs therefore go to stderr and results here.
    """
    print(*parts, file=_OUT[-1] if _OUT else sys.stdout, end=end)


def cmd_inspect(args: argparse.Namespace) -> int:
    from snowberg.iceberg import inspect as ins

    table, target, _ = _open_table(args)
    rows = ins.metadata_rows(table, args.what)  # type: ignore[arg-type]
    _emit(ins.to_json(rows) if args.json else f"{target} {args.what}\n" + ins.render_metadata(rows, args.what))
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    from snowberg.iceberg import inspect as ins

    table, _, _ = _open_table(args)
    data = ins.read(
        table,  # type: ignore[arg-type]
        snapshot_id=args.as_of_snapshot,
        as_of_time=args.as_of_time,
        where=args.where,
        limit=args.limit,
    )
    rows = data.to_pylist()
    _emit(ins.to_json(rows) if args.json else ins.render_rows(rows) + f"\n({len(rows)} rows)")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from snowberg.iceberg import rollback as rb
    from snowberg.iceberg.state import MetadataDbVariables

    table, target, cfg = _open_table(args)
    key = cfg.variable_key if cfg is not None else None  # type: ignore[attr-defined]
    variables = None if args.no_variable or key is None else MetadataDbVariables()
    if args.dag_id and not args.before_run:
        raise rb.RollbackError("--dag-id goes with --before-run")
    # --before-run matches the run id AND the DAG: a configured table's runs are its load DAG's by default.
    dag_id = args.dag_id or (cfg.dag_id if cfg is not None else None)  # type: ignore[attr-defined]
    plan = rb.rollback(
        table,  # type: ignore[arg-type]
        target,
        variables=variables,
        variable_key=key,
        to_snapshot=args.to_snapshot,
        before_run=args.before_run,
        to_tag=args.to_tag,
        dag_id=dag_id if args.before_run else None,
        dry_run=args.dry_run,
    )
    _emit(json.dumps(plan.to_dict(), indent=2) if args.json else plan.describe())
    if plan.committed and key is not None and variables is None:
        import shlex

        _emit(
            "the table's next run adopts the rolled-back state (the rollback recorded the head it undid); "
            "to update the Variable now: airflow variables set",
            key,
            shlex.quote(plan.variable_value or ""),
        )
    return 0


def cmd_tag(args: argparse.Namespace) -> int:
    from snowberg.iceberg import rollback as rb

    table, target, _ = _open_table(args)
    sid = rb.tag_snapshot(table, args.name, args.snapshot)  # type: ignore[arg-type]
    _emit(f"{target}: tag {args.name} → snapshot {sid}")
    return 0


def cmd_maintain(args: argparse.Namespace) -> int:
    """The maintenance DAG's steps from a terminal; the Variable follows every commit, as in the DAG.

    The Variable follows right after the compaction step, whatever it did: a
    compaction that committed and died before the Variable (its rerun has
    nothing to do) leaves it naming a snapshot the expiry below may remove.
    """
    from snowberg.config.maintenance_settings import MaintenanceSettings
    from snowberg.iceberg import maintenance as m
    from snowberg.iceberg import state
    from snowberg.iceberg.state import MetadataDbVariables

    table, target, cfg = _open_table(args)
    settings = cfg.maintenance if cfg is not None else MaintenanceSettings()  # type: ignore[attr-defined]
    key = cfg.variable_key if cfg is not None else None  # type: ignore[attr-defined]
    out: dict[str, object] = {}
    if settings.compact:
        out["compact"] = m.compact(
            table,  # type: ignore[arg-type]
            target_size=settings.target_file_size,
            small_file_ratio=settings.small_file_ratio,
            min_input_files=settings.min_input_files,
            delete_ratio=settings.delete_ratio,
            dry_run=args.dry_run,
        ).to_dict()
    table, _, _ = _open_table(args)
    if key is not None and not args.dry_run and not args.no_variable:
        out["variable"] = {"key": key, "action": state.follow_variable(table, key, MetadataDbVariables())}  # type: ignore[arg-type]
    out["expire"] = m.expire_snapshots(
        table,  # type: ignore[arg-type]
        older_than=settings.snapshot_retention,
        min_snapshots=settings.min_snapshots,
        dry_run=args.dry_run,
    ).to_dict()
    if settings.remove_orphans:
        table, _, _ = _open_table(args)
        out["orphans"] = m.remove_orphan_files(
            table,  # type: ignore[arg-type]
            older_than=settings.orphan_age,
            allow_short_age=settings.allow_short_orphan_age,
            dry_run=args.dry_run,
        ).to_dict()
    _emit(json.dumps(out, indent=2, default=str))
    return 0


def _table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="a table name from the tables config, or namespace.table")
    p.add_argument("--catalog", help="catalog (Airflow connection id or pyiceberg catalog name); default: lake")
    p.add_argument("--config", help="tables config (default: $SNOWBERG_TABLES_CONFIG or ./include/tables.yaml)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="snowberg")
    p.add_argument("--version", action="version", version=f"snowberg {version('snowberg')}")
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
    dm.add_argument("--project-dir", help="the project whose dags/ and include/ the demo runs (default: .)")
    dm.set_defaults(func=cmd_demo)
    dc = sub.add_parser(
        "docs", help="regenerate the type mapping, the configuration reference and the JSON Schemas from the code"
    )
    dc.add_argument("--check", action="store_true", help="write nothing; exit 1 when a generated file is out of date")
    dc.add_argument("--root", default=".", help="the repository root the files are under (default: .)")
    dc.set_defaults(func=cmd_docs)
    va = sub.add_parser("validate", help="check tables.yaml / syncs.yaml before deploying them (exit 1 on errors)")
    va.add_argument("files", nargs="*", help="config files (default: the tables and syncs configs the DAGs read)")
    va.add_argument("--json", action="store_true", help="machine-readable output")
    va.add_argument("--dags", help="without files: the DAG folder whose DAG files name the configs (default: ./dags)")
    va.add_argument(
        "--connect",
        action="store_true",
        help="also open each Snowflake connection and catalog and check what the config names: source tables and "
        "columns, stream grants, and each namespace a table writes to, probed for writes by creating and dropping a "
        "one-column table snowberg_validate_probe_<hex> (nothing is left; --read-only skips it)",
    )
    va.add_argument(
        "--read-only",
        action="store_true",
        help="with --connect: create nothing, only look the namespaces up (writes are then not verified)",
    )
    va.set_defaults(func=cmd_validate)

    dv = sub.add_parser(
        "discover",
        help="propose a tables.yaml entry per table of a Snowflake schema; append the new ones (existing untouched)",
    )
    dv.add_argument("schema", help="DATABASE.SCHEMA (plain identifiers, as in the config)")
    dv.add_argument("--include", action="append", help="glob of table names to take (repeatable; default: all)")
    dv.add_argument("--exclude", action="append", help="glob of table names to leave out (repeatable)")
    dv.add_argument(
        "--write",
        help="the tables config to append to (default: the one `snowberg validate` finds, else ./include/tables.yaml)",
    )
    dv.add_argument("--dry-run", action="store_true", help="print the diff and the report; write nothing")
    dv.add_argument(
        "--profile",
        action="store_true",
        help="one aggregate query per new table: rows, the cursor's NULLs and max, wide NUMBER ranges",
    )
    dv.add_argument("--conn-id", default="snowflake_default", help="the Airflow Snowflake connection")
    dv.add_argument("--namespace", help="the Iceberg namespace of the targets (default: the schema, lower-case)")
    dv.add_argument("--dags", help="the DAG folder whose DAG files name the tables config (default: ./dags)")
    dv.set_defaults(func=cmd_discover)

    pl = sub.add_parser("pools", help="list the Airflow pools the tables name; --create creates the missing ones")
    pl.add_argument("files", nargs="*", help="tables configs (default: the one the DAGs read)")
    pl.add_argument("--dags", help="without files: the DAG folder whose DAG files name the configs (default: ./dags)")
    pl.add_argument("--create", action="store_true", help="create each missing pool (an existing pool is left as is)")
    pl.add_argument("--slots", type=int, default=4, help="the slots of a pool --create creates (default: 4)")
    pl.set_defaults(func=cmd_pools)

    it = sub.add_parser("init", help="write the example project (dags/, include/) into a directory")
    it.add_argument("dir", nargs="?", default=".", help="the project directory (default: .)")
    it.add_argument("--force", action="store_true", help="overwrite files that differ from the examples")
    it.set_defaults(func=cmd_init)
    from snowberg.iceberg.inspect import MetadataTable

    ins = sub.add_parser("inspect", help="show a metadata table of a lake table")
    _table_args(ins)
    ins.add_argument("what", choices=[m.value for m in MetadataTable])
    ins.set_defaults(func=cmd_inspect)
    rd = sub.add_parser("read", help="read rows, now or as of a snapshot or time")
    _table_args(rd)
    when = rd.add_mutually_exclusive_group()
    when.add_argument("--as-of-snapshot", help="a snapshot id (its digits)")
    when.add_argument("--as-of-time", help="ISO 8601 timestamp (UTC if no offset) or epoch milliseconds")
    rd.add_argument("--where", help="row filter, e.g. \"order_id > 10 and order_channel = 'app'\"")
    rd.add_argument("--limit", type=int, default=20)
    rd.set_defaults(func=cmd_read)
    rb = sub.add_parser("rollback", help="roll a table and its watermark back")
    _table_args(rb)
    to = rb.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-snapshot", help="a snapshot id (its digits); the last snapshot of a commit")
    to.add_argument("--before-run", help="the Airflow run id whose commits to undo")
    to.add_argument("--to-tag")
    rb.add_argument(
        "--dag-id",
        help="the DAG of --before-run's run (run ids repeat across DAGs); default: the table's load DAG, for a "
        "table from the tables config",
    )
    rb.add_argument("--dry-run", action="store_true", help="show what would change")
    rb.add_argument("--no-variable", action="store_true", help="do not touch the Airflow Variable mirror")
    rb.set_defaults(func=cmd_rollback)
    tg = sub.add_parser("tag", help="tag a snapshot (tags survive expiry)")
    _table_args(tg)
    tg.add_argument("name")
    tg.add_argument("--snapshot", help="a snapshot id (its digits); default: the current snapshot")
    tg.set_defaults(func=cmd_tag)
    mt = sub.add_parser(
        "maintain", help="compact, expire snapshots, remove orphan files (table's maintenance settings)"
    )
    _table_args(mt)
    mt.add_argument("--dry-run", action="store_true", help="list what would be done")
    mt.add_argument("--no-variable", action="store_true", help="do not touch the Airflow Variable mirror")
    mt.set_defaults(func=cmd_maintain)
    args = p.parse_args(argv)
    _OUT.append(sys.stdout)
    try:
        if args.cmd in AIRFLOW_COMMANDS:
            with airflow_cli_context(), contextlib.redirect_stdout(sys.stderr):
                return int(args.func(args))
        return int(args.func(args))
    except Exception as exc:
        if not isinstance(exc, cli_errors()):
            raise
        print(f"snowberg {args.cmd}: {one_line(exc)}", file=sys.stderr)
        return 2
    finally:
        _OUT.pop()


if __name__ == "__main__":
    sys.exit(main())
