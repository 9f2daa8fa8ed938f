"""Sync a lake Iceberg table into a Snowflake-managed Iceberg table through a REST catalog.

The target is any Iceberg catalog; the case this is built for is Snowflake
Horizon's Iceberg REST endpoint (``snowberg.iceberg.catalogs`` builds it from a
``snowflake`` Airflow connection: PAT credential, ``session:role:<ROLE>``
scope, vended credentials). A commit through Horizon is a commit to the
Snowflake table: Snowflake queries see the rows as soon as it lands.

Exactly once: every sync commit records, in the target snapshot's summary,

* ``snowberg.sync.source-snapshot-id`` — the last source snapshot it covers,
* ``snowberg.sync.source-table-uuid`` — which source table that id belongs to,
* ``snowberg.sync.run-id``, ``.mode``, ``.rows``, ``.source``,

in the same commit as the data. A run reads that state back from the target
(the newest snapshot on the main branch that carries it; Snowflake's own DML
snapshots are skipped), plans the source snapshots after it, writes the data
files, and commits with the requirement that the target's main branch is still
where it was. If another writer committed in between, the catalog answers 409;
pyiceberg's own rebase-and-retry is switched off for this commit (it would
re-apply our append on top of a concurrent sync of the same range), and the
run instead re-reads the target's state and re-plans — so a concurrent or
retried run that finds the range already synced writes nothing. A commit
whose outcome is unknown (HTTP 5xx) is resolved the same way.

Safety rule: a target with rows but no sync state is never written to (its
rows cannot be matched to source snapshots), except by a full reload.

Keyed sources (``key_columns``, by default the source's identifier fields):
overwrite/delete snapshots are applied as a change, not reloaded — the same
commit hides the removed and rewritten keys with position delete files
(``iceberg.merge``; never equality deletes, which Snowflake cannot read) and
appends the rewritten rows, so its cost follows the change, not the table.
The key must be a key (``sync.keys``): verified before any file is written,
and the commit is refused unless its position deletes hide exactly the rows
the change removed at the source.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from snowberg.core import faults
from snowberg.core.identifiers import IcebergName
from snowberg.core.results import Status
from snowberg.iceberg.deletes import live_rows
from snowberg.iceberg.state import commits
from snowberg.iceberg.tables import ensure_namespace
from snowberg.sync.keys import check_removed, verify_change, verify_plan
from snowberg.sync.snapshots import (
    ChangePlan,
    OnRewrite,
    RowChanges,
    SourceRewriteError,
    SyncMode,
    plan_changes,
    read_batches,
    read_changes,
    resolve_key_columns,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

PREFIX = "snowberg.sync."
SOURCE_SNAPSHOT = PREFIX + "source-snapshot-id"
SOURCE_UUID = PREFIX + "source-table-uuid"
SOURCE = PREFIX + "source"
RUN_ID = PREFIX + "run-id"
MODE = PREFIX + "mode"
ROWS = PREFIX + "rows"
KEY_COLUMNS = PREFIX + "key-columns"  # the key verified over the whole source (sync.keys), carried by every commit


class TargetStateError(RuntimeError):
    """The target's contents cannot be matched to source snapshots; nothing was written."""


class SchemaMismatchError(ValueError):
    """Source columns do not fit the target table; nothing was written."""


@dataclass(frozen=True, kw_only=True)
class TargetState:
    source_uuid: str | None
    source_snapshot_id: int
    target_snapshot_id: int
    run_id: str | None
    key_columns: list[str] | None = None


@dataclass(kw_only=True)
class IcebergSyncResult:
    status: Status  # committed | nothing_new
    mode: SyncMode
    target: str
    source: str
    source_uuid: str
    from_snapshot_id: int | None
    to_snapshot_id: int | None
    rows: int
    rows_by_snapshot: dict[str, int] = field(default_factory=dict)
    target_snapshot_id: int | None = None
    target_total_rows: int | None = None  # live rows of the target after the commit (iceberg.deletes.live_rows)
    key_columns: list[str] = field(default_factory=list)  # the key a keyed run applied changes by (source names)
    key_target_columns: list[str] = field(default_factory=list)  # the same columns as the target names them
    source_rows: int | None = None  # live rows of the source at to_snapshot_id (keyed runs; None: unknown)
    attempts: int = 1
    seconds: float = 0.0
    plan: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # Plain strings in XCom: readable by any deserialiser, equal to the members.
        d["status"], d["mode"] = self.status.value, self.mode.value
        return d


