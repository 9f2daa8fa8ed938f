"""Position delete files against the data files they apply to: live rows, dangling delete files, removing them.

A position delete file names data files by path. When a data file leaves
the table — a copy-on-write removal (pyiceberg's ``Transaction.delete``,
behind a full refresh, a backfill's cursor range, propagated source
deletes) drops or rewrites it — its delete files stay in their delete
manifests: pyiceberg 0.12 cannot write delete manifests, so it keeps them
untouched. Such a **dangling** delete file hides no row, yet it is counted
by the snapshot summary (``total-position-deletes``: 49 rows for 50 after a
backfill, −2 for an empty table) and it kept compaction from ever emptying
its delete manifest. Three things here, used by every writer:

* ``live_rows``: the one count of the rows a snapshot holds (rollback plans,
  the sync's "target holds rows" guard, health): data rows minus the
  position deletes that apply to live data files. The summary answers when
  the snapshot has no position deletes at all; otherwise the manifests do
  (metadata only; a delete file naming several data files is read).
* ``drop_dangling_deletes``: in the transaction of a commit that removed data
  files copy-on-write, a ``replace`` snapshot that removes the delete files
  whose every data file is gone (rows unchanged).
* ``replace_producer``: the snapshot producer for ``replace`` commits (this
  clean-up and compaction), which can rewrite delete manifests.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

log = logging.getLogger(__name__)

# Iceberg spec, "Position Delete Files": reserved field ids of the two columns.
DELETE_FILE_PATH_ID = 2147483546
DELETE_POS_ID = 2147483545


def delete_targets(io: FileIO, delete_file: DataFile) -> dict[str, int]:
    """``{data file path: deleted positions}`` of one position delete file.

    A file-scoped delete file (equal lower and upper ``file_path`` bounds, as
    snowberg and most engines write them) answers from its metadata; any
    other is read (its ``file_path`` column only).
    """
    referenced = getattr(delete_file, "referenced_data_file", None)  # v3 deletion vectors name their data file
    if referenced:
        return {str(referenced): int(delete_file.record_count)}
    lo = (delete_file.lower_bounds or {}).get(DELETE_FILE_PATH_ID)
    hi = (delete_file.upper_bounds or {}).get(DELETE_FILE_PATH_ID)
    if lo is not None and lo == hi:
        return {lo.decode(): int(delete_file.record_count)}
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    with io.new_input(delete_file.file_path).open() as f:
        paths = pq.read_table(f, columns=["file_path"]).column("file_path")
    counts = pc.value_counts(paths)
    return {str(v["values"]): int(v["counts"]) for v in counts.to_pylist()}


@dataclass(kw_only=True)
class LiveFiles:
    """The live files of a snapshot: data files by path, position delete files, and a count of equality deletes."""

    data: dict[str, Any] = field(default_factory=dict)
    position_deletes: list[Any] = field(default_factory=list)
    equality_deletes: int = 0

    @classmethod
    def read(cls, io: FileIO, snapshot: Snapshot) -> LiveFiles:
        """Read the snapshot's manifests (metadata only)."""
        from pyiceberg.manifest import DataFileContent

        out = cls()
        for mf in snapshot.manifests(io):
            for e in mf.fetch_manifest_entry(io, discard_deleted=True):
                f = e.data_file
                if f.content == DataFileContent.DATA:
                    out.data[f.file_path] = f
                elif f.content == DataFileContent.POSITION_DELETES:
                    out.position_deletes.append(f)
                else:
                    out.equality_deletes += 1
        return out

    def dangling(self, io: FileIO) -> list[Any]:
        """Position delete files none of whose data files is live: they hide no row."""
        return [d for d in self.position_deletes if not (delete_targets(io, d).keys() & self.data.keys())]

    def live_rows(self, io: FileIO) -> int | None:
        """Data rows minus the position deletes that apply to live data files (None with equality deletes)."""
        if self.equality_deletes:
            return None
        rows = sum(int(f.record_count) for f in self.data.values())
        for d in self.position_deletes:
            rows -= sum(n for path, n in delete_targets(io, d).items() if path in self.data)
        return rows


