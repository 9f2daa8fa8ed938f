"""Loading the declarative YAML files (tables.yaml, syncs.yaml) the same way.

Both files are a list of entries under one key plus optional ``defaults``
merged into every entry; both are validated by pydantic and report errors as
``<entity> '<name>': field '<dotted.path>': <reason>`` so that a DAG import
error points at the entry and the field to fix.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from snowberg.core.identifiers import CLIP_CHARS, clip
from snowberg.core.models import closest_key

M = TypeVar("M", bound=BaseModel)


def entry_label(entry: Any, index: int) -> str:
    """How an error names an entry: its ``name`` (cut), else its position in the list."""
    name = entry.get("name") if isinstance(entry, dict) else None
    return clip(name, CLIP_CHARS)[1:-1] if isinstance(name, str) else f"#{index}"


def error_path(loc: Collection[str | int], hidden_locs: Collection[str] = ()) -> tuple[str | int, ...]:
    """A pydantic error location as the path of keys a YAML author wrote.

    Validator steps (``function-after[...]``) and the tags of tagged unions (``hidden_locs``, e.g. a sync
    target's ``native``) are pydantic's, not keys of the file.
    """
    return tuple(p for p in loc if not (isinstance(p, str) and (p.startswith("function-") or p in hidden_locs)))


def unknown_key(model: type[BaseModel] | None, loc: Collection[str | int]) -> str:
    """The message of an unknown key at ``loc`` under ``model``: with the allowed key it resembles, if any."""
    near = closest_key(model, list(loc)) if model is not None else None
    return f"unknown key (did you mean {near!r}?)" if near else "unknown key"


def format_validation_error(
    raw: list[Any],
    exc: ValidationError,
    *,
    list_key: str,
    entity: str,
    hidden_locs: Collection[str] = (),
    first_index: int = 0,
    model: type[BaseModel] | None = None,
) -> str:
    """One line per error, naming the entry (by its ``name``) and the field; ``model``: the validated model."""
    lines = []
    for err in exc.errors():
        loc = list(err["loc"])
        name = "?"
        if len(loc) >= 2 and loc[0] == list_key and isinstance(loc[1], int):
            idx = loc[1]
            name = entry_label(raw[idx] if idx < len(raw) else {}, idx + first_index)
            loc = loc[2:]
        field = ".".join(str(p) for p in error_path(loc, hidden_locs))
        msg = unknown_key(model, err["loc"]) if err["type"] == "extra_forbidden" else clip(err["msg"], 400)[1:-1]
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
    replaces: Mapping[str, str] | None = None,
) -> M:
    """Merge ``defaults`` into each entry of ``data[list_key]`` (``merge_entry``) and validate the whole file."""
    merged = merged_entries(data, list_key=list_key, source=source, error=error, replaces=replaces)
    try:
        return model.model_validate({list_key: merged})
    except ValidationError as exc:
        raise error(
            f"{source}: "
            + format_validation_error(
                merged, exc, list_key=list_key, entity=entity, hidden_locs=hidden_locs, model=model
            )
        ) from None


def merge_entry(
    defaults: Mapping[str, Any], entry: Mapping[str, Any], replaces: Mapping[str, str] | None = None
) -> Any:
    """``entry`` over ``defaults``, per top-level key; an entry key of ``replaces`` also drops a default.

    ``replaces`` maps a key to the key whose default it replaces when the entry gives it a value (not
    null or false): a table's own ``watch`` replaces the ``schedule`` of ``defaults``, and its own
    ``schedule`` the ``watch``, so each can be a default without every entry that wants the other
    having to unset it.
    """
    base = dict(defaults)
    for key, other in (replaces or {}).items():
        if entry.get(key) is not None and entry.get(key) is not False:
            base.pop(other, None)
    return {**base, **entry}


def merged_entries(
    data: Any, *, list_key: str, source: str, error: type[Exception], replaces: Mapping[str, str] | None = None
) -> list[Any]:
    """The entries of ``data[list_key]`` with ``defaults`` merged in (``merge_entry``); the file's shape is checked."""
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
    return [(merge_entry(defaults, e, replaces) if isinstance(e, dict) else e) for e in entries]


def read_yaml(path: str | Path, error: type[Exception]) -> Any:
    """The parsed YAML of ``path``; a syntax error is raised as the caller's ``error`` type, naming the file."""
    import yaml  # here, not at module level: tasks build configs from dicts and never read YAML

    path = Path(path)
    try:
        return yaml.load(path.read_text(), Loader=_loader())
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from None


def _loader() -> Any:
    """libyaml's safe loader when PyYAML was built with it (several times faster on a large file), else PyYAML's."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# What a list entry that was not selected keeps: enough to tell which name and target it claims.
STUB_KEYS = ("name", "target")


def read_yaml_selected(path: str | Path, list_key: str, names: Collection[str], error: type[Exception]) -> Any:
    """``read_yaml`` of ``path``, but entries of ``data[list_key]`` not named in ``names`` become stubs.

    A stub holds the ``name`` and ``target`` of its entry (``STUB_KEYS``),
    exactly as the full read builds them; every other value of it is never
    built. For a task process, which needs one table's entry: building the
    Python objects of a file of a thousand entries costs time in proportion
    to its size, reading its events does not cost much.

    Whatever a stub could get wrong, the entry is built whole instead: an
    explicit tag anywhere in it (``!!str orders`` is a name; ``!!int 5`` is
    not; an unknown tag fails the file, as in the full read), a merge key
    (``<<:`` sets keys the stub would not see), a key that is not a scalar, a
    name or target that is not a string. A key written twice counts with its
    last value, as the loader keeps it. Returns None when the file uses what
    an entry cannot be read alone with (aliases, a merge key at the top,
    several documents, another shape): the caller then reads it whole.
    """
    import yaml

    path = Path(path)
    text = path.read_text()
    try:
        return _selected(yaml.parse(text, Loader=_loader()), list_key, set(names))
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from None


class _Unselectable(Exception):
    """The document cannot be cut into entries by its events; read it whole."""


class _BuildWhole(Exception):
    """A stub of this entry could differ from the entry as the loader builds it: build the entry."""


def _selected(events: Any, list_key: str, names: set[str]) -> Any:
    import yaml
    from yaml import events as ev

    def build(part: list[Any]) -> Any:
        doc = [
            ev.StreamStartEvent(),
            ev.DocumentStartEvent(explicit=False),
            *part,
            ev.DocumentEndEvent(),
            ev.StreamEndEvent(),
        ]
        return yaml.load(yaml.emit(doc), Loader=_loader())

    starts, ends = (ev.MappingStartEvent, ev.SequenceStartEvent), (ev.MappingEndEvent, ev.SequenceEndEvent)

    def node(first: Any, it: Any) -> tuple[list[Any], bool]:
        """The events of one node that starts with ``first``, and whether any of them carries an explicit tag.

        An alias anywhere: read the file whole.
        """
        out = [first]
        kind = type(first)
        if kind is ev.AliasEvent:
            raise _Unselectable
        tagged = first.tag is not None
        if kind not in starts:
            return out, tagged
        append, depth = out.append, 1
        for e in it:
            append(e)
            kind = type(e)
            if kind is ev.ScalarEvent:
                tagged = tagged or e.tag is not None
            elif kind in starts:
                depth += 1
                tagged = tagged or e.tag is not None
            elif kind in ends:
                depth -= 1
                if not depth:
                    return out, tagged
            elif kind is ev.AliasEvent:
                raise _Unselectable
        raise _Unselectable  # the stream ended inside the node

    resolver = yaml.resolver.Resolver()

    def text(e: Any) -> str | None:
        """An untagged scalar's value when the loader would build a string from it, else None."""
        if not isinstance(e, ev.ScalarEvent) or e.tag is not None:
            return None
        if not e.implicit[0]:  # quoted: always a string
            return str(e.value)
        tag = resolver.resolve(yaml.ScalarNode, e.value, (True, False))
        return str(e.value) if tag == "tag:yaml.org,2002:str" else None

    def merge_key(e: Any) -> bool:
        """Is ``e`` the plain scalar ``<<``, a merge key to the loader?"""
        return isinstance(e, ev.ScalarEvent) and e.tag is None and e.implicit[0] and e.value == "<<"

    def end(item: list[Any], i: int) -> int:
        """The index just after the node that starts at ``item[i]``."""
        depth = 0
        while True:
            e = item[i]
            i += 1
            if isinstance(e, ev.CollectionStartEvent):
                depth += 1
            elif isinstance(e, ev.CollectionEndEvent):
                depth -= 1
            if depth == 0:
                return i

    def stub_keys(item: list[Any]) -> dict[str, str]:
        """The ``STUB_KEYS`` of an untagged mapping entry as the loader builds them; ``_BuildWhole`` if unsure."""
        kept: dict[str, str] = {}
        i = 1
        while i < len(item) - 1:
            value_at = end(item, i)
            key = item[i]
            if type(key) is not ev.ScalarEvent or merge_key(key):
                raise _BuildWhole
            if text(key) in STUB_KEYS:
                value = text(item[value_at])
                if value is None:
                    raise _BuildWhole
                kept[key.value] = value  # a key written twice: the last value wins, as in the loader
            i = end(item, value_at)
        return kept

    def stub(item: list[Any], tagged: bool) -> Any:
        """A stub of the entry (``STUB_KEYS``), or the whole entry: selected, no plain mapping, or unsure."""
        if tagged or not isinstance(item[0], ev.MappingStartEvent):
            return build(item)
        try:
            kept = stub_keys(item)
        except _BuildWhole:
            return build(item)
        if kept.get("name") in names:
            return build(item)
        return kept

    it = iter(events)
    try:
        if not isinstance(next(it), ev.StreamStartEvent) or not isinstance(next(it), ev.DocumentStartEvent):
            raise _Unselectable
        if not isinstance(next(it), ev.MappingStartEvent):
            raise _Unselectable
        data: dict[Any, Any] = {}
        while True:
            e = next(it)
            if isinstance(e, ev.MappingEndEvent):
                break
            if not isinstance(e, ev.ScalarEvent) or e.anchor is not None or merge_key(e):
                raise _Unselectable
            first = next(it)
            listed = isinstance(first, ev.SequenceStartEvent) and first.anchor is None and first.tag is None
            if listed and text(e) == list_key:
                items = []
                while not isinstance(nxt := next(it), ev.SequenceEndEvent):
                    items.append(stub(*node(nxt, it)))
                data[list_key] = items
            else:
                data[build([e])] = build(node(first, it)[0])
        if not isinstance(next(it), ev.DocumentEndEvent) or not isinstance(next(it), ev.StreamEndEvent):
            raise _Unselectable
    except (_Unselectable, StopIteration):
        return None
    return data


YamlPath = tuple[str | int, ...]
"""Where a value sits in a YAML document: mapping keys and list positions from the top (``("tables", 0, "cursor")``)."""


@dataclass(frozen=True, kw_only=True)
class DuplicateKey:
    """A key written twice in one mapping: YAML loaders keep the last value and drop the first silently."""

    path: YamlPath  # the mapping's path plus the key
    first_line: int
    line: int


@dataclass(frozen=True, kw_only=True)
class LocatedYaml:
    """A parsed YAML document with the line (1-based) where each of its values is written.

    ``lines`` maps a path to the line of the mapping key that holds it (for a list item: the
    item's first line). Keys merged in through YAML anchors (``<<: *base``) point at the line
    of the anchor's key.
    """

    data: Any
    lines: dict[YamlPath, int]
    duplicates: list[DuplicateKey]

    def line_of(self, path: YamlPath) -> int | None:
        """The line of ``path``, else of the nearest enclosing value that has one (``None`` for an empty file)."""
        for n in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:n]))
            if line is not None:
                return line
        return None


