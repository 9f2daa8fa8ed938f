"""The configuration reference and the editors' JSON Schemas, generated from the config models.

Every field of tables.yaml and syncs.yaml is a pydantic field; its type, default and constraints
are the model's, and its description is the docstring written under it (PEP 257 attribute
docstrings, as Sphinx and IDEs read them). Rendering both documents from the models means a new
field appears in them as soon as it exists, and ``snowberg docs --check`` fails until they are
regenerated.

Why our own docstring reader instead of pydantic's ``use_attribute_docstrings``: that option reads
and parses each model's source when the class is created, which every DAG-file parse (and every
task process) would pay (~90 ms for the config models on the 2-core machine we measured);
reading them here costs only ``snowberg docs``.
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from functools import cache
from typing import Any, Literal, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from snowberg.config.check_settings import Size
from snowberg.config.fields import (
    ColumnNames,
    ConnectionId,
    ConnectionRef,
    ExternalVolumeName,
    IcebergTableRef,
    PoolName,
    SnowflakeTableRef,
)
from snowberg.config.validate import FileSpec
from snowberg.core.durations import format_duration
from snowberg.core.models import Duration, models_in, union_members, unwrap

# How the reference names the checked types of ``config.fields`` and ``core.models``: an Annotated
# alias is recognised by its validator objects, which pydantic keeps as they are.
ALIASES: dict[int, str] = {
    id(m): name
    for alias, name in (
        (Duration, "duration"),
        (Size, "size"),
        (SnowflakeTableRef, "`database.schema.table`"),
        (IcebergTableRef, "`namespace.table`"),
        (ConnectionRef, "connection id or catalog name"),
        (ConnectionId, "connection id"),
        (PoolName, "pool name"),
        (ColumnNames, "list of column names"),
        (ExternalVolumeName, "identifier"),
    )
    for m in get_args(alias)[1:]
}


@cache
def attribute_docs(cls: type) -> dict[str, str]:
    """The docstring under each annotated field of ``cls`` and its bases (the nearest class wins)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass in (object, BaseModel) or not issubclass(klass, BaseModel):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        assert isinstance(body, ast.ClassDef)
        for stmt, nxt in zip(body.body, body.body[1:], strict=False):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                out[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return out


def enum_meanings(enum: type[Enum]) -> dict[str, str]:
    """``value: meaning`` lines of an enum's docstring (continuation lines indented), by value."""
    values = {str(m.value) for m in enum}
    out: dict[str, str] = {}
    current: str | None = None
    for line in inspect.cleandoc(enum.__doc__ or "").splitlines():
        m = re.match(r"^(\w+):\s+(.*)$", line)
        if m and m.group(1) in values:
            current = m.group(1)
            out[current] = m.group(2).strip()
        elif current is not None and line.startswith(" ") and line.strip():
            out[current] += " " + line.strip()
        else:
            current = None
    return out


def markdown(text: str) -> str:
    """A docstring as one Markdown table cell: RST literals become code spans, lines join, pipes are escaped."""
    text = re.sub(r"``(.+?)``", r"`\1`", " ".join(text.split()))
    return text.replace("|", "\\|")


def _first_paragraph(doc: str | None) -> str:
    return inspect.cleandoc(doc or "").split("\n\n")[0]


# -- the models as a tree of sections -----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Section:
    """One model's table in the reference: where it sits in the file (``tables[].cursor``) and its fields."""

    anchor: str
    path: str
    model: type[BaseModel]
    title: str  # e.g. "`tables[].target` with `kind: native`"


def sections(root: type[BaseModel], path: str, seen: set[type[BaseModel]] | None = None) -> list[Section]:
    """``root`` and every model under it, depth first, each once (the first place it appears names it).

    ``seen``: models already given a section (by an earlier file), which are left out here.
    """
    out: list[Section] = []
    seen = set() if seen is None else seen

    def visit(model: type[BaseModel], at: str, title: str) -> None:
        if model in seen:
            return
        seen.add(model)
        out.append(Section(anchor=_anchor(at, model), path=at, model=model, title=title))
        for name, f in model.model_fields.items():
            inner = models_in(f.annotation)
            for m in inner:
                tag = _tag(m) if len(inner) > 1 else None
                item = "[]" if _is_list(f.annotation) else ""
                visit(m, f"{at}.{name}{item}", f"`{at}.{name}{item}`" + (f" with `kind: {tag}`" if tag else ""))

    visit(root, path, f"`{path}`")
    return out


def _is_list(annotation: Any) -> bool:
    t, _ = unwrap(annotation)
    return any(get_origin(unwrap(m)[0]) is list for m in union_members(t))


def _tag(model: type[BaseModel]) -> str | None:
    kind = model.model_fields.get("kind")
    args = get_args(kind.annotation) if kind is not None else ()
    return str(args[0]) if args else None


def _anchor(path: str, model: type[BaseModel]) -> str:
    tag = _tag(model)
    base = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")
    return f"{base}-{tag}" if tag else base


# -- types and defaults, as the reference writes them ----------------------------------------------


def type_text(annotation: Any, metadata: Sequence[Any], links: Callable[[type], str | None]) -> str:
    """What a field holds, in the words of the reference (``duration``, ``list of column names``, …).

    ``links`` gives the Markdown link to a model's section or an enum's values, when there is one.
    """
    for m in metadata:
        if id(m) in ALIASES:
            return ALIASES[id(m)] + _constraints(metadata)
    for m in metadata:  # a field that reads another shape than it keeps (``partition_by``: text or a section)
        given = getattr(m, "json_schema_input_type", PydanticUndefined)
        if given is not PydanticUndefined:
            return type_text(given, [], links)
    t, inner = unwrap(annotation)
    if inner:
        return type_text(t, [*inner, *metadata], links)
    members = union_members(t)
    if len(members) > 1:
        return " or ".join(type_text(m, [], links) for m in members)
    t = members[0]
    t, inner = unwrap(t)
    if inner:
        return type_text(t, inner, links)
    origin = get_origin(t)
    if origin is list:
        return "list of " + _plural(type_text(get_args(t)[0], [], links))
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in get_args(t))
    if isinstance(t, type) and issubclass(t, Enum):
        link = links(t)
        values = " \\| ".join(f"`{m.value}`" for m in t)
        return f"{values} ({link})" if link else values
    if isinstance(t, type) and issubclass(t, BaseModel):
        link = links(t)
        return f"section {link}" if link else "section"
    checks = [getattr(getattr(m, "func", None), "__qualname__", "") for m in metadata]
    if any(q.startswith("identifier.") for q in checks):
        return "identifier"
    if any(q.startswith("identifiers.") for q in checks):
        return "list of identifiers"
    base = {bool: "bool", int: "integer", float: "number", str: "text", timedelta: "duration"}.get(t, str(t))
    return base + _constraints(metadata)


