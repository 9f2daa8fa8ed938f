"""Find what README.md and docs/*.md cite that the code does not have: config fields, run params, CLI flags.

Prose mentions many snake_case names that are not settings (functions, snapshot properties, task ids,
column names), so a name is checked only where its context says what it is:

* YAML examples (```yaml blocks) of tables.yaml / syncs.yaml, whole files or fragments of one entry
  (most of the block's top-level keys are entry fields): every key must be a field where it stands, and a
  value of a closed set (enum, literal, bool) one of its values;
* code spans that are config paths or settings: a dotted path whose first part names a section
  (`cursor.timezone`, `stream.create`) must resolve through the models; `field: value` must name a field
  and, for a closed set, a value of it (`write_mode: append`, `maintenance.enabled: false`);
* tables whose first column is headed `field` or `key` (a settings table): each name in the first column
  must be a field; with a `default` column, the cited default must be the model's;
* tables whose first column is headed `param`: each name must be a run param, and a table that lists the
  load DAG's params must list all of them;
* `snowberg <command> … --flag` in code (blocks and spans): the command must exist and have the flag; a
  lone `--flag` span must be a flag of some snowberg command.

``ALLOWED`` lists the few citations that look like one of these but mean something else, each with why.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from snowberg.config.reference import default_text, models_in, unwrap
from snowberg.config.run_params import PARAM_SCHEMAS
from snowberg.config.table_config import TableConfig
from snowberg.streams.params import STREAM_PARAM_SCHEMAS
from snowberg.sync.config import SyncConfig

REPO = Path(__file__).resolve().parents[2]

ALLOWED: dict[str, str] = {
    "cursor.description": "README: the DB-API cursor's result metadata, not the `cursor:` section",
    "--workers": "docs/performance.md: an option of `python -m bench.mapped`, not of the snowberg command",
    "--no-index": "docs/deployment.md: pip's option (MWAA requirements without a package index)",
}

ROOTS: tuple[type[BaseModel], ...] = (TableConfig, SyncConfig)


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    citation: str
    why: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.citation}: {self.why}"


# -- what the code has ----------------------------------------------------------------------------


def all_models() -> list[type[BaseModel]]:
    out: list[type[BaseModel]] = []
    stack = list(ROOTS)
    while stack:
        m = stack.pop(0)
        if m in out:
            continue
        out.append(m)
        for f in m.model_fields.values():
            stack += models_in(f.annotation)
    return out


def fields_named(name: str) -> list[Any]:
    """Every FieldInfo called ``name`` in any config model."""
    return [m.model_fields[name] for m in all_models() if name in m.model_fields]


def resolve(path: list[str], roots: tuple[type[BaseModel], ...] | list[type[BaseModel]] = ROOTS) -> list[Any]:
    """The FieldInfos ``a.b.c`` reaches from any of ``roots`` (several: a tagged union, or several roots)."""
    out = []
    for root in roots:
        f = root.model_fields.get(path[0])
        if f is None:
            continue
        if len(path) == 1:
            out.append(f)
        else:
            out += resolve(path[1:], models_in(f.annotation))
    return out


def section_names() -> set[str]:
    """Fields that hold a section (a model): the first part of a dotted config path."""
    return {n for m in all_models() for n, f in m.model_fields.items() if models_in(f.annotation)}


def closed_values(f: Any) -> set[str] | None:
    """The values a closed-set field takes, as YAML text (None: not a closed set)."""
    t, _ = unwrap(f.annotation)
    members = [a for a in (get_args(t) if get_origin(t) is not None and get_origin(t) is not Literal else [t])]
    values: set[str] = set()
    for m in members:
        m, _ = unwrap(m)
        if m is type(None):
            values.add("null")
        elif m is bool:
            values |= {"true", "false"}
        elif get_origin(m) is Literal:
            values |= {str(a) for a in get_args(m)}
        elif isinstance(m, type) and issubclass(m, Enum):
            values |= {str(e.value) for e in m}
        else:
            return None
    return values or None


@cache
def run_params() -> set[str]:
    from snowberg.airflow.operators.maintenance import maintenance_params

    return set(PARAM_SCHEMAS) | set(STREAM_PARAM_SCHEMAS) | set(maintenance_params())


@cache
def cli_options() -> dict[str, set[str]]:
    """Each snowberg subcommand's option strings (the parser ``snowberg.cli.main`` builds)."""
    from snowberg import cli

    captured: list[argparse.ArgumentParser] = []

    class Captured(Exception):
        pass

    original = argparse.ArgumentParser.parse_args

    def capture(self: argparse.ArgumentParser, *a: Any, **kw: Any) -> Any:
        captured.append(self)
        raise Captured

    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign]
    try:
        cli.main([])
    except Captured:
        pass
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    parser = captured[0]
    top = {s for a in parser._actions for s in a.option_strings}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: top | {s for a in p._actions for s in a.option_strings} for name, p in sub.choices.items()}


