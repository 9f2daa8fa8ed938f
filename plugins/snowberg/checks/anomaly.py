"""Volume anomalies: rows per run against the table's own history, from snapshot summaries alone.

Every snowberg commit records its rows (``snowberg.rows``; ``rows-planned`` and
``rows-extracted`` where the load writes them). The newest incremental run is
compared with the ``runs`` before it: it is anomalous when it loaded nothing
while the history's median is above zero, or when it lies more than ``k``
scaled MADs from the median (MAD × 1.4826 estimates the standard deviation of
normal data; it ignores the outliers a mean and standard deviation would
chase). A run that finds nothing new does not commit, so a table that stops
receiving rows altogether is the freshness check's to catch.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from snowberg.iceberg import state

if TYPE_CHECKING:
    from pyiceberg.table import Table

ROWS_PLANNED = state.PREFIX + "rows-planned"
ROWS_EXTRACTED = state.PREFIX + "rows-extracted"
MAD_SCALE = 1.4826
INCREMENTAL = "incremental"


@dataclass(frozen=True, kw_only=True)
class RunVolume:
    snapshot_id: int
    run_id: str | None
    rows: int
    rows_planned: int | None
    rows_extracted: int | None


@dataclass(frozen=True, kw_only=True)
class Anomaly:
    run: RunVolume | None
    history: int  # runs compared against
    median: float | None
    mad: float | None
    low: float | None
    high: float | None
    anomalous: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return d


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v not in (None, "") else None
    except ValueError:
        return None


def run_history(table: Table, limit: int) -> list[RunVolume]:
    """Incremental snowberg commits, newest first (backfills, refreshes and delete propagation are not runs)."""
    out: list[RunVolume] = []
    for snap in state.run_commits(table):
        props = snap.summary.additional_properties if snap.summary is not None else {}
        if props.get(state.MODE) != INCREMENTAL or state.ROWS not in props:
            continue
        rows = _int(props.get(state.ROWS))
        if rows is None:
            continue
        out.append(
            RunVolume(
                snapshot_id=snap.snapshot_id,
                run_id=props.get(state.RUN_ID),
                rows=rows,
                rows_planned=_int(props.get(ROWS_PLANNED)),
                rows_extracted=_int(props.get(ROWS_EXTRACTED)),
            )
        )
        if len(out) > limit:
            break
    return out


def evaluate(history: list[RunVolume], *, k: float, min_history: int) -> Anomaly:
    """The newest run (``history[0]``) against the rest; too little history is never anomalous."""
    if not history:
        return Anomaly(
            run=None, history=0, median=None, mad=None, low=None, high=None, anomalous=False, reason="no runs yet"
        )
    run, past = history[0], [r.rows for r in history[1:]]
    if len(past) < min_history:
        return Anomaly(
            run=run,
            history=len(past),
            median=None,
            mad=None,
            low=None,
            high=None,
            anomalous=False,
            reason=f"{len(past)} earlier run(s); {min_history} needed before judging",
        )
    med = float(statistics.median(past))
    mad = float(statistics.median([abs(x - med) for x in past])) * MAD_SCALE
    # A perfectly regular history (MAD 0) would flag a one-row wobble: allow 10% of the median, at least one row.
    spread = max(mad, 0.1 * med, 1.0)
    low, high = med - k * spread, med + k * spread
    if run.rows == 0 and med > 0:
        reason, bad = f"run {run.run_id} loaded 0 rows; the last {len(past)} runs loaded a median of {med:g}", True
    elif run.rows < low or run.rows > high:
        reason = (
            f"run {run.run_id} loaded {run.rows:,} rows, outside {max(low, 0):,.0f}..{high:,.0f} "
            f"(median {med:g} ± {k:g}×{spread:g} over the last {len(past)} runs)"
        )
        bad = True
    else:
        reason, bad = f"run {run.run_id} loaded {run.rows:,} rows, within {max(low, 0):,.0f}..{high:,.0f}", False
    return Anomaly(run=run, history=len(past), median=med, mad=mad, low=low, high=high, anomalous=bad, reason=reason)


__all__ = ["Anomaly", "RunVolume", "evaluate", "run_history"]
