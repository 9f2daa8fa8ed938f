"""Attempt ids: a DAG run id, plus the clear number once the run was cleared; and back."""

from __future__ import annotations

import pytest

from snowberg.core.attempts import attempt_id, split_attempt


@pytest.mark.parametrize(
    ("run_id", "clear", "attempt"),
    [
        ("scheduled__2026-12-01T00:00:00+00:00", 0, "scheduled__2026-12-01T00:00:00+00:00"),
        ("scheduled__2026-12-01T00:00:00+00:00", 2, "scheduled__2026-12-01T00:00:00+00:00#clear2"),
        ("manual#clear1", 3, "manual#clear1#clear3"),  # a run id that looks like an attempt keeps its own text
    ],
)
def test_an_attempt_id_names_its_dag_run_and_clear_number(run_id: str, clear: int, attempt: str) -> None:
    assert attempt_id(run_id, clear) == attempt
    assert split_attempt(attempt) == (run_id, clear)


def test_text_that_only_resembles_a_clear_suffix_is_a_run_id() -> None:
    assert split_attempt("r#clear") == ("r#clear", 0)
    assert split_attempt("r#clearx") == ("r#clearx", 0)
