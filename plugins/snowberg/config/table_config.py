"""Declarative table configuration (``include/tables.yaml``).

One entry per table. The file is validated strictly when DAGs are parsed: an
unknown key, a bad identifier, a bad partition transform or a missing field
fails the DAG import with a message that names the table and the field. The
models are pydantic (already an Airflow dependency), so the checks and their
messages come from one well-kept library rather than our own walker.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator

from snowberg.config.check_settings import AlertsConfig, FreshnessMeasure, HealthThresholds
from snowberg.config.fields import (
    ColumnNames,
    ConnectionRef,
    ExternalVolumeName,
    IcebergTableRef,
    PoolName,
    SnowflakeTableRef,
    identifier,
)
from snowberg.config.maintenance_settings import MaintenanceSettings
from snowberg.config.query import single_select
from snowberg.config.stream_settings import StreamSource, stream_table_problems
from snowberg.config.volume_settings import VolumeSettings
from snowberg.config.watch_settings import WatchRefused, WatchSettings, parse_watch, watch_given
from snowberg.config.yaml_loader import (
    format_validation_error,
    merged_entries,
    read_yaml,
    read_yaml_selected,
    validate_entries,
)
from snowberg.core.identifiers import IcebergName, clip, validate_identifier
from snowberg.core.models import Duration, StrictModel

_TRANSFORM = re.compile(
    r"(?:(identity|year|month|day|hour)\((\w+)\)|(bucket|truncate)\[(\d+)\]\((\w+)\)|(\w+))", re.ASCII
)
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}", re.ASCII)


class ConfigError(ValueError):
    """The table config is invalid. The message names the table and the field."""


DAG_ID_PREFIX = "snowberg_"
# The DAG id suffixes of a table's other DAGs: its checks, unload and maintenance DAGs (``TableConfig.dag_ids``).
DAG_SUFFIXES = ("__checks", "__unload", "__maintenance")


def possible_dag_ids(name: str) -> set[str]:
    """Every DAG id a table of this name may build, whatever its other settings."""
    base = DAG_ID_PREFIX + name
    return {base, *(base + s for s in DAG_SUFFIXES)}


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
            (position deletes or a rewrite, per ``merge_strategy``, + append in
            one commit; no equality deletes)
    append: rows are appended; the lake table is a history of row versions
    """

    MERGE = "merge"
    APPEND = "append"


class ColumnDropPolicy(StrEnum):
    """What a run does when a column of the Iceberg table is gone from the source.

    fail:      fail before anything is written, naming the columns (the default:
               a silently NULL column is data loss nobody asked for)
    keep_null: keep the column in the table and write NULL into it from now on
    """

    FAIL = "fail"
    KEEP_NULL = "keep_null"


class ColumnAddPolicy(StrEnum):
    """What happens to the rows already in the lake when the source gains a column.

    null:     they hold NULL in the new column (the default). Snowflake may hold values for
              them (``ADD COLUMN … DEFAULT x``, or an UPDATE that does not move the cursor):
              the ``schema_change`` event says so
    backfill: after the run's commit, the new column is re-read from Snowflake for them by
              primary key and written in one more commit: a one-time cost ∝ the table
    """

    NULL = "null"
    BACKFILL = "backfill"


def _column_add_policy(value: object) -> object:
    """YAML's ``null`` arrives as None: it means the policy named ``null``."""
    return ColumnAddPolicy.NULL if value is None else value


class OnPolicy(StrEnum):
    """What a run does when Snowflake reports a masking or row access policy on the source.

    The extracting role reads what the policy lets it read: masked values (``*****``, NULL, a hash) or only
    some rows. Loaded, they look like data, and the volume check, which reads through the same role, agrees.

    fail:  fail before anything is read, naming the column, the policy and the role (the default)
    warn:  load, and log a warning naming them on every run
    allow: load deliberately; each commit records the policies in its snapshot summary
           (``snowberg.policies-allowed``)
    """

    FAIL = "fail"
    WARN = "warn"
    ALLOW = "allow"


