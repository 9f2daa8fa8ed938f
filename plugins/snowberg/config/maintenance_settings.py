"""``maintenance:`` in a table config: expiry, compaction and orphan-file settings (docs/maintenance.md)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field

from snowberg.core.models import Duration, StrictModel


class MaintenanceSettings(StrictModel):
    """``maintenance:`` in a table config. The defaults suit an hourly load."""

    enabled: bool = True
    schedule: str | None = "@daily"
    # Expiry: snapshots older than this AND beyond the newest `min_snapshots` may go.
    snapshot_retention: Duration = timedelta(days=5)
    min_snapshots: int = Field(default=24, ge=1)
    # Compaction: data files under small_file_ratio × target size are rewritten into
    # files near the target (the table's write.target-file-size-bytes unless set here).
    compact: bool = True
    target_file_size: int | None = Field(default=None, ge=1024)
    small_file_ratio: float = Field(default=0.75, gt=0, le=1)
    min_input_files: int = Field(default=2, ge=2)
    # Orphan files: unreferenced files under the table location older than this.
    remove_orphans: bool = True
    orphan_age: Duration = timedelta(days=3)
