"""Files written before their commit: where they are staged, the manifests that name them, listing them.

Mapped slices (``load.mapped``) write their data files in one task and commit
them in another, possibly days later (a failed slice is cleared and retried).
Until that commit nothing in the table's metadata references the files, so
the orphan sweep (``iceberg.maintenance``) would take them for leftovers. The
staging layout is what lets it tell them apart:

* each run's staging folder is ``<table>/metadata/snowberg-staging/<run>/``;
  before any slice writes, the run puts its **run record** there
  (``run.json``: who staged, the state it was planned on, what names its
  commit);
* each slice writes a **staging manifest** (Iceberg's own manifest format,
  never referenced by a snapshot) listing its data files, into that folder;
* the commit removes the run's staging folder once its files are in the table.

Whether a staging folder may still be needed is decided from the table's
state and the run record (``staged_runs``, ``judge``). A run can no longer
commit — its staging is **abandoned** — when the table shows one of:

* ``committed``: its own commit is on main (a commit that died before
  removing the folder left it behind);
* ``superseded``: a later attempt of the same DAG run (``core.attempts``)
  staged or committed: Airflow cleared the run, so no task of this attempt
  runs again;
* ``overtaken``: another run's commit moved the state the run was planned
  on — for a run with a cursor, the watermark (the commit gate's base check
  refuses it, as it refused the commit that failed); for a full refresh
  without a cursor, the run whose state the table holds. A backfill is never
  overtaken: the gate lets it commit on any watermark.

Anything else is ``pending`` (it may still commit), or ``unknown`` (no
readable run record: written before records existed, or being written):
both are kept, with every file their staging manifests name, whatever their
age. The sweep removes an abandoned folder, and the data files only it
named, once the table has shown it abandoned for longer than the orphan age
and no file in it was written since (``StagedRun.removable``). The
evidence's time comes from the table's metadata (the snapshot that shows
it), so storage whose listing gives no modification times is judged the
same way. A rollback could make an overtaken run's gate pass again; a commit
whose staging was removed then fails on the missing files and commits
nothing (the gate checks every file it adds), and clearing the DAG run
reloads the window.

Every byte goes through the table's own FileIO (``table.io``), including the
listing (pyiceberg's FileIO has no list call; ``list_files`` asks the file
system behind ``table.io`` instead of building a second one from properties).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from snowberg.core.attempts import split_attempt
from snowberg.core.window import Mode
from snowberg.iceberg import state

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

STAGING_DIR = "snowberg-staging"
RUN_RECORD = "run.json"  # in a run's staging folder: the run record
# Staging manifests carry a placeholder snapshot id: they are never part of a snapshot.
PLACEHOLDER_SNAPSHOT_ID = 0


def staging_root(table: Table) -> str:
    """The folder every run's staging folder lives in: ``<table location>/metadata/snowberg-staging``."""
    return f"{table.metadata.location.rstrip('/')}/metadata/{STAGING_DIR}"


def staging_location(table: Table, run_id: str) -> str:
    """A run's staging folder: readable prefix + a hash of the whole run id (no two runs share one)."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:16]
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id)[:60]
    return f"{staging_root(table)}/{readable}-{digest}"


def is_staged(path: str) -> bool:
    """Is ``path`` inside a staging folder (any table's)?"""
    return f"/metadata/{STAGING_DIR}/" in path


def is_staging_manifest(path: str) -> bool:
    return is_staged(path) and path.endswith(".avro")


def is_run_record(path: str) -> bool:
    return is_staged(path) and path.endswith(f"/{RUN_RECORD}")


def path_key(path: str) -> str:
    """A path without its scheme and authority, so ``file:///a`` and ``/a`` compare equal."""
    if "://" in path:
        path = path.split("://", 1)[1]
        if not path.startswith("/"):
            path = path.split("/", 1)[1] if "/" in path else ""
            return "/" + path
    return path


def write_staging_manifest(table: Table, path: str, data_files: Sequence[Any]) -> tuple[str, int]:
    """Write a manifest listing ``data_files`` at ``path``; returns (path, length)."""
    from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, write_manifest

    meta = table.metadata
    writer = write_manifest(
        format_version=meta.format_version,
        spec=meta.spec(),
        schema=meta.schema(),
        output_file=table.io.new_output(path),
        snapshot_id=PLACEHOLDER_SNAPSHOT_ID,
        avro_compression="deflate",
    )
    with writer:
        for f in data_files:
            writer.add(
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED, snapshot_id=PLACEHOLDER_SNAPSHOT_ID, data_file=f
                )
            )
    return path, int(writer.to_manifest_file().manifest_length)


