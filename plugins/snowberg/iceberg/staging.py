"""Files written before their commit: where they are staged, the manifests that name them, listing them.

Mapped slices (``load.mapped``) write their data files in one task and commit
them in another, possibly days later (a failed slice is cleared and retried).
Until that commit nothing in the table's metadata references the files, so
the orphan sweep (``iceberg.maintenance``) would take them for leftovers. The
staging layout is what lets it tell them apart:

* each slice writes a **staging manifest** (Iceberg's own manifest format,
  never referenced by a snapshot) listing its data files, under the run's
  staging folder ``<table>/metadata/snowberg-staging/<run>/``;
* the sweep never deletes anything under ``snowberg-staging/``, nor any file
  a staging manifest names;
* the commit removes the run's staging folder once its files are in the table.

Every byte goes through the table's own FileIO (``table.io``), including the
listing (pyiceberg's FileIO has no list call; ``list_files`` asks the file
system behind ``table.io`` instead of building a second one from properties).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

STAGING_DIR = "snowberg-staging"
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
    """A file under a location: its full path (as ``table.io`` opens it) and its modification time (None: unknown)."""

    path: str
    modified: datetime | None


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
        yield ListedFile(path=full, modified=_aware(info.mtime))


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
        yield ListedFile(path=full, modified=modified)


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
