"""The commit gate: the one place that decides whether a write may commit, and makes the one commit.

Every snowberg writer passes here: the single-task load (``load.extract``),
the mapped slices (``load.mapped``), the push-down unload (``load.unload``),
stream apply (``streams.apply``), the CHANGES backfill (``streams.changes``)
and the lake → Snowflake sync (``sync.horizon``). Each step is written once,
so the exactly-once rules cannot drift apart between writers.

Watermark writers call ``admit`` before they read a row; its steps, in order:

1. **already committed?** — a retry whose commit already landed appends nothing;
2. **carry the watermark** — a backfill records the table's watermark as it is
   now (an incremental run may have committed since the backfill was planned);
3. **base check** — another run moved the watermark since the plan: refuse;
4. **dry run** — report what would be loaded, write nothing;
5. **nothing new** — an empty window costs the plan query only.

Every writer then ends in ``commit``: the rows the new data replaces are
removed (``remove_replaced``), the new data files are added, and the writer's
state goes into the summary of the commit's last snapshot — and, as an
expiry-proof copy, into the table properties — all in ONE Iceberg commit
(the removal's own snapshots are marked partial: see ``commit``). The DAG
id goes with the run id into every commit. Like pyiceberg's own
``Transaction._stage`` (where each update's requirements, e.g.
``AssertRefSnapshotId``, are validated in one place), the requirement that
the table is still at the snapshot the write was built on is asserted by the
commit itself: the snapshot producer adds ``AssertRefSnapshotId`` for main,
and the gate switches off pyiceberg's rebase-and-retry
(``commit.retry.num-retries=0``) on every table, including tables snowberg
did not create, so a conflict fails the run instead of re-applying the
write on a head that may already hold it.

Streams and the sync carry their own state keys (stream batch id, synced
source snapshot): they hand ``commit`` their state properties, and name an
earlier commit of the same work through ``state.find_commit``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from snowberg.config.table_config import TableConfig, WriteMode
from snowberg.core import faults
from snowberg.core.cursor import CursorKind, format_cursor_value, parse_cursor_value
from snowberg.core.results import Status
from snowberg.core.window import Window
from snowberg.iceberg import state
from snowberg.iceberg.identity import IDENTITY_KEYS, recorded_identity
from snowberg.iceberg.keys import KeyCollector, key_filter

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

log = logging.getLogger(__name__)

# Modes of a watermark window (the planner's names; repeated here so the gate does not import the planner).
INCREMENTAL, BACKFILL, FULL_REFRESH = "incremental", "backfill", "full_refresh"

# pyiceberg 0.12 answers a conflicting commit by rebasing the append onto the
# new head and trying again (default: 4 times). For snowberg that would let
# two runs commit the same window, so every commit runs with 0 retries: a
# conflict fails the run, and Airflow's retry re-plans from the table's state.
NO_REBASE = {"commit.retry.num-retries": "0"}


# ---------------------------------------------------------------------------
# The gate for watermark writers


def merges(cfg: TableConfig, w: Window) -> bool:
    """Does this write replace earlier versions of its keys (a merge table, and not a full refresh)?"""
    return cfg.effective_write_mode is WriteMode.MERGE and w.mode != FULL_REFRESH


def carry_watermark(table: Table | None, w: Window) -> Window:
    """A backfill records the table's watermark as it is now, not as it was at plan time.

    Backfill runs do not count toward a DAG's max_active_runs, so an
    incremental run may commit between a backfill's plan and its load. The
    backfill must then neither fail nor put the old watermark back: it carries
    the current one. Its commit still asserts the snapshot read here.
    """
    st = state.read_state(table)
    now_wm = st.watermark if st else None
    if now_wm == w.base_watermark:
        return w
    return replace(w, base_watermark=now_wm, new_watermark=now_wm, base_snapshot_id=st.snapshot_id if st else None)


def check_base(table: Table | None, w: Window) -> None:
    """Refuse when another run moved the watermark since this window was planned.

    A backfill commit does not move the watermark, so an incremental run
    planned before it still loads (on top of it); two incremental runs of
    the same window cannot both pass this check and the commit assertion.
    """
    st = state.read_state(table)
    now_wm = st.watermark if st else None
    if now_wm != w.base_watermark:
        raise state.ConcurrentCommitError(
            f"the table's watermark moved from {w.base_watermark!r} to {now_wm!r} since run {w.run_id} was planned "
            f"(committed by run {st.run_id if st else None!r}); re-plan the run"
        )


@dataclass(frozen=True, kw_only=True)
class Admission:
    """The gate's answer before any row is read: go on with ``window``, or stop with ``status``."""

    window: Window
    status: Status | None = None
    snapshot_id: int | None = None  # the earlier commit, when already committed

    @property
    def go(self) -> bool:
        return self.status is None


