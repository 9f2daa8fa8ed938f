"""Planning a run against the emulator: the cursor's clock, DATE days, backfill bounds, tables without a cursor.

fakesnow ignores the session TIMEZONE, so an application writing a
TIMESTAMP_NTZ cursor from another zone is simulated the way its rows look in
Snowflake: the NTZ values are that zone's wall clock.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from snowberg.config.table_config import TableConfig, parse_config
from snowberg.iceberg import state
from snowberg.load.extract import load_window
from snowberg.load.plan import plan_run
from snowberg.load.publish import publish, reconcile_before_plan

NTZ_DDL = "CREATE TABLE {t} (ID NUMBER(38,0), NOTE VARCHAR(20), UPDATED_AT TIMESTAMP_NTZ(9))"
DATE_DDL = "CREATE TABLE {t} (ID NUMBER(38,0), NOTE VARCHAR(20), DAY DATE)"


def config(sfdb: Any, cursor: dict[str, Any] | None, **over: Any) -> TableConfig:
    entry: dict[str, Any] = {"name": "t", "source": {"table": sfdb.table("SRC")}, "target": "ns.t", **over}
    if cursor is not None:
        entry["cursor"] = cursor
    return parse_config({"tables": [entry]}).tables[0]


def run(cfg: TableConfig, sfdb: Any, catalog: Any, variables: Any, run_id: str, **plan: Any) -> Any:
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, sfdb.conn, table, run_id=run_id, **plan)
    r = load_window(cfg, sfdb.conn, catalog, w)
    publish(cfg, catalog, w, variables)
    return r


def lake(catalog: Any) -> list[dict[str, Any]]:
    return sorted(catalog.load_table("ns.t").scan().to_arrow().to_pylist(), key=lambda r: (r["id"], r["note"]))


def lake_ids(catalog: Any) -> list[int]:
    return [int(r["id"]) for r in lake(catalog)]


def insert_ntz(sfdb: Any, rows: list[tuple[int, str, datetime]]) -> None:
    values = ", ".join(f"({i}, '{n}', '{ts:%Y-%m-%d %H:%M:%S.%f}'::TIMESTAMP_NTZ)" for i, n, ts in rows)
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES {values}")


def wall(zone: str) -> datetime:
    """The wall clock of ``zone`` now, as a TIMESTAMP_NTZ written there holds it."""
    return datetime.now(ZoneInfo(zone)).replace(tzinfo=None)


def offset(zone: str) -> str:
    minutes = int((datetime.now(ZoneInfo(zone)).utcoffset() or timedelta(0)).total_seconds() // 60)
    return f"UTC{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


# ---------------------------------------------------------------------------
# The clock of a TIMESTAMP_NTZ cursor


@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles", "Asia/Tokyo"])
def test_ntz_writer_in_cursor_timezone_loses_no_row_and_loads_none_early(
    sfdb: Any, catalog: Any, variables: Any, zone: str
) -> None:
    sfdb.sql(NTZ_DDL.format(t=sfdb.table("SRC")))
    now = wall(zone)
    insert_ntz(
        sfdb, [(1, "old", now - timedelta(hours=3)), (2, "in lag", now - timedelta(minutes=10)), (3, "now", now)]
    )
    lagged = config(sfdb, {"column": "updated_at", "timezone": zone, "commit_lag": "1h"}, write_mode="append")
    r1 = run(lagged, sfdb, catalog, variables, "r1")
    assert (r1.status, lake_ids(catalog)) == ("committed", [1])  # rows inside the commit lag wait for a later run

    prompt = config(sfdb, {"column": "updated_at", "timezone": zone}, write_mode="append")
    insert_ntz(sfdb, [(4, "written later", wall(zone))])
    run(prompt, sfdb, catalog, variables, "r2")
    insert_ntz(sfdb, [(5, "later still", wall(zone))])
    run(prompt, sfdb, catalog, variables, "r3")
    assert lake_ids(catalog) == [1, 2, 3, 4, 5]  # every row, once


def test_ntz_writer_behind_the_configured_clock_loses_no_row(
    sfdb: Any, catalog: Any, variables: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An application on Snowflake's default session zone writes Los Angeles wall time; the config says UTC."""
    sfdb.sql(NTZ_DDL.format(t=sfdb.table("SRC")))
    la = "America/Los_Angeles"
    newest = wall(la)
    insert_ntz(sfdb, [(1, "a", newest - timedelta(minutes=5)), (2, "b", newest)])
    cfg = config(sfdb, {"column": "updated_at"}, write_mode="append")
    with caplog.at_level(logging.INFO, logger="snowberg.load.plan"):
        run(cfg, sfdb, catalog, variables, "r1")
    wm = state.read_state(catalog.load_table("ns.t")).watermark
    insert_ntz(sfdb, [(3, "written after the run", wall(la))])
    run(cfg, sfdb, catalog, variables, "r2")
    assert lake_ids(catalog) == [1, 2, 3]
    # The watermark stopped at the newest value the source held, not at UTC now; the log names the offset.
    assert wm == f"{newest:%Y-%m-%d %H:%M:%S.%f}"
    assert f"its writer's clock is about {offset(la)}" in caplog.text and "cursor.timezone 'UTC'" in caplog.text


