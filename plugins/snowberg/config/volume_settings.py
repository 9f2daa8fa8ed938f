"""The ``volume:`` section of a table's config: source-vs-lake verification, anomalies, hard deletes.

Only pydantic, the standard library and ``snowberg.core`` are imported here:
the model is validated when DAG files are parsed.

.. code-block:: yaml

    tables:
      - name: orders
        ...
        volume:
          max_reported_keys: 20     # differing keys named in the alert
          deletes: detect           # ignore | detect | propagate
          anomaly:
            runs: 30                # history: the last N snowberg commits
            k: 5                    # a run is anomalous outside median ± k·MAD
            on_anomaly: warn        # warn | fail
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from snowberg.core.models import StrictModel


class DeletePolicy(StrEnum):
    """What the volume check does with keys present in the lake but gone from the source.

    ignore:    they are not compared (the source keeps only live rows; the lake keeps history)
    detect:    they are reported as differences and fail the check
    propagate: they are removed from the lake in one commit (never above the watermark)
    """

    IGNORE = "ignore"
    DETECT = "detect"
    PROPAGATE = "propagate"


class AnomalyAction(StrEnum):
    """What an anomalous run volume does to the check task: log a warning, or fail (and alert)."""

    WARN = "warn"
    FAIL = "fail"


class AnomalySettings(StrictModel):
    """Rows per run against the table's own history (median ± k·MAD of the last ``runs`` commits)."""

    enabled: bool = True
    runs: int = Field(default=30, ge=3, le=1000)
    min_history: int = Field(default=5, ge=3)
    k: float = Field(default=5.0, gt=0)
    on_anomaly: AnomalyAction = AnomalyAction.WARN


class VolumeSettings(StrictModel):
    """Volume verification of one table (docs/volume-checks.md)."""

    enabled: bool = True
    max_reported_keys: int = Field(default=20, ge=1, le=10_000)
    # Bisection: each level splits a differing bucket into 16**digits_per_level buckets;
    # a bucket at or below leaf_rows rows is compared row by row.
    digits_per_level: int = Field(default=2, ge=1, le=3)
    leaf_rows: int = Field(default=2_000, ge=1, le=1_000_000)
    max_queries: int = Field(default=30, ge=2, le=1000)
    deletes: DeletePolicy = DeletePolicy.DETECT
    # Level 0 compares, per cursor day, the row count and sums of cheap per-row numbers (cursor epoch,
    # key value); strict_checksums uses MD5 checksums there too (one hash per row on both sides).
    strict_checksums: bool = False
    count_only: bool = False  # counts per cursor day only; no key needed, no row-level diff
    anomaly: AnomalySettings = Field(default_factory=AnomalySettings)


__all__ = ["AnomalyAction", "AnomalySettings", "DeletePolicy", "VolumeSettings"]