def _summary_rows(snapshot: Snapshot) -> int | None:
    """``total-records`` when the summary says there is no delete of any kind (then it is exact)."""
    p = snapshot.summary.additional_properties if snapshot.summary is not None else {}
    try:
        if int(p.get("total-position-deletes") or 0) or int(p.get("total-equality-deletes") or 0):
            return None
        if int(p.get("total-delete-files") or 0):
            return None
        return int(p["total-records"])
    except (KeyError, ValueError):
        return None


def live_rows(table: Table, snapshot_id: int | None = None) -> int | None:
    """Rows the snapshot (default: the current one) holds; 0 for a table without snapshots.

    None when it cannot be known from metadata (equality deletes, which
    snowberg never writes but another engine may) or the snapshot is not in
    the table. From the summary when it has no deletes (one lookup), else
    from the live files (see ``LiveFiles.live_rows``).
    """
    if snapshot_id is None:
        snap = table.current_snapshot()
        if snap is None:
            return 0
    else:
        snap = table.snapshot_by_id(snapshot_id)
        if snap is None:
            return None
    quick = _summary_rows(snap)
    return quick if quick is not None else LiveFiles.read(table.io, snap).live_rows(table.io)


def dangling_delete_files(io: FileIO, snapshot: Snapshot | None) -> list[Any]:
    """The snapshot's position delete files whose data files are all gone (none when it has no delete manifest)."""
    from pyiceberg.manifest import ManifestContent

    if snapshot is None or not any(m.content == ManifestContent.DELETES for m in snapshot.manifests(io)):
        return []
    return LiveFiles.read(io, snapshot).dangling(io)


def drop_dangling_deletes(tx: Any, props: Mapping[str, str], *, io: Any) -> int:
    """Stage a ``replace`` snapshot in ``tx`` removing the delete files a removal left dangling; returns the count.

    Called right after a copy-on-write removal in the same transaction, so
    the commit that removes data files also removes their delete files. A
    table without delete manifests costs one manifest-list read. ``io``: the
    FileIO of the table ``tx`` was opened on (``table.io``; pyiceberg keeps the
    transaction's table private).
    """
    meta = tx.table_metadata
    gone = dangling_delete_files(io, meta.current_snapshot())
    if not gone:
        return 0
    producer = replace_producer(tx, io, dict(props), rewrite_data_manifests=False)
    for d in gone:
        producer.delete_data_file(d)
    producer.commit()
    log.info(
        "removed %d position delete file(s) (%d positions) whose data files this commit removed",
        len(gone),
        sum(int(d.record_count) for d in gone),
    )
    return len(gone)


# ---------------------------------------------------------------- the replace producer


def delete_manifest_writer(spec: Any, schema: Any, output_file: Any, snapshot_id: int, compression: Any) -> Any:
    """A manifest writer for ``content=deletes`` manifests (pyiceberg 0.12's writers only write data manifests)."""
    global _DELETE_WRITER
    if _DELETE_WRITER is None:
        from pyiceberg.manifest import ManifestContent, ManifestWriterV2

        class DeleteManifestWriter(ManifestWriterV2):
            def content(self) -> ManifestContent:
                return ManifestContent.DELETES

            @property
            def _meta(self) -> dict[str, str]:
                return {**super()._meta, "content": "deletes"}

        _DELETE_WRITER = DeleteManifestWriter
    return _DELETE_WRITER(
        spec=spec, schema=schema, output_file=output_file, snapshot_id=snapshot_id, avro_compression=compression
    )


_DELETE_WRITER: Any = None
_REPLACE: Any = None


def replace_producer(tx: Any, io: Any, props: dict[str, str], *, rewrite_data_manifests: bool = True) -> Any:
    """A snapshot producer for a REPLACE commit: files swapped (data and delete files), rows unchanged.

    pyiceberg 0.12 has no rewrite-files API. Its overwrite producer
    (``_OverwriteFiles``, what ``Transaction.overwrite`` and ``delete`` use to
    rewrite files) computes the summary totals we need; we change three
    things: the operation is ``replace``; delete files may be removed, and a
    delete manifest that keeps some of its files is rewritten (with their
    sequence numbers, so they still apply to the same data files);
    ``rewrite_data_manifests`` (compaction) writes one data manifest per spec
    holding every live entry, so a compacted table plans like a freshly
    written one — without it, only data manifests that lose an entry are
    rewritten.
    """
    global _REPLACE
    if _REPLACE is None:
        _REPLACE = _make_replace_class()
    return _REPLACE(
        operation=_overwrite(),
        transaction=tx,
        io=io,
        snapshot_properties=props,
        rewrite_data_manifests=rewrite_data_manifests,
    )


