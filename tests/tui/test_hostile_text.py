"""Issue 11, finding 3 in the cockpit: workspace text is shown as plain, escaped text.

The hostile workspace of tests/hostile.py (payload ``ESC ]0;TITLE BEL ESC [2J ESC ]52;c;… BEL``,
a C1 CSI, a right-to-left override and ``[bold]x[/bold][@click=app.quit]q[/]`` markup in case
labels, perf fields, the hypothesis, attempts.md, summary.md, job.json, events, output.log,
profiler op names, IR stage names, folder names) is opened in the cockpit; every pane, the
problems screen, the submit form and a notification are rendered to the bytes Textual would
write to the terminal. None may carry an escape sequence, BEL, C1 or bidi character from the
workspace, and the markup must show as typed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helix_tui.app import HelixApp  # noqa: E402

from cockpit_helpers import cockpit, still, wait_for  # noqa: E402
from hostile import JOB_ID, MARKUP, PAYLOAD, build_hostile_workspace  # noqa: E402

#: Textual's own output: SGR styles and cursor moves (and nothing else).
_OWN = re.compile(r"\x1b\[[0-9;]*[mHK]")
#: The payload's first sequence as it reads once escaped.
SHOWN = "\\x1b]0;TITLE\\x07"


def _screen(app: HelixApp) -> tuple[str, str]:
    """(raw, text): what Textual writes to the terminal for the whole current screen, and the
    same with Textual's own sequences removed."""
    console = Console(force_terminal=True, color_system="truecolor", width=app.size.width, legacy_windows=False)
    raw = app.screen._compositor.render_update(full=True).render_segments(console)  # noqa: SLF001
    return raw, _OWN.sub("", raw)


def _assert_safe(app: HelixApp, where: str, *, shown: bool = True, markup: bool = False) -> str:
    raw, text = _screen(app)
    assert "\x1b" not in text, f"{where}: an escape sequence that is not Textual's own"
    for ch in ("\x07", "\x9b", "\u202e"):
        assert ch not in raw, f"{where}: {ch!r} reached the terminal"
    assert "\\u202exq" not in text, f"{where}: markup was interpreted ([bold] and [@click] eaten)"
    if shown:
        assert SHOWN in text, f"{where}: the payload is not shown (escaped)"
    if markup:
        assert "[bold]x[/bold]" in text, f"{where}: markup was interpreted, not shown"
    return text


@pytest.fixture
def hostile_ws(tmp_path: Path) -> Path:
    ws = build_hostile_workspace(tmp_path)
    with (ws / "opt-round-1" / "opt_add.py").open("a", encoding="utf-8") as op:  # for the Diff pane
        op.write(f"# {PAYLOAD}\n")
    return ws


async def test_every_pane_shows_hostile_workspace_text_escaped_and_plain(hostile_ws: Path) -> None:
    async with cockpit(hostile_ws, (200, 60), watch=False) as (app, pilot):
        app.selected = "opt-round-1"
        assert await wait_for(pilot, lambda: app.main.query_one("#perf-table").row_count >= 2)
        assert await still(pilot)
        _assert_safe(app, "perf pane, header and tree", markup=True)

        await pilot.press("2")  # attempts.md
        assert await still(pilot)
        _assert_safe(app, "attempts.md", markup=True)
        app.main.query_one("#notes").active = "tab-summary-md"
        assert await still(pilot)
        _assert_safe(app, "summary.md", markup=True)

        await pilot.press("3")  # jobs: job.json fields, events, output.log
        assert await wait_for(pilot, lambda: app.main.query_one("#jobs-table").row_count == 1)
        assert await still(pilot)
        text = _assert_safe(app, "jobs pane", markup=True)
        assert "tabbed [bold]x[/bold]" in text  # an output.log line, tab expanded, markup literal

        await pilot.press("4")  # hotspots: op names from trace.json
        hot = app.main.query_one("#hotspots")
        assert await wait_for(pilot, lambda: "kern" in getattr(hot, "plain", ""))
        assert await still(pilot)
        _assert_safe(app, "hotspots pane")

        await pilot.press("5")  # operator diff
        diff = app.main.query_one("#diff")
        assert await wait_for(pilot, lambda: "TITLE" in getattr(diff, "plain", ""))
        assert await still(pilot)
        _assert_safe(app, "diff pane", markup=True)

        await pilot.press("6")  # IR: stage names (a hostile kernel folder) and IR lines
        ir = app.main.query_one("#ir-text")
        assert await wait_for(pilot, lambda: "IR diff" in getattr(ir, "plain", ""))
        assert await still(pilot)
        _assert_safe(app, "IR pane")
        pane = app.main.query_one("#ir")
        assert any("kern" in stage for stage in pane.stages)  # the real names stay usable

        await pilot.press("exclamation_mark")  # problems: odd folder names, the hostile parent
        assert await still(pilot)
        text = _assert_safe(app, "problems screen")
        assert "opt-round-\\udcff\\udcfe" in text  # the invalid UTF-8 folder, escaped
        await pilot.press("escape")
        assert await still(pilot)


async def test_forms_and_notifications_show_workspace_text_plain(hostile_ws: Path) -> None:
    async with cockpit(hostile_ws, (200, 60), notifications=True, watch=False) as (app, pilot):
        app.selected = "opt-round-1"
        assert await still(pilot)
        await pilot.press("s")  # submit form: the hypothesis from round-state.json
        assert await wait_for(pilot, lambda: app.screen.query("#hypothesis"))
        assert await still(pilot)
        _assert_safe(app, "submit form")
        await pilot.press("escape")
        assert await still(pilot)

        await pilot.press("3")
        assert await wait_for(pilot, lambda: app.main.query_one("#jobs").selected == JOB_ID)
        await pilot.press("1")  # back to the perf pane: the job's fields are not on screen
        assert await still(pilot)
        await pilot.press("x")  # cancel a finished job: the notice says so (issue 13 finding 8)
        assert await wait_for(pilot, lambda: bool(app.screen.query("Toast")))
        assert await still(pilot)
        text = _assert_safe(app, "notification", markup=True)
        assert "nothing to cancel" in text


def test_plain_never_parses_markup_and_escapes_controls() -> None:
    from helix_tui.render import plain

    text = plain(PAYLOAD, "bold")
    assert text.plain.endswith(MARKUP) and not text.spans and "\x1b" not in text.plain
    assert plain("a\tb\nc", multiline=True).plain == "a\tb\nc"
