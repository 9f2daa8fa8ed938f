"""Targeted mutation testing of the exactly-once core and its neighbours: would a regression here fail a test?

Each mutant is one small, deliberate bug — a bound made exclusive, a guard
removed, a comparison that drops a term — in the modules that decide what is
loaded once (``--set core``: the commit gate, the watermark state, the planner,
cursor values, the merge, rollback and the volume check's hash diff) and in
those added around them later (``--set last-round``: state adoption, the
verification scope, the source version, the proof of a current lake, idle
runs, staging and the orphan sweep, keyed sync changes, live rows). The script applies each
mutant to a temporary copy of the tree (the working tree is never touched),
runs the tests mapped to it with a timeout, and reports whether a test failed
(the mutant is *killed*) or every test passed (it *survived*: nothing would
catch that bug). docs/mutation-testing.md has the last run's kill rate and
why each remaining survivor is harmless.

Why a list of our own instead of mutmut or cosmic-ray over the whole files:
those generate thousands of mutants of these modules (every operator, every
constant, every log message) and need the whole mapped test set per mutant,
hours on a shared 2-core machine; the mutants that matter are the ones that
would lose or duplicate rows, and each is cheap to name with the tests that
should catch it. A mutant is ``(file, exact old text, new text, tests)``: the
old text must occur exactly once in its file (``--check``, and a unit test,
tests/scripts/test_mutants.py, keep the list from rotting when the code moves).

    nice -n 10 python scripts/mutants.py                 # every mutant (~30-60 min on 2 busy cores)
    nice -n 10 python scripts/mutants.py --set last-round --jobs 2   # the last round's modules only
    nice -n 10 python scripts/mutants.py --only merge-prune-upper-eq,state-find-commit-property-guard
    python scripts/mutants.py --check                    # the list is well-formed (no test run)
    python scripts/mutants.py --list                     # id, file and tests of every mutant

Exit status: 0 when the kill rate is at least ``--fail-under`` (default 90 %)
and every survivor is a known one (``harmless`` says why); 1 otherwise; 2 when
the unmutated tests already fail (a baseline that fails kills nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "plugins" / "snowberg"
# What a temporary copy needs to run the package's tests (the venv is shared: PYTHONPATH points at the copy).
COPIED = ("plugins", "tests", "dags", "include", "docs", "schemas", "scripts", "pyproject.toml", "README.md")
# The exactly-once core (issue 20, item 12): mutants live only here.
CORE = (
    "iceberg/gate.py",
    "iceberg/state.py",
    "load/plan.py",
    "core/cursor.py",
    "iceberg/merge.py",
    "iceberg/rollback.py",
    "checks/hashdiff.py",
)
# The modules added or reworked in the round after: state adoption (iceberg/state.py, already above),
# the verification scope, the source version (and its use in load/plan.py, above), the proof of a current lake,
# idle runs, staging, the orphan sweep, keyed sync changes, live rows.
LAST_ROUND = (
    "checks/volume_scope.py",
    "snowflake/source_version.py",
    "iceberg/current.py",
    "airflow/operators/idle.py",
    "iceberg/staging.py",
    "iceberg/maintenance.py",
    "sync/snapshots.py",
    "iceberg/deletes.py",
)
MODULES = CORE + LAST_ROUND

# The project's venv (scripts/bootstrap.sh) runs the tests, whichever Python started this script.
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable

T_PLAN = "tests/snowberg/load/test_plan.py"
T_EXTRACT = "tests/snowberg/load/test_extract.py"
T_MAPPED = "tests/snowberg/load/test_mapped.py"
T_STATE = "tests/snowberg/iceberg/test_state.py"
T_GATE = "tests/snowberg/iceberg/test_gate.py"
T_MERGE = "tests/snowberg/iceberg/test_merge.py"
T_ROLLBACK = "tests/snowberg/iceberg/test_rollback.py"
T_CURSOR = "tests/snowberg/core/test_cursor.py"
T_HASHDIFF = "tests/snowberg/checks/test_hashdiff.py"
T_VOLUME = "tests/snowberg/checks/test_volume.py"


@dataclass(frozen=True, kw_only=True)
class Mutant:
    """One deliberate bug: ``old`` (exactly once in ``file``) becomes ``new``; ``tests`` should fail."""

    id: str
    file: str  # relative to plugins/snowberg
    old: str
    new: str
    tests: tuple[str, ...]  # pytest node ids or files, relative to the repository
    breaks: str  # what the bug would do to a user's data
    harmless: str = ""  # for a known survivor: why no test can or needs to catch it (docs/mutation-testing.md)
    area: str = ""  # the module the per-module count puts it under (default: its file)

    @property
    def module(self) -> str:
        return self.area or self.file


CORE_MUTANTS: tuple[Mutant, ...] = (
    # ------------------------------------------------------------------ core/cursor.py
    Mutant(
        id="cursor-ntz-aware-not-converted",
        file="core/cursor.py",
        old="                value = value.astimezone(UTC).replace(tzinfo=None)\n            return value.isoformat(",
        new="                value = value.replace(tzinfo=None)\n            return value.isoformat(",
        tests=(T_CURSOR,),
        breaks="an aware value for an NTZ cursor keeps its wall time, not UTC: the watermark is off by the offset",
        harmless=(
            "no caller passes an aware value for an NTZ cursor: Snowflake returns TIMESTAMP_NTZ values without a "
            "zone, stored watermarks are naive text, and instants people type (backfill bounds, initial_value) "
            "become cursor.timezone wall time in window_bound first; the branch is a guard"
        ),
    ),
    Mutant(
        id="cursor-date-lookback-rounds-down",
        file="core/cursor.py",
        old="days = -(-int(delta.total_seconds()) // 86400)",
        new="days = int(delta.total_seconds()) // 86400",
        tests=(T_CURSOR,),
        breaks="a DATE lookback shorter than a day re-reads no day: late rows dated the watermark's day are lost",
    ),
    Mutant(
        id="cursor-number-bound-floor",
        file="core/cursor.py",
        old="scaleb(-scale), rounding=ROUND_CEILING))",
        new="scaleb(-scale), rounding=ROUND_FLOOR))",
        tests=(T_CURSOR,),
        breaks="a NUMBER backfill bound between two values moves down: the window reloads one value too many",
    ),
    Mutant(
        id="cursor-date-bound-no-next-midnight",
        file="core/cursor.py",
        old="day = wall.date() + (timedelta(days=1) if wall.time() != datetime.min.time() else timedelta(0))",
        new="day = wall.date()",
        tests=(T_CURSOR,),
        breaks="a DATE backfill bound inside a day takes that whole day: consecutive intervals reload a day twice",
    ),
    Mutant(
        id="cursor-date-clock-includes-today",
        file="core/cursor.py",
        old='return f"DATEADD(day, -1, CAST(DATEADD(second, {-secs}, {wall}) AS DATE))"',
        new='return f"DATEADD(day, 0, CAST(DATEADD(second, {-secs}, {wall}) AS DATE))"',
        tests=(T_CURSOR,),
        breaks="a DATE window closes on today: rows dated today that arrive later are never read",
    ),
    Mutant(
        id="cursor-ntz-not-capped-at-newest",
        file="core/cursor.py",
        old="return self in (CursorKind.TIMESTAMP_NTZ, CursorKind.NUMBER)",
        new="return self is CursorKind.NUMBER",
        tests=(T_CURSOR, f"{T_PLAN}::test_ntz_writer_behind_the_configured_clock_loses_no_row"),
        breaks="an NTZ writer behind the configured clock: the watermark passes rows not written yet, lost",
    ),
    # ------------------------------------------------------------------ load/plan.py
    Mutant(
        id="plan-initial-value-exclusive",
        file="load/plan.py",
        old="low, low_inc = _initial_low(cfg, kind, scale, zone), True",
        new="low, low_inc = _initial_low(cfg, kind, scale, zone), False",
        tests=(f"{T_PLAN}::test_the_first_run_loads_rows_at_the_initial_value_itself",),
        breaks="rows whose cursor equals cursor.initial_value are never loaded",
    ),
    Mutant(
        id="plan-initial-value-offset-read-as-utc",
        file="load/plan.py",
        old="return kind.window_bound(value if kind is CursorKind.NUMBER else str(value), zone, scale)",
        new="return kind.format_value(value)",
        tests=(f"{T_PLAN}::test_an_initial_value_with_an_offset_is_read_on_the_wall_clock_of_cursor_timezone",),
        breaks="an initial_value with an offset west of UTC skips the first hours of an NTZ cursor's rows",
    ),
    Mutant(
        id="plan-watermark-inclusive",
        file="load/plan.py",
        old="low, low_inc = base_wm, False",
        new="low, low_inc = base_wm, True",
        tests=(f"{T_PLAN}::test_backfill_window_before_the_watermark_reloads_exactly_it",),
        breaks="every run re-reads the rows at the watermark: duplicates in append tables",
    ),
    Mutant(
        id="plan-lookback-ignored",
        file="load/plan.py",
        old="low = kind.shift_value(base_wm, cfg.cursor.lookback)",
        new="low = base_wm",
        tests=(f"{T_EXTRACT}::test_lookback_catches_late_rows_without_duplicates",),
        breaks="lookback re-reads nothing: late rows below the watermark are lost",
    ),
    Mutant(
        id="plan-watermark-moves-back",
        file="load/plan.py",
        old="if kind.parse_value(high) < kind.parse_value(base_wm):",
        new="if False:",
        tests=(f"{T_PLAN}::test_a_window_high_below_the_watermark_never_moves_the_watermark_back",),
        breaks="a raised commit_lag plans a window ending below the watermark (the watermark would move back)",
    ),
    Mutant(
        id="plan-null-cursors-not-refused",
        file="load/plan.py",
        old="if null_rows and policy is NullCursorPolicy.RAISE:",
        new="if False:",
        tests=(f"{T_EXTRACT}::test_null_cursor_policies",),
        breaks="rows with a NULL cursor are skipped silently under null_policy: raise",
    ),
    Mutant(
        id="plan-backfill-not-clamped",
        file="load/plan.py",
        old="    if kind.parse_value(high) > kind.parse_value(wm):\n        log.warning(",
        new="    if False:\n        log.warning(",
        tests=(f"{T_PLAN}::test_backfill_window_across_the_watermark_is_clamped_to_it",),
        breaks="a backfill past the watermark loads rows the next incremental run loads again: duplicates",
    ),
    Mutant(
        id="plan-backfill-past-watermark-accepted",
        file="load/plan.py",
        old="if kind.parse_value(low) > kind.parse_value(wm):",
        new="if False:",
        tests=(f"{T_PLAN}::test_backfill_window_past_the_watermark_is_refused",),
        breaks="a backfill entirely past the watermark loads rows the next incremental run loads again",
    ),
    Mutant(
        id="plan-clamped-end-exclusive",
        file="load/plan.py",
        old="high, high_inclusive = wm, True",
        new="high, high_inclusive = wm, False",
        tests=(f"{T_PLAN}::test_backfill_window_across_the_watermark_is_clamped_to_it",),
        breaks="a clamped backfill skips the rows at the watermark it was asked to reload",
    ),
    # ------------------------------------------------------------------ iceberg/gate.py
    Mutant(
        id="gate-retry-not-recognised",
        file="iceberg/gate.py",
        old="    if done is not None:\n        log.info(",
        new="    if False:\n        log.info(",
        tests=(f"{T_EXTRACT}::test_retried_load_appends_nothing",),
        breaks="a retried load whose commit landed appends its rows again: duplicates",
    ),
    Mutant(
        id="gate-backfill-watermark-not-carried",
        file="iceberg/gate.py",
        old="    if w.mode == BACKFILL:\n        w = carry_watermark(table, w)",
        new="    pass",
        tests=(f"{T_MAPPED}::test_mapped_backfill_commits_after_an_incremental_run_without_moving_the_watermark",),
        breaks="a backfill planned before an incremental commit fails, or puts the old watermark back",
    ),
    Mutant(
        id="gate-base-not-checked",
        file="iceberg/gate.py",
        old="    if now_wm != w.base_watermark:\n        raise state.ConcurrentCommitError(",
        new="    if False:\n        raise state.ConcurrentCommitError(",
        tests=(f"{T_EXTRACT}::test_two_runs_never_both_commit_the_same_window",),
        breaks="two runs planned on the same watermark both commit the window: duplicates",
    ),
    Mutant(
        id="gate-empty-window-commits",
        file="iceberg/gate.py",
        old="return w.rows_in_window == 0 and w.mode == INCREMENTAL and not w.dry_run",
        new="return False",
        tests=(f"{T_EXTRACT}::test_an_empty_window_sends_no_extract_query",),
        breaks="an empty window still sends its extract query (the README promises the plan query alone)",
    ),
    Mutant(
        id="gate-full-refresh-removes-nothing",
        file="iceberg/gate.py",
        old="        return Replacement(rows=ex.AlwaysTrue())",
        new="        return None",
        tests=(f"{T_PLAN}::test_table_without_a_cursor_is_fully_refreshed_by_each_scheduled_run",),
        breaks="a full refresh appends the source on top of the old rows: every row twice",
    ),
    Mutant(
        id="gate-clamped-backfill-removes-below-watermark-only",
        file="iceberg/gate.py",
        old="upper = ex.LessThanOrEqual if w.high_inclusive else ex.LessThan",
        new="upper = ex.LessThan",
        tests=(f"{T_PLAN}::test_backfill_window_across_the_watermark_is_clamped_to_it",),
        breaks="a clamped backfill reloads the rows at the watermark without removing them: duplicates",
    ),
    Mutant(
        id="gate-backfill-low-exclusive",
        file="iceberg/gate.py",
        old="ex.GreaterThanOrEqual(c, _iceberg_literal(w.cursor_kind, w.low))",
        new="ex.GreaterThan(c, _iceberg_literal(w.cursor_kind, w.low))",
        tests=(
            f"{T_PLAN}::test_a_backfill_of_an_append_table_replaces_the_rows_at_its_start_and_keeps_those_at_its_end",
        ),
        breaks="a backfill reloads the rows at its start without removing their old copies: duplicates",
    ),
    Mutant(
        id="gate-merge-on-read-removes-nothing",
        file="iceberg/gate.py",
        old="                key_table = kt\n",
        new="                key_table = None\n",
        tests=(
            f"{T_MERGE}::test_merge_on_read_hides_replaced_rows_with_position_deletes_only_in_files_that_hold_them",
        ),
        breaks="merge-on-read tables keep every old version of an updated key: duplicate keys",
    ),
    Mutant(
        id="gate-state-not-copied-to-properties",
        file="iceberg/gate.py",
        old="table_props.update({state.state_property(k): v for k, v in own.items() if k not in IDENTITY_KEYS})",
        new="pass",
        tests=(f"{T_GATE}::test_state_survives_expiry_of_every_snowberg_snapshot",),
        breaks="snapshot expiry by another engine erases the watermark: the next run reloads everything",
    ),
    Mutant(
        id="gate-removal-not-marked-partial",
        file="iceberg/gate.py",
        old="    part[state.PARTIAL_OF] = commit_id\n",
        new="    part = dict(props)\n",
        tests=(f"{T_GATE}::test_only_the_last_snapshot_of_a_merge_commit_carries_the_state",),
        breaks="a merge's removal snapshot carries the run's state: a rollback to it loses the replaced keys",
    ),
    Mutant(
        id="gate-rebase-allowed",
        file="iceberg/gate.py",
        old="        props.update(NO_REBASE)\n",
        new="        pass\n",
        tests=(f"{T_GATE}::test_racing_append_on_a_table_snowberg_did_not_create_is_not_rebased",),
        breaks="pyiceberg rebases a conflicting append onto the new head: the window committed twice",
    ),
    Mutant(
        id="gate-missing-files-committed",
        file="iceberg/gate.py",
        old="    if missing:\n        raise MissingFileError(",
        new="    if False:\n        raise MissingFileError(",
        tests=(f"{T_MAPPED}::test_a_slice_commit_refuses_staged_files_that_no_longer_exist",),
        breaks="a commit references files an orphan sweep deleted: every later read of the table fails",
    ),
    Mutant(
        id="gate-staged-files-added-twice",
        file="iceberg/gate.py",
        old="already = referenced_files(table, paths) if staged or file_paths else set()",
        new="already: set[str] = set()",
        tests=(f"{T_MAPPED}::test_commit_refuses_files_already_in_the_table",),
        breaks="staged slice files already in the table are added again: their rows twice",
    ),
    # ------------------------------------------------------------------ iceberg/state.py
    Mutant(
        id="state-find-commit-property-guard",
        file="iceberg/state.py",
        old="    if not any_snowberg:\n        props = usable_property_state(table)",
        new="    if True:\n        props = usable_property_state(table)",
        tests=(
            f"{T_STATE}::test_a_retry_after_a_rollback_outside_snowberg_finds_no_commit_in_the_stale_property_copy",
        ),
        breaks="after another engine's rollback the undone run's retry finds its commit in the copy: writes nothing",
    ),
    Mutant(
        id="state-undone-property-copy-trusted",
        file="iceberg/state.py",
        old="    return {} if undone_property_state(table, props) else props",
        new="    return props",
        tests=(f"{T_STATE}::test_a_rollback_outside_snowberg_below_its_first_commit_leaves_no_state",),
        breaks="a rollback below snowberg's first commit keeps its watermark: the undone rows are never reloaded",
    ),
    Mutant(
        id="state-expired-property-copy-ignored",
        file="iceberg/state.py",
        old="        if oldest is not None and oldest < _age(snap):",
        new="        if True:",
        tests=(f"{T_STATE}::test_the_property_copy_is_the_state_when_expiry_took_the_commit_even_if_a_tag_kept_it",),
        breaks="after expiry with a tag, the state is lost: the next run reloads the whole table",
    ),
    Mutant(
        id="state-reconcile-unknown-snapshot-adopted",
        file="iceberg/state.py",
        old="    if ahead or not known:",
        new="    if ahead:",
        tests=(f"{T_STATE}::test_reconcile_refuses_a_mirror_naming_a_snapshot_the_table_does_not_have",),
        breaks="a Variable naming a snapshot the table lost is overwritten silently instead of alarming",
    ),
    Mutant(
        id="state-undone-head-adopts-any-variable",
        file="iceberg/state.py",
        old="    return any(s.snapshot_id == snapshot_id for s in ancestors(table, int(undone)))\n",
        new="    return True\n",
        tests=(f"{T_ROLLBACK}::test_a_variable_naming_a_head_undone_outside_snowberg_is_still_refused",),
        breaks="after one snowberg rollback, any Variable ahead of the table is adopted: lost commits go unnoticed",
    ),
    Mutant(
        id="state-undone-record-outlives-main-moving",
        file="iceberg/state.py",
        old="    if snapshot_id in on_main or int(target) not in on_main:\n",
        new="    if snapshot_id in on_main:\n",
        tests=(f"{T_ROLLBACK}::test_another_engines_rollback_below_a_snowberg_rollbacks_target_is_refused",),
        breaks="after another engine moved main below a snowberg rollback, the undone head is still adopted",
    ),
    Mutant(
        id="state-reconcile-ahead-ignored",
        file="iceberg/state.py",
        old="ahead = parse_cursor_value(kind, mirror_wm) > parse_cursor_value(kind, state.watermark)",
        new="ahead = False",
        tests=(f"{T_STATE}::test_reconcile_adopts_a_state_after_the_mirrored_snapshot_even_with_a_lower_watermark",),
        breaks="a Variable ahead of a rolled-back table is overwritten silently: lost commits go unnoticed",
    ),
    Mutant(
        id="state-partial-snapshot-read-as-commit",
        file="iceberg/state.py",
        old="        if PARTIAL_OF in props:\n            continue\n",
        new="        pass\n",
        tests=(f"{T_GATE}::test_a_head_left_on_a_full_refreshs_removal_is_not_that_refresh_for_its_retry",),
        breaks="a head left on a full refresh's removal is taken for the refresh: its retry leaves the table empty",
    ),
    Mutant(
        id="state-old-form-partial-read-as-commit",
        file="iceberg/state.py",
        old="            if any(continues(props, _props(k)) for k in children.get(snap.snapshot_id, [])):\n",
        new="            if False:\n",
        tests=(f"{T_STATE}::test_readers_skip_the_first_snapshot_of_an_old_two_snapshot_commit",),
        breaks="old commits' first snapshot carries the state: a head left there skips the replaced keys",
    ),
    Mutant(
        id="state-behind-mirror-refused",
        file="iceberg/state.py",
        old="    if behind:\n        ahead = False\n",
        new="    if False:\n        ahead = False\n",
        tests=(f"{T_STATE}::test_reconcile_adopts_a_state_after_the_mirrored_snapshot_even_with_a_lower_watermark",),
        breaks="after a full refresh with a lower watermark every run fails on a false 'ahead of the table'",
    ),
    # ------------------------------------------------------------------ iceberg/merge.py
    Mutant(
        id="merge-prune-upper-eq",
        file="iceberg/merge.py",
        old="if pc.less(hi, self.lo).as_py()",
        new="if pc.less_equal(hi, self.lo).as_py()",
        tests=(f"{T_MERGE}::test_a_key_on_a_file_bound_is_replaced_at_either_end_of_the_window",),
        breaks="a file whose upper key bound is the window's smallest key is pruned: that key duplicated",
    ),
    Mutant(
        id="merge-prune-lower-eq",
        file="iceberg/merge.py",
        old="or pc.greater(lo, self.hi).as_py()",
        new="or pc.greater_equal(lo, self.hi).as_py()",
        tests=(f"{T_MERGE}::test_a_key_on_a_file_bound_is_replaced_at_either_end_of_the_window",),
        breaks="a file whose lower key bound is the window's largest key is pruned: that key duplicated",
    ),
    Mutant(
        id="merge-mask-lower-exclusive",
        file="iceberg/merge.py",
        old="pc.greater_equal(self.keys, lo)",
        new="pc.greater(self.keys, lo)",
        tests=(f"{T_MERGE}::test_a_key_on_a_file_bound_is_replaced_at_either_end_of_the_window",),
        breaks="a key equal to a file's lower bound is not looked for in it: duplicated",
    ),
    Mutant(
        id="merge-mask-upper-exclusive",
        file="iceberg/merge.py",
        old="pc.less_equal(self.keys, hi)",
        new="pc.less(self.keys, hi)",
        tests=(f"{T_MERGE}::test_a_key_on_a_file_bound_is_replaced_at_either_end_of_the_window",),
        breaks="a key equal to a file's upper bound is not looked for in it: duplicated",
    ),
    Mutant(
        id="merge-files-without-statistics-skipped",
        file="iceberg/merge.py",
        old="            return pa.array([True] * len(self.keys))",
        new="            return None",
        tests=(f"{T_MERGE}::test_data_files_without_key_statistics_are_candidates",),
        breaks="files written without column statistics are never searched: duplicate keys",
    ),
    Mutant(
        id="merge-old-deletes-not-subtracted",
        file="iceberg/merge.py",
        old="        positions = _not_yet_deleted(io, path, positions, task.delete_files)\n",
        new="",
        tests=(f"{T_MERGE}::test_a_key_replaced_twice_is_deleted_once_per_version",),
        breaks="a key replaced twice is deleted twice: row counts and the volume check go wrong",
    ),
    # ------------------------------------------------------------------ iceberg/rollback.py
    Mutant(
        id="rollback-partial-target-accepted",
        file="iceberg/rollback.py",
        old='    refuse_partial(table, target, "a rollback to")\n',
        new="",
        tests=(f"{T_ROLLBACK}::test_rollback_and_tags_refuse_the_middle_of_a_commit_and_name_its_last_snapshot",),
        breaks="a rollback into the middle of a merge commit: replaced keys gone while the watermark says loaded",
    ),
    Mutant(
        id="rollback-before-run-to-its-last-snapshot",
        file="iceberg/rollback.py",
        old="first = runs[-1]",
        new="first = runs[0]",
        tests=(
            f"{T_ROLLBACK}::test_rollback_before_a_merge_run_goes_below_its_first_snapshot_and_the_next_run_restores_it",
        ),
        breaks="--before-run of a merge run lands on its removal snapshot: half a commit on main",
    ),
    Mutant(
        id="rollback-variable-not-followed",
        file="iceberg/rollback.py",
        old="        variables.set(variable_key, state.mirror_value(after))\n",
        new="        pass\n",
        tests=(f"{T_ROLLBACK}::test_rollback_before_a_run_reloads_its_window_exactly_once",),
        breaks="after a rollback the Variable names the undone run until the next run adopts the table",
    ),
    Mutant(
        id="rollback-undone-head-not-recorded",
        file="iceberg/rollback.py",
        old="        updates[state.UNDONE_HEAD] = str(plan.current_snapshot_id)\n",
        new="        pass\n",
        tests=(f"{T_ROLLBACK}::test_a_plan_that_read_the_table_before_a_rollback_does_not_strand_the_variable",),
        breaks="a run racing a rollback writes the undone state back: every later run refuses the Variable",
    ),
    Mutant(
        id="rollback-target-not-recorded",
        file="iceberg/rollback.py",
        old="        updates[state.ROLLBACK_TARGET] = str(plan.target_snapshot_id)\n",
        new="        pass\n",
        tests=(f"{T_ROLLBACK}::test_a_plan_that_read_the_table_before_a_rollback_does_not_strand_the_variable",),
        breaks="a run racing a rollback writes the undone state back: every later run refuses the Variable",
    ),
    Mutant(
        id="rollback-state-properties-not-restored",
        file="iceberg/rollback.py",
        old="                updates[k] = summary[key]\n",
        new="                pass\n",
        tests=(f"{T_ROLLBACK}::test_rollback_to_snapshot_and_to_tag_and_state_properties_follow",),
        breaks="the state copy keeps the undone run's watermark: after expiry its window is never reloaded",
    ),
    Mutant(
        id="rollback-target-without-state-accepted",
        file="iceberg/rollback.py",
        old="    if after is None:\n        raise RollbackError(",
        new="    if False:\n        raise RollbackError(",
        tests=(f"{T_ROLLBACK}::test_a_rollback_to_a_snapshot_before_snowbergs_first_commit_is_refused",),
        breaks="a rollback to before the first load is attempted (the watermark would be lost)",
    ),
    Mutant(
        id="rollback-head-not-asserted",
        file="iceberg/rollback.py",
        old="    refuse_rebase(table)\n    tx = table.transaction()",
        new="    tx = table.transaction()",
        tests=(f"{T_ROLLBACK}::test_a_load_between_plan_and_rollback_commit_fails_the_rollback",),
        breaks="a load landing between plan and rollback is undone silently",
        harmless=(
            "pyiceberg 0.12 retries only a transaction that holds a snapshot producer "
            "(Transaction.commit_transaction); a rollback holds none, so its commit fails on a moved head "
            "with or without the override (the test runs on a table without num-retries=0 too); the call "
            "stays as a guard against a pyiceberg that would retry it"
        ),
    ),
    Mutant(
        id="rollback-identity-not-restored",
        file="iceberg/rollback.py",
        old="    ident = identity_after(table, name, target, after.snapshot_id, crossed)",
        new="    ident: dict[str, str | None] = {}",
        tests=(f"{T_ROLLBACK}::test_rollback_across_a_cursor_change_restores_the_identity_with_the_watermark",),
        breaks="a rollback across a cursor change keeps the new column with the old column's watermark",
    ),
    Mutant(
        id="rollback-run-ids-of-other-dags-matched",
        file="iceberg/rollback.py",
        old="        matches = mine\n",
        new="        pass\n",
        tests=(f"{T_ROLLBACK}::test_rollback_before_a_load_run_leaves_the_checks_dags_propagate_with_the_same_run_id",),
        breaks="--before-run undoes another DAG's commit that shares the run id",
    ),
    # ------------------------------------------------------------------ checks/hashdiff.py
    Mutant(
        id="hashdiff-second-half-not-compared",
        file="checks/hashdiff.py",
        old="!= (b.get(k, zero).count, b.get(k, zero).h1, b.get(k, zero).h2)",
        new="!= (b.get(k, zero).count, b.get(k, zero).h1, a.get(k, zero).h2)",
        tests=(
            f"{T_HASHDIFF}::test_a_bucket_whose_checksums_differ_in_one_half_only_is_narrowed_down",
            f"{T_HASHDIFF}::test_level_zero_catches_a_key_that_differs_with_the_same_cursor",
        ),
        breaks="level 0's key sum and the second half of each bucket checksum are ignored: changed keys unseen",
    ),
    Mutant(
        id="hashdiff-first-half-not-compared",
        file="checks/hashdiff.py",
        old="!= (b.get(k, zero).count, b.get(k, zero).h1, b.get(k, zero).h2)",
        new="!= (b.get(k, zero).count, a.get(k, zero).h1, b.get(k, zero).h2)",
        tests=(
            f"{T_HASHDIFF}::test_a_bucket_whose_checksums_differ_in_one_half_only_is_narrowed_down",
            f"{T_HASHDIFF}::test_level_zero_catches_a_cursor_that_differs_within_its_day",
        ),
        breaks="level 0's cursor sum and the first half of each bucket checksum are ignored: stale rows unseen",
    ),
    Mutant(
        id="hashdiff-level0-cursor-sum-dropped",
        file="checks/hashdiff.py",
        old='h1, h2 = ("wc", "wk") if level == 0 and not self.spec.strict else ("h1", "h2")',
        new='h1, h2 = ("0", "wk") if level == 0 and not self.spec.strict else ("h1", "h2")',
        tests=(f"{T_HASHDIFF}::test_level_zero_catches_a_cursor_that_differs_within_its_day",),
        breaks="the lake's level 0 ignores cursor values: a stale version of a row on the same day passes",
    ),
    Mutant(
        id="hashdiff-snowflake-level0-key-sum-dropped",
        file="checks/hashdiff.py",
        old='f"COALESCE(SUM({wk}), 0) AS h2, SUM(CASE',
        new='f"0 AS h2, SUM(CASE',
        tests=(f"{T_HASHDIFF}::test_level_zero_sums_cheap_numbers_per_day_unless_strict",),
        breaks="Snowflake's level 0 ignores the keys: every check of a non-empty table reports a difference",
    ),
    Mutant(
        id="hashdiff-null-keys-accepted",
        file="checks/hashdiff.py",
        old="    if res.source_null_keys or res.lake_null_keys:\n",
        new="    if False:\n",
        tests=(T_VOLUME,),
        breaks="rows without a key are compared as if keyed: differences reported on the wrong rows",
    ),
    Mutant(
        id="hashdiff-scope-excludes-watermark",
        file="checks/hashdiff.py",
        old="parts.append(f\"{s.cursor.sf} <= {self._typed('wm')}\")",
        new="parts.append(f\"{s.cursor.sf} < {self._typed('wm')}\")",
        tests=(f"{T_HASHDIFF}::test_snowflake_level_query_pushes_the_aggregation_down_with_bound_values",),
        breaks="rows at the watermark are left out of the source side: reported as lake-only",
    ),
)


# Last round's modules: state adoption, the verification scope, the source version and its use in the
# plan, the proof of a current lake, idle runs, staging, the orphan sweep, keyed sync changes, live rows. Each is
# what a careless edit of that module would do, with the tests that should notice.
T_SNAP = "tests/snowberg/sync/test_snapshots.py"
T_STAGING = "tests/snowberg/iceberg/test_staging.py"
T_MAINT = "tests/snowberg/iceberg/test_maintenance.py"
T_DELETES = "tests/snowberg/iceberg/test_deletes.py"
T_CURRENT = "tests/snowberg/iceberg/test_current.py"
T_FRESH = "tests/snowberg/checks/test_freshness.py"
T_SCOPE = "tests/snowberg/checks/test_volume_scope.py"
T_SRCVER = "tests/snowberg/snowflake/test_source_version.py"
T_IDLE = "tests/snowberg/airflow/operators/test_idle.py"
T_STREAMS_OP = "tests/snowberg/airflow/operators/test_streams.py"
SRCVER = "snowflake/source_version.py"  # the area of plan.py's source-version mutants in the per-module table

LAST_ROUND_MUTANTS: tuple[Mutant, ...] = (
    # ------------------------------------------------------------------ sync/snapshots.py
    Mutant(
        id="snap-append-with-deletes-loaded",
        file="sync/snapshots.py",
        old='            action, note = StepAction.REWRITE, "append with delete files"',
        new='            action, note = StepAction.LOAD, "append with delete files"',
        tests=(f"{T_SNAP}::test_an_append_snapshot_carrying_position_deletes_is_not_a_plain_append",),
        breaks="an append that hides rows with position deletes is loaded as an append: the hidden rows stay",
    ),
    Mutant(
        id="snap-replace-loaded",
        file="sync/snapshots.py",
        old='action, note = StepAction.SKIP, "rewrite of existing rows',
        new='action, note = StepAction.LOAD, "rewrite of existing rows',
        tests=(f"{T_SNAP}::test_replace_snapshots_change_no_rows_and_are_skipped",),
        breaks="a compaction's rewritten files are loaded again: every compacted row twice in the target",
    ),
    Mutant(
        id="snap-overwrite-skipped",
        file="sync/snapshots.py",
        old='action, note = StepAction.REWRITE, f"{op} snapshot changes',
        new='action, note = StepAction.SKIP, f"{op} snapshot changes',
        tests=(f"{T_SNAP}::test_compaction_is_skipped_but_overwrite_and_delete_are_refused",),
        breaks="overwrites and deletes are skipped: removed or changed rows stay in the target",
    ),
    Mutant(
        id="snap-equality-deletes-applied-by-key",
        file="sync/snapshots.py",
        old='if rewrites and key_columns and not any(_summary_int(s, "added-equality-deletes") for s in chain):',
        new="if rewrites and key_columns:",
        tests=(f"{T_SNAP}::test_equality_deletes_are_never_applied_as_keyed_changes",),
        breaks="equality deletes are read as keyed changes, which never see their removals: deleted rows stay",
    ),
    Mutant(
        id="snap-empty-key-falls-back-to-identifiers",
        file="sync/snapshots.py",
        old="    if key_columns is None:\n        return identifier_columns(table)",
        new="    if not key_columns:\n        return identifier_columns(table)",
        tests=(f"{T_SNAP}::test_key_columns_empty_turns_keyed_changes_off_even_with_identifier_fields",),
        breaks="key_columns: [] still applies changes by the identifier fields the user turned off",
    ),
    Mutant(
        id="snap-float-key-accepted",
        file="sync/snapshots.py",
        old="isinstance(f.field_type, (DoubleType, FloatType))",
        new="isinstance(f.field_type, DoubleType)",
        tests=(f"{T_SNAP}::test_floating_point_key_columns_are_refused",),
        breaks="a FLOAT key is accepted: rounding makes keyed deletes miss or hit the wrong rows",
    ),
    Mutant(
        id="snap-removed-file-counts-already-deleted-rows",
        file="sync/snapshots.py",
        old="                removed.append(kt.filter(live))",
        new="                removed.append(kt)",
        tests=(f"{T_SNAP}::test_a_key_updated_merge_on_read_survives_a_later_copy_on_write_rewrite_of_its_old_file",),
        breaks="a removed file's rows hidden before the synced snapshot count as removals: a live key is deleted",
    ),
    Mutant(
        id="snap-old-delete-files-read-as-new",
        file="sync/snapshots.py",
        old="new_deletes = [d for d in after[path].delete_files if d.file_path not in old_deletes]",
        new="new_deletes = list(after[path].delete_files)",
        tests=(
            f"{T_SNAP}::test_a_data_file_whose_delete_files_did_not_change_is_not_read",
            f"{T_SNAP}::test_position_deletes_become_keys_by_reading_only_the_positions_they_name",
        ),
        breaks="each data file with delete files has them re-read at every change: the cost follows the table",
    ),
    Mutant(
        id="snap-rewritten-keys-also-deleted",
        file="sync/snapshots.py",
        old='        deleted = deleted.join(written, keys=keys, join_type="left anti")',
        new="        pass",
        tests=(f"{T_SNAP}::test_keyed_merge_on_read_changes_are_read_from_the_touched_files_only",),
        breaks="keys the change writes again are also in deleted_keys: an apply that deletes last loses them",
    ),
    Mutant(
        id="snap-foreign-history-not-refused",
        file="sync/snapshots.py",
        old="    if chain is None:\n        return full(",
        new="    if chain is None:\n        chain = []\n    if False:\n        return full(",
        tests=(f"{T_SNAP}::test_expired_or_foreign_state_is_refused",),
        breaks="a synced snapshot that is no longer an ancestor (rollback, expiry) reads as 'nothing changed'",
    ),
    Mutant(
        id="snap-replaced-table-not-refused",
        file="sync/snapshots.py",
        old="    if synced_uuid is not None and synced_uuid != uuid:",
        new="    if False:",
        tests=(f"{T_SNAP}::test_expired_or_foreign_state_is_refused",),
        breaks="a source table dropped and recreated is synced as if it were the old one",
    ),
    Mutant(
        id="snap-skipped-steps-read",
        file="sync/snapshots.py",
        old="    for step in plan.load_steps:\n",
        new="    for step in plan.steps:\n",
        tests=(f"{T_SNAP}::test_replace_snapshots_change_no_rows_and_are_skipped",),
        breaks="the files of skipped snapshots (compactions) are read as appends: duplicates",
        harmless=(
            "pyiceberg 0.12's incremental append scan plans the files of append snapshots only "
            "(IncrementalAppendScan.plan_files keeps snapshots whose operation is append), so the scan of a "
            "skipped replace snapshot reads nothing; an incremental plan holds no rewrite step. The filter "
            "stays so a pyiceberg that scanned every operation would not duplicate rows"
        ),
    ),
    # ------------------------------------------------------------------ iceberg/staging.py
    Mutant(
        id="staging-folder-without-hash",
        file="iceberg/staging.py",
        old='    return f"{staging_root(table)}/{readable}-{digest}"',
        new='    return f"{staging_root(table)}/{readable}"',
        tests=(f"{T_STAGING}::test_run_ids_sharing_a_long_prefix_get_separate_staging_folders",),
        breaks="two runs whose ids share the readable prefix share a folder: one's commit removes the other's files",
    ),
    Mutant(
        id="staging-commit-removes-every-runs-staging",
        file="iceberg/staging.py",
        old="    folder = staging_location(table, run_id)\n    n = 0",
        new="    folder = staging_root(table)\n    n = 0",
        tests=(f"{T_STAGING}::test_a_commit_removes_only_its_own_runs_staging",),
        breaks="a commit removes the staging of every run: a pending mapped run commits missing files (it fails)",
    ),
    Mutant(
        id="staging-earlier-attempt-supersedes",
        file="iceberg/staging.py",
        old="if n > clear]",
        new="if n != clear]",
        tests=(f"{T_STAGING}::test_a_later_attempt_of_the_same_dag_run_supersedes_the_earlier",),
        breaks="the newest attempt is judged superseded by an older one: its staged files are swept",
    ),
    Mutant(
        id="staging-backfill-overtaken",
        file="iceberg/staging.py",
        old="    if record.mode != Mode.BACKFILL and st is not None:",
        new="    if st is not None:",
        tests=(f"{T_STAGING}::test_a_backfill_is_never_overtaken",),
        breaks="a pending backfill's staging is swept once the watermark moved (the gate would still take it)",
    ),
    Mutant(
        id="staging-full-refresh-never-overtaken",
        file="iceberg/staging.py",
        old="        if not record.watermarked and st.run_id != record.base_run_id:",
        new="        if False:",
        tests=(f"{T_STAGING}::test_a_full_refresh_without_a_cursor_is_overtaken_by_another_runs_commit",),
        breaks="an overtaken full refresh's staging is kept forever (a leak)",
    ),
    Mutant(
        id="staging-commit-not-recognised",
        file="iceberg/staging.py",
        old="    done = state.find_commit(table, record.identity)\n    if done is not None:",
        new="    done = state.find_commit(table, record.identity)\n    if False:",
        tests=(f"{T_STAGING}::test_a_committed_runs_left_over_staging_goes_and_its_committed_files_stay",),
        breaks="a committed run's left-over staging is judged by its watermark, not as committed",
    ),
    Mutant(
        id="staging-abandoned-removed-at-once",
        file="iceberg/staging.py",
        old="if not j.verdict.abandoned or j.since is None or j.since > cutoff:",
        new="if not j.verdict.abandoned:",
        tests=(
            f"{T_STAGING}::test_an_overtaken_run_is_removed_once_that_is_older_than_the_orphan_age",
            f"{T_STAGING}::test_without_modification_times_the_tables_time_decides",
            f"{T_STAGING}::test_a_run_staged_long_ago_and_abandoned_just_now_is_kept_for_the_orphan_age",
        ),
        breaks="an abandoned run's staging goes on the next sweep, not after the orphan age",
    ),
    Mutant(
        id="staging-young-files-ignored",
        file="iceberg/staging.py",
        old="        return all(f.modified is None or f.modified <= cutoff for f in self.files)",
        new="        return True",
        tests=(f"{T_STAGING}::test_a_folder_written_to_after_the_cutoff_is_kept",),
        breaks="a folder a zombie task still writes to is removed under it",
    ),
    Mutant(
        id="staging-unreadable-manifest-ignored",
        file="iceberg/staging.py",
        old="            unreadable.append(f)",
        new="            pass",
        tests=(
            f"{T_MAINT}::test_the_sweep_keeps_staging_and_what_a_staging_manifest_names_even_when_old",
            f"{T_STAGING}::test_without_modification_times_a_staging_manifest_being_written_holds_the_files_and_unknown_ages_stay",
        ),
        breaks="a staging manifest being written holds nothing: the data files it will name are swept",
    ),
    Mutant(
        id="staging-named-paths-keep-their-scheme",
        file="iceberg/staging.py",
        old="named.update(path_key(d.file_path) for d in read_staging_manifest(io, f.path))",
        new="named.update(d.file_path for d in read_staging_manifest(io, f.path))",
        tests=(f"{T_STAGING}::test_a_run_planned_on_the_current_state_may_commit_and_is_kept_whatever_its_age",),
        breaks="named paths keep file:// or s3://, listed ones do not: a pending run's data files are swept",
    ),
    # ------------------------------------------------------------------ iceberg/maintenance.py (the orphan sweep)
    Mutant(
        id="orphans-manifest-of-unknown-age-held-nothing",
        file="iceberg/maintenance.py",
        old="            if f.modified is None or f.modified > cutoff:\n                hold = True",
        new="            if f.modified is not None and f.modified > cutoff:\n                hold = True",
        tests=(
            f"{T_STAGING}::test_without_modification_times_a_staging_manifest_being_written_holds_the_files_and_unknown_ages_stay",
        ),
        breaks="without listing times, a staging manifest being written holds nothing: files it names are swept",
    ),
    Mutant(
        id="orphans-unknown-age-deleted",
        file="iceberg/maintenance.py",
        old="        elif modified is None or modified > cutoff:",
        new="        elif modified is not None and modified > cutoff:",
        tests=(f"{T_STAGING}::test_without_modification_times_the_tables_time_decides",),
        breaks="without listing times every unreferenced file is deleted, including a write in flight",
    ),
    Mutant(
        id="orphans-named-data-files-not-kept",
        file="iceberg/maintenance.py",
        old="        elif staging.is_staged(f.path) or key in staged:",
        new="        elif staging.is_staged(f.path):",
        tests=(f"{T_MAINT}::test_the_sweep_keeps_staging_and_what_a_staging_manifest_names_even_when_old",),
        breaks="data files a pending staging manifest names are swept: the mapped run's commit fails",
    ),
    Mutant(
        id="orphans-staging-folders-not-kept",
        file="iceberg/maintenance.py",
        old="        elif staging.is_staged(f.path) or key in staged:",
        new="        elif key in staged:",
        tests=(f"{T_MAINT}::test_the_sweep_keeps_staging_and_what_a_staging_manifest_names_even_when_old",),
        breaks="a pending run's staging manifests and record are swept once old",
    ),
    Mutant(
        id="orphans-hold-ignored",
        file="iceberg/maintenance.py",
        old="        elif hold and not key.startswith(metadata_dir):",
        new="        elif False:",
        tests=(f"{T_MAINT}::test_the_sweep_keeps_staging_and_what_a_staging_manifest_names_even_when_old",),
        breaks="a staging manifest being written holds no file: what it is about to name is swept",
    ),
    Mutant(
        id="orphans-abandoned-files-not-dated-by-the-table",
        file="iceberg/maintenance.py",
        old="        modified = f.modified or abandoned_at.get(key)",
        new="        modified = f.modified",
        tests=(f"{T_STAGING}::test_without_modification_times_the_tables_time_decides",),
        breaks="without listing times an abandoned run's data files are never removed (a leak)",
    ),
    Mutant(
        id="orphans-metadata-log-not-referenced",
        file="iceberg/maintenance.py",
        old="    out.update(e.metadata_file for e in md.metadata_log)",
        new="    pass",
        tests=(f"{T_MAINT}::test_orphan_files_dry_run_lists_then_removal_deletes_only_old_unreferenced_files",),
        breaks="earlier metadata files the log references are deleted: time travel to them fails",
    ),
    Mutant(
        id="orphans-abandoned-swept-before-the-age",
        file="iceberg/maintenance.py",
        old="    gone = [r for r in runs if r.removable(cutoff)]",
        new="    gone = [r for r in runs if r.judgement.verdict.abandoned]",
        tests=(
            f"{T_STAGING}::test_an_overtaken_run_is_removed_once_that_is_older_than_the_orphan_age",
            f"{T_STAGING}::test_without_modification_times_the_tables_time_decides",
            f"{T_STAGING}::test_a_run_staged_long_ago_and_abandoned_just_now_is_kept_for_the_orphan_age",
        ),
        breaks="an abandoned run's staging goes as soon as it is abandoned, not after the orphan age",
    ),
    Mutant(
        id="orphans-run-record-not-deleted-last",
        file="iceberg/maintenance.py",
        old="    return (staging.is_staged(path), staging.is_run_record(path), path)",
        new="    return (False, False, path)",
        tests=(f"{T_STAGING}::test_an_overtaken_run_is_removed_once_that_is_older_than_the_orphan_age",),
        breaks="a sweep dying half way leaves a folder without its record: judged unknown, kept forever",
    ),
    Mutant(
        id="orphans-dry-run-deletes",
        file="iceberg/maintenance.py",
        old="    if not dry_run:\n        for p in orphans:",
        new="    if True:\n        for p in orphans:",
        tests=(f"{T_MAINT}::test_orphan_files_dry_run_lists_then_removal_deletes_only_old_unreferenced_files",),
        breaks="a dry run deletes what it lists",
    ),
    # ------------------------------------------------------------------ iceberg/state.py (adoption)
    Mutant(
        id="state-property-adoption-ignores-run",
        file="iceberg/state.py",
        old='    if state.from_properties and mirror_wm == state.watermark and mirror.get("run_id") == state.run_id:',
        new="    if state.from_properties and mirror_wm == state.watermark:",
        tests=(
            f"{T_STATE}::test_a_variable_naming_another_runs_lost_commit_at_the_same_watermark_is_refused_when_state_is_from_properties",
        ),
        breaks="a Variable naming another run's lost commit at the same watermark is adopted, not reported",
    ),
    Mutant(
        id="state-property-adoption-ignores-watermark",
        file="iceberg/state.py",
        old='    if state.from_properties and mirror_wm == state.watermark and mirror.get("run_id") == state.run_id:',
        new='    if state.from_properties and mirror.get("run_id") == state.run_id:',
        tests=(
            f"{T_STATE}::test_a_variable_naming_another_runs_lost_commit_at_the_same_watermark_is_refused_when_state_is_from_properties",
        ),
        breaks="a Variable ahead of the property copy is overwritten when it names the same run",
    ),
    Mutant(
        id="state-no-watermark-never-behind",
        file="iceberg/state.py",
        old="    elif mirror_wm is not None and state.watermark is None:\n        ahead = True",
        new="    elif mirror_wm is not None and state.watermark is None:\n        ahead = False",
        tests=(f"{T_STATE}::test_a_variable_ahead_of_a_rollback_to_a_commit_without_a_watermark_is_reported",),
        breaks="after a rollback to a commit without a watermark, the Variable ahead is silently overwritten",
    ),
    Mutant(
        id="state-mirror-without-run-id",
        file="iceberg/state.py",
        old='            "run_id": state.run_id,\n        },',
        new="        },",
        tests=(
            f"{T_STATE}::test_a_variable_naming_another_runs_lost_commit_at_the_same_watermark_is_refused_when_state_is_from_properties",
        ),
        breaks="the mirror names no run: after expiry of its snapshot it can never be adopted from the copy",
    ),
    # ------------------------------------------------------------------ checks/volume_scope.py
    Mutant(
        id="scope-equal-end-takes-the-later-ranges-bound",
        file="checks/volume_scope.py",
        old="                        high_inc = last.high_inclusive or r.high_inclusive",
        new="                        high_inc = r.high_inclusive",
        tests=(f"{T_SCOPE}::test_a_backfill_range_merged_with_an_open_range_ending_at_its_end_keeps_that_end",),
        breaks="a merged range loses its end value: rows at exactly that cursor are not compared",
    ),
    Mutant(
        id="scope-equal-end-takes-the-earlier-ranges-bound",
        file="checks/volume_scope.py",
        old=(
            "                    if hi is not None and last_hi is not None and hi == last_hi:\n"
            "                        high_inc = last.high_inclusive or r.high_inclusive\n"
        ),
        new="",
        tests=(f"{T_SCOPE}::test_a_backfill_range_merged_with_an_open_range_ending_at_its_end_keeps_that_end",),
        breaks="a backfill [a, d] merged into an open range [c, d) drops d: rows at d are not compared",
    ),
    Mutant(
        id="scope-unbounded-high-dropped",
        file="checks/volume_scope.py",
        old="if last_hi is None or (hi is not None and hi <= last_hi):",
        new="if last_hi is None or hi is None or hi <= last_hi:",
        tests=(f"{T_SCOPE}::test_ranges_merge_and_many_become_their_hull",),
        breaks="an open-ended range merged into a bounded one becomes bounded: everything above is not compared",
    ),
    Mutant(
        id="scope-backfill-start-excluded",
        file="checks/volume_scope.py",
        old="walk.ranges.append(Range(low=low, high=high, low_inclusive=True, high_inclusive=True))",
        new="walk.ranges.append(Range(low=low, high=high, low_inclusive=False, high_inclusive=True))",
        tests=(f"{T_SCOPE}::test_windows_committed_since_the_record_are_the_scope",),
        breaks="rows at a backfill's start are not compared",
    ),
    Mutant(
        id="scope-late-margin-ignored",
        file="checks/volume_scope.py",
        old="        low = kind.shift_value(record.watermark, margin)",
        new="        low = record.watermark",
        tests=(f"{T_SCOPE}::test_no_change_since_the_record_verifies_the_late_margin_only",),
        breaks="late rows just below the recorded watermark are never compared incrementally",
    ),
    Mutant(
        id="scope-lookback-ignored",
        file="checks/volume_scope.py",
        old="    margin = max(settings.late_margin, cfg.cursor.lookback)",
        new="    margin = settings.late_margin",
        tests=(f"{T_SCOPE}::test_no_change_since_the_record_verifies_the_late_margin_only",),
        breaks="a lookback longer than the late margin re-reads rows the check then does not compare",
    ),
    Mutant(
        id="scope-open-ranges-forgotten",
        file="checks/volume_scope.py",
        old="    ranges += record.open_ranges",
        new="    pass",
        tests=(f"{T_SCOPE}::test_open_ranges_of_the_last_check_stay_in_scope_until_they_pass",),
        breaks="a difference found once stops alerting at the next check although nothing repaired it",
    ),
    Mutant(
        id="scope-compaction-located-by-statistics",
        file="checks/volume_scope.py",
        old='        if op == "replace" or state.MAINTENANCE in props',
        new="        if state.MAINTENANCE in props",
        tests=(
            f"{T_SCOPE}::test_another_engines_compaction_adds_nothing_to_the_scope",
            f"{T_SCOPE}::test_compaction_and_propagated_deletes_add_nothing_to_the_scope",
        ),
        breaks="another engine's compaction widens the next check to every range it rewrote (cost follows the table)",
    ),
    Mutant(
        id="scope-foreign-delete-files-located",
        file="checks/volume_scope.py",
        old='                return "it has delete files (the rows they hide are not located',
        new='                continue\n                return "it has delete files (the rows they hide are not located',
        tests=(
            f"{T_SCOPE}::test_a_first_load_or_another_engines_delete_files_since_the_record_mean_a_full_verification",
        ),
        breaks="another engine's delete files are ignored: the rows they hide are never compared",
    ),
    # ------------------------------------------------------------------ snowflake/source_version.py, load/plan.py
    Mutant(
        id="srcver-views-versioned",
        file="snowflake/source_version.py",
        old='VERSIONED_TYPES = frozenset({"BASE TABLE"})',
        new='VERSIONED_TYPES = frozenset({"BASE TABLE", "VIEW", "MATERIALIZED VIEW"})',
        tests=(f"{T_SRCVER}::test_anything_but_a_base_table_with_its_metadata_is_an_unknown_version",),
        breaks="a view's LAST_ALTERED (its DDL) stands for its rows: changed base tables are never reloaded",
    ),
    Mutant(
        id="srcver-epoch-is-a-time",
        file="snowflake/source_version.py",
        old="    if at is None or at <= EPOCH:",
        new="    if at is None:",
        tests=(f"{T_SRCVER}::test_anything_but_a_base_table_with_its_metadata_is_an_unknown_version",),
        breaks="a LAST_ALTERED at the epoch (no real time) is a version: changes keeping the row count are missed",
    ),
    Mutant(
        id="srcver-bytes-not-compared",
        file="snowflake/source_version.py",
        old="    if now.version is None or recorded is None or recorded != now.version:",
        new=(
            "    if now.version is None or recorded is None or (recorded.table, recorded.last_altered, "
            "recorded.row_count) != (now.version.table, now.version.last_altered, now.version.row_count):"
        ),
        tests=(f"{T_SRCVER}::test_unchanged_only_when_every_field_is_equal",),
        breaks="a change of BYTES alone (an update in place under a coarse LAST_ALTERED) is skipped",
    ),
    Mutant(
        id="srcver-table-not-compared",
        file="snowflake/source_version.py",
        old="    if now.version is None or recorded is None or recorded != now.version:",
        new=(
            "    if now.version is None or recorded is None or (recorded.last_altered, recorded.row_count, "
            "recorded.bytes) != (now.version.last_altered, now.version.row_count, now.version.bytes):"
        ),
        tests=(f"{T_SRCVER}::test_unchanged_only_when_every_field_is_equal",),
        breaks="a config pointing at another table with the same version numbers skips the reload",
    ),
    Mutant(
        id="srcver-session-zone-kept",
        file="snowflake/source_version.py",
        old="    return dt.astimezone(UTC)\n",
        new="    return dt\n",
        tests=(f"{T_SRCVER}::test_a_base_table_has_a_version_in_utc_whatever_the_session_zone",),
        breaks="the same instant read in another session zone is another version: a needless reload",
    ),
    Mutant(
        id="srcver-names-upper-cased",
        file="snowflake/source_version.py",
        old="    return quote_identifier(part)[1:-1]",
        new="    return part.upper()",
        tests=(f"{T_SRCVER}::test_the_query_binds_schema_and_table_as_snowflake_stores_them_and_quotes_the_database",),
        breaks="a quoted mixed-case table is not found: its version is unknown and it reloads every run",
    ),
    Mutant(
        id="plan-srcver-asked-full-refresh-skipped",
        file="load/plan.py",
        old="        if mode is Mode.INCREMENTAL:\n            last = recorded_source_version(table)",
        new="        if True:\n            last = recorded_source_version(table)",
        tests=(f"{T_PLAN}::test_an_asked_full_refresh_reloads_an_unchanged_source",),
        breaks="a full_refresh asked by hand is skipped when the source looks unchanged",
        area=SRCVER,
    ),
    Mutant(
        id="plan-srcver-foreign-commit-trusted",
        file="load/plan.py",
        old="    if current is None or current.snapshot_id != st.snapshot_id:",
        new="    if current is None:",
        tests=(f"{T_PLAN}::test_a_commit_by_another_writer_after_the_load_makes_the_next_run_reload",),
        breaks="after another engine changed the table, an unchanged source is not reloaded: the lake stays wrong",
        area=SRCVER,
    ),
    Mutant(
        id="plan-srcver-property-copy-trusted",
        file="load/plan.py",
        old="    if table is None or st is None or st.from_properties:",
        new="    if table is None or st is None:",
        tests=(f"{T_PLAN}::test_a_commit_by_another_writer_still_reloads_once_expiry_took_snowbergs_snapshot",),
        breaks="once expiry took snowberg's snapshot, another engine's change is never repaired by a reload",
        area=SRCVER,
    ),
    Mutant(
        id="plan-srcver-not-recorded",
        file="load/plan.py",
        old="if observed.version else {}) | watched | policies,",
        new="if False else {}) | watched | policies,",
        tests=(f"{T_PLAN}::test_unchanged_source_is_not_reloaded_and_a_change_is",),
        breaks="no version is recorded: an unchanged source is reloaded every run (cost follows the table)",
        area=SRCVER,
    ),
    # ------------------------------------------------------------------ iceberg/current.py
    Mutant(
        id="current-slower-run-moves-the-proof-back",
        file="iceberg/current.py",
        old="    if earlier is not None and earlier.instant >= proof.instant:",
        new="    if False:",
        tests=(f"{T_CURRENT}::test_a_slower_run_never_moves_the_proof_back",),
        breaks="a slower run records an older proof over a newer one: a false staleness alert",
    ),
    Mutant(
        id="current-proof-holds-for-any-watermark",
        file="iceberg/current.py",
        old="        return (st.watermark if st is not None else None) == self.watermark",
        new="        return True",
        tests=(f"{T_FRESH}::test_a_proof_made_on_another_watermark_does_not_count",),
        breaks="a proof made before a rollback keeps a table fresh whose watermark moved back: a missed alert",
    ),
    Mutant(
        id="current-unreadable-time-accepted",
        file="iceberg/current.py",
        old="        proof.instant  # noqa: B018",
        new="        pass  # noqa: B018",
        tests=(f"{T_CURRENT}::test_a_proof_whose_time_cannot_be_read_is_no_proof",),
        breaks="a proof whose time cannot be read is returned: the freshness check crashes comparing it",
    ),
    Mutant(
        id="current-proof-overwrites-the-watermark-mirror",
        file="iceberg/current.py",
        old='    return IcebergName.parse(target).variable_key("current")',
        new='    return IcebergName.parse(target).variable_key("watermark")',
        tests=(f"{T_CURRENT}::test_a_proof_is_a_variable_beside_the_watermark_mirror",),
        breaks="the proof is written over the watermark mirror: the next load refuses the Variable",
    ),
    # ------------------------------------------------------------------ airflow/operators/idle.py
    Mutant(
        id="idle-teardown-skipped",
        file="airflow/operators/idle.py",
        old='        if not getattr(t, "is_teardown", False) and t.task_id not in keep',
        new="        if t.task_id not in keep",
        tests=(f"{T_IDLE}::test_the_skip_leaves_teardown_tasks_out",),
        breaks="an idle run skips teardown tasks too: what they release stays held",
    ),
    Mutant(
        id="idle-result-not-pushed",
        file="airflow/operators/idle.py",
        old='    ti.xcom_push(key="return_value", value=result)',
        new="    pass",
        tests=(f"{T_IDLE}::test_the_skip_leaves_teardown_tasks_out",),
        breaks="an idle plan hands no window on: downstream readers of its XCom find nothing",
    ),
    Mutant(
        id="idle-upstream-skipped",
        file="airflow/operators/idle.py",
        old="operator.get_flat_relatives(upstream=False)",
        new="operator.get_flat_relatives(upstream=True)",
        tests=(f"{T_IDLE}::test_the_skip_leaves_teardown_tasks_out",),
        breaks="an idle run skips the wrong tasks and runs the load after a plan that found nothing",
    ),
    Mutant(
        id="idle-proof-not-recorded",
        file="airflow/operators/idle.py",
        old="    record_proof(target, proof, AirflowVariables())",
        new="    pass",
        tests=(
            f"{T_STREAMS_OP}::test_an_idle_run_ends_in_consume_with_one_statement_records_the_proof_and_skips_the_rest",
        ),
        breaks="an idle run proves nothing: a quiet source alerts as stale",
    ),
    # ------------------------------------------------------------------ iceberg/deletes.py
    Mutant(
        id="deletes-summary-trusted-with-delete-files",
        file="iceberg/deletes.py",
        old='        if int(p.get("total-delete-files") or 0):\n            return None',
        new="        pass",
        tests=(
            f"{T_DELETES}::test_a_summary_counting_delete_files_but_not_their_positions_is_not_taken_as_the_row_count",
        ),
        breaks="a summary without position counts gives total-records: hidden rows are counted as live",
    ),
    Mutant(
        id="deletes-summary-trusted-with-position-deletes",
        file="iceberg/deletes.py",
        old='        if int(p.get("total-position-deletes") or 0) or int(p.get("total-equality-deletes") or 0):',
        new='        if int(p.get("total-equality-deletes") or 0):',
        tests=(
            f"{T_DELETES}::test_a_summary_counting_delete_files_but_not_their_positions_is_not_taken_as_the_row_count",
        ),
        breaks="a summary without delete-file counts gives total-records: hidden rows are counted as live",
    ),
    Mutant(
        id="deletes-equality-deletes-counted-as-nothing",
        file="iceberg/deletes.py",
        old="        if self.equality_deletes:\n            return None",
        new="        pass",
        tests=(f"{T_DELETES}::test_live_rows_is_unknown_with_equality_deletes",),
        breaks="a table with another engine's equality deletes reports its data rows as live",
    ),
    Mutant(
        id="deletes-dangling-positions-subtracted",
        file="iceberg/deletes.py",
        old="            rows -= sum(n for path, n in delete_targets(io, d).items() if path in self.data)",
        new="            rows -= sum(n for path, n in delete_targets(io, d).items())",
        tests=(f"{T_DELETES}::test_a_delete_file_naming_several_data_files_counts_only_for_the_live_ones",),
        breaks="positions of removed data files are subtracted too: live rows under-counted",
    ),
    Mutant(
        id="deletes-shared-file-read-as-file-scoped",
        file="iceberg/deletes.py",
        old="    if lo is not None and lo == hi:",
        new="    if lo is not None:",
        tests=(f"{T_DELETES}::test_a_delete_file_naming_several_data_files_counts_only_for_the_live_ones",),
        breaks="a delete file naming several data files counts all its positions for the first one",
    ),
    Mutant(
        id="deletes-dangling-never-dropped",
        file="iceberg/deletes.py",
        old="    gone = dangling_delete_files(io, meta.current_snapshot())",
        new="    gone: list[Any] = []",
        tests=(f"{T_DELETES}::test_a_delete_file_naming_several_data_files_counts_only_for_the_live_ones",),
        breaks="delete files of removed data files stay forever: summaries miscount, compaction cannot empty them",
    ),
    Mutant(
        id="deletes-cleanup-not-a-replace",
        file="iceberg/deletes.py",
        old="            return Summary(operation=Operation.REPLACE, **s.additional_properties)",
        new="            return s",
        tests=(f"{T_DELETES}::test_the_clean_up_snapshot_keeps_the_state_and_changes_no_row",),
        breaks="the clean-up is an overwrite: syncs and scopes read it as a change of rows",
    ),
)

MUTANTS: tuple[Mutant, ...] = CORE_MUTANTS + LAST_ROUND_MUTANTS
SETS = {"all": MUTANTS, "core": CORE_MUTANTS, "last-round": LAST_ROUND_MUTANTS}


# ---------------------------------------------------------------------------
# Checking the list


def _test_file_and_name(node: str) -> tuple[str, str | None]:
    path, _, rest = node.partition("::")
    return path, (rest.split("[")[0].split("::")[-1] or None) if rest else None


def check_mutants(mutants: Sequence[Mutant] = MUTANTS, root: Path = ROOT) -> list[str]:
    """Every problem with the list: unknown files, old text not exactly once, tests that do not exist."""
    problems: list[str] = []
    seen: set[str] = set()
    for m in mutants:
        if m.id in seen:
            problems.append(f"{m.id}: id used twice")
        seen.add(m.id)
        if m.file not in MODULES:
            problems.append(f"{m.id}: {m.file} is not one of the guarded modules {MODULES}")
            continue
        if m.area and m.area not in MODULES:
            problems.append(f"{m.id}: area {m.area} is not one of the guarded modules")
        text = (root / "plugins" / "snowberg" / m.file).read_text()
        n = text.count(m.old)
        if n != 1:
            problems.append(f"{m.id}: the old text occurs {n} times in {m.file} (must be exactly once)")
        if m.old == m.new:
            problems.append(f"{m.id}: old and new text are the same")
        if not m.tests:
            problems.append(f"{m.id}: no tests")
        for node in m.tests:
            path, name = _test_file_and_name(node)
            f = root / path
            if not f.is_file():
                problems.append(f"{m.id}: test file {path} does not exist")
            elif name is not None and not re.search(rf"^def {re.escape(name)}\(", f.read_text(), re.M):
                problems.append(f"{m.id}: no test {name} in {path}")
    return problems


# ---------------------------------------------------------------------------
# Running


@dataclass(kw_only=True)
class Outcome:
    id: str
    result: str  # killed | survived | timeout | error
    seconds: float
    failed: list[str] = field(default_factory=list)  # the tests that failed (killed it)
    harmless: str = ""
    tail: str = ""


def copy_tree(dst: Path) -> Path:
    """A copy of what the tests need; the shared venv imports snowberg from it through PYTHONPATH."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache", ".ruff_cache")
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=ignore)
        elif src.is_file():
            shutil.copy2(src, dst / name)
    return dst


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "plugins"), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutated module must never be served from a stale .pyc
    env["PATH"] = os.pathsep.join([str(Path(PYTHON).parent), env.get("PATH", "")])  # the venv's tools first
    return env


