"""The Airflow pools the tables config names (``pool``): which exist, and creating the missing ones.

A table's ``pool`` holds the tasks of its load DAG; Airflow never schedules a task whose pool does not
exist (the scheduler only logs "Tasks using non-existent pool … will not be scheduled"), so a pool the
config names must be created before the DAGs run. ``snowberg pools`` lists them and creates the missing
ones (``--create``); ``snowberg validate --connect`` reports a missing one as an error. Pools live in
Airflow's metadata database: these functions run in a server process context (the CLI's
``airflow_cli_context``), as Airflow's own ``airflow pools`` commands do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from snowberg.config.table_config import TableConfig

DEFAULT_SLOTS = 4


@dataclass(kw_only=True)
class PoolUse:
    """One pool the config names: the tables in it and the Snowflake connections they query."""

    name: str
    tables: list[str] = field(default_factory=list)
    connections: set[str] = field(default_factory=set)

    @property
    def description(self) -> str:
        return f"snowberg loads on {', '.join(sorted(self.connections))}"


def pool_uses(tables: Iterable[TableConfig]) -> list[PoolUse]:
    """The pools named by ``tables``, in name order (tables without ``pool`` run in Airflow's default_pool)."""
    uses: dict[str, PoolUse] = {}
    for t in tables:
        if t.pool is None:
            continue
        use = uses.setdefault(t.pool, PoolUse(name=t.pool))
        use.tables.append(t.name)
        use.connections.add(t.snowflake_conn_id)
    return [uses[k] for k in sorted(uses)]


def pool_slots(name: str) -> int | None:
    """The slots of Airflow pool ``name``; None when it does not exist."""
    from airflow.models.pool import Pool

    pool = Pool.get_pool(name)
    return None if pool is None else int(pool.slots)


def create_pool(use: PoolUse, slots: int) -> None:
    """Create the pool (Airflow's own ``create_or_update_pool``, the call behind ``airflow pools set``)."""
    from airflow.models.pool import Pool

    Pool.create_or_update_pool(use.name, slots, use.description, include_deferred=False)
