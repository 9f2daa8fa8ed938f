"""Apply staged batches to Iceberg: one commit per run, state in the same commit.

For the batch range ``(committed, through]``:

* every primary key the range touches is deleted from the target
  (``tx.delete(In(pk, keys))``: copy-on-write, never equality deletes, which
  Snowflake cannot read), then
* the last change per key (batch id, then row sequence) is appended when it
  is an insert (an update's new image is an insert; a delete leaves nothing),

both in one transaction whose snapshot summary carries
``snowberg.stream-batch-id`` = ``through``. When the range holds a full
refresh batch (a new stream generation), everything before it is superseded:
the target is emptied and only batches from the refresh on are applied.

The optional changelog table gets every staged change of the range (action,
batch id, row sequence), append-only, with its own batch id in its own
summary, so each of the two tables is exactly once on its own.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from snowberg.config.stream_settings import StreamSource
from snowberg.config.table_config import ColumnDropPolicy, TableConfig
from snowberg.core.progress import Progress
from snowberg.iceberg import gate
from snowberg.iceberg import state as core_state
from snowberg.iceberg.keys import DuplicateKeyError, NullKeyError, key_filter
from snowberg.iceberg.tables import begin_write, load_table_or_none
from snowberg.iceberg.write import write_data_files
from snowberg.load.extract import cast_fetched, mapping_options
from snowberg.mapping.cast import cast_array
from snowberg.mapping.rules import MappedColumn, MappingOptions, map_columns
from snowberg.snowflake.projection import stored_names
from snowberg.snowflake.source import fetch_batches, result_columns
from snowberg.streams import checkpoint as cp
from snowberg.streams import sql as S
from snowberg.streams.errors import StreamConfigError
from snowberg.streams.staging import describe

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Pending:
    batch_id: int
    rows: int
    refresh: bool
    consumed_at: str | None


class ApplyStatus(enum.StrEnum):
    """How an apply run ended. Only ``committed`` wrote a snapshot.

    Not ``snowberg.core.results.Status``: a stream run has no window to find
    empty, but a range of batch ids that may have staged nothing.
    """

    COMMITTED = "committed"
    ALREADY_COMMITTED = "already_committed"  # every batch up to ``through`` is in the table already
    NOTHING_STAGED = "nothing_staged"  # the batch range holds no staged rows: no commit


@dataclass(kw_only=True)
class ApplyResult:
    status: ApplyStatus
    low_batch_id: int
    through_batch_id: int
    batches: list[int]
    refresh: bool
    rows_appended: int
    keys_deleted: int
    snapshot_id: int | None
    changelog_rows: int
    changelog_snapshot_id: int | None
    seconds: float

    @classmethod
    def nothing_applied(cls, *, status: ApplyStatus, low: int, through: int) -> ApplyResult:
        """A run that wrote nothing to the target: no batch, no row, no snapshot."""
        return cls(
            status=status,
            low_batch_id=low,
            through_batch_id=through,
            batches=[],
            refresh=False,
            rows_appended=0,
            keys_deleted=0,
            snapshot_id=None,
            changelog_rows=0,
            changelog_snapshot_id=None,
            seconds=0.0,
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # Plain strings in XCom: readable by any deserialiser, equal to the members.
        d["status"] = self.status.value
        return d


def check_keys(cfg: TableConfig, stream: StreamSource) -> list[str]:
    """Updates and deletes are applied by primary key; only an append-only stream can do without one."""
    if not cfg.primary_key and not stream.append_only:
        raise StreamConfigError(
            f"table {cfg.name!r}: a standard stream carries updates and deletes, which snowberg applies by primary "
            "key; set primary_key (or use an append_only stream)"
        )
    return [k for k in cfg.primary_key]


def pending_batches(conn: Any, stream: StreamSource, low: int) -> list[Pending]:
    cur = conn.cursor()
    try:
        cur.execute(S.pending_batches_sql(stream.staging_name), {"low": low})
        return [
            Pending(batch_id=int(b), rows=int(n), refresh=bool(int(r)), consumed_at=None if c is None else str(c))
            for b, n, r, c in cur.fetchall()
        ]
    finally:
        cur.close()


def source_columns(conn: Any, stream: StreamSource, excluded: Sequence[str] = ()) -> list[str]:
    """Staging columns that hold source data (bookkeeping columns removed, and ``columns.exclude``: a staging
    table made before a column was excluded still has it, unfilled from then on)."""
    gone = S.META_NAMES | stored_names(excluded)
    return [c.name for c in describe(conn, S.describe_table_sql(stream.staging_name)) if c.name not in gone]


def stored_key(conn_columns: Sequence[str], key: Sequence[str]) -> list[str]:
    """The key columns as the stream stores them, refusing a key column the stream does not have."""
    by_upper = {c.upper(): c for c in conn_columns}
    out = []
    for k in key:
        if k.upper() not in by_upper:
            raise StreamConfigError(f"primary key column {k!r} is not a column of the stream ({sorted(conn_columns)})")
        out.append(by_upper[k.upper()])
    return out


def check_staged_keys(conn: Any, stream: StreamSource, key: Sequence[str], low: int, high: int, name: str) -> None:
    """Refuse the range before anything is written: NULL key values, or one key inserted twice in one batch."""
    cur = conn.cursor()
    try:
        cur.execute(S.null_keys_sql(stream.staging_name, key), {"low": low, "high": high})
        nulls = cur.fetchone() or ()
        for k, n in zip(key, nulls, strict=False):
            if n:
                raise NullKeyError(
                    f"table {name!r}: {int(n):,} staged change(s) of batches ({low}, {high}] have NULL in primary-key "
                    f"column {k!r}; such a change cannot be applied by key. Nothing was written. Fix the source rows, "
                    "and trigger a run with recover_stale_stream=true (a full refresh supersedes the staged batch)."
                )
        cur.execute(S.duplicate_inserts_sql(stream.staging_name, key), {"low": low, "high": high})
        dup = cur.fetchall()
    finally:
        cur.close()
    if dup:
        shown = [tuple(r[1:-1]) for r in dup]
        raise DuplicateKeyError(
            f"table {name!r}: primary key {list(key)} has two live rows in one stream batch (batch "
            f"{dup[0][0]}, e.g. {shown}); keeping one would silently drop the other. Nothing was written. "
            "Make the key unique in the source (or fix primary_key), then trigger a run with "
            "recover_stale_stream=true: it re-reads the table as a full refresh that supersedes the staged batch."
        )


def _read_keys(
    conn: Any, stream: StreamSource, key: Sequence[str], low: int, high: int, target: pa.Schema, opts: MappingOptions
) -> pa.Table:
    """Distinct primary keys of the range, cast to the target's types (so the delete filter binds exactly)."""
    import pyarrow as pa

    cur = conn.cursor()
    try:
        cur.execute(S.changed_keys_sql(stream.staging_name, key), {"low": low, "high": high})
        mapped = {m.source.name: m for m in map_columns(result_columns(cur), opts)}
        chunks = [pa.Table.from_batches([b]) for b in fetch_batches(cur)]
    finally:
        cur.close()
    names = [mapped[k].name for k in key]
    if not chunks:
        return pa.table({n: pa.array([], type=target.field(n).type) for n in names})
    raw = pa.concat_tables(chunks)
    arrays = [cast_array(raw.column(k), mapped[k], opts, target=target.field(mapped[k].name).type) for k in key]
    return pa.table(dict(zip(names, arrays, strict=True)))


