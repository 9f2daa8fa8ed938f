"""Which configs a project's DAG files read, found by reading them (``ast``), never by importing them.

``snowberg validate`` checks "the configs the DAG files read". A DAG file calls a builder
(``build_dags``, ``build_sync_dags``, ``build_summary_dags``) with an optional config path and
``dag_file=__file__``; each call is resolved here exactly as the builder resolves it
(``locations.config_path``: the argument, the environment, ``include/`` beside the DAG file's
folder, ``./include``). A call whose config does not exist is a problem of the DAG file: Airflow
would fail to import it, while the configs found elsewhere would validate fine. A path that is not
a string literal cannot be known without running the file: such a call is skipped and said so.
A relative path is resolved against the current directory, as the builder resolves it in a
process started there.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from pathlib import Path

from snowberg.config.locations import ConfigFile, ConfigNotFoundError, config_path

# builder → the configs it reads: (keyword, position of the positional argument, kind).
BUILDERS: dict[str, tuple[tuple[str, int, ConfigFile], ...]] = {
    "build_dags": (("config", 0, ConfigFile.TABLES),),
    "build_sync_dags": (("config", 0, ConfigFile.SYNCS),),
    "build_summary_dags": (("config", 0, ConfigFile.SUMMARY), ("tables_config", 1, ConfigFile.TABLES)),
}


@dataclass(frozen=True, kw_only=True)
class ConfigUse:
    """One config a builder call of a DAG file reads: the path it resolves to, or why it cannot."""

    dag_file: Path
    line: int
    builder: str
    kind: ConfigFile
    path: Path | None  # None: not found, or not knowable
    problem: str | None = None  # set when the DAG file would fail to import: the config does not exist
    note: str | None = None  # set when the path cannot be known without running the file


def dag_file_configs(dags_folder: Path) -> list[ConfigUse]:
    """Every config the builder calls of the ``*.py`` files under ``dags_folder`` read, in file and line order."""
    out: list[ConfigUse] = []
    for file in sorted(dags_folder.rglob("*.py")):
        try:
            tree = ast.parse(file.read_text(), str(file))
        except (OSError, SyntaxError, ValueError):
            continue  # not ours to judge: Airflow reports the file's own import error
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) in BUILDERS]
        for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
            out += _uses(file, call)
    return out


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _uses(file: Path, call: ast.Call) -> list[ConfigUse]:
    builder = _name(call.func)
    assert builder is not None
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    dag_file = keywords.get("dag_file")
    beside = file if isinstance(dag_file, ast.Name) and dag_file.id == "__file__" else None
    out = []
    for keyword, position, kind in BUILDERS[builder]:
        arg = keywords.get(keyword, call.args[position] if position < len(call.args) else None)
        use = ConfigUse(dag_file=file, line=call.lineno, builder=builder, kind=kind, path=None)
        if arg is not None and not (isinstance(arg, ast.Constant) and isinstance(arg.value, str | None)):
            out.append(replace(use, note=f"{builder}'s {kind.value} is computed at parse time: not checked here"))
            continue
        explicit = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
        try:
            path = config_path(kind, explicit, dag_file=beside).absolute()
        except ConfigNotFoundError as exc:
            out.append(replace(use, problem=f"{builder} finds no {kind.value}: {exc}"))
            continue
        if not path.is_file():
            out.append(replace(use, path=path, problem=f"{builder} reads {path}, which does not exist"))
        else:
            out.append(replace(use, path=path))
    return out
