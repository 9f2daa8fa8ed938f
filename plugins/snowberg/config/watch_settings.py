"""The ``watch:`` section of a table's config: load when the source changes (docs/event-driven.md).

Only pydantic, the standard library and ``snowberg.core`` are imported here: the model is
validated when DAG files are parsed.

.. code-block:: yaml

    tables:
      - name: orders
        source: {table: SALES.SHOP.ORDERS}
        ...
        watch:
          poll_interval: 1m   # how often the triggerer asks Snowflake whether the source changed (at least 10s)
          max_interval: 1d    # a run at least this often anyway, as a safety net; null: only on changes

``watch: true`` (or ``watch: {}``) takes both defaults. A watched table has no ``schedule``: its
load DAG runs when the source changes, or after ``max_interval``, whichever comes first.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import field_validator, model_validator

from snowberg.core.durations import format_duration
from snowberg.core.models import Duration, StrictModel

MIN_POLL_INTERVAL = timedelta(seconds=10)


class WatchSettings(StrictModel):
    """Run the table's load when Snowflake reports a change of its source (a metadata poll in the triggerer)."""

    poll_interval: Duration = timedelta(minutes=1)
    """How often the triggerer asks Snowflake whether the source changed (at least 10s). All watched tables of
    one Snowflake connection with the same interval share one poll: one metadata statement per database, plus
    one for all their streams."""
    max_interval: Duration | None = timedelta(days=1)
    """The load also runs on this interval, whatever the source does (a safety net; Airflow's Backfill dialog
    cuts its runs by it). Null: only when the source changes."""

    @field_validator("poll_interval")
    @classmethod
    def _poll(cls, v: timedelta) -> timedelta:
        if v < MIN_POLL_INTERVAL:
            raise ValueError(
                f"poll_interval {format_duration(v)} is below {format_duration(MIN_POLL_INTERVAL)}: each poll is "
                "a Snowflake statement per database"
            )
        return v

    @model_validator(mode="after")
    def _intervals(self) -> WatchSettings:
        if self.max_interval is not None and self.max_interval < self.poll_interval:
            raise ValueError(
                f"max_interval {format_duration(self.max_interval)} is shorter than poll_interval "
                f"{format_duration(self.poll_interval)}: use a schedule instead of watch, or raise max_interval"
            )
        return self


class WatchRefused:
    """Stands in for a ``watch`` value the table cannot have, so that the error names the field ``watch``.

    ``TableConfig`` checks ``watch`` against the rest of the entry (``schedule``, ``source``) before the fields
    are validated; the reason travels in this marker to ``parse_watch``, which raises it.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason


def parse_watch(value: Any) -> Any:
    """``true`` means the defaults, ``false`` none; a refused value raises its reason."""
    if isinstance(value, WatchRefused):
        raise ValueError(value.reason)
    if value is True:
        return {}
    if value is False:
        return None
    return value


def watch_given(value: Any) -> bool:
    """Does an entry's ``watch`` value turn watching on (null and false do not)?"""
    return value is not None and value is not False
