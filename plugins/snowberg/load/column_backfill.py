"""Fill a column the source gained for the rows already in the lake (``on_column_added: backfill``).

``ALTER TABLE … ADD COLUMN c … DEFAULT x``, or an UPDATE that fills a new
column without moving the cursor, gives Snowflake values for rows the lake
loaded earlier; no incremental run reads those rows again, so the lake keeps
NULL there. The run that adds the column to the lake table records it in the
table property ``snowberg.columns-to-backfill`` (``iceberg.tables.mark_backfill``,
in the same commit). After that commit, ``backfill_added_columns``:

1. picks the data files that may hold such rows: files written before the
   column existed (no value count for it) or holding NULLs in it (metadata
   only: the manifests' per-column counts);
2. reads their live rows (position deletes applied) batch by batch, and for
   each batch of rows (``batch_keys`` key values) asks Snowflake for the new
   columns of those keys (one query, keys as bind parameters);
3. writes the rows with the values filled in as new data files, and commits
   them through the commit gate in ONE commit that removes the old files (and
   their position delete files), clears the property and records the work in
   the snapshot summary (``snowberg.mode=column-backfill``, the columns, the rows).

Memory is one batch of rows (plus the writer's buffer), never the table. The
cost is one-time and ∝ the table: every lake file holding such rows is read
and rewritten, and Snowflake answers one query per ``batch_keys`` key values.

Exactly once: the property is removed by the backfill's own commit, so a
crash before it leaves the property (a retry backfills, once), and a crash
after it leaves nothing to do. The commit asserts the snapshot it read; a
concurrent commit makes it fail and the retry starts over from the new state.

A row whose key Snowflake no longer has keeps what the lake holds. The values
are Snowflake's at the time of the backfill.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from snowberg.config.table_config import ColumnAddPolicy, TableConfig, column_backfill_refusal
from snowberg.core.identifiers import validate_identifier
from snowberg.iceberg import gate, state
from snowberg.iceberg.maintenance import read_live_rows
from snowberg.iceberg.tables import BACKFILL_PENDING, arrow_schema, load_table_or_none, pending_backfill
from snowberg.iceberg.write import write_data_files
from snowberg.load.extract import mapping_options
from snowberg.mapping.cast import cast_batch
from snowberg.mapping.columns import SchemaEvolutionError
from snowberg.mapping.rules import map_columns
from snowberg.snowflake.source import SourceQuery, fetch_batches, result_columns

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

log = logging.getLogger(__name__)

MODE = state.COLUMN_BACKFILL_MODE  # snowberg.mode of the backfill's commit
COLUMNS = state.PREFIX + "columns-backfilled"  # summary: the columns filled in
ROWS_BACKFILLED = state.PREFIX + "rows-backfilled"  # summary: the lake rows rewritten with them
# Key values per Snowflake query: one bind parameter per key column and row, so a two-column key reads half as
# many rows per query. Snowflake allows at most 16,384 expressions in an IN list, and the connector binds
# client-side (pyformat): the statement's text grows with the keys, and Snowflake's limit on it is 1 MB.
BATCH_KEYS = 10_000


@dataclass(kw_only=True)
class ColumnBackfill:
    """What a backfill did: its commit, the rows and files it rewrote, and the Snowflake queries it sent."""

    status: str  # committed | nothing_to_rewrite
    columns: list[str]
    files_rewritten: int = 0
    rows: int = 0
    rows_found: int = 0  # rows whose key Snowflake still has
    queries: int = 0
    snapshot_id: int | None = None
    seconds: float = 0.0
    batch_rows: list[int] = field(default_factory=list)  # rows per Snowflake query, in order

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def exact_quoted(name: str) -> str:
    """A column name exactly as Snowflake reported it, validated and double-quoted.

    ``core.identifiers.quote_identifier`` upper-cases an all-lower-case name (a
    config's ``orders`` means ``ORDERS``); a name from result metadata is
    already exact, so it is quoted as it is.
    """
    return f'"{validate_identifier(name, "column")}"'


def needs_values(data_file: Any, field_ids: Sequence[int]) -> bool:
    """May the file hold rows without a value in one of the columns (metadata only)?

    A file written before a column existed has no value count for it; a file
    with a NULL count above zero holds NULLs. A file without counts is read.
    """
    counts = data_file.value_counts or {}
    nulls = data_file.null_value_counts or {}
    for fid in field_ids:
        if fid not in counts or fid not in nulls or nulls[fid] > 0:
            return True
    return False


def _rechunk(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """The stream regrouped into tables of ``rows`` rows (the last one shorter): each is one Snowflake query."""
    import pyarrow as pa

    buf: list[pa.RecordBatch] = []
    n = 0
    for b in batches:
        while b.num_rows:
            take = min(rows - n, b.num_rows)
            buf.append(b.slice(0, take))
            n += take
            b = b.slice(take)
            if n == rows:
                yield pa.Table.from_batches(buf)
                buf, n = [], 0
    if buf:
        yield pa.Table.from_batches(buf)


class SourceLookup:
    """The new columns of a batch of keys, read from Snowflake and cast to the lake's types."""

    def __init__(self, cfg: TableConfig, conn: Any, keys: list[str], columns: list[str], target: pa.Schema) -> None:
        self.cfg, self.conn, self.keys, self.columns, self.target = cfg, conn, keys, columns, target
        self.from_clause = SourceQuery(cfg).from_clause
        self.opts = mapping_options(cfg)
        cur = conn.cursor()
        try:
            cur.execute(f"SELECT * FROM {self.from_clause} LIMIT 0")  # noqa: S608 - quoted names only
            by_lake_name = {c.name.lower(): c.name for c in result_columns(cur)}
        finally:
            cur.close()
        missing = [k for k in keys if k not in by_lake_name]
        if missing:
            raise SchemaEvolutionError(
                f"table {cfg.name!r}: primary_key column(s) {missing} are not in the source: cannot backfill "
                f"{columns}. Nothing was written."
            )
        self.columns = [c for c in columns if c in by_lake_name]
        self.key_sql = [exact_quoted(by_lake_name[k]) for k in keys]
        self.select = ", ".join(self.key_sql + [exact_quoted(by_lake_name[c]) for c in self.columns])

    def sql(self, key_rows: list[tuple[Any, ...]]) -> tuple[str, dict[str, Any]]:
        """The query for these keys: ``key IN (…)``, or ``(k1, k2) IN ((…), …)`` for a composite key."""
        params: dict[str, Any] = {}
        items = []
        for i, row in enumerate(key_rows):
            names = []
            for j, v in enumerate(row):
                params[f"k{i}_{j}"] = v
                names.append(f"%(k{i}_{j})s")
            items.append(names[0] if len(names) == 1 else f"({', '.join(names)})")
        lhs = self.key_sql[0] if len(self.key_sql) == 1 else f"({', '.join(self.key_sql)})"
        where = f"{lhs} IN ({', '.join(items)})"
        return f"SELECT {self.select} FROM {self.from_clause} WHERE {where}", params  # noqa: S608 - binds, quoted

    def fetch(self, key_rows: list[tuple[Any, ...]]) -> pa.Table:
        """The source's rows of these keys: key columns and the new columns, in the lake's Arrow types."""
        import pyarrow as pa

        sql, params = self.sql(key_rows)
        cur = self.conn.cursor()
        try:
            cur.execute(sql, params)
            mapped = map_columns(result_columns(cur), self.opts)
            want = pa.schema([self.target.field(n) for n in self.keys + self.columns])
            got = [cast_batch(raw, mapped, want, self.opts) for raw in fetch_batches(cur)]
        finally:
            cur.close()
        return pa.Table.from_batches(got, want)


def _key_tuples(t: pa.Table, keys: list[str]) -> list[tuple[Any, ...]]:
    return list(zip(*(t.column(k).to_pylist() for k in keys), strict=True))


def fill(lake: pa.Table, found: pa.Table, keys: list[str], columns: list[str]) -> tuple[pa.Table, int]:
    """``lake`` with ``columns`` taken from ``found`` by key (a key ``found`` lacks keeps the lake's value)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    at = {k: i for i, k in enumerate(_key_tuples(found, keys))}
    idx = pa.array([at.get(k) for k in _key_tuples(lake, keys)], pa.int64())
    hit = pc.is_valid(idx)
    for c in columns:
        i = lake.schema.get_field_index(c)
        filled = pc.if_else(hit, found.column(c).take(idx), lake.column(c))
        lake = lake.set_column(i, lake.schema.field(i), filled)
    return lake, int(pc.sum(hit).as_py() or 0)


def backfill_added_columns(
    cfg: TableConfig,
    conn: Any,
    catalog: Catalog,
    *,
    run_id: str,
    dag_id: str,
    batch_keys: int = BATCH_KEYS,
) -> ColumnBackfill | None:
    """Fill the columns ``snowberg.columns-to-backfill`` names for the rows already in the lake (module doc).

    ``batch_keys``: key values per Snowflake query (rows per query × key columns). None when there is nothing
    pending (or the table's policy is not ``backfill``).
    """
    started = time.monotonic()
    if cfg.on_column_added is not ColumnAddPolicy.BACKFILL:
        return None  # before any catalog call: a run of such a table pays nothing here
    table = load_table_or_none(catalog, cfg)  # one metadata read per run; the table records what is pending
    if table is None:
        return None
    pending = pending_backfill(table.properties)
    if not pending:
        return None
    refused = column_backfill_refusal(cfg)
    if refused:
        raise SchemaEvolutionError(f"table {cfg.name!r}: on_column_added 'backfill' {refused}")
    schema = table.schema()
    keys = [k.lower() for k in cfg.primary_key]
    present = {f.name: f.field_id for f in schema.fields}
    target = arrow_schema(schema)
    # Columns dropped from the lake or the source since they were added have nothing to fill.
    lookup = SourceLookup(cfg, conn, keys, [c for c in pending if c in present], target)
    columns = lookup.columns
    snap = table.current_snapshot()
    tasks = []
    if snap is not None and columns:
        ids = [present[c] for c in columns]
        tasks = [t for t in table.scan(snapshot_id=snap.snapshot_id).plan_files() if needs_values(t.file, ids)]
    if not tasks:
        log.info("%s: no lake file lacks values of %s: nothing to backfill", cfg.name, pending)
        tx = table.transaction()
        tx.remove_properties(BACKFILL_PENDING)
        tx.commit_transaction()
        return ColumnBackfill(status="nothing_to_rewrite", columns=columns, seconds=time.monotonic() - started)
    result = ColumnBackfill(status="committed", columns=columns, files_rewritten=len(tasks))
    per_query = max(1, batch_keys // len(keys))
    log.info(
        "%s: backfilling %s for the rows of %d lake file(s), %s rows per Snowflake query (a one-time cost ∝ the table)",
        cfg.name,
        columns,
        len(tasks),
        f"{per_query:,}",
    )

    def live_rows() -> Iterator[pa.RecordBatch]:
        for t in tasks:
            yield from read_live_rows(table.metadata, table.io, t)

    def filled() -> Iterator[pa.RecordBatch]:
        for part in _rechunk(live_rows(), per_query):
            lake = part.cast(target)
            lake, hits = fill(lake, lookup.fetch(_key_tuples(lake, keys)), keys, columns)
            result.rows_found += hits
            result.queries += 1
            result.batch_rows.append(lake.num_rows)
            result.rows += lake.num_rows
            yield from lake.to_batches()

    tx = table.transaction()
    tx.remove_properties(BACKFILL_PENDING)
    data_files = list(write_data_files(table, tx, target, filled(), cfg.batch_rows))
    snapshot = gate.commit(
        table,
        tx,
        state_props=state.current_state_props(table),
        summary={
            state.RUN_ID: run_id,
            state.MODE: MODE,
            state.ROWS: "0",
            COLUMNS: ",".join(columns),
            ROWS_BACKFILLED: str(result.rows),
        },
        replaced=gate.Replacement(files=[t.file for t in tasks]),
        data_files=data_files,
        crash_points=("column_backfill_before_commit", "column_backfill_after_commit"),
        dag_id=dag_id,
    )
    result.snapshot_id = snapshot.snapshot_id
    result.seconds = time.monotonic() - started
    log.info(
        "%s: backfilled %s: %s rows in %d file(s) rewritten (%s found in Snowflake) with %d queries; snapshot %s",
        cfg.name,
        columns,
        f"{result.rows:,}",
        result.files_rewritten,
        f"{result.rows_found:,}",
        result.queries,
        snapshot.snapshot_id,
    )
    return result