def window_identity(w: Window) -> dict[str, str]:
    """The summary keys that name a watermark run's commit (a retry of the run finds it by them)."""
    return {state.RUN_ID: w.run_id, state.MODE: w.mode, state.WINDOW_HIGH: w.high or ""}


def nothing_new(w: Window) -> bool:
    """Did the plan find nothing to read (an idle run)? Then the gate stops the load before any query.

    The plan task asks the same question to end an idle run after itself (no load task starts).
    """
    return w.rows_in_window == 0 and w.mode == INCREMENTAL and not w.dry_run


def admit(table: Table | None, w: Window) -> Admission:
    """Already committed? → carry the watermark → base check → dry run → nothing new (see the module doc)."""
    done = state.find_commit(table, window_identity(w))
    if done is not None:
        log.info("run %s already committed this window in snapshot %s: writing nothing", w.run_id, done.snapshot_id)
        return Admission(window=w, status=Status.ALREADY_COMMITTED, snapshot_id=done.snapshot_id)
    if w.mode == BACKFILL:
        w = carry_watermark(table, w)
    check_base(table, w)
    if w.dry_run:
        log.info("dry run: would load %s rows of run %s", w.rows_in_window, w.run_id)
        return Admission(window=w, status=Status.DRY_RUN)
    if nothing_new(w):
        log.info("nothing new in the window of run %s: no query, no data file, no commit", w.run_id)
        return Admission(window=w, status=Status.NOTHING_NEW)
    return Admission(window=w)


# ---------------------------------------------------------------------------
# Lookback and NULL cursors: re-read rows are not new rows


def _cursor(kind: str, text: Any) -> Any:
    return parse_cursor_value(kind, format_cursor_value(kind, text))


def rereads_only(w: Window) -> bool:
    """Does the window only re-read rows (the lookback range, NULL cursors), with nothing beyond the watermark?

    The plan counts the whole window, lookback and NULL-cursor rows
    included, so a non-zero count does not mean anything changed. When the
    largest cursor the plan saw is at or below the previous watermark, the
    writer buffers the rows (the lookback is short) and asks ``holds_rows``
    before writing anything.
    """
    if w.mode != INCREMENTAL or w.base_watermark is None or w.cursor_kind is None or w.low is None:
        return False
    kind = w.cursor_kind
    lookback = _cursor(kind, w.low) < _cursor(kind, w.base_watermark)
    if not (lookback or w.include_nulls):
        return False  # the plan's count is only rows beyond the watermark
    seen_max = w.extra.get("max_cursor")
    return seen_max is None or _cursor(kind, seen_max) <= _cursor(kind, w.base_watermark)


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def holds_rows(table: Table | None, w: Window, rows: pa.Table, *, keys: Sequence[str] = ()) -> bool:
    """Does the lake already hold every one of ``rows``, value for value (a re-read, not a change)?

    The lake's candidates are read by the rows' primary keys when the table
    has them (exact, and bounded by the rows re-read), else by the lookback
    range of the cursor plus its NULL-cursor rows.
    """
    if rows.num_rows == 0:
        return True
    if table is None or table.current_snapshot() is None or w.cursor_column is None or w.cursor_kind is None:
        return False
    from pyiceberg import expressions as ex

    e: Any = ex
    if keys:
        row_filter = key_filter(rows.select(list(keys)))
    else:
        c = w.cursor_column.lower()
        low = e.GreaterThanOrEqual(c, _iceberg_literal(w.cursor_kind, w.low))
        row_filter = e.Or(e.IsNull(c), low) if w.include_nulls else low
    lake = table.scan(row_filter=row_filter, selected_fields=tuple(rows.column_names)).to_arrow()
    have = {tuple(_hashable(v) for v in r.values()) for r in lake.to_pylist()}
    return all(tuple(_hashable(v) for v in r.values()) in have for r in rows.to_pylist())


