"""The fleet: many workspaces in one table (best round, geomean, phase, running jobs, last
change); enter opens one. `helix FOLDER` on a folder of workspaces starts here (PickerApp),
and `W` in the cockpit shows the workspaces beside the open one.

Rows come from ``helix_engine.fleet.load_row`` (the snapshot and the jobs registry: the same
numbers as `helix fleet` and `helix status`), loaded one by one in a worker thread that only
posts messages, so a folder of large workspaces shows its names at once and fills in.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from helix_tui.render import plain

if TYPE_CHECKING:
    from helix_engine.fleet import FleetRow

COLUMNS = ("workspace", "phase", "best", "geomean vs baseline", "running jobs", "changed")


class FleetRowLoaded(Message):
    def __init__(self, index: int, row: FleetRow | str) -> None:
        super().__init__()
        self.index, self.row = index, row  # the workspace's row, or a sentence saying why there is none


class FleetListed(Message):
    def __init__(self, workspaces: list[Path]) -> None:
        super().__init__()
        self.workspaces = workspaces


class FleetScreen(Screen[Path | None]):
    """The workspaces of a folder; dismisses with the chosen one (None: closed)."""

    BINDINGS = [Binding("q,escape", "close", "Close"), Binding("r", "reload", "Refresh")]
    DEFAULT_CSS = """
    FleetScreen > Vertical { height: 1fr; }
    FleetScreen #fleet-table { height: 1fr; }
    """

    def __init__(self, workspaces: list[Path] | None = None, *, folder: Path | None = None,
                 current: Path | None = None) -> None:
        super().__init__()
        self.workspaces = list(workspaces or [])
        self.folder = folder
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", id="fleet-title")
            yield DataTable(id="fleet-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*COLUMNS)
        table.focus()
        if self.workspaces or self.folder is None:
            self._fill(self.workspaces)
        else:
            self.query_one("#fleet-title", Static).update(plain(f"looking for workspaces in {self.folder} …"))
            self.list_folder(self.folder)

    @work(thread=True, exclusive=True, group="fleet-list", exit_on_error=False)
    def list_folder(self, folder: Path) -> None:
        from helix_engine.workspace.snapshot import find_workspaces

        self.post_message(FleetListed(find_workspaces(folder)))

    def on_fleet_listed(self, message: FleetListed) -> None:
        self.workspaces = message.workspaces
        self._fill(self.workspaces)

    def _fill(self, workspaces: list[Path]) -> None:
        table = self.query_one(DataTable)
        table.clear()
        where = f" in {self.folder}" if self.folder is not None else ""
        self.query_one("#fleet-title", Static).update(
            plain(f"{len(workspaces)} workspace(s){where}: enter opens one · r refresh · esc closes"))
        for i, path in enumerate(workspaces):
            mark = " ●" if self.current is not None and path.resolve() == self.current.resolve() else ""
            table.add_row(plain(path.name + mark), *(plain("…", "dim") for _ in COLUMNS[1:]), key=str(i))
        if workspaces:
            self.load_rows(list(workspaces))

    @work(thread=True, exclusive=True, group="fleet-rows", exit_on_error=False)
    def load_rows(self, workspaces: list[Path]) -> None:
        from helix_engine.fleet import load_row

        for i, path in enumerate(workspaces):
            try:
                row: FleetRow | str = load_row(path)
            except Exception as exc:  # noqa: BLE001 - one unreadable workspace must not hide the others
                row = f"cannot read it: {exc}"
            self.post_message(FleetRowLoaded(i, row))

    def on_fleet_row_loaded(self, message: FleetRowLoaded) -> None:
        from helix_engine.fleet import age_text, best_text, jobs_text, phase_text

        table = self.query_one(DataTable)
        key = str(message.index)
        row = message.row
        if isinstance(row, str):
            cells = [plain(row, "red"), plain(""), plain(""), plain(""), plain("")]
        else:
            cells = [plain(phase_text(row)), plain(row.best_round, "bold green" if row.best_geomean else ""),
                     plain(best_text(row)), plain(jobs_text(row), "cyan" if row.running else ""),
                     plain(age_text(row.last_change, time.time()))]
        try:
            for column, cell in zip(table.ordered_columns[1:], cells, strict=True):
                table.update_cell(key, column.key, cell)
        except Exception:  # noqa: BLE001 - the table was refilled meanwhile (r)
            return

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        index = int(event.row_key.value or 0)
        if 0 <= index < len(self.workspaces):
            self.dismiss(self.workspaces[index])

    def action_reload(self) -> None:
        if self.folder is not None:
            self.list_folder(self.folder)
        else:
            self._fill(self.workspaces)

    def action_close(self) -> None:
        self.dismiss(None)


class PickerApp(App[Path]):
    """`helix FOLDER` on a folder of workspaces: the fleet screen; returns the chosen path."""

    def __init__(self, workspaces: list[Path], folder: Path | None = None) -> None:
        super().__init__()
        self.workspaces = workspaces
        self.folder = folder

    def on_mount(self) -> None:
        self.push_screen(FleetScreen(self.workspaces), callback=self.exit)
