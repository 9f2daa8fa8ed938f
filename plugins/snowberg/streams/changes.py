"""Stateless range reads with the CHANGES clause: backfill a window of changes.

``SELECT … FROM t CHANGES(INFORMATION => DEFAULT) AT(TIMESTAMP => a) END(TIMESTAMP => b)``
returns the net change per row between two points in the table's history,
in the same shape as a stream (``METADATA$ACTION``/``ISUPDATE``/``ROW_ID``),
but has no offset: reading it consumes nothing, so a window can be read
again and again. It needs ``CHANGE_TRACKING = TRUE`` on the table and a
window inside the table's Time Travel retention.

Two targets:

* ``changelog``: the window's changes are appended to the changelog table
  (history of changes from before snowberg consumed the stream, or a gap).
* ``table``: the window's changes are applied to the target by primary key,
  like a stream batch. Refused when the window starts before the last change
  the stream already applied (the stream's ``consumed_at``): re-applying an
  older window would put back row versions newer changes replaced.

Each window commits once: a commit of the same window on the table makes a
re-run append nothing. A backfill commit never carries the stream batch id.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from snowberg.config.stream_settings import StreamSource
from snowberg.config.table_config import ColumnSettings, TableConfig
from snowberg.core.results import Status
from snowberg.iceberg import gate
from snowberg.iceberg import state as core_state
from snowberg.iceberg.keys import DuplicateKeyError, check_keys_not_null, key_filter
from snowberg.iceberg.tables import begin_write, load_table_or_none
from snowberg.iceberg.write import write_data_files
from snowberg.load.extract import mapping_options
from snowberg.mapping.cast import cast_batch
from snowberg.mapping.rules import MappingOptions, map_columns
from snowberg.snowflake.source import fetch_batches, result_columns
from snowberg.streams import checkpoint as cp
from snowberg.streams import sql as S
from snowberg.streams.apply import changelog_config, check_keys, stored_key
from snowberg.streams.errors import StreamConfigError, StreamError
from snowberg.streams.params import ChangesTarget
from snowberg.streams.staging import describe

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

log = logging.getLogger(__name__)


def _utc(v: datetime) -> datetime:
    return (v if v.tzinfo else v.replace(tzinfo=UTC)).astimezone(UTC)


def read_changes(
    conn: Any,
    table: Any,
    *,
    start: datetime,
    end: datetime | None,
    append_only: bool,
    settings: ColumnSettings | None = None,
) -> pa.Table:
    """The window's changes as one Arrow table (source columns + the three METADATA$ columns).

    ``settings``: the table's ``columns`` (excluded columns left out, hashed ones hashed in Snowflake).
    """
    import pyarrow as pa

    columns = [c.name for c in describe(conn, S.describe_table_sql(table))]
    text = S.changes_sql(table, columns, append_only=append_only, end=end is not None, settings=settings)
    params: dict[str, Any] = {"start": _utc(start).isoformat()}
    if end is not None:
        params["end"] = _utc(end).isoformat()
    cur = conn.cursor()
    try:
        cur.execute(text, params)
        mds = result_columns(cur)
        chunks = [pa.Table.from_batches([b]) for b in fetch_batches(cur)]
    finally:
        cur.close()
    if chunks:
        return pa.concat_tables(chunks)
    return pa.table({c.name: pa.array([], type=pa.null()) for c in mds})


def net_changes(changes: pa.Table, key: list[str], name: str = "") -> tuple[pa.Table, pa.Table]:
    """(keys to delete, rows to append): the last change per key, deletes ordered before inserts.

    CHANGES returns the net change per row over the window, so one key has at
    most one INSERT (its row at the end of the window) unless the source holds
    two live rows for it: that is refused (keeping one would drop the other),
    as are NULL key values, before anything is written.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = changes.to_pylist()
    rows.sort(key=lambda r: (0 if r[S.S_ACTION] == S.ChangeAction.DELETE else 1, str(r[S.S_ROW_ID])))
    source_cols = [c for c in changes.column_names if c not in S.META_NAMES]
    if not key:
        keep = changes.filter(pc.equal(changes[S.S_ACTION], S.ChangeAction.INSERT.value)).select(source_cols)
        return pa.table({}), keep
    check_keys_not_null(changes, key, name)
    inserts = changes.filter(pc.equal(changes[S.S_ACTION], S.ChangeAction.INSERT.value)).select(key)
    counted = inserts.group_by(key).aggregate([([], "count_all")])
    dup = counted.filter(pc.greater(counted["count_all"], 1))
    if dup.num_rows:
        raise DuplicateKeyError(
            f"table {name!r}: primary key {key} has two live rows in the CHANGES window (e.g. "
            f"{dup.slice(0, 3).select(key).to_pylist()}); keeping one would silently drop the other. Nothing was "
            "written."
        )
    last: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        last[tuple(r[k] for k in key)] = r
    keys = changes.select(key).group_by(key).aggregate([])
    final = [r for r in last.values() if r[S.S_ACTION] == S.ChangeAction.INSERT]
    schema = changes.select(source_cols).schema
    return keys, pa.Table.from_pylist([{c: r[c] for c in source_cols} for r in final], schema=schema)


