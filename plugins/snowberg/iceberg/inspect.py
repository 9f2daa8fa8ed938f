"""Read the past: Iceberg metadata tables and time-travel reads, for people at a terminal and for scripts.

The metadata tables are pyiceberg's own (``Table.inspect``); this module
picks readable columns for the terminal, makes every value JSON-safe for
``--json`` and resolves ``--as-of-snapshot`` / ``--as-of-time`` to a snapshot
(``Table.scan(snapshot_id=…)``), so the CLI stays a thin shell.
"""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, date, datetime, time
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from snowberg.config.run_params import RunParamError, parse_snapshot_id

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table


class MetadataTable(StrEnum):
    """The metadata tables ``snowberg inspect`` shows."""

    SNAPSHOTS = "snapshots"
    HISTORY = "history"
    FILES = "files"
    MANIFESTS = "manifests"
    PARTITIONS = "partitions"
    REFS = "refs"
    STAGING = "staging"  # snowberg's own: the staging folders of mapped slices, and whether each may still commit


# Columns shown in the terminal (``--json`` has all of them).
TERMINAL_COLUMNS: dict[MetadataTable, list[str]] = {
    MetadataTable.SNAPSHOTS: [
        "committed_at",
        "snapshot_id",
        "parent_id",
        "operation",
        "run_id",
        "watermark",
        "rows",
        "partial_of",
    ],
    MetadataTable.HISTORY: ["made_current_at", "snapshot_id", "parent_id", "is_current_ancestor"],
    MetadataTable.FILES: ["content", "file_path", "partition", "record_count", "file_size_in_bytes"],
    MetadataTable.MANIFESTS: [
        "content",
        "path",
        "added_snapshot_id",
        "added_data_files_count",
        "existing_data_files_count",
        "deleted_data_files_count",
    ],
    MetadataTable.PARTITIONS: ["partition", "record_count", "file_count", "total_data_file_size_in_bytes"],
    MetadataTable.REFS: ["name", "type", "snapshot_id"],
    MetadataTable.STAGING: ["run_id", "verdict", "since", "files", "data_files", "bytes", "why"],
}


class InspectError(ValueError):
    """Bad inspect/read arguments (unknown snapshot, unparsable time or filter) or a failed scan; nothing was read."""


def metadata_rows(table: Table, which: MetadataTable | str) -> list[dict[str, Any]]:
    """One metadata table as rows; snapshot summaries become a mapping, with snowberg's state lifted out.

    ``staging`` is snowberg's: one row per staging folder of mapped slices,
    with the table's verdict on whether its run may still commit
    (``iceberg.staging.staged_runs``); an abandoned one is removed by the
    orphan sweep once that is older than the orphan age.

    ``partial_of`` (snapshots): for a snapshot that is not the last of its
    commit (a merge's removal), the commit's last snapshot — the one to roll
    back to or tag; ``"?"`` when that one is gone. ``dag_id``: the DAG whose run
    committed it.
    """
    kind = MetadataTable(which)
    if kind is MetadataTable.STAGING:
        from snowberg.iceberg import staging

        return [r.row() for r in staging.staged_runs(table, list(staging.list_files(table.io, table.location())))]
    rows: list[dict[str, Any]] = getattr(table.inspect, kind.value)().to_pylist()
    for r in rows:  # pyiceberg gives commit times as zone-less epoch timestamps: they are UTC instants
        r.update({k: v.replace(tzinfo=UTC) for k, v in r.items() if isinstance(v, datetime) and v.tzinfo is None})
    if kind is MetadataTable.SNAPSHOTS:
        from snowberg.iceberg import state

        children = state.children_index(table)
        for r in rows:
            summary = dict(r.get("summary") or [])
            r["summary"] = summary
            r["dag_id"] = summary.get(state.DAG_ID)
            r["run_id"] = summary.get(state.RUN_ID)
            r["watermark"] = summary.get(state.WATERMARK)
            r["rows"] = summary.get(state.ROWS)
            r["partial_of"] = None
            snap = table.snapshot_by_id(r["snapshot_id"])
            if snap is not None and state.is_partial(table, snap, children):
                last = state.last_of_commit(table, snap)
                r["partial_of"] = last.snapshot_id if last is not None else "?"
        rows.sort(key=lambda r: r["committed_at"])
    if kind is MetadataTable.HISTORY:
        rows.sort(key=lambda r: r["made_current_at"])
    return rows


