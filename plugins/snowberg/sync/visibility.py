"""After a write into Snowflake: ask Snowflake whether the rows are there.

A sync that committed is not done until Snowflake's own SQL returns the rows.
Both checks query Snowflake (never the lake or the catalog alone) and raise
``VisibilityError`` naming what is missing:

* native targets: the state row holds the synced source snapshot id, and the
  lineage column holds exactly the expected number of rows for every source
  snapshot of the run (without a lineage column: at least the loaded rows);
* Snowflake-managed Iceberg targets: ``COUNT(*)`` in Snowflake equals the live
  row count of the committed target snapshot, or of the target's current
  snapshot if another writer committed since. Polled briefly, since Horizon
  makes a commit visible at once and a lag means something is wrong.

Keyed syncs (a ``key_columns`` run) are also compared with the source, because
a change applied by key can lose or multiply rows the run did not write:

* the target holds as many rows as the source at the synced snapshot (its
  live row count, from metadata; ``COUNT(*)`` in Snowflake);
* given the source table, a ``changes`` run's touched keys (removed or
  written by the change, re-read from the source's touched files) each hold in
  Snowflake exactly as many rows as the change wrote for them (one query per
  ``KEY_CHUNK`` keys, only the differing keys come back).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from snowberg.core.identifiers import TableName, quote_identifier
from snowberg.sync.ddl import target_columns
from snowberg.sync.native import counts_by_lineage, sql_value, state_for
from snowberg.sync.snapshots import ChangePlan, SyncMode, read_changes

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

KEY_CHUNK = 1000  # touched keys compared per query (bound values: the statement stays far below 1 MB)


class VisibilityError(RuntimeError):
    """Snowflake does not show rows a sync committed."""


def check_native(conn: Any, result: Mapping[str, Any], *, source: Table | None = None) -> dict[str, Any]:
    """Verify a ``NativeLoadResult`` (as a dict) against Snowflake.

    ``source``: the lake table the run read; with it, a keyed change's touched keys are compared too.
    """
    target = TableName.parse(result["target"])
    state_table = TableName.parse(result["state_table"])
    st = state_for(conn, target, state_table)
    want = result.get("to_snapshot_id")
    if want is not None and (st is None or st.source_snapshot_id != int(want)):
        raise VisibilityError(
            f"{state_table} says {target} is synced to source snapshot "
            f"{st.source_snapshot_id if st else None}, expected {want}"
        )
    expected = {str(k): int(v) for k, v in (result.get("rows_by_snapshot") or {}).items()}
    lineage = result.get("lineage_column")
    if lineage and expected:
        got = counts_by_lineage(conn, target, lineage, [int(k) for k in expected])
        wrong = {k: (v, got.get(k, 0)) for k, v in expected.items() if got.get(k, 0) != v}
        if wrong:
            detail = ", ".join(f"snapshot {k}: expected {e:,}, found {g:,}" for k, (e, g) in wrong.items())
            raise VisibilityError(f"{target}: rows of synced source snapshots are missing or duplicated ({detail})")
    elif expected:
        cur = conn.cursor()
        try:
            cur.execute(f"SELECT COUNT(*) FROM {target.quoted()}")
            (n,) = cur.fetchone()
        finally:
            cur.close()
        if int(n) < sum(expected.values()):
            raise VisibilityError(
                f"{target}: {n:,} rows in Snowflake, fewer than the {sum(expected.values()):,} just loaded"
            )
    summary = {"target": str(target), "snapshot": want, "rows_checked": sum(expected.values()), "status": "visible"}
    if result.get("key_columns"):
        summary.update(compare_with_source(conn, target, result, source, snowflake_count(conn, target)))
    log.info("visible in Snowflake: %s", summary)
    return summary


def compare_with_source(
    conn: Any, table: TableName, result: Mapping[str, Any], source: Table | None, seen: int
) -> dict[str, Any]:
    """A keyed run's target against the source: the row count, and the rows of the keys the change touched.

    ``seen``: the target's ``COUNT(*)`` in Snowflake. Returns what was compared (``source_rows``, and
    ``keys_checked`` when the touched keys were); raises ``VisibilityError`` naming lost or extra rows.
    """
    out: dict[str, Any] = {}
    want = result.get("source_rows")
    if want is not None:
        if seen != int(want):
            raise VisibilityError(
                f"{table}: Snowflake returns {seen:,} rows, the source holds {int(want):,} at snapshot "
                f"{result.get('to_snapshot_id')}: the keyed sync by {list(result['key_columns'])} lost or "
                "multiplied rows (a key that is not unique, or a NULL key?)"
            )
        out["source_rows"] = int(want)
    if source is not None and result.get("mode") == SyncMode.CHANGES.value:
        keys = list(result["key_columns"])
        names = list(result.get("key_target_columns") or [])
        expected = touched_keys(source, result)
        wrong = differing_keys(conn, table, source, keys, names, expected)
        if wrong:
            detail = "; ".join(
                f"{dict(zip(keys, k, strict=True))}: expected {e}, found {f}" for k, e, f in wrong[:KEYS_SHOWN]
            )
            raise VisibilityError(
                f"{table}: rows of {len(wrong):,} key(s) the change touched differ from the source ({detail})"
            )
        out["keys_checked"] = expected.num_rows
    return out


KEYS_SHOWN = 10  # differing keys named in a VisibilityError


def touched_keys(source: Table, result: Mapping[str, Any]) -> pa.Table:
    """The keys a ``changes`` run removed or wrote, each with the rows the change wrote for it (``_expected``).

    Re-read from the source's touched files (key columns only), as the run read them.
    """
    import pyarrow as pa

    keys = list(result["key_columns"])
    plan = ChangePlan(
        source_uuid=str(result.get("source_uuid") or ""),
        mode=SyncMode.CHANGES,
        from_snapshot_id=int(result["from_snapshot_id"]),
        to_snapshot_id=int(result["to_snapshot_id"]),
        key_columns=keys,
    )
    ch = read_changes(source, plan, columns=keys)
    schema = ch.deleted_keys.select(keys).schema
    out_schema = pa.schema([*schema, pa.field("_expected", pa.int64())])
    written = (
        pa.Table.from_batches([b.select(keys) for _, b in ch.upserts]).cast(schema)
        if ch.upserts
        else schema.empty_table()
    )
    counts = written.group_by(keys, use_threads=False).aggregate([([], "count_all")])
    # keys removed and not written again (read_changes already left out the rewritten ones): 0 rows each
    gone = ch.deleted_keys.select(keys).group_by(keys, use_threads=False).aggregate([])
    gone = gone.append_column("_expected", pa.array([0] * gone.num_rows, pa.int64()))
    return pa.concat_tables(
        [
            counts.rename_columns([*keys, "_expected"]).cast(out_schema),
            gone.select([*keys, "_expected"]).cast(out_schema),
        ]
    )


def differing_keys(
    conn: Any, table: TableName, source: Table, keys: Sequence[str], names: Sequence[str], expected: pa.Table
) -> list[tuple[tuple[Any, ...], int, int]]:
    """``(key, rows expected, rows found)`` for the keys whose rows in Snowflake differ from ``expected``.

    ``names``: the target's column names of the key (default: the native target's, upper-cased like
    unquoted Snowflake names). Values are bound and cast to the key's Snowflake type.
    """
    by_source = {c.source_name: c for c in target_columns(source.schema())}
    cols = [by_source[k] for k in keys]
    quoted = [quote_identifier(n, "column") for n in names] if names else [c.quoted for c in cols]
    sel = ", ".join(
        f"CAST(column{i} AS {c.sql_type}) AS {q}" for i, (c, q) in enumerate(zip(cols, quoted, strict=True), 1)
    )
    sel += f', CAST(column{len(cols) + 1} AS NUMBER(19,0)) AS "_EXPECTED"'
    on = " AND ".join(f"t.{q} = d.{q}" for q in quoted)
    dk = ", ".join(f"d.{q}" for q in quoted)
    pylists = [expected.column(k).to_pylist() for k in keys]
    counts = expected.column("_expected").to_pylist()
    out: list[tuple[tuple[Any, ...], int, int]] = []
    cur = conn.cursor()
    try:
        for lo in range(0, expected.num_rows, KEY_CHUNK):
            hi = min(lo + KEY_CHUNK, expected.num_rows)
            row = "(" + ", ".join(["%s"] * (len(cols) + 1)) + ")"
            params: list[Any] = []
            for i in range(lo, hi):
                params += [sql_value(pl[i], c) for pl, c in zip(pylists, cols, strict=True)] + [counts[i]]
            cur.execute(
                f'SELECT {dk}, d."_EXPECTED", COUNT(t."_ONE") FROM (SELECT {sel} FROM VALUES '
                f'{", ".join([row] * (hi - lo))}) AS d LEFT JOIN (SELECT 1 AS "_ONE", {", ".join(quoted)} FROM '
                f'{table.quoted()}) AS t ON {on} GROUP BY {dk}, d."_EXPECTED" HAVING COUNT(t."_ONE") <> d."_EXPECTED"',
                params,
            )
            out += [(tuple(r[: len(cols)]), int(r[len(cols)]), int(r[len(cols) + 1])) for r in cur.fetchall()]
    finally:
        cur.close()
    return out


def snowflake_count(conn: Any, table: TableName) -> int:
    """``COUNT(*)`` of ``table`` as Snowflake sees it now."""
    cur = conn.cursor()
    try:
        cur.execute(f"SELECT COUNT(*) FROM {table.quoted()}")
        (n,) = cur.fetchone()
        return int(n)
    finally:
        cur.close()


def check_iceberg(
    conn: Any,
    table: TableName,
    result: Mapping[str, Any],
    *,
    current_rows: Callable[[], int | None] | None = None,
    timeout: float = 30.0,
    interval: float = 2.0,
    source: Table | None = None,
) -> dict[str, Any]:
    """Verify an ``IcebergSyncResult`` (as a dict): Snowflake's ``COUNT(*)`` matches the catalog's.

    ``current_rows`` re-reads the target's live row count from the catalog, so
    a commit by another writer after ours is not mistaken for a failure. A
    keyed run's commit must also hold the source's rows, and (given
    ``source``) Snowflake must show the touched keys' rows as the change wrote
    them, when Snowflake shows our commit.
    """
    committed = result.get("target_total_rows")
    want = result.get("source_rows")
    if result.get("key_columns") and committed is not None and want is not None and int(committed) != int(want):
        raise VisibilityError(
            f"{table}: the committed target snapshot {result.get('target_snapshot_id')} holds {int(committed):,} "
            f"rows, the source {int(want):,} at snapshot {result.get('to_snapshot_id')}: the keyed sync by "
            f"{list(result['key_columns'])} lost or multiplied rows (a key that is not unique, or a NULL key?)"
        )
    deadline = time.monotonic() + timeout
    while True:
        acceptable = {n for n in (committed, current_rows() if current_rows else None) if n is not None}
        if not acceptable:
            log.warning("%s: the target's row count is unknown (equality deletes); visibility not checked", table)
            return {"target": str(table), "status": "unknown"}
        seen = snowflake_count(conn, table)
        if seen in acceptable:
            summary = {
                "target": str(table),
                "rows": seen,
                "target_snapshot_id": result.get("target_snapshot_id"),
                "status": "visible",
            }
            if result.get("key_columns") and seen == committed:  # Snowflake shows our commit, not a later one
                summary.update(compare_with_source(conn, table, result, source, seen))
            log.info("visible in Snowflake: %s", summary)
            return summary
        if time.monotonic() >= deadline:
            raise VisibilityError(
                f"{table}: Snowflake returns {seen:,} rows, the catalog's committed snapshot "
                f"{result.get('target_snapshot_id')} holds {sorted(acceptable)} — "
                "the commit is not visible in Snowflake"
            )
        log.info(
            "%s: Snowflake shows %s rows, expecting %s; checking again in %ss",
            table,
            seen,
            sorted(acceptable),
            interval,
        )
        time.sleep(interval)