def _plural(text: str) -> str:
    return {"integer": "integers", "number": "numbers", "identifier": "identifiers", "bool": "bools"}.get(text, text)


def _constraints(metadata: Sequence[Any]) -> str:
    parts = []
    for m in metadata:
        if isinstance(m, Ge):
            parts.append(f"≥ {m.ge}")
        elif isinstance(m, Gt):
            parts.append(f"> {m.gt}")
        elif isinstance(m, Le):
            parts.append(f"≤ {m.le}")
        elif isinstance(m, Lt):
            parts.append(f"< {m.lt}")
        elif isinstance(m, MinLen):
            parts.append(f"at least {m.min_length} long")
        elif isinstance(m, MaxLen):
            parts.append(f"at most {m.max_length} long")
    return (", " + ", ".join(parts)) if parts else ""


def _size(n: int) -> str:
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, timedelta):
        return format_duration(value)
    if value == "":
        return '""'
    return str(value)


def default_text(f: FieldInfo) -> str:
    """The default as a YAML author would write it; ``required``; ``—`` for unset."""
    if f.is_required():
        return "required"
    value = f.get_default(call_default_factory=True)
    if value is None:
        return "—"
    if isinstance(value, BaseModel):
        return "(its fields' defaults)"
    if isinstance(value, list):
        return "`[" + ", ".join(_yaml_scalar(v) for v in value) + "]`"
    if any(id(m) in ALIASES and ALIASES[id(m)] == "size" for m in f.metadata):
        return f"`{_size(int(value))}`"
    return f"`{_yaml_scalar(value)}`"


# -- the Markdown reference -------------------------------------------------------------------------


def _enums_in(models: Sequence[type[BaseModel]]) -> list[type[Enum]]:
    out: list[type[Enum]] = []
    for model in models:
        for f in model.model_fields.values():
            stack = [f.annotation]
            while stack:
                a = stack.pop()
                if isinstance(a, type) and issubclass(a, Enum):
                    if a not in out:
                        out.append(a)
                else:
                    stack.extend(get_args(a))
    return out


