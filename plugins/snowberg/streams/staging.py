"""Consume the stream into the staging table, and clean staged batches up.

Consuming is the only step that touches the stream's offset, and it does so
with one ``INSERT INTO staging SELECT … FROM stream`` inside ``BEGIN …
COMMIT``: the offset moves exactly when the staged rows become visible. A
crash before the COMMIT leaves both as they were (Snowflake rolls the
transaction back); a crash after it leaves a staged batch the next load
applies.

Batch ids are numbered above both the staging table's highest batch and the
batch id committed in the Iceberg table, so they only ever grow and "last
wins" across batches is well defined.

A stream generation (its ``created_on``) is recorded with every staged row.
When the stream's generation differs from the one snowberg consumed last,
the stream was (re-)created: with SHOW_INITIAL_ROWS its first read is the
whole table, so that batch is staged as a full refresh (a ``REFRESH`` marker
row) and the load replaces the target. This also makes a recovery that died
half-way safe to re-run with or without the recovery param.

The generation must be known from the first batch on. A stream without
initial rows may stage nothing at first; that batch then gets a
``GENERATION`` marker row, so the load commits the generation to the Iceberg
table like any batch's. Without it neither staging nor the table would hold
a generation, and a re-creation before the first change would go unnoticed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from snowberg.config.stream_settings import StreamSource
from snowberg.config.table_config import ColumnSettings
from snowberg.core import faults
from snowberg.core.identifiers import TableName
from snowberg.mapping.columns import SnowflakeColumn
from snowberg.snowflake.projection import HASH_LENGTH, stored_names
from snowberg.snowflake.source import result_columns
from snowberg.streams import sql as S
from snowberg.streams.errors import StreamConfigError, StreamError
from snowberg.streams.status import StreamStatus, read_status, require_fresh

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ConsumeResult:
    stream: str
    batch_id: int  # the batch this run staged (its rows may be 0)
    rows: int
    refresh: bool  # this batch is a full copy of the table (new stream generation)
    through_batch_id: int  # the load applies staged batches up to here
    committed_batch_id: int  # the Iceberg table's batch id when consumed
    created_stream: bool
    status: dict[str, Any]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def describe(conn: Any, sql_text: str) -> list[SnowflakeColumn]:
    """The result columns of ``sql_text`` as Snowflake describes them."""
    cur = conn.cursor()
    try:
        cur.execute(sql_text)
        return result_columns(cur)
    finally:
        cur.close()


def _scalar(conn: Any, sql_text: str, params: dict[str, Any] | None = None) -> Any:
    cur = conn.cursor()
    try:
        cur.execute(sql_text, params or {})
        row = cur.fetchone()
        return None if row is None else row[0]
    finally:
        cur.close()


def _execute(conn: Any, sql_text: str, params: dict[str, Any] | None = None) -> int:
    cur = conn.cursor()
    try:
        cur.execute(sql_text, params or {})
        return int(cur.rowcount or 0)
    finally:
        cur.close()


def stream_columns(conn: Any, stream: TableName) -> list[SnowflakeColumn]:
    """The tracked table's columns as the stream returns them (metadata columns dropped)."""
    cols = [c for c in describe(conn, S.describe_stream_sql(stream)) if c.name.upper() not in S.STREAM_METADATA]
    S.check_columns(cols)
    return cols


def staged_columns(columns: list[SnowflakeColumn], settings: ColumnSettings) -> tuple[list[SnowflakeColumn], set[str]]:
    """The stream's columns as staged: ``columns.exclude`` left out, ``columns.hash`` as 64-character text.

    Also the stored names of the hashed ones (``consume_sql`` hashes them in its SELECT).
    """
    excluded, hashed = stored_names(settings.exclude), stored_names(settings.hash)
    out = [
        replace(c, type="TEXT", length=HASH_LENGTH, precision=None, scale=None) if c.name in hashed else c
        for c in columns
        if c.name not in excluded
    ]
    return out, hashed & {c.name for c in out}


