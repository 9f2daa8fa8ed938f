"""The three tasks of a stream run, as functions (operators and tests call these).

consume → load → cleanup. Each reads the Iceberg table's committed batch id
itself, so any of them can be retried, and a whole run can be repeated, with
the same result as one uninterrupted run.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from snowberg.config.stream_settings import StreamSource
from snowberg.config.table_config import OnPolicy, TableConfig
from snowberg.core.window import Mode
from snowberg.iceberg import state as core_state
from snowberg.iceberg.identity import check_identity
from snowberg.iceberg.tables import load_table_or_none
from snowberg.snowflake.policies import check_policies
from snowberg.streams import checkpoint as cp
from snowberg.streams.apply import check_keys, committed_through, load_batches
from snowberg.streams.staging import cleanup, consume, nothing_to_consume
from snowberg.streams.status import check_margin, read_status

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from snowberg.iceberg.state import VariableStore

log = logging.getLogger(__name__)


def variable_key(cfg: TableConfig) -> str:
    """The Airflow Variable that mirrors the table's stream batch id (the table is the truth)."""
    return cfg.iceberg_name.variable_key("stream_batch")


def consume_step(
    cfg: TableConfig,
    stream: StreamSource,
    conn: Any,
    catalog: Catalog,
    *,
    run_id: str,
    recover: bool = False,
) -> dict[str, Any]:
    st = _checked_state(cfg, stream, catalog, mode=Mode.FULL_REFRESH if recover else Mode.INCREMENTAL)
    # Masking and row access policies on the tracked table, before anything is staged (snowflake.policies).
    finding = check_policies(cfg, conn, excluded=cfg.columns.exclude)
    res = consume(
        conn,
        stream,
        source_table=cfg.source.table,
        committed_batch_id=st.batch_id if st else 0,
        committed_generation=st.generation if st else None,
        run_id=run_id,
        recover=recover,
        settings=cfg.columns,
    )
    out = res.to_dict()
    if cfg.on_policy is OnPolicy.ALLOW and finding.references:
        out[core_state.WINDOW_POLICIES_ALLOWED] = f"{finding.summary_text()} (role {finding.role})"
    return out


def idle_step(cfg: TableConfig, stream: StreamSource, conn: Any, catalog: Catalog) -> cp.StreamState | None:
    """The lake table's stream state when this run has nothing to do (``staging.nothing_to_consume``), else None.

    Checks the config against the table first, as the consume does, so a changed key or source is refused on
    a quiet stream too. Before the first commit there is always work (the table, the generation marker).
    Staged rows are counted above the batch every target committed: a changelog behind the target (its commit
    failed after the target's) still has a staged batch to load.
    """
    st = _checked_state(cfg, stream, catalog, mode=Mode.INCREMENTAL)
    if st is None:
        return None
    lowest = committed_through(cfg, stream, catalog, target_batch_id=st.batch_id)
    if not nothing_to_consume(conn, stream, committed_batch_id=lowest):
        return None
    return st


def _checked_state(cfg: TableConfig, stream: StreamSource, catalog: Catalog, *, mode: Mode) -> cp.StreamState | None:
    """The lake table's stream state, after checking the config against the table (keys, recorded identity)."""
    check_keys(cfg, stream)
    table = load_table_or_none(catalog, cfg)
    check_identity(cfg, table, mode=mode)
    return cp.read_stream_state(table)


def load_step(
    cfg: TableConfig,
    stream: StreamSource,
    conn: Any,
    catalog: Catalog,
    *,
    run_id: str,
    consumed: dict[str, Any] | None,
    dag_id: str = "",
) -> dict[str, Any]:
    through = int(consumed["through_batch_id"]) if consumed and consumed.get("through_batch_id") is not None else None
    allowed = (consumed or {}).get(core_state.WINDOW_POLICIES_ALLOWED)
    return load_batches(
        cfg, stream, conn, catalog, run_id=run_id, through_batch_id=through, dag_id=dag_id, policies_allowed=allowed
    ).to_dict()


def cleanup_step(
    cfg: TableConfig,
    stream: StreamSource,
    conn: Any,
    catalog: Catalog,
    *,
    variables: VariableStore | None = None,
) -> dict[str, Any]:
    """Read the commits back, delete the staged rows they hold, then mirror the batch id."""
    through = committed_through(cfg, stream, catalog)
    deleted = cleanup(conn, stream, through_batch_id=through)
    st = cp.read_stream_state(load_table_or_none(catalog, cfg))
    out = {
        "committed_batch_id": through,
        "staging_rows_deleted": deleted,
        "snapshot_id": st.snapshot_id if st else None,
        "variable": variable_key(cfg),
    }
    if variables is not None and st is not None:
        variables.set(
            variable_key(cfg),
            json.dumps({"batch_id": st.batch_id, "snapshot_id": st.snapshot_id, "run_id": st.run_id}, sort_keys=True),
        )
    return out


def staleness_step(stream: StreamSource, conn: Any, *, interval: timedelta) -> dict[str, Any]:
    """Fail (``StreamGoingStaleError``/``StaleStreamError``) when the stream is, or soon will be, stale."""
    status = read_status(conn, stream.stream_name)
    from snowberg.streams.status import require_fresh

    status = require_fresh(status, stream.stream_name)
    text = check_margin(status, stream.stream_name, interval=interval, intervals=stream.stale_alert_intervals)
    log.info("%s", text)
    return {"status": status.to_dict(), "message": text}
