"""The suite's pytest-xdist scheduler: load scheduling, with whole test folders kept on one worker.

Used by ``tests/conftest.py`` (``pytest_xdist_make_scheduler``). Two things pytest-xdist 3.8 (the newest
release) does not do for us:

* ``--dist loadgroup`` with ``xdist_group`` marks groups nothing on pytest 9 (xdist names a test's group by
  rewriting ``item._nodeid``, which pytest 9 no longer reads), so the folders are grouped here by path;
* after a worker crash, ``LoadScopeScheduling`` puts the dead worker's whole workload back on the queue,
  finished work units and the test that crashed included, and gives the replacement worker a single test
  it cannot start (a worker starts an item only once it knows the next one, or is told to shut down). The
  session then waits forever with idle workers: a crash near the end of a CI run became a 90-minute
  timeout without a report (pytest-dev/pytest-xdist issues 1323, 1327, 1378; fixes merged upstream after
  3.8.0, none released). Here only unfinished work goes back, without the test that crashed (xdist has
  already reported it as failed), and a worker given the last work is told to shut down, so it runs it.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling


def serial_groups_scheduler(config: Any, log: Any, groups: dict[str, str]) -> LoadScopeScheduling:
    """A scheduler sending every test under ``tests/<folder>`` of ``groups`` to one worker as a whole."""

    class SerialGroups(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            parts = nodeid.split("::", 1)[0].split("/")
            if len(parts) > 2 and parts[0] == "tests" and parts[1] in groups:
                return groups[parts[1]]
            return nodeid  # every other test is a scope of its own, as with --dist load

        def remove_node(self, node: Any) -> str | None:
            workload = self.assigned_work.pop(node)
            unfinished = {scope: unit for scope, unit in workload.items() if not all(unit.values())}
            if not unfinished:
                return None  # a worker shutting down, or one that died after its last test
            crashitem = next(nodeid for unit in unfinished.values() for nodeid, done in unit.items() if not done)
            for unit in unfinished.values():
                if crashitem in unit:
                    unit[crashitem] = True  # reported as failed by xdist; running it again crashes again
            self.workqueue.update({scope: unit for scope, unit in unfinished.items() if not all(unit.values())})
            for other in self.assigned_work:
                self._reschedule(other)
            return crashitem

        def _reschedule(self, node: Any) -> None:
            super()._reschedule(node)
            if not self.workqueue and not node.shutting_down:
                node.shutdown()  # it may hold a single test, which it starts only once told there is no next

    return SerialGroups(config, log)
