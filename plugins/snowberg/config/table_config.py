"""Declarative table configuration (``include/tables.yaml``).

One entry per table. The file is validated strictly when DAGs are parsed: an
unknown key, a bad identifier, a bad partition transform or a missing field
fails the DAG import with a message that names the table and the field. The
models are pydantic (already an Airflow dependency), so the checks and their
messages come from one well-kept library rather than our own walker.
"""

from __future__ import annotations

import re
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from snowberg.checks.settings import AlertsConfig, HealthThresholds
from snowberg.config.yaml_loader import read_yaml, validate_entries
from snowberg.core.durations import parse_duration
from snowberg.core.identifiers import IcebergName, TableName, validate_identifier
from snowberg.iceberg.maintenance import MaintenanceSettings
from snowberg.streams.settings import StreamSource, stream_table_problems

Duration = Annotated[timedelta, BeforeValidator(parse_duration)]

_TRANSFORM = re.compile(r"^(?:(identity|year|month|day|hour)\((\w+)\)|(bucket|truncate)\[(\d+)\]\((\w+)\)|(\w+))$")


class ConfigError(ValueError):
    """The table config is invalid. The message names the table and the field."""


class NullCursorPolicy(StrEnum):
    """What to do with source rows whose cursor column is NULL.

    raise:   fail the run, naming the count (the default: nothing is silently lost)
    include: load them on every run; requires a primary key so that the merge
             keeps one copy of each
    exclude: skip them; the count is logged on every run
    """

    RAISE = "raise"
    INCLUDE = "include"
    EXCLUDE = "exclude"


class WriteMode(StrEnum):
    """How rows of a window land in Iceberg.

    merge:  rows whose primary key is in the window replace earlier versions
            (copy-on-write delete + append in one commit; no equality deletes)
    append: rows are appended; the lake table is a history of row versions
    """

    MERGE = "merge"
    APPEND = "append"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PartitionField(_Strict):
    column: str
    transform: str  # identity | year | month | day | hour | bucket[N] | truncate[W]

    @property
    def name(self) -> str:
        t = self.transform.split("[")[0]
        return self.column if t == "identity" else f"{self.column}_{t}"


def _parse_partition(item: object) -> PartitionField:
    if isinstance(item, PartitionField):
        return item
    if isinstance(item, dict):
        return PartitionField(**item)
    if not isinstance(item, str):
        raise ValueError(f"partition field must be a string like 'day(updated_at)', got {item!r}")
    m = _TRANSFORM.match(item.strip())
    if not m:
        raise ValueError(
            f"bad partition transform {item!r}: use identity(col), year(col), month(col), day(col), hour(col), "
            "bucket[N](col) or truncate[W](col)"
        )
    if m.group(1):
        return PartitionField(column=m.group(2).lower(), transform=m.group(1))
    if m.group(3):
        n = int(m.group(4))
        if n <= 0:
            raise ValueError(f"bad partition transform {item!r}: {m.group(3)} width must be positive")
        return PartitionField(column=m.group(5).lower(), transform=f"{m.group(3)}[{n}]")
    return PartitionField(column=m.group(6).lower(), transform="identity")


class Source(_Strict):
    """Where rows come from: a table ``db.schema.table`` or a custom SELECT."""

    table: str | None = None
    query: str | None = None

    @field_validator("table")
    @classmethod
    def _table(cls, v: str | None) -> str | None:
        if v is not None:
            TableName.parse(v)
        return v

    @field_validator("query")
    @classmethod
    def _query(cls, v: str | None) -> str | None:
        if v is None:
            return v
        text = v.strip().rstrip(";").strip()
        if not re.match(r"(?is)^(select|with)\b", text):
            raise ValueError("query must be a single SELECT (or WITH … SELECT) statement")
        if ";" in text:
            raise ValueError("query must be a single statement (no ';')")
        return text

    @model_validator(mode="after")
    def _one_of(self) -> Source:
        if (self.table is None) == (self.query is None):
            raise ValueError("give exactly one of 'table' or 'query'")
        return self


class Cursor(_Strict):
    """The watermark contract.

    The window of a run is ``(watermark - lookback, high]`` where ``high`` is
    fixed at plan time from Snowflake's clock minus ``commit_lag`` (for
    timestamp cursors) or the column's maximum minus ``commit_lag`` (for
    numeric cursors). Rows tied at ``high`` belong to this run; rows tied at
    the previous watermark were loaded by the previous run. ``commit_lag``
    must cover the longest source transaction, ``lookback`` catches rows that
    arrive later than that (and needs a primary key, so re-read rows merge).
    """

    column: str
    initial_value: str | int | None = None
    lookback: Duration = timedelta(0)
    commit_lag: Duration = timedelta(0)
    null_policy: NullCursorPolicy = NullCursorPolicy.RAISE

    @field_validator("column")
    @classmethod
    def _column(cls, v: str) -> str:
        return validate_identifier(v, "cursor column")


