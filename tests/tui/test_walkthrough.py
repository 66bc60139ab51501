"""Issue 13, "done when": a new user goes from an empty operator folder to a submitted, promoted
round with the keyboard alone, at 80×24. Real jobs (prepare-baseline, run-test, run-bench) run on
the CPU through Triton's interpreter with the example's tiny CPU shapes; the only thing not typed
into the cockpit is the edit of the candidate file, which is the user's editor's part."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from textual.widgets import Tree

from helix_tui import actions
from helix_tui.app import HelixApp

from cockpit_helpers import type_text, wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "softmax"
JOB_TIMEOUT = 300.0  # a bounded wait per job on a loaded 2-core machine (they take ~10 s alone)


def _state(ws: Path) -> dict:
    path = ws / ".helix" / "state.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _said(app: HelixApp) -> str:
    return " | ".join(str(n.message) for n in app._notifications)


def _screen(app: HelixApp) -> str:
    return type(app.screen).__name__


@pytest.mark.slow
async def test_empty_folder_to_a_promoted_round_with_the_keyboard_at_80x24(tmp_path: Path) -> None:
    ws = tmp_path / "softmax"
    ws.mkdir()
    for name in ("softmax.py", "bench_softmax.py", "differential_test_softmax.py"):
        shutil.copy(EXAMPLE / name, ws / name)
    app = HelixApp(ws, job_poll_s=0.5)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        assert await wait_for(pilot, lambda: app.snapshot is not None and app.ready)

        # 1. B: prepare the baseline (a test and a bench of the operator, then submit-baseline)
        await pilot.press("B")
        assert await wait_for(pilot, lambda: _screen(app) == "PrepareBaselineScreen")
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: _screen(app) == "MainScreen", timeout=30), _said(app)
        assert await wait_for(pilot, lambda: _state(ws).get("baseline", {}).get("status") == "passed",
                              timeout=JOB_TIMEOUT), _said(app)

        # 2. n: start round 1 (the form asks for the reason first; start-round copies the operator)
        # the cockpit's own view must have the accepted baseline (its reload follows .helix/state.json a
        # moment after the file changes; under load the key came first and offered prepare-baseline again)
        assert await wait_for(pilot, lambda: app.snapshot.baseline is not None
                              and app.snapshot.baseline.state is not None
                              and actions.baseline_accepted(app.snapshot), timeout=60)
        await pilot.press("n")
        assert await wait_for(pilot, lambda: _screen(app) == "StartRoundScreen"), _said(app)
        await type_text(pilot, "fuse the three kernels into one pass")
        await pilot.press("ctrl+s")
        candidate = ws / "opt-round-1" / "opt_softmax.py"
        assert await wait_for(pilot, lambda: candidate.is_file() and _screen(app) == "MainScreen", timeout=60), _said(app)

        # 3. the user's editor writes the candidate (the example's round-1 candidate: one fused kernel)
        candidate.write_text((EXAMPLE / "candidates" / "round-1.py").read_text())

        # 4. select round 1 in the tree with the keys
        tree = app.main.query_one("#tree", Tree)
        assert await wait_for(pilot, lambda: "opt-round-1" in tree.nodes_by_key, timeout=60)
        for _ in range(8):  # tab moves the focus: tree, tabs, tables
            if app.focused is tree:
                break
            await pilot.press("tab")
        assert app.focused is tree
        for _ in range(5):
            if app.selected == "opt-round-1":
                break
            await pilot.press("down")
            await pilot.pause(0.1)
        assert app.selected == "opt-round-1"

        # 5. t: its correctness test, a job
        await pilot.press("t")
        assert await wait_for(pilot, lambda: _latest(app, "test") == "passed", timeout=JOB_TIMEOUT), _said(app)

        # 6. b: its benchmark, a job that writes the perf file
        await pilot.press("b")
        assert await wait_for(pilot, lambda: _latest(app, "bench") == "passed", timeout=JOB_TIMEOUT), _said(app)
        assert await wait_for(pilot, lambda: app.snapshot.rounds.get(1) is not None
                              and bool(app.snapshot.rounds[1].perf), timeout=60)

        # 7. s: the submit form, pre-filled from the jobs; it asks for the missing summary first
        await pilot.press("s")
        assert await wait_for(pilot, lambda: _screen(app) == "SubmitRoundScreen"), _said(app)
        form = app.screen
        assert await wait_for(pilot, lambda: "would" in str(form.query_one("#check").render()), timeout=60)
        assert form.query("#summary") and app.focused is form.query_one("#summary")
        await type_text(pilot, "One fused kernel: a single pass over each row; faster on every case.")
        await pilot.press("ctrl+s")
        assert await wait_for(pilot, lambda: _screen(app) == "MainScreen", timeout=60), str(
            form.query_one("#answer").render())

        # the round is submitted, passed, and promoted: the tree stars it, the header names it
        assert await wait_for(pilot, lambda: _state(ws).get("rounds", {}).get("1", {}).get("status") == "passed",
                              timeout=60)
        assert await wait_for(pilot, lambda: app.snapshot.promoted_best_round == 1, timeout=60)
        assert await wait_for(pilot, lambda: "★" in str(tree.nodes_by_key["opt-round-1"].label), timeout=30)
        assert "best round-1" in str(app.main.query_one("#header").render())


def _latest(app: HelixApp, kind: str) -> str | None:
    """passed/failed of round 1's newest test or bench job, as the submit form reads it."""
    from helix_tui.actions import latest_job_status

    return latest_job_status(app.tracker, 1, kind)
