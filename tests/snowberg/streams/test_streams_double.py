"""The stream double behaves like a Snowflake stream where exactly-once depends on it."""

from __future__ import annotations

from streams_harness import Harness


def _rows(cur: object) -> list[tuple[object, ...]]:
    return sorted(cur.fetchall(), key=str)  # type: ignore[attr-defined]


def test_offset_moves_only_with_committed_dml_and_updates_are_pairs(harness: Harness) -> None:
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


def test_append_only_and_initial_rows(harness: Harness) -> None:
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
