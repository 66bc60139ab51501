"""Helpers for the cockpit tests: real workspaces written by tests/builders.py, bounded waits."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

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
    """Let the app run until ``predicate()`` holds (bounded; returns False on timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except Exception:  # noqa: BLE001 - widgets may not exist yet
            pass
        await pilot.pause(0.05)
    return False


async def settle(pilot, app) -> None:
    """Wait until the first snapshot is painted (tree populated, perf computed)."""
    assert await wait_for(pilot, lambda: app.snapshot is not None and bool(app.main.query_one("#tree").nodes_by_key))
    await pilot.pause(0.2)
    await asyncio.sleep(0)
