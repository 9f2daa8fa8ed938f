"""Is a sync's key a key? NULLs and duplicates in ``key_columns`` fail a sync before it writes.

A keyed sync applies a change by key: it removes the target's rows whose key
the change removed or rewrote, then writes the change's rows. That is only
right when every key value names exactly one row. A NULL key cannot be
matched: SQL's ``t.k = d.k`` never matches it (the native target kept a
NULL-key row the source removed, once per copy-on-write rewrite), and the
Iceberg target's key matching kept one as well; a value shared by two rows
removes both when one of them goes. Either way the target silently loses or
multiplies rows.

Which keys are verified: the source's Iceberg identifier fields are taken as
a key (the spec makes them required and unique, and snowberg's merge loads
keep them so); any other ``key_columns`` is verified:

* **the whole source, once**: at the first keyed sync, at every initial sync
  or full reload (they read a table whose history the sync did not follow),
  and whenever ``key_columns`` changes. The key columns of every live row are
  read (``verify_source``). The target records the key it verified with its
  sync state, so later syncs check only their change.
* **every change**: the key columns of the rows it writes and removes hold no
  NULL and no value twice (``verify_change``; an append-only change:
  ``verify_appended``).

A change can still collide with a row it does not touch (a new row whose key
an untouched row already has). The targets catch that while applying it: the
rows their key match removes must be exactly the rows the change removed at
the source (``check_removed``), or the transaction (native) or commit
(Iceberg) is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from snowberg.iceberg.deletes import live_rows
from snowberg.sync.snapshots import ChangePlan, RowChanges, SyncMode, identifier_columns

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

EXAMPLES = 3  # duplicated key values quoted in an error


class KeyViolationError(ValueError):
    """The sync's key is not a key (NULLs, or several rows share a value); nothing was written."""


def must_verify(table: Table, keys: Sequence[str]) -> bool:
    """Is ``keys`` something other than the source's Iceberg identifier fields (which are taken as a key)?"""
    return bool(keys) and sorted(keys) != sorted(identifier_columns(table))


@dataclass(kw_only=True)
class KeyCounts:
    """What breaks a key in some rows: NULLs per column, and key values held by more than one row."""

    nulls: dict[str, int] = field(default_factory=dict)
    repeated_values: int = 0
    repeated_rows: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, other: KeyCounts) -> None:
        for k, n in other.nulls.items():
            self.nulls[k] = self.nulls.get(k, 0) + n
        self.repeated_values += other.repeated_values
        self.repeated_rows += other.repeated_rows
        self.examples += other.examples[: max(0, EXAMPLES - len(self.examples))]

    def problems(self, keys: Sequence[str]) -> list[str]:
        out = [f"{k} is NULL in {n:,} row(s)" for k, n in self.nulls.items() if n]
        if self.repeated_values:
            shown = ", ".join(
                "(" + ", ".join(f"{k}={r[k]!r}" for k in keys) + f": {r['count_all']} rows)" for r in self.examples
            )
            out.append(
                f"{self.repeated_values:,} value(s) of {', '.join(keys)} are held by more than one row "
                f"({self.repeated_rows:,} rows), e.g. {shown}"
            )
        return out


def count_key_problems(data: pa.Table, keys: Sequence[str]) -> KeyCounts:
    """NULLs per key column and key values held by more than one row of ``data`` (rows with a NULL in the key
    are counted as NULLs, not compared with each other)."""
    import pyarrow.compute as pc

    out = KeyCounts()
    present = None
    for k in keys:
        out.nulls[k] = data.column(k).null_count
        valid = pc.is_valid(data.column(k))
        present = valid if present is None else pc.and_(present, valid)
    if present is not None and any(out.nulls.values()):
        data = data.filter(present)
    # Sorted, a repeated value is a run of equal neighbours: a sort costs a third of the memory a hash
    # aggregation of the same rows takes (pyarrow's group_by), and memory is what bounds a pass.
    data = data.select(list(keys))
    data = data.take(pc.sort_indices(data, sort_keys=[(k, "ascending") for k in keys]))
    n = data.num_rows
    if n < 2:
        return out
    same: Any = None
    for k in keys:
        eq = pc.equal(data.column(k).slice(1), data.column(k).slice(0, n - 1))
        same = eq if same is None else pc.and_(same, eq)
    same = pc.fill_null(same, False)
    dup_rows = pc.sum(same).as_py() or 0  # rows equal to the row before them
    if not dup_rows:
        return out
    import numpy as np

    flags = np.asarray(same.to_numpy(zero_copy_only=False), dtype=bool)  # flags[i]: row i + 1 repeats row i
    starts = np.flatnonzero(flags & ~np.concatenate(([False], flags[:-1])))  # the first row of each run
    out.repeated_values = len(starts)
    out.repeated_rows = dup_rows + len(starts)
    for i in starts[:EXAMPLES].tolist():
        run = 1
        while i + run - 1 < len(flags) and flags[i + run - 1]:
            run += 1
        out.examples.append({**{k: data.column(k)[i].as_py() for k in keys}, "count_all": run})
    return out


