"""Helpers for the cockpit tests: real workspaces written by tests/builders.py, the cockpit under
Pilot, bounded waits that poll a condition (never a fixed sleep), and typing."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builders import RoundSpec, build_workspace, workflow_state, write_round, write_workflow_state  # noqa: E402

BASELINE = {"fp16_1024": 10.0, "fp16_4096": 20.0, "fp32_4096": 40.0}
ROUND_1 = {"fp16_1024": 8.0, "fp16_4096": 18.0, "fp32_4096": 36.0}
ROUND_2 = {"fp16_1024": 9.0, "fp16_4096": 10.0, "fp32_4096": 30.0}


def make_workspace(root: Path, *, active_round: bool = False) -> Path:
    """baseline → round-1 → round-2 (both passed); with ``active_round``, round 3 is started
    (its package is written except round-state.json) and the workflow says round_active."""
    ws = build_workspace(
        root,
        baseline=BASELINE,
        rounds=[RoundSpec(ROUND_1, theme="hoist mask"), RoundSpec(ROUND_2, parent="opt-round-1", theme="bigger block")],
    )
    if active_round:
        write_round(ws, 3, RoundSpec({"fp16_1024": 7.0, "fp16_4096": 9.0, "fp32_4096": 29.0}, parent="opt-round-2",
                                     state=False, block=1024))
        write_workflow_state(ws, workflow_state(phase="round_active", current_round=3,
                                                rounds={1: "passed", 2: "passed", 3: "active"}))
    return ws


async def wait_for(pilot, predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Let the app run until ``predicate()`` holds (bounded; returns False on timeout). It looks
    every ~20 ms: most conditions hold within a frame or two of the work they wait for."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except Exception:  # noqa: BLE001 - widgets may not exist yet
            pass
        await pilot.pause(0.02)
    return False


async def still(pilot, timeout: float = 20.0) -> bool:
    """Let the app run until what it shows stops changing: two pictures of the screen ~50 ms apart
    the same (the layout and every refresh it had pending have landed). The wait a picture or a
    check of the whole screen needs after the condition it waits on holds, instead of a fixed
    pause (too short on a loaded box, wasted on a quiet one). Blinking cursors must be off."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    await pilot.pause()
    last = app.export_screenshot()
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        now = app.export_screenshot()
        if now == last:
            return True
        last = now
    return False


def _perf_shown(app) -> bool:
    """The perf pane shows the view of the current selection, metric and reference."""
    last = app.main.query_one("#perf")._last
    return last is not None and last[0].key == (app.selected, app.metric, app.against)


def _watching(app) -> bool:
    """The file watcher has started (or the app does not follow files). A Textual worker runs
    its first step as soon as it is RUNNING, and that step registers the watches, so a file a
    test writes from here on is seen."""
    from textual.worker import WorkerState

    return not app.watch_enabled or any(w.group == "watch" and w.state == WorkerState.RUNNING for w in app.workers)


async def settle(pilot, app) -> None:
    """Wait until the first snapshot is painted (tree populated, the selection's perf view shown,
    the watcher started), then until the app is idle: conditions, not a fixed sleep."""
    assert await wait_for(pilot, lambda: app.snapshot is not None and bool(app.main.query_one("#tree").nodes_by_key))
    assert await wait_for(pilot, lambda: _perf_shown(app) and _watching(app))
    await pilot.pause()
    await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def cockpit(ws: Path, size: tuple[int, int] = (120, 36), *, notifications: bool = False,
                  **options: Any) -> AsyncIterator[tuple[Any, Any]]:
    """``(app, pilot)``: the cockpit on ``ws`` under Pilot, settled (the setup nearly every cockpit
    test starts with). ``options`` go to HelixApp; jobs are not polled unless ``job_poll_s`` says so."""
    from helix_tui.app import HelixApp

    options.setdefault("job_poll_s", 0)
    app = HelixApp(ws, **options)
    async with app.run_test(size=size, notifications=notifications) as pilot:
        await settle(pilot, app)
        yield app, pilot


async def type_text(pilot, text: str) -> None:
    """Type ``text`` into the focused widget: the key events pilot.press sends, one a character,
    in order, then one wait for the app to handle them (pilot.press waits for the app to go idle
    after every key, ~80 ms a character). Text only: keys that move focus or open a screen go
    through pilot.press."""
    from textual import events
    from textual._wait import wait_for_idle
    from textual.keys import _character_to_key

    app = pilot.app
    for char in text:
        event = events.Key(char if char.isalnum() else _character_to_key(char), char)
        event.set_sender(app)
        app._driver.send_message(event)  # noqa: SLF001 - what pilot.press does for each key
    await wait_for_idle(0)
    await pilot.pause()
