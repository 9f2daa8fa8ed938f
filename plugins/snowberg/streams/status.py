"""The stream's health from ``SHOW STREAMS``: does it exist, is it stale, when will it be.

A stream goes stale when its offset falls outside the tracked table's data
retention (extended up to ``MAX_DATA_EXTENSION_TIME_IN_DAYS`` while the
stream is unconsumed). A stale stream cannot be read: the changes between
its offset and the retention horizon are gone, so the only recovery is a new
stream and a full refresh of the target. ``STALE_AFTER`` says when that will
happen; each run checks it against the schedule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from snowberg.core.identifiers import TableName
from snowberg.streams.errors import StaleStreamError, StreamGoingStaleError, StreamMissingError
from snowberg.streams.sql import show_stream_sql, stored_name


@dataclass(frozen=True, kw_only=True)
class StreamStatus:
    name: str
    table_name: str | None
    mode: str | None  # DEFAULT | APPEND_ONLY
    stale: bool
    stale_after: datetime | None
    invalid_reason: str | None
    created_on: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stale_after"] = self.stale_after.isoformat() if self.stale_after else None
        d["created_on"] = self.generation
        return d

    @property
    def generation(self) -> str | None:
        """The stream's ``created_on`` as text: a re-created stream is a new generation with a new offset."""
        return self.created_on.isoformat(timespec="microseconds") if self.created_on else None


def _truthy(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("true", "1", "yes", "y", "t")


def _utc(v: Any) -> datetime | None:
    if v is None or v == "":
        return None
    if isinstance(v, str):
        v = datetime.fromisoformat(v.replace("Z", "+00:00"))
    if not isinstance(v, datetime):
        raise TypeError(f"stale_after: expected a timestamp, got {v!r}")
    return (v if v.tzinfo else v.replace(tzinfo=UTC)).astimezone(UTC)


def parse_show_row(row: dict[str, Any]) -> StreamStatus:
    """One ``SHOW STREAMS`` row (column names lower-cased) → ``StreamStatus``."""
    reason = row.get("invalid_reason")
    return StreamStatus(
        name=str(row.get("name")),
        table_name=row.get("table_name"),
        mode=row.get("mode"),
        stale=_truthy(row.get("stale", False)),
        stale_after=_utc(row.get("stale_after")),
        invalid_reason=None if reason in (None, "", "N/A") else str(reason),
        created_on=_utc(row.get("created_on")),
    )


def read_status(conn: Any, stream: TableName) -> StreamStatus | None:
    """The stream's ``SHOW STREAMS`` row, or None when it does not exist."""
    sql, params = show_stream_sql(stream)
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        names = [d[0].lower() for d in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        cur.close()
    want = stored_name(stream.table)
    for row in rows:
        # LIKE treats '_' as a wildcard: keep the exact name only.
        if str(row.get("name")) == want:
            return parse_show_row(row)
    return None


def recovery_hint(stream: TableName) -> str:
    """What to do about a stale stream, for the error and the alert."""
    return (
        f"Recover by triggering the DAG with param recover_stale_stream=true: snowberg re-creates the stream "
        f"(CREATE OR REPLACE STREAM {stream} … SHOW_INITIAL_ROWS = TRUE), drops the staged batches, and replaces "
        "the Iceberg table with the table's current rows in one commit (a full refresh). Changes between the "
        "stale offset and now are not recoverable as individual changes; the refreshed table is correct."
    )


def require_fresh(status: StreamStatus | None, stream: TableName, *, now: datetime | None = None) -> StreamStatus:
    """Stop when the stream is missing or stale; return its status otherwise."""
    if status is None:
        raise StreamMissingError(
            f"stream {stream} does not exist or this role cannot see it (SHOW STREAMS returned nothing). "
            "Create it (or set stream.create: true with on_table) and grant SELECT on it to snowberg's role."
        )
    now = now or datetime.now(UTC)
    if status.stale or (status.stale_after is not None and status.stale_after <= now):
        since = f" since {status.stale_after.isoformat()}" if status.stale_after else ""
        raise StaleStreamError(
            f"stream {stream} is stale{since}: its offset is outside the table's retention. " + recovery_hint(stream)
        )
    if status.invalid_reason:
        raise StaleStreamError(f"stream {stream} is invalid: {status.invalid_reason}. " + recovery_hint(stream))
    return status


def check_margin(
    status: StreamStatus, stream: TableName, *, interval: timedelta, intervals: int, now: datetime | None = None
) -> str:
    """Raise ``StreamGoingStaleError`` when the stream goes stale within ``intervals`` schedule intervals."""
    now = now or datetime.now(UTC)
    require_fresh(status, stream, now=now)
    if status.stale_after is None:
        return f"stream {stream}: no STALE_AFTER reported"
    left = status.stale_after - now
    margin = interval * intervals
    text = f"stream {stream} goes stale at {status.stale_after.isoformat()} (in {left}); alert margin {margin}"
    if left < margin:
        raise StreamGoingStaleError(
            text + f" = {intervals} × schedule interval {interval}. Consume it sooner (run the DAG now, schedule it "
            "more often) or raise the tracked table's DATA_RETENTION_TIME_IN_DAYS / MAX_DATA_EXTENSION_TIME_IN_DAYS. "
            "If it does go stale: " + recovery_hint(stream)
        )
    return text
