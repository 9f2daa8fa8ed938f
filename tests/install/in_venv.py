"""Checks that run *inside* a venv that holds only the snowberg wheel and what it declares (tests/install).

Run by that venv's interpreter, never imported by pytest: it may import nothing
from the repository. Each command prints one line ``RESULT <json>`` for the test.

    python in_venv.py imports   every module imports; every import is a declared dependency
    python in_venv.py deploy    DagBag over ./dags, one load and one volume check (dag.test())
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import sys
from importlib.metadata import distribution, distributions
from pathlib import Path
from typing import Any


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(req: str) -> str:
    return canonical(re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0])


def local_extra() -> set[str]:
    """The distributions of the ``local`` extra (the emulator), which this venv does not hold."""
    return {requirement_name(r) for r in distribution("snowberg").requires or [] if re.search(r"extra == .local.", r)}


def declared() -> set[str]:
    """The distributions snowberg's wheel requires at run time (no extras), with the apache-airflow metapackage's."""
    names = set()
    for req in distribution("snowberg").requires or []:
        if "extra ==" in req:
            continue
        names.add(requirement_name(req))
    # `apache-airflow` is a metapackage: its code is in apache-airflow-core and apache-airflow-task-sdk.
    for req in distribution("apache-airflow").requires or []:
        if "extra ==" not in req:
            names.add(canonical(re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0]))
    return names


def file_owners() -> dict[str, str]:
    """Installed file (absolute path) → the distribution that installed it (from each RECORD)."""
    owners: dict[str, str] = {}
    for dist in distributions():
        for f in dist.files or []:
            owners[str(Path(str(dist.locate_file(f))).resolve())] = canonical(dist.metadata["Name"])
    return owners


def imported_modules(package_dir: Path) -> dict[str, set[str]]:
    """Every absolute module name snowberg imports (module level and inside functions) → the files importing it."""
    found: dict[str, set[str]] = {}
    for path in package_dir.rglob("*.py"):
        if "examples" in path.relative_to(package_dir).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from a import b`: b may be a module (`from snowflake import connector`) or a name in a.
                names = [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if name.split(".")[0] in sys.stdlib_module_names or name.split(".")[0] in ("snowberg", "__future__"):
                    continue
                found.setdefault(name, set()).add(str(path.relative_to(package_dir)))
    return found


def cmd_imports() -> dict[str, Any]:
    import snowberg

    package_dir = Path(snowberg.__file__).resolve().parent
    modules = []
    local = local_extra()
    needs_local: dict[str, str] = {}  # module → the local-extra distribution it could not import
    for info in pkgutil.walk_packages(snowberg.__path__, "snowberg."):
        if info.name.startswith("snowberg.examples"):
            continue
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            # The emulator's own modules import the local extra's packages; nothing else may need them.
            missing = canonical((exc.name or "").split(".")[0])
            if missing not in local:
                raise
            needs_local[info.name] = missing
            continue
        modules.append(info.name)
    owners = file_owners()
    allowed = declared()
    undeclared: dict[str, str] = {}
    unimportable: dict[str, str] = {}
    local_users: dict[str, set[str]] = {}
    for name, users in sorted(imported_modules(package_dir).items()):
        if canonical(name.split(".")[0]) in local:
            # Declared in the local extra (checked by name: this venv does not install it), and imported only
            # by the emulator's modules (checked by the test from needs_local).
            local_users.setdefault(name, set()).update(users)
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:
            try:  # `from a import b` where b is a name in module a
                module = importlib.import_module(name.rpartition(".")[0])
                getattr(module, name.rpartition(".")[2])
            except (ImportError, AttributeError) as exc:
                unimportable[name] = f"{exc!r} (imported by {sorted(users)})"
                continue
        origin = getattr(module, "__file__", None)
        owner = owners.get(str(Path(origin).resolve())) if origin else None
        if owner is None or owner not in allowed:
            undeclared[module.__name__] = f"from distribution {owner} (imported by {sorted(users)})"

    from jsonschema import FormatChecker

    from snowberg.config.run_params import RunParamError, parse_instant

    # ISO 8601 basic format is not RFC 3339: the trigger form's date-time check and ours must refuse it.
    basic = "20260901T000000Z"
    try:
        parse_instant("window_start", basic)
        ours_refuses = False
    except RunParamError:
        ours_refuses = True
    return {
        "python": sys.executable,
        "snowberg_file": snowberg.__file__,
        "version": snowberg.__version__,
        "dist_version": distribution("snowberg").version,
        "modules": len(modules),
        "undeclared": undeclared,
        "unimportable": unimportable,
        "needs_local": needs_local,
        "local_imports": {k: sorted(v) for k, v in local_users.items()},
        "date_time_format_checked": not FormatChecker().conforms(basic, "date-time"),
        "run_param_refuses_basic_format": ours_refuses,
    }


def cmd_deploy() -> dict[str, Any]:
    """The example project's DAGs parsed by Airflow, the demo orders loaded and volume-checked through dag.test()."""
    from airflow.dag_processing.dagbag import DagBag
    from pyiceberg.catalog import load_catalog

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    out: dict[str, Any] = {
        "import_errors": {str(k): str(v)[-2000:] for k, v in bag.import_errors.items()},
        "dag_ids": sorted(bag.dag_ids),
    }
    if out["import_errors"]:
        return out
    load = bag.dags["snowberg_demo_orders"].test()
    out["load"] = {"state": str(load.state), "tasks": {t.task_id: str(t.state) for t in load.get_task_instances()}}
    table = load_catalog("lake").load_table("shop.orders")
    out["lake_rows"] = len(table.scan().to_arrow())
    checks = bag.dags["snowberg_demo_orders__checks"].test()
    out["checks"] = {
        "state": str(checks.state),
        "tasks": {t.task_id: str(t.state) for t in checks.get_task_instances()},
    }
    return out


if __name__ == "__main__":
    result = {"imports": cmd_imports, "deploy": cmd_deploy}[sys.argv[1]]()
    print("RESULT " + json.dumps(result, default=str))