def json_safe(value: Any) -> Any:
    """``value`` with what ``json.dumps`` cannot write made text: ISO times, Decimals as strings, base64 bytes.

    Decimals stay strings so no precision is lost. A naive datetime is an Iceberg ``timestamp`` (no zone): it is
    written without an offset, as the wall-clock time it is; a ``timestamptz`` keeps its ``+00:00``.
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def to_json(rows: list[dict[str, Any]]) -> str:
    """The rows as an indented JSON array, every value made JSON-safe (``--json``)."""
    return json.dumps([json_safe(r) for r in rows], indent=2)


def _cell(v: Any, width: int = 60) -> str:
    if v is None:
        return "-"
    if isinstance(v, dict):
        text = ", ".join(f"{k}={_cell(x)}" for k, x in v.items())
    elif isinstance(v, datetime):
        text = v.isoformat(sep=" ")  # every fraction the table holds, and the zone only where it has one
    else:
        text = str(v)
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def render_rows(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """A plain aligned text table (long values keep their end: file names matter more than prefixes)."""
    if not rows:
        return "(no rows)"
    cols = columns or list(rows[0].keys())
    cells = [cols] + [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_metadata(rows: list[dict[str, Any]], which: MetadataTable | str) -> str:
    """A metadata table for the terminal: only the readable columns ``TERMINAL_COLUMNS`` picks for it."""
    return render_rows(rows, TERMINAL_COLUMNS[MetadataTable(which)])


def parse_time(text: str) -> int:
    """Milliseconds since the epoch for an ISO timestamp (naive means UTC) or epoch milliseconds.

    Epoch milliseconds are ASCII digits only: ``str.isdigit`` also takes ``²`` and other scripts' digits.
    """
    if re.fullmatch("[0-9]+", text):
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InspectError(f"--as-of-time {text[:80]!r}: use ISO 8601 (2026-11-30T12:00:00Z) or epoch ms") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def snapshot_for(table: Table, *, snapshot_id: int | str | None = None, as_of_time: str | None = None) -> int | None:
    """The snapshot a read sees: the given id (ASCII digits as text, or an int), the one current at a time,
    or main's head (None)."""
    if snapshot_id is not None and as_of_time is not None:
        raise InspectError("give --as-of-snapshot or --as-of-time, not both")
    try:
        snapshot_id = parse_snapshot_id("--as-of-snapshot", snapshot_id)
    except RunParamError as exc:
        raise InspectError(str(exc)) from None
    if snapshot_id is not None:
        if table.snapshot_by_id(snapshot_id) is None:
            raise InspectError(f"snapshot {snapshot_id} is not in the table (expired?)")
        return snapshot_id
    if as_of_time is not None:
        ms = parse_time(as_of_time)
        snap = table.snapshot_as_of_timestamp(ms)
        if snap is None:
            raise InspectError(f"the table has no snapshot at or before {as_of_time[:80]}")
        return snap.snapshot_id
    return None


def read(
    table: Table,
    *,
    snapshot_id: int | str | None = None,
    as_of_time: str | None = None,
    where: str | None = None,
    limit: int | None = None,
) -> pa.Table:
    """Rows of the table (optionally as of a snapshot or time), filtered by a pyiceberg row filter expression."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.expressions.parser import parse
    from pyiceberg.expressions.visitors import bind

    sid = snapshot_for(table, snapshot_id=snapshot_id, as_of_time=as_of_time)
    row_filter: Any = AlwaysTrue()
    if where:
        try:
            row_filter = parse(where)
        except Exception as exc:  # the parser raises pyparsing's exception types
            raise InspectError(f"--where {where[:80]!r} is not a filter expression: {exc}") from None
    if limit is not None and limit < 0:
        raise InspectError("--limit must be positive")
    scan = table.scan(row_filter=row_filter, snapshot_id=sid, limit=limit)
    if where:
        # Bind first so only a filter the schema cannot take (an unknown column, a wrong type) is blamed on --where.
        try:
            bind(scan.projection(), row_filter, case_sensitive=scan.case_sensitive)
        except ValueError as exc:
            raise InspectError(f"--where {where!r}: {str(exc)[:200]}") from None
    try:
        return scan.to_arrow()
    except ValueError as exc:  # e.g. pyarrow's ArrowInvalid for a data file that is not Parquet
        at = f" at snapshot {sid}" if sid is not None else ""
        raise InspectError(f"reading {'.'.join(table.name())}{at} failed: {str(exc)[:200]}") from None