def test_ntz_writer_ahead_of_the_configured_clock_fails_naming_the_offset(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    sfdb.sql(NTZ_DDL.format(t=sfdb.table("SRC")))
    insert_ntz(sfdb, [(1, "a", wall("Asia/Tokyo"))])
    cfg = config(sfdb, {"column": "updated_at"}, write_mode="append")
    with pytest.raises(ValueError, match=r"9\.0 h ahead of the clock in cursor\.timezone 'UTC'.*UTC\+09:00"):
        run(cfg, sfdb, catalog, variables, "r1")
    assert not catalog.table_exists("ns.t")


def test_cursor_timezone_must_be_an_iana_zone(sfdb: Any) -> None:
    with pytest.raises(ValueError, match=r"cursor.*timezone.*'PST8' is not an IANA time zone"):
        config(sfdb, {"column": "updated_at", "timezone": "PST8"})


# ---------------------------------------------------------------------------
# DATE cursors


def insert_days(sfdb: Any, rows: list[tuple[int, str, date]]) -> None:
    values = ", ".join(f"({i}, '{n}', '{d.isoformat()}'::DATE)" for i, n, d in rows)
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES {values}")


def test_date_window_never_closes_on_a_day_still_open(
    sfdb: Any, catalog: Any, variables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sfdb.sql(DATE_DDL.format(t=sfdb.table("SRC")))
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    insert_days(sfdb, [(1, "a", yesterday - timedelta(days=1)), (2, "a", yesterday), (3, "a", today)])
    cfg = config(sfdb, {"column": "day"}, primary_key=["id"])  # default commit_lag: 0
    run(cfg, sfdb, catalog, variables, "r1")
    assert lake_ids(catalog) == [1, 2]
    assert state.read_state(catalog.load_table("ns.t")).watermark == yesterday.isoformat()

    insert_days(sfdb, [(4, "late", today)])  # arrives after the run, dated today
    assert run(cfg, sfdb, catalog, variables, "r2").status == "nothing_new"  # today is still open

    # Tomorrow (Snowflake's clock a day on): today has closed, and both of its rows are read.
    from snowberg.core.cursor import CursorKind

    clock = CursorKind.clock_sql
    monkeypatch.setattr(CursorKind, "clock_sql", lambda self, lag, zp: clock(self, lag - timedelta(days=1), zp))
    run(cfg, sfdb, catalog, variables, "r3")
    assert lake_ids(catalog) == [1, 2, 3, 4]


def test_date_cursor_backfills_whole_days_from_a_data_interval(sfdb: Any, catalog: Any, variables: Any) -> None:
    sfdb.sql(DATE_DDL.format(t=sfdb.table("SRC")))
    insert_days(sfdb, [(i, "v1", date(2026, 9, 1) + timedelta(days=i % 5)) for i in range(1, 21)])
    cfg = config(sfdb, {"column": "day"}, primary_key=["id"])
    run(cfg, sfdb, catalog, variables, "r1")
    wm = state.read_state(catalog.load_table("ns.t")).watermark
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET NOTE = 'v2'")
    # The daily data interval [2026-09-03, 2026-09-04) of a Backfill-dialog run, as Airflow hands it over.
    r = run(
        cfg,
        sfdb,
        catalog,
        variables,
        "backfill__2026-09-03",
        mode="backfill",
        start=datetime(2026, 9, 3, tzinfo=UTC),
        end=datetime(2026, 9, 4, tzinfo=UTC),
    )
    assert r.status == "committed"
    reloaded = {int(x["id"]) for x in lake(catalog) if x["note"] == "v2"}
    assert reloaded == {i for i in range(1, 21) if i % 5 == 2}  # exactly the rows dated 2026-09-03
    assert lake_ids(catalog) == list(range(1, 21))
    assert state.read_state(catalog.load_table("ns.t")).watermark == wm
    # An hourly interval without a midnight holds no whole day.
    with pytest.raises(ValueError, match="holds no date cursor value"):
        plan_run(
            cfg,
            sfdb.conn,
            catalog.load_table("ns.t"),
            run_id="x",
            mode="backfill",
            start=datetime(2026, 9, 3, 5, tzinfo=UTC),
            end=datetime(2026, 9, 3, 6, tzinfo=UTC),
        )


# ---------------------------------------------------------------------------
# NUMBER cursors


def number_source(sfdb: Any) -> TableConfig:
    sfdb.sql(f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), NOTE VARCHAR(20), SEQ NUMBER(12,2))")
    values = ", ".join(f"({i}, 'v1', {i}.50)" for i in range(1, 41))
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES {values}")
    return config(sfdb, {"column": "seq"}, primary_key=["id"])


def test_number_cursor_backfills_from_numeric_bounds(sfdb: Any, catalog: Any, variables: Any) -> None:
    cfg = number_source(sfdb)
    run(cfg, sfdb, catalog, variables, "r1")
    assert state.read_state(catalog.load_table("ns.t")).watermark == "40.50"
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET NOTE = 'v2'")
    r = run(cfg, sfdb, catalog, variables, "b1", mode="backfill", start=Decimal("10"), end=Decimal("20.5"))
    assert r.status == "committed" and r.rows == 10
    assert {int(x["id"]) for x in lake(catalog) if x["note"] == "v2"} == set(range(10, 20))
    assert lake_ids(catalog) == list(range(1, 41))
    assert state.read_state(catalog.load_table("ns.t")).watermark == "40.50"


def test_number_cursor_backfill_from_dates_fails_before_any_sql(sfdb: Any, catalog: Any, variables: Any) -> None:
    cfg = number_source(sfdb)
    run(cfg, sfdb, catalog, variables, "r1")

    class NoSql:
        def cursor(self) -> Any:
            raise AssertionError("no SQL may run")

    with pytest.raises(ValueError, match=r"'seq' is a NUMBER.*number_start and number_end"):
        plan_run(
            cfg,
            NoSql(),
            catalog.load_table("ns.t"),
            run_id="backfill__2026-09-03",
            mode="backfill",
            start=datetime(2026, 9, 3, tzinfo=UTC),
            end=datetime(2026, 9, 4, tzinfo=UTC),
        )


# ---------------------------------------------------------------------------
# Backfill windows and the watermark


@pytest.fixture
def appended(sfdb: Any, catalog: Any, variables: Any) -> TableConfig:
    """An append table loaded once: rows on 2026-09-01 .. 05 at noon, watermark at the newest."""
    sfdb.sql(NTZ_DDL.format(t=sfdb.table("SRC")))
    insert_ntz(sfdb, [(i, "v1", datetime(2026, 9, 1 + (i - 1) % 5, 12)) for i in range(1, 21)])
    cfg = config(sfdb, {"column": "updated_at"}, write_mode="append")
    run(cfg, sfdb, catalog, variables, "r1")
    insert_ntz(sfdb, [(21, "new", wall("UTC"))])  # written after the load: not loaded yet
    return cfg


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def assert_every_row_once(sfdb: Any, catalog: Any) -> None:
    ids = lake_ids(catalog)
    assert not [k for k, n in Counter(ids).items() if n > 1], f"duplicates: {ids}"
    assert sorted(ids) == sorted(int(r[0]) for r in sfdb.sql(f"SELECT ID FROM {sfdb.table('SRC')}"))


def test_backfill_window_before_the_watermark_reloads_exactly_it(
    sfdb: Any, catalog: Any, variables: Any, appended: TableConfig
) -> None:
    assert state.read_state(catalog.load_table("ns.t")).watermark == "2026-09-05 12:00:00.000000"  # the newest row
    r = run(appended, sfdb, catalog, variables, "b1", mode="backfill", start=utc(2026, 9, 2), end=utc(2026, 9, 4))
    assert (r.status, r.rows) == ("committed", 8)
    run(appended, sfdb, catalog, variables, "r2")
    assert_every_row_once(sfdb, catalog)


def test_a_backfill_of_an_append_table_replaces_the_rows_at_its_start_and_keeps_those_at_its_end(
    sfdb: Any, catalog: Any, variables: Any, appended: TableConfig
) -> None:
    """``[start, end)`` on both sides: rows at the start are removed and reloaded, rows at the end left alone.

    An append table has no key to find the old copies by: the backfill's cursor range is the only thing
    that removes them, so the removal must hold exactly the rows the reload reads.
    """
    r = run(
        appended, sfdb, catalog, variables, "b1", mode="backfill", start=utc(2026, 9, 2, 12), end=utc(2026, 9, 4, 12)
    )
    assert (r.status, r.rows) == ("committed", 8)  # the rows at 09-02 12:00 and 09-03 12:00
    run(appended, sfdb, catalog, variables, "r2")  # the row written after the first load
    assert_every_row_once(sfdb, catalog)


def test_backfill_window_across_the_watermark_is_clamped_to_it(
    sfdb: Any, catalog: Any, variables: Any, appended: TableConfig, caplog: pytest.LogCaptureFixture
) -> None:
    end = datetime.now(UTC)
    with caplog.at_level(logging.WARNING, logger="snowberg.load.plan"):
        r = run(appended, sfdb, catalog, variables, "b1", mode="backfill", start=utc(2026, 9, 4), end=end)
    run(appended, sfdb, catalog, variables, "r2")
    assert_every_row_once(sfdb, catalog)
    assert (r.status, r.rows) == ("committed", 8)  # days 4 and 5, including the rows at the watermark
    assert "clamped to end at the watermark" in caplog.text


def test_backfill_window_past_the_watermark_is_refused(
    sfdb: Any, catalog: Any, variables: Any, appended: TableConfig
) -> None:
    snaps = len(list(catalog.load_table("ns.t").snapshots()))
    with pytest.raises(ValueError, match=r"starts at 2026-09-06 00:00:00.000000, after the watermark"):
        run(appended, sfdb, catalog, variables, "b1", mode="backfill", start=utc(2026, 9, 6), end=utc(2026, 9, 7))
    assert len(list(catalog.load_table("ns.t").snapshots())) == snaps
    run(appended, sfdb, catalog, variables, "r2")
    assert_every_row_once(sfdb, catalog)


def test_backfill_before_any_load_is_refused(sfdb: Any, catalog: Any, variables: Any) -> None:
    sfdb.sql(NTZ_DDL.format(t=sfdb.table("SRC")))
    insert_ntz(sfdb, [(1, "a", datetime(2026, 9, 1))])
    cfg = config(sfdb, {"column": "updated_at"}, write_mode="append")
    with pytest.raises(ValueError, match="has no watermark yet"):
        run(cfg, sfdb, catalog, variables, "b1", mode="backfill", start=utc(2026, 8, 1), end=utc(2026, 9, 2))


# ---------------------------------------------------------------------------
# Tables without a cursor


def test_table_without_a_cursor_is_fully_refreshed_by_each_scheduled_run(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    sfdb.sql(f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), NOTE VARCHAR(20))")
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES (1, 'a'), (2, 'a'), (3, 'a')")
    cfg = config(sfdb, None)
    r1 = run(cfg, sfdb, catalog, variables, "scheduled__1")
    assert r1.status == "committed" and [(x["id"], x["note"]) for x in lake(catalog)] == [(1, "a"), (2, "a"), (3, "a")]
    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')} WHERE ID = 1")
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET NOTE = 'b' WHERE ID = 2")
    commits = len(catalog.load_table("ns.t").metadata.metadata_log)
    r2 = run(cfg, sfdb, catalog, variables, "scheduled__2")
    assert r2.status == "committed"
    assert [(x["id"], x["note"]) for x in lake(catalog)] == [(2, "b"), (3, "a")]
    t = catalog.load_table("ns.t")
    assert len(t.metadata.metadata_log) == commits + 1  # one commit replaced the table
    assert t.current_snapshot().summary.additional_properties["snowberg.mode"] == "full_refresh"
    with pytest.raises(ValueError, match="has no cursor, so a window cannot be reloaded"):
        plan_run(cfg, sfdb.conn, t, run_id="b", mode="backfill", start=utc(2026, 9, 1), end=utc(2026, 9, 2))


class DocumentedMetadata:
    """The emulator's connection, with ``INFORMATION_SCHEMA.TABLES`` answered as Snowflake documents it.

    The local emulator serves a real ``LAST_ALTERED`` (each table's last
    commit), but every table there is a BASE TABLE and ``BYTES`` is 0, and a
    test cannot choose the values. These tests need versions the emulator
    cannot give (a view, a NULL ``LAST_ALTERED``, given sizes and times), so
    the row for the source table is shaped from Snowflake's documentation of
    the view (TABLE_TYPE, LAST_ALTERED TIMESTAMP_LTZ as an aware datetime,
    ROW_COUNT, BYTES), not recorded from Snowflake. Every other statement,
    and the rows themselves, go to the emulator. ``asked`` counts the
    metadata queries, with their SQL and bind parameters.
    """

    def __init__(self, conn: Any, row: tuple[Any, ...]) -> None:
        self.conn = conn
        self.row = row
        self.asked: list[tuple[str, Any]] = []

    def cursor(self) -> Any:
        cur = self.conn.cursor()
        execute, fetchall = cur.execute, cur.fetchall
        answer: list[Any] = []

        def recording(sql: str, params: Any = None) -> Any:
            if "INFORMATION_SCHEMA.TABLES" in sql:
                self.asked.append((sql, params))
                answer[:] = [[self.row]]
                return cur
            answer[:] = []
            return execute(sql, params)

        cur.execute = recording
        cur.fetchall = lambda: answer[0] if answer else fetchall()
        return cur


def plan_load(cfg: TableConfig, conn: Any, catalog: Any, variables: Any, run_id: str, **plan: Any) -> Any:
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, conn, table, run_id=run_id, **plan)
    r = load_window(cfg, conn, catalog, w)
    publish(cfg, catalog, w, variables)
    return w, r


