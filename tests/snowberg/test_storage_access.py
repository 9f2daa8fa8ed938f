"""Storage is opened through the catalog's FileIO only (``table.io``): a source check that fails on a new way.

A FileIO rebuilt from table properties or the environment loses the endpoint and the (vended) credentials
the catalog got from its Airflow connection: merges failed on S3 that way. The lake scenarios catch such a
path only where they run it; this check reads every module of the package, so a new one fails here first.
Allowed: ``checks/probe.py``'s ``writer_file_io``, which builds the writer's FileIO from the catalog's own
properties where no table exists yet (docs/lakes.md), and ``fs_by_scheme`` on a FileIO the caller was given.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "plugins" / "snowberg"
# Calls that open storage without the catalog's FileIO.
FORBIDDEN = {
    "load_file_io",  # pyiceberg.io: a FileIO from whatever properties it is given
    "PyArrowFileIO",
    "FsspecFileIO",
    "S3FileSystem",  # pyarrow.fs / s3fs
    "GcsFileSystem",
    "AzureFileSystem",
    "LocalFileSystem",
    "from_uri",  # pyarrow.fs.FileSystem.from_uri
}
ALLOWED = {("checks/probe.py", "writer_file_io", "load_file_io")}


def storage_openings() -> list[tuple[str, str, str]]:
    """(module, enclosing function, call) for every forbidden call in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        rel = path.relative_to(PACKAGE).as_posix()

        def visit(node: ast.AST, func: str, rel: str = rel) -> None:
            for child in ast.iter_child_nodes(node):
                name = func
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    name = child.name
                if isinstance(child, ast.Call):
                    f = child.func
                    called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                    if called in FORBIDDEN:
                        found.append((rel, func, called))
                visit(child, name)

        visit(tree, "<module>")
    return found


def test_no_module_opens_storage_other_than_through_the_catalogs_file_io() -> None:
    assert [o for o in storage_openings() if o not in ALLOWED] == []


def test_the_check_sees_the_one_allowed_opening() -> None:
    # Guards the guard: were the walk blind (a renamed module, a parse that finds no calls), the test above
    # would pass on anything.
    assert ("checks/probe.py", "writer_file_io", "load_file_io") in storage_openings()
