"""`helix [WORKSPACE]` / `helix tui`: the entry point refuses a non-workspace with a sentence,
and a folder of workspaces opens a picker."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable

from helix_tui.app import run_cockpit
from helix_tui.screens.picker import PickerApp

from cockpit_helpers import make_workspace


def test_not_a_workspace_is_a_sentence_not_a_traceback(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert run_cockpit([str(tmp_path / "missing")]) == 1
    assert "is not an operator workspace" in capsys.readouterr().err


async def test_picker_returns_the_chosen_workspace(tmp_path: Path) -> None:
    first = make_workspace(tmp_path / "a")
    second = make_workspace(tmp_path / "b")
    app = PickerApp([first, second])
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.screen.query_one(DataTable).row_count == 2
        await pilot.press("down", "enter")
    assert app.return_value == second


def test_a_round_or_baseline_folder_opens_its_workspace(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """`helix .` typed inside opt-round-1/ opened the round folder as a workspace with no
    operator, its own perf file shown as the "baseline"."""
    import helix_tui.app as app_module

    ws = make_workspace(tmp_path)
    opened: list[Path] = []

    class Recorder:
        def __init__(self, path: Path, **_: object) -> None:
            opened.append(Path(path))

        def run(self) -> int:
            return 0

    monkeypatch.setattr(app_module, "HelixApp", Recorder)
    monkeypatch.setattr(app_module, "_has_terminal", lambda: True)
    for inner in (ws / "opt-round-1", ws / "baseline"):
        assert run_cockpit([str(inner)]) == 0
        assert opened.pop().resolve() == ws.resolve()
    monkeypatch.chdir(ws / "opt-round-2")
    assert run_cockpit([]) == 0
    assert opened.pop().resolve() == ws.resolve()


def test_without_a_terminal_the_cockpit_says_what_to_run_instead(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """An agent's pipe (no TTY): the cockpit drew into it and waited for keys forever."""
    import subprocess
    import sys

    ws = make_workspace(tmp_path)
    done = subprocess.run([sys.executable, "-c", "import sys; from helix_tui.cli import main; sys.exit(main(sys.argv[1:]))",
                           str(ws)], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == ""
    assert "the cockpit needs a terminal" in done.stderr and f"`helix status {ws}`" in done.stderr
