"""The Hotspots pane: the profile report, and above it the knowledge cards its symptoms route
to (enter opens the highlighted one; `k` opens it from anywhere in the cockpit)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import OptionList, Static

from helix_tui.render import plain
from helix_tui.widgets.panes import TextPane


class HotspotsPane(Vertical):
    """Routed cards (an OptionList of card names, never workspace text) over the report."""

    DEFAULT_CSS = """
    HotspotsPane #hotspot-cards-title { height: 1; padding: 0 1; color: $text-muted; }
    HotspotsPane #hotspot-cards { height: auto; max-height: 7; }
    HotspotsPane TextPane { height: 1fr; }
    """

    cards: list[str] = []  # card names by option index
    _width: int | None = None  # the text width the shown report was laid out for

    def text_width(self) -> int | None:
        """Columns the report's text has (the pane less its scrollbar). Before the pane is laid
        out (its tab was just opened), the tabs' width: the report is laid out once, not twice."""
        width = self.query_one("#hotspots", TextPane).size.width
        if width <= 8:
            tabs = next((node for node in self.ancestors if isinstance(node, Widget) and node.id == "tabs"), None)
            width = tabs.size.width if isinstance(tabs, Widget) else 0
        self._width = width - 2 if width > 8 else None
        return self._width

    def on_resize(self) -> None:
        """Another width may fit other table columns: lay the report out again."""
        width = self.query_one("#hotspots", TextPane).size.width
        if width > 8 and width - 2 != self._width and hasattr(self.app, "refresh_lazy_panes"):
            self.call_after_refresh(self.app.refresh_lazy_panes)

    def compose(self) -> ComposeResult:
        yield Static("", id="hotspot-cards-title")
        yield OptionList(id="hotspot-cards")
        yield TextPane(id="hotspots")

    def show(self, text: str, cards: list[str], lexer: str | None = "markdown") -> None:
        from helix_engine.knowledge.cards import has_card, load_card

        self.query_one("#hotspots", TextPane).show(text, lexer)
        cards = [c for c in cards if has_card(c) or c == "index"]
        options = self.query_one("#hotspot-cards", OptionList)
        if cards != self.cards or options.option_count != len(cards):
            self.cards = list(cards)
            options.clear_options()
            options.add_options([plain(f"{name}  {load_card(name).summary}") for name in cards])
            if cards:
                options.highlighted = 0
        routed = len([c for c in cards if c != "index"])
        title = (f"{routed} pattern card(s) for this profile · enter or k opens one" if routed
                 else "no card routed from this profile · enter or k opens the index")
        self.query_one("#hotspot-cards-title", Static).update(plain(title))

    @property
    def highlighted_card(self) -> str | None:
        index = self.query_one("#hotspot-cards", OptionList).highlighted
        if index is not None and 0 <= index < len(self.cards):
            return self.cards[index]
        return self.cards[0] if self.cards else None

    async def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "hotspot-cards" and 0 <= event.option_index < len(self.cards):
            event.stop()
            await self.app.run_action(f"pattern_card('{self.cards[event.option_index]}')")
