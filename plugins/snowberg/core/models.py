"""The building blocks every config model shares: strict models, durations, connection ids.

One home for them so a table config, a sync config and a check setting refuse
the same mistakes with the same words.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict

from snowberg.core.durations import parse_duration

Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
"""A ``timedelta`` written as ``"5m"``, ``"2h"``, ``"1d"`` or seconds (see ``parse_duration``)."""

CONNECTION_ID = re.compile(r"[A-Za-z0-9_.\-]{1,250}")
"""Airflow connection ids and catalog names: letters, digits, '_', '.', '-' (matched whole)."""


class StrictModel(BaseModel):
    """A frozen model that refuses unknown keys: a typo in YAML is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def validate_connection_id(value: str) -> str:
    """``value`` if it is a valid connection id or catalog name, else ``ValueError``."""
    if not CONNECTION_ID.fullmatch(value):
        raise ValueError(f"invalid connection id or catalog name {value[:80]!r}")
    return value
