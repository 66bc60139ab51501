"""w starts the warm worker probes run in (helix worker start, eval/warm.py) and w again stops it;
the notification says which, with the worker's pid."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix_engine.eval import warm

from cockpit_helpers import cockpit, wait_for


async def test_w_starts_the_warm_worker_and_w_again_stops_it(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_BACKEND", "cpu")

    def said() -> str:
        return " ".join(str(n.message) for n in app._notifications)  # noqa: SLF001 - Textual's store

    try:
        async with cockpit(ws, (120, 40), notifications=True) as (app, pilot):
            await pilot.press("w")
            assert await wait_for(pilot, lambda: "ready (cpu): probes (p) run in its fork" in said(), timeout=60)
            pid = warm.hello(ws, "cpu")["pid"]
            assert f"warm worker pid {pid} ready" in said()
            await pilot.press("w")
            assert await wait_for(pilot, lambda: f"stopped the warm worker (pid {pid}" in said(), timeout=30)
    finally:
        warm.stop(ws, "cpu")
