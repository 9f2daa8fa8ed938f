"""``snowberg validate --connect``: what a valid config needs from Snowflake and the lake, checked before deploying.

Offline validation (``snowberg.config.validate``) proves a config is well formed; this module
opens what the config names and asks, with the rules the runs themselves apply:

* each Snowflake connection opens (``snowflake.hook``, as the operators open it) and answers
  ``SELECT CURRENT_ROLE()``;
* each table's source answers ``SELECT * FROM <source> LIMIT 0`` (compiles, reads no row); its
  columns go through the load's own rules: the cursor's type (``snowflake.source.cursor_kind``,
  the plan's rule), the type mapping (``mapping.rules.map_columns`` with the table's opt-ins),
  the primary key (``iceberg.tables.check_key_columns``), the partition spec
  (``iceberg.tables.build_partition_spec``), the volume check's key and cursor types
  (``checks.hashdiff.value_kind``); an existing lake table is held to what it was
  loaded with (``iceberg.identity.check_identity``, and the cursor kind its watermark recorded);
  masking and row access policies on the source are judged by ``on_policy`` as a run's plan judges
  them (``snowflake.policies.check_policies``: one ``POLICY_REFERENCES`` query);
* each catalog opens (``iceberg.catalogs.open_catalog``); each namespace a table writes to is
  **probed for writes by creating and purging a one-column table**
  ``<namespace>.snowberg_validate_probe_<random>`` (a namespace that does not exist yet is created
  for the probe and dropped again: the first load would create it). That is the cheapest honest
  check: listing a namespace proves reads, and no catalog API answers "may I write"; the probe
  makes the same create call a first load makes. Nothing is left: a catalog that cannot purge
  drops the table and its metadata file is deleted through the table's FileIO, and the empty
  folders of a local warehouse are removed; a cleanup that fails is an error naming what remains,
  and the probe tables a killed validate left in a probed namespace are removed by the next one
  (removing another validate's probe while it runs is harmless: its own removal then finds it
  gone). ``write_probe=False`` (``--read-only``) only checks that the namespace exists. Horizon
  (Snowflake-managed Iceberg) targets of syncs are not probed: a table there is created by
  Snowflake DDL, not by the catalog;
* streams (``stream:``): the stream is found with ``SHOW STREAMS`` (``streams.status``) and its mode
  checked (``streams.staging.check_mode``); an existing stream must answer ``SELECT … LIMIT 0``
  (SELECT on the stream and its table, consuming nothing); what snowberg would create needs its
  grant: ``CREATE STREAM`` on the stream's schema, ``CREATE TABLE`` on the staging table's schema,
  and CHANGE_TRACKING on the tracked table (only its owner can turn it on). Grants are read with
  ``SHOW GRANTS ON <object>`` (Snowflake's documented columns ``privilege``, ``granted_to``,
  ``grantee_name``) and matched against the session's roles with ``IS_ROLE_IN_SESSION`` /
  ``IS_DATABASE_ROLE_IN_SESSION`` (true when an active role inherits the grantee's privileges). The
  emulator has neither: the tests answer with rows shaped from Snowflake's documentation, and
  ``tests/snowberg/checks/test_config_online_live.py`` runs them against an account when
  ``SNOWBERG_LIVE_SNOWFLAKE_*`` is set. A grant listing that fails is a warning (not verified),
  never a pass;
* syncs: the source lake table exists (a warning when it is not loaded yet), a native target or a
  checked table answers ``LIMIT 0``, an Iceberg target's namespace exists and its table exists or
  can be created by the sync.

Every finding is an ``Issue`` at the line of the field it concerns; passed checks are ``ok``
findings, so the output says what was checked, not only what failed.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import Any

from snowberg.checks.hashdiff import VolumeInputError, value_kind
from snowberg.config.table_config import OnPolicy, TableConfig
from snowberg.config.validate import FileResult, Issue, Report, Severity
from snowberg.core.cursor import CursorKind
from snowberg.core.identifiers import IcebergName, TableName, clip, quote_identifier
from snowberg.iceberg.catalogs import open_catalog as open_lake_catalog
from snowberg.iceberg.identity import check_identity
from snowberg.iceberg.state import read_state
from snowberg.iceberg.tables import build_partition_spec, build_schema, check_key_columns, find_table
from snowberg.load.extract import mapping_options
from snowberg.mapping.columns import SnowflakeColumn, TypeMappingError
from snowberg.mapping.rules import map_columns
from snowberg.snowflake.hook import snowflake_connection
from snowberg.snowflake.policies import PolicyError, check_policies
from snowberg.snowflake.projection import set_salt
from snowberg.snowflake.source import SourceQuery, cursor_kind, result_columns
from snowberg.streams.staging import check_mode
from snowberg.streams.status import read_status
from snowberg.sync.config import IcebergTarget, NativeTarget, SyncConfig

log = logging.getLogger(__name__)

Finding = tuple[str | None, Severity, str]  # (field or None for the entry, severity, message)
OK, WARNING, ERROR = Severity.OK, Severity.WARNING, Severity.ERROR
PROBE_PREFIX = "snowberg_validate_probe_"
VALIDATE_SALT = "snowberg-validate-compiles-only"


def describe(exc: BaseException) -> str:
    """An exception for a finding: its type and first 300 characters (connector errors carry no secret)."""
    return f"{type(exc).__name__}: {clip(' '.join(str(exc).split()), 300)[1:-1]}"


@dataclass(frozen=True)
class Entry:
    """A valid entry of a validated file: where its findings are located."""

    file: FileResult
    index: int
    model: Any

    def issue(self, fld: str | None, severity: Severity, message: str) -> Issue:
        path = tuple(fld.split(".")) if fld else ()
        # The load's own errors name the table and field, which the finding already does.
        message = re.sub(r"^table '[^']*': (field '[^']*': )?", "", message)
        assert self.file.spec is not None
        return Issue(
            file=self.file.path,
            line=self.file.entry_line(self.index, path),
            entity=self.file.spec.entity,
            name=self.model.name,
            field=fld,
            message=message,
            severity=severity,
        )


@dataclass(frozen=True)
class Use:
    """One entry's use of a connection or catalog, and the field that names it."""

    entry: Entry
    field: str