def _state_props(
    run_id: str, stream: StreamSource, pending: Sequence[Pending], through: int, refresh: bool, generation: str | None
) -> dict[str, str]:
    consumed = [p.consumed_at for p in pending if p.consumed_at]
    props = {
        cp.BATCH_ID: str(through),
        cp.BATCHES: ",".join(str(p.batch_id) for p in pending),
        cp.STREAM: stream.name,
        cp.REFRESH: "true" if refresh else "false",
        cp.CONSUMED_AT: max(consumed) if consumed else "",
        core_state.RUN_ID: run_id,
        core_state.MODE: cp.MODE_STREAM,
        core_state.VERSION: "1",
        # Always present (maybe empty), so the table-property copy never keeps an older generation.
        cp.GENERATION: generation or "",
    }
    return props


def _staged_generation(conn: Any, stream: StreamSource, through: int) -> str | None:
    cur = conn.cursor()
    try:
        cur.execute(S.generation_sql(stream.staging_name), {"high": through})
        row = cur.fetchone()
        return None if row is None or row[0] is None else str(row[0])
    finally:
        cur.close()


def load_batches(
    cfg: TableConfig,
    stream: StreamSource,
    conn: Any,
    catalog: Catalog,
    *,
    run_id: str,
    through_batch_id: int | None,
    dag_id: str = "",
    policies_allowed: str | None = None,
) -> ApplyResult:
    """Apply staged batches ``(committed, through]`` to the target (and the changelog), once.

    ``dag_id``: the run's DAG, recorded with the run id in every commit. ``policies_allowed``: the source's
    policies the consume allowed (``on_policy: allow``), recorded in the target's commit.
    """
    started = time.monotonic()
    key = check_keys(cfg, stream)
    table = load_table_or_none(catalog, cfg)
    committed = cp.committed_batch(table)
    changelog_cfg = changelog_config(cfg, stream)
    changelog = load_table_or_none(catalog, changelog_cfg) if changelog_cfg else None
    changelog_committed = cp.committed_batch(changelog) if changelog_cfg else None
    low_all = min(committed, changelog_committed) if changelog_committed is not None else committed
    pending_all = pending_batches(conn, stream, low_all)
    through = (
        through_batch_id if through_batch_id is not None else max([p.batch_id for p in pending_all], default=low_all)
    )

    result = ApplyResult.nothing_applied(status=ApplyStatus.ALREADY_COMMITTED, low=committed, through=through)
    if through > committed:
        pending = [p for p in pending_all if committed < p.batch_id <= through]
        result = _apply_target(
            cfg,
            stream,
            conn,
            catalog,
            table,
            key,
            committed,
            through,
            pending,
            run_id,
            dag_id=dag_id,
            policies_allowed=policies_allowed,
        )
    else:
        log.info(
            "%s: batches up to %d are already in the table (batch id %d): nothing to apply",
            cfg.target,
            through,
            committed,
        )
    if changelog_cfg is not None and changelog_committed is not None and through > changelog_committed:
        pending = [p for p in pending_all if changelog_committed < p.batch_id <= through]
        n, snap = _apply_changelog(
            cfg,
            changelog_cfg,
            stream,
            conn,
            catalog,
            changelog,
            changelog_committed,
            through,
            pending,
            run_id,
            dag_id=dag_id,
        )
        result.changelog_rows, result.changelog_snapshot_id = n, snap
    result.seconds = time.monotonic() - started
    return result


