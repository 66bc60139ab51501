"""One knowledge card (``helix patterns show NAME``) as a modal: the same text the CLI prints,
rendered as markdown. Opened from the Hotspots pane (enter) or with `k`."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from helix_tui.render import plain
from helix_tui.widgets.panes import TextPane


class CardScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,k", "dismiss", "Close", id="close")]

    DEFAULT_CSS = """
    CardScreen { align: center middle; }
    CardScreen > Vertical { width: 95%; max-width: 120; height: 90%; border: round $accent; background: $surface; }
    CardScreen #card-title { height: 1; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self.card_name = name

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(plain(f"pattern card {self.card_name}  (esc closes; `helix patterns show "
                               f"{self.card_name}` prints it)"), id="card-title")
            yield TextPane(id="card-text")

    def on_mount(self) -> None:
        from helix_engine.knowledge.cards import load_card

        try:
            text = load_card(self.card_name).text
        except (KeyError, OSError) as exc:
            text = f"No card named {self.card_name} ({exc}); `helix patterns list` lists them."
        pane = self.query_one("#card-text", TextPane)
        pane.show(text, "markdown")
        pane.focus()