ALTERED = datetime(2026, 11, 30, 9, 15, 2, 123456, tzinfo=ZoneInfo("America/Los_Angeles"))


@pytest.fixture
def cursorless(sfdb: Any) -> TableConfig:
    sfdb.sql(f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), NOTE VARCHAR(20))")
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES (1, 'a'), (2, 'a'), (3, 'a')")
    return config(sfdb, None)


def test_unchanged_source_is_not_reloaded_and_a_change_is(
    cursorless: TableConfig, sfdb: Any, catalog: Any, variables: Any, caplog: pytest.LogCaptureFixture
) -> None:
    conn = DocumentedMetadata(sfdb.conn, ("BASE TABLE", ALTERED, 3, 2048))
    w1, r1 = plan_load(cursorless, conn, catalog, variables, "scheduled__1")
    assert (w1.mode, r1.status) == ("full_refresh", "committed")
    t = catalog.load_table("ns.t")
    recorded = t.current_snapshot().summary.additional_properties["snowberg.source-version"]
    assert recorded == (
        f'{{"bytes":2048,"last_altered":"2026-11-30T17:15:02.123456+00:00","row_count":3,"table":"{sfdb.name}.S.SRC"}}'
    )
    assert t.properties["snowberg.state.source-version"] == recorded  # survives snapshot expiry with the state
    commits = len(t.metadata.metadata_log)

    # Nothing changed: no extract, no commit; the plan says why.
    caplog.set_level(logging.INFO, logger="snowberg")
    w2, r2 = plan_load(cursorless, conn, catalog, variables, "scheduled__2")
    assert (w2.mode, w2.rows_in_window, r2.status) == ("incremental", 0, "nothing_new")
    assert "unchanged since the last load" in w2.extra["skipped_because"]
    assert "nothing to load, no commit: the source" in caplog.text and "unchanged since the last load" in caplog.text
    assert len(catalog.load_table("ns.t").metadata.metadata_log) == commits

    # A change anywhere in the version reloads; the rows are the source's.
    sfdb.sql(f"DELETE FROM {sfdb.table('SRC')} WHERE ID = 1")
    conn.row = ("BASE TABLE", ALTERED + timedelta(minutes=5), 2, 2048)
    w3, r3 = plan_load(cursorless, conn, catalog, variables, "scheduled__3")
    assert (w3.mode, r3.status) == ("full_refresh", "committed")
    assert lake_ids(catalog) == [2, 3]
    assert "the source changed: last_altered" in caplog.text
    # Each plan asked Snowflake once, with the stored (upper-case) names bound.
    assert [p for _, p in conn.asked] == [{"schema": "S", "table": "SRC"}] * 3