def read_target_state(table: Table) -> TargetState | None:
    """The newest sync state on the target's main branch (snapshots without it, or partial ones, are skipped)."""
    for snap in commits(table):
        props = snap.summary.additional_properties if snap.summary is not None else {}
        if SOURCE_SNAPSHOT in props:
            return TargetState(
                source_uuid=props.get(SOURCE_UUID),
                source_snapshot_id=int(props[SOURCE_SNAPSHOT]),
                target_snapshot_id=snap.snapshot_id,
                run_id=props.get(RUN_ID),
                key_columns=json.loads(props[KEY_COLUMNS]) if props.get(KEY_COLUMNS) else None,
            )
    return None


def column_mapping(source: Schema, target: Schema) -> dict[str, str]:
    """``{target column: source column}``, matched case-insensitively.

    Snowflake stores unquoted names upper-case, so a table created in Snowflake
    as ``order_id INT`` has an Iceberg field ``ORDER_ID``; the lake usually says
    ``order_id``. A source column the target lacks is refused (add it in
    Snowflake first: ``ALTER ICEBERG TABLE ... ADD COLUMN``), a required target
    column the source lacks too.
    """
    by_lower: dict[str, str] = {}
    for f in source.fields:
        key = f.name.lower()
        if key in by_lower:
            raise SchemaMismatchError(f"source columns {by_lower[key]!r} and {f.name!r} differ only in case")
        by_lower[key] = f.name
    mapping: dict[str, str] = {}
    for f in target.fields:
        src = by_lower.pop(f.name.lower(), None)
        if src is None:
            if f.required:
                raise SchemaMismatchError(f"target column {f.name!r} is required but the source has no such column")
            continue
        mapping[f.name] = src
    if by_lower:
        raise SchemaMismatchError(
            f"source column(s) {sorted(by_lower.values())} are not in the target table; add them to the "
            "target first (ALTER ICEBERG TABLE ... ADD COLUMN) — nothing was written"
        )
    return mapping


