"""Issue 13 finding 12: no blocking file read on the UI thread. A selection change read up to
4 × 128 KB of note tails there, `s` read the whole attempts.md there, and the jobs pane waited on a
lock the poller held while it read job files. Every such read now runs in a worker thread."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from test_live import CHILD, _start_job

from cockpit_helpers import cockpit, wait_for

WATCHED = {"attempts.md", "summary.md", "perf-analysis.md", "events.jsonl", "output.log"}


async def test_selection_submit_and_jobs_read_files_off_the_ui_thread(ws: Path, tmp_path: Path, monkeypatch) -> None:
    ui = threading.get_ident()  # pytest-asyncio runs the app's event loop on this thread
    on_ui: list[str] = []
    off_ui: list[str] = []
    real_open = os.open

    def spying_open(path, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003 - os.open's signature
        if not isinstance(path, int) and os.path.basename(os.fsdecode(path)) in WATCHED:
            (on_ui if threading.get_ident() == ui else off_ui).append(os.path.basename(os.fsdecode(path)))
        return real_open(path, *args, **kwargs)

    (ws / "opt-round-2" / "attempts.md").write_text("## Attempt 1\n" + "x" * 200 + "\n" * 3000)
    gate = tmp_path / "go"
    async with cockpit(ws, (120, 40), job_poll_s=0.1) as (app, pilot):
        monkeypatch.setattr(os, "open", spying_open)  # the safe reader opens descriptors itself
        thread = _start_job(ws, [sys.executable, "-c", CHILD, str(gate)])
        for key in ("opt-round-1", "opt-round-2", "baseline", "opt-round-2"):
            app.selected = key
            await pilot.pause(0.05)
        tail = app.main.query_one("#attempts")
        assert await wait_for(pilot, lambda: tail.text_lines() and tail.text_lines()[0] == "## Attempt 1")
        await pilot.press("3")
        cases = app.main.query_one("#jobs").query_one("#job-cases")
        assert await wait_for(pilot, lambda: cases.row_count >= 1, timeout=60)
        await pilot.press("s")
        assert await wait_for(pilot, lambda: bool(app.screen.query("#hypothesis")))
        await pilot.press("escape")
        gate.write_text("go")
        thread.join(30)
        assert await wait_for(pilot, lambda: cases.row_count == 3)
        monkeypatch.setattr(os, "open", real_open)
    assert on_ui == [], on_ui
    assert {"attempts.md", "events.jsonl"} <= set(off_ui)  # the spy saw the reads, in workers
