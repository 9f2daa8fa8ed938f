"""Consuming the stream into the staging table: one transaction moves the offset and stages the batch.

The first two tests pin what ``consume`` relies on in Snowflake (and the stream
double reproduces): the offset moves only with committed DML that reads the
stream, updates are DELETE + INSERT pairs, APPEND_ONLY streams return inserts.
"""

from __future__ import annotations

import pytest
from streams_harness import CountingConnection, Harness

from snowberg.core.identifiers import TableName
from snowberg.mapping.columns import SnowflakeColumn
from snowberg.streams import sql as S
from snowberg.streams.errors import StreamConfigError, StreamError
from snowberg.streams.staging import ConsumeResult, cleanup, consume, describe, ensure_staging


def _rows(cur: object) -> list[tuple[object, ...]]:
    return sorted(cur.fetchall(), key=str)


def test_stream_offset_moves_only_with_committed_dml_and_updates_are_pairs(harness: Harness) -> None:
    h = harness
    h.insert((1, "new", "10.00"))
    h.sql(f'CREATE STREAM "{h.db}"."SRC"."S" ON TABLE "{h.db}"."SRC"."ORDERS"')
    h.sql(f'CREATE TABLE "{h.db}"."SRC"."SINK" (ID NUMBER(38,0), A VARCHAR, U BOOLEAN)')
    h.update(1, "paid")
    cur = h.admin.cursor()
    cur.execute(f'SELECT ID, STATUS, METADATA$ACTION, METADATA$ISUPDATE FROM "{h.db}"."SRC"."S"')
    assert _rows(cur) == [(1, "new", "DELETE", True), (1, "paid", "INSERT", True)]

    consume = f'INSERT INTO "{h.db}"."SRC"."SINK" SELECT ID, METADATA$ACTION, METADATA$ISUPDATE FROM "{h.db}"."SRC"."S"'
    cur.execute("BEGIN")
    cur.execute(consume)
    cur.execute("ROLLBACK")
    assert h.sql(f'SELECT COUNT(*) FROM "{h.db}"."SRC"."S"') == [(2,)]  # rolled back: offset unchanged

    other = h.connect()
    cur.execute("BEGIN")
    cur.execute(consume)
    other.cursor().execute(f'INSERT INTO "{h.db}"."SRC"."ORDERS" (ID, STATUS) VALUES (2, \'late\')')
    cur.execute("COMMIT")
    # The consuming transaction read the stream as of its start: the concurrent insert is still pending.
    assert h.sql(f'SELECT COUNT(*) FROM "{h.db}"."SRC"."SINK"') == [(2,)]
    cur.execute(f'SELECT ID, METADATA$ACTION FROM "{h.db}"."SRC"."S"')
    assert _rows(cur) == [(2, "INSERT")]


def test_append_only_stream_returns_inserts_and_the_initial_rows(harness: Harness) -> None:
    h = harness
    h.insert((1, "new", "10.00"))
    h.sql(
        f'CREATE STREAM "{h.db}"."SRC"."A" ON TABLE "{h.db}"."SRC"."ORDERS" APPEND_ONLY = TRUE SHOW_INITIAL_ROWS = TRUE'
    )
    h.insert((2, "new", "20.00"))
    h.update(1, "paid")
    h.delete(2)  # an append-only stream still returns the inserted row
    cur = h.admin.cursor()
    cur.execute(f'SELECT ID, STATUS, METADATA$ACTION FROM "{h.db}"."SRC"."A"')
    assert _rows(cur) == [(1, "new", "INSERT"), (2, "new", "INSERT")]


def test_bare_select_consumes_nothing_but_the_run_does(harness: Harness) -> None:
    h = harness
    h.insert((1, "new", "10.00"))
    h.run()
    h.update(1, "paid")
    assert h.stream_pending() == 2
    assert h.stream_pending() == 2  # reading the stream twice: still there
    h.run()
    assert h.stream_pending() == 0


