"""What a run-bench job tells a person afterwards: the user's command in job.json and
`helix jobs show`, the result event in words in `helix jobs tail`, and no compare hint after
a cancelled bench."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helix_engine.eval.bench import run_bench
from helix_engine.jobs.registry import list_jobs, read_events
from helix_engine.jobs.runner import cancel_job
from tests.conftest import ROOT
from tests.e2e._eval_ws import assert_jobs_settled, make_ws

pytestmark = pytest.mark.slow


def _helix(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HELIX_BACKEND": "cpu", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(ws)}
    return subprocess.run([sys.executable, "-m", "helix_engine", *args], capture_output=True, text=True,
                          env=env, cwd=ws, timeout=300, check=False)


def test_job_records_the_users_command_and_tail_ends_with_a_readable_result(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "add")
    proc = _helix(ws, "run-bench", "--operator-file", "add.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (job,) = list_jobs(ws)
    assert job.command == "helix run-bench --operator-file add.py"
    stored = json.loads((ws / ".helix" / "jobs" / job.id / "job.json").read_text())
    assert stored["command"] == job.command and stored["argv"][1:3] == ["-m", "helix_engine.eval.worker"]
    show = _helix(ws, "jobs", "show", job.id)
    assert "command:   helix run-bench --operator-file add.py" in show.stdout
    tail = _helix(ws, "jobs", "tail", job.id)
    assert tail.stdout.splitlines()[-1].endswith("result: 2 case(s) measured"), tail.stdout
    assert "result {}" not in tail.stdout


def test_cancelled_run_bench_gives_no_compare_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_BACKEND", "cpu")
    ws = make_ws(tmp_path, "softmax_hang")
    cancelled: list[str] = []

    def canceller() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not cancelled:
            for job in list_jobs(ws):
                events, _ = read_events(ws / ".helix" / "jobs" / job.id, 0)
                if job.status == "running" and any(e.get("event") == "case_started" for e in events):
                    cancel_job(ws, job.id, grace_s=0.5)
                    cancelled.append(job.id)
            time.sleep(0.05)

    thread = threading.Thread(target=canceller)
    thread.start()
    out = run_bench(ws / "softmax.py", timeout_s=120)
    thread.join(timeout=30)
    assert cancelled, "the bench job never started a case"
    assert out.exit_code == 1
    assert "Next:" not in out.text and "compare-perf" not in out.text, out.text
    assert "cancelled" in out.text
    assert_jobs_settled(ws)