Connect = Callable[[str], AbstractContextManager[Any]]


def check_online(
    report: Report,
    *,
    connect: Connect = snowflake_connection,
    open_catalog: Callable[[str], Any] = open_lake_catalog,
    write_probe: bool = True,
) -> list[Issue]:
    """Every online finding for the valid entries of ``report`` (the Snowflake and catalog openers are seams).

    ``write_probe=False``: namespaces are looked up, not probed by creating a table (``--read-only``).
    """
    entries = [Entry(f, i, m) for f in report.files for i, m in f.entries]
    tables = [e for e in entries if isinstance(e.model, TableConfig)]
    syncs = [e for e in entries if isinstance(e.model, SyncConfig)]
    issues: list[Issue] = []
    with ExitStack() as stack:
        conns = _open_all(
            _snowflake_uses(tables, syncs),
            "Snowflake connection",
            lambda c: stack.enter_context(connect(c)),
            issues,
            _whoami,
        )
        catalogs = _open_all(_catalog_uses(tables, syncs), "catalog", open_catalog, issues, lambda _: "")
        issues += _probe_namespaces(tables, catalogs, write_probe=write_probe)
        for e in tables:
            cfg: TableConfig = e.model
            conn = conns.get(cfg.snowflake_conn_id)
            catalog = catalogs.get(cfg.catalog)
            lake = _lake_table(e, catalog, issues)
            if conn is not None:
                issues += [e.issue(*f) for f in source_findings(conn, cfg, lake)]
                if cfg.stream is not None:
                    issues += [e.issue(*f) for f in stream_findings(conn, cfg)]
        for e in syncs:
            issues += [e.issue(*f) for f in sync_findings(e.model, conns, catalogs)]
    return issues


# -- opening what the config names ------------------------------------------------------------------