def key_problems(data: pa.Table, keys: Sequence[str]) -> list[str]:
    """NULLs per key column and key values held by more than one row, in words (empty: ``keys`` is a key here)."""
    return count_key_problems(data, keys).problems(keys)


def _refuse(problems: list[str], keys: Sequence[str], where: str, label: str) -> None:
    if problems:
        raise KeyViolationError(
            f"source {label}: key_columns {list(keys)} is not a key of {where}: {'; '.join(problems)}. A keyed "
            "sync would lose or multiply rows in the target, so nothing was written. Choose key_columns that "
            "identify one row each (no NULL), or set key_columns: [] with on_rewrite: full_reload."
        )


def _concat(parts: Iterable[pa.Table], keys: Sequence[str], table: Table) -> pa.Table:
    import pyarrow as pa

    from snowberg.iceberg.tables import arrow_type_for

    schema = table.schema()
    key_schema = pa.schema([pa.field(k, arrow_type_for(schema.find_field(k).field_type)) for k in keys])
    tables = [p.select(list(keys)).cast(key_schema) for p in parts]
    return pa.concat_tables(tables) if tables else key_schema.empty_table()


ROWS_PER_PASS = 2_000_000
"""Rows one pass of ``verify_source`` holds: larger sources are checked in ranges of the first key column."""


def verify_source(
    table: Table, snapshot_id: int, keys: Sequence[str], label: str, *, rows_per_pass: int = ROWS_PER_PASS
) -> int:
    """Check the key over every live row of the source at ``snapshot_id``; return the rows checked.

    Reads the key columns only (pyiceberg's scan honours delete files) and
    sorts them (``count_key_problems``). A source of more than
    ``rows_per_pass`` rows is checked in passes, each over one range of the
    first key column (cut at quantiles of a sample of its values; pyiceberg
    skips the data files outside a range by their statistics), plus one pass
    that counts rows whose first key column is NULL: memory follows one range,
    not the table. Paid once per key (docs/lake-to-snowflake.md).
    """
    import math

    from pyiceberg import expressions

    ex: Any = expressions
    snap = table.snapshot_by_id(snapshot_id)
    summary = snap.summary.additional_properties if snap is not None and snap.summary is not None else {}
    total = live_rows(table, snapshot_id) or int(summary.get("total-records") or 0)  # (equality deletes: None)
    parts = max(1, math.ceil(total / rows_per_pass))
    found = KeyCounts()
    rows = 0
    if parts == 1:
        data = _read_keys(table, snapshot_id, keys, ex.AlwaysTrue())
        found.add(count_key_problems(data, keys))
        rows = data.num_rows
    else:
        for f in _ranges(table, snapshot_id, keys[0], parts):
            data = _read_keys(table, snapshot_id, keys, f)
            found.add(count_key_problems(data, keys))
            rows += data.num_rows
        # rows whose first key column is NULL are in no range: counted, never compared with each other
        nulls = _read_keys(table, snapshot_id, keys, ex.IsNull(keys[0]))
        found.add(KeyCounts(nulls={k: nulls.column(k).null_count for k in keys}))
        rows += nulls.num_rows
    _refuse(found.problems(keys), keys, f"the source at snapshot {snapshot_id}", label)
    log.info(
        "key %s of %s: verified over the source at snapshot %s (%s rows, %d pass(es))",
        keys,
        label,
        snapshot_id,
        f"{rows:,}",
        parts,
    )
    return rows


def _read_keys(table: Table, snapshot_id: int, keys: Sequence[str], row_filter: Any) -> pa.Table:
    import pyarrow as pa

    scan = table.scan(snapshot_id=snapshot_id, row_filter=row_filter, selected_fields=tuple(keys))
    return _concat((pa.Table.from_batches([b]) for b in scan.to_arrow_batch_reader()), keys, table)


SAMPLE_FILES = 8  # data files (spread over the table) whose first key column is read to cut the ranges
SAMPLE_VALUES = 4096  # values kept per sampled batch


