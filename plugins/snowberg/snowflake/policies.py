"""Masking and row access policies on a source: Snowflake's own answer, one metadata query per run.

A role subject to a masking policy reads ``*****``, NULL or whatever the
policy returns in place of the value; a row access policy hides rows. Loaded,
both look like data, and every check agrees, because the volume check reads
the source through the same role. So before a run reads anything it asks
Snowflake which policies are attached to the source, with the Information
Schema table function ``POLICY_REFERENCES``
(https://docs.snowflake.com/en/sql-reference/functions/policy_references):
one row per policy, with ``POLICY_DB``, ``POLICY_SCHEMA``, ``POLICY_NAME``,
``POLICY_KIND`` (``MASKING_POLICY``, ``ROW_ACCESS_POLICY``, …) and
``REF_COLUMN_NAME`` (the column a masking policy is set on), ``TAG_NAME``
when the policy comes through a tag.

The table's ``on_policy`` decides (``OnPolicy``). Whether a policy actually
masks for this role is decided by its body at query time, which no metadata
tells: a policy attached is reason enough to stop, and ``allow`` is the
deliberate way past it.

What it cannot see: policies on the base tables of a view (only those set on
the view itself are reported), and the sources of a custom query (no single
table to ask about: such a run logs that it was not checked).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from snowberg.config.table_config import OnPolicy, TableConfig
from snowberg.core.identifiers import TableName, quote_identifier

log = logging.getLogger(__name__)


class PolicyKind(StrEnum):
    """The ``POLICY_KIND`` values that change what a role reads without failing its query.

    Projection and aggregation policies make a plain ``SELECT`` fail, loudly; they need no check here.
    """

    MASKING = "MASKING_POLICY"
    ROW_ACCESS = "ROW_ACCESS_POLICY"


class EntityDomain(StrEnum):
    """``REF_ENTITY_DOMAIN`` of a source: ``TABLE`` (also an external table) or ``VIEW`` (also materialized)."""

    TABLE = "TABLE"
    VIEW = "VIEW"


@dataclass(frozen=True, kw_only=True)
class PolicyReference:
    """One policy attached to the source, as ``POLICY_REFERENCES`` reports it."""

    policy: str  # database.schema.name
    kind: PolicyKind
    column: str | None = None  # the masked column (None for a row access policy)
    tag: str | None = None  # the tag through which a tag-based masking policy applies

    def describe(self) -> str:
        via = f" (through tag {self.tag})" if self.tag else ""
        if self.kind is PolicyKind.MASKING:
            return f"column {self.column} carries masking policy {self.policy}{via}"
        return f"row access policy {self.policy} filters the rows{via}"


class PolicyError(RuntimeError):
    """The source carries a policy and ``on_policy`` is ``fail``: nothing was read."""


def policy_sql(name: TableName, domain: EntityDomain) -> tuple[str, dict[str, str]]:
    """The metadata query for table ``name`` and its bind parameters (the database is an identifier, quoted)."""
    database = quote_identifier(name.database, "database")
    sql = (
        "SELECT POLICY_DB, POLICY_SCHEMA, POLICY_NAME, POLICY_KIND, REF_COLUMN_NAME, TAG_NAME "  # noqa: S608 - quoted identifier; values bound
        f"FROM TABLE({database}.INFORMATION_SCHEMA.POLICY_REFERENCES("
        "REF_ENTITY_NAME => %(entity)s, REF_ENTITY_DOMAIN => %(domain)s))"
    )
    # The entity name as Snowflake reads a name inside a string: each part quoted, so case is exact.
    return sql, {"entity": name.quoted(), "domain": domain.value}


def parse_references(rows: Iterable[Mapping[str, Any]]) -> list[PolicyReference]:
    """The masking and row access policies among ``rows`` (dicts keyed by upper-case column name)."""
    out = []
    for r in rows:
        try:
            kind = PolicyKind(str(r.get("POLICY_KIND") or "").upper())
        except ValueError:
            continue  # projection, aggregation, join … policies: a query they refuse fails by itself
        policy = ".".join(str(p) for p in (r.get("POLICY_DB"), r.get("POLICY_SCHEMA"), r.get("POLICY_NAME")) if p)
        column = r.get("REF_COLUMN_NAME") if kind is PolicyKind.MASKING else None
        out.append(
            PolicyReference(policy=policy, kind=kind, column=str(column) if column else None, tag=r.get("TAG_NAME"))
        )
    return out


def _fetch(conn: Any, sql: str, params: Mapping[str, str]) -> list[dict[str, Any]]:
    cur = conn.cursor()
    try:
        cur.execute(sql, dict(params))
        names = [d[0].upper() for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    finally:
        cur.close()


def read_references(conn: Any, name: TableName) -> list[PolicyReference]:
    """The policies on table or view ``name``: one query (two for a view: its domain is not known beforehand).

    The function refuses an entity of the other domain ("does not exist"), so a
    source that is not a table is asked again as a view; if that fails too, the
    first error is raised.
    """
    sql, params = policy_sql(name, EntityDomain.TABLE)
    try:
        return parse_references(_fetch(conn, sql, params))
    except Exception as first:
        sql, params = policy_sql(name, EntityDomain.VIEW)
        try:
            return parse_references(_fetch(conn, sql, params))
        except Exception:
            raise first from None


Reader = Callable[[Any, TableName], Sequence[PolicyReference]]


@dataclass(frozen=True, kw_only=True)
class PolicyFinding:
    """What the check found for one run: the policies that apply, and what ``on_policy`` made of them."""

    references: tuple[PolicyReference, ...] = ()
    role: str | None = None
    checked: bool = True
    note: str = ""

    def summary_text(self) -> str:
        """The policies as recorded in an ``allow`` commit's snapshot summary: ``kind policy [column]`` by ``;``."""
        return "; ".join(
            f"{r.kind.value} {r.policy}" + (f" on {r.column}" if r.column else "") for r in self.references
        )


