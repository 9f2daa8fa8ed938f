"""``snowberg validate``, offline: every problem of a tables.yaml or syncs.yaml, each with its file and line.

Loading a config for DAGs stops an entry at its first failing model (and a file at its first
file-level problem); a person fixing a config before deploying wants the whole list, each
problem named by file, line, entry and field. This module reads a file with line numbers
(``yaml_loader.locate_yaml``), validates each entry with the same pydantic model the DAG
factory uses (so the rules are the models', never a second copy), and adds what only the whole
file or several files can tell:

* the file's shape (``defaults`` and the list key, nothing else), keys written twice (YAML keeps
  the last value and drops the first without a word);
* entries that clash: two tables of one name or target, two syncs of one name or target;
* DAG ids built twice across all the files given (a table ``sync_x`` and a sync ``x`` both
  make ``snowberg_sync_x``; a table named ``orders__checks`` and the checks DAG of ``orders``);
* a warning where an entry reads a lake table (a sync's source) that no table of the tables files
  given writes: a table another engine loads is fine, a mistyped name is not, and only a person can tell;
* a warning where an entry's own section replaces a section of ``defaults`` that set keys the
  entry's section does not (``defaults`` merge per top-level key, not deeper).

What needs Airflow (a schedule Airflow refuses, the DAG factory building an entry's DAGs) is
given by the caller as ``entry_check`` (``snowberg.airflow.config_check``), so this module stays
importable where only the config layer is. What needs Snowflake or the lake is
``snowberg.checks.config_online``.

The file kinds are ``FileSpec`` s; tables.yaml's is ``TABLES``, syncs.yaml's lives beside its
models (``snowberg.sync.specs.SYNCS``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from snowberg.config.table_config import TABLE_DEFAULTS_REPLACE, TableConfig
from snowberg.config.yaml_loader import (
    LocatedYaml,
    YamlPath,
    entry_label,
    error_path,
    locate_yaml,
    merge_entry,
    unknown_key,
)
from snowberg.core.identifiers import clip


class Severity(StrEnum):
    """How a finding counts: an error fails validation; a warning is printed; ok records a passed online check."""

    ERROR = "error"
    WARNING = "warning"
    OK = "ok"


@dataclass(frozen=True, kw_only=True)
class Issue:
    """One finding, located: the file and line, the entry (``table``/``sync`` and its name) and the field."""

    file: str
    line: int | None
    message: str
    entity: str | None = None  # "table" | "sync"; None for the file itself
    name: str | None = None  # the entry's name, else "#<position>"
    field: str | None = None  # dotted path inside the entry (or a top-level key of the file)
    severity: Severity = Severity.ERROR

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        parts = [where]
        if self.entity is not None:
            parts.append(f"{self.entity} {self.name!r}")
        if self.field:
            parts.append(f"field {self.field!r}")
        tag = "" if self.severity is Severity.ERROR else f"{self.severity}: "
        return f"{': '.join(parts)}: {tag}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, StrEnum) else v) for k, v in asdict(self).items()}


LakeUse = tuple[str, str, str]
"""``(field, catalog, namespace.table)``: a lake table an entry writes or reads, and the field naming it."""

EntryCheck = Callable[[Any], list[tuple[str | None, str]]]
"""``valid entry model -> [(field or None, message)]``: checks that need more than the config layer."""


@dataclass(frozen=True, kw_only=True)
class FileSpec:
    """A kind of config file: its list key, the model of one entry, its DAG ids and its cross-entry rules.

    The generated reference and JSON Schema (``config.reference``) are made from the same specs.
    """

    file: str  # the default file name under include/: "tables.yaml"
    schema_file: str  # its JSON Schema in the repository: "schemas/tables.schema.json"
    list_key: str  # "tables" | "syncs": also the top-level key that tells the kind of a file
    entity: str  # "table" | "sync": how a message names an entry
    model: type[BaseModel]
    dag_ids: Callable[[Any], list[str]]
    # (position, field, message) for entries that clash with an earlier one, given the valid entries.
    conflicts: Callable[[list[tuple[int, Any]]], list[tuple[int, str, str]]]
    hidden_locs: tuple[str, ...] = ()  # pydantic's names for the members of tagged unions
    # The lake tables an entry writes and reads, as (field, catalog, namespace.table).
    lake_writes: Callable[[Any], list[LakeUse]] = field(default=lambda _: [])
    lake_reads: Callable[[Any], list[LakeUse]] = field(default=lambda _: [])
    # ``yaml_loader.merge_entry``: (key, default it drops when an entry gives the key); pairs, so a spec hashes
    replaces: tuple[tuple[str, str], ...] = ()


@dataclass(kw_only=True)
class FileResult:
    """What one file holds: its kind, its valid entries (position, model) and its findings."""

    path: str
    spec: FileSpec | None
    located: LocatedYaml | None = None
    entries: list[tuple[int, Any]] = field(default_factory=list)
    issues: list[Issue] = field(default_factory=list)

    def entry_line(self, index: int, path: YamlPath = ()) -> int | None:
        """The line of ``path`` inside entry ``index``; a key the entry does not write is looked up in ``defaults``."""
        if self.located is None or self.spec is None:
            return None
        raw = self.raw_entries()
        own = raw[index] if index < len(raw) else None
        if path and isinstance(own, dict) and path[0] not in own:
            defaults = self.located.data.get("defaults") if isinstance(self.located.data, dict) else None
            if isinstance(defaults, dict) and path[0] in defaults:
                return self.located.line_of(("defaults", *path))
        return self.located.line_of((self.spec.list_key, index, *path))

    def raw_entries(self) -> list[Any]:
        data = self.located.data if self.located is not None else None
        entries = data.get(self.spec.list_key) if isinstance(data, dict) and self.spec is not None else None
        return entries if isinstance(entries, list) else []


@dataclass(kw_only=True)
class Report:
    """Every file's findings, plus what only the files together show (DAG ids built twice)."""

    files: list[FileResult]
    issues: list[Issue] = field(default_factory=list)

    @property
    def all_issues(self) -> list[Issue]:
        """Each file's findings in line order, then those of the files together and of online checks."""
        by_line = [sorted(f.issues, key=lambda i: (i.line is None, i.line or 0)) for f in self.files]
        return [i for issues in by_line for i in issues] + self.issues

    @property
    def ok(self) -> bool:
        return not any(i.severity is Severity.ERROR for i in self.all_issues)

    def to_dict(self) -> dict[str, Any]:
        issues = self.all_issues
        return {
            "ok": self.ok,
            "files": [
                {"path": f.path, "kind": f.spec.list_key if f.spec else None, "valid_entries": len(f.entries)}
                for f in self.files
            ],
            "errors": sum(i.severity is Severity.ERROR for i in issues),
            "warnings": sum(i.severity is Severity.WARNING for i in issues),
            "issues": [i.to_dict() for i in issues],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def render(self, *, verbose: bool = False) -> str:
        """One line per finding, then a summary; ``verbose`` also lists the passed (online) checks."""
        issues = self.all_issues
        lines = [i.render() for i in issues if verbose or i.severity is not Severity.OK]
        errors = sum(i.severity is Severity.ERROR for i in issues)
        warnings = sum(i.severity is Severity.WARNING for i in issues)
        checked = ", ".join(
            f"{f.path} ({len(f.entries)} valid {f.spec.entity}{'' if len(f.entries) == 1 else 's'})"
            if f.spec
            else f.path
            for f in self.files
        )
        lines.append(
            f"{'OK' if self.ok else 'FAILED'}: {errors} error{'' if errors == 1 else 's'}, "
            f"{warnings} warning{'' if warnings == 1 else 's'} in {checked}"
        )
        return "\n".join(lines)


# -- tables.yaml ---------------------------------------------------------------


def table_dag_ids(t: TableConfig) -> list[str]:
    """The DAG ids the DAG factory builds for a valid table (``TableConfig.dag_ids``).

    A test builds the DAGs of a config and compares, so this list cannot drift from the factory.
    """
    return t.dag_ids


def _table_conflicts(entries: list[tuple[int, Any]]) -> list[tuple[int, str, str]]:
    """Two tables of one name, or two writers of one Iceberg table (a target, a stream's changelog).

    Targets clash by name alone, whatever their catalogs, as the DAG factory refuses them
    (``table_config.parse_config``); a changelog clashes with a table of the same catalog.
    """
    out: list[tuple[int, str, str]] = []
    names: dict[str, int] = {}
    targets: dict[str, tuple[str, str]] = {}
    written: dict[tuple[str, str], tuple[str, str]] = {}
    for i, t in entries:
        if t.name in names:
            out.append((i, "name", f"the name {t.name!r} is also the name of entry #{names[t.name] + 1}"))
        else:
            names[t.name] = i
        writers = [("target", t.target)]
        if t.stream is not None and t.stream.changelog_target is not None:
            writers.append(("stream.changelog_target", t.stream.changelog_target))
        for fld, iceberg_table in writers:
            other = written.get((t.catalog, iceberg_table)) or (targets.get(iceberg_table) if fld == "target" else None)
            if other is not None:
                out.append((i, fld, f"{iceberg_table} is also written by table {other[0]!r} (its {other[1]})"))
                continue
            written[(t.catalog, iceberg_table)] = (t.name, fld)
            if fld == "target":
                targets[iceberg_table] = (t.name, fld)
    return out


def _table_writes(t: TableConfig) -> list[LakeUse]:
    out = [("target", t.catalog, t.target)]
    if t.stream is not None and t.stream.changelog_target is not None:
        out.append(("stream.changelog_target", t.catalog, t.stream.changelog_target))
    return out


TABLES = FileSpec(
    file="tables.yaml",
    schema_file="schemas/tables.schema.json",
    list_key="tables",
    entity="table",
    model=TableConfig,
    dag_ids=table_dag_ids,
    conflicts=_table_conflicts,
    lake_writes=_table_writes,
    replaces=tuple(TABLE_DEFAULTS_REPLACE.items()),
)


# -- one file ------------------------------------------------------------------


def spec_of(data: Any, path: str | Path, specs: Sequence[FileSpec]) -> FileSpec | None:
    """The kind of a file: by its list key, else by its file name (``tables.yaml``, ``syncs.yaml``)."""
    if isinstance(data, dict):
        for s in specs:
            if s.list_key in data:
                return s
    stem = Path(path).name.split(".")[0].lower()
    return next((s for s in specs if stem.endswith(s.list_key)), None)


def validate_text(
    text: str,
    *,
    source: str,
    specs: Sequence[FileSpec],
    entry_check: EntryCheck | None = None,
) -> FileResult:
    """Every finding of one config file's text (``source`` is how messages name the file)."""
    from yaml import MarkedYAMLError, YAMLError

    try:
        located = locate_yaml(text)
    except YAMLError as exc:
        mark = exc.problem_mark if isinstance(exc, MarkedYAMLError) else None
        line = mark.line + 1 if mark is not None else None
        issue = Issue(file=source, line=line, message=f"not valid YAML: {exc}")
        return FileResult(path=source, spec=None, issues=[issue])
    spec = spec_of(located.data, source, specs)
    result = FileResult(path=source, spec=spec, located=located)
    if spec is None:
        kinds = " or ".join(f"'{s.list_key}'" for s in specs)
        result.issues.append(
            Issue(file=source, line=located.line_of(()), message=f"not a snowberg config: no top-level {kinds} key")
        )
        return result
    for dup in located.duplicates:
        result.issues.append(_duplicate_key_issue(result, dup.path, dup.first_line, dup.line))
    if not _shape(result):
        return result
    _entries(result, entry_check)
    return result


def validate_file(path: str | Path, *, specs: Sequence[FileSpec], entry_check: EntryCheck | None = None) -> FileResult:
    """``validate_text`` of a file; a file that cannot be read is one finding."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        return FileResult(path=str(path), spec=None, issues=[Issue(file=str(path), line=None, message=str(exc))])
    return validate_text(text, source=str(path), specs=specs, entry_check=entry_check)


def validate_files(
    paths: Sequence[str | Path], *, specs: Sequence[FileSpec], entry_check: EntryCheck | None = None
) -> Report:
    """Each file, then the DAG ids of all of them together."""
    report = Report(files=[validate_file(p, specs=specs, entry_check=entry_check) for p in paths])
    built: dict[str, tuple[FileResult, int]] = {}
    for f in report.files:
        if f.spec is None:
            continue
        for i, entry in f.entries:
            for dag_id in f.spec.dag_ids(entry):
                if dag_id in built:
                    other, j = built[dag_id]
                    other_name = entry_label(other.raw_entries()[j] if j < len(other.raw_entries()) else {}, j)
                    where = f"{other.path}:{other.entry_line(j, ('name',))}"
                    report.issues.append(
                        Issue(
                            file=f.path,
                            line=f.entry_line(i, ("name",)),
                            entity=f.spec.entity,
                            name=entry.name,
                            field="name",
                            message=f"DAG id {dag_id} is also built for {other.spec.entity if other.spec else '?'} "
                            f"{other_name!r} ({where}); Airflow would keep only one of them",
                        )
                    )
                else:
                    built[dag_id] = (f, i)
    report.issues += _unwritten_reads(report)
    return report


def _unwritten_reads(report: Report) -> list[Issue]:
    """A warning per lake table an entry reads that no table of the given tables files writes."""
    tables_files = [f.path for f in report.files if f.spec is TABLES]
    if not tables_files:
        return []  # what is written is not known
    written = {
        (cat, name) for f in report.files if f.spec for _, e in f.entries for _, cat, name in f.spec.lake_writes(e)
    }
    out = []
    for f in report.files:
        if f.spec is None:
            continue
        for i, entry in f.entries:
            for fld, cat, name in f.spec.lake_reads(entry):
                if (cat, name) not in written:
                    out.append(
                        Issue(
                            file=f.path,
                            line=f.entry_line(i, tuple(fld.split("."))),
                            entity=f.spec.entity,
                            name=entry.name,
                            field=fld,
                            severity=Severity.WARNING,
                            message=f"no table of {', '.join(tables_files)} writes {name} in catalog {cat!r}: the "
                            f"{f.spec.entity} reads a table loaded by something else, or the name is mistyped",
                        )
                    )
    return out


def _duplicate_key_issue(result: FileResult, path: YamlPath, first_line: int, line: int) -> Issue:
    assert result.spec is not None
    entity = name = None
    fld = ".".join(map(str, path))
    if len(path) >= 3 and path[0] == result.spec.list_key and isinstance(path[1], int):
        raw = result.raw_entries()
        entity = result.spec.entity
        name = entry_label(raw[path[1]] if path[1] < len(raw) else {}, path[1])
        fld = ".".join(map(str, path[2:]))
    return Issue(
        file=result.path,
        line=line,
        entity=entity,
        name=name,
        field=fld,
        message=f"written twice in one mapping (first on line {first_line}); YAML keeps this one and drops the first",
    )


def _shape(result: FileResult) -> bool:
    """The file-level rules of ``yaml_loader.merged_entries``, each a finding; False when no entry can be read."""
    assert result.spec is not None and result.located is not None
    data, key, src = result.located.data, result.spec.list_key, result.path
    line = result.located.line_of
    if not isinstance(data, dict):
        result.issues.append(Issue(file=src, line=line(()), message=f"expected a mapping with '{key}'"))
        return False
    for k in sorted(set(map(str, data)) - {"defaults", key}):
        result.issues.append(
            Issue(file=src, line=line((k,)), field=k, message=f"unknown top-level key (allowed: defaults, {key})")
        )
    ok = True
    defaults = data.get("defaults")
    if defaults is not None and not isinstance(defaults, dict):
        result.issues.append(Issue(file=src, line=line(("defaults",)), field="defaults", message="must be a mapping"))
        ok = False
    entries = data.get(key)
    if not isinstance(entries, list) or not entries:
        result.issues.append(Issue(file=src, line=line((key,)), field=key, message="must be a non-empty list"))
        ok = False
    return ok


def _entries(result: FileResult, entry_check: EntryCheck | None) -> None:
    """Validate each entry (defaults merged) on its own, so one entry's errors never hide another's."""
    assert result.spec is not None and result.located is not None
    spec = result.spec
    defaults = result.located.data.get("defaults") or {}
    for i, raw in enumerate(result.raw_entries()):
        entry = merge_entry(defaults, raw, dict(spec.replaces)) if isinstance(raw, dict) else raw
        label = entry_label(entry, i)
        if isinstance(raw, dict):
            result.issues += _shallow_merge_warnings(result, i, label, defaults, raw)
        try:
            model = spec.model.model_validate(entry)
        except ValidationError as exc:
            for err in exc.errors():
                path = error_path(err["loc"], spec.hidden_locs)
                msg = (
                    unknown_key(spec.model, err["loc"])
                    if err["type"] == "extra_forbidden"
                    else clip(err["msg"], 400)[1:-1]
                )
                if err["type"] == "value_error" and msg.startswith("Value error, "):
                    msg = msg[len("Value error, ") :]
                result.issues.append(
                    Issue(
                        file=result.path,
                        line=result.entry_line(i, path),
                        entity=spec.entity,
                        name=label,
                        field=".".join(map(str, path)) or None,
                        message=msg + _from_defaults(raw, path),
                    )
                )
            continue
        result.entries.append((i, model))
        for fld, msg in entry_check(model) if entry_check else []:
            path = tuple(fld.split(".")) if fld else ()
            result.issues.append(
                Issue(
                    file=result.path,
                    line=result.entry_line(i, path),
                    entity=spec.entity,
                    name=label,
                    field=fld,
                    message=msg + _from_defaults(raw, path),
                )
            )
    for i, fld, msg in spec.conflicts(result.entries):
        path = tuple(fld.split("."))
        result.issues.append(
            Issue(
                file=result.path,
                line=result.entry_line(i, path),
                entity=spec.entity,
                name=entry_label(result.raw_entries()[i], i),
                field=fld,
                message=msg,
            )
        )


def _from_defaults(raw: Any, path: YamlPath) -> str:
    return " (the value comes from defaults)" if path and isinstance(raw, dict) and path[0] not in raw else ""


def _shallow_merge_warnings(
    result: FileResult, index: int, label: str, defaults: dict[str, Any], raw: dict[str, Any]
) -> list[Issue]:
    """An entry's own section replaces the whole section of ``defaults``: say which default keys it drops."""
    assert result.spec is not None
    out = []
    for key, value in raw.items():
        base = defaults.get(key)
        if isinstance(base, dict) and isinstance(value, dict):
            dropped = sorted(set(map(str, base)) - set(map(str, value)))
            if dropped:
                out.append(
                    Issue(
                        file=result.path,
                        line=result.entry_line(index, (key,)),
                        entity=result.spec.entity,
                        name=label,
                        field=str(key),
                        severity=Severity.WARNING,
                        message=f"replaces the whole '{key}' section of defaults (defaults merge per top-level "
                        f"key), so the defaults' {key}.{{{', '.join(dropped)}}} do not apply to this entry; repeat "
                        "them here if they should",
                    )
                )
    return out
