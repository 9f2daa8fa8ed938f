"""Publish a run: read its commit back, then mirror the watermark into the Variable."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from snowberg.config.table_config import TableConfig
from snowberg.core import faults
from snowberg.core.window import Window
from snowberg.iceberg import state
from snowberg.iceberg.current import CurrentProof, record_proof
from snowberg.iceberg.tables import load_table_or_none
from snowberg.iceberg.watch_state import RunPhase, finish_run, record_run
from snowberg.load.plan import BACKFILL, INCREMENTAL, WATCH_DUE, WATCH_SIGNAL

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)


def publish(
    cfg: TableConfig,
    catalog: Catalog,
    w: Window,
    variables: state.VariableStore,
) -> dict[str, Any]:
    """Read the commit back, then mirror the watermark into the Variable."""
    faults.crash_point("before_publish")
    table = load_table_or_none(catalog, cfg)
    st = state.read_state(table)
    snap = state.find_run_commit(table, w.run_id, w.mode, w.high)
    if snap is None and not w.dry_run and st is not None and st.watermark != w.base_watermark and w.mode == INCREMENTAL:
        raise state.StateError(f"run {w.run_id}: no commit of this run found on the table; refusing to publish")
    action = state.reconcile(cfg.variable_key, st, variables, table) if st is not None else "no state yet"
    if w.mode != BACKFILL and not w.dry_run and w.planned_at:
        # The run's commit (or its finding that the lake held every re-read row) makes the lake current
        # as of the plan: what the freshness check measures (an idle run records it in its plan task).
        proof = CurrentProof(
            proven_at=w.planned_at,
            run_id=w.run_id,
            dag_id=w.dag_id,
            watermark=st.watermark if st else None,
            snapshot_id=st.snapshot_id if st else None,
        )
        record_proof(cfg.target, proof, variables)
    if WATCH_SIGNAL in w.extra:
        # The triggerer compares the source with what this run saw only once its rows are in the lake.
        finish_run(
            cfg.target,
            variables,
            run_id=w.run_id,
            watermark=st.watermark if st else None,
            snapshot_id=st.snapshot_id if st else None,
        )
    summary = {
        "table": cfg.target,
        "rows_loaded": int(snap.summary.additional_properties.get(state.ROWS, "0"))
        if snap is not None and snap.summary
        else 0,
        "snapshot_id": snap.snapshot_id if snap is not None else (st.snapshot_id if st else None),
        "watermark": st.watermark if st else None,
        "variable": cfg.variable_key,
        "variable_action": action,
        "mode": w.mode,
    }
    log.info(
        "%s: rows loaded %s, snapshot id %s, watermark %s (Variable %s: %s)",
        cfg.target,
        summary["rows_loaded"],
        summary["snapshot_id"],
        summary["watermark"],
        cfg.variable_key,
        action,
    )
    return summary


def reconcile_before_plan(
    cfg: TableConfig, catalog: Catalog, variables: state.VariableStore
) -> tuple[Table | None, str]:
    """The lake table (None before the first run) and what reconciling its Variable mirror with it did.

    Runs before planning so a crash after an earlier commit is adopted from the table, and a Variable
    ahead of the table (lost commits) stops the run with ``StateError`` before anything is read.
    """
    table = load_table_or_none(catalog, cfg)
    st = state.read_state(table)
    return table, state.reconcile(cfg.variable_key, st, variables, table)


def record_watched_plan(target: str, w: Window, variables: state.VariableStore, *, idle: bool) -> None:
    """A watched table's plan records what it saw of the source (``snowberg.iceberg.watch_state``): ``done`` when
    the run found nothing to load, else ``running`` until ``publish``; other runs (no token read) record nothing."""
    if WATCH_SIGNAL not in w.extra:
        return
    seen: dict[str, Any] = {
        "run_id": w.run_id,
        "dag_id": w.dag_id,
        "observed_at": w.planned_at,
        "signal": w.extra[WATCH_SIGNAL],
        "due": w.extra.get(WATCH_DUE),
    }
    if idle:
        seen.update(watermark=w.base_watermark, snapshot_id=w.base_snapshot_id)
    record_run(target, variables, phase=RunPhase.DONE if idle else RunPhase.RUNNING, **seen)