def render_reference(files: Sequence[FileSpec], *, command: str = "snowberg docs") -> str:
    """The whole ``docs/configuration-reference.md``."""
    seen: set[type[BaseModel]] = set()
    all_sections = [(doc, sections(doc.model, f"{doc.list_key}[]", seen)) for doc in files]
    models = [s.model for _, secs in all_sections for s in secs]
    enums = _enums_in(models)
    links: dict[type, str] = {}  # how a type cell points at a model's section or an enum's values
    for _, secs in all_sections:
        for s in secs:
            links.setdefault(s.model, f"[`{s.path}`](#{s.anchor})")
    for e in enums:
        links[e] = f"[values](#{e.__name__.lower()})"
    lines = [
        "# Configuration reference",
        "",
        f"Generated from the pydantic models by `{command}`; do not edit by hand. Every field of",
        "`include/tables.yaml` and `include/syncs.yaml`, with its type, default and meaning. How the files",
        "work together (defaults, validation, run params, the cursor's clock): [configuration.md](configuration.md).",
        "",
        "Both files hold a list of entries under one key and an optional `defaults` mapping. `defaults` is merged",
        "into every entry **per top-level key**: an entry's own value replaces the default's whole value, also for",
        "a section (a table's own `alerts:` replaces the whole `alerts:` of `defaults`; `snowberg validate` warns",
        "when that drops keys). Unknown keys are errors everywhere. `snowberg validate` checks a file against these",
        "rules; the JSON Schemas below let an editor complete and check fields as you type.",
        "",
        "Formats: a **duration** is `90s`, `15m`, `2h`, `1d`, `1w`, `500ms`, a number of seconds, or ISO 8601",
        "(`PT1H`); a **size** is a number of bytes or `32MiB`, `128MB`, `1GiB`; a **connection id or catalog",
        "name** has letters, digits, `_`, `.` and `-`; identifiers are plain Snowflake identifiers (unquoted).",
        "`—` means unset.",
        "",
    ]
    for doc, secs in all_sections:
        lines += [
            f"## {doc.file}",
            "",
            f"Top-level keys: `defaults` (entry fields merged into every entry) and `{doc.list_key}` (a non-empty",
            f"list of entries). JSON Schema for editors: [`{doc.schema_file}`](../{doc.schema_file}).",
            "",
        ]
        for s in secs:
            docs = attribute_docs(s.model)
            intro = markdown(_first_paragraph(s.model.__doc__))
            lines += [f'<a id="{s.anchor}"></a>', "", f"### {s.title}", "", intro, ""]
            lines += ["| field | type | default | description |", "|---|---|---|---|"]
            for name, f in s.model.model_fields.items():
                typ = type_text(f.annotation, f.metadata, links.get)
                lines.append(f"| `{name}` | {typ} | {default_text(f)} | {markdown(docs.get(name, ''))} |")
            lines.append("")
    lines += ["## Closed sets", ""]
    for e in enums:
        meanings = enum_meanings(e)
        lines += [f'<a id="{e.__name__.lower()}"></a>', "", f"### {e.__name__}", ""]
        intro = _first_paragraph(e.__doc__).split("\n")[0]
        lines += [markdown(intro), "", "| value | meaning |", "|---|---|"]
        lines += [f"| `{m.value}` | {markdown(meanings.get(str(m.value), ''))} |" for m in e]
        lines.append("")
    return "\n".join(lines)


# -- JSON Schema for editors ------------------------------------------------------------------------


def file_schema(doc: FileSpec) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of a whole YAML file: ``defaults`` + the list of entries.

    It is pydantic's schema of the entry model (``model_json_schema``: the types, enums,
    constraints and defaults the models validate with), with each field's docstring as its
    ``description`` and the file's own top level around it. Rules between fields (exactly one of
    ``source.table``/``source.query``, identifier syntax) are the models' and are checked by
    ``snowberg validate``, not by the editor. A ``defaults`` entry may leave out required fields.
    """
    entry = doc.model.model_json_schema()
    defs: dict[str, Any] = entry.pop("$defs", {})
    defs[doc.model.__name__] = entry
    for model in {s.model for s in sections(doc.model, doc.list_key)}:
        schema = defs.get(model.__name__)
        if schema is None:
            raise AssertionError(f"pydantic named the schema of {model.__qualname__} differently")
        for name, text in attribute_docs(model).items():
            prop = schema.get("properties", {}).get(name)
            if prop is not None:
                prop["description"] = text
    defaults = {
        "type": "object",
        "description": f"Fields merged into every entry of '{doc.list_key}' (per top-level key: an entry's own "
        "value replaces the default's whole value).",
        "additionalProperties": False,
        "properties": copy.deepcopy(entry["properties"]),
    }
    return _markdown_descriptions(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"snowberg {doc.file}",
            "description": f"snowberg {doc.file}, generated from {doc.model.__module__}.{doc.model.__qualname__}",
            "type": "object",
            "additionalProperties": False,
            "required": [doc.list_key],
            "properties": {
                "defaults": defaults,
                doc.list_key: {"type": "array", "minItems": 1, "items": {"$ref": f"#/$defs/{doc.model.__name__}"}},
            },
            "$defs": dict(sorted(defs.items())),
        }
    )


def _markdown_descriptions(node: Any) -> Any:
    """Every ``description`` as editors show it: Markdown code spans for RST literals, one paragraph per line."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(value).split("\n\n")]
                node[key] = re.sub(r"``(.+?)``", r"`\1`", "\n\n".join(paragraphs))
            else:
                _markdown_descriptions(value)
    elif isinstance(node, list):
        for item in node:
            _markdown_descriptions(item)
    return node


def schema_text(doc: FileSpec) -> str:
    """``file_schema`` as the text written to ``schemas/*.schema.json``."""
    return json.dumps(file_schema(doc), indent=2, ensure_ascii=False) + "\n"