def _ranges(table: Table, snapshot_id: int, first: str, parts: int) -> list[Any]:
    """Row filters of ``parts`` ranges of ``first`` that together hold every non-NULL value.

    Cut at quantiles of the values of a few data files spread over the table
    (in planning order): a sample, so the ranges hold roughly, not exactly,
    equal numbers of rows.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg import expressions
    from pyiceberg.io.pyarrow import ArrowScan

    ex: Any = expressions  # positional constructors are pyiceberg's documented API

    scan = table.scan(snapshot_id=snapshot_id, selected_fields=(first,))
    tasks = list(scan.plan_files())
    picked = sorted({round(i * (len(tasks) - 1) / max(1, SAMPLE_FILES - 1)) for i in range(SAMPLE_FILES)})
    reader = ArrowScan(scan.table_metadata, scan.io, scan.projection(), scan.row_filter)
    chunks = []
    for i in picked if tasks else []:
        for b in reader.to_record_batches([tasks[i]]):
            col = b.column(first).drop_null()
            step = max(1, len(col) // SAMPLE_VALUES)  # a few thousand values per file are enough to cut by
            chunks.append(col.take(pa.array(range(0, len(col), step), pa.int64())))
    if not chunks:
        return [ex.NotNull(first)]
    sample = pa.concat_arrays(chunks)
    sample = sample.take(pc.sort_indices(sample))
    cuts = sorted({sample[int(len(sample) * i / parts)].as_py() for i in range(1, parts)}) if len(sample) else []
    if not cuts:
        return [ex.NotNull(first)]
    out: list[Any] = [ex.LessThan(first, cuts[0])]
    out += [
        ex.And(ex.GreaterThanOrEqual(first, lo), ex.LessThan(first, hi)) for lo, hi in zip(cuts, cuts[1:], strict=False)
    ]
    out.append(ex.GreaterThanOrEqual(first, cuts[-1]))
    return out


def verify_change(changes: RowChanges, keys: Sequence[str], table: Table, label: str) -> None:
    """The rows a change writes, and the rows it removes, each hold every key value once and no NULL."""
    import pyarrow as pa

    written = _concat((pa.Table.from_batches([b]) for _, b in changes.upserts), keys, table)
    _refuse(key_problems(written, keys), keys, "the rows the change writes", label)
    removed = changes.removed_keys if changes.removed_keys is not None else changes.deleted_keys
    _refuse(key_problems(_concat([removed], keys, table), keys), keys, "the rows the change removes", label)


def verify_appended(table: Table, plan: ChangePlan, keys: Sequence[str], label: str) -> int:
    """The rows an incremental plan appends (their key columns only) hold every key value once and no NULL."""
    import pyarrow as pa

    from snowberg.sync.snapshots import read_batches

    data = _concat((pa.Table.from_batches([b]) for _, b in read_batches(table, plan, columns=keys)), keys, table)
    _refuse(key_problems(data, keys), keys, "the rows the change appends", label)
    return data.num_rows


def verify_plan(
    table: Table, plan: ChangePlan, keys: Sequence[str], recorded: Sequence[str] | None, label: str
) -> list[str] | None:
    """The checks a run's plan needs before it writes; returns the key to record as verified (None: none).

    The whole source is checked when the key is not the identifier fields and
    was not verified before (``recorded``, from the target's sync state) or
    the run reads the whole source anyway (initial sync, full reload); else
    only an append-only change is checked here (``verify_change`` checks a
    keyed change once it is read).
    """
    if not must_verify(table, keys) or plan.to_snapshot_id is None:
        return None
    whole = plan.mode in (SyncMode.INITIAL, SyncMode.FULL_RELOAD) or list(recorded or ()) != list(keys)
    if whole:
        verify_source(table, plan.to_snapshot_id, keys, label)
    elif plan.mode == SyncMode.INCREMENTAL:
        verify_appended(table, plan, keys, label)
    return list(keys)


def check_removed(matched: int, changes: RowChanges, keys: Sequence[str], target: str, label: str) -> None:
    """The target rows a change's keys matched must be exactly the rows the change removed at the source.

    The target holds what the source held at the synced snapshot, so each key
    the change removes or rewrites names one target row per removed source
    row, and a key new to the source names none. More rows matched: a row the
    source keeps shares a key with the change (the key is not unique); fewer:
    the target lacks rows the source had (a NULL key, which matches nothing,
    or a target changed by someone else). Raised before the commit.
    """
    if matched != changes.removed_rows:
        raise KeyViolationError(
            f"source {label} → {target}: removing the change's {changes.removed_rows:,} removed or rewritten "
            f"row(s) by key_columns {list(keys)} matched {matched:,} target row(s). "
            + (
                "Rows the source keeps share a key value with the change: the key is not unique"
                if matched > changes.removed_rows
                else "The target lacks rows the source removed (a NULL key, or rows changed in the target)"
            )
            + ". Nothing was committed. Choose key_columns that identify one row each, or set key_columns: [] "
            "with on_rewrite: full_reload."
        )


__all__ = [
    "ROWS_PER_PASS",
    "KeyCounts",
    "KeyViolationError",
    "count_key_problems",
    "check_removed",
    "key_problems",
    "must_verify",
    "verify_appended",
    "verify_change",
    "verify_plan",
    "verify_source",
]