class UnloadSettings(_Strict):
    """Push-down unload (``COPY INTO @stage … PARQUET`` + ``add_files``): a manual DAG for big initial loads."""

    stage: str
    stage_url: str
    prefix: str = "snowberg-unload"
    max_file_size: int | None = Field(default=None, ge=1_000_000)

    @field_validator("stage")
    @classmethod
    def _stage(cls, v: str) -> str:
        for part in v.split("."):
            validate_identifier(part, "stage")
        return v


class TableConfig(_Strict):
    """One table: a DAG is built for each."""

    name: str
    source: Source
    target: str
    cursor: Cursor | None = None
    primary_key: list[str] = Field(default_factory=list)
    write_mode: WriteMode | None = None
    partition_by: list[Annotated[PartitionField, BeforeValidator(_parse_partition)]] = Field(default_factory=list)
    schedule: str | None = "@hourly"
    freshness_sla: Duration | None = None
    snowflake_conn_id: str = "snowflake_default"
    catalog: str = "lake"
    owner: str = "data-engineering"
    retries: int = Field(default=2, ge=0, le=20)
    retry_delay: Duration = timedelta(minutes=2)
    tags: list[str] = Field(default_factory=list)
    description: str | None = None
    # Type-mapping opt-ins (see docs/type-mapping.md).
    number_as_long: list[str] = Field(default_factory=list)
    timestamp_nanos: Literal["error", "truncate"] = "error"
    geo_format: Literal["geojson", "wkt"] = "geojson"
    batch_rows: int = Field(default=250_000, ge=1_000)
    # Scale (docs/performance.md): a window larger than this is read in
    # slices by cursor value; scale_out runs the slices as mapped tasks.
    max_rows_per_slice: int = Field(default=250_000, ge=1_000)
    scale_out: bool = False
    max_parallel_slices: int | None = Field(default=None, ge=1)
    unload: UnloadSettings | None = None
    # Checks and alerts (docs/checks-and-alerts.md).
    alerts: AlertsConfig | None = None
    health: HealthThresholds | None = None
    external_volume: str | None = None
    # Change capture from a Snowflake Stream instead of a cursor (docs/streams.md).
    stream: StreamSource | None = None
    checks_schedule: str | None = "@hourly"
    # Expiry, compaction, orphan files (docs/maintenance.md).
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)

    @field_validator("external_volume")
    @classmethod
    def _volume(cls, v: str | None) -> str | None:
        return validate_identifier(v, "external volume") if v is not None else v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.match(r"^[a-z][a-z0-9_]{0,63}$", v):
            raise ValueError("name must be lower-case letters, digits or '_' (it becomes the DAG id)")
        return v

    @field_validator("target")
    @classmethod
    def _target(cls, v: str) -> str:
        IcebergName.parse(v)
        return v

    @field_validator("primary_key", "number_as_long")
    @classmethod
    def _columns(cls, v: list[str]) -> list[str]:
        for c in v:
            validate_identifier(c, "column")
        return v

    @model_validator(mode="after")
    def _consistency(self) -> TableConfig:
        if self.stream is not None:
            problems = stream_table_problems(
                self.stream,
                primary_key=self.primary_key,
                source_table=self.source.table,
                has_cursor=self.cursor is not None,
            )
            if problems:
                raise ValueError("; ".join(problems))
        if self.cursor is not None and self.cursor.lookback > timedelta(0) and not self.primary_key:
            raise ValueError("cursor.lookback needs primary_key: re-read rows must merge, not duplicate")
        if self.cursor is not None and self.cursor.null_policy is NullCursorPolicy.INCLUDE and not self.primary_key:
            raise ValueError("cursor.null_policy 'include' needs primary_key: NULL-cursor rows are re-read every run")
        if self.write_mode is WriteMode.MERGE and not self.primary_key:
            raise ValueError("write_mode 'merge' needs primary_key")
        return self

    @property
    def dag_id(self) -> str:
        return f"snowberg_{self.name}"

    @property
    def effective_write_mode(self) -> WriteMode:
        if self.write_mode is not None:
            return self.write_mode
        return WriteMode.MERGE if self.primary_key else WriteMode.APPEND

    @property
    def iceberg_name(self) -> IcebergName:
        return IcebergName.parse(self.target)

    @property
    def variable_key(self) -> str:
        """The Airflow Variable that mirrors this table's watermark."""
        n = self.iceberg_name
        return f"snowberg__{n.namespace}__{n.table}__watermark"


class SnowbergConfig(_Strict):
    tables: list[TableConfig]


def parse_config(data: Any, *, source: str = "<config>") -> SnowbergConfig:
    """Validate a parsed YAML document; apply ``defaults`` to each table."""
    cfg = validate_entries(data, SnowbergConfig, list_key="tables", entity="table", source=source, error=ConfigError)
    seen: dict[str, str] = {}
    for t in cfg.tables:
        for key in (t.name, t.target):
            if key in seen:
                raise ConfigError(f"{source}: table {t.name!r}: duplicate name or target {key!r}")
            seen[key] = t.name
    return cfg


def load_config(path: str | Path) -> SnowbergConfig:
    return parse_config(read_yaml(path, ConfigError), source=str(path))