def test_an_asked_full_refresh_reloads_an_unchanged_source(
    cursorless: TableConfig, sfdb: Any, catalog: Any, variables: Any
) -> None:
    conn = DocumentedMetadata(sfdb.conn, ("BASE TABLE", ALTERED, 3, 2048))
    plan_load(cursorless, conn, catalog, variables, "scheduled__1")
    w, r = plan_load(cursorless, conn, catalog, variables, "manual__1", mode="full_refresh")
    assert (w.mode, r.status) == ("full_refresh", "committed")


@pytest.mark.parametrize(
    "row",
    [
        ("VIEW", ALTERED, None, None),  # a view's LAST_ALTERED follows its DDL, not its base tables' rows
        ("BASE TABLE", None, 3, 0),
    ],
)
def test_an_unknown_source_version_reloads_every_run(
    cursorless: TableConfig, sfdb: Any, catalog: Any, variables: Any, row: tuple[Any, ...]
) -> None:
    conn = DocumentedMetadata(sfdb.conn, row)
    for run_id in ("scheduled__1", "scheduled__2"):
        w, r = plan_load(cursorless, conn, catalog, variables, run_id)
        assert (w.mode, r.status) == ("full_refresh", "committed")
    assert "snowberg.source-version" not in catalog.load_table("ns.t").current_snapshot().summary.additional_properties


