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
          kind: native                     # a native Snowflake table, loaded by COPY (or INSERTs for few rows)
          snowflake_conn_id: snowflake_default
          table: ANALYTICS.SALES.ORDERS_NATIVE
        key_columns: [order_id]            # default: the source's Iceberg identifier fields
        on_rewrite: fail                   # (default) or full_reload
        alerts:                            # as for tables (docs/checks-and-alerts.md)
          email: [data-oncall@example.com]
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from snowberg.config.check_settings import AlertsConfig
from snowberg.config.fields import (
    ColumnNames,
    ConnectionRef,
    ExternalVolumeName,
    IcebergTableRef,
    SnowflakeTableRef,
    identifier,
)
from snowberg.config.yaml_loader import merged_entries, read_yaml, read_yaml_selected, validate_entries
from snowberg.core.identifiers import validate_identifier
from snowberg.core.models import Duration, StrictModel
from snowberg.sync.copy_sql import DEFAULT_COPY_MIN_ROWS
from snowberg.sync.snapshots import OnRewrite

_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}", re.ASCII)
ON_SOURCE_CHANGE = "on_source_change"  # a sync's schedule: run when the source table's Asset changes


class SyncConfigError(ValueError):
    """``syncs.yaml`` is invalid; the message names the sync and the field."""


class IcebergSource(StrictModel):
    """A lake table: catalog = Airflow connection id or pyiceberg catalog name."""

    catalog: ConnectionRef
    """The lake's catalog: an Airflow connection id, else a pyiceberg catalog name."""
    table: IcebergTableRef
    """The lake table ``namespace.table``."""


class CreateInSnowflake(StrictModel):
    """Create a missing Snowflake-managed target with ``CREATE ICEBERG TABLE … CATALOG = 'SNOWFLAKE'``.

    ``snowflake_conn_id`` and ``table`` (database.schema.table) default to the check's.
    """

    external_volume: ExternalVolumeName
    """The external volume holding the new table's files."""
    base_location: str
    """The table's folder on the external volume (``BASE_LOCATION``)."""
    snowflake_conn_id: str | None = None
    """The Snowflake connection the ``CREATE ICEBERG TABLE`` runs on (unset: ``check.snowflake_conn_id``)."""
    table: SnowflakeTableRef | None = None
    """The table as Snowflake names it, ``database.schema.table`` (unset: ``check.table``)."""


class IcebergTarget(StrictModel):
    """A Snowflake-managed Iceberg table reached through an Iceberg REST catalog (Horizon)."""

    kind: Literal["iceberg"]
    """``iceberg``: a Snowflake-managed Iceberg table written through an Iceberg REST catalog (Horizon)."""
    catalog: ConnectionRef
    """The REST catalog: an Airflow connection (``conn_type`` snowflake for Horizon) or a pyiceberg catalog name."""
    table: str
    """``namespace.table``: the Snowflake schema and table inside the catalog's warehouse (the database)."""
    create_if_missing: bool = False
    """Create a missing target through the catalog itself (REST catalogs other than Horizon)."""
    create_in_snowflake: CreateInSnowflake | None = None
    """Create a missing Snowflake-managed target with ``CREATE ICEBERG TABLE … CATALOG = 'SNOWFLAKE'``."""
    batch_rows: int = Field(default=250_000, ge=1_000)
    """Rows buffered per data-file write (bounds memory)."""

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
    """``native``: a regular Snowflake table, loaded by COPY from Parquet (bound INSERTs for a few rows)."""
    snowflake_conn_id: ConnectionRef = "snowflake_default"
    """The Airflow connection to Snowflake."""
    table: SnowflakeTableRef
    """The target ``database.schema.table``, created from the lake schema on the first run if missing."""
    state_table: SnowflakeTableRef | None = None
    """Where the synced source snapshot is recorded, in the same transaction as the rows (unset:
    ``<database>.<schema>.SNOWBERG_SYNC_STATE``)."""
    lineage_column: Annotated[str, identifier("lineage column")] | None = "_SNOWBERG_SOURCE_SNAPSHOT_ID"
    """A target column holding each row's source snapshot id; null leaves it out."""
    insert_batch_rows: int = Field(default=1_000, ge=1, le=16_384)
    """Rows per ``INSERT`` statement."""
    stage: str | None = None
    """A Snowflake external stage over the lake's storage, ``database.schema.stage``: COPY loads the lake's data
    files from it as they are (no row passes through the worker). Needs ``stage_url``."""
    stage_url: str | None = None
    """The stage's URL as the lake addresses its files (``s3://lake/warehouse/``; ``DESC STAGE`` shows it)."""
    copy_min_rows: int = Field(default=DEFAULT_COPY_MIN_ROWS, ge=0)
    """Rows the worker sends (no stage, files with position deletes, nested columns, keyed changes) are written
    as Parquet, PUT and COPYed from this many on; fewer go as bound ``INSERT`` statements."""

    @field_validator("stage")
    @classmethod
    def _stage(cls, v: str | None) -> str | None:
        if v is not None:
            parts = v.split(".")
            if len(parts) != 3:
                raise ValueError(f"expected database.schema.stage, got {v!r}")
            for part in parts:
                validate_identifier(part, "stage")
        return v

    @model_validator(mode="after")
    def _stage_pair(self) -> NativeTarget:
        if (self.stage is None) != (self.stage_url is None):
            raise ValueError("stage and stage_url go together: the stage, and its URL as the lake addresses it")
        if self.stage_url is not None and not re.match(r"^[a-z][a-z0-9+.-]*://", self.stage_url):
            raise ValueError(f"stage_url {self.stage_url!r} must be a URL of the lake's storage (s3://…, file://…)")
        return self


