"""What a lake table was loaded with, and the refusal to load it with something else.

The watermark in a table's state belongs to one source, one cursor column and
one key, and its values to one set of hashed columns (``columns.hash``). A
config edit that changes any of them (``source``, ``cursor.column``,
``primary_key``, ``columns.hash``) would otherwise resume from a watermark of
another column, merge on another key, or mix hashes with clear values in one
column, without a word. So the four are recorded as table
properties (at creation, and by the commit of a run on a table that lacks
them) and every plan compares them with the config before any SQL reads rows.
A ``full_refresh`` run is the way through: it rebuilds the table from the new
config and its commit records the new identity.

A custom query's text is recorded (as a hash) but a changed query is only
logged: queries are edited to add or cast columns, and whether the new text
reads the same rows is not something a hash can tell.

The identity belongs to the state: every commit records it in its snapshot
summary too (the gate copies what it sets), so a rollback restores the
identity a snapshot's state was recorded with, together with the watermark.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from snowberg.config.table_config import TableConfig
from snowberg.core.identifiers import clip

if TYPE_CHECKING:
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

VERSION = "snowberg.identity-version"
SOURCE = "snowberg.source"
CURSOR_COLUMN = "snowberg.cursor-column"
PRIMARY_KEY = "snowberg.primary-key"
QUERY_SHA256 = "snowberg.source-query-sha256"
# The columns hashed in Snowflake (columns.hash): a column that becomes hashed (or clear again) would mix clear
# values and hashes in one column, and a hashed key would no longer match its clear rows, so a change needs a reload.
HASHED_COLUMNS = "snowberg.hashed-columns"

# (property, config field as users write it)
_CHECKED = (
    (SOURCE, "source"),
    (CURSOR_COLUMN, "cursor.column"),
    (PRIMARY_KEY, "primary_key"),
    (HASHED_COLUMNS, "columns.hash"),
)
IDENTITY_KEYS = (VERSION, SOURCE, CURSOR_COLUMN, PRIMARY_KEY, QUERY_SHA256, HASHED_COLUMNS)
FIELD_NAMES = {
    SOURCE: "source",
    CURSOR_COLUMN: "cursor.column",
    PRIMARY_KEY: "primary_key",
    QUERY_SHA256: "query",
    HASHED_COLUMNS: "columns.hash",
}


class ConfigDriftError(ValueError):
    """The config no longer describes what the table was loaded with."""


def _snowflake_name(part: str) -> str:
    # Unquoted Snowflake names are stored upper-case: `orders` and `ORDERS` are one table.
    return part.upper() if part == part.lower() else part


def identity_properties(cfg: TableConfig) -> dict[str, str]:
    """The table properties that record what ``cfg`` loads (written at creation and by commits)."""
    if cfg.source.table is not None:
        source = ".".join(_snowflake_name(p) for p in cfg.source.table.split("."))
    else:
        source = "custom query"
    props = {
        VERSION: "1",
        SOURCE: source,
        CURSOR_COLUMN: cfg.cursor.column.lower() if cfg.cursor else "",
        PRIMARY_KEY: ",".join(c.lower() for c in cfg.primary_key),
        HASHED_COLUMNS: ",".join(sorted(c.lower() for c in cfg.columns.hash)),
    }
    if cfg.source.query is not None:
        props[QUERY_SHA256] = hashlib.sha256(cfg.source.query.encode()).hexdigest()
    return props


def recorded_identity(props: Mapping[str, str]) -> dict[str, str]:
    """The identity items among ``props`` (table properties or a snapshot summary)."""
    return {k: props[k] for k in IDENTITY_KEYS if k in props}


def check_identity(cfg: TableConfig, table: Table | None, *, mode: str = "incremental") -> None:
    """Refuse to plan a run whose config changed what the table was loaded with.

    Nothing to compare for a new table or one loaded before identities were
    recorded (its next commit records one). A ``full_refresh`` run passes: it
    replaces every row and records the new identity.
    """
    if table is None:
        return
    recorded = table.properties
    if recorded.get(VERSION) is None:
        return
    now = identity_properties(cfg)
    changed = [(field, recorded.get(key, ""), now[key]) for key, field in _CHECKED if recorded.get(key, "") != now[key]]
    if mode == "full_refresh":
        if changed:
            log.info("table %s: full refresh re-records %s", cfg.name, ", ".join(f for f, _, _ in changed))
        return
    if changed:
        what = "; ".join(
            f"{field} was {clip(old or '(none)')}, is now {clip(new or '(none)')}" for field, old, new in changed
        )
        raise ConfigDriftError(
            f"table {cfg.name!r}: the config changed what Iceberg table {cfg.target} was loaded with ({what}). "
            "Its watermark and rows belong to the old setting, so nothing was read or written. Trigger a run "
            "with full_refresh: true to reload the table from the new config (it records the new setting), "
            "or restore the old value."
        )
    if QUERY_SHA256 in now and recorded.get(QUERY_SHA256) not in (None, now[QUERY_SHA256]):
        log.warning(
            "table %s: the custom query changed since the last load; the watermark carries over (if the new "
            "query reads other rows, run a full_refresh)",
            cfg.name,
        )