# ---------------------------------------------------------------------------
# What the commit records


def window_state(w: Window) -> dict[str, str]:
    """A watermark run's state: what the next run plans from (also copied into the table properties).

    A cursor-less table's full refresh also records the source version its plan read
    (``state.SOURCE_VERSION``), read before the rows: a change after it makes the next run reload.
    """
    props = {
        state.WATERMARK: w.new_watermark or "",
        state.CURSOR_KIND: w.cursor_kind or "",
        state.RUN_ID: w.run_id,
        state.MODE: w.mode,
        state.WINDOW_LOW: w.low or "",
        state.WINDOW_HIGH: w.high or "",
        state.VERSION: "1",
    }
    version = w.extra.get(state.SOURCE_VERSION)
    if version:
        props[state.SOURCE_VERSION] = str(version)
    return props


def run_counts(name: str, w: Window, *, extracted: int | None, committed: int) -> dict[str, str]:
    """The run's three counts as summary properties, logged; a difference the window explains is logged, not failed.

    The plan counts the window at plan time; rows updated out of the window
    before the extract, or late rows arriving into it, change what the
    extract returns. That is the window doing its job, not an error.
    """
    planned = w.rows_in_window
    log.info(
        "%s: rows planned %s, extracted %s, committed %s",
        name,
        "?" if planned is None else f"{planned:,}",
        "?" if extracted is None else f"{extracted:,}",
        f"{committed:,}",
    )
    if planned is not None and extracted is not None and planned != extracted:
        log.info(
            "%s: the extract returned %+d rows against the plan's count: rows changed in the source between plan "
            "and extract (updated out of the window, or late rows into it); the next run reads what moved",
            name,
            extracted - planned,
        )
    props = {state.ROWS: str(committed)}
    if planned is not None:
        props[state.ROWS_PLANNED] = str(planned)
    if extracted is not None:
        props[state.ROWS_EXTRACTED] = str(extracted)
    allowed = w.extra.get(state.WINDOW_POLICIES_ALLOWED)
    if allowed:
        props[state.POLICIES_ALLOWED] = str(allowed)
    return props


# ---------------------------------------------------------------------------
# The one commit


def _iceberg_literal(kind: str | None, text: str | None) -> Any:
    if kind is None or text is None:
        raise ValueError("a cursor range without a cursor")
    return CursorKind(kind).iceberg_literal(text)


@dataclass(frozen=True, kw_only=True)
class Replacement:
    """What a commit's new rows replace.

    ``rows``: a row filter removed copy-on-write (the data files holding such
    rows are rewritten without them): a full refresh, a backfill's cursor
    range, or keys under ``merge_strategy: copy_on_write``.
    ``keys``: primary-key values whose earlier versions are hidden by position
    delete files (``merge_strategy: merge_on_read``, see ``iceberg.merge``):
    the cost follows the change, not the table. Never equality deletes, which
    Snowflake cannot read.
    ``on_key_rows``: called with the number of live rows ``keys`` matched,
    before the commit; it may raise to refuse the commit (a keyed sync checks
    that they are the rows its change removed, ``sync.keys.check_removed``).
    ``files``: data files removed whole, because the commit adds their live
    rows again in new files (the column backfill rewrites them with a value
    filled in, ``load.column_backfill``); their position delete files go too.
    """

    rows: Any = None
    keys: pa.Table | None = None
    on_key_rows: Callable[[int], None] | None = None
    files: Sequence[Any] = ()


