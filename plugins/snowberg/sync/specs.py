"""The config file kinds: syncs.yaml's ``SYNCS`` beside its models, and ``SPECS``, every kind snowberg reads.

``snowberg validate`` (``config.validate``) and ``snowberg docs`` (``config.reference``) take
their file kinds from here. ``SYNCS`` lives beside the sync models because the config layer
cannot import them; the checks themselves are ``config.validate``'s, given the sync model, its
DAG id and its clash rules.
"""

from __future__ import annotations

from typing import Any

from snowberg.config.validate import TABLES, FileSpec, LakeUse
from snowberg.sync.config import IcebergTarget, SyncConfig


def _sync_conflicts(entries: list[tuple[int, Any]]) -> list[tuple[int, str, str]]:
    """Two syncs of one name, or two syncs writing one target (``SyncConfig.target_key``, as ``parse_syncs``)."""
    out: list[tuple[int, str, str]] = []
    names: dict[str, int] = {}
    targets: dict[str, str] = {}
    for i, s in entries:
        if s.name in names:
            out.append((i, "name", f"the name {s.name!r} is also the name of entry #{names[s.name] + 1}"))
        else:
            names[s.name] = i
        if s.target_key in targets:
            out.append((i, "target.table", f"sync {targets[s.target_key]!r} already writes {s.target.table}"))
        else:
            targets[s.target_key] = s.name
    return out


def _sync_writes(s: SyncConfig) -> list[LakeUse]:
    return [("target.table", s.target.catalog, s.target.table)] if isinstance(s.target, IcebergTarget) else []


SYNCS = FileSpec(
    file="syncs.yaml",
    schema_file="schemas/syncs.schema.json",
    list_key="syncs",
    entity="sync",
    model=SyncConfig,
    dag_ids=lambda s: [s.dag_id],
    conflicts=_sync_conflicts,
    hidden_locs=("iceberg", "native"),
    lake_writes=_sync_writes,
    lake_reads=lambda s: [("source.table", s.source.catalog, s.source.table)],
)

SPECS = (TABLES, SYNCS)
"""Every kind of config file: what ``snowberg validate`` reads and ``snowberg docs`` documents."""
