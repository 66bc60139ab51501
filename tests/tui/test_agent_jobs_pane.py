"""An agent started with `helix agent start` is a job like any other in the cockpit: its output
appears live in the Jobs pane's log, and x cancels it (issue 14, build 2). The agent is the
fake one of tests/fixtures/agent (helix bundles none)."""

from __future__ import annotations

import json
import shlex
import sys
import threading
from pathlib import Path

import pytest

from helix_tui.app import HelixApp

from cockpit_helpers import settle, wait_for

ROOT = Path(__file__).resolve().parents[2]
FAKE_AGENT = ROOT / "tests" / "fixtures" / "agent" / "fake_agent.py"


async def test_agent_output_streams_into_the_jobs_pane_and_x_cancels_it(
        ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from helix_engine.agent import start_agent

    gate = tmp_path / "never"  # the fake agent waits for it: only a cancel ends it
    monkeypatch.setenv("FAKE_AGENT_GATE", str(gate))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_AGENT))}"
    ended: list[object] = []
    app = HelixApp(ws, job_poll_s=0)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("3")
        thread = threading.Thread(target=lambda: ended.append(start_agent(ws, command)), daemon=True)
        thread.start()
        jobs = app.main.query_one("#jobs")
        assert await wait_for(pilot, lambda: jobs.selected and app.tracker.jobs[jobs.selected].status == "running",
                              timeout=30)
        job_id = jobs.selected
        assert app.tracker.jobs[job_id].kind == "agent"
        log = jobs.query_one("#job-log")
        assert await wait_for(pilot, lambda: any("waiting for" in line for line in log.lines), timeout=30)
        assert any("helix status rc=0" in line for line in log.lines)
        await pilot.press("x")
        job_file = ws / ".helix" / "jobs" / job_id / "job.json"
        assert await wait_for(pilot, lambda: json.loads(job_file.read_text())["status"] == "cancelled", timeout=20)
        assert await wait_for(pilot, lambda: app.tracker.jobs[job_id].status == "cancelled")
        thread.join(10)
    assert not thread.is_alive() and getattr(ended[0], "status", None) == "cancelled"
