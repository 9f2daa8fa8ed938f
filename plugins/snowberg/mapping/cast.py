"""Casting fetched Arrow batches to the mapped Iceberg schema, losslessly.

A value that would lose data raises ``LossyConversionError`` naming the
column, its Snowflake type and the target type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from snowberg.mapping.columns import LossyConversionError
from snowberg.mapping.rules import MappedColumn, MappingOptions

if TYPE_CHECKING:
    import pyarrow as pa


def _lossy(col: MappedColumn, detail: str) -> LossyConversionError:
    return LossyConversionError(
        f"column {col.source.name!r}: Snowflake {col.source.sql_type} → Iceberg {col.iceberg_type}: {detail}"
    )


def cast_array(
    arr: pa.Array | pa.ChunkedArray, col: MappedColumn, options: MappingOptions, target: pa.DataType | None = None
) -> pa.Array:
    """Cast one column to its mapped Arrow type, refusing any lossy step."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    target = target if target is not None else col.arrow_type
    src = arr.type
    if src.equals(target):
        return arr
    if pa.types.is_null(src):
        return pa.nulls(len(arr), type=target)

    if pa.types.is_timestamp(target) or pa.types.is_time(target):
        return _cast_temporal(arr, col, options, target)
    if pa.types.is_decimal(target) or pa.types.is_integer(target):
        if pa.types.is_floating(src):
            raise _lossy(col, f"a batch arrived as {src}; refusing to round floats into {target}")
        if not (pa.types.is_integer(src) or pa.types.is_decimal(src)):
            raise _lossy(col, f"cannot convert Arrow {src}")
    if pa.types.is_date(target) and not pa.types.is_date(src):
        raise _lossy(col, f"cannot convert Arrow {src}")
    if pa.types.is_list(target) and (
        pa.types.is_fixed_size_list(src) or pa.types.is_list(src) or pa.types.is_large_list(src)
    ):
        try:
            return pc.cast(arr, target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise _lossy(col, str(exc)) from None
    try:
        return pc.cast(arr, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _lossy(col, f"{exc}") from None


def _cast_temporal(arr: pa.Array, col: MappedColumn, options: MappingOptions, target: pa.DataType) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    src = arr.type
    if pa.types.is_timestamp(target):
        if not pa.types.is_timestamp(src):
            raise _lossy(col, f"cannot convert Arrow {src}")
        if (src.tz is None) != (target.tz is None):
            raise _lossy(col, f"batch carries {src}, expected {'naive' if target.tz is None else 'UTC'} timestamps")
        unit_ns = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[src.unit]
    else:
        if not pa.types.is_time(src):
            raise _lossy(col, f"cannot convert Arrow {src}")
        unit_ns = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[src.unit]
    if unit_ns == 1:
        # Iceberg (v2) stores microseconds. A safe cast refuses to drop
        # non-zero nanoseconds; we name the first such value.
        us_type = pa.timestamp("us", tz=src.tz) if pa.types.is_timestamp(src) else pa.time64("us")
        truncated = pc.cast(arr, us_type, safe=False)
        lost = pc.not_equal(pc.cast(truncated, src), arr)
        if pc.any(lost).as_py():
            if options.timestamp_nanos != "truncate":
                bad = arr.filter(lost)[0]
                raise _lossy(
                    col,
                    f"value {bad} has non-zero nanoseconds and Iceberg stores microseconds; "
                    "set timestamp_nanos: truncate to accept truncation",
                )
        arr = truncated
        src = us_type
    if pa.types.is_timestamp(target) and target.tz is not None:
        arr = pc.cast(arr, pa.timestamp(src.unit, tz="UTC"))
    try:
        return pc.cast(arr, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _lossy(col, str(exc)) from None


def cast_batch(
    batch: pa.RecordBatch, columns: Sequence[MappedColumn], schema: pa.Schema, options: MappingOptions
) -> pa.RecordBatch:
    """Cast a fetched batch to ``schema`` (the Iceberg table's Arrow schema).

    Columns present in the table but not in the source become nulls; source
    columns are matched by Snowflake name.
    """
    import pyarrow as pa

    by_name = {c.name: c for c in columns}
    arrays = []
    src_names = {n: i for i, n in enumerate(batch.schema.names)}
    for f in schema:
        col = by_name.get(f.name)
        if col is None or col.source.name not in src_names:
            arrays.append(pa.nulls(batch.num_rows, type=f.type))
            continue
        arrays.append(cast_array(batch.column(src_names[col.source.name]), col, options, target=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