# -- the documents ----------------------------------------------------------------------------------


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def fenced_blocks(text: str) -> Iterator[tuple[str, int, str]]:
    """(info string, first line number, body) of each fenced code block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^\s*```(\S*)\s*$", lines[i])
        if m:
            start, info, body = i + 1, m.group(1), []
            i += 1
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i])
                i += 1
            yield info, start + 1, "\n".join(body)
        i += 1


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced blocks."""
    inside = False
    for n, line in enumerate(text.splitlines(), 1):
        if re.match(r"^\s*```", line):
            inside = not inside
            continue
        if not inside:
            yield n, line


# -- the checks -------------------------------------------------------------------------------------


def check_text(text: str, name: str) -> list[Problem]:
    """Every problem in one document's text (``name`` labels the findings)."""
    out: list[Problem] = []
    options = cli_options()
    params = run_params()
    for info, line, body in fenced_blocks(text):
        if info in ("yaml", "yml"):
            out += [Problem(name, line + d, c, w) for d, c, w in check_yaml(body)]
        if info in ("bash", "sh", "shell", "console"):  # untagged blocks are program output more often than not
            for d, cmd in enumerate(body.splitlines()):
                out += [Problem(name, line + d, c, w) for c, w in check_command(cmd, options)]
    table: list[tuple[int, list[str]]] = []
    for n, line in list(prose_lines(text)) + [(10**9, "")]:
        if line.lstrip().startswith("|"):
            cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))  # "\|" inside a cell is not a separator
            table.append((n, [c.strip() for c in cells]))
            continue
        if table:
            out += [Problem(name, ln, c, w) for ln, c, w in check_table(table, params)]
            table = []
        for span in re.findall(r"`([^`]+)`", line):
            out += [Problem(name, n, span, w) for w in check_span(span, options)]
    return out


def check_span(span: str, options: dict[str, set[str]]) -> list[str]:
    span = span.strip()
    if span in ALLOWED:
        return []
    if span.startswith("snowberg "):
        return [w for _, w in check_command(span, options)]
    if re.fullmatch(r"--[a-z][a-z0-9-]*", span):
        known = set().union(*options.values())
        return [] if span in known else ["not an option of any snowberg command"]
    m = re.fullmatch(r"([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)(?::\s*(.+))?", span)
    if not m:
        return []
    path, value = m.group(1).split("."), m.group(2)
    dotted = len(path) > 1
    if dotted and path[0] not in section_names():
        return []  # snowberg.watermark, extra.warehouse, bench.run: not a config path
    if not dotted and value is None:
        return []  # a bare name: too many kinds of things share snake_case
    found = resolve(path) or (resolve(path, all_models()) if dotted else fields_named(path[0]))
    if not found:
        if not dotted and path[0] in run_params():
            return []  # `full_refresh: true`: a param, checked by its table
        if not dotted:
            return []  # `protocol: http`, `port: 8000`: not a config field
        return [f"no config field {'.'.join(path)}"]
    if value is not None:
        v = value.strip().strip('"').strip("'")
        allowed = [closed_values(f) for f in found]
        if all(a is not None for a in allowed) and not any(v in a for a in allowed if a is not None):
            return [f"{v!r} is not a value of {'.'.join(path)} ({' | '.join(sorted(set().union(*allowed)))})"]
    return []


