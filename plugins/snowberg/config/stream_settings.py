"""Table config for stream capture: ``stream:`` in ``include/tables.yaml``.

Imports only pydantic, the standard library and ``snowberg.core.identifiers`` so
that ``snowberg.config.table_config`` can embed it at DAG parse time.

Example::

    - name: orders_cdc
      source: {table: SHOP.PUBLIC.ORDERS}
      target: shop.orders
      primary_key: [order_id]
      stream:
        name: SHOP.PUBLIC.ORDERS_SNOWBERG_STREAM
        create: true            # CREATE STREAM IF NOT EXISTS … (SHOW_INITIAL_ROWS = TRUE by default)
        append_only: false
        staging_table: SHOP.SNOWBERG.ORDERS_STAGING
        changelog_target: shop.orders_changelog
"""

from __future__ import annotations

from pydantic import Field, model_validator

from snowberg.config.fields import IcebergTableRef, SnowflakeTableRef
from snowberg.core.identifiers import TableName
from snowberg.core.models import StrictModel

STAGING_SUFFIX = "_SNOWBERG_STAGING"


class StreamSource(StrictModel):
    """Where changes come from and where they wait between the two commits.

    name:             the stream ``db.schema.stream``
    on_table:         the table the stream tracks ``db.schema.table``; needed
                      when snowberg creates the stream (``create: true``) and
                      for ``CHANGES`` backfills; defaults to ``source.table``
    create:           create the stream when it does not exist (``CREATE
                      STREAM IF NOT EXISTS …``, with ``SHOW_INITIAL_ROWS = TRUE``
                      when ``show_initial_rows`` is on, so the first load carries
                      the rows already in the table); false uses an existing
                      stream and fails if it is missing
    append_only:      an APPEND_ONLY stream (inserts only; cheaper to read)
    show_initial_rows: the first consumption returns the table's rows at
                      creation as inserts (recommended: the first load is
                      then a full copy)
    staging_table:    the Snowflake table the stream is consumed into
                      (``db.schema.table``); created by snowberg; defaults to
                      ``<stream>_SNOWBERG_STAGING`` next to the stream
    changelog_target: optional Iceberg ``namespace.table``: an append-only log
                      of every change with its action and batch id
    stale_alert_intervals: fail with an alert when the stream would go stale
                      within this many schedule intervals
    """

    name: SnowflakeTableRef
    """The stream ``database.schema.stream``."""
    on_table: SnowflakeTableRef | None = None
    """The table the stream tracks (unset: ``source.table``); needed to create the stream and for CHANGES
    backfills."""
    create: bool = False
    """Create the stream when it does not exist (``CREATE STREAM IF NOT EXISTS``). The default, false, uses an
    existing stream and fails the run when it is missing."""
    append_only: bool = False
    """The stream is ``APPEND_ONLY`` (inserts only, cheaper to read); must match the real stream."""
    show_initial_rows: bool = True
    """The first read of a new stream returns the table's rows, so the first load is a full copy; for an
    existing stream, set it to what the stream was created with."""
    staging_table: SnowflakeTableRef | None = None
    """The Snowflake table the stream is consumed into, created by snowberg (unset:
    ``<stream>_SNOWBERG_STAGING`` next to the stream)."""
    changelog_target: IcebergTableRef | None = None
    """An Iceberg ``namespace.table`` receiving every change with its action and batch id (append-only)."""
    stale_alert_intervals: int = Field(default=2, ge=1, le=100)
    """Fail (and alert) when the stream would go stale within this many schedule intervals."""

    @model_validator(mode="after")
    def _consistency(self) -> StreamSource:
        names = {"stream": self.stream_name, "staging_table": self.staging_name}
        if self.on_table is not None:
            names["on_table"] = TableName.parse(self.on_table)
        seen: dict[str, str] = {}
        for what, n in names.items():
            key = str(n).upper()
            if key in seen:
                raise ValueError(f"{what} and {seen[key]} name the same object {n}")
            seen[key] = what
        return self

    @property
    def stream_name(self) -> TableName:
        return TableName.parse(self.name)

    @property
    def staging_name(self) -> TableName:
        if self.staging_table is not None:
            return TableName.parse(self.staging_table)
        s = self.stream_name
        table = (s.table.upper() + STAGING_SUFFIX)[:255]
        return TableName(database=s.database, schema=s.schema, table=table)

    def table_name(self, source_table: str | None = None) -> TableName | None:
        """The tracked table: ``on_table``, else the table config's ``source.table``."""
        text = self.on_table or source_table
        return TableName.parse(text) if text else None


def stream_table_problems(
    stream: StreamSource, *, primary_key: list[str], source_table: str | None, has_cursor: bool
) -> list[str]:
    """What is wrong with a table that captures from ``stream`` (for ``TableConfig``'s model validator)."""
    problems = []
    if has_cursor:
        problems.append("give either 'cursor' (watermark loads) or 'stream' (change capture), not both")
    if not stream.append_only and not primary_key:
        problems.append(
            "a standard stream carries updates and deletes, applied by primary key: set primary_key "
            "(or stream.append_only: true)"
        )
    if stream.create and not (stream.on_table or source_table):
        problems.append("stream.create needs the tracked table: set stream.on_table or source.table")
    return problems
