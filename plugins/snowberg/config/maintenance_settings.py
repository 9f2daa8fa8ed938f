"""``maintenance:`` in a table config: expiry, compaction and orphan-file settings (docs/maintenance.md)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, ValidationInfo, field_validator

from snowberg.core.durations import format_duration
from snowberg.core.models import Duration, StrictModel

# The shortest orphan age the sweep accepts without ``allow_short_orphan_age``. Iceberg's and Spark's
# remove_orphan_files procedures refuse less than 24 hours for the same reason: a file written for a commit
# that has not landed yet (a running load, slices waiting for their commit) is unreferenced, and a sweep with
# a short age deletes it.
ORPHAN_AGE_FLOOR = timedelta(days=1)
# A data file whose position deletes hide this share of its rows is rewritten by compaction even when it is
# not small (Iceberg's rewrite_data_files: delete-ratio-threshold, default 0.3).
DEFAULT_DELETE_RATIO = 0.3
OVERRIDE_FIELD = "allow_short_orphan_age"


def check_orphan_age(age: timedelta, allow_short: bool) -> None:
    """Refuse an orphan age under ``ORPHAN_AGE_FLOOR`` unless the override is given (one message, two callers)."""
    if age < ORPHAN_AGE_FLOOR and not allow_short:
        raise ValueError(
            f"orphan_age must be at least {ORPHAN_AGE_FLOOR.days} day (got {format_duration(age)}): a "
            "shorter age deletes files a running load or a pending slice commit still needs. If no write can be in "
            f"flight that long, set {OVERRIDE_FIELD}: true"
        )


class MaintenanceSettings(StrictModel):
    """``maintenance:`` in a table config. The defaults suit an hourly load."""

    enabled: bool = True
    """Build the table's ``snowberg_<name>__maintenance`` DAG."""
    schedule: str | None = "@daily"
    """The maintenance DAG's schedule."""
    snapshot_retention: Duration = timedelta(days=5)
    """Expiry: snapshots older than this and beyond the newest ``min_snapshots`` may go."""
    min_snapshots: int = Field(default=24, ge=1)
    """Expiry always keeps the newest this many snapshots."""
    compact: bool = True
    """Run compaction: small data files (and the delete files on them) are rewritten into files near the target
    size, in one ``replace`` commit."""
    target_file_size: int | None = Field(default=None, ge=1024)
    """The size of the rewritten files in bytes (unset: the table's ``write.target-file-size-bytes``, 512 MiB if
    that is unset)."""
    small_file_ratio: float = Field(default=0.75, gt=0, le=1)
    """Data files under this ratio × the target size are rewritten."""
    min_input_files: int = Field(default=2, ge=2)
    """A partition is compacted when it has at least this many small files (or a file with deletes)."""
    delete_ratio: float = Field(default=DEFAULT_DELETE_RATIO, gt=0, le=1)
    """Compaction also rewrites a data file whose position deletes hide at least this share of its rows."""
    # Orphan files: unreferenced files under the table location older than this (at least a
    # day unless allow_short_orphan_age; declared first so the age's check can read it).
    remove_orphans: bool = True
    """Run the orphan-file sweep."""
    allow_short_orphan_age: bool = False
    """Accept an ``orphan_age`` under a day: only when no write can be in flight that long."""
    orphan_age: Duration = timedelta(days=3)
    """The sweep deletes only unreferenced files under the table location older than this (at least a day
    unless ``allow_short_orphan_age``); staged files waiting for a commit are never deleted."""

    @field_validator("orphan_age")
    @classmethod
    def _floor(cls, v: timedelta, info: ValidationInfo) -> timedelta:
        check_orphan_age(v, bool(info.data.get(OVERRIDE_FIELD, False)))
        return v
