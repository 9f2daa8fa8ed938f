"""A test double for Snowflake Streams and CHANGES on top of the fakesnow emulator.

fakesnow has tables and transactions but no streams and no CHANGES clause.
``StreamDouble`` wraps a real ``snowflake.connector`` connection to a fakesnow
server and sits between the code under test and that connection: the code
sends exactly the SQL it sends to Snowflake, and the double rewrites the
stream-specific statements into plain SQL on bookkeeping tables it keeps in
the same database, so every rewrite runs in the caller's transaction.

What it reproduces, because the exactly-once logic depends on it:

* a stream's offset moves only when DML that reads the stream commits
  (the offset update runs in the same transaction as the caller's
  ``INSERT … SELECT … FROM stream``; ROLLBACK or a dead session undoes both);
* a bare SELECT on a stream consumes nothing;
* a stream returns the net change per row between its offset and the
  transaction's snapshot (repeatable read): updates as DELETE + INSERT pairs
  with ``METADATA$ISUPDATE = TRUE``; APPEND_ONLY streams return inserts only;
  ``SHOW_INITIAL_ROWS = TRUE`` returns the table's rows on the first read;
* ``SHOW STREAMS`` rows with ``stale``/``stale_after``/``mode``/``created_on``;
  a stale stream cannot be read;
* ``CHANGES(INFORMATION => …) AT(TIMESTAMP => …) END(TIMESTAMP => …)`` on a
  table with change tracking, from per-statement table versions;
* ``SYSTEM$STREAM_HAS_DATA('<stream>')``: whether the stream would return
  rows; on an empty stream the call moves ``stale_after`` on (shaped from
  Snowflake's documentation of the function, not recorded from Snowflake).

Where it differs from Snowflake (documented, not relied on): row identity is
the table's key given to the double (Snowflake uses a hidden row id), so a
delete and re-insert of the same key in one window shows as an update; rows
are versioned per DML statement (full copies; fine for test-sized tables).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import snowflake.connector.errors as sf_errors

SCHEMA = "_SNOWBERG_DOUBLE"
_NAME = r'(?:"[^"]+"|[A-Za-z_][\w$]*)'
_QNAME = rf"{_NAME}(?:\s*\.\s*{_NAME}){{0,2}}"

_CREATE_STREAM = re.compile(
    rf"^CREATE\s+(?P<replace>OR\s+REPLACE\s+)?STREAM\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?(?P<name>{_QNAME})\s+"
    rf"ON\s+TABLE\s+(?P<table>{_QNAME})(?P<opts>.*)$",
    re.I | re.S,
)
_DROP_STREAM = re.compile(rf"^DROP\s+STREAM\s+(?P<ie>IF\s+EXISTS\s+)?(?P<name>{_QNAME})\s*$", re.I)
_SHOW = re.compile(
    r"^SHOW\s+(?:TERSE\s+)?STREAMS(?:\s+LIKE\s+(?P<like>'[^']*'|%\(\w+\)s))?"
    rf"(?:\s+IN\s+(?:(?P<account>ACCOUNT)|DATABASE\s+(?P<db>{_NAME})|(?:SCHEMA\s+)?(?P<sch>{_QNAME})))?\s*$",
    re.I,
)
_CHANGE_TRACKING = re.compile(rf"^ALTER\s+TABLE\s+(?P<table>{_QNAME})\s+SET\s+CHANGE_TRACKING\s*=\s*TRUE\s*$", re.I)
_DML = re.compile(
    rf"^(?:INSERT\s+(?:OVERWRITE\s+)?INTO|UPDATE|DELETE\s+FROM|MERGE\s+INTO|TRUNCATE\s+(?:TABLE\s+)?(?:IF\s+EXISTS\s+)?)"
    rf"\s*(?P<table>{_QNAME})",
    re.I,
)
_CHANGES = re.compile(rf"(?P<table>{_QNAME})\s+CHANGES\s*\(", re.I)
# Snowflake's INFORMATION_SCHEMA.POLICY_REFERENCES table function: no policy in the emulator, so no row.
_POLICY_REFERENCES = re.compile(r"INFORMATION_SCHEMA\.POLICY_REFERENCES\s*\(", re.I)
_POLICY_COLUMNS = ("POLICY_DB", "POLICY_SCHEMA", "POLICY_NAME", "POLICY_KIND", "REF_COLUMN_NAME", "TAG_NAME")
_HAS_DATA = re.compile(r"SYSTEM\$STREAM_HAS_DATA\s*\(\s*(?:'(?P<lit>(?:[^']|'')*)'|%\((?P<bind>\w+)\)s)\s*\)", re.I)


class StreamDoubleError(sf_errors.ProgrammingError):
    pass


def _parts(text: str) -> list[str]:
    out = []
    for p in re.findall(_NAME, text):
        out.append(p[1:-1] if p.startswith('"') else p.upper())
    return out


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _qi(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


@dataclass(frozen=True)
class Tracked:
    name: str  # DB.SCH.T
    keys: list[str]
    columns: list[str]

    @property
    def hist(self) -> str:
        return f"{_qi(self.name.split('.')[0])}.{_qi(SCHEMA)}.{_qi('H_' + self.name.replace('.', '__'))}"

    @property
    def appends(self) -> str:
        return f"{_qi(self.name.split('.')[0])}.{_qi(SCHEMA)}.{_qi('A_' + self.name.replace('.', '__'))}"

    @property
    def quoted(self) -> str:
        return ".".join(_qi(p) for p in self.name.split("."))


class StreamDouble:
    """A connection wrapper: ``.cursor()`` returns a cursor that understands streams."""

    def __init__(
        self,
        conn: Any,
        *,
        database: str,
        keys: dict[str, Sequence[str]] | None = None,
        retention: timedelta = timedelta(days=14),
    ) -> None:
        self.conn = conn
        self.database = database.upper()
        self.keys = {k.upper(): [c.upper() for c in v] for k, v in (keys or {}).items()}
        self.retention = retention
        self.in_txn = False
        self._install()

    # -- connection API -------------------------------------------------------------------------------
    def cursor(self) -> DoubleCursor:
        return DoubleCursor(self)

    def close(self) -> None:
        self.conn.close()

    def commit(self) -> None:
        self.conn.commit()

    def rollback(self) -> None:
        self.conn.rollback()

    # -- bookkeeping ----------------------------------------------------------------------------------
    @property
    def meta(self) -> str:
        return f"{_qi(self.database)}.{_qi(SCHEMA)}"

    def _raw(self, sql: str, params: Any = None) -> Any:
        cur = self.conn.cursor()
        cur.execute(sql, params)
        return cur

    def _install(self) -> None:
        db, sch = self.conn.database, self.conn.schema
        self._raw(f"CREATE SCHEMA IF NOT EXISTS {self.meta}")
        self._raw(
            f"CREATE TABLE IF NOT EXISTS {self.meta}.STREAMS (NAME VARCHAR, DATABASE_NAME VARCHAR, "
            "SCHEMA_NAME VARCHAR, "
            "STREAM_NAME VARCHAR, TABLE_NAME VARCHAR, MODE VARCHAR, OFFSET_VERSION NUMBER(38,0), "
            "INITIAL_PENDING BOOLEAN, CREATED_ON TIMESTAMP_LTZ, STALE_AFTER TIMESTAMP_LTZ, STALE BOOLEAN, "
            "COMMENT VARCHAR)"
        )
        self._raw(
            f"CREATE TABLE IF NOT EXISTS {self.meta}.VERSIONS (TABLE_NAME VARCHAR, VERSION NUMBER(38,0), "
            "VERSION_AT TIMESTAMP_LTZ)"
        )
        self._raw(f"CREATE TABLE IF NOT EXISTS {self.meta}.TRACKED (TABLE_NAME VARCHAR, KEYS VARCHAR, COLS VARCHAR)")
        if db and sch:  # CREATE SCHEMA switched the session's schema: put it back
            self._raw(f"USE SCHEMA {_qi(db.upper())}.{_qi(sch.upper())}")

    def fq(self, text: str) -> str:
        parts = _parts(text)
        if len(parts) == 3:
            return ".".join(parts)
        if len(parts) == 2:
            return ".".join([(self.conn.database or "").upper(), *parts])
        return ".".join([(self.conn.database or "").upper(), (self.conn.schema or "").upper(), *parts])

    def tracked(self, table: str) -> Tracked | None:
        row = self._raw(f"SELECT KEYS, COLS FROM {self.meta}.TRACKED WHERE TABLE_NAME = %(t)s", {"t": table}).fetchone()
        if row is None:
            return None
        return Tracked(table, row[0].split(","), row[1].split(","))

    def streams(self) -> list[dict[str, Any]]:
        cur = self._raw(f"SELECT * FROM {self.meta}.STREAMS")
        names = [d[0].upper() for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def _txn(self, fn: Any) -> Any:
        """Run ``fn`` in the caller's transaction, or in one of its own (autocommit statement)."""
        if self.in_txn:
            return fn()
        self._raw("BEGIN")
        try:
            out = fn()
        except BaseException:
            self._raw("ROLLBACK")
            raise
        self._raw("COMMIT")
        return out

    def track(self, table: str) -> Tracked:
        t = self.tracked(table)
        if t is not None:
            return t
        cols = [
            d[0] for d in self._raw(f"SELECT * FROM {'.'.join(_qi(p) for p in table.split('.'))} LIMIT 0").description
        ]
        keys = self.keys.get(table) or cols
        t = Tracked(table, keys, cols)
        self._raw(
            f"CREATE TABLE IF NOT EXISTS {t.hist} AS SELECT CAST(0 AS NUMBER(38,0)) AS SNOWBERG_V, * "
            f"FROM {t.quoted} WHERE 1 = 0"
        )
        self._raw(
            f"CREATE TABLE IF NOT EXISTS {t.appends} AS SELECT CAST(0 AS NUMBER(38,0)) AS SNOWBERG_V, * "
            f"FROM {t.quoted} WHERE 1 = 0"
        )
        self._raw(
            f"INSERT INTO {self.meta}.TRACKED VALUES (%(t)s, %(k)s, %(c)s)",
            {"t": table, "k": ",".join(keys), "c": ",".join(cols)},
        )
        self._txn(lambda: self.snapshot(t))
        return t

    def snapshot(self, t: Tracked) -> int:
        """Record the table's current rows as a new version (inside the current transaction)."""
        cols = ", ".join(_qi(c) for c in t.columns)
        (v,) = self._raw(
            f"SELECT COALESCE(MAX(VERSION), 0) + 1 FROM {self.meta}.VERSIONS WHERE TABLE_NAME = %(t)s", {"t": t.name}
        ).fetchone()
        v = int(v)
        self._raw(f"INSERT INTO {self.meta}.VERSIONS VALUES (%(t)s, %(v)s, CURRENT_TIMESTAMP())", {"t": t.name, "v": v})
        self._raw(f"INSERT INTO {t.hist} (SNOWBERG_V, {cols}) SELECT {v}, {cols} FROM {t.quoted}")
        on = " AND ".join(f"p.{_qi(k)} = n.{_qi(k)}" for k in t.keys)
        self._raw(
            f"INSERT INTO {t.appends} (SNOWBERG_V, {cols}) SELECT {v}, {', '.join('n.' + _qi(c) for c in t.columns)} "
            f"FROM {t.quoted} AS n WHERE NOT EXISTS (SELECT 1 FROM {t.hist} AS p WHERE p.SNOWBERG_V = {v - 1} "
            f"AND {on})"
        )
        return v

    def current_version(self, table: str) -> int:
        (v,) = self._raw(
            f"SELECT COALESCE(MAX(VERSION), 0) FROM {self.meta}.VERSIONS WHERE TABLE_NAME = %(t)s", {"t": table}
        ).fetchone()
        return int(v)

    # -- test controls --------------------------------------------------------------------------------
    def set_stale_after(self, stream: str, when: Any) -> None:
        self._raw(
            f"UPDATE {self.meta}.STREAMS SET STALE_AFTER = %(w)s WHERE NAME = %(n)s", {"w": when, "n": self.fq(stream)}
        )

    def make_stale(self, stream: str) -> None:
        self._raw(f"UPDATE {self.meta}.STREAMS SET STALE = TRUE WHERE NAME = %(n)s", {"n": self.fq(stream)})

    def offset(self, stream: str) -> tuple[int, bool]:
        row = self._raw(
            f"SELECT OFFSET_VERSION, INITIAL_PENDING FROM {self.meta}.STREAMS WHERE NAME = %(n)s",
            {"n": self.fq(stream)},
        ).fetchone()
        return int(row[0]), bool(row[1])

    # -- SQL generation -------------------------------------------------------------------------------
    def _diff(self, t: Tracked, old_version: str, new_rows: str) -> str:
        cols = ", ".join(_qi(c) for c in t.columns)
        old = f"(SELECT {cols} FROM {t.hist} WHERE SNOWBERG_V = {old_version})"

        def side(action: str, a: str, b: str) -> str:
            keys = ", ".join(_qi(k) for k in t.keys)
            on = " AND ".join(f"x.{_qi(k)} = o.{_qi(k)}" for k in t.keys)
            rowid = " || '|' || ".join(f"COALESCE(CAST(x.{_qi(k)} AS VARCHAR), '')" for k in t.keys)
            xcols = ", ".join(f"x.{_qi(c)}" for c in t.columns)
            return (
                f"SELECT {xcols}, '{action}' AS \"METADATA$ACTION\", (o.{_qi(t.keys[0])} IS NOT NULL) AS "
                f'"METADATA$ISUPDATE", \'row:\' || {rowid} AS "METADATA$ROW_ID" '
                f"FROM (SELECT {cols} FROM {a} AS a1 EXCEPT SELECT {cols} FROM {b} AS b1) AS x "
                f"LEFT JOIN (SELECT DISTINCT {keys} FROM {b} AS b2) AS o ON {on}"
            )

        return f"(SELECT * FROM ({side('INSERT', new_rows, old)} UNION ALL {side('DELETE', old, new_rows)}) AS d)"

    def _appended(self, t: Tracked, low: str, high: str | None, initial_version: str | None) -> str:
        cols = ", ".join(_qi(c) for c in t.columns)
        rowid = " || '|' || ".join(f"COALESCE(CAST({_qi(k)} AS VARCHAR), '')" for k in t.keys)
        meta = (
            f'\'INSERT\' AS "METADATA$ACTION", FALSE AS "METADATA$ISUPDATE", \'row:\' || {rowid} AS "METADATA$ROW_ID"'
        )
        upper = f" AND SNOWBERG_V <= {high}" if high else ""
        parts = [f"SELECT {cols}, {meta} FROM {t.appends} WHERE SNOWBERG_V > {low}{upper}"]
        if initial_version is not None:
            parts.insert(0, f"SELECT {cols}, {meta} FROM {t.hist} WHERE SNOWBERG_V = {initial_version}")
        return f"(SELECT * FROM ({' UNION ALL '.join(parts)}) AS d)"

    def stream_rows_sql(self, s: dict[str, Any]) -> str:
        t = self.tracked(s["TABLE_NAME"])
        if t is None:
            raise StreamDoubleError(msg=f"base table of stream {s['NAME']} is not tracked", errno=2003)
        offset, initial = int(s["OFFSET_VERSION"]), bool(s["INITIAL_PENDING"])
        if s["MODE"] == "APPEND_ONLY":
            return self._appended(t, str(offset), None, str(offset) if initial else None)
        return self._diff(t, "-1" if initial else str(offset), f"(SELECT * FROM {t.quoted})")