def _overwrite() -> Any:
    from pyiceberg.table.snapshots import Operation

    return Operation.OVERWRITE  # summary totals as for an overwrite; the operation becomes replace in _summary


def _make_replace_class() -> type:
    """Built on first use so importing this module stays free of pyiceberg (DAG parsing imports the gate)."""
    from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
    from pyiceberg.table.snapshots import Operation, Summary
    from pyiceberg.table.update.snapshot import _OverwriteFiles

    class ReplaceFiles(_OverwriteFiles):
        def __init__(self, *, rewrite_data_manifests: bool, **kw: Any) -> None:
            super().__init__(**kw)
            self._rewrite_data = rewrite_data_manifests

        def _summary(self, snapshot_properties: Any = None) -> Summary:
            s = super()._summary(snapshot_properties or {})
            return Summary(operation=Operation.REPLACE, **s.additional_properties)

        def _touches(self, content: ManifestContent) -> bool:
            """Can a manifest of this content hold a file being removed? (the others are not read)"""
            removes_data = [f.content == DataFileContent.DATA for f in self._deleted_data_files]
            return any(removes_data) if content == ManifestContent.DATA else not all(removes_data)

        def _parent_manifests(self) -> list[Any]:
            if self._parent_snapshot_id is None:
                return []
            parent = self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)
            assert parent is not None
            return list(parent.manifests(self._io))

        def _deleted_entries(self) -> list[ManifestEntry]:
            entries = [
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.DELETED,
                    snapshot_id=self._snapshot_id,
                    sequence_number=e.sequence_number,
                    file_sequence_number=e.file_sequence_number,
                    data_file=e.data_file,
                )
                for m in self._parent_manifests()
                if self._touches(m.content)
                for e in m.fetch_manifest_entry(self._io, discard_deleted=True)
                if e.data_file in self._deleted_data_files
            ]
            self._validate_required_deletes(entries)
            return entries

        def _write(self, spec_id: int, content: ManifestContent, entries: list[ManifestEntry], added: list[Any]) -> Any:
            if content == ManifestContent.DELETES:
                writer = delete_manifest_writer(
                    self.spec(spec_id), self.schema(), self.new_manifest_output(), self._snapshot_id, self._compression
                )
            else:
                writer = self.new_manifest_writer(self.spec(spec_id))
            with writer:
                for f in added:
                    writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, data_file=f))
                for e in entries:
                    writer.existing(e)  # keeps its snapshot and sequence numbers: deletes still apply as before
            return writer.to_manifest_file()

        def _manifests(self) -> list[Any]:
            """The parent's manifests without the removed files; the added files in a new manifest.

            The removed files are not written back as DELETED entries: every later
            scan would decode them (loads carry manifests forward unchanged),
            which is the cost compaction removes. The snapshot summary counts
            them; change readers skip ``replace`` snapshots.
            """
            self._deleted_entries()  # refuses a file that is not in the parent
            out: list[Any] = []
            regroup: dict[int, list[ManifestEntry]] = {}
            for mf in self._parent_manifests():
                is_data = mf.content == ManifestContent.DATA
                if not self._touches(mf.content) and not (is_data and self._rewrite_data):
                    out.append(mf)
                    continue
                live = mf.fetch_manifest_entry(self._io, discard_deleted=True)
                kept = [e for e in live if e.data_file not in self._deleted_data_files]
                if is_data and self._rewrite_data:
                    regroup.setdefault(mf.partition_spec_id, []).extend(kept)
                elif len(kept) == len(live):
                    out.append(mf)
                elif kept:
                    out.append(self._write(mf.partition_spec_id, mf.content, kept, []))
            default_spec = self._transaction.table_metadata.default_spec_id
            if self._added_data_files:
                regroup.setdefault(default_spec, [])
            for spec_id, entries in regroup.items():
                added = self._added_data_files if spec_id == default_spec else []
                if entries or added:
                    out.append(self._write(spec_id, ManifestContent.DATA, entries, added))
            return out

    return ReplaceFiles
