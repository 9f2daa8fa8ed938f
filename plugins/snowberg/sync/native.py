"""Load a lake Iceberg table into a native Snowflake table, exactly once per source snapshot.

State lives in Snowflake, in a small table (default
``<db>.<schema>.SNOWBERG_SYNC_STATE``, one row per target table) that records
the last synced source snapshot id. The rows and the state update are one
Snowflake transaction::

    BEGIN
      [DELETE FROM target]                 -- full reload only
      INSERT INTO target ... (batches)     -- values bound by the connector
      UPDATE state SET source_snapshot_id = :to
       WHERE target_table = :t AND source_snapshot_id = :from   -- must hit exactly 1 row
    COMMIT

so a crash anywhere before COMMIT leaves neither rows nor state, a crash
after it leaves both, and a retry (or a second, concurrent run planned from
the same state) finds the state moved and loads nothing twice.

DDL (creating the state row's table, the target, new columns) runs before
``BEGIN``: Snowflake commits DDL implicitly, and every such step is
idempotent (``IF NOT EXISTS``, nullable ``ADD COLUMN``).

For a source with a key (``key_columns``; by default its Iceberg identifier
fields), overwrite and delete snapshots are applied as a change, not a full
reload: inside the same transaction the target's rows whose key was removed
or rewritten are deleted (``DELETE ... USING`` a bound ``VALUES`` list) and
the rows of the data files added since the synced snapshot are inserted —
a MERGE by key whose cost follows the change (``snapshots.read_changes``).
The key must be a key (``sync.keys``): a key that is not the identifier
fields is verified before the transaction, and the ``DELETE`` must remove
exactly the rows the change removed at the source, or the transaction rolls
back.

Every row carries the source snapshot id that added it in a lineage column
(default ``_SNOWBERG_SOURCE_SNAPSHOT_ID``), so the visibility check can count
exactly the rows of each synced snapshot.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from datetime import time as dtime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from snowberg.core import faults
from snowberg.core.identifiers import TableName, quote_identifier
from snowberg.core.results import Status
from snowberg.iceberg.deletes import live_rows
from snowberg.sync.ddl import TargetColumn, create_table_sql, target_columns
from snowberg.sync.keys import check_removed, verify_change, verify_plan
from snowberg.sync.snapshots import (
    ChangePlan,
    OnRewrite,
    RowChanges,
    SourceRewriteError,
    SyncMode,
    plan_changes,
    read_batches,
    read_changes,
    resolve_key_columns,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

DEFAULT_STATE_TABLE = "SNOWBERG_SYNC_STATE"
DEFAULT_LINEAGE_COLUMN = "_SNOWBERG_SOURCE_SNAPSHOT_ID"
MAX_VALUES_ROWS = 16_384  # Snowflake's limit on rows in one VALUES clause
MAX_STATEMENT_BYTES = 512 * 1024  # stay well under Snowflake's statement size limit


class NativeSyncError(RuntimeError):
    """The target or its state is in a shape the sync must not guess about."""


class ConcurrentSyncError(NativeSyncError):
    """Another run moved the sync state since this run planned; nothing was written."""


@dataclass(frozen=True, kw_only=True)
class NativeState:
    source_uuid: str | None
    source_snapshot_id: int | None
    run_id: str | None
    key_columns: list[str] | None = None  # the key verified over the whole source (sync.keys), if any
    has_key_column: bool = False  # the state table has the KEY_COLUMNS column (tables created before it lack it)


@dataclass(kw_only=True)
class NativeLoadResult:
    status: Status  # committed | nothing_new
    mode: SyncMode
    target: str
    state_table: str
    source: str
    source_uuid: str
    from_snapshot_id: int | None
    to_snapshot_id: int | None
    rows: int
    rows_by_snapshot: dict[str, int] = field(default_factory=dict)
    lineage_column: str | None = None
    key_columns: list[str] = field(default_factory=list)  # the key a keyed run applied changes by (source names)
    source_rows: int | None = None  # live rows of the source at to_snapshot_id (None: unknown, equality deletes)
    seconds: float = 0.0
    plan: str = ""
    load_path: str = "insert"  # how rows travelled: stage_copy, put_copy, insert (joined by + when mixed)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # Plain strings in XCom: readable by any deserialiser, equal to the members.
        d["status"], d["mode"] = self.status.value, self.mode.value
        return d


class StagedRows(Protocol):
    """Rows a ``RowStager`` prepared before the transaction: COPYs to run inside it, the rest to INSERT."""

    insert_batches: Iterable[tuple[int, pa.RecordBatch]]
    rows_by_snapshot: dict[str, int]

    @property
    def load_path(self) -> str: ...

    def copy(self, cur: Any) -> int: ...


class RowStager(Protocol):
    """How a run's rows reach the target other than by INSERT (``sync.copy_load.CopyPaths``)."""

    def stage(
        self,
        cur: Any,
        *,
        source: Table,
        plan: ChangePlan,
        columns: Sequence[TargetColumn],
        target: TableName,
        lineage_column: str | None,
        changes: RowChanges | None,
    ) -> StagedRows: ...


