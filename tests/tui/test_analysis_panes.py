"""Hotspots (profile report) and IR (stages, stage diff vs the parent) panes on real fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.widgets import OptionList

from cockpit_helpers import cockpit, wait_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


async def test_hotspots_pane_shows_the_profile_report(ws: Path) -> None:
    shutil.copytree(FIXTURES / "ascend-profiler" / "standalone_real_output", ws / "opt-round-2" / "profile")
    async with cockpit(ws, (120, 40)) as (app, pilot):
        app.selected = "opt-round-1"
        await pilot.press("4")
        pane = app.main.query_one("#hotspots")
        assert await wait_for(pilot, lambda: "No profile for opt-round-1" in getattr(pane, "plain", ""))
        app.selected = "opt-round-2"
        assert await wait_for(pilot, lambda: "matmul_kernel" in getattr(pane, "plain", ""))
        assert "memory-bound" in pane.plain


async def test_ir_pane_lists_stages_and_diffs_against_the_parent(ws: Path) -> None:
    stages = FIXTURES / "ir" / "ascend" / "bishengir_stages"
    shutil.copytree(stages, ws / "opt-round-1" / "ir")
    shutil.copytree(stages, ws / "opt-round-2" / "ir")
    changed = ws / "opt-round-2" / "ir" / "2_hivm-inject-sync.mlir"
    changed.write_text(changed.read_text() + "// helix-test: one more line\n")
    async with cockpit(ws, (120, 40)) as (app, pilot):
        app.selected = "opt-round-2"
        await pilot.press("6")
        options = app.main.query_one("#ir-stages", OptionList)
        assert await wait_for(pilot, lambda: options.option_count == 4)
        text = app.main.query_one("#ir-text")
        assert await wait_for(pilot, lambda: "IR diff round-1 -> round-2" in getattr(text, "plain", ""))
        options.focus()
        options.highlighted = [str(options.get_option_at_index(i).prompt) for i in range(4)].index("2_hivm-inject-sync.mlir")
        assert await wait_for(pilot, lambda: "+// helix-test: one more line" in text.plain)


def test_declared_profile_and_ir_dirs_win_over_the_default_folders(ws: Path) -> None:
    import json

    from helix_engine.workspace.snapshot import load_workspace
    from helix_tui import views

    state_file = ws / "opt-round-1" / "round-state.json"
    state = json.loads(state_file.read_text())
    state.update(profile_dir="prof-x", ir_dir="ir-x")
    state_file.write_text(json.dumps(state))
    for name in ("profile", "ir"):
        (ws / "opt-round-1" / name).mkdir()
    snap = load_workspace(ws)
    # declared folders missing: the default ones
    assert views.profile_dir(snap, "opt-round-1") == ws / "opt-round-1" / "profile"
    assert views.ir_dir(snap, "opt-round-1") == ws / "opt-round-1" / "ir"
    for name in ("prof-x", "ir-x"):
        (ws / "opt-round-1" / name).mkdir()
    assert views.profile_dir(snap, "opt-round-1") == ws / "opt-round-1" / "prof-x"
    assert views.ir_dir(snap, "opt-round-1") == ws / "opt-round-1" / "ir-x"
    assert views.ir_dir(snap, "opt-round-2") is None  # nothing declared, no ir/


def _painted(widget) -> str:
    from textual.geometry import Region

    strips = widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))
    return "".join(strip.text.rstrip() for strip in strips)


async def test_text_panes_wrap_long_lines_at_80_columns(ws: Path) -> None:
    """Hotspots and IR cut lines at the pane's edge at 80×24: the tail must be painted."""
    from textual.widgets import Static

    from helix_tui.widgets.panes import TextPane

    async with cockpit(ws, (80, 24)) as (app, pilot):
        long_line = "x" * 150 + " TAIL-MARK"
        for key, pane_id, lexer in (("4", "#hotspots", "markdown"), ("6", "#ir-text", "diff"), ("6", "#ir-text", None)):
            await pilot.press(key)
            pane = app.main.query_one(pane_id, TextPane)
            pane.show(f"@@ -1 +1 @@\n+{long_line}\n", lexer)
            await pilot.pause(0.2)
            body = pane.query_one(".body", Static)
            assert 0 < body.size.width <= pane.size.width, (pane_id, lexer)
            assert "TAIL-MARK" in _painted(body), (pane_id, lexer)
