"""The Hotspots pane lists the knowledge cards its profile routes to; enter or `k` opens one
as a modal with the same text as `helix patterns show NAME` (real profiler fixtures)."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.widgets import OptionList

from helix_engine.knowledge.cards import load_card
from helix_tui.app import HelixApp
from helix_tui.screens.card import CardScreen
from helix_tui.widgets.hotspots import HotspotsPane

from cockpit_helpers import cockpit, wait_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _card_text(app: HelixApp) -> str:
    return getattr(app.screen.query_one("#card-text"), "plain", "")


async def test_hotspots_pane_lists_routed_cards_and_k_or_enter_opens_one(ws: Path) -> None:
    shutil.copytree(FIXTURES / "ascend-profiler" / "realistic_parent_layout", ws / "opt-round-2" / "profile")
    async with cockpit(ws, (120, 40)) as (app, pilot):
        app.selected = "opt-round-2"
        await pilot.press("4")
        pane = app.main.query_one("#hotspots-pane", HotspotsPane)
        assert await wait_for(pilot, lambda: len(pane.cards) > 2)
        # the transfer-bound matmul routes to the memory-bound symptom card first, then its patterns
        assert pane.cards[:3] == ["memory-bound", "tiling", "effective-extent-tiling"]
        assert "on-chip-reuse" in pane.cards and pane.cards[-1] == "index"
        options = app.main.query_one("#hotspot-cards", OptionList)
        assert str(options.get_option_at_index(0).prompt).startswith("memory-bound  Time goes to moving data")
        assert "memory-bound" in app.main.query_one("#hotspots").plain  # the report is still below

        await pilot.press("k")  # the highlighted card, from anywhere in the cockpit
        assert await wait_for(pilot, lambda: isinstance(app.screen, CardScreen))
        assert await wait_for(pilot, lambda: _card_text(app).startswith("# memory-bound\n"))
        assert "## Candidate cards" in _card_text(app)
        await pilot.press("escape")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, CardScreen))

        options.focus()
        options.highlighted = pane.cards.index("tiling")
        await pilot.press("enter")  # enter on a routed card opens that one
        assert await wait_for(pilot, lambda: isinstance(app.screen, CardScreen) and app.screen.card_name == "tiling")
        assert await wait_for(pilot, lambda: _card_text(app) == load_card("tiling").text)
        await pilot.press("q")
        assert await wait_for(pilot, lambda: not isinstance(app.screen, CardScreen))


async def test_without_a_profile_k_opens_the_index(ws: Path) -> None:
    async with cockpit(ws, (80, 24)) as (app, pilot):
        app.selected = "opt-round-1"
        await pilot.press("4")
        pane = app.main.query_one("#hotspots-pane", HotspotsPane)
        assert await wait_for(pilot, lambda: "No profile for opt-round-1" in app.main.query_one("#hotspots").plain)
        assert pane.cards == ["index"]
        assert "no card routed" in str(app.main.query_one("#hotspot-cards-title").render())
        await pilot.press("k")
        assert await wait_for(pilot, lambda: isinstance(app.screen, CardScreen) and app.screen.card_name == "index")
        assert await wait_for(pilot, lambda: _card_text(app).startswith("# index\n"))
