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
          incremental: true         # verify what changed since the last check; full on full_schedule
          full_schedule: "@weekly"  # cron or preset (UTC): a full verification at the first check after each tick
          late_margin: 1h           # incremental checks also re-verify this much below the last verified watermark
          day_column: created_on    # stream and cursor-less tables: count per day of this column
          anomaly:
            runs: 30                # history: the last N snowberg commits
            k: 5                    # a run is anomalous outside median ± k·MAD
            on_anomaly: warn        # warn | fail
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator

from snowberg.config.fields import identifier
from snowberg.core.models import Duration, StrictModel


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
    # Incremental verification (docs/volume-checks.md): a check compares the cursor ranges that changed since
    # the last verified snapshot, plus late_margin below it (at least the cursor's lookback); a full one runs at
    # the first check after each tick of full_schedule (None: only when started by hand or when the changes
    # cannot be located), and always when incremental is off.
    incremental: bool = True
    full_schedule: str | None = "@weekly"
    late_margin: Duration = timedelta(hours=1)
    # Stream and cursor-less tables are compared by counts: per day of this DATE/TIMESTAMP column when set,
    # else for the whole table.
    day_column: Annotated[str, identifier("volume day column")] | None = None
    # DuckDB's memory for the lake side (it spills beyond it; only keeping append tables' newest versions needs to).
    lake_memory_mb: int = Field(default=512, ge=64, le=65_536)
    anomaly: AnomalySettings = Field(default_factory=AnomalySettings)

    @field_validator("full_schedule")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from croniter import croniter  # Airflow's own cron dependency, already imported by its timetables

        if not croniter.is_valid(v):
            raise ValueError(f"{v[:80]!r} is not a cron expression or preset (for example '@weekly' or '0 3 * * 0')")
        return v


__all__ = ["AnomalyAction", "AnomalySettings", "DeletePolicy", "VolumeSettings"]
