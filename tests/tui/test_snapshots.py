"""SVG snapshots of every cockpit screen and dialog on one fixed workspace (snapshot_fixtures.py):
the main screen at 80×24 (SSH) and 160×48, each pane, the Jobs pane with a running, a finished,
a lost and a cancelled job, each form, help, palette, problems, a pattern card, the cluster
screen, the workspace picker, and a notice above the footer.

Job times come from a frozen clock and clock times are UTC, so the screens are the same on every
machine. Regenerate after an intended change with
`python3 -m pytest tests/tui/test_snapshots.py --snapshot-update`, then look at the SVGs (or
their text: each <text> element is one run of a row) before committing them.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, TextArea

from helix_tui.app import HelixApp

from cockpit_helpers import settle, still, wait_for
from snapshot_fixtures import NOW, freeze_clock, make_snapshot_workspace

RUNNING, FINISHED = "20260720-085900-run-bench-0004", "20260720-080000-run-bench-0001"
LOST, CANCELLED = "20260720-081000-run-test-0002", "20260720-082000-run-bench-0003"


@pytest.fixture
def snap_ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    freeze_clock(monkeypatch)
    monkeypatch.delenv("HELIX_CLUSTER", raising=False)
    return make_snapshot_workspace(tmp_path / "fleet")


def _steady(app) -> None:  # noqa: ANN001
    """No blinking cursor in the picture (a timer would make the snapshot depend on when it is taken)."""
    for widget in app.screen.query(Input):
        widget.cursor_blink = False
    for widget in app.screen.query(TextArea):
        widget.cursor_blink = False


def cockpit(select: str = "opt-round-2", then: Callable | None = None):  # noqa: ANN201
    """run_before: wait for the first paint, select a round, wait for its perf table, then ``then``."""

    async def run_before(pilot) -> None:  # noqa: ANN001
        app = pilot.app
        await settle(pilot, app)
        _steady(app)
        # a picture is exact to the cell: let the first layout land before the selection's perf
        # table is filled (filled during it, at 160x48 the table kept its columns too narrow)
        assert await still(pilot)
        app.selected = select
        perf = app.main.query_one("#perf")
        assert await wait_for(pilot, lambda: perf._last is not None and perf._last[0].key[0] == select, timeout=30)
        if then is not None:
            await then(pilot, app)
        _steady(app)
        assert await still(pilot)

    return run_before


def press(*keys: str, until: Callable | None = None):  # noqa: ANN201
    async def then(pilot, app) -> None:  # noqa: ANN001
        await pilot.press(*keys)
        if until is not None:
            assert await wait_for(pilot, lambda: until(app))

    return then


def job(job_id: str):  # noqa: ANN201
    async def then(pilot, app) -> None:  # noqa: ANN001
        await pilot.press("3")
        jobs = app.main.query_one("#jobs")
        assert await wait_for(pilot, lambda: jobs.query_one("#jobs-table", DataTable).row_count == 4)
        jobs.selected = job_id
        app.show_jobs()
        assert await wait_for(pilot, lambda: job_id in str(jobs.query_one("#job-line").render()))

    return then


def _text_of(app, selector: str) -> str:  # noqa: ANN001
    return str(app.screen.query_one(selector).render())


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_main_screen(snap_compare, snap_ws: Path, size: tuple[int, int]) -> None:
    app = HelixApp(snap_ws, watch=False, job_poll_s=0)
    assert snap_compare(app, terminal_size=size, run_before=cockpit())


def _pane_text(app, selector: str) -> str:  # noqa: ANN001
    return getattr(app.main.query_one(selector), "plain", "")


PANES = {
    "attempts": cockpit(then=press("2")),
    # laid out for 80 columns: the hotspot table without the columns that do not fit
    "hotspots": cockpit(then=press("4", until=lambda app: "OP Type" in _pane_text(app, "#hotspots")
                                  and "Avg Time(us)" not in _pane_text(app, "#hotspots"))),
    "diff": cockpit("opt-round-3", then=press("5", until=lambda app: "opt-round-3 vs" in _pane_text(app, "#diff"))),
    "ir": cockpit(then=press("6", until=lambda app: "IR diff" in _pane_text(app, "#ir-text"))),
    "baseline-perf": cockpit("baseline"),
}


@pytest.mark.parametrize("pane", list(PANES))
def test_panes_at_80x24(snap_compare, snap_ws: Path, pane: str) -> None:
    app = HelixApp(snap_ws, watch=False, job_poll_s=0)
    assert snap_compare(app, terminal_size=(80, 24), run_before=PANES[pane])


@pytest.mark.parametrize("job_id", [RUNNING, FINISHED, LOST, CANCELLED], ids=["running", "finished", "lost", "cancelled"])
def test_jobs_pane(snap_compare, snap_ws: Path, job_id: str) -> None:
    app = HelixApp(snap_ws, watch=False, job_poll_s=0)
    assert snap_compare(app, terminal_size=(80, 24), run_before=cockpit(then=job(job_id)))


def _form(key: str, ready: Callable) -> Callable:
    return cockpit("opt-round-3", then=press(key, until=ready))


async def _palette(pilot, app, query: str) -> None:  # noqa: ANN001
    """The palette with a query typed: an empty palette lists the providers' answers in a racy
    order (Textual's system commands or ours first)."""
    from textual.command import CommandInput, CommandList

    await pilot.press("ctrl+p")
    assert await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
    app.screen.query_one(CommandInput).value = query
    results = app.screen.query_one(CommandList)
    assert await wait_for(pilot, lambda: results.option_count >= 1
                          and "Submit round" in str(results.get_option_at_index(0).prompt))
    _steady(app)
    assert await still(pilot)


SCREENS = {
    "start-round": _form("n", lambda app: app.screen.query("#reason")),
    "submit-round": _form("s", lambda app: app.screen.query("#check") and "checking" not in _text_of(app, "#check")),
    "round-state": _form("a", lambda app: app.screen.query("#now")),
    "prepare-baseline": _form("B", lambda app: app.screen.query("#about")),
    "help": _form("question_mark", lambda app: type(app.screen).__name__ == "HelpScreen"),
    "palette": cockpit("opt-round-3", then=lambda pilot, app: _palette(pilot, app, "submit")),
    "problems": _form("exclamation_mark", lambda app: type(app.screen).__name__ == "ProblemsScreen"),
    "pattern-card": _form("k", lambda app: type(app.screen).__name__ == "CardScreen"),
    "cluster": _form("C", lambda app: app.screen.query("#cluster-status")
                     and "asking" not in _text_of(app, "#cluster-status")),
    "refused-bench-notice": cockpit("opt-round-2", then=press("b", until=lambda app: app.screen.query("Toast"))),
}


@pytest.mark.parametrize("screen", list(SCREENS))
def test_screens_and_dialogs_at_80x24(snap_compare, snap_ws: Path, screen: str) -> None:
    app = HelixApp(snap_ws, watch=False, job_poll_s=0)
    assert snap_compare(app, terminal_size=(80, 24), run_before=SCREENS[screen])


def test_workspace_picker(snap_compare, snap_ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`helix FOLDER` on a folder of workspaces (ages from the frozen clock, files dated an hour ago)."""
    import os
    import shutil

    from helix_tui.screens import picker
    from helix_tui.screens.picker import PickerApp

    other = snap_ws.parent / "softmax-ws"
    shutil.copytree(snap_ws, other)
    shutil.rmtree(other / ".helix" / "jobs")
    for root in (snap_ws, other):
        for path in [root, *root.rglob("*")]:
            os.utime(path, (NOW - 3600, NOW - 3600), follow_symlinks=False)
    monkeypatch.setattr(picker, "time", types.SimpleNamespace(time=lambda: NOW))

    async def loaded(pilot) -> None:  # noqa: ANN001
        table = pilot.app.screen.query_one(DataTable)
        assert await wait_for(pilot, lambda: table.row_count == 2
                              and all(str(table.get_row_at(i)[-1]).endswith("ago") for i in range(2)))

    assert snap_compare(PickerApp([snap_ws, other]), terminal_size=(100, 24), run_before=loaded)
