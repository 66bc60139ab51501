"""`helix agent start` (issue 14, build 2): the user's agent command runs in the workspace as a
job of kind ``agent`` with the skill file and the stop conditions, its output streams into the
job's output.log while it runs, it is cancellable like any job, and with nothing configured the
command says how to configure one. The agent here is a small Python script (tests/fixtures/agent)
that prints what it was handed and runs `helix status`, as an agent's first step would."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helix_engine.jobs.registry import list_jobs, load_job
from helix_engine.jobs.runner import cancel_job

from state_fixtures import new_workspace

ROOT = Path(__file__).resolve().parents[2]
FAKE_AGENT = ROOT / "tests" / "fixtures" / "agent" / "fake_agent.py"


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **extra)
    for name in ("HELIX_AGENT_COMMAND", "HELIX_AGENT_SKILL", "HELIX_BACKEND", "HELIX_OPTIMIZE_MIN_SPEEDUP",
                 "HELIX_JOB_DIR", "HELIX_JOB_ID"):
        if name not in extra:
            env.pop(name, None)
    return env


def _helix(ws: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "helix_engine", *argv], cwd=ws, env=_env(**extra),
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    return new_workspace(tmp_path)


def _agent_command() -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_AGENT))}"


def _wait(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_configured_agent_runs_as_a_job_with_the_skill_and_the_stop_conditions(ws: Path, tmp_path: Path) -> None:
    skill = tmp_path / "SKILL.md"
    skill.write_text("# my optimize workflow\n")
    assert _helix(ws, "goals", "--target-speedup", "1.5", "--max-rounds", "4").returncode == 0
    configured = _helix(ws, "agent", "config", "--command", _agent_command(), "--skill", str(skill))
    assert configured.returncode == 0, configured.stderr
    done = _helix(ws, "agent", "start", "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert (info["kind"], info["status"], info["backend"], info["device"]) == ("agent", "passed", "none", None)
    log = (ws / ".helix" / "jobs" / info["id"] / "output.log").read_text()
    assert f"HELIX_WORKSPACE={ws.resolve()}" in log and f"HELIX_SKILL_FILE={skill}" in log
    assert "HELIX_TARGET_SPEEDUP=1.5" in log and "HELIX_MAX_ROUNDS=4" in log
    assert "HELIX_BACKEND=<unset>" in log  # each helix command the agent runs picks its own backend
    assert f"HELIX_JOB_ID={info['id']}" in log
    prompt = next(line for line in log.splitlines() if line.startswith("HELIX_AGENT_PROMPT="))
    assert str(skill) in prompt and "1.5x" in prompt and "round 4" in prompt and "submit-round" in prompt
    assert "helix status rc=0" in log and "[NO-SESSION]" in log and "agent done" in log


def test_flag_beats_environment_beats_the_configured_command(ws: Path) -> None:
    assert _helix(ws, "agent", "config", "--command", "echo from-config").returncode == 0
    run = _helix(ws, "agent", "start", "--json", HELIX_AGENT_COMMAND="echo from-env")
    job = json.loads(run.stdout)["id"]
    assert "from-env" in (ws / ".helix" / "jobs" / job / "output.log").read_text()
    run = _helix(ws, "agent", "start", "--json", "--command", "echo from-flag; exit 3", HELIX_AGENT_COMMAND="echo x")
    info = json.loads(run.stdout)
    assert run.returncode == 1 and info["status"] == "failed" and "exited with code 3" in info["message"]
    assert "from-flag" in (ws / ".helix" / "jobs" / info["id"] / "output.log").read_text()


def test_without_a_configured_agent_it_says_how_to_configure_one(ws: Path) -> None:
    run = _helix(ws, "agent", "start")
    assert run.returncode == 1
    assert "no agent command is configured" in run.stderr and "helix agent config --command" in run.stderr
    assert "HELIX_AGENT_COMMAND" in run.stderr and "Traceback" not in run.stderr
    assert list_jobs(ws) == []  # nothing was started
    missing = _helix(ws, "agent", "start", "--command", "true", "--skill", "nowhere/SKILL.md")
    assert missing.returncode == 1 and "the skill file" in missing.stderr and "does not exist" in missing.stderr


def test_output_streams_while_it_runs_and_a_cancel_stops_it(ws: Path, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    started = _helix(ws, "agent", "start", "--detach", "--command", _agent_command(), FAKE_AGENT_GATE=str(gate))
    assert started.returncode == 0, started.stderr
    job_id = started.stdout.split()[2]
    log = ws / ".helix" / "jobs" / job_id / "output.log"
    # the agent's lines are in output.log (what the Jobs pane tails) while the job still runs
    assert _wait(lambda: log.exists() and "waiting for" in log.read_text())
    assert "helix status rc=0" in log.read_text() and load_job(ws, job_id).status == "running"
    second = _helix(ws, "agent", "start", "--command", "true")
    assert second.returncode == 1 and f"already running on this workspace ({job_id})" in second.stderr
    pid = load_job(ws, job_id).pid
    info = cancel_job(ws, job_id, grace_s=2.0)
    assert info.status == "cancelled"
    assert _wait(lambda: not _alive(pid), timeout=10)
    assert "agent done" not in log.read_text()


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return not handle.read().split(") ")[-1].startswith("Z")
    except OSError:
        return False
