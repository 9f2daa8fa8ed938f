"""Loading the declarative YAML files (tables.yaml, syncs.yaml) the same way.

Both files are a list of entries under one key plus optional ``defaults``
merged into every entry; both are validated by pydantic and report errors as
``<entity> '<name>': field '<dotted.path>': <reason>`` so that a DAG import
error points at the entry and the field to fix.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from snowberg.core.identifiers import CLIP_CHARS, clip

M = TypeVar("M", bound=BaseModel)


def entry_label(entry: Any, index: int) -> str:
    """How an error names an entry: its ``name`` (cut), else its position in the list."""
    name = entry.get("name") if isinstance(entry, dict) else None
    return clip(name, CLIP_CHARS)[1:-1] if isinstance(name, str) else f"#{index}"


def format_validation_error(
    raw: list[Any],
    exc: ValidationError,
    *,
    list_key: str,
    entity: str,
    hidden_locs: Collection[str] = (),
    first_index: int = 0,
) -> str:
    """One line per error, naming the entry (by its ``name``) and the field."""
    lines = []
    for err in exc.errors():
        loc = list(err["loc"])
        name = "?"
        if len(loc) >= 2 and loc[0] == list_key and isinstance(loc[1], int):
            idx = loc[1]
            name = entry_label(raw[idx] if idx < len(raw) else {}, idx + first_index)
            loc = loc[2:]
        field = ".".join(
            str(p) for p in loc if not (isinstance(p, str) and (p.startswith("function-") or p in hidden_locs))
        )
        msg = "unknown key" if err["type"] == "extra_forbidden" else clip(err["msg"], 400)[1:-1]
        lines.append(f"{entity} {name!r}: field {field or '<entry>'!r}: {msg}")
    return f"invalid snowberg {list_key} config:\n  " + "\n  ".join(lines)


def validate_entries(
    data: Any,
    model: type[M],
    *,
    list_key: str,
    entity: str,
    source: str,
    error: type[Exception],
    hidden_locs: Collection[str] = (),
) -> M:
    """Merge ``defaults`` into each entry of ``data[list_key]`` and validate the whole file."""
    merged = merged_entries(data, list_key=list_key, source=source, error=error)
    try:
        return model.model_validate({list_key: merged})
    except ValidationError as exc:
        raise error(
            f"{source}: "
            + format_validation_error(merged, exc, list_key=list_key, entity=entity, hidden_locs=hidden_locs)
        ) from None


def merged_entries(data: Any, *, list_key: str, source: str, error: type[Exception]) -> list[Any]:
    """The entries of ``data[list_key]`` with ``defaults`` merged in; the file's shape is checked here."""
    if not isinstance(data, dict):
        raise error(f"{source}: expected a mapping with '{list_key}'")
    unknown = set(data) - {"defaults", list_key}
    if unknown:
        raise error(f"{source}: unknown top-level key(s) {clip(sorted(map(str, unknown)))}")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise error(f"{source}: 'defaults' must be a mapping")
    entries = data.get(list_key)
    if not isinstance(entries, list) or not entries:
        raise error(f"{source}: '{list_key}' must be a non-empty list")
    return [({**defaults, **e} if isinstance(e, dict) else e) for e in entries]


def read_yaml(path: str | Path, error: type[Exception]) -> Any:
    """The parsed YAML of ``path``; a syntax error is raised as the caller's ``error`` type, naming the file."""
    import yaml  # here, not at module level: tasks build configs from dicts and never read YAML

    path = Path(path)
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from None
