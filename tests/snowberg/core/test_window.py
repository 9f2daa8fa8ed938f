"""Window: built by keyword, modes and cursor kinds as StrEnums that survive XCom."""

from __future__ import annotations

import json

import pytest

from snowberg.core.cursor import CursorKind
from snowberg.core.window import Mode, Window


def test_window_is_built_by_keyword_only() -> None:
    with pytest.raises(TypeError):
        Window(Mode.FULL_REFRESH, None, None, 0)  # type: ignore[misc]


def test_window_round_trips_through_json_with_its_enums() -> None:
    w = Window(mode=Mode.BACKFILL, cursor_column="c", cursor_kind=CursorKind.DATE, low="2026-09-01", high="2026-09-02")
    d = json.loads(json.dumps(w.to_dict()))
    assert d["mode"] == "backfill" and d["cursor_kind"] == "date"
    back = Window.from_dict(d)
    assert back == w and back.mode is Mode.BACKFILL and back.cursor_kind is CursorKind.DATE


def test_modes_compare_equal_to_their_old_text() -> None:
    assert [m.value for m in Mode] == ["incremental", "backfill", "full_refresh"]
    assert Mode.INCREMENTAL == "incremental"
    with pytest.raises(ValueError):
        Window(mode="sideways")