def locate_yaml(text: str) -> LocatedYaml:
    """Parse ``text`` like ``yaml.safe_load`` and record the line of every key and list item.

    PyYAML's composer keeps each node's position (``start_mark``) but ``safe_load`` throws the
    nodes away; here the document is composed, constructed from the same nodes, and the node
    tree is walked beside the data. Duplicate keys are found on the composed tree, before the
    constructor flattens merge keys (a key merged from an anchor and overridden is not a
    duplicate). Syntax errors are raised as PyYAML's ``MarkedYAMLError`` (``problem_mark.line``).
    """
    import yaml
    from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        duplicates: list[DuplicateKey] = []
        lines: dict[YamlPath, int] = {}

        def key_of(k: Node) -> Any:
            return loader.construct_object(k, deep=True) if isinstance(k, ScalarNode) else None

        def find_duplicates(n: Node, path: YamlPath, depth: int) -> None:
            if depth > 50:  # anchors can make a tree recursive; configs are a few levels deep
                return
            if isinstance(n, MappingNode):
                seen: dict[Any, int] = {}
                for k, v in n.value:
                    if k.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = key_of(k)
                    if key is not None and key in seen:
                        duplicates.append(
                            DuplicateKey(path=(*path, key), first_line=seen[key], line=k.start_mark.line + 1)
                        )
                    elif key is not None:
                        seen[key] = k.start_mark.line + 1
                    find_duplicates(v, (*path, key), depth + 1)
            elif isinstance(n, SequenceNode):
                for i, item in enumerate(n.value):
                    find_duplicates(item, (*path, i), depth + 1)

        def record(n: Node, path: YamlPath, depth: int) -> None:
            if depth > 50:
                return
            if isinstance(n, MappingNode):  # merge keys are flattened into n.value by now
                for k, v in n.value:
                    key = key_of(k)
                    if key is None:
                        continue
                    lines[(*path, key)] = k.start_mark.line + 1  # the last one wins, as in the data
                    record(v, (*path, key), depth + 1)
            elif isinstance(n, SequenceNode):
                for i, item in enumerate(n.value):
                    lines[(*path, i)] = item.start_mark.line + 1
                    record(item, (*path, i), depth + 1)

        if node is None:
            return LocatedYaml(data=None, lines={}, duplicates=[])
        find_duplicates(node, (), 0)
        data = loader.construct_document(node)
        lines[()] = node.start_mark.line + 1
        record(node, (), 0)
        return LocatedYaml(data=data, lines=lines, duplicates=duplicates)
    finally:
        loader.dispose()
