"""snowberg's Snowflake hook: the provider's ``SnowflakeHook`` with what snowberg needs of a connection.

* ``host``, ``port`` and ``protocol`` from the connection's extras reach the
  connector (the provider drops them; the local emulator speaks plain http on
  its own port, and a private-link host needs its own name);
* the session is pinned (``snowberg.snowflake.session``);
* NUMBER columns with a scale arrive as decimals, never floats
  (``arrow_number_to_decimal``);
* empty warehouse/region/role are left out rather than sent as ``""``.

Only the public ``get_conn()`` is overridden; the provider's connection
parameters (login, key pair, OAuth, …) are taken as it builds them.
Imported from operators' ``execute()`` only: it imports the provider.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.providers.snowflake.hooks.snowflake import SnowflakeHook

from snowberg.snowflake.session import session_parameters

if TYPE_CHECKING:
    from snowflake.connector import SnowflakeConnection

    from snowberg.config.table_config import TableConfig


class SnowbergSnowflakeHook(SnowflakeHook):
    """The provider's hook; ``get_conn()`` opens the connection with ``connection_parameters()``."""

    def __init__(self, *args: Any, table_config: TableConfig | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.table_config = table_config

    def connection_parameters(self) -> dict[str, Any]:
        """The keyword arguments ``snowflake.connector.connect`` gets for this connection."""
        # The provider builds login, key-pair, OAuth and workload-identity parameters in ``_get_conn_params()``
        # and has no public accessor for them; ``get_conn()`` would connect at once and drop host/port/session.
        params: dict[str, Any] = dict(self._get_conn_params())
        extra = self.get_connection(self.snowflake_conn_id).extra_dejson
        for key in ("host", "port", "protocol"):
            if extra.get(key):
                params[key] = int(extra[key]) if key == "port" else extra[key]
        params["session_parameters"] = session_parameters(self.table_config, params.get("session_parameters"))
        params["arrow_number_to_decimal"] = True
        for empty in ("warehouse", "region", "role"):
            if not params.get(empty):
                params.pop(empty, None)
        return params

    def get_conn(self) -> SnowflakeConnection:
        """A connection with snowberg's parameters (the provider's ``get_conn`` would drop host, port and session)."""
        from snowflake import connector

        return connector.connect(**self.connection_parameters())


def snowflake_hook(conn_id: str, cfg: TableConfig | None = None) -> SnowbergSnowflakeHook:
    """Build the hook (from ``execute()`` only: it reads the connection when it connects)."""
    return SnowbergSnowflakeHook(snowflake_conn_id=conn_id, table_config=cfg)


@contextmanager
def snowflake_connection(conn_id: str, cfg: TableConfig | None = None) -> Iterator[SnowflakeConnection]:
    """A connection through ``snowflake_hook``, closed when the block ends, also when it fails."""
    conn = snowflake_hook(conn_id, cfg).get_conn()
    try:
        yield conn
    finally:
        conn.close()