def applying(refs: Sequence[PolicyReference], excluded: Iterable[str]) -> list[PolicyReference]:
    """The references that change what a load reads: a masking policy on an excluded column is never read."""
    gone = {quote_identifier(c)[1:-1] for c in excluded}
    return [r for r in refs if not (r.kind is PolicyKind.MASKING and r.column in gone)]


def current_role(conn: Any) -> str | None:
    cur = conn.cursor()
    try:
        cur.execute("SELECT CURRENT_ROLE()")
        row = cur.fetchone()
        return str(row[0]) if row and row[0] is not None else None
    finally:
        cur.close()


def check_policies(
    cfg: TableConfig, conn: Any, *, excluded: Iterable[str] = (), reader: Reader | None = None
) -> PolicyFinding:
    """Ask Snowflake about the source's policies and apply ``cfg.on_policy``: raise ``PolicyError``, warn, or allow.

    ``excluded``: source columns the load never selects (``columns.exclude``).
    ``reader`` (default ``read_references``, looked up at call time) is injectable for tests: the local
    emulator has no policies.
    A query source is not checked (logged). The role is read only when a policy applies.
    """
    if not cfg.source.table:
        note = "the source is a custom query: its tables' masking and row access policies are not checked"
        log.info("table %s: %s", cfg.name, note)
        return PolicyFinding(checked=False, note=note)
    name = TableName.parse(cfg.source.table)
    try:
        refs = applying((reader or read_references)(conn, name), excluded)
    except Exception as exc:
        if cfg.on_policy is OnPolicy.FAIL:
            raise PolicyError(
                f"table {cfg.name!r}: cannot ask Snowflake which masking or row access policies apply to "
                f"{cfg.source.table} (INFORMATION_SCHEMA.POLICY_REFERENCES): {exc}. Grant the role access to the "
                "policy metadata, or set on_policy: warn (load and log) or allow (load and record it)"
            ) from exc
        note = f"the policy check could not run ({exc}); on_policy {cfg.on_policy.value}: loading"
        log.warning("table %s: %s", cfg.name, note)
        return PolicyFinding(checked=False, note=note)
    if not refs:
        return PolicyFinding()
    role = current_role(conn)
    found = "; ".join(r.describe() for r in refs)
    what = (
        f"table {cfg.name!r}: source {cfg.source.table}: {found}. Read as role {role}, the load would copy what the "
        "policy returns for that role (masked values, or only some rows) as if it were the data"
    )
    finding = PolicyFinding(references=tuple(refs), role=role)
    if cfg.on_policy is OnPolicy.FAIL:
        raise PolicyError(
            f"{what}. Nothing was read. Use a role the policy does not apply to, leave a masked column out "
            "(columns.exclude), or, to load what this role reads deliberately, set on_policy: allow (recorded in "
            "each commit's snapshot summary) or warn"
        )
    if cfg.on_policy is OnPolicy.WARN:
        log.warning("%s (on_policy: warn)", what)
    else:
        log.info("%s (on_policy: allow: recorded in the commit's snapshot summary)", what)
    return finding
