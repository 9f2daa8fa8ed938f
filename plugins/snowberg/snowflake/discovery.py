"""Reading a schema's metadata for ``snowberg discover``: tables and views, columns, keys, change tracking.

A fixed number of metadata statements per schema, whatever its size (none reads a row of a table):

* ``<db>.INFORMATION_SCHEMA.TABLES`` — TABLE_TYPE, ROW_COUNT, BYTES, LAST_ALTERED
  (https://docs.snowflake.com/en/sql-reference/info-schema/tables);
* ``<db>.INFORMATION_SCHEMA.VIEWS`` — Snowflake lists views in TABLES too; the local emulator lists them
  only here, so both are read and merged by name;
* ``<db>.INFORMATION_SCHEMA.COLUMNS`` — DATA_TYPE, NUMERIC_PRECISION/SCALE, DATETIME_PRECISION (read by
  column name: the emulator does not serve DATETIME_PRECISION, a missing one reads as "not reported");
* ``SHOW PRIMARY KEYS IN SCHEMA`` — one row per key column: ``table_name``, ``column_name``,
  ``key_sequence``, ``constraint_name``, ``rely``
  (https://docs.snowflake.com/en/sql-reference/sql/show-primary-keys);
* ``SHOW TABLES IN SCHEMA`` — its ``change_tracking`` column (ON/OFF): INFORMATION_SCHEMA.TABLES has none
  (https://docs.snowflake.com/en/sql-reference/sql/show-tables).

``--profile`` adds one aggregate query per table (``profile_table``): COUNT, the cursor's NULLs and
MAX, MIN/MAX of the wide NUMBER columns. Snowflake answers COUNT/MIN/MAX of a plain table from its
micro-partition metadata; on a view they scan.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from snowberg.config.discovered import (
    INT64_MAX,
    DiscoveredColumn,
    DiscoveredTable,
    DiscoveryError,
    ObjectKind,
    Plan,
    PrimaryKey,
    Profile,
    append_entries,
    check_written,
    config_identifier,
    cursor_candidates,
    entry_name,
    existing_defaults,
    existing_entries,
    ignored_tables,
    plan_discovery,
    pool_name,
    same_object,
    table_ref_text,
)
from snowberg.core.identifiers import quote_identifier, validate_identifier

log = logging.getLogger(__name__)


def _rows(cur: Any, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The result as dicts keyed by upper-case column name (SHOW answers lower-case names)."""
    cur.execute(sql, params)
    names = [d[0].upper() for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def exact(name: str) -> str:
    """A name as Snowflake's metadata spells it, validated and double-quoted exactly (no case folding)."""
    return f'"{validate_identifier(name)}"'


def resolved(name: str) -> str:
    """The object a name given as in the config means: all lower-case is upper-cased (``quote_identifier``)."""
    return name.upper() if name == name.lower() else name


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def parse_primary_keys(rows: Iterable[Mapping[str, Any]]) -> dict[str, PrimaryKey]:
    """``SHOW PRIMARY KEYS`` rows (keys upper-cased) → the key of each table, columns in ``key_sequence`` order.

    ``rely`` is ``true``/``false`` text in Snowflake's output. Rows of one key with equal
    ``key_sequence`` keep the order they came in (the emulator numbers every column 1).
    """
    cols: dict[str, list[tuple[int, int, str]]] = {}
    meta: dict[str, tuple[str, bool]] = {}
    for i, r in enumerate(rows):
        table = str(r["TABLE_NAME"])
        cols.setdefault(table, []).append((int(r.get("KEY_SEQUENCE") or 0), i, str(r["COLUMN_NAME"])))
        rely = str(r.get("RELY") or "false").strip().lower() in ("true", "y", "yes")
        meta.setdefault(table, (str(r.get("CONSTRAINT_NAME") or ""), rely))
    return {
        t: PrimaryKey(name=meta[t][0], columns=tuple(c for _, _, c in sorted(v)), rely=meta[t][1])
        for t, v in cols.items()
    }


def parse_change_tracking(rows: Iterable[Mapping[str, Any]]) -> dict[str, bool]:
    """``SHOW TABLES`` rows (keys upper-cased) → whether change tracking is ON, by table name."""
    out = {}
    for r in rows:
        value = r.get("CHANGE_TRACKING")
        if value is not None:
            out[str(r["NAME"])] = str(value).strip().upper() == "ON"
    return out


def parse_columns(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[DiscoveredColumn]]:
    """``INFORMATION_SCHEMA.COLUMNS`` rows (keys upper-cased), in ORDINAL_POSITION order, by table name."""
    out: dict[str, list[tuple[int, DiscoveredColumn]]] = {}
    for r in rows:
        col = DiscoveredColumn(
            name=str(r["COLUMN_NAME"]),
            data_type=str(r["DATA_TYPE"]).upper(),
            precision=_int(r.get("NUMERIC_PRECISION")),
            scale=_int(r.get("NUMERIC_SCALE")),
            datetime_precision=_int(r.get("DATETIME_PRECISION")),
            nullable=str(r.get("IS_NULLABLE") or "YES").upper() != "NO",
        )
        out.setdefault(str(r["TABLE_NAME"]), []).append((int(r.get("ORDINAL_POSITION") or 0), col))
    return {t: [c for _, c in sorted(v, key=lambda x: x[0])] for t, v in out.items()}


def read_schema(cur: Any, database: str, schema: str) -> list[DiscoveredTable]:
    """Every table and view of ``database.schema`` the role sees, with columns, key and change tracking."""
    database, schema = resolved(database), resolved(schema)
    db_sql = exact(database)
    where = {"schema": schema}
    info = f"{db_sql}.INFORMATION_SCHEMA"  # a quoted identifier; the schema's name is a bound value
    tables_sql = f"SELECT TABLE_NAME, TABLE_TYPE, ROW_COUNT, BYTES, LAST_ALTERED FROM {info}.TABLES"  # noqa: S608
    tables = _rows(cur, tables_sql + " WHERE TABLE_SCHEMA = %(schema)s", where)
    views = _rows(cur, f"SELECT TABLE_NAME FROM {info}.VIEWS WHERE TABLE_SCHEMA = %(schema)s", where)  # noqa: S608
    columns_sql = f"SELECT * FROM {info}.COLUMNS WHERE TABLE_SCHEMA = %(schema)s"  # noqa: S608
    columns = parse_columns(_rows(cur, columns_sql + " ORDER BY TABLE_NAME, ORDINAL_POSITION", where))
    in_schema = f"{db_sql}.{exact(schema)}"
    keys = parse_primary_keys(_rows(cur, f"SHOW PRIMARY KEYS IN SCHEMA {in_schema}"))
    tracking = parse_change_tracking(_rows(cur, f"SHOW TABLES IN SCHEMA {in_schema}"))
    by_name = {str(r["TABLE_NAME"]): r for r in tables}
    for v in views:
        by_name.setdefault(str(v["TABLE_NAME"]), {"TABLE_NAME": v["TABLE_NAME"], "TABLE_TYPE": "VIEW"})
    out = []
    for name, r in sorted(by_name.items()):
        table_type = str(r.get("TABLE_TYPE") or "BASE TABLE").upper()
        kind = ObjectKind.for_table_type(table_type)
        if kind is None:
            log.info("discover: %s.%s.%s is a %s: not loaded", database, schema, name, table_type)
            continue
        out.append(
            DiscoveredTable(
                database=database,
                schema=schema,
                name=name,
                kind=kind,
                table_type=table_type,
                row_count=_int(r.get("ROW_COUNT")),
                bytes=_int(r.get("BYTES")),
                last_altered=r.get("LAST_ALTERED"),
                change_tracking=tracking.get(name) if kind is ObjectKind.TABLE else None,
                columns=tuple(columns.get(name, ())),
                primary_key=keys.get(name) if kind is ObjectKind.TABLE else None,
            )
        )
    return out


def select_tables(names: Iterable[str], include: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """The names matching an ``include`` glob (all when none) and no ``exclude`` glob, case-insensitively."""

    def hit(name: str, globs: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(name.upper(), g.upper()) for g in globs)

    return [n for n in names if (not include or hit(n, include)) and not hit(n, exclude)]


def profile_table(cur: Any, t: DiscoveredTable, cursor: str | None) -> Profile:
    """One aggregate query: rows, the cursor's NULLs and MAX, and which wide NUMBER columns exceed 64 bits."""
    wide = [c.name for c in t.columns if c.wide_integer]
    parts = ["COUNT(*)"]
    if cursor is not None:
        c = quote_identifier(cursor)
        parts += [f"COUNT({c})", f"MAX({c})"]
    for w in wide:
        parts += [f"MIN({exact(w)})", f"MAX({exact(w)})"]
    table_sql = ".".join(exact(p) for p in (t.database, t.schema, t.name))
    cur.execute(f"SELECT {', '.join(parts)} FROM {table_sql}")  # noqa: S608 - quoted identifiers only
    row = list(cur.fetchone())
    rows = int(row.pop(0))
    nulls = mx = None
    if cursor is not None:
        nulls = rows - int(row.pop(0))
        mx = row.pop(0)
    beyond = []
    for w in wide:
        lo, hi = row.pop(0), row.pop(0)
        if (lo is not None and int(lo) < -INT64_MAX - 1) or (hi is not None and int(hi) > INT64_MAX):
            beyond.append(w)
    return Profile(rows=rows, cursor_nulls=nulls, cursor_max=mx, beyond_long=tuple(beyond))


def with_profile_rows(t: DiscoveredTable, p: Profile) -> DiscoveredTable:
    """``t`` with the counted rows (the metadata's ROW_COUNT is NULL for a view)."""
    return replace(t, row_count=p.rows) if t.row_count is None else t


def discover(
    cur: Any,
    database: str,
    schema: str,
    *,
    text: str,
    source: str,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    namespace: str | None = None,
    conn_id: str = "snowflake_default",
    profile: bool = False,
) -> tuple[Plan, str]:
    """What discovery does to the tables config ``text`` (the file ``source``): its plan and the new text.

    The new text is ``text`` with the new entries appended (``append_entries``) and checked to validate
    (``check_written``); nothing is written here. A new entry names ``conn_id`` unless the file's
    ``defaults`` (or the model's default) already does, and the connection's pool (``pool_name``) unless
    the ``defaults`` name a pool.
    """
    from snowflake.connector.errors import Error as ConnectorError

    try:
        tables = read_schema(cur, database, schema)
    except ConnectorError as exc:  # no such database or schema, or no grant: the person's to fix
        msg = " ".join(str(exc).split())[:300]
        raise DiscoveryError(f"cannot read the metadata of {database}.{schema}: {type(exc).__name__}: {msg}") from None
    database, schema = resolved(database), resolved(schema)
    existing = existing_entries(text)
    defaults = existing_defaults(text)
    chosen = select_tables([t.name for t in tables], include, exclude)
    profiles: dict[str, Profile] = {}
    if profile:
        configured = {
            t.name for t in tables if any(e.source_table and same_object(e.source_table, t) for e in existing)
        }
        for t in tables:
            if t.name in chosen and t.name not in configured and table_ref_text(t) is not None and t.columns:
                candidates = cursor_candidates(t)
                cursor = config_identifier(candidates[0].name) if candidates else None
                profiles[t.name] = profile_table(cur, t, cursor)
    ns = namespace or entry_name(schema)
    plan = plan_discovery(
        tables,
        database=database,
        schema=schema,
        existing=existing,
        selected=chosen,
        namespace=ns,
        conn_id=None if conn_id == defaults.get("snowflake_conn_id", "snowflake_default") else conn_id,
        pool=None if "pool" in defaults else pool_name(conn_id),
        profiles=profiles,
        ignored=ignored_tables(text),
    )
    new_text = append_entries(text, plan.added)
    if plan.added:
        check_written(new_text, plan.added, source=source)
    return plan, new_text


def render_plan(plan: Plan, *, database: str, schema: str) -> str:
    """The run's report: added, already configured, dropped, renamed, skipped."""
    lines = [
        f"{resolved(database)}.{resolved(schema)}: {len(plan.added)} new, {len(plan.kept)} already configured "
        f"(entries untouched), {len(plan.dropped)} dropped, {len(plan.renamed)} renamed, {len(plan.skipped)} skipped"
    ]
    for p in plan.added:
        lines.append(f"  new      {p.name}  ({p.table.ref}, {p.table.table_type})")
    for name, src in plan.dropped:
        lines.append(
            f"  dropped  {name}: {src} is gone from Snowflake; its entry is kept (remove it, or point source.table "
            "at the table's new name)"
        )
    for name, old, new in plan.renamed:
        lines.append(
            f"  renamed? {name}: {old} is gone and {new} has the same columns; no entry added for it: point "
            f"{name}'s source.table at {new} (its lake table continues), or remove {name} and run discover again"
        )
    for ref, why in plan.skipped:
        lines.append(f"  skipped  {ref}: {why}")
    return "\n".join(lines)