def _snowflake_uses(tables: list[Entry], syncs: list[Entry]) -> dict[str, list[Use]]:
    uses: dict[str, list[Use]] = {}
    for e in tables:
        uses.setdefault(e.model.snowflake_conn_id, []).append(Use(e, "snowflake_conn_id"))
    for e in syncs:
        s: SyncConfig = e.model
        if isinstance(s.target, NativeTarget):
            uses.setdefault(s.target.snowflake_conn_id, []).append(Use(e, "target.snowflake_conn_id"))
        if s.check_enabled:
            fld = "check.snowflake_conn_id" if s.check is not None and s.check.snowflake_conn_id else "target"
            uses.setdefault(s.check_conn_id, []).append(Use(e, fld))
        create = s.snowflake_create
        if create is not None:
            uses.setdefault(create["snowflake_conn_id"], []).append(Use(e, "target.create_in_snowflake"))
    return uses


def _catalog_uses(tables: list[Entry], syncs: list[Entry]) -> dict[str, list[Use]]:
    uses: dict[str, list[Use]] = {}
    for e in tables:
        uses.setdefault(e.model.catalog, []).append(Use(e, "catalog"))
    for e in syncs:
        s: SyncConfig = e.model
        uses.setdefault(s.source.catalog, []).append(Use(e, "source.catalog"))
        if isinstance(s.target, IcebergTarget):
            uses.setdefault(s.target.catalog, []).append(Use(e, "target.catalog"))
    return uses


def _open_all(
    uses: dict[str, list[Use]],
    what: str,
    opener: Callable[[str], Any],
    issues: list[Issue],
    about: Callable[[Any], str],
) -> dict[str, Any]:
    """Open each named thing once; one finding for it, at the first entry that names it."""
    opened: dict[str, Any] = {}
    for ref, users in uses.items():
        first = users[0]
        others = {u.entry.model.name for u in users} - {first.entry.model.name}
        also = f" (also used by {clip(sorted(others), 200)[1:-1]})" if others else ""
        log.info("validate: opening %s %s", what, ref)
        try:
            handle = opener(ref)
            detail = about(handle)
        except Exception as exc:  # noqa: BLE001 - whatever stops it is the finding
            issues.append(first.entry.issue(first.field, ERROR, f"{what} {ref!r} does not open: {describe(exc)}{also}"))
            continue
        opened[ref] = handle
        issues.append(first.entry.issue(first.field, OK, f"{what} {ref!r} opens{detail}{also}"))
    return opened


def _whoami(conn: Any) -> str:
    role = _scalar(conn, "SELECT CURRENT_ROLE()")
    warehouse = getattr(conn, "warehouse", None)
    return f" (role {role}, warehouse {warehouse or 'none: set one for queries that need it'})"


def _scalar(conn: Any, sql: str, params: dict[str, Any] | None = None) -> Any:
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        row = cur.fetchone()
        return row[0] if row else None
    finally:
        cur.close()