def _apply_target(
    cfg: TableConfig,
    stream: StreamSource,
    conn: Any,
    catalog: Catalog,
    table: Table | None,
    key: list[str],
    committed: int,
    through: int,
    pending: list[Pending],
    run_id: str,
    *,
    dag_id: str,
    policies_allowed: str | None = None,
) -> ApplyResult:
    started = time.monotonic()
    if not pending:
        log.info("%s: no staged rows in batches (%d, %d]: no commit", cfg.target, committed, through)
        return ApplyResult.nothing_applied(status=ApplyStatus.NOTHING_STAGED, low=committed, through=through)
    refreshes = [p.batch_id for p in pending if p.refresh]
    low = committed
    refresh = bool(refreshes)
    if refresh:
        low = max(refreshes) - 1
        log.info(
            "%s: batch %d is a full refresh (new stream generation): replacing the table", cfg.target, max(refreshes)
        )
    applied = [p for p in pending if p.batch_id > low]
    opts = mapping_options(cfg)
    columns = source_columns(conn, stream, cfg.columns.exclude)
    key = stored_key(columns, key)
    params = {"low": low, "high": through}
    if key:
        check_staged_keys(conn, stream, key, low, through, cfg.name)

    cur = conn.cursor()
    try:
        cur.execute(S.final_rows_sql(stream.staging_name, columns, key), params)
        mapped = map_columns(result_columns(cur), opts)
        table, tx, target, _ = begin_write(catalog, cfg, table, mapped)
        progress = Progress(f"{cfg.name}: staged rows", log)

        data_files = list(
            write_data_files(table, tx, target, cast_fetched(cur, mapped, target, opts, progress), cfg.batch_rows)
        )
    finally:
        cur.close()

    generation = _staged_generation(conn, stream, through)
    state_props = _state_props(run_id, stream, applied, through, refresh, generation)
    deleted = 0
    replaced: Any = None
    if refresh:
        from pyiceberg.expressions import AlwaysTrue

        replaced = AlwaysTrue()
    elif key:
        keys = _read_keys(conn, stream, key, low, through, target, opts)
        deleted = keys.num_rows
        if deleted:
            replaced = key_filter(keys)
    summary = {cp.DELETED_KEYS: str(deleted), core_state.ROWS: str(progress.rows)}
    if policies_allowed:
        summary[core_state.POLICIES_ALLOWED] = policies_allowed
    snap = gate.commit(
        table,
        tx,
        state_props=state_props,
        summary=summary,
        replaced=replaced,
        data_files=data_files,
        crash_points=("stream_during_write", "stream_after_commit"),
        dag_id=dag_id,
    )
    log.info(
        "%s: committed snapshot %s: batches %s, %s rows appended, %d keys deleted%s",
        cfg.target,
        snap.snapshot_id,
        state_props[cp.BATCHES],
        f"{progress.rows:,}",
        deleted,
        " (full refresh)" if refresh else "",
    )
    return ApplyResult(
        status=ApplyStatus.COMMITTED,
        low_batch_id=committed,
        through_batch_id=through,
        batches=[p.batch_id for p in applied],
        refresh=refresh,
        rows_appended=progress.rows,
        keys_deleted=deleted,
        snapshot_id=snap.snapshot_id,
        changelog_rows=0,
        changelog_snapshot_id=None,
        seconds=time.monotonic() - started,
    )