def test_a_query_source_reloads_every_run_without_asking_for_metadata(sfdb: Any, catalog: Any, variables: Any) -> None:
    sfdb.sql(f"CREATE TABLE {sfdb.table('SRC')} (ID NUMBER(38,0), NOTE VARCHAR(20))")
    sfdb.sql(f"INSERT INTO {sfdb.table('SRC')} VALUES (1, 'a')")
    cfg = parse_config(
        {"tables": [{"name": "t", "source": {"query": f"SELECT ID, NOTE FROM {sfdb.table('SRC')}"}, "target": "ns.t"}]}
    ).tables[0]
    conn = DocumentedMetadata(sfdb.conn, ("BASE TABLE", ALTERED, 1, 1024))
    for run_id in ("scheduled__1", "scheduled__2"):
        w, r = plan_load(cfg, conn, catalog, variables, run_id)
        assert (w.mode, r.status) == ("full_refresh", "committed")
    assert conn.asked == []


def test_a_commit_by_another_writer_after_the_load_makes_the_next_run_reload(
    cursorless: TableConfig, sfdb: Any, catalog: Any, variables: Any
) -> None:
    conn = DocumentedMetadata(sfdb.conn, ("BASE TABLE", ALTERED, 3, 2048))
    plan_load(cursorless, conn, catalog, variables, "scheduled__1")
    t = catalog.load_table("ns.t")
    t.delete("id = 1")  # another engine's commit: the lake no longer holds what the load left
    w, r = plan_load(cursorless, conn, catalog, variables, "scheduled__2")
    assert (w.mode, r.status) == ("full_refresh", "committed")
    assert lake_ids(catalog) == [1, 2, 3]


def test_a_commit_by_another_writer_still_reloads_once_expiry_took_snowbergs_snapshot(
    cursorless: TableConfig, sfdb: Any, catalog: Any, variables: Any
) -> None:
    """The state then comes from the table properties, which name no snapshot: nothing proves the rows are the load's.

    Another engine deletes a row, then snapshot expiry removes snowberg's snapshot. The source is unchanged, but the
    lake is not what the load left: the next run must reload, not skip and prove the stale table fresh.
    """
    conn = DocumentedMetadata(sfdb.conn, ("BASE TABLE", ALTERED, 3, 2048))
    plan_load(cursorless, conn, catalog, variables, "scheduled__1")
    t = catalog.load_table("ns.t")
    loaded = t.current_snapshot().snapshot_id
    t.delete("id = 1")  # another engine's commit
    catalog.load_table("ns.t").maintenance.expire_snapshots().by_id(loaded).commit()  # another engine's expiry
    t = catalog.load_table("ns.t")
    st = state.read_state(t)
    assert st is not None and st.from_properties and t.snapshot_by_id(loaded) is None
    w, r = plan_load(cursorless, conn, catalog, variables, "scheduled__2")
    assert (w.mode, r.status) == ("full_refresh", "committed")
    assert lake_ids(catalog) == [1, 2, 3]


