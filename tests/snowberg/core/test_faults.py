"""Named crash points: a process told to die at a point dies there, hard; every other run passes through."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from snowberg.core import faults


def test_an_unknown_point_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown fault point 'after_lunch'"):
        faults.crash_point("after_lunch")


def test_points_are_unique() -> None:
    assert len(set(faults.POINTS)) == len(faults.POINTS)


@pytest.mark.parametrize("setting", [None, "before_commit", "raise:after_commit"])
def test_a_point_that_was_not_asked_for_passes(monkeypatch: pytest.MonkeyPatch, setting: str | None) -> None:
    if setting is None:
        monkeypatch.delenv("SNOWBERG_FAULT", raising=False)
    else:
        monkeypatch.setenv("SNOWBERG_FAULT", setting)
    assert faults.crash_point("after_extract") is None


def test_raise_prefix_makes_the_point_raise_instead_of_dying(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SNOWBERG_FAULT", "raise:before_commit")
    with pytest.raises(RuntimeError, match="snowberg: injected failure at before_commit"):
        faults.crash_point("before_commit")


def test_the_named_point_kills_the_process_with_137_and_runs_no_cleanup() -> None:
    child = (
        "import atexit, sys\n"
        "from snowberg.core import faults\n"
        "atexit.register(lambda: print('cleanup ran'))\n"
        "faults.crash_point('after_extract')\n"
        "print('passed after_extract')\n"
        "faults.crash_point('after_commit')\n"
        "print('not reached')\n"
    )
    env = dict(os.environ, SNOWBERG_FAULT="after_commit")
    res = subprocess.run([sys.executable, "-c", child], env=env, text=True, capture_output=True, timeout=60)
    assert res.returncode == 137
    assert res.stdout.splitlines() == ["passed after_extract"]  # no 'not reached', no atexit handler
    assert res.stderr.strip().endswith("snowberg: injected crash at after_commit")
