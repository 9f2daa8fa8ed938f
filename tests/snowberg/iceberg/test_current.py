"""The record of a run that proved the lake current (an Airflow Variable, no Iceberg commit)."""

from __future__ import annotations

import json
from typing import Any

from snowberg.iceberg.current import CurrentProof, proof_key, read_proof, record_proof


def _proof(at: str, run: str = "r") -> CurrentProof:
    return CurrentProof(proven_at=at, run_id=run, dag_id="snowberg_orders", watermark="5", snapshot_id=7)


def test_a_proof_is_a_variable_beside_the_watermark_mirror(variables: Any) -> None:
    assert proof_key("shop.orders") == "snowberg__shop__orders__current"
    record_proof("shop.orders", _proof("2026-12-01T10:00:00+00:00"), variables)
    assert json.loads(variables["snowberg__shop__orders__current"])["run_id"] == "r"
    assert read_proof("shop.orders", variables) == _proof("2026-12-01T10:00:00+00:00")
    assert read_proof("shop.other", variables) is None


def test_a_slower_run_never_moves_the_proof_back(variables: Any) -> None:
    record_proof("shop.orders", _proof("2026-12-01T10:00:00+00:00", "late"), variables)
    record_proof("shop.orders", _proof("2026-12-01T09:00:00+00:00", "early"), variables)
    proof = read_proof("shop.orders", variables)
    assert proof is not None and proof.run_id == "late"


def test_a_broken_variable_is_no_proof(variables: Any) -> None:
    variables["snowberg__shop__orders__current"] = '{"proven_at": "yesterday"}'
    assert read_proof("shop.orders", variables) is None
    variables["snowberg__shop__orders__current"] = "not json"
    assert read_proof("shop.orders", variables) is None


def test_a_proof_whose_time_cannot_be_read_is_no_proof(variables: Any) -> None:
    """Every field present, but ``proven_at`` is no instant: refused when read, not when freshness compares it."""
    broken = {"proven_at": "yesterday", "run_id": "r", "dag_id": "d", "watermark": "5", "snapshot_id": 7}
    variables["snowberg__shop__orders__current"] = json.dumps(broken)
    assert read_proof("shop.orders", variables) is None
