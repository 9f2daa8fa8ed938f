"""The mapping table, row by row: each Snowflake type's Iceberg target, the opt-ins and the refusals."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg import types as it

from snowberg.mapping.cast import cast_array
from snowberg.mapping.columns import LossyConversionError, SnowflakeColumn, TypeMappingError, UnsupportedTypeError
from snowberg.mapping.rules import TYPE_RULES, MappingOptions, map_columns, rule_for

OPTS = MappingOptions(number_as_long=frozenset({"ID"}))

EXPECTED_ICEBERG = {
    "long": it.LongType(),
    "double": it.DoubleType(),
    "string": it.StringType(),
    "binary": it.BinaryType(),
    "boolean": it.BooleanType(),
    "date": it.DateType(),
    "time": it.TimeType(),
    "timestamp": it.TimestampType(),
    "timestamptz": it.TimestamptzType(),
}


@pytest.mark.parametrize(
    ("rule", "col"),
    [(r, c) for r in TYPE_RULES for c in r.examples],
    ids=[f"{r.snowflake}:{c.sql_type}" for r in TYPE_RULES for c in r.examples],
)
def test_every_rule_maps_its_examples(rule: object, col: SnowflakeColumn) -> None:
    assert rule_for(col, OPTS) is rule
    target = rule.target(col)  # type: ignore[attr-defined]
    iceberg = rule.iceberg  # type: ignore[attr-defined]
    if iceberg in EXPECTED_ICEBERG:
        assert target == EXPECTED_ICEBERG[iceberg]
    elif iceberg.startswith("decimal"):
        assert target == it.DecimalType(col.precision or 38, col.scale or 0)
    elif iceberg == "list<int>":
        assert isinstance(target, it.ListType) and target.element_type == it.IntegerType()
    elif iceberg == "list<float>":
        assert isinstance(target, it.ListType) and target.element_type == it.FloatType()
    else:
        pytest.fail(f"rule target {iceberg} not covered by this test")


def test_every_rule_has_an_example() -> None:
    assert all(r.examples for r in TYPE_RULES)


@pytest.mark.parametrize("p", range(1, 39))
@pytest.mark.parametrize("s", [0, 1, 2, 9, 18, 37])
def test_number_every_precision_and_scale(p: int, s: int) -> None:
    if s > p:
        return
    t = rule_for(SnowflakeColumn(name="N", type="NUMBER", precision=p, scale=s)).target(
        SnowflakeColumn(name="N", type="NUMBER", precision=p, scale=s)
    )
    if s == 0 and p <= 18:
        assert t == it.LongType()
    else:
        assert t == it.DecimalType(p, s)


def test_number_38_0_stays_decimal_unless_opted_in() -> None:
    col = SnowflakeColumn(name="ORDER_ID", type="NUMBER", precision=38, scale=0)
    assert map_columns([col])[0].iceberg_type == it.DecimalType(38, 0)
    opted = map_columns([col], MappingOptions(number_as_long=frozenset({"ORDER_ID"})))[0]
    assert opted.iceberg_type == it.LongType()
    # range check: a value beyond 64 bits fails, naming column and types
    big = pa.array([Decimal(2**63)], pa.decimal128(38, 0))
    with pytest.raises(LossyConversionError, match=r"'ORDER_ID'.*NUMBER\(38,0\).*long"):
        cast_array(big, opted, MappingOptions())
    ok = pa.array([Decimal(2**63 - 1), None], pa.decimal128(38, 0))
    assert cast_array(ok, opted, MappingOptions()).to_pylist() == [2**63 - 1, None]


@pytest.mark.parametrize("t", ["MAP", "FILE", "INTERVAL_DAY_TIME"])
def test_unsupported_types_fail_naming_column(t: str) -> None:
    with pytest.raises(UnsupportedTypeError, match=f"column 'X': Snowflake type {t}"):
        map_columns([SnowflakeColumn(name="X", type=t)])


def test_colliding_names_fail() -> None:
    with pytest.raises(TypeMappingError, match="both map to Iceberg column 'a'"):
        map_columns([SnowflakeColumn(name="A", type="FLOAT"), SnowflakeColumn(name="a", type="FLOAT")])
