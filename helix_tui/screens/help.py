"""The `?` screen: every key of the cockpit, from the same table as the footer and palette."""

from __future__ import annotations

from collections.abc import Callable

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from helix_tui.commands import ACTIONS, CockpitAction, display_key
from helix_tui.keymap import KEYMAP_ENV, keymap_path
from helix_tui.render import plain


def keys_table(keys_of: Callable[[CockpitAction], str] | None = None) -> Table:
    """Every key as it is now (``keys_of``: the App's, after the user's keymap), with the id a
    keymap file names to change it."""
    table = Table(box=None, show_header=True, header_style="bold", expand=False, pad_edge=False)
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("action", max_width=16)  # wraps at 80 columns, so "what it does" keeps room
    table.add_column("id", style="dim", no_wrap=True)
    table.add_column("what it does", ratio=1)
    for act in ACTIONS:
        table.add_row(keys_of(act) if keys_of is not None else display_key(act.key), act.title, act.id, act.help)
    table.add_row("ctrl+p", "Command palette", "", "Search every action by name")
    table.add_row("tab", "Next pane", "", "Move the focus: tree, tabs, tables")
    table.add_row("home", "Older lines", "older", "In attempts.md: load the previous chunk of a long file")
    table.add_row("ctrl+s", "Run a form", "form-run", "Start, submit, set state, prepare the baseline")
    table.add_row("escape", "Close", "close", "Close a form or this screen")
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 110; height: 90%; border: round $accent; padding: 0 1;
                                  background: $surface; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("helix cockpit keys  (esc closes)", classes="title")
            yield Static(keys_table(getattr(self.app, "keys_of", None)))
            yield Static(plain(f"Remap any key in {keymap_path()} (or ${KEYMAP_ENV}): one line per id, "
                               'e.g. bench = "B" or submit-round = "ctrl+s,S".', "dim"))
