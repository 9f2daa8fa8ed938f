"""Probe the lake storage with the lake writer's own FileIO: write, read, list, delete.

The probe uses exactly the FileIO the writer uses — a table's ``table.io``
(which carries vended credentials from a REST catalog) or, before a table
exists, ``pyiceberg.io.load_file_io(catalog.properties, location)`` (the
catalog's own properties: the endpoint and keys of its Airflow connection,
never the environment's) — so a pass here means the writer's credentials,
endpoint and region work against that location, and a failure names the step.

The result has the same shape as Snowflake's verification: each step is
``PASSED``, ``SKIPPED`` or ``FAILED`` with the error text and a likely cause.
"""

from __future__ import annotations

import logging
import posixpath
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from snowberg.checks.external_volume import FAILED, PASSED, SKIPPED, Step

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

log = logging.getLogger(__name__)

PROBE_DIR = "_snowberg_probe"


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    location: str  # the folder probed
    probe_path: str  # the object written (and deleted)
    file_io: str
    steps: list[Step]
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(s.status != FAILED for s in self.steps)

    @property
    def failed(self) -> list[Step]:
        return [s for s in self.steps if s.status == FAILED]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        return d


def _cause(step: str, exc: BaseException) -> str | None:
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    if "nosuchbucket" in low or "bucket does not exist" in low or "bucket not found" in low:
        return "the bucket does not exist (check the warehouse / table location)"
    if any(
        k in low
        for k in (
            "invalidaccesskeyid",
            "access key id you provided does not exist",
            "signaturedoesnotmatch",
            "signature we calculated does not match",
            "security token",
            "expiredtoken",
            "invalidtoken",
        )
    ):
        return "the credentials are invalid or expired (s3.access-key-id / s3.secret-access-key / s3.session-token)"
    if "connection refused" in low or "could not connect" in low or "curlcode: 7" in low or "timed out" in low:
        return "the storage endpoint is unreachable (s3.endpoint, network, proxy)"
    if (
        "accessdenied" in low
        or "access denied" in low
        or "forbidden" in low
        or "aws error [code 15]" in low
        or isinstance(exc, PermissionError)
    ):
        action = {
            "write": "s3:PutObject",
            "read": "s3:GetObject",
            "list": "s3:ListBucket",
            "delete": "s3:DeleteObject",
        }[step]
        return f"the writer's credentials may not {step} here (for S3: {action} on this prefix)"
    if "region" in low and ("redirect" in low or "wrong" in low or "301" in low):
        return "the bucket is in another region than s3.region says"
    if isinstance(exc, FileNotFoundError) or "no such file" in low:
        return "the location does not exist (local folder missing, or a path typo)"
    return None


def _fail(step: str, label: str, exc: BaseException) -> Step:
    msg = f"{type(exc).__name__}: {exc}".strip()
    return Step(key=step, label=label, status=FAILED, message=msg[:2000], cause=_cause(label, exc))


