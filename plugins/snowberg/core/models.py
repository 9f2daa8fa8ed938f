"""The building blocks every config model shares: strict models and durations.

(Connection ids and identifiers are checked in ``snowberg.core.identifiers``.)

One home for them so a table config, a sync config and a check setting refuse
the same mistakes with the same words.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict

from snowberg.core.durations import parse_duration

# The JSON schema (editors, docs) describes what a YAML author writes: text such as "5m" or seconds.
Duration = Annotated[timedelta, BeforeValidator(parse_duration, json_schema_input_type=str | int | float)]
"""A ``timedelta`` written as ``"5m"``, ``"2h"``, ``"1d"`` or seconds (see ``parse_duration``)."""


class StrictModel(BaseModel):
    """A frozen model that refuses unknown keys: a typo in YAML is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid", frozen=True)
