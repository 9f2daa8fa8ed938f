"""Entries proposed by ``snowberg discover``: what Snowflake's metadata says about a table, turned into config.

Snowflake's metadata (read by ``snowberg.snowflake.discovery``) becomes one proposed ``tables.yaml``
entry per table, each value with a YAML comment saying why it was chosen. The rules are plain and
documented (docs/onboarding.md):

* ``primary_key`` from the declared PRIMARY KEY (Snowflake enforces none; RELY says its owner vouches);
* the cursor: a TIMESTAMP/DATE column, or a NUMBER column with a time or sequence word, whose name says it
  records changes (``updated_at``, ``modified``, ``last_changed``, …); a view's too;
* no cursor: the table is reloaded in full when its ``LAST_ALTERED`` moves; with change tracking on and a
  key, a stream instead;
* ``write_mode``/``merge_strategy`` from the key, ``number_as_long`` for NUMBER(p≥19,0) columns
  (range-checked on every run), ``timestamp_nanos`` where a precision above 6 exists, and for big tables
  ``scale_out``/``max_rows_per_slice``/``max_parallel_slices`` and ``partition_by`` on a time cursor.

Writing never rewrites what is there: new entries are appended as text at the end of the file's
``tables:`` list (``append_entries``), so every existing entry, comment and blank line stays byte for byte
(a person's edits survive every later run by construction). A round-trip YAML library (ruamel.yaml) could
do the same by re-emitting the whole file, but it is not in Airflow's image and re-emitting can still
reflow what a person wrote; appending text needs neither. Where the file cannot be appended to as text
(a flow-style ``tables: [...]``) discovery refuses and says so.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from snowberg.config.stream_settings import STAGING_SUFFIX
from snowberg.config.table_config import ConfigError, parse_config_isolated
from snowberg.core.cursor import CursorKind
from snowberg.core.identifiers import IdentifierError, validate_iceberg_identifier, validate_identifier

# A table at least this big gets its first load and catch-ups as mapped slices (docs/performance.md: mapped
# slices pay for tens of millions of rows; below a few million per slice one task is faster).
SCALE_OUT_ROWS = 20_000_000
SLICES_ON_FIRST_LOAD = 20  # max_rows_per_slice is chosen so that a first load is about this many slices
MIN_SLICE_ROWS, MAX_SLICE_ROWS = 1_000_000, 10_000_000
MAX_PARALLEL_SLICES = 4  # concurrent slice queries a scaled-out table sends to the warehouse
# A table at least this big with a time cursor is partitioned on it (month; day from DAY_PARTITION_ROWS).
PARTITION_ROWS = 10_000_000
DAY_PARTITION_ROWS = 1_000_000_000
COMMIT_LAG = "5m"  # proposed for time cursors: covers ordinary transactions; discovery cannot see their length
STREAM_SUFFIX = "_SNOWBERG_STREAM"
INT64_MAX = 2**63 - 1

# The words of a column name that say it records changes, and (for NUMBER columns, which also hold amounts
# such as PRICE_CHANGE) the words that say it is a time or a sequence.
CHANGE_WORDS = (
    "updated",
    "update",
    "modified",
    "modify",
    "mod",
    "changed",
    "change",
    "lastmodified",
    "lastupdated",
    "lastchanged",
    "updatedat",
    "modifiedat",
    "changedat",
    "mtime",
)
NUMBER_CURSOR_WORDS = ("at", "ts", "time", "timestamp", "epoch", "seq", "sequence", "version", "lsn", "counter")
TIME_TYPES = ("TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIMESTAMP_TZ", "TIME")


class DiscoveryError(ValueError):
    """Discovery cannot write what it proposes (the file's shape, or a proposal that would not validate)."""


class ObjectKind(StrEnum):
    """What a discovered object is, from ``INFORMATION_SCHEMA.TABLES.TABLE_TYPE``.

    table:    a base table (its ``LAST_ALTERED`` follows its rows: a cursor-less table reloads on change)
    view:     a view or materialized view (its ``LAST_ALTERED`` follows its DDL: a cursor-less view reloads
              every run; no key, no stream)
    external: an external or event table (no change metadata snowberg can use; like a view)
    """

    TABLE = "table"
    VIEW = "view"
    EXTERNAL = "external"

    @classmethod
    def for_table_type(cls, table_type: str) -> ObjectKind | None:
        """The kind of a ``TABLE_TYPE``; None for what is not loaded (a temporary table lives in one session)."""
        return {
            "BASE TABLE": cls.TABLE,
            "VIEW": cls.VIEW,
            "MATERIALIZED VIEW": cls.VIEW,
            "EXTERNAL TABLE": cls.EXTERNAL,
            "EVENT TABLE": cls.EXTERNAL,
        }.get(table_type.upper())


@dataclass(frozen=True, kw_only=True)
class DiscoveredColumn:
    """One column as ``INFORMATION_SCHEMA.COLUMNS`` describes it."""

    name: str
    data_type: str  # NUMBER, FLOAT, TEXT, TIMESTAMP_NTZ, VARIANT, … (Snowflake's DATA_TYPE)
    precision: int | None = None  # NUMERIC_PRECISION
    scale: int | None = None  # NUMERIC_SCALE
    datetime_precision: int | None = None  # DATETIME_PRECISION; None when not reported
    nullable: bool = True

    @property
    def type_text(self) -> str:
        t = self.data_type.upper()
        if t == "NUMBER":
            return f"NUMBER({self.precision},{self.scale})"
        if t in TIME_TYPES:
            return f"{t}({self.datetime_precision})" if self.datetime_precision is not None else t
        return t

    @property
    def cursor_kind(self) -> CursorKind | None:
        """The watermark kind this column could be (a NUMBER only with scale 0)."""
        kind = CursorKind.for_snowflake_type(self.data_type)
        if kind is CursorKind.NUMBER and (self.scale or 0) != 0:
            return None
        return kind

    @property
    def wide_integer(self) -> bool:
        """NUMBER(p≥19,0): Iceberg decimal(p,0) unless listed in ``number_as_long`` (docs/type-mapping.md)."""
        return self.data_type.upper() == "NUMBER" and (self.scale or 0) == 0 and (self.precision or 38) >= 19

    @property
    def sub_microsecond(self) -> bool:
        """A time type that may hold nanoseconds: precision above 6, or none reported (Snowflake's default is 9)."""
        return self.data_type.upper() in TIME_TYPES and (self.datetime_precision is None or self.datetime_precision > 6)


@dataclass(frozen=True, kw_only=True)
class PrimaryKey:
    """A declared PRIMARY KEY (``SHOW PRIMARY KEYS``): its name, columns in key order, and RELY."""

    name: str
    columns: tuple[str, ...]
    rely: bool


@dataclass(frozen=True, kw_only=True)
class DiscoveredTable:
    """One table or view of the discovered schema."""

    database: str
    schema: str
    name: str
    kind: ObjectKind
    table_type: str
    row_count: int | None = None
    bytes: int | None = None
    last_altered: datetime | None = None
    change_tracking: bool | None = None  # None: not reported
    columns: tuple[DiscoveredColumn, ...] = ()
    primary_key: PrimaryKey | None = None

    @property
    def ref(self) -> str:
        return f"{self.database}.{self.schema}.{self.name}"

    @property
    def signature(self) -> str:
        """A short hash of the column names and types: a table renamed in Snowflake keeps it."""
        text = "|".join(f"{c.name}:{c.type_text}" for c in self.columns)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def column(self, name: str) -> DiscoveredColumn | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True, kw_only=True)
