"""The window of a run: the rows it reads, fixed when the run is planned."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Window:
    """The rows a run reads, fixed when the run is planned.

    incremental: ``low < cursor <= high`` (``low`` None on the first run, or
                 ``cursor >= initial_value`` when one is configured)
    backfill:    ``low <= cursor < high`` (the run's data interval or params)
    full_refresh: every row with ``cursor <= high`` (or every row, no cursor)
    NULL cursor rows are added when the table's policy is ``include``.
    """

    mode: str  # incremental | backfill | full_refresh
    cursor_column: str | None
    cursor_kind: str | None
    cursor_scale: int
    low: str | None
    low_inclusive: bool
    high: str | None
    high_inclusive: bool
    include_nulls: bool
    base_watermark: str | None  # the table's watermark when planned
    base_snapshot_id: int | None
    new_watermark: str | None  # what the commit records (backfills keep the base)
    rows_in_window: int | None = None
    null_rows: int = 0
    planned_at: str = ""
    run_id: str = ""
    dry_run: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Window:
        return cls(**dict(d))
