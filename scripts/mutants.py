"""Targeted mutation testing of the exactly-once core: would a regression here fail a test?

Each mutant is one small, deliberate bug — a bound made exclusive, a guard
removed, a comparison that drops a term — in the modules that decide what is
loaded once: the commit gate, the watermark state, the planner, cursor values,
the merge, rollback and the volume check's hash diff. The script applies each
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


MUTANTS: tuple[Mutant, ...] = (
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
        if m.file not in CORE:
            problems.append(f"{m.id}: {m.file} is not one of the core modules {CORE}")
            continue
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
    chosen = [m for m in MUTANTS if not args.only or m.id in set(args.only.split(","))]
    unknown = set(filter(None, args.only.split(","))) - {m.id for m in MUTANTS}
    if unknown:
        print(f"unknown mutant ids: {sorted(unknown)}", file=sys.stderr)
        return 1
    if args.list:
        for m in chosen:
            print(f"{m.id:48} {m.file:22} {' '.join(m.tests)}")
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
