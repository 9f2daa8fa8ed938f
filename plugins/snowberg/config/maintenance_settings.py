"""``maintenance:`` in a table config: expiry, compaction and orphan-file settings (docs/maintenance.md)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field

from snowberg.core.models import Duration, StrictModel


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
    remove_orphans: bool = True
    """Run the orphan-file sweep."""
    orphan_age: Duration = timedelta(days=3)
    """The sweep deletes only unreferenced files under the table location older than this (a running load's
    files are younger)."""