def _balanced(sql: str, start: int) -> int:
    """Index just past the parenthesis group opening at ``sql[start] == '('``."""
    depth = 0
    i = start
    quote = False
    while i < len(sql):
        ch = sql[i]
        if ch == "'":
            quote = not quote
        elif not quote and ch == "(":
            depth += 1
        elif not quote and ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise StreamDoubleError(msg="unbalanced parentheses", errno=1003)


class DoubleCursor:
    def __init__(self, double: StreamDouble) -> None:
        self.d = double
        self.cur = double.conn.cursor()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cur, name)

    def close(self) -> None:
        self.cur.close()

    def execute(self, sql: str, params: Any = None, **kwargs: Any) -> DoubleCursor:
        text = sql.strip().rstrip(";").strip()
        up = text.upper()
        d = self.d
        if re.match(r"^(BEGIN|START\s+TRANSACTION)\b", up):
            self.cur.execute(text)
            d.in_txn = True
            return self
        if re.match(r"^(COMMIT|ROLLBACK)\b", up):
            self.cur.execute(text)
            d.in_txn = False
            return self
        if m := _CREATE_STREAM.match(text):
            return self._create_stream(m)
        if m := _DROP_STREAM.match(text):
            d._raw(f"DELETE FROM {d.meta}.STREAMS WHERE NAME = %(n)s", {"n": d.fq(m["name"])})
            return self._status("Statement executed successfully.")
        if m := _SHOW.match(text):
            return self._show(m, params)
        if m := _CHANGE_TRACKING.match(text):
            d.track(d.fq(m["table"]))
            return self._status("Statement executed successfully.")
        if _CHANGES.search(text):
            return self._changes(text, params)
        if _HAS_DATA.search(text):
            return self._has_data(text, params)
        if _POLICY_REFERENCES.search(text):
            self.cur.execute(
                "SELECT " + ", ".join(f"CAST(NULL AS VARCHAR) AS {c}" for c in _POLICY_COLUMNS) + " WHERE FALSE"
            )
            return self
        streams = self._referenced_streams(text)
        if streams:
            return self._on_stream(text, params, streams)
        if (m := _DML.match(text)) and (t := d.tracked(d.fq(m["table"]))) is not None:

            def run() -> None:
                self.cur.execute(text, params, **kwargs)
                d.snapshot(t)

            d._txn(run)
            return self
        self.cur.execute(text, params, **kwargs)
        return self

    def _status(self, msg: str) -> DoubleCursor:
        self.cur.execute(f'SELECT {_lit(msg)} AS "status"')
        return self

    def _create_stream(self, m: re.Match[str]) -> DoubleCursor:
        d = self.d
        name, table = d.fq(m["name"]), d.fq(m["table"])
        opts = m["opts"].upper()
        append_only = bool(re.search(r"APPEND_ONLY\s*=\s*TRUE", opts))
        initial = bool(re.search(r"SHOW_INITIAL_ROWS\s*=\s*TRUE", opts))
        exists = any(s["NAME"] == name for s in d.streams())
        if exists and not m["replace"]:
            if m["ine"]:
                return self._status(f"{name.split('.')[-1]} already exists, statement succeeded.")
            raise StreamDoubleError(msg=f"SQL compilation error:\nObject '{name}' already exists.", errno=2002)
        t = d.track(table)
        version = d.current_version(table)
        db, sch, st = name.split(".")

        def run() -> None:
            d._raw(f"DELETE FROM {d.meta}.STREAMS WHERE NAME = %(n)s", {"n": name})
            d._raw(
                f"INSERT INTO {d.meta}.STREAMS SELECT %(n)s, %(db)s, %(sch)s, %(st)s, %(t)s, %(mode)s, %(v)s, "
                f"%(init)s, "
                f"CURRENT_TIMESTAMP(), DATEADD(second, %(ret)s, CURRENT_TIMESTAMP()), FALSE, %(c)s",
                {
                    "n": name,
                    "db": db,
                    "sch": sch,
                    "st": st,
                    "t": t.name,
                    "mode": "APPEND_ONLY" if append_only else "DEFAULT",
                    "v": version,
                    "init": initial,
                    "ret": int(d.retention.total_seconds()),
                    "c": "snowberg change capture",
                },
            )

        d._txn(run)
        return self._status(f"Stream {st} successfully created.")

    def _show(self, m: re.Match[str], params: Any) -> DoubleCursor:
        d = self.d
        where, binds = ["TRUE"], dict(params or {})
        if m["like"]:
            if m["like"].startswith("'"):
                binds["__like"] = m["like"][1:-1].replace("''", "'")
                where.append("STREAM_NAME ILIKE %(__like)s")
            else:
                where.append(f"STREAM_NAME ILIKE {m['like']}")
        if m["db"]:
            binds["__db"] = _parts(m["db"])[0]
            where.append("DATABASE_NAME = %(__db)s")
        if m["sch"]:
            parts = _parts(m["sch"])
            db = parts[0] if len(parts) == 2 else (d.conn.database or "").upper()
            binds["__db"], binds["__sch"] = db, parts[-1]
            where.append("DATABASE_NAME = %(__db)s AND SCHEMA_NAME = %(__sch)s")
        self.cur.execute(
            f'SELECT CREATED_ON AS "created_on", STREAM_NAME AS "name", DATABASE_NAME AS "database_name", '
            f'SCHEMA_NAME AS "schema_name", \'SNOWBERG_TEST\' AS "owner", COMMENT AS "comment", '
            f'TABLE_NAME AS "table_name", \'Table\' AS "source_type", TABLE_NAME AS "base_tables", '
            f"'DELTA' AS \"type\", CASE WHEN STALE OR STALE_AFTER <= CURRENT_TIMESTAMP() THEN 'true' ELSE 'false' END "
            f'AS "stale", MODE AS "mode", STALE_AFTER AS "stale_after", '
            f"CASE WHEN STALE THEN 'stream is stale' ELSE 'N/A' END AS \"invalid_reason\", "
            f"'ROLE' AS \"owner_role_type\" "
            f"FROM {d.meta}.STREAMS WHERE {' AND '.join(where)} ORDER BY DATABASE_NAME, SCHEMA_NAME, STREAM_NAME",
            binds,
        )
        return self

    def _referenced_streams(self, text: str) -> list[dict[str, Any]]:
        if not re.search(r"\bFROM\b|\bJOIN\b|\bUSING\b", text, re.I):
            return []
        found = []
        for s in self.d.streams():
            db, sch, st = s["DATABASE_NAME"], s["SCHEMA_NAME"], s["STREAM_NAME"]
            pat = r"\.".join(rf'(?:"{re.escape(p)}"|\b{re.escape(p)}\b)' for p in (db, sch, st))
            pat = pat.replace(r"\.", r"\s*\.\s*")
            if re.search(pat, text, re.I):
                found.append({**s, "_pattern": pat})
        return found

    def _on_stream(self, text: str, params: Any, streams: list[dict[str, Any]]) -> DoubleCursor:
        d = self.d
        rewritten = text
        for s in streams:
            stale = d._raw(
                f"SELECT STALE OR STALE_AFTER <= CURRENT_TIMESTAMP() FROM {d.meta}.STREAMS WHERE NAME = %(n)s",
                {"n": s["NAME"]},
            ).fetchone()[0]
            if stale:
                raise StreamDoubleError(
                    msg=f"Stream {s['NAME']} has become stale and cannot be read (stream double)", errno=91901
                )
            rewritten = re.sub(s["_pattern"], lambda _m, s=s: d.stream_rows_sql(s), rewritten, flags=re.I)
        consuming = bool(re.match(r"^(INSERT|MERGE|UPDATE|DELETE|CREATE)\b", text, re.I))
        if not consuming:
            self.cur.execute(rewritten, params)
            return self

        def run() -> None:
            self.cur.execute(rewritten, params)
            for s in streams:
                version = d.current_version(s["TABLE_NAME"])
                d._raw(
                    f"UPDATE {d.meta}.STREAMS SET OFFSET_VERSION = %(v)s, INITIAL_PENDING = FALSE, "
                    f"STALE_AFTER = DATEADD(second, %(ret)s, CURRENT_TIMESTAMP()) WHERE NAME = %(n)s",
                    {"v": version, "ret": int(d.retention.total_seconds()), "n": s["NAME"]},
                )

        d._txn(run)
        return self

    def _has_data(self, text: str, params: Any) -> DoubleCursor:
        """``SYSTEM$STREAM_HAS_DATA('<stream>')`` replaced by whether the stream would return rows now.

        As Snowflake documents it: the name is a string (quoted parts inside for case-sensitive names); a
        stream without change data is kept from going stale by the call (its stale_after moves on, as a
        consume moves it). A stale stream cannot be asked (an error, as reading it is).
        """
        d = self.d

        def answer(m: re.Match[str]) -> str:
            name = m["lit"].replace("''", "'") if m["lit"] is not None else str((params or {})[m["bind"]])
            fq = d.fq(name)
            s = next((x for x in d.streams() if x["NAME"] == fq), None)
            if s is None:
                raise StreamDoubleError(msg=f"Stream '{fq}' does not exist or not authorized.", errno=2003)
            stale = d._raw(
                f"SELECT STALE OR STALE_AFTER <= CURRENT_TIMESTAMP() FROM {d.meta}.STREAMS WHERE NAME = %(n)s",
                {"n": fq},
            ).fetchone()[0]
            if stale:
                raise StreamDoubleError(
                    msg=f"Stream {fq} has become stale and cannot be read (stream double)", errno=91901
                )
            (n,) = d._raw(f"SELECT COUNT(*) FROM {d.stream_rows_sql(s)} AS r").fetchone()
            if int(n) == 0:
                d._raw(
                    f"UPDATE {d.meta}.STREAMS SET STALE_AFTER = DATEADD(second, %(ret)s, CURRENT_TIMESTAMP()) "
                    "WHERE NAME = %(n)s",
                    {"ret": int(d.retention.total_seconds()), "n": fq},
                )
            return "TRUE" if int(n) else "FALSE"

        self.cur.execute(_HAS_DATA.sub(answer, text), params)
        return self

    def _changes(self, text: str, params: Any) -> DoubleCursor:
        d = self.d
        m = _CHANGES.search(text)
        assert m is not None
        table = d.fq(m["table"])
        t = d.tracked(table)
        if t is None:
            raise StreamDoubleError(msg=f"Change tracking is not enabled on table {table}", errno=2003)
        ch_open = m.end() - 1
        ch_close = _balanced(text, ch_open)
        info = text[ch_open + 1 : ch_close - 1]
        append_only = "APPEND_ONLY" in info.upper()
        rest = text[ch_close:]
        at = re.match(r"\s*AT\s*\(", rest, re.I)
        if not at:
            raise StreamDoubleError(
                msg="CHANGES needs AT(...) (stream double supports AT(TIMESTAMP => ...))", errno=1003
            )
        at_open = ch_close + at.end() - 1
        at_close = _balanced(text, at_open)
        end_match = re.match(r"\s*END\s*\(", text[at_close:], re.I)
        end_close = at_close
        end_expr = None
        if end_match:
            end_open = at_close + end_match.end() - 1
            end_close = _balanced(text, end_open)
            end_expr = self._ts_expr(text[end_open + 1 : end_close - 1])
        at_expr = self._ts_expr(text[at_open + 1 : at_close - 1])

        def version_at(expr: str) -> str:
            return (
                f"(SELECT COALESCE(MAX(VERSION), -1) FROM {d.meta}.VERSIONS WHERE TABLE_NAME = {_lit(table)} "
                f"AND VERSION_AT <= ({expr}))"
            )

        (n,) = d._raw(
            f"SELECT COUNT(*) FROM {d.meta}.VERSIONS WHERE TABLE_NAME = {_lit(table)} AND VERSION_AT <= ({at_expr})",
            params,
        ).fetchone()
        if not n:
            raise StreamDoubleError(
                msg=f"Change tracking is not enabled or the requested time is outside the retention for {table}",
                errno=707,
            )
        (lo,) = d._raw(f"SELECT {version_at(at_expr)}", params).fetchone()
        hi = None
        if end_expr is not None:
            (hi,) = d._raw(f"SELECT {version_at(end_expr)}", params).fetchone()
        if append_only:
            rows = d._appended(t, str(lo), str(hi) if hi is not None else None, None)
        else:
            cols = ", ".join(_qi(c) for c in t.columns)
            new = (
                f"(SELECT {cols} FROM {t.hist} WHERE SNOWBERG_V = {hi})"
                if hi is not None
                else f"(SELECT * FROM {t.quoted})"
            )
            rows = d._diff(t, str(lo), new)
        rewritten = text[: m.start()] + rows + text[end_close:]
        self.cur.execute(rewritten, params)
        return self

    @staticmethod
    def _ts_expr(inner: str) -> str:
        mm = re.match(r"^\s*TIMESTAMP\s*=>\s*(?P<e>.*)$", inner, re.I | re.S)
        if not mm:
            raise StreamDoubleError(msg=f"stream double supports only TIMESTAMP => …, not {inner!r}", errno=1003)
        return mm["e"]
