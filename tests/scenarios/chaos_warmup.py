"""Imported once by the chaos fork server: pay the lazy imports every task would otherwise pay.

SQLAlchemy imports its ORM query compiler on a session's first query, pyiceberg's
SQL catalog runs such queries on every table load, and Airflow loads its
secrets backends (and with them much of ``airflow.models``) on the first
connection lookup: a few seconds per process in this uncompiled venv. The fork
server does one throwaway catalog lookup and one connection lookup so that its
children — the task processes — start with those modules loaded, as a
long-lived worker would.
"""

from __future__ import annotations

import tempfile

from airflow.sdk import Connection
from airflow.sdk.exceptions import AirflowNotFoundException
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError

try:
    Connection.get("snowberg_warmup_no_such_connection")
except AirflowNotFoundException:
    pass

# After the connection lookup: SQLAlchemy configures every mapper registry loaded by then (Airflow's too)
# on the first query.
with tempfile.TemporaryDirectory(prefix="snowberg-warmup-") as _tmp:
    _cat = SqlCatalog("warmup", uri=f"sqlite:///{_tmp}/c.db", warehouse=f"file://{_tmp}")
    try:
        _cat.load_table(("warmup", "none"))
    except NoSuchTableError:
        pass
    _cat.engine.dispose()