def _rows(conn: Any, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A result as dicts keyed by lower-cased column name (SHOW commands' documented columns)."""
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        names = [d[0].lower() for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        cur.close()


def _columns(conn: Any, from_clause: str, *, describe: bool = True) -> list[SnowflakeColumn]:
    """The columns of a table or subquery from a ``LIMIT 0`` query: compiled, no row read (``describe``: parse them).

    ``from_clause`` is ``TableName.quoted()`` or ``SourceQuery.from_clause``: validated, quoted identifiers
    or the config's checked single SELECT, as the load itself sends them.
    """
    cur = conn.cursor()
    try:
        cur.execute(f"SELECT * FROM {from_clause} LIMIT 0")  # noqa: S608 - see the docstring
        return result_columns(cur) if describe else []
    finally:
        cur.close()


# -- tables ------------------------------------------------------------------------------------------


def _lake_table(e: Entry, catalog: Any, issues: list[Issue]) -> Any:
    if catalog is None:
        return None
    try:
        return find_table(catalog, e.model.target)
    except Exception as exc:  # noqa: BLE001
        issues.append(e.issue("target", ERROR, f"cannot load {e.model.target}: {describe(exc)}"))
        return None


def source_findings(conn: Any, cfg: TableConfig, lake_table: Any = None) -> list[Finding]:
    """The source as the load will read it: columns, cursor type, type mapping, key, partitions, identity."""
    fld = "source.table" if cfg.source.table else "source.query"
    try:
        if cfg.columns.hash:
            # The projection names the session's salt; LIMIT 0 reads no row, so a stand-in compiles it (the
            # run reads the real one from its Airflow Variable, which this command does not open).
            set_salt(conn, VALIDATE_SALT)
        columns = _columns(conn, SourceQuery(cfg).from_clause)
    except Exception as exc:  # noqa: BLE001 - a missing table, a missing grant, a query that does not compile
        return [(fld, ERROR, f"the source cannot be read: {describe(exc)}")]
    out: list[Finding] = [(fld, OK, f"the source answers with {len(columns)} columns")]
    by_name = {c.name.lower(): c for c in columns}
    names = clip(sorted(c.name for c in columns), 200)
    if cfg.cursor is not None:
        col = by_name.get(cfg.cursor.column.lower())
        if col is None:
            out.append(("cursor.column", ERROR, f"{cfg.cursor.column!r} is not a column of the source ({names})"))
        else:
            try:
                kind = cursor_kind(col)
            except ValueError as exc:
                out.append(("cursor.column", ERROR, str(exc)))
            else:
                out.append(("cursor.column", OK, f"{col.name} is {col.sql_type}: a {kind} watermark"))
                st = read_state(lake_table) if lake_table is not None else None
                if st is not None and st.cursor_kind and CursorKind(st.cursor_kind) is not kind:
                    out.append(
                        (
                            "cursor.column",
                            ERROR,
                            f"the lake table's watermark was recorded as {st.cursor_kind}; the column is now "
                            f"{col.sql_type} ({kind}): the plan will refuse it",
                        )
                    )
    try:
        mapped = map_columns(columns, mapping_options(cfg))
    except TypeMappingError as exc:
        out.append((None, ERROR, f"the type mapping refuses the source: {exc}"))
        return out
    try:
        check_key_columns(cfg, mapped)
        if cfg.primary_key:
            out.append(("primary_key", OK, f"key column(s) {', '.join(cfg.primary_key)} are in the source"))
    except TypeMappingError as exc:
        out.append(("primary_key", ERROR, str(exc)))
    if cfg.partition_by:
        try:
            build_partition_spec(build_schema(mapped), cfg.partition_by, cfg.name)
            out.append(("partition_by", OK, "every partition transform applies to its column"))
        except TypeMappingError as exc:
            out.append(("partition_by", ERROR, str(exc)))
    out += _volume_findings(cfg, by_name)
    out += policy_findings(conn, cfg)
    absent = [c for c in cfg.number_as_long if c.lower() not in by_name]
    if absent:
        out.append(("number_as_long", WARNING, f"{clip(absent)[1:-1]} not in the source ({names}): nothing to opt in"))
    if lake_table is not None:
        try:
            check_identity(cfg, lake_table)
            out.append(
                ("target", OK, f"the lake table {cfg.target} exists and was loaded with this source, cursor and key")
            )
        except ValueError as exc:
            out.append((None, ERROR, str(exc)))
    return out


def policy_findings(conn: Any, cfg: TableConfig) -> list[Finding]:
    """Masking and row access policies on the source, judged by ``on_policy`` as every run's plan judges them."""
    try:
        finding = check_policies(cfg, conn, excluded=cfg.columns.exclude)
    except PolicyError as exc:
        return [("on_policy", ERROR, str(exc))]
    if not finding.checked:
        return [("on_policy", WARNING, f"not checked: {finding.note}")]
    if not finding.references:
        return [("on_policy", OK, "no masking or row access policy applies to the source")]
    found = "; ".join(r.describe() for r in finding.references)
    if cfg.on_policy is OnPolicy.WARN:
        return [("on_policy", WARNING, f"{found} (role {finding.role}); on_policy warn: runs load and warn")]
    return [("on_policy", OK, f"{found} (role {finding.role}); on_policy allow: each commit records it")]


def _volume_findings(cfg: TableConfig, by_name: dict[str, SnowflakeColumn]) -> list[Finding]:
    """The volume check compares key and cursor values as text both sides render alike (``hashdiff.value_kind``)."""
    if cfg.stream is not None or cfg.cursor is None or not cfg.volume.enabled:
        return []
    keyed = [("primary_key", k) for k in cfg.primary_key] if not cfg.volume.count_only else []
    out: list[Finding] = []
    for fld, name in [*keyed, ("cursor.column", cfg.cursor.column)]:
        col = by_name.get(name.lower())
        if col is None:
            continue  # reported above
        try:
            value_kind(col.type, col.scale, table=cfg.name, column=name)
        except VolumeInputError as exc:
            out.append((fld, ERROR, f"the volume check cannot compare it: {exc}"))
    return out


# -- streams and grants ------------------------------------------------------------------------------


class Grants:
    """Who holds which privilege on an object (``SHOW GRANTS ON``), and whether the session has those roles."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._in_session: dict[tuple[str, str], bool] = {}

    def role_in_session(self, granted_to: str, role: str) -> bool:
        key = (granted_to.upper(), role)
        if key not in self._in_session:
            fn = "IS_DATABASE_ROLE_IN_SESSION" if key[0] == "DATABASE_ROLE" else "IS_ROLE_IN_SESSION"
            self._in_session[key] = bool(_scalar(self.conn, f"SELECT {fn}(%(role)s)", {"role": role}))
        return self._in_session[key]

    def holds(self, on: str, name: TableName | str, privileges: list[str]) -> tuple[list[str], list[str]]:
        """``(missing privileges, roles that hold them)``: OWNERSHIP counts for every privilege."""
        rows = _rows(self.conn, f"SHOW GRANTS ON {on} {_quoted(name)}")
        missing, holders = [], []
        for p in privileges:
            grantees = {
                (str(r.get("granted_to") or ""), str(r.get("grantee_name") or ""))
                for r in rows
                if str(r.get("privilege") or "").upper() in (p, "OWNERSHIP")
                and str(r.get("granted_to") or "").upper() in ("ROLE", "DATABASE_ROLE")
            }
            held = [role for kind, role in sorted(grantees) if self.role_in_session(kind, role)]
            if held:
                holders += held
            else:
                missing.append(p)
        return missing, sorted(set(holders))


def _quoted(name: TableName | str) -> str:
    if isinstance(name, TableName):
        return name.quoted()
    return ".".join(quote_identifier(p) for p in name.split("."))


def _grant_finding(
    grants: Grants, on: str, name: TableName | str, privileges: list[str], fld: str, why: str
) -> Finding:
    try:
        missing, holders = grants.holds(on, name, privileges)
    except Exception as exc:  # noqa: BLE001 - not verified is not a pass, and not a proven failure either
        return (fld, WARNING, f"could not verify {', '.join(privileges)} on {on} {name} ({why}): {describe(exc)}")
    if missing:
        return (
            fld,
            ERROR,
            f"the connection's roles lack {', '.join(missing)} on {on} {name} ({why}): "
            f"GRANT {', '.join(missing)} ON {on} {name} TO ROLE <snowberg's role>",
        )
    return (fld, OK, f"{', '.join(privileges)} on {on} {name} held through role {', '.join(holders)} ({why})")


def stream_findings(conn: Any, cfg: TableConfig) -> list[Finding]:
    """What a stream table needs in Snowflake, checked without consuming the stream."""
    s = cfg.stream
    assert s is not None
    stream, staging = s.stream_name, s.staging_name
    grants = Grants(conn)
    out: list[Finding] = []
    try:
        status = read_status(conn, stream)
    except Exception as exc:  # noqa: BLE001
        return [("stream.name", ERROR, f"SHOW STREAMS for {stream} failed: {describe(exc)}")]
    if status is None and not s.create:
        out.append(
            (
                "stream.name",
                ERROR,
                f"stream {stream} does not exist or this role cannot see it, and stream.create is false "
                "(the default): create it, grant SELECT on it, or set stream.create: true",
            )
        )
    elif status is None:
        schema = f"{stream.database}.{stream.schema}"
        out.append(_grant_finding(grants, "SCHEMA", schema, ["CREATE STREAM"], "stream.create", "to create the stream"))
        tracked = s.table_name(cfg.source.table)
        if tracked is not None:
            out += _change_tracking(conn, grants, tracked)
    else:
        out.append(("stream.name", OK, f"stream {stream} exists (mode {status.mode or '?'})"))
        try:
            check_mode(status, s)
        except ValueError as exc:
            out.append(("stream.append_only", ERROR, str(exc)))
        if status.stale:
            out.append(("stream.name", ERROR, f"stream {stream} is stale: trigger a run with recover_stale_stream"))
        try:
            _columns(conn, stream.quoted(), describe=False)
            out.append(("stream.name", OK, f"SELECT on {stream} and its table (read with LIMIT 0, nothing consumed)"))
        except Exception as exc:  # noqa: BLE001
            out.append(("stream.name", ERROR, f"stream {stream} cannot be read: {describe(exc)}"))
        fld, sev, msg = _grant_finding(
            grants, "STREAM", stream, ["OWNERSHIP"], "stream.name", "recover_stale_stream re-creates the stream"
        )
        out.append((fld, WARNING if sev is ERROR else sev, msg))
    try:
        _columns(conn, staging.quoted(), describe=False)
        out.append(
            _grant_finding(
                grants, "TABLE", staging, ["SELECT", "INSERT", "DELETE"], "stream.staging_table", "the staging table"
            )
        )
    except Exception:  # noqa: BLE001 - not there (or not visible): snowberg creates it
        schema = f"{staging.database}.{staging.schema}"
        out.append(
            _grant_finding(
                grants, "SCHEMA", schema, ["CREATE TABLE"], "stream.staging_table", "to create the staging table"
            )
        )
    return out


def _change_tracking(conn: Any, grants: Grants, table: TableName) -> list[Finding]:
    """A new stream turns on CHANGE_TRACKING, which only the table's owner can do (``SHOW TABLES``)."""
    like = table.table.upper() if table.table == table.table.lower() else table.table
    try:
        rows = _rows(
            conn,
            f"SHOW TABLES LIKE %(t)s IN SCHEMA {quote_identifier(table.database)}.{quote_identifier(table.schema)}",
            {"t": like},
        )
    except Exception as exc:  # noqa: BLE001
        return [("stream.on_table", WARNING, f"could not read CHANGE_TRACKING of {table}: {describe(exc)}")]
    row = next((r for r in rows if str(r.get("name")) == like), None)
    if row is None:
        return [("stream.on_table", ERROR, f"the tracked table {table} does not exist or this role cannot see it")]
    if str(row.get("change_tracking") or "").upper() == "ON":
        return [("stream.on_table", OK, f"CHANGE_TRACKING is on for {table}")]
    owner = str(row.get("owner") or "")
    if owner and grants.role_in_session(str(row.get("owner_role_type") or "ROLE"), owner):
        return [("stream.on_table", OK, f"CHANGE_TRACKING is off for {table}; the stream turns it on (role {owner})")]
    return [
        (
            "stream.on_table",
            ERROR,
            f"CHANGE_TRACKING is off for {table} and only its owner ({owner or '?'}) can turn it on: have the owner "
            f"run ALTER TABLE {table} SET CHANGE_TRACKING = TRUE",
        )
    ]


# -- the lake: namespaces and syncs ------------------------------------------------------------------


def _probe_namespaces(tables: list[Entry], catalogs: dict[str, Any], *, write_probe: bool = True) -> list[Issue]:
    """One write probe (or, ``write_probe=False``, one look-up) per (catalog, namespace) that a table writes to."""
    targets: dict[tuple[str, str], Use] = {}
    for e in tables:
        cfg: TableConfig = e.model
        if cfg.catalog not in catalogs:
            continue
        targets.setdefault((cfg.catalog, cfg.iceberg_name.namespace), Use(e, "target"))
        if cfg.stream is not None and cfg.stream.changelog_target is not None:
            ns = IcebergName.parse(cfg.stream.changelog_target).namespace
            targets.setdefault((cfg.catalog, ns), Use(e, "stream.changelog_target"))
    issues = []
    for (ref, ns), use in targets.items():
        sev, msg = probe_namespace(catalogs[ref], ns) if write_probe else _namespace_exists(catalogs[ref], ns)
        issues.append(use.entry.issue(use.field, sev, f"catalog {ref!r}: {msg}"))
    return issues


def _namespace_exists(catalog: Any, namespace: str) -> tuple[Severity, str]:
    not_probed = "(not probed for writes: --read-only)"
    try:
        if catalog.namespace_exists(namespace):
            return OK, f"namespace {namespace!r} exists {not_probed}"
    except Exception as exc:  # noqa: BLE001 - the finding
        return ERROR, f"cannot look up namespace {namespace!r}: {describe(exc)}"
    return WARNING, f"namespace {namespace!r} does not exist yet; the first load creates it {not_probed}"


def probe_namespace(catalog: Any, namespace: str) -> tuple[Severity, str]:
    """Create and remove a one-column probe table in ``namespace`` (created and dropped for it when missing).

    Probe tables an earlier, killed validate left in the namespace are removed first; what cannot be
    removed is an error that names it.
    """
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from snowberg.core.faults import crash_point

    probe = (namespace, f"{PROBE_PREFIX}{uuid.uuid4().hex[:12]}")
    name = ".".join(probe)
    created_ns = False
    try:
        if not catalog.namespace_exists(namespace):
            catalog.create_namespace(namespace)
            created_ns = True
        leftovers = [] if created_ns else list(iter_probe_tables(catalog, namespace))
        table = catalog.create_table(probe, schema=Schema(NestedField(field_id=1, name="probe", field_type=LongType())))
    except Exception as exc:  # noqa: BLE001 - the finding
        if created_ns:
            _quietly(catalog.drop_namespace, namespace)
        return ERROR, f"namespace {namespace!r} is not writable (creating a probe table failed): {describe(exc)}"
    crash_point("validate_probe_created")
    how, remains = remove_probe(catalog, probe, table)
    if created_ns and remains is None:
        remains = _drop_created_namespace(catalog, namespace, table.location())
    removed: list[str] = []
    stuck: list[str] = []
    for old in leftovers:
        left = remove_probe(catalog, tuple(old.split(".")))[1]
        (removed if left is None else stuck).append(old if left is None else left)
    if remains is not None or stuck:
        what = "; ".join([*([remains] if remains else []), *stuck])
        return ERROR, (
            f"namespace {namespace!r} is writable (probe table {name} created), but the probe was not removed: "
            f"{what}; the next validate removes it, or drop it by hand"
        )
    earlier = (
        f"; removed {len(removed)} probe table{'s' * (len(removed) != 1)} an earlier validate left: " if removed else ""
    )
    if created_ns:
        msg = (
            f"namespace {namespace!r} does not exist yet; the first load creates it: creating it and a probe table "
            f"{name} worked (both removed, the table {how})"
        )
    else:
        msg = f"namespace {namespace!r} is writable: probe table {name} created and {how}"
    return OK, msg + earlier + ", ".join(removed)


def remove_probe(catalog: Any, ident: tuple[str, ...], table: Any = None) -> tuple[str, str | None]:
    """Remove a probe table with everything it wrote: ``(how, what remains or None)``.

    Purge deletes its files; a catalog that refuses to purge may still drop it, and its metadata file (the
    only file a probe writes) is then deleted through the table's FileIO. A local warehouse keeps empty
    folders that no FileIO removes: they are removed here. A table already gone counts as removed (another
    validate may have removed it).
    """
    from pyiceberg.exceptions import NoSuchTableError

    name = ".".join(ident)
    try:
        table = table if table is not None else catalog.load_table(ident)
    except NoSuchTableError:
        return "removed by another validate", None
    except Exception as exc:  # noqa: BLE001 - what remains is the finding
        return "kept", f"the table {name} remains (it cannot be loaded: {describe(exc)})"
    try:
        catalog.purge_table(ident)
        how = "purged"
    except NoSuchTableError:
        return "removed by another validate", None
    except Exception as purge_exc:  # noqa: BLE001 - some catalogs cannot purge: drop, then delete the file
        try:
            catalog.drop_table(ident)
        except NoSuchTableError:
            return "removed by another validate", None
        except Exception as exc:  # noqa: BLE001
            return "kept", (f"the table {name} remains (purge: {describe(purge_exc)}; drop: {describe(exc)})")
        how = "dropped"
        try:
            table.io.delete(table.metadata_location)
        except Exception as exc:  # noqa: BLE001
            return how, f"the dropped table's metadata file {table.metadata_location} remains ({describe(exc)})"
    return how, _remove_local_folders(table.location(), ("metadata", ""))


def _drop_created_namespace(catalog: Any, namespace: str, table_location: str) -> str | None:
    """Drop the namespace created for the probe, and its local folder; what remains, or None."""
    try:
        catalog.drop_namespace(namespace)
    except Exception as exc:  # noqa: BLE001
        return f"the namespace {namespace!r} (created for the probe) remains: {describe(exc)}"
    return _remove_local_folders(table_location, ("..",))


def _remove_local_folders(location: str, subfolders: tuple[str, ...]) -> str | None:
    """Remove the empty ``subfolders`` of a ``file://`` location, in order; a folder that is not empty remains.

    Object stores have no folders; pyiceberg's local FileIO deletes files and leaves their folders.
    """
    import os
    from urllib.parse import urlparse

    uri = urlparse(location)
    if uri.scheme not in ("", "file"):
        return None
    base = uri.path
    for sub in subfolders:
        folder = os.path.normpath(os.path.join(base, sub))
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"the folder {folder} remains ({exc.strerror})"
    return None


def _quietly(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - cleanup of a probe; the finding is already made
        log.warning("validate: cleaning up the probe failed: %s", describe(exc))


def sync_findings(s: SyncConfig, conns: dict[str, Any], catalogs: dict[str, Any]) -> list[Finding]:
    """A sync's source lake table, its target and the table its check reads."""
    out: list[Finding] = []
    source = catalogs.get(s.source.catalog)
    if source is not None:
        n = IcebergName.parse(s.source.table)
        try:
            exists = source.table_exists((n.namespace, n.table))
        except Exception as exc:  # noqa: BLE001
            out.append(("source.table", ERROR, f"cannot look up {s.source.table}: {describe(exc)}"))
        else:
            out.append(
                ("source.table", OK, f"{s.source.table} exists")
                if exists
                else ("source.table", WARNING, f"{s.source.table} does not exist yet: runs fail until it is loaded")
            )
    t = s.target
    if isinstance(t, NativeTarget) and t.snowflake_conn_id in conns:
        out.append(_snowflake_table(conns[t.snowflake_conn_id], t.table, "target.table", "the first run creates it"))
    if isinstance(t, IcebergTarget) and t.catalog in catalogs:
        out += _iceberg_target(catalogs[t.catalog], t)
    if s.check_enabled and s.check_conn_id in conns and not (isinstance(t, NativeTarget) and s.check_table == t.table):
        out.append(_snowflake_table(conns[s.check_conn_id], s.check_table, "check.table", "the check will fail"))
    return out


def _snowflake_table(conn: Any, table: str, fld: str, if_missing: str) -> Finding:
    try:
        _columns(conn, TableName.parse(table).quoted(), describe=False)
        return (fld, OK, f"{table} answers in Snowflake")
    except Exception as exc:  # noqa: BLE001 - Snowflake says "does not exist or not authorized" for both
        return (fld, WARNING, f"{table} does not exist or this role cannot see it ({if_missing}): {describe(exc)}")


def _iceberg_target(catalog: Any, t: IcebergTarget) -> list[Finding]:
    n = IcebergName.parse(t.table)
    try:
        if not catalog.namespace_exists(n.namespace):
            return [("target.table", ERROR, f"namespace {n.namespace!r} does not exist in catalog {t.catalog!r}")]
        if catalog.table_exists((n.namespace, n.table)):
            return [("target.table", OK, f"{t.table} exists in catalog {t.catalog!r} (not probed for writes)")]
    except Exception as exc:  # noqa: BLE001
        return [("target.table", ERROR, f"catalog {t.catalog!r}: {describe(exc)}")]
    if t.create_in_snowflake is not None or t.create_if_missing:
        how = "create_in_snowflake" if t.create_in_snowflake is not None else "create_if_missing"
        return [("target.table", OK, f"{t.table} does not exist yet; the first run creates it ({how})")]
    return [
        (
            "target.table",
            ERROR,
            f"{t.table} does not exist in catalog {t.catalog!r} and the sync cannot create it: create it in Snowflake "
            "(CREATE ICEBERG TABLE … CATALOG = 'SNOWFLAKE') or set target.create_in_snowflake",
        )
    ]


def iter_probe_tables(catalog: Any, namespace: str) -> Iterator[str]:
    """Probe tables left in ``namespace`` (none, unless a cleanup failed): for tests and for people."""
    for ident in catalog.list_tables(namespace):
        if ident[-1].startswith(PROBE_PREFIX):
            yield ".".join(ident)
