"""From a fresh operator folder (issue 13, finding 5): b, t and n lead to prepare-baseline instead
of dead-end messages, prepare-baseline and IR capture have keys and palette entries running the
same CLI command as an agent would, and messages name the round's expected operator file."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from textual.command import CommandList
from textual.widgets import Static

from helix_tui.app import HelixApp
from helix_tui.screens.forms import PrepareBaselineScreen

from builders import write_operator
from cockpit_helpers import cockpit, type_text, wait_for


def said(app: HelixApp) -> str:
    return " ".join(str(n.message) for n in app._notifications)


def _recorder(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in for python (HELIX_PYTHON) that writes its arguments to a file."""
    out = tmp_path / "python.args"
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {out}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, out


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    ws = tmp_path / "add"
    write_operator(ws)  # add.py, bench_add.py, differential_test_add.py: nothing else
    return ws


@pytest.mark.parametrize("key", ["b", "t", "n", "B"])
async def test_keys_on_a_fresh_folder_lead_to_prepare_baseline(fresh: Path, key: str) -> None:
    async with cockpit(fresh, (80, 24)) as (app, pilot):
        summary = app.main.query_one("#perf-summary", Static)
        assert await wait_for(pilot, lambda: "press B to prepare it" in str(summary.render()))
        await pilot.press(key)
        assert await wait_for(pilot, lambda: isinstance(app.screen, PrepareBaselineScreen))
        about = str(app.screen.query_one("#about", Static).render())
        assert "helix prepare-baseline copies add.py into baseline/" in about
        assert app.focused is app.screen.query_one("#run")
        assert "has no operator file" not in said(app) and "submit-baseline" not in said(app)


async def test_prepare_baseline_runs_the_cli_command(fresh: Path, tmp_path: Path, monkeypatch) -> None:
    python, out = _recorder(tmp_path)
    monkeypatch.setenv("HELIX_PYTHON", str(python))
    async with cockpit(fresh, (80, 24)) as (app, pilot):
        await pilot.press("b")
        assert await wait_for(pilot, lambda: isinstance(app.screen, PrepareBaselineScreen))
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: out.is_file() and out.read_text().strip() != "")
        assert out.read_text().split() == ["-m", "helix_engine", "prepare-baseline", "."]
        assert await wait_for(pilot, lambda: not isinstance(app.screen, PrepareBaselineScreen))
        assert "started `helix prepare-baseline .`" in said(app)


async def test_palette_offers_prepare_baseline_and_ir_capture(ws: Path) -> None:
    async with cockpit(ws, (120, 36)) as (app, pilot):
        for query, title in (("prepare", "Prepare baseline"), ("capture", "Capture IR")):
            await pilot.press("ctrl+p")
            await type_text(pilot, query)

            def prompts() -> list[str]:
                options = app.screen.query_one(CommandList)
                return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]

            assert await wait_for(pilot, lambda title=title: any(title in p for p in prompts()))
            await pilot.press("escape")
            await pilot.pause()


async def test_ir_capture_key_runs_helix_ir_capture_on_the_selected_round(ws: Path, tmp_path: Path,
                                                                         monkeypatch) -> None:
    python, out = _recorder(tmp_path)
    monkeypatch.setenv("HELIX_PYTHON", str(python))
    async with cockpit(ws, (120, 36)) as (app, pilot):
        app.selected = "opt-round-2"
        await pilot.pause()
        await pilot.press("i")
        assert await wait_for(pilot, lambda: out.is_file() and out.read_text().strip() != "")
        assert out.read_text().split() == ["-m", "helix_engine", "ir", "capture", "--ir-dir", "opt-round-2/ir",
                                           "--operator-file", "opt-round-2/opt_add.py", "--bench-file", "bench_add.py"]
        from helix_engine import cli

        parser = cli.build_parser()  # the cockpit passes only flags the CLI has
        args = parser.parse_args(out.read_text().split()[2:])
        assert args.ir_dir == Path("opt-round-2/ir") and args.operator_file == Path("opt-round-2/opt_add.py")
        (ws / "opt-round-2" / "ir").mkdir()
        await pilot.press("i")  # a capture is there: the engine would refuse; the cockpit says why
        assert await wait_for(pilot, lambda: "opt-round-2/ir/ already holds a capture" in said(app))


async def test_t_on_a_round_without_its_operator_names_the_expected_file(ws: Path) -> None:
    (ws / "opt-round-3").mkdir()
    (ws / "opt-round-3" / "attempts.md").write_text("# attempts\n")
    async with cockpit(ws, (120, 36)) as (app, pilot):
        assert await wait_for(pilot, lambda: "opt-round-3" in app.main.query_one("#tree").nodes_by_key)
        app.selected = "opt-round-3"
        assert await wait_for(pilot, lambda: app.main.query_one("#tree").cursor_node.data == "opt-round-3")
        await pilot.pause(0.2)
        assert app.selected == "opt-round-3"
        await pilot.press("t")
        assert await wait_for(pilot, lambda: "opt-round-3/opt_add.py does not exist" in said(app)), said(app)
