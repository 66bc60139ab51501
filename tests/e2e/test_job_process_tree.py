"""Issue 11 finding 7: a job contains its whole process tree.

An operator whose kernel wrapper starts a grandchild that calls setsid() (it leaves the job's
process group and session) and sleeps 300 s, recording its pid in a file: after run-test,
after run-bench, and after a cancel of a running run-bench, that pid is gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helix_engine.eval.bench import run_bench
from helix_engine.eval.test import run_test
from helix_engine.jobs.registry import list_jobs
from helix_engine.jobs.runner import cancel_job, run_job
from tests.conftest import ROOT
from tests.e2e._eval_ws import assert_jobs_settled, make_ws, pid_gone

pytestmark = pytest.mark.slow

SPAWNING_OP = '''
import subprocess
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

HERE = Path(__file__).resolve().parent
_started = []


@triton.jit
def copy_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(in_ptr + offs, mask=offs < n), mask=offs < n)


def softmax(x):
    if not _started:  # a daemon-like helper that leaves the job's process group and session
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        (HERE / "grandchild.pid").write_text(str(child.pid))
        _started.append(child)
        if (HERE / "hang").exists():
            time.sleep(120)
    out = torch.empty_like(x)
    copy_kernel[(1,)](out, x, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
    return torch.softmax(x, dim=-1)
'''


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_BACKEND", "cpu")


def _ws(tmp_path: Path) -> Path:
    ws = make_ws(tmp_path, "softmax")
    (ws / "softmax.py").write_text(SPAWNING_OP)
    return ws


def _grandchild(ws: Path, timeout: float = 60.0) -> int:
    path = ws / "grandchild.pid"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("the operator never started its grandchild")


def _assert_gone(pid: int) -> None:
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and not pid_gone(pid):
        time.sleep(0.05)
    if not pid_gone(pid):
        os.kill(pid, 9)  # do not leave it behind for the next test
        raise AssertionError(f"the setsid() grandchild {pid} outlived its job")


def test_run_test_ends_a_setsid_grandchild(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    out = run_test(ws / "softmax.py", test_mode="standalone")
    assert out.exit_code == 0, out.text
    _assert_gone(_grandchild(ws))
    assert_jobs_settled(ws)


def test_run_bench_ends_a_setsid_grandchild(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    out = run_bench(ws / "softmax.py")
    assert out.exit_code == 0, out.text
    _assert_gone(_grandchild(ws))
    assert_jobs_settled(ws)


def test_cancel_ends_a_setsid_grandchild(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    (ws / "hang").write_text("")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = subprocess.Popen([sys.executable, "-m", "helix_engine", "run-bench", "--operator-file", "softmax.py"],
                           cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pid = _grandchild(ws)
        (job,) = [j for j in list_jobs(ws) if j.status == "running"]
        assert cancel_job(ws, job.id, grace_s=1.0).status == "cancelled"
        _assert_gone(pid)
        assert cli.wait(timeout=60) != 0
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert_jobs_settled(ws)


def test_other_jobs_of_the_same_supervisor_are_left_alone(tmp_path: Path) -> None:
    """Ending one job's tree never touches a job of the same process started after it (its child
    is, like an adopted orphan, a child of the supervisor that started later)."""
    import threading

    first = tmp_path / "first.py"
    first.write_text("import subprocess, time\nsubprocess.Popen(['sleep', '300'], start_new_session=True)\n"
                     "while not __import__('os').path.exists('go'):\n    time.sleep(0.02)\n")
    second = tmp_path / "second.py"
    second.write_text("import time\ntime.sleep(60)\n")
    results: dict[str, object] = {}

    def start(name: str, script: Path) -> threading.Thread:
        thread = threading.Thread(target=lambda: results.update(
            {name: run_job(tmp_path, name, [sys.executable, str(script)], cwd=tmp_path, timeout_s=90, grace_s=1.0)}))
        thread.start()
        return thread

    def running(kind: str) -> object:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            jobs = [j for j in list_jobs(tmp_path) if j.kind == kind and j.status == "running"]
            if jobs:
                return jobs[0]
            time.sleep(0.05)
        raise AssertionError(f"the {kind} job never ran")

    threads = [start("first", first)]
    try:
        running("first")
        threads.append(start("second", second))
        other = running("second")
        (tmp_path / "go").write_text("")
        threads[0].join(timeout=30)
        assert results["first"].status == "passed"  # type: ignore[attr-defined]
        assert not pid_gone(other.pid), "ending the first job's tree killed the second job"  # type: ignore[attr-defined]
    finally:
        for job in list_jobs(tmp_path):
            if job.status == "running":
                cancel_job(tmp_path, job.id, grace_s=1.0)
        for thread in threads:
            thread.join(timeout=30)
    assert results["second"].status == "cancelled"  # type: ignore[attr-defined]


def test_a_worker_ends_an_orphan_that_cleared_its_environment(tmp_path: Path) -> None:
    """Helix's workers are subreapers: a grandchild that clears its environment, calls setsid()
    and loses its parent at once is still the worker's descendant, ended when the worker exits."""
    pid_file = tmp_path / "orphan.pid"
    script = tmp_path / "worker.py"
    script.write_text(
        "import subprocess, sys\n"
        "from helix_engine.eval.childlib import run_contained\n"
        "CODE = ('import subprocess, sys; p = subprocess.Popen([\"sleep\", \"300\"], start_new_session=True, env={}); '\n"
        "        'open(sys.argv[1], \"w\").write(str(p.pid))')\n"
        "def main():\n"
        f"    subprocess.run([sys.executable, '-c', CODE, {str(pid_file)!r}], env={{}}, check=True)\n"
        "    return 0\n"
        "sys.exit(run_contained(main))\n")
    info = run_job(tmp_path, "worker", [sys.executable, str(script)], cwd=tmp_path, timeout_s=60)
    assert info.status == "passed", info.message
    _assert_gone(int(pid_file.read_text()))