def _list(io: FileIO, folder: str) -> list[str]:
    """Names directly under ``folder``, through the FileIO's own filesystem."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    if isinstance(io, PyArrowFileIO):
        from pyarrow.fs import FileSelector

        scheme, netloc, path = io.parse_location(folder, io.properties)
        fs = io.fs_by_scheme(scheme, netloc)
        infos = fs.get_file_info(FileSelector(path.rstrip("/"), recursive=False, allow_not_found=False))
        return [posixpath.basename(i.path) for i in infos]
    try:
        from pyiceberg.io.fsspec import FsspecFileIO
    except ImportError:  # pragma: no cover - fsspec is optional
        FsspecFileIO = None  # type: ignore[assignment,misc]  # noqa: N806
    if FsspecFileIO is not None and isinstance(io, FsspecFileIO):
        from urllib.parse import urlparse

        fs = io.get_fs(urlparse(folder).scheme or "file")
        return [posixpath.basename(str(p).rstrip("/")) for p in fs.ls(folder, detail=False)]
    raise NotImplementedError(f"listing is not supported for {type(io).__name__}")


def probe_location(io: FileIO, location: str, *, payload: bytes | None = None) -> ProbeResult:
    """Write, read back, list and delete one small object under ``location/_snowberg_probe/``.

    A failed write skips the rest; a failed read or list still deletes the
    object so the probe leaves nothing behind.
    """
    started = time.monotonic()
    base = location.rstrip("/")
    folder = f"{base}/{PROBE_DIR}"
    name = f"probe-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}.txt"
    path = f"{folder}/{name}"
    body = payload if payload is not None else f"snowberg storage probe {name}\n".encode()
    steps: list[Step] = []

    # write
    try:
        out = io.new_output(path)
        with out.create(overwrite=True) as f:
            f.write(body)
        steps.append(Step(key="write", label="write", status=PASSED))
    except Exception as exc:  # noqa: BLE001 - every failure is a result
        steps.append(_fail("write", "write", exc))
        for s in ("read", "list", "delete"):
            steps.append(Step(key=s, label=s, status=SKIPPED, message="skipped: the write failed"))
        return ProbeResult(
            location=base, probe_path=path, file_io=type(io).__name__, steps=steps, seconds=time.monotonic() - started
        )

    # read
    try:
        with io.new_input(path).open() as f:
            got = f.read()
        if got != body:
            raise ValueError(f"read {len(got)} bytes that differ from the {len(body)} bytes written")
        steps.append(Step(key="read", label="read", status=PASSED))
    except Exception as exc:  # noqa: BLE001
        steps.append(_fail("read", "read", exc))

    # list
    try:
        names = _list(io, folder)
        if name not in names:
            raise FileNotFoundError(f"the probe object is not listed under {folder} ({len(names)} entries seen)")
        steps.append(Step(key="list", label="list", status=PASSED))
    except NotImplementedError as exc:
        steps.append(Step(key="list", label="list", status=SKIPPED, message=str(exc)))
    except Exception as exc:  # noqa: BLE001
        steps.append(_fail("list", "list", exc))

    # delete (and make sure it is gone)
    try:
        io.delete(path)
        if io.new_input(path).exists():
            raise RuntimeError("the probe object still exists after delete")
        steps.append(Step(key="delete", label="delete", status=PASSED))
    except Exception as exc:  # noqa: BLE001
        steps.append(_fail("delete", "delete", exc))

    return ProbeResult(
        location=base, probe_path=path, file_io=type(io).__name__, steps=steps, seconds=time.monotonic() - started
    )


def writer_file_io(catalog: Any, *, table: Any | None = None, location: str | None = None) -> tuple[FileIO, str]:
    """The FileIO and location the lake writer uses.

    * a table: ``table.io`` and ``table.location()`` — exactly what the
      writer uses (REST catalogs vend per-table credentials, so this is the
      only faithful choice there);
    * else a FileIO built from the catalog's own properties (what the
      catalog got from its Airflow connection: S3 endpoint, keys, region;
      never the environment's) for ``location``, or for the catalog's
      ``warehouse``. This is the one place snowberg builds a FileIO itself:
      to test the writer's credentials where no table exists yet.

    A REST catalog's ``warehouse`` is a name, not a storage location: without
    a table or a location there is nothing faithful to probe, and the probe
    says so instead of writing to a local folder of that name.
    """
    if table is not None:
        return table.io, location or table.location()
    from pyiceberg.io import load_file_io

    props = dict(getattr(catalog, "properties", {}) or {})
    where = location or props.get("warehouse")
    if not where:
        raise ValueError("no location to probe: give a table or a location, or set the catalog's warehouse")
    if "://" not in where and not where.startswith("/"):
        raise ValueError(
            f"the catalog's warehouse {where!r} is not a storage location (a REST catalog names a warehouse and "
            "vends storage credentials per table): give a table, whose FileIO the writer uses, or a location"
        )
    return load_file_io(props, where), where


def render(result: ProbeResult) -> str:
    lines = [
        f"lake storage probe {result.location}: {'OK' if result.ok else 'FAILED'} "
        f"({result.file_io}, {result.seconds:.2f}s)",
        f"  probe object: {result.probe_path}",
    ]
    for s in result.steps:
        text = s.status if s.status != FAILED else f"FAILED: {s.message}"
        lines.append(f"  {s.label.ljust(6)}  {text}")
        if s.cause:
            lines.append(f"          likely cause: {s.cause}")
    return "\n".join(lines)
