"""The `?` screen: every key of the cockpit, from the same table as the footer and palette."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from helix_tui.commands import ACTIONS, display_key


def keys_table() -> Table:
    table = Table(box=None, show_header=True, header_style="bold", expand=False, pad_edge=False)
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("action", no_wrap=True)
    table.add_column("what it does")
    for act in ACTIONS:
        table.add_row(display_key(act.key), act.title, act.help)
    table.add_row("ctrl+p", "Command palette", "Search every action by name")
    table.add_row("tab", "Next pane", "Move the focus: tree, tabs, tables")
    table.add_row("home", "Older lines", "In attempts.md: load the previous chunk of a long file")
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 110; height: 90%; border: round $accent; padding: 0 1; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("helix cockpit keys  (esc closes)", classes="title")
            yield Static(keys_table())