def replaced_by_window(cfg: TableConfig, w: Window, keys: KeyCollector | None, has_rows: bool) -> Replacement | None:
    """What a watermark run's new rows replace (None: nothing).

    full refresh: every row; backfill: the window's cursor range; merge: the
    loaded keys (checked unique first), by the table's ``merge_strategy``. A
    first load replaces nothing, and builds no key filter (it is O(rows)
    Python objects).
    """
    from pyiceberg import expressions

    from snowberg.config.table_config import MergeStrategy

    ex: Any = expressions
    if w.mode == FULL_REFRESH:
        return Replacement(rows=ex.AlwaysTrue())
    expr: Any = None
    if w.mode == BACKFILL and w.cursor_column:
        c = w.cursor_column.lower()
        upper = ex.LessThanOrEqual if w.high_inclusive else ex.LessThan  # inclusive when clamped to the watermark
        expr = ex.And(
            ex.GreaterThanOrEqual(c, _iceberg_literal(w.cursor_kind, w.low)),
            upper(c, _iceberg_literal(w.cursor_kind, w.high)),
        )
    key_table = None
    if keys is not None:
        kt = keys.check_unique()
        if kt.num_rows and has_rows:
            if cfg.merge_strategy is MergeStrategy.MERGE_ON_READ:
                key_table = kt
            else:
                kexpr = key_filter(kt)
                expr = kexpr if expr is None else ex.Or(expr, kexpr)
    if expr is None and key_table is None:
        return None
    return Replacement(rows=expr, keys=key_table)


def remove_replaced(tx: Any, replaced: Replacement, props: Mapping[str, str], *, io: Any) -> None:
    """Remove the rows the new data replaces, in the commit's transaction: the one place a commit removes rows.

    Rows matched by a filter are removed copy-on-write, and the position
    delete files of the data files that removal dropped or rewrote go with
    them (``iceberg.deletes``: left behind they hide no row but make the row
    count wrong and block compaction); replaced keys get position delete
    files (``iceberg.merge``). Never equality deletes.
    ``io``: the FileIO of the table ``tx`` was opened on (``table.io``).
    """
    if replaced.rows is not None:
        from snowberg.iceberg.deletes import drop_dangling_deletes

        tx.delete(delete_filter=replaced.rows, snapshot_properties=dict(props))
        drop_dangling_deletes(tx, props, io=io)
    if replaced.files:
        from snowberg.iceberg.deletes import drop_dangling_deletes

        with tx.update_snapshot(snapshot_properties=dict(props)).overwrite() as ow:
            for f in replaced.files:
                ow.delete_data_file(f)
        drop_dangling_deletes(tx, props, io=io)
    if replaced.keys is not None and replaced.keys.num_rows:
        from snowberg.iceberg.merge import write_position_deletes

        matched = write_position_deletes(tx, replaced.keys, dict(props), io=io)
        if replaced.on_key_rows is not None:
            replaced.on_key_rows(matched)


def rows_deleted(tx: Any, base_snapshot_id: int) -> dict[str, str]:
    """``snowberg.rows-deleted``: the rows the staged removals took out (from
    their own summaries), for the volume checks.

    Copy-on-write rewrites whole files (a delete snapshot removes their
    records and re-adds the survivors); merge-on-read adds position deletes.
    Both may be staged in one transaction, so every staged snapshot counts.
    """
    meta = tx.table_metadata
    n = 0
    snap = meta.current_snapshot()
    while snap is not None and snap.snapshot_id != base_snapshot_id:
        p = snap.summary.additional_properties if snap.summary is not None else {}
        n += int(p.get("deleted-records") or 0) - int(p.get("added-records") or 0)
        n += int(p.get("added-position-deletes") or 0)
        snap = meta.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return {state.ROWS_DELETED: str(n)} if n > 0 else {}