def check_copy_is_imported(tree: Path) -> None:
    """Refuse to run when the tests would import snowberg from somewhere else than the copy."""
    out = subprocess.run(
        [PYTHON, "-c", "import snowberg.iceberg.gate as g; print(g.__file__)"],
        cwd=tree,
        env=_env(tree),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(out).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the tests would import snowberg from {out}, not from the mutated copy {tree}")


def run_tests(tree: Path, tests: Sequence[str], timeout: float) -> tuple[str, list[str], str, float]:
    """Run ``tests`` in ``tree``: (passed | failed | timeout | error, failed test ids, output tail, seconds)."""
    cmd = [PYTHON, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-rfE", *tests]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=tree,
        env=_env(tree),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the pytest run and the services its fixtures started
        out, _ = proc.communicate()
        return "timeout", [], out[-2000:], time.monotonic() - t0
    seconds = time.monotonic() - t0
    failed = [
        line.split(" ", 1)[1].split(" - ")[0] for line in out.splitlines() if line.startswith(("FAILED ", "ERROR "))
    ]
    if proc.returncode == 0:
        return "passed", [], out[-2000:], seconds
    if proc.returncode in (1, 2) and (failed or "error" in out.lower()):
        return "failed", failed, out[-2000:], seconds
    return "error", failed, out[-2000:], seconds  # no tests collected, bad node id, pytest usage error


def run_mutant(m: Mutant, tree: Path, timeout: float) -> Outcome:
    """Apply ``m`` in ``tree``, run its tests, put the file back."""
    path = tree / "plugins" / "snowberg" / m.file
    original = path.read_text()
    if original.count(m.old) != 1:
        return Outcome(id=m.id, result="error", seconds=0.0, tail=f"old text occurs {original.count(m.old)} times")
    path.write_text(original.replace(m.old, m.new))
    try:
        res, failed, tail, seconds = run_tests(tree, m.tests, timeout)
    finally:
        path.write_text(original)
    result = {"failed": "killed", "passed": "survived"}.get(res, res)
    return Outcome(id=m.id, result=result, seconds=seconds, failed=failed, harmless=m.harmless, tail=tail)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated mutant ids (default: all)")
    ap.add_argument(
        "--set",
        choices=sorted(SETS),
        default="all",
        help="which list: core (the exactly-once core), last-round (state adoption, staging, keyed syncs, …), all",
    )
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--check", action="store_true", help="check the list is well-formed and exit")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per mutant's tests (default 600)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once, each in its own copy (default 1)")
    ap.add_argument("--no-baseline", action="store_true", help="skip running the unmutated tests first")
    ap.add_argument("--fail-under", type=float, default=90.0, help="minimum kill rate in percent (default 90)")
    ap.add_argument("--json", type=Path, help="write the outcomes to this file")
    args = ap.parse_args(argv)

    problems = check_mutants()
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    if args.check:
        print(f"{len(MUTANTS)} mutants, well-formed")
        return 0
    chosen = [m for m in SETS[args.set] if not args.only or m.id in set(args.only.split(","))]
    unknown = set(filter(None, args.only.split(","))) - {m.id for m in MUTANTS}
    if unknown:
        print(f"unknown mutant ids: {sorted(unknown)}", file=sys.stderr)
        return 1
    if args.list:
        for m in chosen:
            print(f"{m.id:48} {m.module:28} {' '.join(m.tests)}")
        return 0

    with tempfile.TemporaryDirectory(prefix="snowberg-mutants-") as tmp:
        trees = [copy_tree(Path(tmp) / f"tree{i}") for i in range(max(1, args.jobs))]
        check_copy_is_imported(trees[0])
        if not args.no_baseline:
            tests = sorted({t for m in chosen for t in m.tests})
            print(f"baseline: {len(tests)} test selections, unmutated ...", flush=True)
            res, failed, tail, seconds = run_tests(trees[0], tests, args.timeout * 3)
            if res != "passed":
                print(f"the unmutated tests do not pass ({res}, {seconds:.0f} s): {failed}\n{tail}", file=sys.stderr)
                return 2
            print(f"baseline: passed in {seconds:.0f} s", flush=True)
        free = list(trees)
        outcomes: list[Outcome] = []

        def one(m: Mutant) -> Outcome:
            tree = free.pop()
            try:
                o = run_mutant(m, tree, args.timeout)
            finally:
                free.append(tree)
            mark = {"killed": "KILLED  ", "survived": "SURVIVED", "timeout": "TIMEOUT ", "error": "ERROR   "}[o.result]
            why = o.failed[0] if o.failed else (o.harmless and f"known: {o.harmless}") or ""
            print(f"{mark} {o.id:48} {o.seconds:6.0f} s  {why}", flush=True)
            return o

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            outcomes = list(pool.map(one, chosen))

    killed = [o for o in outcomes if o.result in ("killed", "timeout")]
    survived = [o for o in outcomes if o.result == "survived"]
    errors = [o for o in outcomes if o.result == "error"]
    rate = 100.0 * len(killed) / len(outcomes) if outcomes else 100.0
    timeouts = sum(o.result == "timeout" for o in outcomes)
    summary = f"\n{len(killed)} of {len(outcomes)} killed ({rate:.0f} %), {len(survived)} survived"
    if timeouts:
        summary += f" ({timeouts} of the killed by the timeout)"
    if errors:
        summary += f", {len(errors)} errors"
    print(summary)
    by_module: dict[str, list[Outcome]] = {}
    module_of = {m.id: m.module for m in chosen}
    for o in outcomes:
        by_module.setdefault(module_of[o.id], []).append(o)
    for mod, outs in sorted(by_module.items()):
        k = sum(o.result in ("killed", "timeout") for o in outs)
        print(f"  {mod:30} {k:3} of {len(outs):3} killed ({100.0 * k / len(outs):.0f} %)")
    for o in errors:
        print(f"  error {o.id}:\n{o.tail}", file=sys.stderr)
    new_survivors = [o.id for o in survived if not o.harmless]
    for o in survived:
        print(f"  survived {o.id}: {o.harmless or 'NOT KNOWN: add a test that kills it'}")
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=2) + "\n")
    return 0 if rate >= args.fail_under and not new_survivors and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
