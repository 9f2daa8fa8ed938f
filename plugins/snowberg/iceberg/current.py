"""When a run last proved a table's lake current: the record freshness is measured against.

A run that finds nothing new (an idle run) proves the lake holds every
source row up to its plan, yet it commits nothing, so the snapshot log
cannot show it: a quiet source would look like a stuck pipeline. Each run
that proves the lake current records that here, and the freshness check
(``snowberg.checks.freshness``, in the table's checks DAG) reads it.

Where the record lives, and why:

* an Airflow Variable, ``snowberg__<namespace>__<table>__current``, beside
  the watermark mirror: one row upserted in Airflow's metadata database per
  proving run, no Snowflake statement, readable from any DAG (the checks
  DAG is another DAG than the load) and from the CLI;
* not the Iceberg table: a data commit would be a snapshot per idle run, and
  even a property update is a metadata file and a catalog commit per idle
  run (metadata growing with the number of runs, every commit racing the
  loads for the table);
* not an XCom: an XCom belongs to one DAG run, so the checks DAG would first
  have to find the load DAG's latest run; a Variable is one key.

The record is a claim about the pipeline, never the table's state: it holds
the watermark it was proven on, and a table whose watermark moved elsewhere
(a rollback, a commit by another run) does not inherit it. Losing it (the
Variable deleted) makes freshness fall back to the last data snapshot,
which is older: a false alert, never a missed one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from datetime import datetime

from snowberg.config.check_settings import FreshnessMeasure
from snowberg.core.identifiers import IcebergName
from snowberg.iceberg.state import TableState, VariableStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class CurrentProof:
    """A run proved the lake current as of ``proven_at`` (its plan), on the table state with ``watermark``."""

    proven_at: str  # ISO 8601 with a zone: when the plan saw the source
    run_id: str
    dag_id: str
    watermark: str | None  # the table's watermark the run found current
    snapshot_id: int | None = None  # the table's state snapshot then (for people reading the Variable)

    @property
    def instant(self) -> datetime:
        return datetime.fromisoformat(self.proven_at)

    def holds_for(self, st: TableState | None) -> bool:
        """Does this proof speak of the table as it is now (the same watermark)?"""
        return (st.watermark if st is not None else None) == self.watermark


def proof_key(target: str) -> str:
    """The Variable of Iceberg table ``target`` (``namespace.table``), named like the watermark mirror."""
    return IcebergName.parse(target).variable_key("current")


def record_proof(target: str, proof: CurrentProof, variables: VariableStore) -> None:
    """Record ``proof`` unless the Variable already holds a later one (a slower run must not move it back)."""
    key = proof_key(target)
    earlier = read_proof(target, variables)
    if earlier is not None and earlier.instant >= proof.instant:
        log.info("%s already records a proof at %s: kept", key, earlier.proven_at)
        return
    variables.set(key, json.dumps(asdict(proof), sort_keys=True))
    log.info("%s: lake proven current at %s by run %s", key, proof.proven_at, proof.run_id)


def read_proof(target: str, variables: VariableStore) -> CurrentProof | None:
    """The recorded proof of ``target``; None when there is none or it cannot be read (logged)."""
    key = proof_key(target)
    raw = variables.get(key)
    if not raw:
        return None
    try:
        proof = CurrentProof(**json.loads(raw))
        proof.instant  # noqa: B018 - parses proven_at: a broken value is refused here, not later
    except (TypeError, ValueError) as exc:
        log.warning("Variable %s does not hold a proof (%s): ignored", key, exc)
        return None
    return proof


def proof_for(target: str, measure: FreshnessMeasure | str, variables: VariableStore) -> CurrentProof | None:
    """The proof freshness ``measure`` ages from: the recorded one for ``proven_current``, None for ``last_data``.

    A Variable that cannot be read (no Airflow to ask, a triggerer without Variable access) is logged and
    counts as no proof: freshness then ages from the last data snapshot, an alert too many, never one too few.
    The freshness check (a task's Variables) and the UI page (the metadata database) both read it here.
    """
    if FreshnessMeasure(measure) is not FreshnessMeasure.PROVEN_CURRENT:
        return None
    try:
        return read_proof(target, variables)
    except Exception as exc:  # noqa: BLE001 - any failure of the Variable read falls back as documented
        log.warning(
            "cannot read the current-lake record of %s (%s: %s): using the last data snapshot",
            target,
            type(exc).__name__,
            exc,
        )
        return None
