"""Which Iceberg type changes a source change may make (Iceberg's type promotion rules)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyiceberg.types import IcebergType


def can_hold(existing: IcebergType, new: IcebergType) -> bool:
    """True if values of ``new`` fit ``existing`` losslessly (write as ``existing``)."""
    from pyiceberg import types as it

    if existing == new:
        return True
    if isinstance(existing, it.LongType) and isinstance(new, it.IntegerType):
        return True
    if isinstance(existing, it.DoubleType) and isinstance(new, it.FloatType):
        return True
    if isinstance(existing, it.DecimalType):
        if isinstance(new, it.DecimalType):
            return existing.scale == new.scale and existing.precision >= new.precision
        if isinstance(new, it.LongType):
            return existing.scale == 0 and existing.precision >= 19
    return False


def can_widen(existing: IcebergType, new: IcebergType) -> bool:
    """True if Iceberg allows promoting ``existing`` to ``new`` (spec: type promotion)."""
    from pyiceberg import types as it

    if isinstance(existing, it.IntegerType) and isinstance(new, it.LongType):
        return True
    if isinstance(existing, it.FloatType) and isinstance(new, it.DoubleType):
        return True
    if isinstance(existing, it.DecimalType) and isinstance(new, it.DecimalType):
        return existing.scale == new.scale and new.precision > existing.precision
    return False
