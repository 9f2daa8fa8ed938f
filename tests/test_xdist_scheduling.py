"""The suite's xdist scheduler survives a worker that dies: the run ends and reports, it does not hang.

A small project runs on two workers with the suite's scheduler; one test kills its worker (``os._exit``)
near the end of the run. pytest-xdist 3.8's own ``LoadScopeScheduling`` hangs there with idle workers
(the session never ends). Here the run must end within the timeout, the dead worker's test reported
failed once (not run again on the replacement worker), every other test run once and passed, and the
grouped folder kept on one worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _project(root: Path) -> None:
    (root / "tests" / "e2e").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "tests" / "conftest.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(TESTS)!r})
            from xdist_scheduling import serial_groups_scheduler

            def pytest_xdist_make_scheduler(config, log):
                return serial_groups_scheduler(config, log, {{"e2e": "stacks"}})
            """
        )
    )
    ok = "\n".join(f"def test_ok_{i}():\n    pass\n" for i in range(12))
    (root / "tests" / "test_a.py").write_text(
        f"import os\n\n{ok}\ndef test_crash():\n    os._exit(3)\n\n\ndef test_after():\n    pass\n"
    )
    seen = root / "e2e-workers.txt"
    body = f"    with open({str(seen)!r}, 'a') as f:\n        f.write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n"
    (root / "tests" / "e2e" / "test_e.py").write_text(f"import os\n\ndef test_e1():\n{body}\ndef test_e2():\n{body}")


def test_a_worker_that_dies_near_the_end_fails_its_test_and_the_run_ends(tmp_path: Path) -> None:
    _project(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SNOWBERG_"))}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "-rA", "tests"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,  # the old scheduler never returns
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed, 15 passed" in out, out
    assert out.count("FAILED tests/test_a.py::test_crash") == 1, out
    assert "replacing crashed worker" in out, out
    workers = (tmp_path / "e2e-workers.txt").read_text().split()
    assert len(workers) == 2 and len(set(workers)) == 1, workers  # the grouped folder ran on one worker
