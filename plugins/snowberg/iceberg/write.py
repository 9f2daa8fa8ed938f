"""Writing Parquet data files for a transaction, in bounded memory (nothing is committed here)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table


def write_data_files(
    table: Table, tx: Any, schema: pa.Schema, batches: Iterator[pa.RecordBatch], batch_rows: int
) -> Iterator[Any]:
    """Write Parquet data files for the transaction, in bounded memory.

    We call pyiceberg's ``_dataframe_to_data_files`` (the function behind
    ``Table.append``) instead of ``append`` itself because ``append`` makes one
    snapshot per call and cannot stream into a partitioned table; a run must be
    a single snapshot whatever the table's partitioning, with memory bounded
    by ``batch_rows``. The files are referenced by nothing until the commit
    gate (``snowberg.iceberg.gate.commit``) adds them.
    """
    import pyarrow as pa
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    write_uuid = uuid.uuid4()
    counter = itertools.count(0)
    if tx.table_metadata.spec().is_unpartitioned():
        reader = pa.RecordBatchReader.from_batches(schema, batches)
        yield from _dataframe_to_data_files(tx.table_metadata, reader, table.io, write_uuid=write_uuid, counter=counter)
        return
    buf: list[pa.RecordBatch] = []
    n = 0
    for b in batches:
        buf.append(b)
        n += b.num_rows
        if n >= batch_rows:
            yield from _dataframe_to_data_files(
                tx.table_metadata, pa.Table.from_batches(buf, schema), table.io, write_uuid=write_uuid, counter=counter
            )
            buf, n = [], 0
    if buf:
        yield from _dataframe_to_data_files(
            tx.table_metadata, pa.Table.from_batches(buf, schema), table.io, write_uuid=write_uuid, counter=counter
        )
