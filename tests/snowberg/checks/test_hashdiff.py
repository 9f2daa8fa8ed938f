"""The checksum and bisection SQL: the Snowflake text, and the canonical forms both sides share.

The emulator cannot run the Snowflake dialect (it has no hex format model in
``TO_NUMBER``), so these tests check the Snowflake text against the functions and formats of Snowflake's
documentation — ``MD5``, ``SUBSTR``, ``TO_NUMBER(<expr>, '<format>')`` with the
``X`` (hex digit) format element, ``DATE_PART(EPOCH_MICROSECOND, <timestamp>)``,
``DATEDIFF(day, …)``, ``CONVERT_TIMEZONE('UTC', <tz>)``, ``CHR`` — and check
that the lake side turns the same canonical text into the same numbers.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pytest

from snowberg.checks import hashdiff as hd

KEY = hd.Column(name="order_id", kind=hd.ValueKind.INTEGER)
CURSOR = hd.Column(name="updated_at", kind=hd.ValueKind.TIMESTAMP_NTZ)


def _spec(**kw: object) -> hd.Spec:
    base: dict[str, object] = {
        "table": "orders",
        "keys": (KEY,),
        "cursor": CURSOR,
        "cursor_kind": "timestamp_ntz",
        "watermark": "2026-01-03 00:00:00.000000",
    }
    base.update(kw)
    return hd.Spec(**base)  # type: ignore[arg-type]


def test_snowflake_level_query_pushes_the_aggregation_down_with_bound_values() -> None:
    sql = hd.SnowflakeSql(_spec(), '"DB"."S"."ORDERS"')
    text, params = sql.sums_sql(2, ["2026-01-01"], ["ab", "c0"])
    assert text == (
        "SELECT d, b, COUNT(*) AS n, COALESCE(SUM(TO_NUMBER(SUBSTR(h, 1, 7), 'XXXXXXX')), 0) AS h1, "
        "COALESCE(SUM(TO_NUMBER(SUBSTR(h, 8, 7), 'XXXXXXX')), 0) AS h2, SUM(nk) AS null_keys FROM ("
        'SELECT CAST("UPDATED_AT" AS DATE) AS d, SUBSTR(MD5(TO_VARCHAR("ORDER_ID")), 1, 4) AS b, '
        'MD5(TO_VARCHAR("ORDER_ID") || CHR(30) || COALESCE(TO_VARCHAR(DATE_PART(EPOCH_MICROSECOND, "UPDATED_AT")), '
        '\'null\')) AS h, CASE WHEN "ORDER_ID" IS NULL THEN 1 ELSE 0 END AS nk FROM "DB"."S"."ORDERS" '
        'WHERE "UPDATED_AT" <= CAST(%(wm)s AS TIMESTAMP_NTZ(9)) '
        'AND ("UPDATED_AT" >= CAST(%(d0lo)s AS TIMESTAMP_NTZ(9)) '
        'AND "UPDATED_AT" < CAST(%(d0hi)s AS TIMESTAMP_NTZ(9))) '
        'AND SUBSTR(MD5(TO_VARCHAR("ORDER_ID")), 1, 2) IN (%(p0)s, %(p1)s)'
        ") GROUP BY d, b"
    )
    assert params == {
        "wm": "2026-01-03 00:00:00.000000",
        "d0lo": "2026-01-01 00:00:00.000000",
        "d0hi": "2026-01-02 00:00:00.000000",
        "p0": "ab",
        "p1": "c0",
    }


def test_composite_keys_and_timestamp_tz_cursors_have_one_canonical_text() -> None:
    spec = _spec(
        keys=(KEY, hd.Column(name="region", kind=hd.ValueKind.TEXT)),
        cursor=hd.Column(name="changed", kind=hd.ValueKind.TIMESTAMP_TZ),
        cursor_kind="timestamp_tz",
    )
    sql = hd.SnowflakeSql(spec, "T")
    assert sql.key_text == 'TO_VARCHAR("ORDER_ID") || CHR(31) || "REGION"'
    assert "COALESCE(TO_VARCHAR(DATE_PART(EPOCH_MICROSECOND, \"CHANGED\")), 'null')" in sql.row_text
    assert sql.day == "CAST(CONVERT_TIMEZONE('UTC', \"CHANGED\") AS DATE)"
    # the emulator dialect differs only where the emulator lacks the Snowflake function
    emu = hd.SnowflakeSql(spec, "T", hd.HashDialect.EMULATOR)
    assert emu.hex_number("x") == "CAST('0x' || x AS BIGINT)"
    assert sql.hex_number("x") == "TO_NUMBER(x, 'XXXXXXX')"


def test_the_lake_side_computes_the_same_checksums_as_python_md5() -> None:
    import datetime as dt

    import pyarrow as pa

    data = pa.table(
        {
            "order_id": pa.array([1, 2], pa.int64()),
            "updated_at": pa.array([dt.datetime(2026, 1, 1, 0, 0, 1), dt.datetime(2026, 1, 2)], pa.timestamp("us")),
        }
    )
    side = hd.LakeSide(data, _spec(watermark=None, strict=True))  # strict: MD5 checksums at level 0 too
    sums = side.sums(0, None, None)
    expect: dict[str, list[int]] = {}
    for k, day, us in (("1", "2026-01-01", 1767225601000000), ("2", "2026-01-02", 1767312000000000)):
        h = hashlib.md5(f"{k}\x1e{us}".encode()).hexdigest()  # noqa: S324 - a checksum, not security
        acc = expect.setdefault(day, [0, 0, 0])
        acc[0] += 1
        acc[1] += int(h[0:7], 16)
        acc[2] += int(h[7:14], 16)
    assert {d: [s.count, s.h1, s.h2] for (d, _), s in sums.items()} == expect


@pytest.mark.parametrize(
    ("sf_type", "scale", "kind"),
    [("NUMBER", 0, "integer"), ("NUMBER", 2, "decimal"), ("TEXT", None, "text"), ("TIMESTAMP_LTZ", 9, "timestamp_tz")],
)
def test_comparable_kinds(sf_type: str, scale: int | None, kind: str) -> None:
    assert hd.value_kind(sf_type, scale, table="t", column="c") == kind


@pytest.mark.parametrize("sf_type", ["FLOAT", "VARIANT", "BINARY", "BOOLEAN", "TIME"])
def test_types_without_a_shared_text_form_are_refused(sf_type: str) -> None:
    with pytest.raises(hd.VolumeInputError, match=f"table 't': column 'c' is {sf_type}"):
        hd.value_kind(sf_type, None, table="t", column="c")


def test_a_lake_column_of_another_type_is_refused() -> None:
    import pyarrow as pa

    with pytest.raises(hd.VolumeInputError, match="is integer in Snowflake but string in the lake"):
        hd.check_lake_type(hd.ValueKind.INTEGER, pa.string(), table="t", column="c")


def test_display_and_canonical_forms_round_trip() -> None:
    for kind, shown in (
        (hd.ValueKind.TIMESTAMP_NTZ, "2026-01-01 20:34:00.000001"),
        (hd.ValueKind.DATE, "2026-01-02"),
        (hd.ValueKind.INTEGER, "42"),
    ):
        assert hd.display(kind, hd.canonical(kind, shown)) == shown
    assert hd.canonical(hd.ValueKind.TIMESTAMP_NTZ, "1970-01-01 00:00:01") == "1000000"


def test_level_zero_sums_cheap_numbers_per_day_unless_strict() -> None:
    text, params = hd.SnowflakeSql(_spec(), "T").sums_sql(0, None, None)
    assert text == (
        "SELECT CAST(\"UPDATED_AT\" AS DATE) AS d, '' AS b, COUNT(*) AS n, "
        'COALESCE(SUM(COALESCE(MOD(DATE_PART(EPOCH_MICROSECOND, "UPDATED_AT"), 2147483647), 0)), 0) AS h1, '
        'COALESCE(SUM(COALESCE(MOD(CAST("ORDER_ID" AS NUMBER(38,0)), 2147483647), 0)), 0) AS h2, '
        'SUM(CASE WHEN "ORDER_ID" IS NULL THEN 1 ELSE 0 END) AS null_keys '
        'FROM T WHERE "UPDATED_AT" <= CAST(%(wm)s AS TIMESTAMP_NTZ(9)) GROUP BY d'
    )
    assert params == {"wm": "2026-01-03 00:00:00.000000"}
    strict, _ = hd.SnowflakeSql(_spec(strict=True), "T").sums_sql(0, None, None)
    assert "MD5(" in strict and "MD5(" not in text


# ---------------------------------------------------------------------------
# The bisection: every part of a checksum is compared


def _lake_rows(rows: list[tuple[int, str]]) -> Any:
    import datetime as dt

    import pyarrow as pa

    return pa.table(
        {
            "order_id": pa.array([k for k, _ in rows], pa.int64()),
            "updated_at": pa.array([dt.datetime.fromisoformat(c) for _, c in rows], pa.timestamp("us")),
        }
    )


def _diff(source: list[tuple[int, str]], lake: list[tuple[int, str]]) -> hd.DiffResult:
    """Both sides computed by DuckDB (the lake side's SQL), so only the comparison and bisection are under test."""
    spec = _spec(watermark=None)
    return hd.hashdiff(hd.LakeSide(_lake_rows(source), spec), hd.LakeSide(_lake_rows(lake), spec), spec)


def test_level_zero_catches_a_cursor_that_differs_within_its_day() -> None:
    """Same keys, same count per day: only level 0's cursor sum differs (a lake row one second older)."""
    src = [(1, "2026-01-01 10:00:00"), (2, "2026-01-01 11:00:00"), (3, "2026-01-01 12:00:00")]
    lake = [(1, "2026-01-01 10:00:00"), (2, "2026-01-01 10:59:59"), (3, "2026-01-01 12:00:00")]
    res = _diff(src, lake)
    assert res.days == {"2026-01-01": (3, 3)}
    assert [(d.key, d.kind) for d in res.diffs] == [({"order_id": "2"}, hd.DiffKind.CURSOR_DIFFERS)]
    assert _diff(src, src).equal


def test_level_zero_catches_a_key_that_differs_with_the_same_cursor() -> None:
    """Same count, same cursor values per day: only level 0's key sum differs (key 3 in Snowflake is 4 in the lake)."""
    src = [(1, "2026-01-01 10:00:00"), (2, "2026-01-01 11:00:00"), (3, "2026-01-01 12:00:00")]
    lake = [(1, "2026-01-01 10:00:00"), (2, "2026-01-01 11:00:00"), (4, "2026-01-01 12:00:00")]
    res = _diff(src, lake)
    assert sorted((d.key["order_id"], d.kind) for d in res.diffs) == [
        ("3", hd.DiffKind.SOURCE_ONLY),
        ("4", hd.DiffKind.LAKE_ONLY),
    ]


class _Fetches:
    """A side that counts the rows its row-by-row fetches return."""

    def __init__(self, side: Any) -> None:
        self.side, self.name, self.fetched = side, side.name, 0

    def sums(self, level: int, days: Any, prefixes: Any) -> dict[tuple[str, str], hd.Sums]:
        return dict(self.side.sums(level, days, prefixes))

    def rows(self, days: Any, level: int, prefixes: Any) -> list[hd.Row]:
        out = list(self.side.rows(days, level, prefixes))
        self.fetched += len(out)
        return out


def test_more_differing_buckets_than_max_keys_are_narrowed_down_within_the_fetch_budget() -> None:
    """30 keys missing from the lake fall in 14 of level 1's 16 buckets (~1,750 rows, more than the 5 × 200
    rows one check fetches): the bisection goes one level deeper, where their buckets hold ~240 rows, and
    names all 30. Before, more differing buckets than ``max_keys`` truncated the report at level 1."""
    src = [(i, f"2026-01-01 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}") for i in range(2000)]
    missing = set(range(7, 2000, 66))
    lake = [r for r in src if r[0] not in missing]
    spec = _spec(watermark=None, digits_per_level=1, leaf_rows=200, max_keys=5)
    s, lk = _Fetches(hd.LakeSide(_lake_rows(src), spec)), _Fetches(hd.LakeSide(_lake_rows(lake), spec))
    res = hd.hashdiff(s, lk, spec)
    assert not res.truncated and res.levels == 2
    assert sorted(int(d.key["order_id"]) for d in res.diffs) == sorted(missing)
    assert max(s.fetched, lk.fetched) <= hd.fetch_budget(spec) == 1000
    # a budget smaller than the number of differing rows: the buckets that fit, and the report says so
    tight = _spec(watermark=None, digits_per_level=1, leaf_rows=2, max_keys=5)
    s, lk = _Fetches(hd.LakeSide(_lake_rows(src), tight)), _Fetches(hd.LakeSide(_lake_rows(lake), tight))
    res = hd.hashdiff(s, lk, tight)
    assert res.truncated and res.truncated_by is hd.Truncation.ROWS
    assert 0 < len(res.diffs) <= 10 and max(s.fetched, lk.fetched) <= 10


def test_a_bisection_stopped_by_its_query_or_bucket_budget_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    src = [(i, f"2026-01-01 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}") for i in range(2000)]
    lake = [r for r in src if r[0] % 66 != 7]
    spec = _spec(watermark=None, digits_per_level=1, leaf_rows=200, max_keys=5, max_queries=3)
    queries = iter(range(100))
    res = hd.hashdiff(hd.LakeSide(_lake_rows(src), spec), hd.LakeSide(_lake_rows(lake), spec), spec,
                      source_queries=lambda: next(queries))  # fmt: skip
    assert res.truncated and res.truncated_by is hd.Truncation.QUERIES
    monkeypatch.setattr(hd, "MAX_BUCKETS", 4)
    spec = _spec(watermark=None, digits_per_level=1, leaf_rows=200, max_keys=50)
    res = hd.hashdiff(hd.LakeSide(_lake_rows(src), spec), hd.LakeSide(_lake_rows(lake), spec), spec)
    assert res.truncated and res.truncated_by is hd.Truncation.BUCKETS and 0 < len(res.diffs) < 30


class _Scripted:
    """A side that answers with given sums and rows: bucket checksums no real data collides on are shaped here."""

    def __init__(self, name: str, levels: dict[int, dict[tuple[str, str], hd.Sums]], rows: list[hd.Row]) -> None:
        self.name = name
        self.levels = levels
        self._rows = rows

    def sums(self, level: int, days: Any, prefixes: Any) -> dict[tuple[str, str], hd.Sums]:
        return self.levels[level]

    def rows(self, days: Any, level: int, prefixes: Any) -> list[hd.Row]:
        return self._rows


@pytest.mark.parametrize("half", ["h1", "h2"])
def test_a_bucket_whose_checksums_differ_in_one_half_only_is_narrowed_down(half: str) -> None:
    """The two 28-bit halves of a bucket's MD5 checksum are compared; equal counts and one equal half are not enough."""
    day = "2026-01-01"
    s_sums = hd.Sums(count=1, h1=5, h2=7)
    l_sums = hd.Sums(count=1, h1=5 if half == "h2" else 6, h2=7 if half == "h1" else 8)
    source = _Scripted(
        "source",
        {0: {(day, ""): hd.Sums(count=1, h1=1, h2=1)}, 1: {(day, "ab"): s_sums}},
        [hd.Row(key=("1",), cursor="100")],
    )
    lake = _Scripted(
        "lake",
        {0: {(day, ""): hd.Sums(count=1, h1=2, h2=1)}, 1: {(day, "ab"): l_sums}},
        [hd.Row(key=("1",), cursor="200")],
    )
    res = hd.hashdiff(source, lake, _spec(watermark=None))
    assert [(d.key, d.kind) for d in res.diffs] == [({"order_id": "1"}, hd.DiffKind.CURSOR_DIFFERS)]


# ---------------------------------------------------------------------------
# live lane: the Snowflake dialect on a real account

LIVE = (
    "SNOWBERG_LIVE_SNOWFLAKE_ACCOUNT",
    "SNOWBERG_LIVE_SNOWFLAKE_USER",
    "SNOWBERG_LIVE_SNOWFLAKE_PASSWORD",
    "SNOWBERG_LIVE_SNOWFLAKE_WAREHOUSE",
)


@pytest.mark.live
@pytest.mark.skipif(not all(os.environ.get(k) for k in LIVE), reason="needs SNOWBERG_LIVE_* credentials")
def test_live_snowflake_and_the_lake_side_compute_the_same_sums() -> None:
    """Real Snowflake: the level-0 sums and the MD5 bucket checksums equal DuckDB's on the same values."""
    import datetime as dt
    import uuid

    import pyarrow as pa
    import snowflake.connector

    from snowberg.snowflake.session import session_parameters

    kw: dict[str, Any] = {
        k: os.environ[f"SNOWBERG_LIVE_SNOWFLAKE_{k.upper()}"] for k in ("account", "user", "password", "warehouse")
    }
    if os.environ.get("SNOWBERG_LIVE_SNOWFLAKE_ROLE"):
        kw["role"] = os.environ["SNOWBERG_LIVE_SNOWFLAKE_ROLE"]
    conn = snowflake.connector.connect(**kw, session_parameters=session_parameters(None))
    db = f"SNOWBERG_TEST_HASHDIFF_{uuid.uuid4().hex[:8].upper()}"
    cur = conn.cursor()
    n = 5000
    try:
        cur.execute(f"CREATE DATABASE {db}")
        cur.execute(f"CREATE SCHEMA {db}.S")
        cur.execute(f"CREATE TABLE {db}.S.T (ORDER_ID NUMBER(38,0), UPDATED_AT TIMESTAMP_NTZ(9))")
        cur.execute(
            f"INSERT INTO {db}.S.T SELECT seq4() + 1, DATEADD(second, seq4() * 37, '2026-01-01'::TIMESTAMP_NTZ) "
            f"FROM TABLE(GENERATOR(ROWCOUNT => {n}))"
        )
        ids = list(range(1, n + 1))
        lake = hd.LakeSide(
            pa.table(
                {
                    "order_id": pa.array(ids, pa.int64()),
                    "updated_at": pa.array(
                        [dt.datetime(2026, 1, 1) + dt.timedelta(seconds=(i - 1) * 37) for i in ids], pa.timestamp("us")
                    ),
                }
            ),
            _spec(watermark=None),
        )
        source = hd.SnowflakeSide(conn.cursor(), hd.SnowflakeSql(_spec(watermark=None), f"{db}.S.T"))
        assert source.sums(0, None, None) == lake.sums(0, None, None)
        assert source.sums(1, None, None) == lake.sums(1, None, None)
    finally:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
        conn.close()
