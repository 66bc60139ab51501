"""What a run-bench job tells a person afterwards: the user's command in job.json and
`helix jobs show`, and the result event in words in `helix jobs tail`. (No compare hint after a
cancelled bench: test_eval_run_bench.py::test_cancelled_rebench_keeps_the_last_good_perf_file.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helix_engine.jobs.registry import list_jobs
from tests.conftest import ROOT
from tests.e2e._eval_ws import make_ws

pytestmark = pytest.mark.slow


def _helix(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HELIX_BACKEND": "cpu", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(ws)}
    return subprocess.run([sys.executable, "-m", "helix_engine", *args], capture_output=True, text=True,
                          env=env, cwd=ws, timeout=300, check=False)


def test_job_records_the_users_command_and_tail_ends_with_a_readable_result(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "add")
    proc = _helix(ws, "run-bench", "--operator-file", "add.py", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)  # the CLI's --json (a bare environment)
    assert data["bench_mode"] == "perf-counter" and len(data["records"]) == 2
    (job,) = list_jobs(ws)
    assert job.command == "helix run-bench --operator-file add.py --json"
    stored = json.loads((ws / ".helix" / "jobs" / job.id / "job.json").read_text())
    assert stored["command"] == job.command and stored["argv"][1:3] == ["-m", "helix_engine.eval.worker"]
    show = _helix(ws, "jobs", "show", job.id)
    assert "command:   helix run-bench --operator-file add.py --json" in show.stdout
    tail = _helix(ws, "jobs", "tail", job.id)
    assert tail.stdout.splitlines()[-1].endswith("result: 2 case(s) measured"), tail.stdout
    assert "result {}" not in tail.stdout
