"""snowberg's Snowflake hook: the provider's ``SnowflakeHook`` with what snowberg needs of a connection.

* ``host``, ``port`` and ``protocol`` from the connection's extras reach the
  connector (the provider drops them; the local emulator speaks plain http on
  its own port, and a private-link host needs its own name);
* the session is pinned (``snowberg.snowflake.session``);
* NUMBER columns with a scale arrive as decimals, never floats
  (``arrow_number_to_decimal``);
* empty warehouse/region/role are left out rather than sent as ``""``;
* a table with ``columns.hash`` gets its salt as a session variable.

Only the public ``get_conn()`` is overridden; the provider's connection
parameters (login, key pair, OAuth, …) are taken as it builds them.
Imported from operators' ``execute()`` only: it imports the provider.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.providers.snowflake.hooks.snowflake import SnowflakeHook

from snowberg.snowflake.projection import HashSaltError, check_salt, set_salt
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
        """A connection with snowberg's parameters (the provider's ``get_conn`` would drop host, port and session).

        For a table with ``columns.hash``, the salt is read from its Airflow Variable first (a missing one
        fails here, naming it, before Snowflake is reached), registered with Airflow's secrets masker, and
        set as the session's variable (``snowberg.snowflake.projection``).
        """
        from snowflake import connector

        salt = self.hash_salt()
        conn = connector.connect(**self.connection_parameters())
        if salt is not None:
            try:
                set_salt(conn, salt)
            except Exception:
                conn.close()
                raise
        return conn

    def hash_salt(self) -> str | None:
        """The salt of the table's ``columns.hash`` (None without hashed columns), masked in task logs."""
        cfg = self.table_config
        if cfg is None or not cfg.columns.hash:
            return None
        from airflow.sdk import Variable
        from airflow.sdk.log import mask_secret

        name = cfg.columns.hash_salt
        try:
            value = Variable.get(name, default=None)
        except Exception as exc:  # noqa: BLE001 - a Variable that cannot be read is as missing as an absent one
            raise HashSaltError(f"cannot read the Airflow Variable {name!r} (columns.hash_salt): {exc}") from exc
        salt = check_salt(None if value is None else str(value), name)
        mask_secret(salt)
        return salt


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