class Profile:
    """What ``--profile``'s one query per table found: rows, NULL cursors, the newest cursor, wide NUMBER ranges."""

    rows: int
    cursor_nulls: int | None = None
    cursor_max: Any = None
    beyond_long: tuple[str, ...] = ()  # wide NUMBER columns holding a value outside the 64-bit range


@dataclass(frozen=True, kw_only=True)
class Line:
    """One key of a proposed entry: its value (a scalar, list or mapping) and why."""

    key: str
    value: Any
    why: str | None = None
    children: tuple[Line, ...] = ()  # a section written as a block (``cursor:``), each child with its own why


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """A proposed entry: its keys in order, with a comment each, and the notes written above them."""

    table: DiscoveredTable
    name: str
    lines: tuple[Line, ...]
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The entry as the YAML will hold it."""
        return {ln.key: ({c.key: c.value for c in ln.children} if ln.children else ln.value) for ln in self.lines}


# ---------------------------------------------------------------------------------------------- names


def config_identifier(name: str) -> str | None:
    """How the config writes Snowflake's name ``name`` so that it quotes back to it; None when it cannot.

    A config identifier that is all lower-case is upper-cased when quoted (``quote_identifier``), so an
    upper-case Snowflake name is written lower-case and a mixed-case one as it is; an all-lower-case name
    (created quoted) cannot be written, nor one with characters outside a plain identifier.
    """
    try:
        validate_identifier(name)
    except IdentifierError:
        return None
    if name == name.upper():
        return name.lower()
    if name == name.lower():
        return None
    return name


def table_ref_text(t: DiscoveredTable) -> str | None:
    """``source.table`` for ``t``: each part as Snowflake spells it when upper-case (readable), else as written."""
    parts = []
    for p in (t.database, t.schema, t.name):
        written = config_identifier(p)
        if written is None:
            return None
        parts.append(p if p == p.upper() else written)
    return ".".join(parts)


def entry_name(table: str, prefix: str = "") -> str:
    """An entry name (lower-case letters, digits, ``_``, at most 64) from a table name."""
    base = re.sub(r"[^a-z0-9_]", "_", (prefix + table).lower())
    if not base or not base[0].isalpha():
        base = "t_" + base
    return base[:64]


def name_words(name: str) -> list[str]:
    """The words of a column name: split at ``_`` and at lower→upper case changes (``lastModified``)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w for w in spaced.lower().split("_") if w]