def default_state_table(target: TableName) -> TableName:
    """The state table used when none is configured: ``SNOWBERG_SYNC_STATE`` next to the target."""
    return TableName(database=target.database, schema=target.schema, table=DEFAULT_STATE_TABLE)


def _stored(name: str) -> str:
    """How Snowflake stores a name snowberg quoted (``quote_identifier`` upper-cases all-lower names)."""
    return name.upper() if name == name.lower() else name


# ---------------------------------------------------------------------------
# SQL


def state_table_ddl(state: TableName) -> str:
    return (
        f"CREATE TABLE IF NOT EXISTS {state.quoted()} (\n"
        '    "TARGET_TABLE" VARCHAR NOT NULL,\n'
        '    "SOURCE_TABLE" VARCHAR,\n'
        '    "SOURCE_TABLE_UUID" VARCHAR,\n'
        '    "SOURCE_SNAPSHOT_ID" NUMBER(19,0),\n'
        '    "MODE" VARCHAR,\n'
        '    "ROWS_LOADED" NUMBER(19,0),\n'
        '    "RUN_ID" VARCHAR,\n'
        '    "SYNCED_AT" TIMESTAMP_TZ(6),\n'
        '    "KEY_COLUMNS" VARCHAR\n'
        ")"
    )


def read_state(cur: Any, state: TableName, target: TableName) -> NativeState | None:
    """The target's row of the state table (None before the first sync); two rows mean two first runs raced.

    ``SELECT *``: a state table created before ``KEY_COLUMNS`` existed still reads (without a verified key).
    """
    cur.execute(f'SELECT * FROM {state.quoted()} WHERE "TARGET_TABLE" = %(t)s', {"t": str(target)})
    names = [d[0].upper() for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    if len(rows) > 1:
        raise NativeSyncError(
            f"state table {state} holds {len(rows)} rows for target {target}; two first runs raced. "
            "Keep the row that matches the target's lineage column and delete the others."
        )
    if not rows:
        return None
    row = rows[0]
    snap, verified = row["SOURCE_SNAPSHOT_ID"], row.get("KEY_COLUMNS")
    return NativeState(
        source_uuid=row["SOURCE_TABLE_UUID"],
        source_snapshot_id=int(snap) if snap is not None else None,
        run_id=row["RUN_ID"],
        key_columns=json.loads(verified) if verified else None,
        has_key_column="KEY_COLUMNS" in names,
    )


def key_state(cur: Any, state: TableName, st: NativeState | None, verified: list[str] | None) -> tuple[str, Any]:
    """The guarded UPDATE's ``KEY_COLUMNS`` assignment and its value (``("", None)``: nothing to record).

    A state table created before the column existed gets it (DDL, before the
    transaction) only when there is a verified key to record.
    """
    if st is not None:
        present = st.has_key_column
    elif verified is None:
        return "", None
    else:  # no row yet: the table may still predate the column
        cur.execute(f"SELECT * FROM {state.quoted()} LIMIT 0")
        present = "KEY_COLUMNS" in [d[0].upper() for d in cur.description]
    if not present and verified is None:
        return "", None
    if not present:
        cur.execute(f'ALTER TABLE {state.quoted()} ADD COLUMN IF NOT EXISTS "KEY_COLUMNS" VARCHAR')
    return ', "KEY_COLUMNS" = %(keys)s', json.dumps(verified) if verified is not None else None


def existing_columns(cur: Any, table: TableName) -> dict[str, str] | None:
    """``{stored column name: data type}`` of ``table``, or None if it does not exist."""
    cur.execute(
        f"SELECT COLUMN_NAME, DATA_TYPE FROM {quote_identifier(table.database, 'database')}.INFORMATION_SCHEMA.COLUMNS "
        "WHERE TABLE_SCHEMA = %(s)s AND TABLE_NAME = %(t)s",
        {"s": _stored(table.schema), "t": _stored(table.table)},
    )
    rows = cur.fetchall()
    return {r[0]: r[1] for r in rows} if rows else None


def insert_sql(target: TableName, columns: Sequence[TargetColumn], lineage_column: str | None) -> str:
    """``INSERT ... SELECT <casts> FROM VALUES (%s, ...)``: one placeholder per value, bound by the connector.

    The ``SELECT`` over ``VALUES`` lets semi-structured columns go through
    ``PARSE_JSON`` (Snowflake refuses it inside a plain ``VALUES`` insert) and
    makes every conversion an explicit ``CAST`` to the mapped type.
    """
    names = [c.quoted for c in columns]
    exprs = [
        f"PARSE_JSON(column{i})" if c.semi_structured else f"CAST(column{i} AS {c.sql_type})"
        for i, c in enumerate(columns, start=1)
    ]
    if lineage_column:
        names.append(quote_identifier(lineage_column, "lineage column"))
        exprs.append(f"CAST(column{len(columns) + 1} AS NUMBER(19,0))")
    placeholders = ", ".join(["%s"] * len(names))
    return f"INSERT INTO {target.quoted()} ({', '.join(names)}) SELECT {', '.join(exprs)} FROM VALUES ({placeholders})"


def delete_by_key_sql(target: TableName, keys: Sequence[TargetColumn], rows: int) -> str:
    """``DELETE ... USING`` a bound ``VALUES`` list of ``rows`` keys (every value a placeholder, cast to its type)."""
    sel = ", ".join(f"CAST(column{i} AS {k.sql_type}) AS {k.quoted}" for i, k in enumerate(keys, start=1))
    row = "(" + ", ".join(["%s"] * len(keys)) + ")"
    match = " AND ".join(f"{target.quoted()}.{k.quoted} = d.{k.quoted}" for k in keys)
    return (
        f"DELETE FROM {target.quoted()} USING (SELECT {sel} FROM VALUES {', '.join([row] * rows)}) AS d WHERE {match}"
    )


def key_columns_of(columns: Sequence[TargetColumn], keys: Sequence[str], source_label: str) -> list[TargetColumn]:
    """The target columns of the source's key columns, refusing a key the schema lacks."""
    by_source = {c.source_name: c for c in columns}
    missing = [k for k in keys if k not in by_source]
    if missing:
        raise NativeSyncError(f"source {source_label}: key column(s) {missing} are not in the table's schema")
    return [by_source[k] for k in keys]


def apply_deletes(
    cur: Any, target: TableName, keys: Sequence[TargetColumn], changes: RowChanges, chunk_rows: int
) -> int:
    """Delete the target's rows whose key the change removed or rewrites; return the statements' row count."""
    import pyarrow as pa

    names = [k.source_name for k in keys]
    parts = [changes.deleted_keys.select(names)]
    parts += [pa.Table.from_batches([b.select(names)]).cast(parts[0].schema) for _, b in changes.upserts]
    all_keys = pa.concat_tables(parts)
    deleted = 0
    pylists = [all_keys.column(n).to_pylist() for n in names]
    for lo in range(0, all_keys.num_rows, chunk_rows):
        hi = min(lo + chunk_rows, all_keys.num_rows)
        params = [sql_value(pl[i], k) for i in range(lo, hi) for pl, k in zip(pylists, keys, strict=True)]
        cur.execute(delete_by_key_sql(target, keys, hi - lo), params)
        deleted += max(cur.rowcount or 0, 0)
    return deleted


# ---------------------------------------------------------------------------
# Values


def _json_default(v: Any) -> Any:
    if isinstance(v, Decimal):
        return str(v)  # JSON numbers would round through float
    if isinstance(v, (datetime, date, dtime)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    return str(v)


def _jsonable(v: Any) -> Any:
    """pyarrow's Python form of nested values → JSON-ready (maps arrive as key/value pairs)."""
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
            return {str(k): _jsonable(x) for k, x in v}
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def sql_value(v: Any, col: TargetColumn) -> Any:
    """One value as bound: text for anything the CAST must parse exactly (numbers, temporals)."""
    if v is None:
        return None
    if col.semi_structured:
        return json.dumps(_jsonable(v), default=_json_default, separators=(",", ":"))
    if isinstance(v, bool) or isinstance(v, int):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)  # round-trips exactly
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, datetime):
        if v.tzinfo is not None:
            return v.astimezone(UTC).isoformat(sep=" ")
        return v.isoformat(sep=" ")
    if isinstance(v, (date, dtime)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return str(v)  # str, UUID


def batch_rows(
    batch: pa.RecordBatch, columns: Sequence[TargetColumn], lineage: int | None
) -> Iterator[tuple[Any, ...]]:
    """Rows of ``batch`` in ``columns`` order (columns the batch lacks are NULL)."""
    names = set(batch.schema.names)
    pylists = [batch.column(c.source_name).to_pylist() if c.source_name in names else None for c in columns]
    for i in range(batch.num_rows):
        row = tuple(sql_value(pl[i], c) if pl is not None else None for pl, c in zip(pylists, columns, strict=True))
        yield row + (lineage,) if lineage is not None else row


def _row_bytes(row: tuple[Any, ...]) -> int:
    return sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in row if v is not None) + 4 * len(row)