class MergeStrategy(StrEnum):
    """How a merge run hides the earlier versions of the keys it loads (docs/performance.md).

    merge_on_read: position delete files for the rows replaced (cost follows the change)
    copy_on_write: rewrite every data file holding a replaced key (cost follows the table)
    """

    MERGE_ON_READ = "merge_on_read"
    COPY_ON_WRITE = "copy_on_write"


class PartitionField(StrictModel):
    """One partition field: a source column and the Iceberg transform applied to it."""

    column: Annotated[str, identifier("partition column")]
    """The source column (lower-cased, as in the Iceberg table)."""
    transform: str
    """``identity``, ``year``, ``month``, ``day``, ``hour``, ``bucket[N]`` or ``truncate[W]``."""

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
        raise ValueError(f"partition field must be a string like 'day(updated_at)', got {clip(item)}")
    m = _TRANSFORM.fullmatch(item.strip())
    if not m:
        raise ValueError(
            f"bad partition transform {clip(item)}: use identity(col), year(col), month(col), day(col), hour(col), "
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


class Source(StrictModel):
    """Where rows come from: a table ``db.schema.table`` or a custom SELECT."""

    table: SnowflakeTableRef | None = None
    """The source table ``database.schema.table`` (validated, quoted in SQL)."""
    query: str | None = None
    """A custom query, used as a subquery: one ``SELECT`` or ``WITH … SELECT``. A ``;`` inside a string literal,
    a ``$$`` string, a quoted name or a comment is fine; a second statement or an unterminated quote is refused;
    a trailing ``;`` and trailing comments are dropped. Exactly one of ``table`` and ``query``."""

    @field_validator("query")
    @classmethod
    def _query(cls, v: str | None) -> str | None:
        return single_select(v) if v is not None else v

    @model_validator(mode="after")
    def _one_of(self) -> Source:
        if (self.table is None) == (self.query is None):
            raise ValueError("give exactly one of 'table' or 'query'")
        return self


class Cursor(StrictModel):
    """The watermark contract.

    The window of a run is ``(watermark - lookback, high]`` where ``high`` is
    fixed at plan time from Snowflake's clock minus ``commit_lag`` (for
    timestamp cursors; NTZ on the wall clock of ``timezone`` and never past
    the newest value; DATE at the last closed day) or the column's maximum
    (for numeric cursors). Rows tied at ``high`` belong to this run; rows tied at
    the previous watermark were loaded by the previous run. ``commit_lag``
    must cover the longest source transaction, ``lookback`` catches rows that
    arrive later than that (and needs a primary key, so re-read rows merge).
    """

    column: Annotated[str, identifier("cursor column")]
    """The watermark column: TIMESTAMP_NTZ, TIMESTAMP_LTZ, TIMESTAMP_TZ, DATE or NUMBER."""
    initial_value: str | int | None = None
    """Inclusive lower bound of the very first run (unset: everything)."""
    lookback: Duration = timedelta(0)
    """Re-read this much before the watermark on every run, for rows that arrive late; needs a merge table
    (``primary_key``, not ``write_mode: append``). Does not apply to NUMBER cursors."""
    commit_lag: Duration = timedelta(0)
    """The window ends at Snowflake's clock minus this (no effect on NUMBER cursors); it must cover the
    longest source transaction. A DATE window ends at the last day closed by then."""
    null_policy: NullCursorPolicy = NullCursorPolicy.RAISE
    """Source rows whose cursor is NULL: fail the run, load them on every run (needs a merge table), or skip them."""
    timezone: str = "UTC"
    """The IANA zone whose wall clock writes a TIMESTAMP_NTZ cursor (and whose days date a DATE cursor): the
    window's end is Snowflake's clock read in this zone. An application filling the column with
    ``CURRENT_TIMESTAMP()`` under Snowflake's default session zone writes ``America/Los_Angeles`` wall time.
    TIMESTAMP_LTZ/TZ cursors are instants and ignore it."""

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{v[:80]!r} is not an IANA time zone name (for example 'America/Los_Angeles')") from None
        return v


DEFAULT_HASH_SALT_VARIABLE = "snowberg_hash_salt"


class ColumnSettings(StrictModel):
    """Source columns left out of the lake, or hashed inside Snowflake before they leave it."""

    exclude: ColumnNames = Field(default_factory=list)
    """Columns never selected, never written and never in the Iceberg schema. Adding one to the list later is a
    dropped column: ``on_column_dropped`` decides."""
    hash: ColumnNames = Field(default_factory=list)
    """Columns replaced in Snowflake's SELECT by ``SHA2(TO_VARCHAR(column) || salt, 256)`` (64 hex characters; NULL
    stays NULL): the clear value never leaves Snowflake. A hashed key still merges; the volume check compares the
    hashes. Adding a column to the list later is refused unless the table is reloaded (``full_refresh``)."""
    hash_salt: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,250}$")] = DEFAULT_HASH_SALT_VARIABLE
    """The Airflow Variable holding the salt of ``hash`` (never the salt itself: it stays out of the YAML and is
    masked in task logs). A run of a table with ``hash`` fails, naming the Variable, when it is missing."""

    @model_validator(mode="after")
    def _disjoint(self) -> ColumnSettings:
        both = sorted({c.upper() for c in self.exclude} & {c.upper() for c in self.hash})
        if both:
            raise ValueError(f"column(s) {', '.join(both)} are in both exclude and hash: choose one")
        return self