def refuse_rebase(table: Table) -> None:
    """Make this process's commit of ``table`` fail on conflict instead of rebasing.

    pyiceberg reads ``commit.retry.num-retries`` from the loaded table's
    metadata when a transaction commits (not from the transaction's own
    updates), so the property set in the commit would only protect the next
    run. This in-memory override protects this one; it is not a table update.
    """
    props = dict(table.metadata.properties)
    if props.get("commit.retry.num-retries") != "0":
        props.update(NO_REBASE)
        table.metadata = table.metadata.model_copy(update={"properties": props})


def referenced_files(table: Table, paths: Sequence[str]) -> set[str]:
    """Which of ``paths`` the table's current snapshot already references (pyiceberg's add_files check)."""
    snap = table.current_snapshot()
    if snap is None or not paths:
        return set()
    wanted = set(paths)
    found: set[str] = set()
    for manifest in snap.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.data_file.file_path in wanted:
                found.add(entry.data_file.file_path)
    return found


class MissingFileError(RuntimeError):
    """A file the commit would add is gone (an orphan sweep, a person); nothing was committed."""


def check_added_files_exist(tx: Any, io: Any, base_snapshot_id: int | None) -> None:
    """Refuse to commit a reference to a file that no longer exists.

    Every file the transaction's staged snapshots add — their manifest lists,
    new manifests, data and delete files — is looked up through the table's
    FileIO right before the commit. Files written before their commit (mapped
    slices, days earlier; a slow load) are unreferenced until it lands, so an
    orphan sweep with a short ``orphan_age`` (or a person) can remove them;
    committing anyway would make every later read of the table fail.
    """
    from pyiceberg.manifest import ManifestEntryStatus
    from pyiceberg.utils.concurrent import ExecutorFactory

    meta = tx.table_metadata
    paths: list[str] = []
    snap = meta.current_snapshot()
    try:
        while snap is not None and snap.snapshot_id != base_snapshot_id:
            paths.append(snap.manifest_list)
            for mf in snap.manifests(io):
                if mf.added_snapshot_id != snap.snapshot_id:
                    continue  # carried over from the base: in the table already
                paths.append(mf.manifest_path)
                paths.extend(
                    e.data_file.file_path
                    for e in mf.fetch_manifest_entry(io, discard_deleted=True)
                    if e.status == ManifestEntryStatus.ADDED
                )
            snap = meta.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    except FileNotFoundError as e:
        paths.append(str(e.filename or e))
        missing = [str(e.filename or e)]
    else:
        found = list(ExecutorFactory.get_or_create().map(lambda p: io.new_input(p).exists(), paths))
        missing = [p for p, ok in zip(paths, found, strict=True) if not ok]
    if missing:
        raise MissingFileError(
            f"{len(missing)} of the files this commit would add no longer exist (e.g. {missing[:3]}): removed before "
            "the commit (an orphan sweep with a short orphan_age, or by hand). Nothing was committed; run the DAG "
            "run again from its first task so they are written again."
        )


