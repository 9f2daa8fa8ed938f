"""Which tables a SQL statement changes, as Snowflake counts a change: the emulator's change-time rules.

Snowflake keeps, per table, the time of its last change and serves it two ways:

* ``LAST_ALTERED`` in ``<db>.INFORMATION_SCHEMA.TABLES``, a TIMESTAMP_LTZ: "Date and time the object was
  last altered by a DML, DDL, or background metadata operation"
  (https://docs.snowflake.com/en/sql-reference/info-schema/tables). The usage notes of the Information
  Schema views spell it out (https://docs.snowflake.com/en/sql-reference/info-schema/schemata): DDL
  operations; DML operations, for tables only, "even when no rows are affected by the DML statement";
  background maintenance operations on metadata. The TABLES view's ``LAST_DDL`` column names the DDL:
  ``{ CREATE | ALTER | DROP | UNDROP } TABLE`` and every ``ALTER TABLE`` (setting or unsetting a
  parameter such as COMMENT, adding, modifying, renaming or dropping columns).
* ``SYSTEM$LAST_CHANGE_COMMIT_TIME('<object_name>')``, a NUMBER with scale 0: "typically an
  approximation of the time that the database object was last changed, expressed as the UTC timestamp
  in nanoseconds since the beginning of the epoch"; "for each DML operation performed on the specified
  table ... the returned value increases"; Snowflake recommends it only as a change indicator
  (https://docs.snowflake.com/en/sql-reference/functions/system_last_change_commit_time).

A change is a committed one: a statement that fails changes nothing, and a transaction that rolls back
commits nothing, so neither moves the time; a transaction's changes take the time of its COMMIT. A
SELECT (or any query) is not a change. Each table has its own time: a change to one table moves no other.

The emulator has no background maintenance, so only statements move the time. Two choices of its own,
where the documentation says nothing: ``CREATE TABLE IF NOT EXISTS`` of a table that exists changes
nothing, so the local stack's seeding at every start does not make the demo tables look changed; and a
temporary table (which fakesnow leaves out of INFORMATION_SCHEMA.TABLES) is not tracked.

This module only reads statements (sqlglot, fakesnow's Snowflake dialect); ``snowberg.local.emulator``
records and serves the times.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from sqlglot import exp

LAST_CHANGE_COMMIT_TIME = "SYSTEM$LAST_CHANGE_COMMIT_TIME"


class TableKey(NamedTuple):
    """A table as the emulator stores it: database, schema and table name, each as stored."""

    database: str
    schema: str
    table: str

    def __str__(self) -> str:
        return ".".join(self)


class Effect(enum.Enum):
    """What a statement does to the session's transaction and to tables."""

    NONE = "none"  # a query, or a statement that changes no table (USE, SHOW, CREATE SCHEMA, ...)
    BEGIN = "begin"
    COMMIT = "commit"
    ROLLBACK = "rollback"
    DML = "dml"
    DDL = "ddl"
    SESSION = "session"  # ALTER SESSION: fakesnow commits an open transaction when AUTOCOMMIT changes


@dataclass(frozen=True, kw_only=True)
class Statement:
    """A statement's effect: the tables whose change time moves if it commits, and what else it does."""

    effect: Effect = Effect.NONE
    changed: tuple[TableKey, ...] = ()
    # CREATE TABLE IF NOT EXISTS: changes the table only if it did not exist before the statement.
    only_if_new: bool = False
    created_database: str | None = None

    @property
    def changes_tables(self) -> bool:
        return self.effect in (Effect.DML, Effect.DDL) and bool(self.changed)


def stored_identifier(ident: exp.Expr | None) -> str | None:
    """An identifier as stored: unquoted ones upper-cased (Snowflake's rule, which fakesnow follows)."""
    if not isinstance(ident, exp.Identifier):
        return None
    return ident.this if ident.quoted else ident.this.upper()


def table_key(table: exp.Expr | None, database: str | None, schema: str | None) -> TableKey | None:
    """The stored name of ``table`` (a sqlglot Table), its missing parts from the session's database/schema.

    None when it is not a named table (a stage ``@s``, a table function) or a part is missing with no
    session default: such a statement fails or changes no table.
    """
    if isinstance(table, exp.Schema):
        table = table.this
    if not isinstance(table, exp.Table):
        return None
    name = stored_identifier(table.this)
    db = stored_identifier(table.args.get("catalog")) if table.args.get("catalog") else database
    sch = stored_identifier(table.args.get("db")) if table.args.get("db") else schema
    if not (name and db and sch):
        return None
    return TableKey(db, sch, name)


def _keys(tables: list[exp.Expr | None], database: str | None, schema: str | None) -> tuple[TableKey, ...]:
    keys = (table_key(t, database, schema) for t in tables)
    return tuple(dict.fromkeys(k for k in keys if k is not None))


