"""Check the package's import graph: layers, no cycles, no private name imported across modules.

Why a script of our own: ruff and mypy see one module at a time; neither reports
a cycle between modules or a ``_private`` name taken from another module. Every
import counts, including those inside functions (a lazy import still ties two
modules together).

    python scripts/check_imports.py            # exit 1 and list every problem
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "plugins"
PACKAGE = "snowberg"
# The package's layers, lowest first (README "Layout"): a module may import its own
# folder and the folders before it, never one after it.
LAYERS = ("core", "config", "mapping", "snowflake", "iceberg", "load", "streams", "sync", "checks", "airflow", "local")
TOP = ("cli",)


def layer(module: str) -> int | None:
    """The rank of ``snowberg.<folder>...`` in ``LAYERS`` (top-level entry points rank above all)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    if parts[1] in TOP:
        return len(LAYERS)
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(target: str, modules: set[str]) -> str | None:
    """The module an import of ``target`` loads (``a.b.name`` may name a symbol of ``a.b``)."""
    while target:
        if target in modules:
            return target
        target = target.rpartition(".")[0]
    return None


def main() -> int:
    files = sorted((ROOT / PACKAGE).rglob("*.py"))
    modules = {module_name(f) for f in files}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    problems: list[str] = []
    for f in files:
        mod = module_name(f)
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    dep = resolve(alias.name, modules)
                    if dep and dep != mod:
                        graph[mod].add(dep)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if not node.module.startswith(PACKAGE):
                    continue
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    dep = full if full in modules else resolve(node.module, modules)
                    if dep and dep != mod and not dep.startswith(mod + "."):
                        graph[mod].add(dep)
                    if alias.name.startswith("_") and full not in modules:
                        problems.append(f"{f.relative_to(ROOT.parent)}:{node.lineno}: imports private {full}")
    for mod, deps in sorted(graph.items()):
        for dep in sorted(deps):
            a, b = layer(mod), layer(dep)
            if a is not None and b is not None and b > a:
                problems.append(f"layer: {mod} ({LAYERS[a]}) imports {dep}, a higher layer")
    problems += [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    for p in problems:
        print(p)
    print(f"{len(modules)} modules, {sum(len(v) for v in graph.values())} imports, {len(problems)} problem(s)")
    return 1 if problems else 0


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each as a closed path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp) + [sorted(comp)[0]])

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