def records_changes(col: DiscoveredColumn) -> bool:
    """Whether the column's name and type say it records when (or in which order) a row last changed."""
    kind = col.cursor_kind
    if kind is None:
        return False
    words = name_words(col.name)
    if not any(w in CHANGE_WORDS for w in words):
        return False
    if kind is CursorKind.NUMBER:
        return any(w in NUMBER_CURSOR_WORDS for w in words)
    return True


# Timestamps before DATE (a DATE window ends at the last closed day), instants before wall-clock readings.
_KIND_RANK = {CursorKind.TIMESTAMP_TZ: 0, CursorKind.TIMESTAMP_NTZ: 1, CursorKind.NUMBER: 2, CursorKind.DATE: 3}


def cursor_candidates(t: DiscoveredTable) -> list[DiscoveredColumn]:
    """The columns that could be the cursor, best first (type rank, then ``updated`` over other words)."""
    found = [c for c in t.columns if records_changes(c) and config_identifier(c.name) is not None]

    def rank(c: DiscoveredColumn) -> tuple[int, int, int]:
        words = name_words(c.name)
        updated = 0 if any(w.startswith("updated") or w == "update" for w in words) else 1
        kind = c.cursor_kind
        assert kind is not None
        return (_KIND_RANK[kind], updated, t.columns.index(c))

    return sorted(found, key=rank)


# ---------------------------------------------------------------------------------------------- proposing


def _count(n: int | None) -> str:
    return "unknown" if n is None else f"{n:,}"


def _size(n: int | None) -> str:
    if n is None:
        return "unknown size"
    for unit, step in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= step:
            return f"{n / step:.1f} {unit}"
    return f"{n} bytes"