def changelog_config(cfg: TableConfig, stream: StreamSource) -> TableConfig | None:
    """The stream table's config retargeted at its changelog table (None without one): no key, cursor or partitions."""
    if not stream.changelog_target:
        return None
    return cfg.model_copy(
        update={
            "target": stream.changelog_target,
            "primary_key": [],
            "partition_by": [],
            "cursor": None,
            "write_mode": None,
            # Two writers share the log (stream batches, CHANGES backfills), each with columns the other lacks.
            "on_column_dropped": ColumnDropPolicy.KEEP_NULL,
        }
    )


def _apply_changelog(
    cfg: TableConfig,
    ccfg: TableConfig,
    stream: StreamSource,
    conn: Any,
    catalog: Catalog,
    table: Table | None,
    committed: int,
    through: int,
    pending: list[Pending],
    run_id: str,
    *,
    dag_id: str,
) -> tuple[int, int | None]:
    if not pending:
        return 0, None
    base = mapping_options(cfg)
    opts = MappingOptions(
        number_as_long=base.number_as_long | {S.BATCH_ID, S.SEQ},
        timestamp_nanos=base.timestamp_nanos,
        geo_format=base.geo_format,
    )
    columns = source_columns(conn, stream, cfg.columns.exclude)
    cur = conn.cursor()
    try:
        cur.execute(S.changelog_rows_sql(stream.staging_name, columns), {"low": committed, "high": through})
        mapped: list[MappedColumn] = map_columns(result_columns(cur), opts)
        table, tx, target, _ = begin_write(catalog, ccfg, table, mapped)
        progress = Progress(f"{ccfg.target}: changes", log)

        data_files = list(
            write_data_files(table, tx, target, cast_fetched(cur, mapped, target, opts, progress), cfg.batch_rows)
        )
    finally:
        cur.close()
    state_props = _state_props(run_id, stream, pending, through, False, _staged_generation(conn, stream, through))
    snap = gate.commit(
        table,
        tx,
        state_props=state_props,
        summary={core_state.ROWS: str(progress.rows)},
        data_files=data_files,
        crash_points=None,
        dag_id=dag_id,
    )
    log.info(
        "%s: changelog commit %s: %s changes of batches %s",
        ccfg.target,
        snap.snapshot_id,
        f"{progress.rows:,}",
        state_props[cp.BATCHES],
    )
    return progress.rows, snap.snapshot_id


def committed_through(
    cfg: TableConfig, stream: StreamSource, catalog: Catalog, *, target_batch_id: int | None = None
) -> int:
    """The batch id every target has committed (read back from the tables themselves).

    ``target_batch_id``: the target table's, when the caller has just read it (the table is not loaded again).
    """
    through = cp.committed_batch(load_table_or_none(catalog, cfg)) if target_batch_id is None else target_batch_id
    ccfg = changelog_config(cfg, stream)
    if ccfg is not None:
        through = min(through, cp.committed_batch(load_table_or_none(catalog, ccfg)))
    return through
