"""`helix [WORKSPACE]` / `helix tui`: the entry point refuses a non-workspace with a sentence,
and a folder of workspaces opens a picker."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import OptionList

from cockpit_helpers import make_workspace
from helix_tui.app import run_cockpit
from helix_tui.screens.picker import PickerApp


def test_not_a_workspace_is_a_sentence_not_a_traceback(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert run_cockpit([str(tmp_path / "missing")]) == 1
    assert "is not an operator workspace" in capsys.readouterr().err


async def test_picker_returns_the_chosen_workspace(tmp_path: Path) -> None:
    first = make_workspace(tmp_path / "a")
    second = make_workspace(tmp_path / "b")
    app = PickerApp([first, second])
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.query_one(OptionList).option_count == 2
        await pilot.press("down", "enter")
    assert app.return_value == second