def check_command(cmd: str, options: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``snowberg <sub> … --flag`` inside a shell line."""
    out = []
    for m in re.finditer(r"(?:^|[;&|(]\s*)(?:\$\s+)?(?:\S*/)?snowberg\s+([a-z][a-z-]*)([^;&|#]*)", cmd.strip()):
        sub, rest = m.group(1), m.group(2)
        if sub not in options:
            out.append((f"snowberg {sub}", "not a snowberg command"))
            continue
        try:
            words = shlex.split(rest)
        except ValueError:
            words = rest.split()
        for w in words:
            flag = w.split("=", 1)[0]
            if flag.startswith("--") and flag not in options[sub]:
                out.append((f"snowberg {sub} {flag}", f"not an option of snowberg {sub}"))
    return out


def check_yaml(body: str) -> list[tuple[int, str, str]]:
    """Unknown keys and values outside closed sets in a YAML example of tables.yaml / syncs.yaml."""
    import textwrap

    try:
        data = yaml.safe_load(textwrap.dedent(body))
    except yaml.YAMLError:
        return []
    if not isinstance(data, dict):
        return []
    docs: list[tuple[type[BaseModel], Any, str]] = []
    for key, model in (("tables", TableConfig), ("syncs", SyncConfig)):
        if key in data:
            defaults = data.get("defaults") if isinstance(data.get("defaults"), dict) else {}
            docs += [
                (model, {**defaults, **e}, f"{key}[{i}]") for i, e in enumerate(data[key] or []) if isinstance(e, dict)
            ]
    if not docs and "defaults" not in data:
        known, best = max((sum(1 for k in data if k in m.model_fields), i) for i, m in enumerate(ROOTS))
        if known and known * 2 >= len(data):
            docs.append((ROOTS[best], data, "entry"))
    out = []
    for model, entry, where in docs:
        try:
            model.model_validate(entry)
        except ValidationError as exc:
            for err in exc.errors():
                loc = ".".join(
                    str(p)
                    for p in err["loc"]
                    if not (isinstance(p, str) and (p.startswith("function-") or p in ("iceberg", "native")))
                )
                if err["type"] == "extra_forbidden":
                    out.append((0, f"{where}.{loc}", "not a config field"))
                elif err["type"] in ("enum", "literal_error", "union_tag_invalid", "bool_parsing"):
                    out.append((0, f"{where}.{loc}", err["msg"]))
    return out


def check_table(rows: list[tuple[int, list[str]]], params: set[str]) -> list[tuple[int, str, str]]:
    """A settings table (first column `field`/`key`) or a params table (first column `param`)."""
    header = [c.strip("` ").lower() for c in rows[0][1]]
    if not header or header[0] not in ("field", "key", "param"):
        return []
    body = [(n, cells) for n, cells in rows[2:] if cells]
    out = []
    if header[0] == "param":
        cited = []
        for n, cells in body:
            for name in re.findall(r"`([a-z_]+)`", cells[0]):
                cited.append(name)
                if name not in params:
                    out.append((n, name, "not a run param of any snowberg DAG"))
        listed = set(cited) & set(PARAM_SCHEMAS)
        if listed and listed != set(PARAM_SCHEMAS):
            missing = sorted(set(PARAM_SCHEMAS) - listed)
            out.append((rows[0][0], ", ".join(missing), "the table lists the load DAG's params but not these"))
        return out
    default_col = next((i for i, h in enumerate(header) if "default" in h), None)
    # A settings table describes one section: the models that have the most of the (undotted) names it lists.
    listed = {name for _, cells in body for name in re.findall(r"`([a-z_][a-z0-9_]*)`", cells[0])}
    overlap = {m: len(listed & set(m.model_fields)) for m in all_models()}
    best = max(overlap.values(), default=0)
    sections = [m for m, n in overlap.items() if best and n == best and n * 2 >= len(listed)]
    for n, cells in body:
        names = re.findall(r"`([a-z_][a-z0-9_.]*)`", cells[0])
        for name in names:
            path = name.split(".")
            found = resolve(path, sections) or resolve(path) or resolve(path, all_models())
            if not found:
                out.append((n, name, "not a config field"))
            elif default_col is not None and len(names) == 1 and default_col < len(cells):
                out += [(n, name, w) for w in check_default(cells[default_col], found)]
    return out


def check_default(cell: str, found: list[Any]) -> list[str]:
    """The first code span of a `default` cell against the model's default (any field of that name may match)."""
    m = re.match(r"\s*`([^`]+)`", cell)  # a cell that opens with a value; prose defaults are not compared
    if not m:
        return []
    cited = m.group(1)
    expected = {default_text(f).strip("`") for f in found}
    if cited in expected or any(_same_default(cited, f) for f in found):
        return []
    return [f"the docs give the default {cited!r}, the model {' or '.join(sorted(expected))!r}"]


def _same_default(cited: str, f: Any) -> bool:
    from datetime import timedelta

    from snowberg.core.durations import parse_duration

    value = f.get_default(call_default_factory=True)
    try:
        if isinstance(value, timedelta):
            return parse_duration(cited) == value
        if isinstance(value, bool):
            return cited == str(value).lower()
        if isinstance(value, (int, float)):
            return float(cited.replace("_", "").replace(",", "")) == value
    except ValueError:
        return False
    return False


def check_repository() -> list[Problem]:
    out = []
    for doc in documents():
        out += check_text(doc.read_text(), str(doc.relative_to(REPO)))
    return out
