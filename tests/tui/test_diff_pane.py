"""The Diff pane (issue 13, finding 4): the round operator against its parent's, `c` toggles the
parent / the baseline, and wrapped lines keep their +/- marker."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from textual.geometry import Region
from textual.widgets import Static

from helix_tui.app import HelixApp
from helix_tui.widgets.diff_text import CONTINUATION, DiffText

from builders import RoundSpec, build_workspace
from cockpit_helpers import cockpit, wait_for

LONG = "    # " + " ".join(f"word{i:02d}" for i in range(40))  # ~240 columns: wraps at 80


def _workspace(root: Path) -> Path:
    """baseline → round-1 (a rewrite: forty new lines) → round-2 (round 1 plus one long line)."""
    ws = build_workspace(root, baseline={"a": 10.0}, rounds=[
        RoundSpec({"a": 8.0}), RoundSpec({"a": 7.0}, parent="opt-round-1", block=512)])
    rewrite = "".join(f"# rewrite line {i}\n" for i in range(40))
    one = ws / "opt-round-1" / "opt_add.py"
    one.write_text(rewrite + one.read_text())
    two = ws / "opt-round-2" / "opt_add.py"
    two.write_text(rewrite + one.read_text().split(rewrite, 1)[1] + LONG + "\n")
    return ws


def _rows(app: HelixApp) -> list[str]:
    body = app.main.query_one("#diff .body", Static)
    strips = body.render_lines(Region(0, 0, body.size.width, body.size.height))
    return [strip.text for strip in strips]  # padded to the width; a row may end in a space


async def test_the_diff_is_against_the_parent_and_c_switches_to_the_baseline(tmp_path: Path) -> None:
    async with cockpit(_workspace(tmp_path), (120, 40)) as (app, pilot):
        app.selected = "opt-round-2"
        await pilot.press("5")
        diff = app.main.query_one("#diff")
        assert await wait_for(pilot, lambda: "@@" in diff.plain)
        text = diff.plain
        assert text.splitlines()[0] == "# opt-round-2 vs its parent opt-round-1 (c: vs the baseline)"
        assert "--- opt-round-1/opt_add.py" in text and "+++ opt-round-2/opt_add.py" in text
        assert "rewrite line" not in text  # the parent's rewrite is not buried in the round's change
        assert sum(line.startswith("+") and not line.startswith("+++") for line in text.splitlines()) == 1
        await pilot.press("c")
        assert await wait_for(pilot, lambda: "vs the baseline" in diff.plain.splitlines()[0])
        assert "--- baseline/add.py" in diff.plain and "+# rewrite line 0" in diff.plain
        assert app.against == "baseline"  # the perf pane keeps its own reference
        await pilot.press("c")
        assert await wait_for(pilot, lambda: "vs its parent opt-round-1" in diff.plain.splitlines()[0])
        await pilot.press("1", "c")  # on the Perf pane, c switches the perf comparison
        assert app.against == "parent" and app.diff_against == "parent"


async def test_wrapped_diff_lines_keep_their_marker_at_80_columns(tmp_path: Path) -> None:
    async with cockpit(_workspace(tmp_path), (80, 24)) as (app, pilot):
        app.selected = "opt-round-2"
        await pilot.press("5")
        diff = app.main.query_one("#diff")
        assert await wait_for(pilot, lambda: "word39" in diff.plain)
        await pilot.pause(0.2)
        rows = _rows(app)
        start = next(i for i, row in enumerate(rows) if "word00" in row)
        end = next(i for i, row in enumerate(rows) if "word39" in row)
        assert end > start  # the long added line wraps
        assert rows[start].startswith("+")
        assert all(row.startswith("+" + CONTINUATION) for row in rows[start + 1:end + 1]), rows[start:end + 1]
        pieces = [rows[start][1:], *(r.removeprefix("+" + CONTINUATION) for r in rows[start + 1:end + 1])]
        assert "".join(pieces).rstrip() == LONG  # nothing lost at the breaks


def test_continuation_rows_have_the_line_colour() -> None:
    console = Console(width=30, color_system="truecolor", force_terminal=True, record=True)
    lines = console.render_lines(DiffText("-" + "x" * 70 + "\n+" + "y" * 10 + "\n context"), console.options)
    assert len(lines) == 5
    styles = [{seg.style.color.name for seg in line if seg.text.strip() and seg.style and seg.style.color}
              for line in lines]
    assert styles[:3] == [{"red"}] * 3 and styles[3] == {"green"}
    texts = ["".join(seg.text for seg in line) for line in lines]
    assert texts[1].startswith("-" + CONTINUATION) and texts[2].startswith("-" + CONTINUATION)
