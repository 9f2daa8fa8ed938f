"""What a write run hands back: one closed set of outcomes, one result model.

Every watermark writer (single-task load, mapped slices, push-down unload)
ends in exactly one of four outcomes, decided by the commit gate
(``snowberg.iceberg.gate``). Naming them once keeps operators, XComs and
tests from comparing against hand-typed strings.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class Status(enum.StrEnum):
    """How a run ended. Only ``committed`` wrote a snapshot."""

    COMMITTED = "committed"
    ALREADY_COMMITTED = "already_committed"  # a retry of a run whose commit already landed: nothing appended
    NOTHING_NEW = "nothing_new"  # the window held nothing the lake lacks: no data file, no commit
    DRY_RUN = "dry_run"


@dataclass(kw_only=True)
class LoadResult:
    """One watermark write run, as an XCom (``to_dict``) and for logs.

    ``rows_planned`` is the plan's count, ``rows_extracted`` what the source
    returned, ``rows`` what the commit wrote; they are recorded in the
    snapshot summary so the volume checks can compare them later.
    """

    status: Status
    rows: int = 0
    bytes: int = 0
    data_files: int = 0
    snapshot_id: int | None = None
    watermark: str | None = None
    seconds: float = 0.0
    window: dict[str, Any] = field(default_factory=dict)
    rows_planned: int | None = None
    rows_extracted: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = str(self.status)
        return d
