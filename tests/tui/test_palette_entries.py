"""The command palette lists each action once (issue 13, finding 10: two "Quit" entries)."""

from __future__ import annotations

from pathlib import Path

from textual.command import CommandList

from helix_tui.app import HelixApp

from cockpit_helpers import cockpit, type_text, wait_for


def _prompts(app: HelixApp) -> list[str]:
    options = app.screen.query_one(CommandList)
    return [str(options.get_option_at_index(i).prompt).split("\n")[0] for i in range(options.option_count)]


async def test_palette_has_one_quit(ws: Path) -> None:
    async with cockpit(ws, (120, 36)) as (app, pilot):
        await pilot.press("ctrl+p")
        await type_text(pilot, "quit")
        assert await wait_for(pilot, lambda: "Quit" in " ".join(_prompts(app)))
        await pilot.pause(0.3)  # let every provider answer
        assert [p for p in _prompts(app) if p.strip() == "Quit"] == ["Quit"], _prompts(app)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: app._exit)


async def test_palette_still_offers_every_other_action(ws: Path) -> None:
    async with cockpit(ws, (120, 36)) as (app, pilot):
        await pilot.press("ctrl+p")
        await type_text(pilot, "diff pane")
        assert await wait_for(pilot, lambda: any("Diff pane" in p for p in _prompts(app)))
