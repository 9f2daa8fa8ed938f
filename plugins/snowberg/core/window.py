"""The window of a run: the rows it reads, fixed when the run is planned."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from snowberg.core.cursor import CursorKind


class Mode(StrEnum):
    """What a run does with its window (recorded as ``snowberg.mode`` in the snapshot summary)."""

    INCREMENTAL = "incremental"
    BACKFILL = "backfill"
    FULL_REFRESH = "full_refresh"


@dataclass(frozen=True, kw_only=True)
class Window:
    """The rows a run reads, fixed when the run is planned.

    incremental: ``low < cursor <= high`` (``low`` None on the first run, or
                 ``cursor >= initial_value`` when one is configured)
    backfill:    ``low <= cursor < high`` (the run's data interval or params),
                 ``<= high`` when the end was clamped to the watermark
    full_refresh: every row with ``cursor <= high`` (or every row, no cursor)
    NULL cursor rows are added when the table's policy is ``include``.
    """

    mode: Mode
    cursor_column: str | None = None
    cursor_kind: CursorKind | None = None
    cursor_scale: int = 0
    low: str | None = None
    low_inclusive: bool = False
    high: str | None = None
    high_inclusive: bool = False
    include_nulls: bool = False
    base_watermark: str | None = None  # the table's watermark when planned
    base_snapshot_id: int | None = None
    new_watermark: str | None = None  # what the commit records (backfills keep the base)
    rows_in_window: int | None = None
    null_rows: int = 0
    planned_at: str = ""
    run_id: str = ""
    dag_id: str = ""  # the DAG of the run: run ids repeat across DAGs, and the commit records both
    dry_run: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # XCom and snapshot summaries hand the closed sets back as text.
        object.__setattr__(self, "mode", Mode(self.mode))
        if self.cursor_kind is not None:
            object.__setattr__(self, "cursor_kind", CursorKind(self.cursor_kind))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # Plain strings in XCom: readable by any deserialiser, equal to the members.
        d["mode"] = self.mode.value
        d["cursor_kind"] = self.cursor_kind.value if self.cursor_kind is not None else None
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Window:
        return cls(**dict(d))
