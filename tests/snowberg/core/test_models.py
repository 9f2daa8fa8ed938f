"""The strict config model base: a typo is an error, a model never changes, durations read as in YAML."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from snowberg.core.models import Duration, StrictModel


class Settings(StrictModel):
    every: Duration = timedelta(minutes=5)
    name: str = "x"


def test_an_unknown_key_is_refused_not_ignored() -> None:
    with pytest.raises(ValidationError, match=r"evrey\n  Extra inputs are not permitted"):
        Settings.model_validate({"evrey": "5m"})


def test_a_model_cannot_be_changed_after_validation() -> None:
    s = Settings()
    with pytest.raises(ValidationError, match="frozen"):
        s.name = "y"
    assert s.name == "x"


@pytest.mark.parametrize(
    ("value", "expected"), [("90s", timedelta(seconds=90)), ("PT2H", timedelta(hours=2)), (30, timedelta(seconds=30))]
)
def test_a_duration_field_takes_short_forms_iso_and_seconds(value: object, expected: timedelta) -> None:
    assert Settings.model_validate({"every": value}).every == expected


def test_a_bad_duration_is_refused_naming_the_field_and_the_forms_that_work() -> None:
    with pytest.raises(ValidationError, match=r"every\n  Value error, not a duration: 'soon' \(use e\.g\. '90s'"):
        Settings.model_validate({"every": "soon"})
