"""Every problem the snapshot found (file, line, what to do), in one table (plain, escaped text:
a problem quotes file names and values from the workspace)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from helix_engine.sanitize import clean
from helix_engine.workspace.models import WorkspaceSnapshot
from helix_tui.render import all_problems, plain


class ProblemsScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,exclamation_mark", "dismiss", "Close", id="close")]

    DEFAULT_CSS = """
    ProblemsScreen { align: center middle; }
    ProblemsScreen > Vertical { width: 95%; height: 90%; border: round $error; background: $surface; }
    ProblemsScreen DataTable { height: 1fr; }
    ProblemsScreen #problem-detail { height: auto; max-height: 6; padding: 0 1; border-top: solid $error; }
    """

    def __init__(self, snapshot: WorkspaceSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def compose(self) -> ComposeResult:
        found = all_problems(self.snapshot)
        with Vertical():
            yield Static(plain(f"{len(found)} problem(s) in {self.snapshot.name}  (esc closes)"), id="problems-title")
            yield DataTable(id="problems-table", cursor_type="row", zebra_stripes=True)
            # the table cuts the sentence at 80 columns: the highlighted problem, whole and wrapped
            yield Static("", id="problem-detail")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("where", "severity", "file", "line", "problem")
        self.found = all_problems(self.snapshot)
        for where, problem in self.found:
            table.add_row(*(plain(cell) for cell in (where, problem.severity, problem.file, problem.line or "",
                                                        problem.message)))
        table.focus()
        if self.found:
            self._detail(0)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail(event.cursor_row)

    def _detail(self, row: int) -> None:
        if 0 <= row < len(self.found):
            where, problem = self.found[row]
            self.query_one("#problem-detail", Static).update(Text(clean(f"{where} · {problem.severity} · {problem}")))