def cast_batch(batch: pa.RecordBatch, mapping: Mapping[str, str], schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` renamed and cast to the target's Arrow schema; only exact (safe) casts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays = []
    names = set(batch.schema.names)
    for f in schema:
        src = mapping.get(f.name)
        if src is None or src not in names:
            arrays.append(pa.nulls(batch.num_rows, type=f.type))
            continue
        arr = batch.column(src)
        if not arr.type.equals(f.type):
            try:
                arr = pc.cast(arr, f.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatchError(
                    f"column {src!r}: cannot convert {arr.type} to the target's {f.type} without loss: {exc}"
                ) from None
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _result(
    status: Status,
    source: Table,
    plan: ChangePlan,
    target: IcebergName,
    source_label: str,
    table: Table,
    rows: int,
    counts: dict[str, int],
    attempt: int,
    started: float,
    keyed: Sequence[str] = (),
    mapping: Mapping[str, str] | None = None,
) -> IcebergSyncResult:
    snap = table.current_snapshot()
    by_source = {src: tgt for tgt, src in (mapping or {}).items()}
    return IcebergSyncResult(
        status=status,
        mode=plan.mode,
        target=str(target),
        source=source_label,
        source_uuid=plan.source_uuid,
        from_snapshot_id=plan.from_snapshot_id,
        to_snapshot_id=plan.to_snapshot_id,
        rows=rows,
        rows_by_snapshot=counts,
        target_snapshot_id=snap.snapshot_id if snap else None,
        target_total_rows=live_rows(table),
        key_columns=list(keyed),
        key_target_columns=[by_source[k] for k in keyed if k in by_source],
        source_rows=(live_rows(source, plan.to_snapshot_id) if plan.to_snapshot_id is not None else 0)
        if keyed
        else None,
        attempts=attempt,
        seconds=time.monotonic() - started,
        plan=plan.describe(),
    )


def _counted_batches(
    pairs: Iterable[tuple[int, pa.RecordBatch]], mapping: Mapping[str, str], schema: pa.Schema, counts: dict[str, int]
) -> Iterator[pa.RecordBatch]:
    """``(source snapshot, batch)`` pairs cast to the target schema; rows are counted per snapshot into ``counts``."""
    for snap_id, b in pairs:
        counts[str(snap_id)] = counts.get(str(snap_id), 0) + b.num_rows
        yield cast_batch(b, mapping, schema)


def changed_keys(changes: RowChanges, keys: Sequence[str], mapping: Mapping[str, str], schema: pa.Schema) -> pa.Table:
    """The target-side keys a ``changes`` plan replaces: removed at the source ∪ written again.

    Both get position deletes on the target (the rewritten ones so their new
    version, appended in the same commit, is the only one left). Named and
    typed as the target's columns (Snowflake spells them upper-case).
    """
    import pyarrow as pa

    by_source = {src: tgt for tgt, src in mapping.items()}
    missing = [k for k in keys if k not in by_source]
    if missing:
        raise SchemaMismatchError(f"key column(s) {missing} are not in the target table; nothing was written")
    names = [by_source[k] for k in keys]
    key_schema = pa.schema([pa.field(n, schema.field(n).type) for n in names])
    parts = [changes.deleted_keys.select(list(keys))]
    parts += [pa.Table.from_batches([b.select(list(keys))]) for _, b in changes.upserts]
    return pa.concat_tables([p.rename_columns(names).cast(key_schema) for p in parts])


def _removed_check(changes: RowChanges, plan: ChangePlan, target: IcebergName, label: str) -> Callable[[int], None]:
    """Before the commit: the target rows the change's keys matched are the rows the change removed at the source."""

    def check(matched: int) -> None:
        check_removed(matched, changes, plan.key_columns, str(target), label)

    return check


def _target_arrow_schema(schema: Schema) -> pa.Schema:
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return schema_to_pyarrow(schema, include_field_ids=False)


def _load_target(
    catalog: Catalog,
    target: IcebergName,
    source: Table,
    create_if_missing: bool,
    create_in_snowflake: Callable[[Schema], None] | None = None,
) -> Table:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table((target.namespace, target.table))
    except NoSuchTableError:
        if create_in_snowflake is not None:
            # Snowflake must own a Snowflake-managed table: it is created by DDL in Snowflake
            # (CREATE ICEBERG TABLE … CATALOG = 'SNOWFLAKE'), then reached through the catalog.
            log.info("target table %s does not exist: creating it in Snowflake from the source schema", target)
            create_in_snowflake(source.schema())
            return catalog.load_table((target.namespace, target.table))
        if not create_if_missing:
            raise NoSuchTableError(
                f"target table {target} does not exist in catalog {catalog.name!r}. "
                "For Snowflake Horizon, create it in "
                "Snowflake first (CREATE ICEBERG TABLE in a database with CATALOG = 'SNOWFLAKE'; see "
                "docs/lake-to-snowflake.md), or set create_if_missing for catalogs that allow it."
            ) from None
    log.info("creating target table %s with the source schema", target)
    ensure_namespace(catalog, target.namespace)
    return catalog.create_table(
        (target.namespace, target.table),
        schema=source.schema(),
        partition_spec=source.spec(),
        properties={"format-version": "2"},
    )


def sync_iceberg(
    source: Table,
    catalog: Catalog,
    target: IcebergName,
    *,
    source_label: str,
    run_id: str,
    on_rewrite: OnRewrite | str = OnRewrite.FAIL,
    create_if_missing: bool = False,
    create_in_snowflake: Callable[[Schema], None] | None = None,
    batch_rows: int = 250_000,
    max_attempts: int = 3,
    key_columns: Sequence[str] | None = None,
    dag_id: str = "",
) -> IcebergSyncResult:
    """Commit the source snapshots not yet in ``target`` as one target commit (or nothing).

    ``key_columns`` (default: the source's Iceberg identifier fields) lets
    overwrite/delete snapshots be applied by key — position deletes for the
    changed keys plus the new rows, in the same commit — instead of being
    refused or fully reloaded: the cost follows the change, not the table.
    ``dag_id``: the run's DAG, recorded with the run id in the commit.
    """
    from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException

    from snowberg.iceberg import gate
    from snowberg.iceberg.write import write_data_files

    started = time.monotonic()
    keyed = resolve_key_columns(source, key_columns)  # before anything is opened or written
    last_error: Exception | None = None
    for attempt in range(1, max_attempts + 1):
        table = _load_target(catalog, target, source, create_if_missing, create_in_snowflake)
        st = read_target_state(table)
        if st is None and (live_rows(table) or 0) > 0 and on_rewrite != OnRewrite.FULL_RELOAD:
            raise TargetStateError(
                f"target {target} holds rows but no snowberg sync state: the first sync would duplicate or mix them. "
                "Empty it (TRUNCATE in Snowflake) or set on_rewrite: full_reload to replace its rows."
            )
        plan = plan_changes(
            source,
            st.source_snapshot_id if st else None,
            synced_uuid=st.source_uuid if st else None,
            on_rewrite=on_rewrite,
            key_columns=keyed,
        )
        if plan.mode == SyncMode.INITIAL and (live_rows(table) or 0) > 0:
            plan.mode, plan.reason = SyncMode.FULL_RELOAD, "first sync into a target that already holds rows"
        log.info("%s → %s (attempt %d): %s", source_label, target, attempt, plan.describe())
        if plan.mode == SyncMode.NOTHING_NEW:
            return _result(
                Status.NOTHING_NEW, source, plan, target, source_label, table, 0, {}, attempt, started, keyed
            )
        verified = verify_plan(source, plan, keyed, st.key_columns if st else None, source_label)

        mapping = column_mapping(source.schema(), table.schema())
        tx = table.transaction()
        schema = _target_arrow_schema(tx.table_metadata.schema())
        counts: dict[str, int] = {}
        changes = read_changes(source, plan) if plan.mode == SyncMode.CHANGES else None
        if changes is not None:
            verify_change(changes, plan.key_columns, source, source_label)
        faults.crash_point("sync_after_read")
        pairs = changes.upserts if changes is not None else read_batches(source, plan)
        batches = _counted_batches(pairs, mapping, schema, counts)
        data_files = list(write_data_files(table, tx, schema, batches, batch_rows))
        faults.crash_point("sync_after_write")
        rows = sum(counts.values())
        if plan.mode == SyncMode.INCREMENTAL and plan.expected_rows is not None and rows != plan.expected_rows:
            raise SourceRewriteError(
                f"read {rows:,} rows from the added files, their manifests say {plan.expected_rows:,}"
            )
        state_props = {
            SOURCE_SNAPSHOT: str(plan.to_snapshot_id),
            SOURCE_UUID: plan.source_uuid,
            SOURCE: source_label,
            RUN_ID: run_id,
            MODE: plan.mode.value,
            **({KEY_COLUMNS: json.dumps(verified)} if verified is not None else {}),
        }
        replaced: Any = None
        if plan.mode == SyncMode.FULL_RELOAD:
            from pyiceberg.expressions import AlwaysTrue

            replaced = AlwaysTrue()
        elif changes is not None:
            keys = changed_keys(changes, plan.key_columns, mapping, schema)
            log.info(
                "changes: %s keys removed at the source, %s rows rewritten; position deletes for %s target keys",
                f"{changes.deleted_keys.num_rows:,}",
                f"{rows:,}",
                f"{keys.num_rows:,}",
            )
            # No keys: nothing to remove, and the commit still records the state in an (empty) append.
            replaced = gate.Replacement(keys=keys, on_key_rows=_removed_check(changes, plan, target, source_label))
            replaced = replaced if keys.num_rows else None
        try:
            # The target is usually a Snowflake-managed table behind Horizon, which this code cannot
            # assume accepts table-property updates from an external engine: the state stays in the
            # snapshot summary only, and the no-rebase rule is applied in memory (gate.refuse_rebase).
            committed = gate.commit(
                table,
                tx,
                state_props=state_props,
                summary={ROWS: str(rows)},
                replaced=replaced,
                data_files=data_files,
                state_in_properties=False,
                crash_points=("sync_before_commit", "sync_after_commit"),
                dag_id=dag_id,
            )
        except (CommitFailedException, CommitStateUnknownException) as exc:
            last_error = exc
            log.warning(
                "commit to %s did not land cleanly (%s: %s); re-reading the target's state",
                target,
                type(exc).__name__,
                exc,
            )
            continue
        log.info(
            "%s: committed target snapshot %s with %s rows (source snapshot %s)",
            target,
            committed.snapshot_id,
            f"{rows:,}",
            plan.to_snapshot_id,
        )
        # tx.commit_transaction() refreshed ``table`` in place: it is the committed table.
        return _result(
            Status.COMMITTED, source, plan, target, source_label, table, rows, counts, attempt, started, keyed, mapping
        )
    raise RuntimeError(f"gave up on {target} after {max_attempts} conflicting commits") from last_error
