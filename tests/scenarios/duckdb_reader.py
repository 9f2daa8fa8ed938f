"""Read Iceberg tables with DuckDB's iceberg extension: run by a side venv's interpreter, never imported by pytest.

    python duckdb_reader.py <requests.json>

``requests.json`` is a list of ``{"label", "metadata", "out"}``: for each, the table state that the metadata
file describes is read with ``iceberg_scan`` and written to ``out`` as Parquet (DuckDB's own writer keeps its
types: TIMESTAMP, TIMESTAMP WITH TIME ZONE, DECIMAL(p,s), BLOB, TIME, DATE, DOUBLE). One line
``RESULT <json>`` maps each label to DuckDB's column types (``DESCRIBE``) or to the error it raised.

The extensions come from PyPI packages (``duckdb-extension-iceberg`` and ``-avro``), installed into a private
extension directory: nothing is downloaded at run time and nothing is written under the home directory.
"""

from __future__ import annotations

import json
import sys
import tempfile

import duckdb
from duckdb_extensions import import_extension


def main(requests_file: str) -> dict[str, object]:
    con = duckdb.connect(
        config={
            "extension_directory": tempfile.mkdtemp(prefix="duckdb-ext-"),
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        }
    )
    for name in ("avro", "iceberg"):
        import_extension(name, con=con)
        con.execute(f"LOAD {name}")
    con.execute("SET TimeZone = 'UTC'")
    out: dict[str, object] = {"duckdb": duckdb.__version__}
    for req in json.load(open(requests_file)):
        scan = f"iceberg_scan('{req['metadata']}')"
        try:
            types = {row[0]: row[1] for row in con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
            con.execute(f"COPY (SELECT * FROM {scan}) TO '{req['out']}' (FORMAT parquet)")
            out[req["label"]] = {"types": types}
        except duckdb.Error as exc:
            out[req["label"]] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(sys.argv[1])))