def commit(
    table: Table,
    tx: Any,
    *,
    state_props: Mapping[str, str],
    summary: Mapping[str, str] | None = None,
    replaced: Replacement | Any = None,
    properties: Mapping[str, str] | None = None,
    data_files: Sequence[Any] = (),
    file_paths: Sequence[str] = (),
    staged: bool = False,
    state_in_properties: bool = True,
    crash_points: tuple[str, str] | None = ("before_commit", "after_commit"),
    dag_id: str,
) -> Snapshot:
    """The one commit of a write: replaced rows out, new files in, the state with them. Returns the snapshot.

    ``state_props``: the writer's state (what its next run reads back); goes
    into the snapshot summary and, unless ``state_in_properties`` is False,
    into ``snowberg.state.*`` table properties in the same commit, where no
    snapshot expiry can remove it. ``summary``: per-commit facts (counts).
    ``data_files``: files written for ``tx`` (``iceberg.write``);
    ``file_paths``: Parquet files already in the lake (push-down unload),
    registered without rewriting. ``staged``: the data files were written by
    other tasks (mapped slices), not for ``tx`` just now. Staged and
    registered files already referenced by the table are refused (a file is
    never added twice). ``replaced``: a ``Replacement`` (or a plain row filter,
    removed copy-on-write). ``properties``: further table properties set in the
    same commit (what the table was loaded with, ``iceberg.identity``).
    ``crash_points``: the named faults around the commit (None: none).
    ``dag_id``: the Airflow DAG whose run commits ("" for a call outside
    Airflow: nothing recorded). It is written wherever the run id is: run ids
    (``scheduled__<date>``) repeat across DAGs, and ``rollback --before-run``
    matches both. When ``summary`` names the run (a commit that carries
    another run's state forward, e.g. propagated deletes), the carried state
    keeps its own DAG id and the summary gets this one.

    Several snapshots, one commit: removals stage snapshots of their own
    before the one that adds the files. Only that last snapshot carries the
    state, ``snowberg.commit-id`` and the identity set in ``properties``; the
    earlier ones carry ``snowberg.partial-of`` (the commit id) and who wrote
    them (``state.PART_KEYS``), so none of them can pass for a complete commit
    (``state.commits``). A commit that only removes rows ends with an append
    snapshot of no files that carries the state.

    ``table`` must be the table ``tx`` was opened on.
    """
    commit_id = uuid.uuid4().hex
    own = dict(state_props)
    if dag_id and not (summary and state.RUN_ID in summary):
        own[state.DAG_ID] = dag_id
    ident = recorded_identity(properties or {})
    props = {**own, **(summary or {}), **ident, state.COMMIT_ID: commit_id}
    if dag_id:
        props[state.DAG_ID] = dag_id
    part = {k: props[k] for k in state.PART_KEYS if k in props}
    part[state.PARTIAL_OF] = commit_id
    paths = [f.file_path for f in data_files] + list(file_paths)
    if len(paths) != len(set(paths)):
        raise RuntimeError("the same data file is listed twice; refusing to commit")
    already = referenced_files(table, paths) if staged or file_paths else set()
    if already:
        raise RuntimeError(
            f"{len(already)} data file(s) are already in the table (e.g. {sorted(already)[:2]}); "
            "refusing to add them again"
        )
    refuse_rebase(table)
    table_props = {**NO_REBASE, **(properties or {})}
    if state_in_properties:
        # The identity has its own table properties (``iceberg.identity``); the copy holds the state only.
        table_props.update({state.state_property(k): v for k, v in own.items() if k not in IDENTITY_KEYS})
    tx.set_properties(table_props)
    base = tx.table_metadata.current_snapshot()
    if replaced is not None and base is not None:
        removal = replaced if isinstance(replaced, Replacement) else Replacement(rows=replaced)
        remove_replaced(tx, removal, part, io=table.io)
        props = {**props, **rows_deleted(tx, base.snapshot_id)}
    if file_paths:
        tx.add_files(file_paths=list(file_paths), snapshot_properties=props, check_duplicate_files=True)
    else:
        # Also when only rows were removed: the last snapshot of the commit is the one with the state.
        with tx.update_snapshot(snapshot_properties=props).fast_append() as fa:
            for f in data_files:
                fa.append_data_file(f)
    if crash_points:
        faults.crash_point(crash_points[0])
    check_added_files_exist(tx, table.io, base.snapshot_id if base is not None else None)
    committed = tx.commit_transaction()
    if crash_points:
        faults.crash_point(crash_points[1])
    snap = committed.current_snapshot()
    if snap is None:  # pragma: no cover - a commit always leaves a current snapshot
        raise RuntimeError("the commit left no current snapshot")
    return snap


__all__ = [
    "NO_REBASE",
    "Admission",
    "MissingFileError",
    "admit",
    "check_added_files_exist",
    "carry_watermark",
    "check_base",
    "commit",
    "holds_rows",
    "merges",
    "nothing_new",
    "referenced_files",
    "refuse_rebase",
    "Replacement",
    "remove_replaced",
    "replaced_by_window",
    "rereads_only",
    "rows_deleted",
    "run_counts",
    "window_identity",
    "window_state",
]