# ---------------------------------------------------------------------------
# The load


def prepare_target(cur: Any, target: TableName, columns: Sequence[TargetColumn], lineage_column: str | None) -> bool:
    """Create the target or add new source columns (DDL, before the transaction). True if it existed."""
    existing = existing_columns(cur, target)
    if existing is None:
        sql = create_table_sql(target, columns, lineage_column)
        log.info("creating %s:\n%s", target, sql)
        cur.execute(sql)
        return False
    wanted = [(c.name, c.quoted, c.sql_type) for c in columns]
    if lineage_column:
        wanted.append((_stored(lineage_column), quote_identifier(lineage_column), "NUMBER(19,0)"))
    for stored, quoted, sql_type in wanted:
        if stored not in existing:
            log.info("schema: adding column %s %s to %s", quoted, sql_type, target)
            cur.execute(f"ALTER TABLE {target.quoted()} ADD COLUMN {quoted} {sql_type}")
    return True


def load_native(
    source: Table,
    conn: Any,
    *,
    target: TableName,
    source_label: str,
    run_id: str,
    state_table: TableName | None = None,
    on_rewrite: OnRewrite | str = OnRewrite.FAIL,
    lineage_column: str | None = DEFAULT_LINEAGE_COLUMN,
    insert_batch_rows: int = 1000,
    key_columns: Sequence[str] | None = None,
    copy: RowStager | None = None,
) -> NativeLoadResult:
    """Sync the source's new snapshots into ``target`` in one Snowflake transaction.

    ``key_columns`` (default: the source's Iceberg identifier fields) lets
    overwrite/delete snapshots be applied by key instead of refused/reloaded.
    ``copy`` (``sync.copy_load.CopyPaths``): load rows with COPY from Parquet
    (the lake's files through a stage, or files the worker PUTs) inside the
    same transaction; None: bound INSERTs only.
    """
    started = time.monotonic()
    keyed = resolve_key_columns(source, key_columns)  # before anything is written
    state = state_table or default_state_table(target)
    if not 1 <= insert_batch_rows <= MAX_VALUES_ROWS:
        raise ValueError(f"insert_batch_rows must be 1..{MAX_VALUES_ROWS}")
    cur = conn.cursor()
    try:
        cur.execute(state_table_ddl(state))
        st = read_state(cur, state, target)
        plan = plan_changes(
            source,
            st.source_snapshot_id if st else None,
            synced_uuid=st.source_uuid if st and st.source_snapshot_id is not None else None,
            on_rewrite=on_rewrite,
            key_columns=keyed,
        )
        log.info("%s → %s: %s", source_label, target, plan.describe())

        def result(status: Status, rows: int, by_snap: dict[str, int]) -> NativeLoadResult:
            return NativeLoadResult(
                status=status,
                mode=plan.mode,
                target=str(target),
                state_table=str(state),
                source=source_label,
                source_uuid=plan.source_uuid,
                from_snapshot_id=plan.from_snapshot_id,
                to_snapshot_id=plan.to_snapshot_id,
                rows=rows,
                rows_by_snapshot=by_snap,
                lineage_column=lineage_column,
                key_columns=keyed,
                source_rows=source_rows(source, plan.to_snapshot_id) if keyed else None,
                seconds=time.monotonic() - started,
                plan=plan.describe(),
                load_path=staged.load_path if staged is not None else "insert",
            )

        staged: StagedRows | None = None
        if plan.mode == SyncMode.NOTHING_NEW:
            return result(Status.NOTHING_NEW, 0, {})
        verified = verify_plan(source, plan, keyed, st.key_columns if st else None, source_label)

        columns = target_columns(source.schema())
        existed = prepare_target(cur, target, columns, lineage_column)
        if plan.mode == SyncMode.INITIAL and existed:
            cur.execute(f"SELECT COUNT(*) FROM {target.quoted()}")
            (n,) = cur.fetchone()
            if n:
                if on_rewrite != OnRewrite.FULL_RELOAD:
                    raise SourceRewriteError(
                        f"target {target} already holds {n:,} rows but has no sync state in {state}: the first sync "
                        "would duplicate them. Empty the target, or set on_rewrite: full_reload to replace its rows."
                    )
                plan.mode = SyncMode.FULL_RELOAD
                plan.reason = f"first sync into a target that already holds {n:,} rows"
        if st is None:
            # The state row exists before the transaction so that the guarded
            # UPDATE inside it can assert "exactly one row moved".
            cur.execute(
                f'INSERT INTO {state.quoted()} ("TARGET_TABLE") SELECT %(t)s '
                f'WHERE NOT EXISTS (SELECT 1 FROM {state.quoted()} WHERE "TARGET_TABLE" = %(t)s)',
                {"t": str(target)},
            )

        key_sql, key_value = key_state(cur, state, st, verified)
        sql = insert_sql(target, columns, lineage_column)
        rows_by_snapshot: dict[str, int] = {}
        total = 0
        changes = read_changes(source, plan) if plan.mode == SyncMode.CHANGES else None
        if changes is not None:
            verify_change(changes, plan.key_columns, source, source_label)
        faults.crash_point("sync_after_read")
        if copy is not None:
            staged = copy.stage(
                cur,
                source=source,
                plan=plan,
                columns=columns,
                target=target,
                lineage_column=lineage_column,
                changes=changes,
            )
        cur.execute("BEGIN")
        try:
            if plan.mode == SyncMode.FULL_RELOAD:
                cur.execute(f"DELETE FROM {target.quoted()}")
                log.info("full reload: deleted %s existing rows of %s", f"{cur.rowcount:,}", target)
            if changes is not None:
                key_cols = key_columns_of(columns, plan.key_columns, source_label)
                n = apply_deletes(cur, target, key_cols, changes, insert_batch_rows)
                check_removed(n, changes, plan.key_columns, str(target), source_label)
                faults.crash_point("sync_after_deletes")
                log.info(
                    "changes: deleted %s rows of %s by key (%s keys removed at the source, %s rows rewritten)",
                    f"{n:,}",
                    target,
                    f"{changes.deleted_keys.num_rows:,}",
                    f"{changes.upsert_rows:,}",
                )
            if staged is not None:
                total = staged.copy(cur)
                rows_by_snapshot.update(staged.rows_by_snapshot)
            buf: list[tuple[Any, ...]] = []
            nbytes = 0
            batches: Iterable[tuple[int, pa.RecordBatch]] = (
                staged.insert_batches
                if staged is not None
                else changes.upserts
                if changes is not None
                else read_batches(source, plan)
            )
            for snap_id, batch in batches:
                for row in batch_rows(batch, columns, snap_id if lineage_column else None):
                    buf.append(row)
                    nbytes += _row_bytes(row)
                    if len(buf) >= insert_batch_rows or nbytes >= MAX_STATEMENT_BYTES:
                        cur.executemany(sql, buf)
                        buf, nbytes = [], 0
                rows_by_snapshot[str(snap_id)] = rows_by_snapshot.get(str(snap_id), 0) + batch.num_rows
                total += batch.num_rows
            if buf:
                cur.executemany(sql, buf)
            if plan.mode == SyncMode.INCREMENTAL and plan.expected_rows is not None and total != plan.expected_rows:
                raise NativeSyncError(
                    f"read {total:,} rows from the added files, their manifests say {plan.expected_rows:,}; "
                    "nothing committed"
                )
            guard = (
                '"SOURCE_SNAPSHOT_ID" = %(prev)s'
                if st is not None and st.source_snapshot_id is not None
                else '"SOURCE_SNAPSHOT_ID" IS NULL'
            )
            cur.execute(
                f'UPDATE {state.quoted()} SET "SOURCE_TABLE" = %(src)s, "SOURCE_TABLE_UUID" = %(uuid)s, '
                f'"SOURCE_SNAPSHOT_ID" = %(to)s, "MODE" = %(mode)s, "ROWS_LOADED" = %(rows)s, "RUN_ID" = %(run)s, '
                f'"SYNCED_AT" = CURRENT_TIMESTAMP(){key_sql} WHERE "TARGET_TABLE" = %(t)s AND {guard}',
                {
                    "src": source_label,
                    "uuid": plan.source_uuid,
                    "to": plan.to_snapshot_id,
                    "mode": plan.mode.value,
                    "rows": total,
                    "run": run_id,
                    "t": str(target),
                    "prev": st.source_snapshot_id if st else None,
                    "keys": key_value,
                },
            )
            moved = cur.rowcount
            if moved != 1:
                raise ConcurrentSyncError(
                    f"the sync state of {target} moved since run {run_id} planned from snapshot "
                    f"{plan.from_snapshot_id} ({moved} state rows matched); rolled back, nothing written"
                )
            faults.crash_point("before_commit")
            cur.execute("COMMIT")
        except BaseException:
            try:
                cur.execute("ROLLBACK")
            except Exception:  # the original error matters more
                log.exception("ROLLBACK failed")
            raise
        faults.crash_point("after_commit")
        log.info(
            "%s: committed %s rows from source snapshots %s (state %s → snapshot %s)",
            target,
            f"{total:,}",
            ", ".join(rows_by_snapshot) or "-",
            state,
            plan.to_snapshot_id,
        )
        return result(Status.COMMITTED, total, rows_by_snapshot)
    finally:
        cur.close()


