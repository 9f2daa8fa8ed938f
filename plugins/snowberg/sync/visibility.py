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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from snowberg.core.identifiers import TableName
from snowberg.sync.native import counts_by_lineage, state_for

log = logging.getLogger(__name__)


class VisibilityError(RuntimeError):
    """Snowflake does not show rows a sync committed."""


def check_native(conn: Any, result: Mapping[str, Any]) -> dict[str, Any]:
    """Verify a ``NativeLoadResult`` (as a dict) against Snowflake."""
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
    log.info("visible in Snowflake: %s", summary)
    return summary


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
) -> dict[str, Any]:
    """Verify an ``IcebergSyncResult`` (as a dict): Snowflake's ``COUNT(*)`` matches the catalog's.

    ``current_rows`` re-reads the target's live row count from the catalog, so
    a commit by another writer after ours is not mistaken for a failure.
    """
    committed = result.get("target_total_rows")
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
