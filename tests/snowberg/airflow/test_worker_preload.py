"""``snowberg.airflow.worker_preload``: a library that cannot be imported is left to the tasks, the rest still loads."""

from __future__ import annotations

import logging
import sys

import pytest

import snowberg.airflow.worker_preload as worker_preload


def test_a_module_that_cannot_be_imported_is_logged_and_the_others_still_load(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(worker_preload, "PRELOAD_MODULES", ("snowberg_no_such_module", "json", "snowberg.core.window"))
    monkeypatch.delitem(sys.modules, "snowberg.core.window", raising=False)
    with caplog.at_level(logging.WARNING, logger=worker_preload.__name__):
        failed = worker_preload.preload()
    assert failed == ["snowberg_no_such_module"]
    assert "snowberg.core.window" in sys.modules
    assert "cannot import snowberg_no_such_module" in caplog.text