def source_rows(source: Table, snapshot_id: int | None) -> int | None:
    """Live rows of the source at the synced snapshot (metadata; None when unknown): what a keyed target holds."""
    return live_rows(source, snapshot_id) if snapshot_id is not None else 0


def state_for(conn: Any, target: TableName, state_table: TableName | None = None) -> NativeState | None:
    """The recorded sync state of ``target`` (for checks and operators)."""
    cur = conn.cursor()
    try:
        return read_state(cur, state_table or default_state_table(target), target)
    finally:
        cur.close()


def counts_by_lineage(
    conn: Any, target: TableName, lineage_column: str, snapshot_ids: Sequence[int]
) -> Mapping[str, int]:
    """``{snapshot id: rows}`` currently in ``target`` for the given source snapshots."""
    if not snapshot_ids:
        return {}
    cur = conn.cursor()
    try:
        col = quote_identifier(lineage_column, "lineage column")
        params = {f"s{i}": int(s) for i, s in enumerate(snapshot_ids)}
        cur.execute(
            f"SELECT {col}, COUNT(*) FROM {target.quoted()} WHERE {col} IN ({', '.join(f'%({k})s' for k in params)}) "
            f"GROUP BY {col}",
            params,
        )
        return {str(int(k)): int(n) for k, n in cur.fetchall()}
    finally:
        cur.close()
