"""Keymaps (issue 13): every cockpit binding can be remapped from a TOML file by its id, through
Textual's set_keymap; a file that cannot be used is a sentence, and the default keys stay."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import TabbedContent

from helix_tui.app import HelixApp
from helix_tui.commands import ACTIONS
from helix_tui.keymap import binding_ids, load_keymap, parse_keymap

from cockpit_helpers import cockpit, wait_for


def said(app: HelixApp) -> str:
    return " ".join(str(n.message) for n in app._notifications)


async def test_a_remapped_key_runs_the_action_and_help_shows_it(ws: Path, tmp_path: Path, monkeypatch) -> None:
    keymap = tmp_path / "keys.toml"
    keymap.write_text('pane-jobs = "j"\nhelp = "h"\nclose = "escape,x"\n')
    monkeypatch.setenv("HELIX_KEYMAP", str(keymap))
    async with cockpit(ws, (120, 36)) as (app, pilot):
        tabs = app.main.query_one("#tabs", TabbedContent)
        await pilot.press("3")  # the old key no longer opens the Jobs pane
        await pilot.pause(0.1)
        assert tabs.active != "tab-jobs"
        await pilot.press("j")
        assert await wait_for(pilot, lambda: tabs.active == "tab-jobs")
        await pilot.press("h")  # help on its new key, listing the new keys
        assert await wait_for(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        from rich.console import Console

        from helix_tui.screens.help import keys_table

        console = Console(width=200, record=True, color_system=None)
        console.print(keys_table(app.keys_of))
        rows = {line.split()[0]: line for line in console.export_text().splitlines() if line.strip()}
        assert "pane-jobs" in rows["j"] and "help" in rows["h"] and "3" not in rows
        assert "keys.toml" in " ".join(str(s.render()) for s in app.screen.query("Static"))
        assert app.keys_of(next(a for a in ACTIONS if a.id == "pane-jobs")) == "j"
        await pilot.press("x")  # close remapped for every screen
        assert await wait_for(pilot, lambda: type(app.screen).__name__ == "MainScreen")
        assert said(app) == ""  # a good file says nothing


@pytest.mark.parametrize(
    ("content", "sentence"),
    [('tets = "T"', "'tets' is not a cockpit binding (did you mean 'test'?)"),
     ("bench = ", "not valid TOML"),
     ('bench = "t"', "'t' would run both test and bench"),
     ("bench = 3", 'give the key as a string, e.g. bench = "B"')],
    ids=["unknown-id", "bad-toml", "clash", "not-a-string"],
)
async def test_a_bad_keymap_is_a_sentence_and_the_default_keys_stay(ws: Path, tmp_path: Path, monkeypatch,
                                                                    content: str, sentence: str) -> None:
    keymap = tmp_path / "keys.toml"
    keymap.write_text(content + "\n")
    monkeypatch.setenv("HELIX_KEYMAP", str(keymap))
    async with cockpit(ws, (120, 36)) as (app, pilot):
        assert await wait_for(pilot, lambda: sentence in said(app))
        assert "default keys" in said(app)
        await pilot.press("3")
        assert await wait_for(pilot, lambda: app.main.query_one("#tabs", TabbedContent).active == "tab-jobs")
        assert app.is_running


def test_keymap_files_and_ids(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("HELIX_KEYMAP", raising=False)
    assert load_keymap() == ({}, None)  # no file: no remaps, no complaint
    (tmp_path / "helix").mkdir()
    (tmp_path / "helix" / "keymap.toml").write_text('submit-round = "ctrl+s, S"\n')
    assert load_keymap() == ({"submit-round": "ctrl+s,S"}, None)
    monkeypatch.setenv("HELIX_KEYMAP", str(tmp_path / "missing.toml"))
    keymap, problem = load_keymap()
    assert keymap == {} and "missing.toml does not exist" in problem
    ids = binding_ids()
    assert len({a.id for a in ACTIONS}) == len(ACTIONS)  # one id per action
    assert {"bench", "pane-jobs", "quit", "close", "form-run", "older"} <= set(ids)
    assert parse_keymap('quit = "Q"', ids) == {"quit": "Q"}


def test_the_readme_keymap_example_is_a_valid_keymap() -> None:
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    [example] = re.findall(r"```toml\n(.*?)```", readme, flags=re.S)
    assert parse_keymap(example, binding_ids())["bench"] == "B"
