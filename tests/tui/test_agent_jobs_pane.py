"""An agent started with `helix agent start` is a job like any other in the cockpit: its output
appears live in the Jobs pane's log, and x cancels it (issue 14, build 2). The cockpit starts one
on A (a binding id, agent-start, a keymap can move) and from the palette. The agent is the
fake one of tests/fixtures/agent (helix bundles none)."""

from __future__ import annotations

import json
import shlex
import sys
import threading
from pathlib import Path

import pytest

from helix_tui.app import HelixApp

from cockpit_helpers import cockpit, settle, type_text, wait_for

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
    async with cockpit(ws, (120, 40)) as (app, pilot):
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


async def test_key_a_starts_the_configured_agent_and_the_jobs_pane_follows_it(
        ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = tmp_path / "never"
    monkeypatch.setenv("FAKE_AGENT_GATE", str(gate))
    monkeypatch.setenv("HELIX_AGENT_COMMAND", f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_AGENT))}")
    async with cockpit(ws, (120, 40)) as (app, pilot):
        await pilot.press("A")
        jobs = app.main.query_one("#jobs")
        assert await wait_for(pilot, lambda: app.main.query_one("#tabs").active == "tab-jobs")
        assert await wait_for(pilot, lambda: bool(jobs.selected) and app.tracker.jobs[jobs.selected].kind == "agent"
                              and app.tracker.jobs[jobs.selected].status == "running", timeout=30)
        log = jobs.query_one("#job-log")
        assert await wait_for(pilot, lambda: any("waiting for" in line for line in log.lines), timeout=30)
        assert any(f"HELIX_WORKSPACE={ws.resolve()}" in line for line in log.lines)
        job_id = jobs.selected
        await pilot.press("x")
        job_file = ws / ".helix" / "jobs" / job_id / "job.json"
        assert await wait_for(pilot, lambda: json.loads(job_file.read_text())["status"] == "cancelled", timeout=20)


async def test_palette_and_a_remapped_key_start_the_agent_or_say_how_to_configure_one(
        ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No agent command configured: the refusal is the CLI's sentence, through either door."""
    monkeypatch.delenv("HELIX_AGENT_COMMAND", raising=False)
    keymap = tmp_path / "keys.toml"
    keymap.write_text('agent-start = "ctrl+g"\n')
    monkeypatch.setenv("HELIX_KEYMAP", str(keymap))
    app = HelixApp(ws, job_poll_s=0)

    def said() -> str:
        return " ".join(str(n.message) for n in app._notifications)

    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("ctrl+g")
        assert await wait_for(pilot, lambda: "no agent command is configured" in said(), timeout=15)
        assert "helix agent config --command" in said()
        app.clear_notifications()
        await pilot.press("ctrl+p")
        await type_text(pilot, "start agent")
        await pilot.pause(0.3)
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: "no agent command is configured" in said(), timeout=15)
        assert not list((ws / ".helix" / "jobs").glob("*agent*"))
