"""Primary-key values of the rows a run writes: checked, collected, turned into a delete filter.

A merge replaces earlier versions of a key by deleting them in the same
commit that appends the new rows. That only works when every written row
has a whole key (a NULL cannot be matched, and pyiceberg refuses it in a
filter only after the data files are written) and when the key is unique
among the written rows (two rows for one key would both survive). Both are
checked here, on each batch before it reaches the data-file writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import pyarrow as pa


class DuplicateKeyError(ValueError):
    """Two rows of one run carry the same primary key; nothing was written."""


class NullKeyError(ValueError):
    """Rows of one run have NULL in a primary-key column; nothing was committed."""


def check_keys_not_null(batch: pa.RecordBatch | pa.Table, columns: Sequence[str], table_name: str) -> None:
    """Refuse a batch with NULL key values, naming the column and how many rows (before it is written)."""
    for c in columns:
        n = batch.column(c).null_count
        if n:
            raise NullKeyError(
                f"table {table_name!r}: {n:,} row(s) have NULL in primary-key column {c!r}; a key must be whole to "
                "replace earlier versions of the row. Nothing was committed. Fix the source, filter the rows in a "
                "custom query, or correct primary_key."
            )


class KeyCollector:
    """Primary-key values of the rows being loaded (for the merge delete)."""

    def __init__(self, columns: Sequence[str], table_name: str) -> None:
        self.columns = [c.lower() for c in columns]
        self.table_name = table_name
        self.chunks: list[pa.Table] = []

    def add(self, batch: pa.RecordBatch) -> None:
        """Keep the key columns of ``batch``, refusing NULL keys (they could never be matched)."""
        import pyarrow as pa

        check_keys_not_null(batch, self.columns, self.table_name)
        self.chunks.append(pa.Table.from_batches([batch]).select(self.columns))

    def table(self) -> pa.Table:
        import pyarrow as pa

        return pa.concat_tables(self.chunks) if self.chunks else pa.table({c: [] for c in self.columns})

    def check_unique(self) -> pa.Table:
        """The collected keys, refusing duplicates (a merge of two rows per key keeps both)."""
        t = self.table()
        grouped = t.group_by(self.columns).aggregate([([], "count_all")])
        if grouped.num_rows != t.num_rows:
            import pyarrow.compute as pc

            dup = grouped.filter(pc.greater(grouped["count_all"], 1)).slice(0, 3).to_pylist()
            raise DuplicateKeyError(
                f"table {self.table_name!r}: primary key {self.columns} is not unique in the window (e.g. {dup}); "
                "nothing was written. Fix primary_key in the config or de-duplicate in a custom query."
            )
        return t


def _literal(v: Any) -> Any:
    # pyiceberg binds date/time literals from ISO text; Python date objects are refused.
    if isinstance(v, (datetime, date, time)):
        return v.isoformat()
    return v


def key_filter(keys: pa.Table) -> Any:
    """A row filter matching exactly the given keys (``In`` for one column, OR of ANDs for several)."""
    from pyiceberg import expressions as ex

    # pyiceberg's predicates are pydantic models whose positional constructors mypy misreads.
    in_, eq = cast(Any, ex.In), cast(Any, ex.EqualTo)
    And, Or = ex.And, ex.Or
    names = keys.column_names
    if len(names) == 1:
        return in_(names[0], {_literal(v) for v in keys.column(0).to_pylist()})
    terms = [And(*[eq(k, _literal(v)) for k, v in row.items()]) for row in keys.to_pylist()]
    return terms[0] if len(terms) == 1 else Or(*terms)