def test_on_the_emulator_an_unchanged_source_is_skipped_and_a_change_reloads(
    cursorless: TableConfig, sfdb: Any, catalog: Any, variables: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """End to end on the local stack's emulator, nothing shaped: the cursor-less idle path.

    The emulator serves each table's last commit time as LAST_ALTERED (snowberg.local.emulator; its
    semantics are tested in tests/snowberg/local/test_emulator.py). Before it did, it answered NULL and
    every run here reloaded; that reading (NULL → unknown → reload) is tested with a shaped row above.
    The UPDATE keeps ROW_COUNT (and the emulator's BYTES, 0): only LAST_ALTERED tells the change.
    """
    caplog.set_level(logging.INFO, logger="snowberg")
    w1, r1 = plan_load(cursorless, sfdb.conn, catalog, variables, "scheduled__1")
    assert (w1.mode, r1.status) == ("full_refresh", "committed")
    w2, r2 = plan_load(cursorless, sfdb.conn, catalog, variables, "scheduled__2")
    assert (w2.mode, w2.rows_in_window, r2.status) == ("incremental", 0, "nothing_new")
    assert "unchanged since the last load" in w2.extra["skipped_because"]
    sfdb.sql(f"UPDATE {sfdb.table('SRC')} SET NOTE = 'b' WHERE ID = 2")
    w3, r3 = plan_load(cursorless, sfdb.conn, catalog, variables, "scheduled__3")
    assert (w3.mode, r3.status) == ("full_refresh", "committed")
    assert "the source changed: last_altered" in caplog.text
    assert [(x["id"], x["note"]) for x in lake(catalog)] == [(1, "a"), (2, "b"), (3, "a")]


# ---------------------------------------------------------------------------
# Round trips: a planned run after the first costs the plan query alone


class StatementLog:
    """A connection that records every statement sent to Snowflake, compile-only ones included."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.statements: list[str] = []

    def cursor(self) -> Any:
        cur = self.conn.cursor()
        log_ = self.statements
        execute = cur.execute

        def recording(sql: str, params: Any = None) -> Any:
            log_.append(sql)
            return execute(sql, params)

        cur.execute = recording
        return cur


def test_a_run_after_the_first_plans_with_the_policy_query_and_one_plan_statement(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    sfdb.sql(NTZ_DDL.format(t=sfdb.table("SRC")))
    insert_ntz(sfdb, [(1, "a", wall("UTC") - timedelta(hours=2))])
    cfg = config(sfdb, {"column": "updated_at"}, write_mode="append")
    run(cfg, sfdb, catalog, variables, "r1")
    insert_ntz(sfdb, [(2, "b", wall("UTC") - timedelta(hours=1))])

    conn = StatementLog(sfdb.conn)
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, conn, table, run_id="r2")
    # The cursor's type comes from the table's state and is checked against the plan's own result:
    # no compile-only describe before it (on Snowflake each statement is a round trip and a compile). The one
    # other statement is the metadata query for the source's masking and row access policies.
    assert len(conn.statements) == 2, conn.statements
    assert "POLICY_REFERENCES" in conn.statements[0] and "rows_in_window" in conn.statements[1], conn.statements
    assert w.rows_in_window == 1 and w.cursor_kind == "timestamp_ntz"
    assert load_window(cfg, sfdb.conn, catalog, w).rows == 1


@pytest.mark.parametrize(
    ("new_type", "expect"),
    [
        ("TIMESTAMP_TZ(9)", "TIMESTAMP_TZ"),  # compares without an error: caught from the plan result's types
        ("VARCHAR(40)", "cursor column"),  # not a cursor type at all
        ("NUMBER(38,0)", "NUMBER"),  # the SQL cannot compare: the describe after the failure names the change
    ],
)
def test_a_retyped_cursor_column_fails_the_plan_naming_it_and_writes_nothing(
    sfdb: Any, catalog: Any, variables: Any, new_type: str, expect: str
) -> None:
    sfdb.sql(NTZ_DDL.format(t=sfdb.table("SRC")))
    insert_ntz(sfdb, [(1, "a", wall("UTC") - timedelta(hours=2))])
    cfg = config(sfdb, {"column": "updated_at"}, write_mode="append")
    run(cfg, sfdb, catalog, variables, "r1")
    before = catalog.load_table("ns.t").current_snapshot().snapshot_id
    src = sfdb.table("SRC")
    value = "1700000000" if new_type.startswith("NUMBER") else "'2026-01-01 00:00:00'"
    sfdb.sql(f"CREATE OR REPLACE TABLE {src} (ID NUMBER(38,0), NOTE VARCHAR(20), UPDATED_AT {new_type})")
    sfdb.sql(f"INSERT INTO {src} VALUES (2, 'b', {value})")

    table, _ = reconcile_before_plan(cfg, catalog, variables)
    with pytest.raises(ValueError, match="(?i)updated_at") as err:
        plan_run(cfg, sfdb.conn, table, run_id="r2")
    assert expect in str(err.value)
    assert catalog.load_table("ns.t").current_snapshot().snapshot_id == before


# ---------------------------------------------------------------------------
# The first run's lower bound, and a watermark that never moves back


@pytest.mark.parametrize(
    ("ddl", "column", "values", "initial"),
    [
        (
            NTZ_DDL,
            "updated_at",
            ["2026-09-01 11:59:59.999999", "2026-09-01 12:00:00", "2026-09-01 12:00:01"],
            "2026-09-01 12:00:00",
        ),
        (DATE_DDL, "day", ["2026-09-01", "2026-09-02", "2026-09-03"], "2026-09-02"),
        ("CREATE TABLE {t} (ID NUMBER(38,0), NOTE VARCHAR(20), SEQ NUMBER(38,0))", "seq", ["9", "10", "11"], 10),
    ],
    ids=["timestamp_ntz", "date", "number"],
)
def test_the_first_run_loads_rows_at_the_initial_value_itself(
    sfdb: Any, catalog: Any, variables: Any, ddl: str, column: str, values: list[str], initial: str | int
) -> None:
    """``cursor.initial_value`` is the inclusive lower bound of the first run (docs/configuration-reference.md).

    A row whose cursor equals it belongs to the first window; read as exclusive, that row would be below
    every later window too and never loaded.
    """
    src = sfdb.table("SRC")
    sfdb.sql(ddl.format(t=src))
    sql_type = {"updated_at": "TIMESTAMP_NTZ", "day": "DATE", "seq": "NUMBER(38,0)"}[column]
    rows = ", ".join(f"({i}, 'a', '{v}'::{sql_type})" for i, v in enumerate(values, start=1))
    sfdb.sql(f"INSERT INTO {src} VALUES {rows}")
    cfg = config(sfdb, {"column": column, "initial_value": initial}, write_mode="append")
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, sfdb.conn, table, run_id="r1")
    assert (w.low_inclusive, w.rows_in_window) == (True, 2)
    r = load_window(cfg, sfdb.conn, catalog, w)
    assert (r.status, r.rows, lake_ids(catalog)) == ("committed", 2, [2, 3])  # the row at the bound, and above


def test_an_initial_value_with_an_offset_is_read_on_the_wall_clock_of_cursor_timezone(
    sfdb: Any, catalog: Any, variables: Any
) -> None:
    """An NTZ cursor holds wall time in ``cursor.timezone``; an initial_value with a UTC offset is an instant.

    The instant is compared as that zone's wall time, as backfill bounds are: read as UTC wall time
    instead, 12:00 in Los Angeles (19:00 UTC) would skip the rows written from 12:00 to 19:00 there.
    """
    sfdb.sql(NTZ_DDL.format(t=sfdb.table("SRC")))
    insert_ntz(
        sfdb,
        [
            (1, "a", datetime(2026, 9, 1, 11, 59, 59)),
            (2, "b", datetime(2026, 9, 1, 12)),
            (3, "c", datetime(2026, 9, 1, 13)),
        ],
    )
    la = {"column": "updated_at", "timezone": "America/Los_Angeles", "initial_value": "2026-09-01T12:00:00-07:00"}
    r = run(config(sfdb, la, write_mode="append"), sfdb, catalog, variables, "r1")
    assert (r.status, lake_ids(catalog)) == ("committed", [2, 3])


def test_a_window_high_below_the_watermark_never_moves_the_watermark_back(
    sfdb: Any, catalog: Any, variables: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A commit_lag raised after a load puts the clock's bound below the committed watermark.

    The plan keeps the watermark (high = watermark, nothing to read) instead of planning a window that
    ends below it: a watermark moved back would make later runs read rows again.
    """
    sfdb.sql(NTZ_DDL.format(t=sfdb.table("SRC")))
    newest = wall("UTC") - timedelta(minutes=10)
    insert_ntz(sfdb, [(1, "a", newest - timedelta(hours=3)), (2, "b", newest)])
    cfg = config(sfdb, {"column": "updated_at"}, write_mode="append")
    run(cfg, sfdb, catalog, variables, "r1")
    wm = state.read_state(catalog.load_table("ns.t")).watermark
    assert wm == f"{newest:%Y-%m-%d %H:%M:%S.%f}"

    lagged = config(sfdb, {"column": "updated_at", "commit_lag": "1h"}, write_mode="append")
    table, _ = reconcile_before_plan(lagged, catalog, variables)
    with caplog.at_level(logging.WARNING, logger="snowberg.load.plan"):
        w = plan_run(lagged, sfdb.conn, table, run_id="r2")
    assert (w.high, w.new_watermark, w.rows_in_window) == (wm, wm, 0)
    assert f"is below the watermark {wm}" in caplog.text
    assert load_window(lagged, sfdb.conn, catalog, w).status == "nothing_new"
    assert state.read_state(catalog.load_table("ns.t")).watermark == wm


# ---------------------------------------------------------------------------
# Watched tables (docs/event-driven.md): the plan reads the source's change token first and says when rows
# beyond its window become due.


def documented() -> Any:
    """``tests/snowberg/snowflake/documented_snowflake.py``: the watch poll's answers as Snowflake documents them."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "snowflake"))
    import documented_snowflake

    return documented_snowflake


def test_a_watched_plan_reads_the_change_token_before_its_query_and_only_when_it_loads_to_the_end(
    sfdb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from snowberg.load.plan import WATCH_DUE, WATCH_SIGNAL

    d = documented()
    account = d.DocumentedSnowflake()
    account.table(sfdb.table("SRC"))
    sfdb.sql(NTZ_DDL.format(t=sfdb.table("SRC")))
    insert_ntz(sfdb, [(1, "a", datetime(2026, 1, 1))])
    cfg = config(sfdb, {"column": "updated_at"}, primary_key=["id"], watch={"poll_interval": "10s"})
    seen: list[str] = []
    conn = d.TokensOver(sfdb.conn, account)
    real_execute = d._RoutingCursor.execute

    def spy(self: Any, sql: str, *a: Any, **kw: Any) -> Any:
        seen.append(sql)
        return real_execute(self, sql, *a, **kw)

    monkeypatch.setattr(d._RoutingCursor, "execute", spy)
    w = plan_run(cfg, conn, None, run_id="r1")
    assert "SYSTEM$LAST_CHANGE_COMMIT_TIME" in seen[0] and len(seen) > 1  # the token, then the plan's SQL
    assert w.extra[WATCH_SIGNAL] == account.token(sfdb.table("SRC")) and WATCH_DUE not in w.extra
    seen.clear()
    dry = plan_run(cfg, conn, None, run_id="r2", dry_run=True)
    assert WATCH_SIGNAL not in dry.extra and not any("SYSTEM$" in s for s in seen)
    unwatched = plan_run(config(sfdb, {"column": "updated_at"}), sfdb.conn, None, run_id="r3")
    assert WATCH_SIGNAL not in unwatched.extra


def test_a_row_beyond_the_window_makes_the_plan_say_when_a_run_covers_it(sfdb: Any) -> None:
    from snowberg.load.plan import DUE_MARGIN, WATCH_DUE

    d = documented()
    account = d.DocumentedSnowflake()
    account.table(sfdb.table("SRC"))
    sfdb.sql(NTZ_DDL.format(t=sfdb.table("SRC")))
    newest = wall("UTC").replace(microsecond=0)
    insert_ntz(sfdb, [(1, "old", datetime(2026, 1, 1)), (2, "within the lag", newest)])
    cfg = config(sfdb, {"column": "updated_at", "commit_lag": "5m"}, watch=True)
    w = plan_run(cfg, d.TokensOver(sfdb.conn, account), None, run_id="r1")
    assert datetime.fromisoformat(w.extra[WATCH_DUE]) == newest.replace(tzinfo=UTC) + timedelta(minutes=5) + DUE_MARGIN


@pytest.mark.parametrize(
    ("kind", "newest", "high", "zone", "due"),
    [
        # TIMESTAMP_TZ: an instant; covered once the clock minus the lag reaches it.
        ("timestamp_tz", datetime(2026, 12, 1, 10, 0, tzinfo=UTC), "2026-12-01 09:55:00+00:00", "UTC", (10, 5)),
        # NTZ written on Tokyo's wall clock: the instant is 9 hours earlier in UTC.
        ("timestamp_ntz", datetime(2026, 12, 1, 19, 0), "2026-12-01 18:55:00", "Asia/Tokyo", (10, 5)),
        # DATE: today's rows are covered from the next midnight (in the cursor's zone) plus the lag.
        ("date", date(2026, 12, 1), "2026-11-30", "UTC", (24, 5)),
    ],
)
def test_covered_from_is_newest_plus_the_lag_on_the_cursors_clock(
    kind: str, newest: Any, high: str, zone: str, due: tuple[int, int]
) -> None:
    from snowberg.core.cursor import CursorKind
    from snowberg.load.plan import DUE_MARGIN, covered_from

    at = covered_from(CursorKind(kind), newest, high, timedelta(minutes=5), ZoneInfo(zone))
    hours, minutes = due
    assert at == datetime(2026, 12, 1, tzinfo=UTC) + timedelta(hours=hours, minutes=minutes) + DUE_MARGIN


def test_covered_from_is_none_when_the_window_covers_the_newest_row() -> None:
    from snowberg.core.cursor import CursorKind
    from snowberg.load.plan import covered_from

    z = ZoneInfo("UTC")
    assert covered_from(CursorKind.TIMESTAMP_NTZ, datetime(2026, 1, 1), "2026-01-01 00:00:00", timedelta(0), z) is None
    assert covered_from(CursorKind.NUMBER, Decimal(10), "5", timedelta(0), z) is None  # NUMBER windows end at newest
    assert covered_from(CursorKind.TIMESTAMP_NTZ, None, None, timedelta(0), z) is None  # an empty source


def test_a_watched_table_without_a_cursor_records_the_token_its_full_refresh_covered(
    cursorless: TableConfig, sfdb: Any, catalog: Any, variables: Any
) -> None:
    from snowberg.iceberg.watch_state import RunPhase, read_watch
    from snowberg.load.plan import WATCH_DUE, WATCH_SIGNAL
    from snowberg.load.publish import record_watched_plan

    d = documented()
    account = d.DocumentedSnowflake()
    account.table(sfdb.table("SRC"))
    cfg = config(sfdb, None, watch=True)  # the cursorless fixture's table, watched
    conn = d.TokensOver(sfdb.conn, account)
    table, _ = reconcile_before_plan(cfg, catalog, variables)
    w = plan_run(cfg, conn, table, run_id="r1")
    assert w.extra[WATCH_SIGNAL] == account.token(sfdb.table("SRC")) and WATCH_DUE not in w.extra
    record_watched_plan(cfg.target, w, variables, idle=False)
    load_window(cfg, conn, catalog, w)
    publish(cfg, catalog, w, variables)
    rec = read_watch(cfg.target, variables)
    assert rec is not None and (rec.phase, rec.signal, rec.due) == (RunPhase.DONE, w.extra[WATCH_SIGNAL], None)