def _slice_rows(rows: int) -> int:
    per = -(-rows // SLICES_ON_FIRST_LOAD)
    per = -(-per // 1_000_000) * 1_000_000  # whole millions
    return max(MIN_SLICE_ROWS, min(MAX_SLICE_ROWS, per))


def propose(
    t: DiscoveredTable,
    *,
    name: str,
    namespace: str,
    conn_id: str | None = None,
    pool: str | None = None,
    profile: Profile | None = None,
) -> Proposal:
    """The entry for ``t`` (see the module docstring for the rules); every value says why in its comment."""
    source = table_ref_text(t)
    if source is None:
        raise DiscoveryError(f"{t.ref}: the name cannot be written as a plain identifier")
    rows = profile.rows if profile is not None else t.row_count
    header = (
        f"discovered: {t.ref} ({t.table_type}, {_count(t.row_count)} rows, {_size(t.bytes)}), columns {t.signature}"
    )
    lines: list[Line] = [
        Line(key="name", value=name, why=header),
        Line(key="source", value={"table": source}),
        Line(key="target", value=f"{namespace}.{name}"),
    ]
    notes: list[str] = []
    if conn_id is not None:
        lines.append(Line(key="snowflake_conn_id", value=conn_id))
    if pool is not None:
        lines.append(
            Line(
                key="pool",
                value=pool,
                why="caps the loads querying this connection at once; create it: snowberg pools --create",
            )
        )

    # The key: a declared PRIMARY KEY whose columns the config can name.
    key: list[str] = []
    pk = t.primary_key if t.kind is ObjectKind.TABLE else None
    if pk is not None:
        written = [config_identifier(c) for c in pk.columns]
        if all(w is not None for w in written):
            key = [w for w in written if w is not None]
            trust = (
                "RELY: its owner vouches it is unique"
                if pk.rely
                else "NORELY; Snowflake enforces no key: a repeated or NULL key fails the run"
            )
            lines.append(Line(key="primary_key", value=key, why=f"key from PRIMARY KEY {pk.name} ({trust})"))
        else:
            notes.append(f"PRIMARY KEY {pk.name} has a column the config cannot name (lower-case quoted): no key")
    elif t.kind is ObjectKind.TABLE:
        notes.append("no PRIMARY KEY declared: rows cannot be merged by key (declare one, or list primary_key)")
    else:
        notes.append(f"a {t.table_type.lower()} declares no key: set primary_key if its rows have one")

    # The cursor.
    cursor_lines: list[Line] = []
    cursor_col: DiscoveredColumn | None = None
    candidates = cursor_candidates(t)
    if candidates:
        cursor_col = candidates[0]
        kind = cursor_col.cursor_kind
        assert kind is not None
        why = f"cursor: {cursor_col.name} {cursor_col.type_text}, named for changes"
        if len(candidates) > 1:
            why += f" (also: {', '.join(c.name for c in candidates[1:4])})"
        null_policy: str | None = None
        if profile is not None and profile.cursor_nulls is not None:
            share = profile.cursor_nulls / profile.rows if profile.rows else 0.0
            why += f"; {profile.cursor_nulls:,} NULLs of {profile.rows:,} rows, max {profile.cursor_max}"
            if profile.cursor_nulls and not key:
                notes.append(
                    f"cursor {cursor_col.name} has {profile.cursor_nulls:,} NULLs ({share:.1%}) and there is no key: "
                    "they can neither be re-read (needs a key) nor silently skipped, so no cursor is proposed"
                )
                cursor_col = None
            elif profile.cursor_nulls:
                null_policy = "include"
        elif cursor_col.nullable:
            why += "; not profiled (--profile counts its NULLs)"
        if cursor_col is not None:
            cursor_lines.append(Line(key="column", value=config_identifier(cursor_col.name), why=why))
            if kind.is_time:
                cursor_lines.append(
                    Line(
                        key="commit_lag",
                        value=COMMIT_LAG,
                        why="must cover the longest transaction writing the table (not in Snowflake's metadata)",
                    )
                )
            if kind.follows_writer_clock:
                cursor_lines.append(
                    Line(
                        key="timezone",
                        value="UTC",
                        why="the zone of the clock that writes it: check it (Snowflake's default session zone is "
                        "America/Los_Angeles)",
                    )
                )
            if null_policy is not None:
                cursor_lines.append(
                    Line(key="null_policy", value=null_policy, why="NULL-cursor rows are re-read every run and merge")
                )
            lines.append(Line(key="cursor", value=None, children=tuple(cursor_lines)))

    # No cursor: a stream where change tracking is on and a key exists, else reloads on change.
    if cursor_col is None:
        if t.kind is ObjectKind.TABLE and t.change_tracking and key:
            stream = f"{source.rsplit('.', 1)[0]}.{t.name}{STREAM_SUFFIX}"
            lines.append(
                Line(
                    key="stream",
                    value=None,
                    children=(
                        Line(key="name", value=stream, why="no cursor column, change tracking is ON: capture changes"),
                        Line(key="create", value=True, why="CREATE STREAM IF NOT EXISTS on the first run"),
                    ),
                )
            )
        elif t.kind is ObjectKind.TABLE:
            notes.append(
                "no cursor: each run reloads the whole table when its LAST_ALTERED, ROW_COUNT or BYTES moved, "
                "and skips it otherwise"
                + ("" if t.change_tracking is None else "; change tracking is OFF (with it and a key: a stream)")
            )
        else:
            notes.append(
                f"no cursor: a {t.table_type.lower()}'s LAST_ALTERED follows its DDL, not its rows, so every run "
                "reloads it in full"
            )
            lines.append(Line(key="schedule", value="@daily", why="a full reload every run: daily, not hourly"))

    # How rows land.
    incremental = any(ln.key in ("cursor", "stream") for ln in lines)
    if incremental and key:
        lines.append(Line(key="write_mode", value="merge", why="rows with a key replace their earlier versions"))
        lines.append(
            Line(
                key="merge_strategy",
                value="merge_on_read",
                why="position deletes: cost follows the change (copy_on_write for readers without delete files)",
            )
        )
    elif incremental:
        lines.append(Line(key="write_mode", value="append", why="no key: an updated row is appended as a new version"))

    # Types.
    wide = [c for c in t.columns if c.wide_integer]
    beyond = set(profile.beyond_long) if profile is not None else set()
    longs = [c for c in wide if c.name not in beyond and config_identifier(c.name) is not None]
    if longs:
        checked = "profiled within range" if profile is not None else "not profiled"
        lines.append(
            Line(
                key="number_as_long",
                value=[config_identifier(c.name) for c in longs],
                why=f"NUMBER(p>=19,0) as long, each value range-checked (beyond 64 bits fails the run); {checked}",
            )
        )
    for c in wide:
        if c.name in beyond:
            notes.append(f"{c.name} {c.type_text} holds values beyond 64 bits: kept as decimal({c.precision},0)")
    nanos = [c for c in t.columns if c.sub_microsecond]
    if nanos:
        shown = ", ".join(f"{c.name} {c.type_text}" for c in nanos[:4]) + (" …" if len(nanos) > 4 else "")
        lines.append(
            Line(
                key="timestamp_nanos",
                value="error",
                why=f"{shown}: a value with nanoseconds fails the run; truncate (lossy) drops them",
            )
        )

    # Size.
    if rows is not None and cursor_col is not None and rows >= SCALE_OUT_ROWS:
        per = _slice_rows(rows)
        lines.append(Line(key="scale_out", value=True, why=f"{rows:,} rows: first load and catch-ups as mapped slices"))
        lines.append(Line(key="max_rows_per_slice", value=per, why=f"about {-(-rows // per)} slices on the first load"))
        lines.append(
            Line(
                key="max_parallel_slices",
                value=MAX_PARALLEL_SLICES,
                why="slice queries at once on the warehouse",
            )
        )
    elif rows is not None and cursor_col is None and t.kind is ObjectKind.TABLE and rows >= SCALE_OUT_ROWS:
        notes.append(f"{rows:,} rows without a cursor: every reload reads them all (a cursor or a stream reads less)")
    cursor_kind = cursor_col.cursor_kind if cursor_col is not None else None
    if rows is not None and cursor_col is not None and cursor_kind is not None and cursor_kind.is_time:
        if rows >= PARTITION_ROWS:
            transform = "day" if rows >= DAY_PARTITION_ROWS else "month"
            col = config_identifier(cursor_col.name)
            lines.append(
                Line(
                    key="partition_by",
                    value=[f"{transform}({col})"],
                    why=f"{rows:,} rows: {transform} partitions of the cursor keep reads by time small",
                )
            )
    return Proposal(table=t, name=name, lines=tuple(lines), notes=tuple(notes))


# ---------------------------------------------------------------------------------------------- rendering


def yaml_scalar(value: Any) -> str:
    """``value`` as one line of YAML flow style (PyYAML's emitter decides what needs quotes)."""
    import yaml

    text: str = yaml.safe_dump(value, default_flow_style=True, width=1_000_000, sort_keys=False)
    text = text.strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    elif text.endswith("..."):
        text = text[:-3].rstrip()
    return text


def _comment(why: str | None) -> str:
    return "" if not why else "  # " + " ".join(why.split())


def render_entry(p: Proposal, *, dash_indent: int, key_indent: int) -> str:
    """The entry as block YAML: ``- name: …`` at ``dash_indent``, its keys at ``key_indent``, comments after values."""
    dash = " " * dash_indent
    pad = " " * key_indent
    out = []
    for i, ln in enumerate(p.lines):
        lead = dash + "- " + " " * (key_indent - dash_indent - 2) if i == 0 else pad
        if ln.children:
            out.append(f"{lead}{ln.key}:{_comment(ln.why)}")
            for c in ln.children:
                out.append(f"{pad}  {c.key}: {yaml_scalar(c.value)}{_comment(c.why)}")
        else:
            out.append(f"{lead}{ln.key}: {yaml_scalar(ln.value)}{_comment(ln.why)}")
        if i == 0:
            out.extend(f"{pad}# {' '.join(n.split())}" for n in p.notes)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- the file


@dataclass(frozen=True, kw_only=True)
class ExistingEntry:
    """What discovery needs of an entry already in the file (read without validating it)."""

    name: str | None
    target: str | None
    source_table: str | None
    staging_table: str | None
    signature: str | None  # from the entry's ``discovered:`` comment, when discovery wrote it


_DISCOVERED = re.compile(r"#\s*discovered:\s*(\S+)\s*\(.*?\),\s*columns\s+([0-9a-f]{12})")
# A comment line that keeps a table out of every later discovery run: ``# snowberg discover: ignore DB.S.TABLE``
# (a table whose entry a person deleted would otherwise come back as new).
_IGNORE = re.compile(r"^\s*#\s*snowberg discover:\s*ignore\s+(\S+)\s*$", re.MULTILINE)


def ignored_tables(text: str) -> set[str]:
    """The tables the file's ``# snowberg discover: ignore DB.S.TABLE`` lines keep out, as written."""
    return {m.group(1) for m in _IGNORE.finditer(text)}


def _load(text: str) -> Any:
    """The parsed config text (None when empty); a syntax error is the person's to fix, named as such."""
    import yaml

    try:
        return yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise DiscoveryError(f"the tables config is not valid YAML: {' '.join(str(exc).split())}") from None


def existing_entries(text: str) -> list[ExistingEntry]:
    """The entries of a tables config's text (raw, not validated) and the column signatures discovery left."""

    data = _load(text)
    raw = data.get("tables") if isinstance(data, dict) else None
    signatures = {m.group(1).upper(): m.group(2) for m in _DISCOVERED.finditer(text)}
    out = []
    for e in raw if isinstance(raw, list) else []:
        if not isinstance(e, dict):
            continue
        src = e.get("source")
        table = src.get("table") if isinstance(src, dict) and isinstance(src.get("table"), str) else None
        stream = e.get("stream")
        staging = stream.get("staging_table") if isinstance(stream, dict) else None
        out.append(
            ExistingEntry(
                name=e.get("name") if isinstance(e.get("name"), str) else None,
                target=e.get("target") if isinstance(e.get("target"), str) else None,
                source_table=table,
                staging_table=staging if isinstance(staging, str) else None,
                signature=signatures.get(table.upper()) if table else None,
            )
        )
    return out


def existing_defaults(text: str) -> dict[str, Any]:
    """The file's ``defaults`` mapping (raw), which the DAG files merge into every entry, new ones included."""

    data = _load(text)
    defaults = data.get("defaults") if isinstance(data, dict) else None
    return defaults if isinstance(defaults, dict) else {}


def pool_name(conn_id: str) -> str:
    """The pool ``discover`` proposes for the tables of one Snowflake connection."""
    return f"snowberg_{conn_id}"


def same_object(config_ref: str, t: DiscoveredTable) -> bool:
    """Whether ``source.table`` text names ``t`` (each part as ``quote_identifier`` would resolve it)."""
    parts = config_ref.split(".")
    if len(parts) != 3:
        return False
    resolved = [p.upper() if p == p.lower() else p for p in parts]
    return resolved == [t.database, t.schema, t.name]


def snowberg_owned(name: str, entries: Iterable[ExistingEntry]) -> bool:
    """Tables snowberg itself creates beside the sources (stream staging tables, a sync's state table)."""
    upper = name.upper()
    if upper.endswith(STAGING_SUFFIX) or upper == "SNOWBERG_SYNC_STATE":
        return True
    return any(e.staging_table and e.staging_table.split(".")[-1].upper() == upper for e in entries)


@dataclass(kw_only=True)
class Plan:
    """What a discovery run does to the file: the entries it adds and what it reports."""

    added: list[Proposal] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # tables already configured (their entries untouched)
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (entry name, source) gone from Snowflake
    renamed: list[tuple[str, str, str]] = field(default_factory=list)  # (entry name, old source, new table)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (table, why)


def plan_discovery(
    tables: Sequence[DiscoveredTable],
    *,
    database: str,
    schema: str,
    existing: Sequence[ExistingEntry],
    selected: Iterable[str],
    namespace: str,
    conn_id: str | None = None,
    pool: str | None = None,
    profiles: Mapping[str, Profile] | None = None,
    ignored: Iterable[str] = (),
) -> Plan:
    """Which of ``tables`` (the whole schema) get a new entry, and which configured sources are gone or renamed.

    ``selected`` names the tables ``--include``/``--exclude`` kept, ``ignored`` the ``source.table`` texts of
    the config's ``# snowberg discover: ignore`` lines. A table already named by an entry's
    ``source.table`` keeps its entry untouched; an entry whose source lies in this schema but is gone is
    reported as dropped, or as renamed when a new table has the columns its ``discovered:`` comment
    recorded (that new table then gets no entry: the person points the old entry at it, keeping its lake
    table, or deletes the old entry and runs discovery again).
    """
    validate_iceberg_identifier(namespace, "namespace")
    plan = Plan()
    chosen = set(selected)
    names = {e.name for e in existing if e.name} | {e.target.split(".")[-1] for e in existing if e.target}
    targets = {e.target for e in existing if e.target}
    in_schema = [
        e
        for e in existing
        if e.source_table
        and len(e.source_table.split(".")) == 3
        and [p.upper() if p == p.lower() else p for p in e.source_table.split(".")[:2]] == [database, schema]
    ]
    gone = [e for e in in_schema if not any(same_object(e.source_table or "", t) for t in tables)]
    by_signature = {e.signature: e for e in gone if e.signature}
    for t in tables:
        if t.name not in chosen:
            continue
        if any(e.source_table and same_object(e.source_table, t) for e in existing):
            plan.kept.append(t.ref)
            continue
        if any(same_object(ref, t) for ref in ignored):
            plan.skipped.append((t.ref, "ignored by a '# snowberg discover: ignore' line of the config"))
            continue
        if snowberg_owned(t.name, existing):
            plan.skipped.append((t.ref, "created by snowberg (stream staging or sync state)"))
            continue
        if table_ref_text(t) is None:
            plan.skipped.append((t.ref, "its name is not a plain upper- or mixed-case identifier the config can name"))
            continue
        if not t.columns:
            plan.skipped.append((t.ref, "no columns visible to this role"))
            continue
        old = by_signature.get(t.signature)
        if old is not None:
            plan.renamed.append((old.name or "?", old.source_table or "?", t.ref))
            gone.remove(old)
            del by_signature[t.signature]
            continue
        name = entry_name(t.name)
        if name in names or f"{namespace}.{name}" in targets:
            name = entry_name(t.name, prefix=f"{t.schema}_")
        if name in names or f"{namespace}.{name}" in targets:
            plan.skipped.append((t.ref, f"entry name {name!r} or target {namespace}.{name} is taken"))
            continue
        names.add(name)
        targets.add(f"{namespace}.{name}")
        profile = (profiles or {}).get(t.name)
        plan.added.append(propose(t, name=name, namespace=namespace, conn_id=conn_id, pool=pool, profile=profile))
    plan.dropped = [(e.name or "?", e.source_table or "?") for e in gone]
    return plan


HEADER = (
    "# Written by `snowberg discover`: review every entry (each value says why it was chosen), then\n"
    "# `snowberg validate`. A later discovery run only appends new tables; it never changes an entry.\n"
    "tables:\n"
)


def append_entries(text: str, proposals: Sequence[Proposal]) -> str:
    """``text`` with ``proposals`` appended at the end of its ``tables:`` list; every existing byte kept.

    The end of the list is found from PyYAML's node positions: the new entries go on the line after the
    last line of the last entry's content (so comments and keys after the list stay where they were),
    indented as the first entry is.
    """
    import yaml

    if not proposals:
        return text
    if not text.strip():
        return HEADER + "".join(render_entry(p, dash_indent=2, key_indent=4) for p in proposals)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise DiscoveryError(f"the tables config is not valid YAML: {exc}") from None
    if not isinstance(root, yaml.MappingNode):
        raise DiscoveryError("the tables config is not a mapping with a 'tables:' list")
    value = next((v for k, v in root.value if isinstance(k, yaml.ScalarNode) and k.value == "tables"), None)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    if value is None:
        block = "tables:\n" + "".join(render_entry(p, dash_indent=2, key_indent=4) for p in proposals)
        return "".join(lines) + block
    if isinstance(value, yaml.ScalarNode) and value.tag.endswith(":null"):
        # `tables:` with nothing after it but a comment: the entries go on the lines right after the key.
        rest = text.splitlines()[value.start_mark.line][value.start_mark.column :]
        if rest.strip() and not rest.strip().startswith("#"):
            raise DiscoveryError("'tables:' is followed by a value on its line: write the list in block style")
        at = value.start_mark.line + 1
        block = "".join(render_entry(p, dash_indent=2, key_indent=4) for p in proposals)
        return "".join(lines[:at]) + block + "".join(lines[at:])
    if not isinstance(value, yaml.SequenceNode) or value.flow_style:
        raise DiscoveryError(
            "'tables:' is not a block list ('- name: …' per line): discovery appends entries as text, "
            "so it cannot add to a flow-style list; rewrite it in block style"
        )
    if not value.value:
        raise DiscoveryError("'tables:' is an empty list: remove the [] and run discovery again")
    first = value.value[0]
    dash_indent = value.start_mark.column
    key_indent = (
        first.start_mark.column if isinstance(first, yaml.MappingNode) and not first.flow_style else dash_indent + 2
    )
    if key_indent <= dash_indent + 1:
        key_indent = dash_indent + 2
    last_line = _last_content_line(value.value[-1])
    at = last_line + 1
    block = "".join(render_entry(p, dash_indent=dash_indent, key_indent=key_indent) for p in proposals)
    return "".join(lines[:at]) + block + "".join(lines[at:])


def _last_content_line(node: Any) -> int:
    """The 0-based line holding the last character of ``node``'s content (a block scalar's last text line)."""
    import yaml

    if isinstance(node, yaml.ScalarNode):
        end = node.end_mark
        # A block scalar (| or >) ends after its last newline: its content's last line is the one before.
        return end.line - 1 if end.column == 0 and end.line > node.start_mark.line else end.line
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        if node.flow_style or not node.value:
            return int(node.end_mark.line)
        children = [c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode) else node.value
        return max(_last_content_line(c) for c in children)
    return int(node.end_mark.line)


def check_written(text: str, proposals: Sequence[Proposal], *, source: str) -> None:
    """Refuse to write a file in which a proposed entry would not validate, or would read back differently.

    The file's ``defaults`` are merged into the new entries as the DAG files will merge them; an entry
    that breaks only with them is refused too, naming the problem (never a file that validates worse).
    """
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DiscoveryError(f"{source}: the appended text is not valid YAML ({exc}): nothing written") from None
    raw = {e.get("name"): e for e in data.get("tables", []) if isinstance(e, dict)}
    for p in proposals:
        if raw.get(p.name) != p.as_dict():
            raise DiscoveryError(f"{source}: entry {p.name!r} reads back differently from what was proposed")
    try:
        isolated = parse_config_isolated(data, source=source)
    except ConfigError as exc:
        raise DiscoveryError(f"{exc}: nothing written") from None
    broken = {b.name: b.error for b in isolated.broken}
    bad = [broken[p.name] for p in proposals if p.name in broken]
    if bad:
        raise DiscoveryError("a proposed entry does not validate: " + "; ".join(bad) + ": nothing written")