def _is_temporary(create: exp.Create) -> bool:
    props = create.args.get("properties")
    return bool(props and any(isinstance(p, exp.TemporaryProperty) for p in props.expressions))


def _alter_targets(alter: exp.Alter, database: str | None, schema: str | None) -> tuple[TableKey, ...]:
    """An ALTER TABLE changes its table; a rename changes the new name, a swap both tables."""
    old = table_key(alter.this, database, schema)
    if old is None:
        return ()
    targets: list[exp.Expr | None] = [alter.this]
    for action in alter.args.get("actions") or []:
        if isinstance(action, exp.AlterRename):
            # DuckDB (the emulator's engine) keeps a renamed table in its schema unless the new name says
            # otherwise: the new name's missing parts come from the old table, not from the session.
            targets = [action.this]
            return _keys(targets, old.database, old.schema)
        if isinstance(action, exp.SwapTable):
            targets.append(action.this)
    return _keys(targets, database, schema)


def classify(statement: exp.Expr, database: str | None, schema: str | None) -> Statement:
    """What ``statement`` (parsed, not yet transformed by fakesnow) changes, in a session on database/schema."""
    if isinstance(statement, exp.Transaction):
        return Statement(effect=Effect.BEGIN)
    if isinstance(statement, exp.Commit):
        return Statement(effect=Effect.COMMIT)
    if isinstance(statement, exp.Rollback):
        return Statement(effect=Effect.ROLLBACK)
    # DML, as Snowflake lists it (INSERT, UPDATE, DELETE, MERGE, TRUNCATE TABLE, COPY INTO <table>).
    if isinstance(statement, exp.TruncateTable):
        return Statement(effect=Effect.DML, changed=_keys(statement.expressions, database, schema))
    if isinstance(statement, (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Copy)):
        return Statement(effect=Effect.DML, changed=_keys([statement.this], database, schema))
    if isinstance(statement, exp.MultitableInserts):
        into = [i.this for i in statement.expressions if isinstance(i, exp.Insert)]
        return Statement(effect=Effect.DML, changed=_keys(into, database, schema))
    kind = str(statement.args.get("kind") or "").upper()
    if isinstance(statement, exp.Create):
        if kind == "DATABASE":
            return Statement(effect=Effect.DDL, created_database=stored_identifier(statement.find(exp.Identifier)))
        if kind == "TABLE" and not _is_temporary(statement):
            return Statement(
                effect=Effect.DDL,
                changed=_keys([statement.this], database, schema),
                only_if_new=bool(statement.args.get("exists")) and not statement.args.get("replace"),
            )
        return Statement(effect=Effect.DDL)
    if isinstance(statement, exp.Alter):
        if kind == "SESSION":
            return Statement(effect=Effect.SESSION)
        changed = _alter_targets(statement, database, schema) if kind == "TABLE" else ()
        return Statement(effect=Effect.DDL, changed=changed)
    if isinstance(statement, exp.Comment):
        if kind == "TABLE":
            return Statement(effect=Effect.DDL, changed=_keys([statement.this], database, schema))
        if kind == "COLUMN" and isinstance(statement.this, exp.Column):
            col = statement.this
            table = exp.Table(this=col.args.get("table"), db=col.args.get("db"), catalog=col.args.get("catalog"))
            return Statement(effect=Effect.DDL, changed=_keys([table], database, schema))
        return Statement(effect=Effect.DDL)
    if isinstance(statement, (exp.Drop, exp.Undrop)):
        # A dropped table leaves INFORMATION_SCHEMA.TABLES; an undropped one is back, changed.
        tables = statement.args.get("tables") or [statement.this]
        changed = _keys(tables, database, schema) if kind == "TABLE" and isinstance(statement, exp.Undrop) else ()
        return Statement(effect=Effect.DDL, changed=changed)
    return Statement()


def change_time_calls(statement: exp.Expr) -> list[exp.Anonymous]:
    """Every ``SYSTEM$LAST_CHANGE_COMMIT_TIME(...)`` call in ``statement``."""
    return [f for f in statement.find_all(exp.Anonymous) if str(f.this).upper() == LAST_CHANGE_COMMIT_TIME]


def object_name(call: exp.Anonymous) -> str:
    """The one string argument of a ``SYSTEM$LAST_CHANGE_COMMIT_TIME`` call (what Snowflake accepts)."""
    args = call.expressions
    if len(args) != 1 or not isinstance(args[0], exp.Literal) or not args[0].is_string:
        raise ValueError(f"{LAST_CHANGE_COMMIT_TIME} takes one string literal, the object's name: {call.sql()}")
    return str(args[0].this)


def column_name(call: exp.Anonymous) -> str:
    """The result column Snowflake names an unaliased call by: its text, upper-cased."""
    return call.sql(dialect="snowflake").upper()
