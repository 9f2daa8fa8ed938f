"""syncs.yaml in ``snowberg validate``: the sync model's errors, clashing syncs, located like tables'."""

from __future__ import annotations

from snowberg.config.validate import validate_text
from snowberg.sync.specs import SPECS, SYNCS


def test_sync_errors_are_named_by_sync_and_field_with_the_tag_of_the_target_hidden() -> None:
    text = (
        "syncs:\n"
        "  - name: to_native\n"
        "    source: {catalog: lake, table: shop.menu}\n"
        "    target:\n"
        "      kind: native\n"
        "      table: DB.MENU\n"
        "      key_columns: [id]\n"
        "  - name: to_horizon\n"
        "    source: {catalog: lake, table: shop.orders}\n"
        "    target: {kind: iceberg, catalog: horizon, table: SHOP.ORDERS}\n"
    )
    result = validate_text(text, source="syncs.yaml", specs=SPECS)
    assert result.spec is SYNCS
    got = [(i.line, i.entity, i.name, i.field, i.message[:60]) for i in result.issues]
    assert got == [
        (6, "sync", "to_native", "target.table", "invalid table name 'DB.MENU': expected database.schema.table"),
        (7, "sync", "to_native", "target.key_columns", "unknown key"),
        (8, "sync", "to_horizon", None, "an iceberg target needs check.snowflake_conn_id and check.ta"),
    ]


def test_two_syncs_of_one_name_or_one_target_clash() -> None:
    text = (
        "syncs:\n"
        "  - {name: a, source: {catalog: lake, table: s.m}, target: {kind: native, table: DB.S.MENU}}\n"
        "  - {name: a, source: {catalog: lake, table: s.n}, target: {kind: native, table: DB.S.OTHER}}\n"
        "  - {name: c, source: {catalog: lake, table: s.o}, target: {kind: native, table: db.s.menu}}\n"
        "  - name: d\n    source: {catalog: lake, table: s.o}\n"
        "    target: {kind: native, table: db.s.menu, snowflake_conn_id: other}\n"
    )
    result = validate_text(text, source="syncs.yaml", specs=SPECS)
    assert [(i.line, i.name, i.field, i.message) for i in result.issues] == [
        (3, "a", "name", "the name 'a' is also the name of entry #1"),
        (4, "c", "target.table", "sync 'a' already writes db.s.menu"),
    ]
    assert len(result.entries) == 4  # another connection's table of that name is another table
