"""The building blocks every config model shares: strict models and durations, and how to walk a model's fields.

(Connection ids and identifiers are checked in ``snowberg.core.identifiers``.)

One home for them so a table config, a sync config and a check setting refuse
the same mistakes with the same words.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Sequence
from datetime import timedelta
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict

from snowberg.core.durations import parse_duration

# The JSON schema (editors, docs) describes what a YAML author writes: text such as "5m" or seconds.
Duration = Annotated[timedelta, BeforeValidator(parse_duration, json_schema_input_type=str | int | float)]
"""A ``timedelta`` written as ``"5m"``, ``"2h"``, ``"1d"`` or seconds (see ``parse_duration``)."""


class StrictModel(BaseModel):
    """A frozen model that refuses unknown keys: a typo in YAML is an error, not a silent default."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    """``Annotated[T, *meta]`` → ``(T, meta)``; anything else → ``(annotation, [])``."""
    if get_origin(annotation) is Annotated:
        args = get_args(annotation)
        return args[0], list(args[1:])
    return annotation, []


def union_members(annotation: Any) -> list[Any]:
    """The members of a union (``None`` left out); anything else is its only member."""
    if get_origin(annotation) in (Union, types.UnionType):
        return [a for a in get_args(annotation) if a is not type(None)]
    return [annotation]


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field holds: itself, a list of it, an optional, a (tagged) union."""
    t, _ = unwrap(annotation)
    out: list[type[BaseModel]] = []
    for m in union_members(t):
        m, _ = unwrap(m)
        if get_origin(m) is list:
            out += models_in(get_args(m)[0])
        elif isinstance(m, type) and issubclass(m, BaseModel):
            out.append(m)
    return out


def closest_key(root: type[BaseModel], loc: Sequence[str | int]) -> str | None:
    """For an unknown key at ``loc`` (a pydantic error location under ``root``), the allowed key it resembles most.

    The location is followed through ``root``'s fields (list positions, the tags of tagged unions and validator
    steps are not fields: they keep the models reached so far); the keys the models there allow are compared
    with the unknown one (``difflib``'s ratio ≥ 0.8: ``schedul`` → ``schedule``, ``tabel`` → ``table``; a
    looser match suggests unrelated keys, such as ``lineage_column`` for ``key_columns``).
    """
    if not loc:
        return None
    models = [root]
    for part in loc[:-1]:
        fields = [m.model_fields[part] for m in models if isinstance(part, str) and part in m.model_fields]
        if fields:
            models = [inner for f in fields for inner in models_in(f.annotation)]
    allowed = sorted({k for m in models for k in m.model_fields})
    found = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.8)
    return found[0] if found else None
