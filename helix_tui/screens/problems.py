"""Every problem the snapshot found (file, line, what to do), in one table."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from helix_engine.workspace.models import WorkspaceSnapshot
from helix_tui.render import all_problems


class ProblemsScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,exclamation_mark", "dismiss", "Close")]

    DEFAULT_CSS = """
    ProblemsScreen { align: center middle; }
    ProblemsScreen > Vertical { width: 95%; height: 90%; border: round $error; background: $surface; }
    ProblemsScreen DataTable { height: 1fr; }
    """

    def __init__(self, snapshot: WorkspaceSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def compose(self) -> ComposeResult:
        found = all_problems(self.snapshot)
        with Vertical():
            yield Static(f"{len(found)} problem(s) in {self.snapshot.name}  (esc closes)", id="problems-title")
            yield DataTable(id="problems-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("where", "severity", "file", "line", "problem")
        for where, problem in all_problems(self.snapshot):
            table.add_row(where, problem.severity, problem.file, str(problem.line or ""), problem.message)
        table.focus()