class VisibilityCheckConfig(StrictModel):
    """Where the check asks Snowflake (for native targets both default to the target's)."""

    snowflake_conn_id: str | None = None
    """The Snowflake connection the check queries (native targets: the target's)."""
    table: SnowflakeTableRef | None = None
    """The target as Snowflake names it, ``database.schema.table`` (native targets: the target)."""
    timeout: Duration = timedelta(seconds=60)
    """How long the check waits for Snowflake to show the synced rows."""


class SyncConfig(StrictModel):
    """One lake → Snowflake sync: a DAG is built for each."""

    name: str
    """Lower-case letters, digits and ``_``: the DAG id is ``snowberg_sync_<name>``."""
    description: str | None = None
    """Shown in the DAG's docs."""
    source: IcebergSource
    """The lake table to sync."""
    target: Annotated[IcebergTarget | NativeTarget, Field(discriminator="kind")]
    """Where the rows go: ``kind: iceberg`` (Snowflake-managed Iceberg through a REST catalog) or ``kind: native``."""
    key_columns: ColumnNames | None = None
    """The source columns identifying a row, so overwrite, delete and merge-on-read snapshots are applied to the
    target as deletes + inserts by key. Unset: the source table's Iceberg identifier fields (snowberg merge tables
    declare their ``primary_key`` there). Checked against the source schema when the sync runs: a column it lacks
    fails the run before anything is written. Columns other than the identifier fields must be a key: NULLs or a
    value held by two rows fail the run before anything is written (the whole source is checked at the first
    keyed sync and when this changes, then each change). ``[]`` turns keyed changes off."""
    on_rewrite: OnRewrite = OnRewrite.FAIL
    """What a run does with source snapshots that rewrite rows (overwrite, delete) when it cannot apply them as
    keyed changes: ``fail``, or ``full_reload`` (replace the target's rows)."""
    check: VisibilityCheckConfig | None = None
    """The visibility check: Snowflake is asked for the synced rows after each run."""
    check_enabled: bool = True
    """Run the visibility check (an iceberg target then needs ``check.snowflake_conn_id`` and ``check.table``)."""
    schedule: str | None = "@hourly"
    """A cron expression or preset, or ``on_source_change``: run when the lake table's Asset changes."""
    owner: str = "data-engineering"
    """The owner of the DAG."""
    retries: int = Field(default=2, ge=0, le=20)
    """Retries of each task."""
    retry_delay: Duration = timedelta(minutes=2)
    """The wait between task retries."""
    tags: list[str] = Field(default_factory=list)
    """Extra Airflow tags on the DAG."""
    alerts: AlertsConfig | None = None
    """Where failures of the sync and check tasks are sent, as for tables."""

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


def parse_sync_selected(data: Any, name: str, *, source: str = "<syncs>") -> SyncConfig | None:
    """The sync named ``name``, validating no other entry; None when that cannot be decided alone.

    For a task process, which runs one sync's DAG: None when no entry, or
    more than one, has that name, or when the entry is invalid (the caller
    then parses the whole file, which reports the error as the dag-processor
    does). Problems with the file itself fail as in ``parse_syncs``.
    """
    merged = merged_entries(data, list_key="syncs", source=source, error=SyncConfigError)
    named = [e for e in merged if isinstance(e, dict) and e.get("name") == name]
    if len(named) != 1:
        return None
    try:
        return SyncsFile.model_validate({"syncs": named}).syncs[0]
    except ValidationError:
        return None


def load_sync_selected(path: str | Path, name: str) -> SyncConfig | None:
    """Read ``path`` and validate only the sync named ``name`` (``parse_sync_selected``)."""
    data = read_yaml_selected(path, "syncs", {name}, SyncConfigError)
    return None if data is None else parse_sync_selected(data, name, source=str(path))
