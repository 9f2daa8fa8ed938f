"""Declarative lake → Snowflake syncs (``include/syncs.yaml``), one DAG per entry.

Validated strictly when the DAG file is parsed (pydantic, unknown keys
refused), with messages that name the sync and the field. Only pydantic,
PyYAML and snowberg's light modules are imported here.

.. code-block:: yaml

    defaults:
      owner: data-engineering
    syncs:
      - name: orders_to_horizon            # → DAG snowberg_sync_orders_to_horizon
        source: {catalog: lake, table: sales.orders}
        target:
          kind: iceberg                    # Snowflake-managed Iceberg through a REST catalog
          catalog: snowflake_horizon       # Airflow connection (conn_type snowflake → Horizon) or catalog name
          table: SALES.ORDERS              # namespace.table = schema.table in the Snowflake database
        check: {snowflake_conn_id: snowflake_horizon, table: ANALYTICS.SALES.ORDERS}
      - name: orders_native
        source: {catalog: lake, table: sales.orders}
        target:
          kind: native                     # a native Snowflake table, loaded with INSERTs
          snowflake_conn_id: snowflake_default
          table: ANALYTICS.SALES.ORDERS_NATIVE
        on_rewrite: full_reload            # or fail (default)
        alerts:                            # as for tables (docs/checks-and-alerts.md)
          email: [data-oncall@example.com]
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from snowberg.config.check_settings import AlertsConfig
from snowberg.config.fields import ConnectionRef, ExternalVolumeName, IcebergTableRef, SnowflakeTableRef, identifier
from snowberg.config.yaml_loader import read_yaml, validate_entries
from snowberg.core.identifiers import validate_identifier
from snowberg.core.models import Duration, StrictModel
from snowberg.sync.snapshots import OnRewrite

_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}", re.ASCII)
ON_SOURCE_CHANGE = "on_source_change"  # a sync's schedule: run when the source table's Asset changes


class SyncConfigError(ValueError):
    """``syncs.yaml`` is invalid; the message names the sync and the field."""


class IcebergSource(StrictModel):
    """A lake table: catalog = Airflow connection id or pyiceberg catalog name."""

    catalog: ConnectionRef
    table: IcebergTableRef


class CreateInSnowflake(StrictModel):
    """Create a missing Snowflake-managed target with ``CREATE ICEBERG TABLE … CATALOG = 'SNOWFLAKE'``.

    ``snowflake_conn_id`` and ``table`` (database.schema.table) default to the check's.
    """

    external_volume: ExternalVolumeName
    base_location: str
    snowflake_conn_id: str | None = None
    table: SnowflakeTableRef | None = None


class IcebergTarget(StrictModel):
    """A Snowflake-managed Iceberg table reached through an Iceberg REST catalog (Horizon)."""

    kind: Literal["iceberg"]
    catalog: ConnectionRef
    table: str  # namespace.table: the Snowflake schema and table inside the catalog's warehouse (database)
    create_if_missing: bool = False
    create_in_snowflake: CreateInSnowflake | None = None
    batch_rows: int = Field(default=250_000, ge=1_000)

    @field_validator("table")
    @classmethod
    def _table(cls, v: str) -> str:
        parts = v.split(".")
        if len(parts) != 2:
            raise ValueError(f"expected namespace.table (the Snowflake SCHEMA.TABLE), got {v!r}")
        for p in parts:
            validate_identifier(p, "target name part")
        return v


class NativeTarget(StrictModel):
    """A native Snowflake table (created from the source schema if missing)."""

    kind: Literal["native"]
    snowflake_conn_id: ConnectionRef = "snowflake_default"
    table: SnowflakeTableRef  # database.schema.table
    state_table: SnowflakeTableRef | None = None  # default: <database>.<schema>.SNOWBERG_SYNC_STATE
    lineage_column: Annotated[str, identifier("lineage column")] | None = "_SNOWBERG_SOURCE_SNAPSHOT_ID"
    insert_batch_rows: int = Field(default=1_000, ge=1, le=16_384)


class VisibilityCheckConfig(StrictModel):
    """Where the check asks Snowflake (for native targets both default to the target's)."""

    snowflake_conn_id: str | None = None
    table: SnowflakeTableRef | None = None  # database.schema.table as Snowflake names it
    timeout: Duration = timedelta(seconds=60)


class SyncConfig(StrictModel):
    """One lake → Snowflake sync: a DAG is built for each."""

    name: str
    description: str | None = None
    source: IcebergSource
    target: Annotated[IcebergTarget | NativeTarget, Field(discriminator="kind")]
    on_rewrite: OnRewrite = OnRewrite.FAIL
    check: VisibilityCheckConfig | None = None
    check_enabled: bool = True
    schedule: str | None = "@hourly"
    owner: str = "data-engineering"
    retries: int = Field(default=2, ge=0, le=20)
    retry_delay: Duration = timedelta(minutes=2)
    tags: list[str] = Field(default_factory=list)
    # Failure alerts of the sync and check tasks, configured as for tables.
    alerts: AlertsConfig | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.fullmatch(v):
            raise ValueError("name must be lower-case letters, digits or '_' (it becomes the DAG id)")
        return v

    @property
    def snowflake_create(self) -> dict[str, str] | None:
        """What the sync operator needs to create a missing Snowflake-managed target (None: do not create)."""
        t = self.target
        if not isinstance(t, IcebergTarget) or t.create_in_snowflake is None:
            return None
        c = t.create_in_snowflake
        conn = c.snowflake_conn_id or (self.check.snowflake_conn_id if self.check else None)
        table = c.table or (self.check.table if self.check else None)
        assert conn and table  # checked by _check_target
        return {
            "snowflake_conn_id": conn,
            "table": table,
            "external_volume": c.external_volume,
            "base_location": c.base_location,
        }

    @model_validator(mode="after")
    def _check_target(self) -> SyncConfig:
        t = self.target
        if isinstance(t, IcebergTarget) and t.create_in_snowflake is not None:
            c = t.create_in_snowflake
            if not (c.snowflake_conn_id or (self.check and self.check.snowflake_conn_id)) or not (
                c.table or (self.check and self.check.table)
            ):
                raise ValueError(
                    "target.create_in_snowflake needs snowflake_conn_id and table (database.schema.table), "
                    "or a check with both"
                )
        if isinstance(self.target, IcebergTarget) and self.check_enabled:
            if self.check is None or not self.check.snowflake_conn_id or not self.check.table:
                raise ValueError(
                    "an iceberg target needs check.snowflake_conn_id and check.table (the table as Snowflake names it, "
                    "database.schema.table) for the visibility check, or check_enabled: false"
                )
        return self

    @property
    def dag_id(self) -> str:
        return f"snowberg_sync_{self.name}"

    @property
    def target_key(self) -> str:
        """What two syncs must not share: the kind, the catalog or connection, and the table (case-insensitive)."""
        t = self.target
        where = t.catalog if isinstance(t, IcebergTarget) else t.snowflake_conn_id
        return f"{t.kind}:{where}:{t.table.upper()}"

    @property
    def check_conn_id(self) -> str:
        if self.check is not None and self.check.snowflake_conn_id:
            return self.check.snowflake_conn_id
        assert isinstance(self.target, NativeTarget)
        return self.target.snowflake_conn_id

    @property
    def check_table(self) -> str:
        if self.check is not None and self.check.table:
            return self.check.table
        assert isinstance(self.target, NativeTarget)
        return self.target.table


class SyncsFile(StrictModel):
    """A whole ``syncs.yaml``."""

    syncs: list[SyncConfig]


def parse_syncs(data: Any, *, source: str = "<syncs>") -> SyncsFile:
    """Validate a parsed ``syncs.yaml`` strictly, naming the sync and field of each error."""
    cfg = validate_entries(
        data,
        SyncsFile,
        list_key="syncs",
        entity="sync",
        source=source,
        error=SyncConfigError,
        hidden_locs=("iceberg", "native"),
    )
    seen: set[str] = set()
    targets: set[str] = set()
    for s in cfg.syncs:
        if s.name in seen:
            raise SyncConfigError(f"{source}: sync {s.name!r}: duplicate name")
        if s.target_key in targets:
            raise SyncConfigError(f"{source}: sync {s.name!r}: another sync already writes {s.target.table}")
        seen.add(s.name)
        targets.add(s.target_key)
    return cfg


def load_syncs(path: str | Path) -> SyncsFile:
    """Read and validate ``path`` (``parse_syncs``)."""
    return parse_syncs(read_yaml(path, SyncConfigError), source=str(path))
