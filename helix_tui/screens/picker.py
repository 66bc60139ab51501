"""`helix FOLDER` on a folder of workspaces: pick one (returns its path)."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from helix_tui.render import plain


class PickerApp(App[Path]):
    BINDINGS = [Binding("q,escape", "quit", "Quit")]

    def __init__(self, workspaces: list[Path]) -> None:
        super().__init__()
        self.workspaces = workspaces

    def compose(self) -> ComposeResult:
        yield Static(f"{len(self.workspaces)} workspaces: pick one (enter)")
        yield OptionList(*[Option(plain(p.name), id=str(i)) for i, p in enumerate(self.workspaces)], id="workspaces")
        yield Footer()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.exit(self.workspaces[int(event.option.id or 0)])
