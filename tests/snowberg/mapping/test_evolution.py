"""Which type changes a source change may make: Iceberg's promotion rules, and what an existing column can hold."""

from __future__ import annotations

import pytest
from pyiceberg import types as it

from snowberg.mapping.evolution import can_hold, can_widen


@pytest.mark.parametrize(
    ("existing", "new", "allowed"),
    [
        (it.IntegerType(), it.LongType(), True),
        (it.FloatType(), it.DoubleType(), True),
        (it.DecimalType(10, 2), it.DecimalType(12, 2), True),
        (it.DecimalType(10, 2), it.DecimalType(10, 2), False),  # nothing to widen
        (it.DecimalType(12, 2), it.DecimalType(10, 2), False),  # narrower
        (it.DecimalType(10, 2), it.DecimalType(12, 3), False),  # the scale may never change
        (it.LongType(), it.IntegerType(), False),
        (it.LongType(), it.DecimalType(38, 0), False),
        (it.StringType(), it.LongType(), False),
        (it.DoubleType(), it.FloatType(), False),
    ],
)
def test_only_icebergs_type_promotions_widen_a_column(existing: object, new: object, allowed: bool) -> None:
    assert can_widen(existing, new) is allowed  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("existing", "new", "fits"),
    [
        (it.StringType(), it.StringType(), True),
        (it.LongType(), it.IntegerType(), True),
        (it.DoubleType(), it.FloatType(), True),
        (it.DecimalType(12, 2), it.DecimalType(10, 2), True),
        (it.DecimalType(38, 0), it.LongType(), True),
        (it.DecimalType(19, 0), it.LongType(), True),
        (it.DecimalType(18, 0), it.LongType(), False),  # a long may need 19 digits
        (it.DecimalType(38, 2), it.LongType(), False),
        (it.DecimalType(10, 2), it.DecimalType(12, 2), False),
        (it.DecimalType(12, 3), it.DecimalType(10, 2), False),
        (it.IntegerType(), it.LongType(), False),
        (it.LongType(), it.DecimalType(38, 0), False),
        (it.FloatType(), it.DoubleType(), False),
    ],
)
def test_a_narrower_source_type_is_written_into_an_existing_column_that_holds_it(
    existing: object, new: object, fits: bool
) -> None:
    assert can_hold(existing, new) is fits  # type: ignore[arg-type]