def backfill_changes(
    cfg: TableConfig,
    stream: StreamSource,
    conn: Any,
    catalog: Catalog,
    *,
    start: datetime,
    end: datetime,
    run_id: str,
    target: ChangesTarget | str = ChangesTarget.TABLE,
    dag_id: str = "",
) -> dict[str, Any]:
    """Read ``[start, end]`` with CHANGES (nothing consumed) and commit it once to the table or the changelog.

    ``dag_id``: the run's DAG, recorded with the run id in the commit.
    """
    started = time.monotonic()
    targets = tuple(t.value for t in ChangesTarget)
    if target not in targets:
        raise StreamConfigError(f"changes backfill target must be one of {targets}, not {target!r}")
    target = ChangesTarget(target)
    start, end = _utc(start), _utc(end)
    if end <= start:
        raise StreamConfigError(f"changes window end {end.isoformat()} must be after its start {start.isoformat()}")
    src = stream.table_name(cfg.source.table)
    if src is None:
        raise StreamConfigError(f"stream {stream.name}: on_table (or source.table) is needed for a CHANGES backfill")
    tcfg = cfg if target == ChangesTarget.TABLE else changelog_config(cfg, stream)
    if tcfg is None:
        raise StreamConfigError(f"table {cfg.name!r}: a changelog backfill needs stream.changelog_target")
    key = check_keys(cfg, stream) if target == ChangesTarget.TABLE else []
    table = load_table_or_none(catalog, tcfg)
    s_iso, e_iso = start.isoformat(), end.isoformat()
    done = core_state.find_commit(table, cp.changes_identity(s_iso, e_iso))
    if done is not None:
        log.info(
            "%s: window [%s, %s] already committed in snapshot %s: nothing to do",
            tcfg.target,
            s_iso,
            e_iso,
            done.snapshot_id,
        )
        return {
            "status": Status.ALREADY_COMMITTED.value,
            "snapshot_id": done.snapshot_id,
            "rows": 0,
            "target": tcfg.target,
        }
    if target == ChangesTarget.TABLE:
        st = cp.read_stream_state(table)
        if st is not None and st.consumed_at:
            consumed = _utc(datetime.fromisoformat(st.consumed_at.replace("Z", "+00:00")))
            if start < consumed:
                raise StreamError(
                    f"{tcfg.target} already holds the stream's changes up to {consumed.isoformat()}; applying the "
                    f"window starting {s_iso} would put back row versions that newer changes replaced. Backfill "
                    "into the changelog (target=changelog), or start the window at or after that time."
                )

    changes = read_changes(conn, src, start=start, end=end, append_only=stream.append_only, settings=cfg.columns)
    log.info("CHANGES on %s in [%s, %s]: %d change rows (nothing consumed)", src, s_iso, e_iso, changes.num_rows)
    base = mapping_options(cfg)
    opts = MappingOptions(
        number_as_long=base.number_as_long, timestamp_nanos=base.timestamp_nanos, geo_format=base.geo_format
    )

    # Column metadata for the mapping comes from Snowflake, not from the Arrow widths.
    cur = conn.cursor()
    try:
        columns = [c.name for c in describe(conn, S.describe_table_sql(src))]
        cur.execute(
            S.changes_sql(src, columns, append_only=stream.append_only, end=True, settings=cfg.columns) + " LIMIT 0",
            {"start": s_iso, "end": e_iso},
        )
        meta = [c for c in result_columns(cur)]
    finally:
        cur.close()
    if target == ChangesTarget.TABLE:
        stored = stored_key(columns, key)
        keys, rows = net_changes(changes, stored, tcfg.name)
        mapped = map_columns([c for c in meta if c.name not in S.META_NAMES], opts)
        data = rows
    else:
        keys = None
        data = changes.append_column("SNOWBERG_CHANGES_START", _const(changes.num_rows, s_iso)).append_column(
            "SNOWBERG_CHANGES_END", _const(changes.num_rows, e_iso)
        )
        mapped = map_columns(meta, opts) + _extra_text_columns(("SNOWBERG_CHANGES_START", "SNOWBERG_CHANGES_END"), opts)

    table, tx, schema, _ = begin_write(catalog, tcfg, table, mapped)
    batches = [cast_batch(b, mapped, schema, opts) for b in data.to_batches()] if data.num_rows else []
    files = list(write_data_files(table, tx, schema, iter(batches), cfg.batch_rows))
    summary = {
        core_state.RUN_ID: run_id,
        cp.STREAM: stream.name,
        core_state.ROWS: str(data.num_rows),
        core_state.VERSION: "1",
        **cp.changes_identity(s_iso, e_iso),
    }
    replaced: Any = None
    if keys is not None and keys.num_rows:
        from snowberg.mapping.cast import cast_array

        by_name = {m.source.name: m for m in mapped}
        cast = {
            by_name[k].name: cast_array(keys.column(k), by_name[k], opts, target=schema.field(by_name[k].name).type)
            for k in keys.column_names
        }
        import pyarrow as pa

        replaced = key_filter(pa.table(cast))
    # A CHANGES backfill carries no state of its own (it never moves the stream's batch id),
    # so nothing goes into the table-property copy of the state.
    snap = gate.commit(
        table,
        tx,
        state_props={},
        summary=summary,
        replaced=replaced,
        data_files=files,
        state_in_properties=False,
        crash_points=None,
        dag_id=dag_id,
    )
    log.info(
        "%s: committed CHANGES window [%s, %s] in snapshot %s (%d rows)",
        tcfg.target,
        s_iso,
        e_iso,
        snap.snapshot_id,
        data.num_rows,
    )
    return {
        "status": Status.COMMITTED.value,
        "snapshot_id": snap.snapshot_id,
        "rows": data.num_rows,
        "keys": 0 if keys is None else keys.num_rows,
        "target": tcfg.target,
        "seconds": time.monotonic() - started,
    }


def _const(n: int, value: str) -> pa.Array:
    import pyarrow as pa

    return pa.array([value] * n, type=pa.string())


def _extra_text_columns(names: tuple[str, ...], opts: MappingOptions) -> list[Any]:
    from snowberg.mapping.columns import SnowflakeColumn

    return map_columns([SnowflakeColumn(name=n, type="TEXT") for n in names], opts)