def ensure_staging(conn: Any, staging: TableName, columns: list[SnowflakeColumn]) -> None:
    """Create the staging table, or add the source's new columns to it (DDL: before the transaction)."""
    _execute(conn, S.create_staging_sql(staging, columns))
    have = {c.name for c in describe(conn, S.describe_table_sql(staging))}
    missing = [n for n, _ in S.STAGING_META if n not in have]
    if missing:
        raise StreamError(
            f"staging table {staging} exists but lacks snowberg's columns {missing}; "
            "it is not a snowberg staging table (drop it or name another in stream.staging_table)"
        )
    for c in columns:
        if c.name not in have:
            log.info("staging %s: adding column %s %s (new in the source)", staging, c.name, S.column_sql_type(c))
            _execute(conn, S.add_column_sql(staging, c))


def create_stream(conn: Any, stream: StreamSource, table: TableName | None, *, replace: bool) -> None:
    if table is None:
        raise StreamConfigError(f"stream {stream.name}: on_table (or source.table) is needed to create the stream")
    show_initial = True if replace else stream.show_initial_rows
    text = S.create_stream_sql(
        stream.stream_name, table, append_only=stream.append_only, show_initial_rows=show_initial, replace=replace
    )
    log.info("%s", text)
    _execute(conn, text)


def last_generation(conn: Any, staging: TableName, iceberg_generation: str | None) -> str | None:
    """The stream generation last staged; falls back to the lake table's when nothing is staged."""
    staged = _scalar(conn, S.last_stream_created_sql(staging))
    return str(staged) if staged else iceberg_generation


def nothing_to_consume(conn: Any, stream: StreamSource, *, committed_batch_id: int) -> bool:
    """True when the stream has no change data and no staged row waits for the lake (one statement).

    ``committed_batch_id``: the lowest batch id the lake tables committed (the target's, or its changelog's
    when that is behind): staged rows above it wait for one of them.

    An idle scheduled run then ends before the consume transaction (docs/streams.md). Any doubt counts as
    work: a probe that fails (a stale or missing stream, no staging table yet) answers False, and the
    consume path reports what is wrong with its own errors.
    """
    params = {"stream": stream.stream_name.quoted(), "committed": committed_batch_id}
    cur = conn.cursor()
    try:
        cur.execute(S.idle_probe_sql(stream.staging_name), params)
        row = cur.fetchone()
    except Exception as exc:  # noqa: BLE001 - see the docstring: the consume path reports it
        log.info("idle probe of %s failed (%s: %s): consuming as usual", stream.stream_name, type(exc).__name__, exc)
        return False
    finally:
        cur.close()
    has_data, pending = (row[0], row[1]) if row is not None else (True, 0)
    idle = not _truthy(has_data) and int(pending or 0) == 0
    log.info(
        "stream %s: %s, %d staged row(s) after batch %d",
        stream.stream_name,
        "has change data" if _truthy(has_data) else "no change data",
        int(pending or 0),
        committed_batch_id,
    )
    return idle


def _truthy(value: Any) -> bool:
    # The connector returns BOOLEAN as bool; a string answer ("false") must not count as data by accident.
    return value.strip().lower() == "true" if isinstance(value, str) else bool(value)


