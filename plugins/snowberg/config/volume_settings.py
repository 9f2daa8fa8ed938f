"""The ``volume:`` section of a table's config: source-vs-lake verification, anomalies, hard deletes.

Only pydantic, the standard library and ``snowberg.core`` are imported here:
the model is validated when DAG files are parsed.

.. code-block:: yaml

    tables:
      - name: orders
        ...
        volume:
          max_reported_keys: 20     # differing keys named in the alert (× leaf_rows: rows one check fetches)
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
    """What an anomalous run volume does to the check task.

    warn: log a warning; the task succeeds
    fail: fail the task, which sends a ``volume_anomaly`` alert
    """

    WARN = "warn"
    FAIL = "fail"


class AnomalySettings(StrictModel):
    """Rows per run against the table's own history (median ± k·MAD of the last ``runs`` commits)."""

    enabled: bool = True
    """Compare each run's volume with the table's history."""
    runs: int = Field(default=30, ge=3, le=1000)
    """The history: the last this many snowberg commits."""
    min_history: int = Field(default=5, ge=3)
    """No verdict until the history holds this many runs."""
    k: float = Field(default=5.0, gt=0)
    """A run is anomalous outside median ± k·MAD of the history."""
    on_anomaly: AnomalyAction = AnomalyAction.WARN
    """``warn``: log a warning; ``fail``: fail the check task (a ``volume_anomaly`` alert)."""


class VolumeSettings(StrictModel):
    """Volume verification of one table (docs/volume-checks.md)."""

    enabled: bool = True
    """Run the volume check in the checks DAG (every table: watermark tables compare keys and cursors, stream and
    cursor-less tables compare counts)."""
    max_reported_keys: int = Field(default=20, ge=1, le=10_000)
    """How many differing keys the alert names; with ``leaf_rows`` it bounds the rows one check fetches for the
    row-by-row comparison (max_reported_keys × leaf_rows per side)."""
    digits_per_level: int = Field(default=2, ge=1, le=3)
    """Bisection: each level splits a differing bucket into 16^digits buckets."""
    leaf_rows: int = Field(default=2_000, ge=1, le=1_000_000)
    """A bucket of at most this many rows is compared row by row."""
    max_queries: int = Field(default=30, ge=2, le=1000)
    """The bisection stops before one check spends more Snowflake queries than this."""
    deletes: DeletePolicy = DeletePolicy.DETECT
    """Keys in the lake that are gone from the source: ignore them, report them, or remove them from the lake."""
    strict_checksums: bool = False
    """Level 0 compares, per cursor day, the row count and sums of cheap per-row numbers (cursor epoch, key
    value); true uses MD5 checksums there too (one hash per row on both sides)."""
    count_only: bool = False
    """Compare counts per cursor day only: no key needed, no row-level diff."""
    incremental: bool = True
    """Verify the cursor ranges changed since the last verified snapshot (false: every check verifies the whole
    table). A full verification still runs on ``full_schedule``, when started by hand, and whenever the changes
    cannot be located by the cursor."""
    full_schedule: str | None = "@weekly"
    """Cron expression or preset (UTC): a full verification at the first check after each tick; null: none
    scheduled."""
    late_margin: Duration = timedelta(hours=1)
    """Incremental checks also verify this much below the last verified watermark (at least the cursor's
    lookback; not for NUMBER cursors)."""
    day_column: Annotated[str, identifier("volume day column")] | None = None
    """Stream and cursor-less tables: count rows per day of this DATE or TIMESTAMP column (else the whole
    table)."""
    lake_memory_mb: int = Field(default=512, ge=64, le=65_536)
    """DuckDB's memory for the lake side; it spills beyond it (only keeping an append table's newest versions
    per key needs to)."""
    anomaly: AnomalySettings = Field(default_factory=AnomalySettings)
    """Rows per run against the table's own history."""

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