def test_failure_inside_consume_transaction_rolls_back(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offset moves only with a committed consume: a failure before COMMIT leaves the changes in the stream."""
    from snowberg.streams.steps import consume_step

    h = harness
    h.insert((1, "new", "10.00"))
    h.run()
    h.update(1, "paid")
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:stream_in_consume")
    with pytest.raises(RuntimeError, match="stream_in_consume"):
        consume_step(h.cfg, h.stream, h.connect(), h.catalog(), run_id="r")
    monkeypatch.delenv("SNOWBERG_FAULT")
    assert h.stream_pending() == 2
    assert h.staged_count() == 0
    h.run()
    assert h.target_rows() == h.source_rows()


def _consume(
    h: Harness, *, committed_batch_id: int = 0, generation: str | None = None, recover: bool = False
) -> ConsumeResult:
    return consume(
        h.connect(),
        h.stream,
        source_table=h.cfg.source.table,
        committed_batch_id=committed_batch_id,
        committed_generation=generation,
        run_id="r",
        recover=recover,
    )


def test_first_consume_creates_the_stream_and_stages_a_full_copy_above_the_committed_batch(harness: Harness) -> None:
    h = harness
    h.insert((1, "new", "10.00"), (2, "new", "20.00"))
    res = _consume(h, committed_batch_id=5)
    assert res.created_stream is True and res.refresh is True
    assert (res.batch_id, res.through_batch_id, res.committed_batch_id, res.rows) == (6, 6, 5, 2)
    assert h.staged_count() == 3  # the REFRESH marker and the two rows
    actions = h.sql(f'SELECT "SNOWBERG_ACTION", "SNOWBERG_RUN_ID" FROM "{h.db}"."STAGE"."ORDERS_STAGING"')
    assert sorted(actions) == [("INSERT", "r"), ("INSERT", "r"), ("REFRESH", "r")]
    assert h.stream_pending() == 0
    h.update(1, "paid")
    again = _consume(h, committed_batch_id=5, generation=None)
    assert (again.batch_id, again.rows, again.refresh, again.created_stream) == (7, 2, False, False)


def test_cleanup_deletes_staged_batches_up_to_the_given_one(harness: Harness) -> None:
    h = harness
    h.insert((1, "new", "10.00"))
    _consume(h)
    h.update(1, "paid")
    _consume(h)
    assert cleanup(h.connect(), h.stream, through_batch_id=1) == 2  # batch 1: marker + row
    assert h.sql(f'SELECT DISTINCT "SNOWBERG_BATCH_ID" FROM "{h.db}"."STAGE"."ORDERS_STAGING"') == [(2,)]


def test_a_stream_whose_mode_differs_from_the_config_is_refused(harness: Harness) -> None:
    h = harness
    h.insert((1, "new", "10.00"))
    _consume(h)
    h.configure(append_only=True)
    with pytest.raises(StreamConfigError, match=r"ORDERS_STREAM is DEFAULT but the config says append_only: true"):
        _consume(h)


def test_a_recreated_stream_without_initial_rows_is_refused_as_lost_changes(harness: Harness) -> None:
    h = harness
    h.stream = h.stream.model_copy(update={"show_initial_rows": False})
    h.insert((1, "new", "10.00"))
    first = _consume(h)
    assert first.refresh is False and first.rows == 0  # no initial rows asked for
    generation = first.status["created_on"]  # what the Iceberg commit records
    h.sql(f'CREATE OR REPLACE STREAM "{h.db}"."SRC"."ORDERS_STREAM" ON TABLE "{h.db}"."SRC"."ORDERS"')
    with pytest.raises(StreamError, match="was re-created .* configured without initial rows"):
        _consume(h, generation=generation)
    recovered = _consume(h, generation=generation, recover=True)
    assert recovered.refresh is True and recovered.rows == 1


def test_an_empty_first_consume_without_initial_rows_stages_the_generation(harness: Harness) -> None:
    """Nothing to stage, nothing committed yet: a marker row keeps the generation, so a re-creation is noticed."""
    h = harness
    h.stream = h.stream.model_copy(update={"show_initial_rows": False})
    h.insert((1, "new", "10.00"))
    first = _consume(h)
    assert (first.rows, first.refresh, first.batch_id) == (0, False, 1)
    staged = h.sql(f'SELECT "SNOWBERG_ACTION", "SNOWBERG_STREAM_CREATED_ON" FROM "{h.db}"."STAGE"."ORDERS_STAGING"')
    assert staged == [("GENERATION", first.status["created_on"])]
    again = _consume(h)  # the generation is known now: an empty batch stages nothing more
    assert (again.rows, again.batch_id, h.staged_count()) == (0, 2, 1)
    h.insert((2, "new", "20.00"))
    h.sql(f'CREATE OR REPLACE STREAM "{h.db}"."SRC"."ORDERS_STREAM" ON TABLE "{h.db}"."SRC"."ORDERS"')
    with pytest.raises(StreamError, match="was re-created .* configured without initial rows"):
        _consume(h)


def test_a_foreign_table_in_the_staging_place_is_refused(harness: Harness) -> None:
    h = harness
    h.sql(f'CREATE TABLE "{h.db}"."STAGE"."ORDERS_STAGING" (ID NUMBER(38,0))')
    h.insert((1, "new", "10.00"))
    with pytest.raises(StreamError, match=r"lacks snowberg's columns \['SNOWBERG_BATCH_ID'.*not a snowberg staging"):
        _consume(h)
    assert h.sql(f'SELECT COUNT(*) FROM "{h.db}"."STAGE"."ORDERS_STAGING"') == [(0,)]


def test_ensure_staging_adds_the_sources_new_columns(harness: Harness) -> None:
    h = harness
    staging = TableName.parse(f"{h.db}.STAGE.GROWING")
    id_col = SnowflakeColumn(name="ID", type="NUMBER", precision=38, scale=0)
    ensure_staging(h.admin, staging, [id_col])
    ensure_staging(h.admin, staging, [id_col, SnowflakeColumn(name="NOTE", type="TEXT", length=20)])
    cols = {c.name: c for c in describe(h.admin, S.describe_table_sql(staging))}
    assert [n for n, _ in S.STAGING_META] + ["ID", "NOTE"] == list(cols)
    assert cols["NOTE"].type == "TEXT"


def test_nothing_to_consume_asks_the_stream_and_the_staging_in_one_statement(harness: Harness) -> None:
    """Idle only with no change data AND nothing staged above the lake's batch; any failure counts as work."""
    from snowberg.streams.staging import nothing_to_consume

    h = harness
    h.insert((1, "new", "10.00"))
    first = h.run()
    committed = first["cleanup"]["committed_batch_id"]
    conn = CountingConnection(h.connect())
    assert nothing_to_consume(conn, h.stream, committed_batch_id=committed) is True
    assert len(conn.statements) == 1 and "SYSTEM$STREAM_HAS_DATA" in conn.statements[0]
    h.update(1, "paid")
    assert nothing_to_consume(conn, h.stream, committed_batch_id=committed) is False  # change data
    _consume(h, committed_batch_id=committed)
    # The stream is empty again, but a staged batch waits for the lake (a run whose load failed).
    assert nothing_to_consume(conn, h.stream, committed_batch_id=committed) is False
    h.run()
    assert nothing_to_consume(conn, h.stream, committed_batch_id=committed + 1) is True
    h.admin.make_stale(h.stream.name)
    assert nothing_to_consume(conn, h.stream, committed_batch_id=committed + 1) is False  # the consume reports it


def test_asking_an_empty_stream_keeps_it_from_going_stale(harness: Harness) -> None:
    """As Snowflake documents SYSTEM$STREAM_HAS_DATA: the call on an empty stream moves stale_after on."""
    from datetime import UTC, datetime, timedelta

    from snowberg.streams.staging import nothing_to_consume
    from snowberg.streams.status import read_status

    h = harness
    h.insert((1, "new", "10.00"))
    done = h.run()
    soon = datetime.now(UTC) + timedelta(hours=1)
    h.admin.set_stale_after(h.stream.name, soon)
    assert nothing_to_consume(h.connect(), h.stream, committed_batch_id=done["cleanup"]["committed_batch_id"])
    status = read_status(h.connect(), h.stream.stream_name)
    assert status is not None and status.stale_after is not None and status.stale_after > soon + timedelta(days=1)