def consume(
    conn: Any,
    stream: StreamSource,
    *,
    source_table: str | None,
    committed_batch_id: int,
    committed_generation: str | None,
    run_id: str,
    recover: bool = False,
    settings: ColumnSettings | None = None,
) -> ConsumeResult:
    """Stage the stream's changes as one new batch, in one Snowflake transaction.

    ``committed_batch_id``/``committed_generation``: what the Iceberg table's
    last stream commit records (``checkpoint.read_stream_state``).
    ``recover``: re-create the stream with initial rows first (the run param
    ``recover_stale_stream``); the batch is then a full refresh.
    ``settings``: the table's ``columns``: excluded columns are not staged, hashed ones are staged hashed.
    """
    started = time.monotonic()
    name = stream.stream_name
    staging = stream.staging_name
    table = stream.table_name(source_table)
    created = False
    if recover:
        log.warning("recover_stale_stream: re-creating %s with initial rows; the target will be fully refreshed", name)
        create_stream(conn, stream, table, replace=True)
        created = True
    status = read_status(conn, name)
    if status is None and stream.create:
        create_stream(conn, stream, table, replace=False)
        created = True
        status = read_status(conn, name)
    status = require_fresh(status, name)
    check_mode(status, stream)

    columns, hashed = staged_columns(stream_columns(conn, name), settings or ColumnSettings())
    ensure_staging(conn, staging, columns)
    generation = status.generation
    previous = last_generation(conn, staging, committed_generation)
    new_generation = previous is not None and previous != generation
    if new_generation and not stream.show_initial_rows and not recover:
        raise StreamError(
            f"stream {name} was re-created (created_on {previous} → {generation}) and is configured without "
            "initial rows: the changes in between are lost. Trigger with recover_stale_stream=true to re-create it "
            "with initial rows and fully refresh the target."
        )
    if new_generation and stream.show_initial_rows and not recover:
        # SHOW STREAMS does not say whether a stream shows initial rows: snowberg has to trust the config here.
        log.warning(
            "stream %s was re-created (created_on %s → %s): its first read is taken as a full copy of the table "
            "and replaces the target. That holds only if it was created with SHOW_INITIAL_ROWS = TRUE (as "
            "recover_stale_stream does); a stream re-created without it shows only later changes, and the target "
            "then misses rows until a run with recover_stale_stream=true.",
            name,
            previous,
            generation,
        )
    refresh = (
        recover or (new_generation and stream.show_initial_rows) or (previous is None and stream.show_initial_rows)
    )

    cur = conn.cursor()
    try:
        cur.execute("BEGIN")
        max_staged = int(_scalar(conn, S.next_batch_sql(staging)) or 0)
        batch_id = max(max_staged, committed_batch_id) + 1
        params = {"batch_id": batch_id, "run_id": run_id, "stream_created": generation}
        if refresh:
            cur.execute(S.refresh_marker_sql(staging), params)
        sql_text, extra = S.consume_sql(name, staging, columns, hashed)
        cur.execute(sql_text, {**params, **extra})
        rows = int(cur.rowcount or 0)
        remember = rows == 0 and not refresh and previous is None and generation is not None
        if remember:
            # Nothing staged and no generation known yet: without this row the load would not commit, and a
            # stream re-created before its first change would go unnoticed (the changes in between lost).
            cur.execute(S.generation_marker_sql(staging), params)
        faults.crash_point("stream_in_consume")
        cur.execute("COMMIT")
    except BaseException:
        try:
            cur.execute("ROLLBACK")
        except Exception:  # the connection may be gone; Snowflake rolls back on its own then
            log.exception("ROLLBACK failed")
        raise
    finally:
        cur.close()
    faults.crash_point("stream_after_consume")
    log.info(
        "consumed %s into %s: batch %d, %d change rows%s",
        name,
        staging,
        batch_id,
        rows,
        " (full refresh: new stream generation)" if refresh else "",
    )
    if remember:
        log.info("%s: no changes yet; staged a marker recording the stream's generation %s", name, generation)
    after = read_status(conn, name)
    return ConsumeResult(
        stream=str(name),
        batch_id=batch_id,
        rows=rows,
        refresh=refresh,
        through_batch_id=batch_id,
        committed_batch_id=committed_batch_id,
        created_stream=created,
        status=(after or status).to_dict(),
        seconds=time.monotonic() - started,
    )


def check_mode(status: StreamStatus, stream: StreamSource) -> None:
    """Refuse a stream whose mode (SHOW STREAMS) is not what ``stream.append_only`` says (also used by validate)."""
    mode = (status.mode or "").upper()
    if not mode:
        return
    is_append = mode in ("APPEND_ONLY", "INSERT_ONLY")
    if is_append != stream.append_only:
        raise StreamConfigError(
            f"stream {stream.name} is {mode} but the config says append_only: {str(stream.append_only).lower()}; "
            "fix the config (or re-create the stream with recover_stale_stream=true)"
        )


def cleanup(conn: Any, stream: StreamSource, *, through_batch_id: int) -> int:
    """Delete staged rows up to ``through_batch_id`` (a batch id read back from the Iceberg table)."""
    faults.crash_point("stream_before_cleanup")
    n = _execute(conn, S.cleanup_sql(stream.staging_name), {"through": through_batch_id})
    log.info("staging %s: deleted %d rows of batches <= %d", stream.staging_name, n, through_batch_id)
    return n