def read_staging_manifest(io: FileIO, path: str, length: int = 0, spec_id: int = 0) -> list[Any]:
    """The data files a staging manifest lists (a FileNotFoundError when it is gone)."""
    from pyiceberg.manifest import ManifestContent, ManifestFile

    mf = ManifestFile.from_args(
        manifest_path=path,
        manifest_length=length,
        partition_spec_id=spec_id,
        content=ManifestContent.DATA,
        sequence_number=0,
        min_sequence_number=0,
        added_snapshot_id=PLACEHOLDER_SNAPSHOT_ID,
    )
    return [e.data_file for e in mf.fetch_manifest_entry(io, discard_deleted=True)]


# ---------------------------------------------------------------- listing through table.io


@dataclass(frozen=True, kw_only=True)
class ListedFile:
    """A file under a location: its full path (as ``table.io`` opens it), its modification time and size (None:
    unknown)."""

    path: str
    modified: datetime | None
    size: int | None = None


def _aware(t: Any) -> datetime | None:
    if t is None:
        return None
    if isinstance(t, (int, float)):
        return datetime.fromtimestamp(t, tz=UTC)
    if isinstance(t, str):
        try:
            t = datetime.fromisoformat(t.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(t, datetime):
        return t if t.tzinfo is not None else t.replace(tzinfo=UTC)
    return None


def list_files(io: FileIO, location: str) -> Iterator[ListedFile]:
    """Every file under ``location``, listed by the file system behind ``io`` (pyarrow's or fsspec's).

    A FileIO of another kind cannot list: refuse rather than guess a second
    client from properties (it might not carry the catalog's endpoint or its
    vended credentials).
    """
    from pyiceberg.io.fsspec import FsspecFileIO
    from pyiceberg.io.pyarrow import PyArrowFileIO

    if isinstance(io, PyArrowFileIO):
        yield from _list_pyarrow(io, location)
    elif isinstance(io, FsspecFileIO):
        yield from _list_fsspec(io, location)
    else:
        raise TypeError(f"cannot list {location} through a {type(io).__name__}: snowberg lists through pyarrow, fsspec")


def _list_pyarrow(io: Any, location: str) -> Iterator[ListedFile]:
    from pyarrow import fs as pafs

    scheme, netloc, path = io.parse_location(location)
    filesystem = io.fs_by_scheme(scheme, netloc)
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    except FileNotFoundError:
        return
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        # parse_location keeps the bucket in the path for object stores (s3://b/k → "b/k"), not for hdfs.
        if scheme == "file":
            full = f"file://{info.path}"
        elif scheme in ("hdfs", "viewfs"):
            full = f"{scheme}://{netloc}{info.path}"
        else:
            full = f"{scheme}://{info.path}"
        yield ListedFile(path=full, modified=_aware(info.mtime), size=info.size)


def _list_fsspec(io: Any, location: str) -> Iterator[ListedFile]:
    from urllib.parse import urlparse

    uri = urlparse(location)
    scheme = uri.scheme or "file"
    fs = io.get_fs(scheme, uri.hostname) if scheme in ("abfs", "abfss", "wasb", "wasbs") else io.get_fs(scheme)
    root = location if scheme != "file" else uri.path or location
    try:
        found = fs.find(root, detail=True)
    except FileNotFoundError:
        return
    for name, info in found.items():
        if info.get("type", "file") != "file":
            continue
        modified = next(
            (_aware(info[k]) for k in ("mtime", "LastModified", "last_modified", "updated", "modified") if k in info),
            None,
        )
        full = f"file://{name}" if scheme == "file" else (name if "://" in name else f"{scheme}://{name}")
        size = info.get("size")
        yield ListedFile(path=full, modified=modified, size=int(size) if isinstance(size, int | float) else None)


def remove_run_staging(table: Table, run_id: str) -> int:
    """Delete a committed run's staging folder (manifests and key files of every attempt); returns the count.

    Best effort: a file left behind is kept by the sweep as staged (a leak, never a loss); the sweep's result
    counts what it keeps so a person can see it.
    """
    folder = staging_location(table, run_id)
    n = 0
    try:
        for f in list_files(table.io, folder):
            try:
                table.io.delete(f.path)
                n += 1
            except Exception as exc:  # noqa: BLE001 - best effort, see the docstring
                log.debug("could not delete staged file %s: %s", f.path, exc)
    except Exception as exc:  # noqa: BLE001 - listing may be refused (no list permission): leave it
        log.info("could not list the staging folder %s to clean it up: %s", folder, exc)
    return n


# ---------------------------------------------------------------- run records and what the table says of them


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """Who staged a folder, and what its commit needs: written before any slice writes (``write_run_record``).

    ``run_id`` is the attempt id (``core.attempts``); ``identity`` the summary
    keys its commit will carry (``gate.window_identity``: a retry finds the
    commit by them); ``base_watermark`` and ``base_run_id`` the state it was
    planned on (the watermark and the run id of the table's state then);
    ``watermarked``: whether its window has a cursor.
    """

    run_id: str
    dag_id: str
    mode: str
    identity: dict[str, str]
    base_watermark: str | None
    base_run_id: str | None
    watermarked: bool
    written_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> RunRecord:
        return cls(**json.loads(text))


def write_run_record(table: Table, record: RunRecord) -> str:
    """Put ``record`` into its run's staging folder (replacing an earlier attempt's of the same task); its path."""
    path = f"{staging_location(table, record.run_id)}/{RUN_RECORD}"
    with table.io.new_output(path).create(overwrite=True) as f:
        f.write(record.to_json().encode())
    return path


def read_run_record(io: FileIO, path: str) -> RunRecord | None:
    """The run record at ``path``; None when it is gone, half written or not a record."""
    try:
        with io.new_input(path).open() as f:
            return RunRecord.from_json(f.read())
    except (OSError, ValueError, TypeError) as exc:
        log.info("staging: run record %s cannot be read (%s)", path, exc)
        return None


class Verdict(StrEnum):
    """What the table's state says of a run's staging folder (see the module doc)."""

    PENDING = "pending"  # may still commit: kept
    UNKNOWN = "unknown"  # no readable run record: kept
    COMMITTED = "committed"  # its commit is on main: the folder is left over
    SUPERSEDED = "superseded"  # a later attempt of the same DAG run staged or committed
    OVERTAKEN = "overtaken"  # another run's commit moved the state it was planned on

    @property
    def abandoned(self) -> bool:
        """Can the run no longer commit (its staging is of no use)?"""
        return self in (Verdict.COMMITTED, Verdict.SUPERSEDED, Verdict.OVERTAKEN)


@dataclass(frozen=True, kw_only=True)
class Judgement:
    """A verdict, since when the table shows it (for an abandoned run), and why, for a person."""

    verdict: Verdict
    since: datetime | None = None
    why: str = ""


# Later attempts of each DAG run: (DAG id, DAG run id) → [(clear number, when it staged or committed)].
Attempts = Mapping[tuple[str, str], Sequence[tuple[int, datetime | None]]]


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def judge(table: Table, record: RunRecord, attempts: Attempts) -> Judgement:
    """Can the run that wrote ``record`` still commit to ``table``? (the rules: module doc)"""
    done = state.find_commit(table, record.identity)
    if done is not None:
        return Judgement(
            verdict=Verdict.COMMITTED, since=_at(done.timestamp_ms), why=f"committed in snapshot {done.snapshot_id}"
        )
    run, clear = split_attempt(record.run_id)
    later = [(n, t) for n, t in attempts.get((record.dag_id, run), ()) if n > clear]
    if later:
        n, t = min(later, key=lambda a: a[0])
        return Judgement(
            verdict=Verdict.SUPERSEDED, since=t, why=f"the DAG run was cleared: attempt {n} staged or committed"
        )
    st = state.read_state(table)
    if record.mode != Mode.BACKFILL and st is not None:
        if record.watermarked and st.watermark != record.base_watermark:
            why = f"run {st.run_id} moved the watermark from {record.base_watermark!r} to {st.watermark!r}"
            return Judgement(verdict=Verdict.OVERTAKEN, since=_at(st.timestamp_ms), why=why)
        if not record.watermarked and st.run_id != record.base_run_id:
            why = f"run {st.run_id} replaced the table after run {record.base_run_id} this one was planned on"
            return Judgement(verdict=Verdict.OVERTAKEN, since=_at(st.timestamp_ms), why=why)
    return Judgement(verdict=Verdict.PENDING, why="the table is still at the state the run was planned on")


@dataclass(frozen=True, kw_only=True)
class StagedRun:
    """A run's staging folder: its files, what its staging manifests name, its record, and the table's verdict."""

    folder: str
    files: tuple[ListedFile, ...]
    named: frozenset[str]  # ``path_key`` of every data file its readable staging manifests name
    unreadable: tuple[ListedFile, ...]  # staging manifests that cannot be read (maybe being written)
    record: RunRecord | None
    judgement: Judgement

    @property
    def bytes(self) -> int:
        """The size of the folder's files (as far as the listing gives sizes)."""
        return sum(f.size or 0 for f in self.files)

    def removable(self, cutoff: datetime) -> bool:
        """Abandoned since before ``cutoff``, and nothing in the folder written after it (a task still writing)."""
        j = self.judgement
        if not j.verdict.abandoned or j.since is None or j.since > cutoff:
            return False
        return all(f.modified is None or f.modified <= cutoff for f in self.files)

    def row(self) -> dict[str, Any]:
        """The run as a row for a person (``snowberg inspect T staging``, the sweep's report)."""
        r = self.record
        return {
            "run_id": r.run_id if r else None,
            "dag_id": r.dag_id if r else None,
            "verdict": self.judgement.verdict.value,
            "since": self.judgement.since.isoformat(timespec="seconds") if self.judgement.since else None,
            "why": self.judgement.why,
            "files": len(self.files),
            "bytes": self.bytes,
            "data_files": len(self.named),
            "folder": self.folder,
        }


def staged_runs(table: Table, listed: Sequence[ListedFile]) -> list[StagedRun]:
    """Every run's staging folder among the ``listed`` files of ``table``, each judged against the table's state.

    Reads every run record and staging manifest in the staging folders.
    """
    root = path_key(staging_root(table)) + "/"
    folders: dict[str, list[ListedFile]] = {}
    for f in listed:
        key = path_key(f.path)
        if key.startswith(root) and "/" in key[len(root) :]:
            folders.setdefault(key[len(root) :].split("/", 1)[0], []).append(f)
    if not folders:
        return []
    records = {
        name: next((read_run_record(table.io, f.path) for f in files if is_run_record(f.path)), None)
        for name, files in folders.items()
    }
    attempts = _attempts(table, folders, records)
    out = []
    for name, files in sorted(folders.items()):
        named, unreadable = _named_files(table.io, files)
        record = records[name]
        out.append(
            StagedRun(
                folder=f"{staging_root(table)}/{name}",
                files=tuple(files),
                named=named,
                unreadable=unreadable,
                record=record,
                judgement=judge(table, record, attempts) if record is not None else NO_RECORD,
            )
        )
    return out


NO_RECORD = Judgement(verdict=Verdict.UNKNOWN, why="no readable run record")


def _named_files(io: FileIO, files: Sequence[ListedFile]) -> tuple[frozenset[str], tuple[ListedFile, ...]]:
    """The data files the staging manifests among ``files`` name (``path_key``), and the manifests unreadable."""
    named: set[str] = set()
    unreadable = []
    for f in files:
        if not is_staging_manifest(f.path):
            continue
        try:
            named.update(path_key(d.file_path) for d in read_staging_manifest(io, f.path))
        except Exception as exc:  # noqa: BLE001 - any unreadable manifest: the caller decides by its age
            log.info("staging: manifest %s cannot be read (%s)", f.path, exc)
            unreadable.append(f)
    return frozenset(named), tuple(unreadable)


def _attempts(
    table: Table, folders: Mapping[str, Sequence[ListedFile]], records: Mapping[str, RunRecord | None]
) -> dict[tuple[str, str], list[tuple[int, datetime | None]]]:
    """The attempts of each DAG run the table shows: staging folders with a record, and commits on main."""
    out: dict[tuple[str, str], list[tuple[int, datetime | None]]] = {}
    for name, record in records.items():
        if record is None:
            continue
        run, n = split_attempt(record.run_id)
        written = next((f.modified for f in folders[name] if is_run_record(f.path)), None)
        out.setdefault((record.dag_id, run), []).append((n, written or _aware(record.written_at)))
    for snap in state.commits(table):
        props = state.snowberg_props(snap)
        if props.get(state.RUN_ID):
            run, n = split_attempt(props[state.RUN_ID])
            out.setdefault((props.get(state.DAG_ID) or "", run), []).append((n, _at(snap.timestamp_ms)))
    return out