class UnloadSettings(StrictModel):
    """Push-down unload (``COPY INTO @stage … PARQUET`` + ``add_files``): a manual DAG for big initial loads."""

    stage: str
    """A named external stage ``database.schema.stage`` that Snowflake unloads into."""
    stage_url: str
    """The stage's URL as the lake's FileIO addresses it (``s3://…``, ``gs://…``, ``file://…``)."""
    prefix: str = "snowberg-unload"
    """The folder under the stage for snowberg's unloads."""
    max_file_size: int | None = Field(default=None, ge=1_000_000)
    """Snowflake's ``MAX_FILE_SIZE`` in bytes for the unloaded Parquet files (unset: 256 MiB)."""

    @field_validator("stage")
    @classmethod
    def _stage(cls, v: str) -> str:
        for part in v.split("."):
            validate_identifier(part, "stage")
        return v


class TableConfig(StrictModel):
    """One table: a DAG is built for each."""

    name: str
    """Lower-case letters, digits and ``_`` (at most 64): the DAG id is ``snowberg_<name>``, and its checks and
    maintenance DAGs are ``snowberg_<name>__checks`` and ``snowberg_<name>__maintenance``."""
    source: Source
    """Where rows come from: ``{table: DB.SCHEMA.TABLE}`` or ``{query: "SELECT …"}``."""
    target: IcebergTableRef
    """The Iceberg table ``namespace.table`` (created from the mapped schema if missing)."""
    cursor: Cursor | None = None
    """The watermark column and its contract. Without ``cursor`` (and without ``stream``) every run is a full
    refresh: the whole source replaces the table in one commit."""
    primary_key: ColumnNames = Field(default_factory=list)
    """Source columns identifying a row. With a key, the default ``write_mode`` is ``merge``; a key column missing
    from the source, or a NULL in one, fails the run before anything is written."""
    write_mode: WriteMode | None = None
    """``merge`` or ``append``; unset: ``merge`` with a ``primary_key``, ``append`` without."""
    merge_strategy: MergeStrategy = MergeStrategy.MERGE_ON_READ
    """How a merge hides the rows it replaces: position delete files for just those rows (cost follows the
    change) or rewriting every data file holding one (cost follows the table); see docs/performance.md."""
    partition_by: list[
        Annotated[PartitionField, BeforeValidator(_parse_partition, json_schema_input_type=str | PartitionField)]
    ] = Field(default_factory=list)
    """The partition spec of a new table: ``identity(c)`` or ``c``, ``year(c)``, ``month(c)``, ``day(c)``,
    ``hour(c)``, ``bucket[N](c)``, ``truncate[W](c)``."""
    schedule: str | None = "@hourly"
    """The load DAG's schedule: a cron expression or preset (``@hourly``, ``@daily``); null: manual runs only.
    Not with ``watch`` (a watched table runs when its source changes)."""
    watch: Annotated[
        WatchSettings | None, BeforeValidator(parse_watch, json_schema_input_type=bool | WatchSettings | None)
    ] = None
    """Run the load when the source changes instead of on a schedule: the triggerer asks Snowflake's change
    metadata (no task starts, no row is read) and starts a run when the table or stream changed
    (docs/event-driven.md). ``true`` takes the defaults. Refused together with a ``schedule``; a table's own
    ``watch`` or ``schedule`` replaces the other one given in ``defaults``. Needs ``source.table`` (a table or
    view) or ``stream``."""
    freshness_sla: Duration | None = None
    """The freshness check (in the ``snowberg_<name>__checks`` DAG) fails when the pipeline has not proven the
    lake current for longer than this (``freshness_measure``)."""
    freshness_measure: FreshnessMeasure = FreshnessMeasure.PROVEN_CURRENT
    """What ``freshness_sla`` limits: ``proven_current``, the time since a run last proved the lake current (a
    commit, or a run that found nothing new: a quiet source does not alert, a stopped pipeline does), or
    ``last_data``, the time since the newest data snapshot (a quiet source alerts too)."""
    max_watermark_lag: Duration | None = None
    """The freshness check also fails when now minus the committed watermark is longer than this."""
    snowflake_conn_id: ConnectionRef = "snowflake_default"
    """The Airflow connection to Snowflake (letters, digits, ``_``, ``.``, ``-``)."""
    catalog: ConnectionRef = "lake"
    """The Iceberg catalog: an Airflow connection id, else a pyiceberg catalog name
    (``PYICEBERG_CATALOG__<NAME>__*``)."""
    owner: str = "data-engineering"
    """The owner of the table's DAGs."""
    retries: int = Field(default=2, ge=0, le=20)
    """Retries of each task in the table's DAGs."""
    retry_delay: Duration = timedelta(minutes=2)
    """The wait between task retries."""
    tags: list[str] = Field(default_factory=list)
    """Extra Airflow tags on each of the table's DAGs."""
    description: str | None = None
    """Shown in the load DAG's docs."""
    number_as_long: ColumnNames = Field(default_factory=list)
    """NUMBER(p≥19,0) columns to store as Iceberg ``long``, each value range-checked (docs/type-mapping.md)."""
    timestamp_nanos: Literal["error", "truncate"] = "error"
    """Timestamp values with non-zero nanoseconds: fail the run, or truncate them to microseconds."""
    geo_format: Literal["geojson", "wkt"] = "geojson"
    """The text format of GEOGRAPHY and GEOMETRY columns."""
    batch_rows: int = Field(default=250_000, ge=1_000)
    """Rows buffered per data-file write into a partitioned table (bounds memory)."""
    on_column_dropped: ColumnDropPolicy = ColumnDropPolicy.FAIL
    """A column of the Iceberg table the source no longer sends: fail before writing, or keep it and write NULL.
    Either way a ``schema_change`` alert is sent (for a kept column once: the table property
    ``snowberg.columns-kept-null`` records it)."""
    on_column_added: Annotated[
        ColumnAddPolicy,
        BeforeValidator(_column_add_policy, json_schema_input_type=ColumnAddPolicy | None),
    ] = ColumnAddPolicy.NULL
    """A column the source gained: ``null`` leaves it NULL for the rows already in the lake (Snowflake may hold
    values for them: ``ADD COLUMN … DEFAULT``, an UPDATE that does not move the cursor; the ``schema_change`` event
    says so); ``backfill`` re-reads it for them by ``primary_key`` after the run's commit and writes it in one more
    commit, a one-time cost ∝ the table (needs ``primary_key``; not with ``scale_out`` or ``stream``)."""
    columns: ColumnSettings = Field(default_factory=ColumnSettings)
    """Source columns to leave out (``exclude``) or hash inside Snowflake (``hash``, salted with the Airflow Variable
    ``hash_salt``); see docs/configuration.md, "Leaving out and hashing columns". A table's own ``columns`` replaces
    the ``defaults`` section as a whole."""
    on_policy: OnPolicy = OnPolicy.FAIL
    """A masking policy on a source column (one not in ``columns.exclude``) or a row access policy on the source,
    as Snowflake's ``INFORMATION_SCHEMA.POLICY_REFERENCES`` reports them for ``source.table``: fail the run before
    anything is read, load and warn, or load deliberately and record the policies in each commit's snapshot summary
    (docs/configuration.md, "Masking and row access policies")."""
    max_rows_per_slice: int = Field(default=250_000, ge=1_000)
    """A window with more rows is read in slices by cursor value, in bounded memory (docs/performance.md)."""
    inline_load_rows: int = Field(default=10_000, ge=0)
    """A scheduled run whose window holds at most this many new rows loads, publishes and checks them in its
    ``plan`` task: one task start instead of four (``load``, ``publish`` and ``table_health`` show skipped;
    ``table_health`` still runs when the check would fail). ``0``: every window goes through the ``load`` task.
    Not used with ``scale_out`` (docs/performance.md, "Busy runs")."""
    scale_out: bool = False
    """Run the slices as mapped tasks (spread over workers), with one commit at the end."""
    max_parallel_slices: int | None = Field(default=None, ge=1)
    """The most mapped slices running at once (unset: Airflow's limits)."""
    pool: PoolName | None = None
    """The Airflow pool the tasks of the table's load DAG (and unload DAG) run in: one pool per Snowflake
    connection (``snowberg_<snowflake_conn_id>``, as ``snowberg discover`` proposes) caps how many loads query
    it at once, so a hundred first loads do not stampede the warehouse. The pool must exist (``snowberg pools
    --create``, or ``airflow pools set``): Airflow never schedules a task whose pool is missing, and
    ``snowberg validate --connect`` reports one. Unset: Airflow's ``default_pool``."""
    unload: UnloadSettings | None = None
    """Adds a manual ``snowberg_<name>__unload`` DAG: ``COPY INTO @stage`` as Parquet, then ``add_files``, for big
    initial loads (docs/performance.md). Pause the load DAG while it runs: the one-commit-at-a-time guard is per
    DAG, so a concurrent commit of the load DAG makes one of the two fail (never both commit)."""
    alerts: AlertsConfig | None = None
    """Where the table's failures and events are sent (docs/checks-and-alerts.md). Replaces a ``defaults``
    ``alerts`` section as a whole."""
    health: HealthThresholds | None = None
    """Limits for the table-health check; unset limits are reported, never enforced."""
    external_volume: ExternalVolumeName | None = None
    """A Snowflake external volume to verify (``SYSTEM$VERIFY_EXTERNAL_VOLUME``) in the checks DAG."""
    stream: StreamSource | None = None
    """Capture changes from a Snowflake Stream instead of a cursor (docs/streams.md); exclusive with ``cursor``."""
    checks_schedule: str | None = "@hourly"
    """The schedule of the ``snowberg_<name>__checks`` DAG (freshness, health, volume)."""
    volume: VolumeSettings = Field(default_factory=VolumeSettings)
    """Source-vs-lake volume verification in the checks DAG (docs/volume-checks.md)."""
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)
    """The ``snowberg_<name>__maintenance`` DAG, built for every table unless disabled: compaction, snapshot
    expiry, orphan files (docs/maintenance.md)."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.fullmatch(v):
            raise ValueError(f"name {clip(v)} must be lower-case letters, digits or '_' (it becomes the DAG id)")
        return v

    @model_validator(mode="before")
    @classmethod
    def _watch_fits(cls, data: Any) -> Any:
        """A watched table has no schedule of its own; a watch it cannot have is refused on the ``watch`` field."""
        if not isinstance(data, dict) or not watch_given(data.get("watch")):
            return data
        reason = watch_refusal(data)
        if reason is not None:
            return {**data, "watch": WatchRefused(reason)}
        return {**data, "schedule": None}

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
        if self.write_mode is WriteMode.MERGE and not self.primary_key:
            raise ValueError("write_mode 'merge' needs primary_key")
        self._columns_fit()
        # Re-read rows are harmless only when they merge: what matters is the
        # effective write mode, not whether a key is declared.
        rereads = []
        if self.cursor is not None and self.cursor.lookback > timedelta(0):
            rereads.append("cursor.lookback (rows of the lookback are re-read every run)")
        if self.cursor is not None and self.cursor.null_policy is NullCursorPolicy.INCLUDE:
            rereads.append("cursor.null_policy 'include' (NULL-cursor rows are re-read every run)")
        if rereads and self.effective_write_mode is not WriteMode.MERGE:
            why = (
                "write_mode 'append' appends them again on each run"
                if self.write_mode is WriteMode.APPEND
                else "without primary_key they are appended again on each run"
            )
            raise ValueError(
                f"{' and '.join(rereads)} needs a merge table (primary_key, write_mode merge): {why}; "
                "set cursor.lookback: 0 / null_policy raise|exclude, or merge on the key"
            )
        if self.on_column_added is ColumnAddPolicy.BACKFILL:
            refused = column_backfill_refusal(self)
            if refused:
                raise ValueError(f"on_column_added 'backfill' {refused}; or set on_column_added: null")
        return self

    def _columns_fit(self) -> None:
        """Refuse ``columns`` settings the load could not honour: a needed column left out, a cursor hashed."""
        excluded = {c.upper() for c in self.columns.exclude}
        hashed = {c.upper() for c in self.columns.hash}
        needed = [("primary_key", c) for c in self.primary_key]
        needed += [("partition_by", p.column) for p in self.partition_by]
        if self.cursor is not None:
            needed.append(("cursor.column", self.cursor.column))
        for what, c in needed:
            if c.upper() in excluded:
                raise ValueError(f"columns.exclude leaves out {c!r}, which {what} needs")
        if self.cursor is not None and self.cursor.column.upper() in hashed:
            raise ValueError(f"columns.hash cannot hash the cursor column {self.cursor.column!r}: windows compare it")
        for what, names in (
            ("number_as_long", self.number_as_long),
            (
                "partition_by",
                [
                    p.column
                    for p in self.partition_by
                    if p.transform != "identity" and not p.transform.startswith(("bucket", "truncate"))
                ],
            ),
        ):
            clash = sorted(c for c in names if c.upper() in hashed)
            if clash:
                raise ValueError(f"columns.hash makes {', '.join(clash)} text, which {what} cannot take")

    @property
    def dag_id(self) -> str:
        return f"{DAG_ID_PREFIX}{self.name}"

    @property
    def dag_ids(self) -> list[str]:
        """The DAG ids the DAG factory builds for this table (``snowberg.airflow.dag_factory.table_dags``)."""
        checks, unload, maintenance = (self.dag_id + s for s in DAG_SUFFIXES)
        ids = [self.dag_id, checks]
        if self.unload is not None and self.stream is None:
            ids.append(unload)
        if self.maintenance.enabled:
            ids.append(maintenance)
        return ids

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
        return self.iceberg_name.variable_key("watermark")


def column_backfill_refusal(cfg: TableConfig) -> str | None:
    """Why ``on_column_added: backfill`` cannot work for ``cfg`` (None: it can)."""
    if not cfg.primary_key:
        return "needs primary_key: the rows already in the lake are re-read from Snowflake by their key"
    if cfg.scale_out:
        return "is not available with scale_out (the mapped slices' commit task does not run it)"
    if cfg.stream is not None:
        return "is not available with stream (the stream's apply does not run it)"
    return None


def watch_refusal(entry: dict[str, Any]) -> str | None:
    """Why the table ``entry`` (a raw dict with ``watch`` given) cannot be watched; None when it can."""
    if entry.get("schedule") is not None:
        return (
            f"watch and schedule ({clip(entry['schedule'])}) are both set: a watched table runs when its source "
            "changes (and every watch.max_interval). Remove schedule, or remove watch to run on the schedule; "
            "a table's own watch or schedule replaces the other one given in defaults"
        )
    source = entry.get("source")
    query = source.get("query") if isinstance(source, dict) else getattr(source, "query", None)
    if query is not None and entry.get("stream") is None:
        return (
            "watch needs a source Snowflake reports changes of, and a custom query is none: Snowflake's change "
            "token (SYSTEM$LAST_CHANGE_COMMIT_TIME) takes a table or a view. Create a view with the query and set "
            "source.table to it, or run the table on a schedule"
        )
    return None


# A table's own non-null value of one of these keys replaces the other one given in ``defaults``.
TABLE_DEFAULTS_REPLACE = {"watch": "schedule", "schedule": "watch"}


class SnowbergConfig(StrictModel):
    """A whole ``tables.yaml`` (``parse_config`` also refuses two tables of one name)."""

    tables: list[TableConfig]


def parse_config(data: Any, *, source: str = "<config>") -> SnowbergConfig:
    """Validate a parsed YAML document strictly: any bad entry fails the whole file (``Claims`` included)."""
    cfg = validate_entries(
        data,
        SnowbergConfig,
        list_key="tables",
        entity="table",
        source=source,
        error=ConfigError,
        replaces=TABLE_DEFAULTS_REPLACE,
    )
    claims = Claims()
    for i, t in enumerate(cfg.tables):
        clash = claims.clash(t)
        if clash is not None:
            raise ConfigError(f"{source}: table {t.name!r}: {clash}")
        claims.add(t, i)
    return cfg


class Claims:
    """What the tables accepted so far own: their names, targets and DAG ids. A later table may own none of them.

    Two tables of one name or target would write one Iceberg table twice; two
    DAGs of one id make Airflow keep only the last one built, so a table named
    ``orders__checks`` would silently replace the checks DAG of ``orders``.
    The entry that comes later in the file is the one refused.
    """

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}  # a name or target → the table that has it
        self.dag_ids: dict[str, tuple[str, int]] = {}  # a DAG id → (the table that builds it, its position)

    def clash(self, t: TableConfig) -> str | None:
        """Why ``t`` may not come after the tables accepted so far (None: it may)."""
        dup = next((key for key in (t.name, t.target) if key in self.keys), None)
        if dup is not None:
            return f"duplicate name or target {dup!r}"
        built = next((d for d in t.dag_ids if d in self.dag_ids), None)
        if built is not None:
            other, i = self.dag_ids[built]
            return (
                f"DAG id {built!r} is also built for table {other!r} (entry #{i + 1}), and Airflow would keep only "
                "one of them: rename one of the two tables"
            )
        return None

    def add(self, t: TableConfig, index: int) -> None:
        self.keys.update({t.name: t.name, t.target: t.name})
        self.dag_ids.update({d: (t.name, index) for d in t.dag_ids})


def load_config(path: str | Path) -> SnowbergConfig:
    """Read and validate ``path`` strictly (``parse_config``): one bad entry fails the file."""
    return parse_config(read_yaml(path, ConfigError), source=str(path))


@dataclass(frozen=True, kw_only=True)
class BrokenEntry:
    """A table entry that failed validation, kept apart so that the others still load.

    ``name`` is what its stand-in DAG is called: the entry's own ``name``
    when that is valid and unused, else ``invalid_entry_<position>``.
    """

    index: int  # 0-based position in the ``tables`` list
    name: str
    error: str  # names the file, the table and the field
    raw: Any


@dataclass(frozen=True, kw_only=True)
class IsolatedConfig:
    """The entries of a ``tables.yaml`` that validated, and those that did not (each with its error)."""

    tables: list[TableConfig]
    broken: list[BrokenEntry]


def parse_config_isolated(data: Any, *, source: str = "<config>") -> IsolatedConfig:
    """Validate each entry on its own: a typo in one table must not stop the others' loads.

    Problems with the file itself (not YAML, bad ``defaults``, unknown
    top-level keys) still fail the whole file: no entry can be trusted then.
    An entry claiming what an earlier table owns (``Claims``: its name,
    target or a DAG id) breaks the later entry only. A stand-in never takes a
    DAG id a table builds.
    """
    merged = merged_entries(data, list_key="tables", source=source, error=ConfigError, replaces=TABLE_DEFAULTS_REPLACE)
    tables: list[TableConfig] = []
    failed: list[tuple[int, Any, str]] = []
    claims = Claims()
    for i, entry in enumerate(merged):
        try:
            t = SnowbergConfig.model_validate({"tables": [entry]}).tables[0]
        except ValidationError as exc:
            msg = format_validation_error(
                [entry], exc, list_key="tables", entity="table", first_index=i, model=SnowbergConfig
            )
            failed.append((i, entry, f"{source}: {msg}"))
            continue
        clash = claims.clash(t)
        if clash is not None:
            failed.append((i, entry, f"{source}: table {t.name!r}: {clash}"))
            continue
        claims.add(t, i)
        tables.append(t)
    used = set(claims.dag_ids)
    broken = []
    for i, entry, msg in failed:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not (isinstance(name, str) and _NAME.fullmatch(name) and DAG_ID_PREFIX + name not in used):
            name = _stand_in_name(f"invalid_entry_{i + 1}", used)
        used.add(DAG_ID_PREFIX + name)
        broken.append(BrokenEntry(index=i, name=name, error=msg, raw=entry))
    return IsolatedConfig(tables=tables, broken=broken)


def _stand_in_name(name: str, used: Collection[str]) -> str:
    """``name``, or ``name_2``, ``name_3`` … : the first whose DAG id is not in ``used``."""
    n, candidate = 1, name
    while DAG_ID_PREFIX + candidate in used:
        n += 1
        candidate = f"{name}_{n}"
    return candidate


def load_config_isolated(path: str | Path) -> IsolatedConfig:
    """Read ``path`` entry by entry (``parse_config_isolated``), as the DAG file does."""
    return parse_config_isolated(read_yaml(path, ConfigError), source=str(path))


def parse_config_selected(data: Any, names: Collection[str], *, source: str = "<config>") -> list[TableConfig] | None:
    """The valid entries named in ``names``, validating no other entry; None when that cannot be decided alone.

    For a task process, which runs one DAG and must not pay for validating
    every table (``parse_config_isolated`` costs time in proportion to the
    number of tables). The answer is what ``parse_config_isolated`` would
    give for these names, or None: when no entry has one of the names, when
    a named entry is invalid (its stand-in's name depends on the others),
    or when an earlier entry could claim the same name or target or a DAG id
    of the same (``possible_dag_ids``; the later one is then the broken
    duplicate). The caller falls back to the full parse for None. Problems
    with the file itself fail as in the full parse. Entries not named are
    stubs holding their name and target only (``read_yaml_selected``), which
    is all an earlier entry's claims depend on.
    """
    merged = merged_entries(data, list_key="tables", source=source, error=ConfigError, replaces=TABLE_DEFAULTS_REPLACE)
    picked: list[TableConfig] = []
    for i, entry in enumerate(merged):
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"] in names):
            continue
        try:
            t = SnowbergConfig.model_validate({"tables": [entry]}).tables[0]
        except ValidationError:
            return None
        if any(_may_claim(e, t) for e in merged[:i]):
            return None
        picked.append(t)
    return picked or None


def _may_claim(entry: Any, t: TableConfig) -> bool:
    """Could ``entry``, if valid, own the name or target of ``t`` or a DAG id ``t`` builds (``Claims``)?"""
    if not isinstance(entry, dict):
        return False
    name = entry.get("name")
    if {v for v in (name, entry.get("target")) if isinstance(v, str)} & {t.name, t.target}:
        return True
    return isinstance(name, str) and not possible_dag_ids(name).isdisjoint(t.dag_ids)


def load_config_selected(path: str | Path, names: Collection[str]) -> list[TableConfig] | None:
    """Read ``path`` and validate only the entries named in ``names`` (``parse_config_selected``).

    No other entry is built beyond its name and target (``read_yaml_selected``).
    """
    data = read_yaml_selected(path, "tables", names, ConfigError)
    return None if data is None else parse_config_selected(data, names, source=str(path))
