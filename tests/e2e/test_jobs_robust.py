"""Real child processes under the job runner: crashes, hangs, memory hogs, cancels, lost
supervisors and the device pool never hang helix or leave a process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helix_engine.jobs import procs
from helix_engine.jobs.registry import list_jobs, load_job, read_events
from helix_engine.jobs.runner import cancel_job, run_job

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def _script(tmp_path: Path, name: str, code: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return path


def _assert_group_gone(pgid: int | None) -> None:
    """No process of the job's group is left: killpg(pgid, 0) raises ProcessLookupError.

    Orphans adopted by a PID 1 that never reaps (some containers) linger as zombies; they
    run nothing, so those alone are accepted after they are confirmed to be zombies.
    """
    assert pgid
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        procs.reap_group_zombies(pgid)
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        if not procs.group_alive(pgid):
            break
        time.sleep(0.05)
    assert not procs.group_alive(pgid), f"processes of group {pgid} still running"


def _pgid(info: Any) -> int:
    return int((info.model_extra or {})["pgid"])


def _wait_status(ws: Path, job_id: str | None, status: str, timeout: float = 20.0,
                 where: Callable[[Any], bool] = lambda job: True) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = list_jobs(ws)
        for job in jobs:
            if (job_id is None or job.id == job_id) and job.status == status and where(job):
                return job
        time.sleep(0.05)
    raise AssertionError(f"no job reached {status}: {[(j.id, j.status) for j in list_jobs(ws)]}")


def _wait_event(ws: Path, job_id: str, kind: str, timeout: float = 20.0) -> None:
    folder = ws / ".helix" / "jobs" / job_id
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events, _ = read_events(folder, 0)
        if any(e["event"] == kind for e in events):
            return
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never emitted {kind}")


OK_CHILD = """
import os, sys
from helix_engine.jobs.events import EventWriter
w = EventWriter.from_env()
for i in range(3):
    w.case_started(f"case{i}", i, 3)
    w.case_finished(f"case{i}", {"case_label": f"case{i}", "metrics": {"kernel_avg_time_us": 1.5 + i}})
    w.progress(i + 1, 3)
print("stdout line", os.environ["TRITON_INTERPRET"], os.environ["TRITON_ALL_BLOCKS_PARALLEL"])
print("stderr line", file=sys.stderr)
w.result({"passed": True, "job": os.environ["HELIX_JOB_ID"]})
"""


def test_passing_job_with_events_output_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_ALL_BLOCKS_PARALLEL", "1")
    child = _script(tmp_path, "ok.py", OK_CHILD)
    seen: list[dict[str, Any]] = []
    info = run_job(tmp_path, "bench", [PY, str(child)], round_name="opt-round-1", cwd=tmp_path,
                   env=None, timeout_s=30, device_pool=None, backend="cpu", on_event=seen.append)
    assert info.status == "passed" and info.exit_code == 0 and info.message is None
    assert [e["event"] for e in seen].count("case_finished") == 3
    assert seen[-1] == {"event": "result", "ts": seen[-1]["ts"], "payload": {"passed": True, "job": info.id}}
    folder = tmp_path / ".helix" / "jobs" / info.id
    log = (folder / "output.log").read_text()
    assert "stdout line 1 0" in log  # TRITON_INTERPRET=1 on cpu; ALL_BLOCKS_PARALLEL forced to 0
    assert "stderr line" in log
    raw = json.loads((folder / "job.json").read_text())
    assert raw["status"] == "passed" and raw["round"] == "opt-round-1" and raw["backend"] == "cpu"
    assert raw["started_at"] <= raw["ended_at"]
    assert list_jobs(tmp_path)[0].status == "passed"
    _assert_group_gone(_pgid(info))


def test_exception_is_failed_with_its_last_line(tmp_path: Path) -> None:
    child = _script(tmp_path, "bad.py", "def f():\n    raise ValueError('operator exploded')\nf()\n")
    info = run_job(tmp_path, "test", [PY, str(child)], timeout_s=30)
    assert info.status == "failed" and info.exit_code == 1
    assert "exited with code 1" in (info.message or "")
    assert "ValueError: operator exploded" in (info.message or "")
    _assert_group_gone(_pgid(info))


def test_abort_is_failed_and_names_sigabrt(tmp_path: Path) -> None:
    info = run_job(tmp_path, "test", [PY, "-c", "import os; print('before', flush=True); os.abort()"],
                   timeout_s=30)
    assert info.status == "failed"
    assert info.exit_code == -signal.SIGABRT
    assert "killed by SIGABRT" in (info.message or "")
    assert not list(tmp_path.glob("core*"))
    _assert_group_gone(_pgid(info))


@pytest.mark.slow
def test_hang_times_out_from_env_and_ignored_sigterm_gets_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HELIX_EVAL_TIMEOUT_SECONDS", "2")
    child = _script(tmp_path, "hang.py", """
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # a grandchild
        while True:
            time.sleep(1)
    """)
    start = time.monotonic()
    info = run_job(tmp_path, "bench", [PY, str(child)], grace_s=1.0)
    elapsed = time.monotonic() - start
    assert info.status == "timeout"
    assert "HELIX_EVAL_TIMEOUT_SECONDS=2" in (info.message or "")
    assert "timed out after 2 s" in (info.message or "")
    assert "SIGKILL" in (info.message or "")
    assert elapsed < 2 + 5
    _assert_group_gone(_pgid(info))


def test_bad_timeout_env_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from helix_engine.errors import HelixError

    monkeypatch.setenv("HELIX_EVAL_TIMEOUT_SECONDS", "soon")
    with pytest.raises(HelixError, match="HELIX_EVAL_TIMEOUT_SECONDS"):
        run_job(tmp_path, "bench", [PY, "-c", "pass"])
    assert list_jobs(tmp_path) == []  # nothing registered for a command that never ran


@pytest.mark.slow
def test_memory_hog_is_killed_with_a_memory_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_JOB_MAX_RSS_MB", "200")
    child = _script(tmp_path, "hog.py", """
        import time
        hoard = []
        for _ in range(100):  # 1 GB in 10 MB touched chunks
            hoard.append(bytearray(b"x" * 10_000_000))
            time.sleep(0.01)
        print("allocated everything", flush=True)
        time.sleep(60)
    """)
    info = run_job(tmp_path, "bench", [PY, str(child)], timeout_s=60)
    assert info.status == "failed"
    assert "memory" in (info.message or "") and "HELIX_JOB_MAX_RSS_MB=200" in (info.message or "")
    assert info.exit_code == -signal.SIGKILL
    assert "allocated everything" not in (tmp_path / ".helix/jobs" / info.id / "output.log").read_text()
    _assert_group_gone(_pgid(info))


IGNORES_TERM = """
import signal, time
from helix_engine.jobs.events import EventWriter
signal.signal(signal.SIGTERM, signal.SIG_IGN)
EventWriter.from_env().log("ready")
while True:
    time.sleep(1)
"""


def test_cancel_from_another_thread_escalates_to_sigkill(tmp_path: Path) -> None:
    child = _script(tmp_path, "stubborn.py", IGNORES_TERM)
    results: list[Any] = []

    def canceller() -> None:
        job = _wait_status(tmp_path, None, "running")
        _wait_event(tmp_path, job.id, "log")
        results.append(cancel_job(tmp_path, job.id, grace_s=0.5))

    thread = threading.Thread(target=canceller)
    thread.start()
    info = run_job(tmp_path, "bench", [PY, str(child)], timeout_s=60, grace_s=0.5)
    thread.join(timeout=30)
    assert info.status == "cancelled" and "SIGKILL" in (info.message or "")
    assert results and results[0].status == "cancelled"
    assert load_job(tmp_path, info.id).status == "cancelled"
    _assert_group_gone(_pgid(info))


def test_cancel_from_another_process_with_the_cli(tmp_path: Path) -> None:
    child = _script(tmp_path, "polite.py", """
        import signal, sys, time
        from helix_engine.jobs.events import EventWriter
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))
        EventWriter.from_env().log("ready")
        while True:
            time.sleep(1)
    """)
    out: list[subprocess.CompletedProcess[str]] = []

    def canceller() -> None:
        job = _wait_status(tmp_path, None, "running")
        _wait_event(tmp_path, job.id, "log")
        out.append(subprocess.run(
            [PY, "-m", "helix_engine", "jobs", "cancel", job.id[:-1], "-w", str(tmp_path), "--grace", "5"],
            capture_output=True, text=True, timeout=60, cwd=ROOT))

    thread = threading.Thread(target=canceller)
    thread.start()
    info = run_job(tmp_path, "bench", [PY, str(child)], timeout_s=60)
    thread.join(timeout=60)
    assert info.status == "cancelled" and "SIGTERM" in (info.message or "")
    assert out and out[0].returncode == 0, out[0].stderr
    assert "cancelled" in out[0].stdout
    _assert_group_gone(_pgid(info))


SUPERVISOR = """
import json, sys
from pathlib import Path
from helix_engine.jobs.runner import run_job
info = run_job(Path(sys.argv[1]), "bench", [sys.executable, "-c", "import time; time.sleep(120)"],
               backend="cpu", grace_s=1.0, timeout_s=120)
print(json.dumps(info.to_json()))
"""


def _start_supervisor(ws: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([PY, "-c", SUPERVISOR, str(ws)], cwd=ROOT, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_sigkilled_supervisor_leaves_a_lost_job_and_no_child(tmp_path: Path) -> None:
    sup = _start_supervisor(tmp_path)
    try:
        job = _wait_status(tmp_path, None, "running")
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait(timeout=10)
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait()
    lost = _wait_status(tmp_path, job.id, "lost")
    assert "processes are gone" in (lost.message or "")
    _assert_group_gone(_pgid(job))
    # cancelling a lost job changes nothing and does not raise
    assert cancel_job(tmp_path, job.id, grace_s=0.2).status == "lost"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_supervisor_stops_the_child_group(tmp_path: Path, sig: int) -> None:
    sup = _start_supervisor(tmp_path)
    try:
        job = _wait_status(tmp_path, None, "running")
        os.kill(sup.pid, sig)
        sup.wait(timeout=20)
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait()
    final = load_job(tmp_path, job.id)
    assert final.status == "cancelled"
    assert "interrupted" in (final.message or "")
    assert ("KeyboardInterrupt" if sig == signal.SIGINT else "SIGTERM") in (final.message or "")
    _assert_group_gone(_pgid(job))


def test_grandchild_left_behind_by_a_finished_child_is_killed(tmp_path: Path) -> None:
    child = _script(tmp_path, "leaky.py", """
        import subprocess, sys
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print("grandchild", p.pid, flush=True)
    """)
    info = run_job(tmp_path, "bench", [PY, str(child)], timeout_s=30)
    assert info.status == "passed"
    _assert_group_gone(_pgid(info))


EXCLUSIVE = """
import os, sys, time
from pathlib import Path
dev = os.environ["CUDA_VISIBLE_DEVICES"]
marker = Path(sys.argv[1]) / f"busy-{dev}"
fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # fails if another job holds dev
time.sleep(0.3)
os.close(fd)
os.unlink(marker)
print("device", dev)
"""

TOGETHER = """
import os, sys, time
from pathlib import Path
dev = os.environ["CUDA_VISIBLE_DEVICES"]
folder = Path(sys.argv[1])
(folder / f"started-{dev}").write_text("x")
deadline = time.time() + 20
while time.time() < deadline:  # passes only if the other job runs at the same time
    if len(list(folder.glob("started-*"))) == 2:
        sys.exit(0)
    time.sleep(0.02)
sys.exit(7)
"""


def _run_pair(ws: Path, script: Path, marks: Path, pool: list[str]) -> list[Any]:
    results: list[Any] = []
    lock = threading.Lock()

    def one() -> None:
        info = run_job(ws, "bench", [PY, str(script), str(marks)], timeout_s=60, device_pool=pool,
                       backend="cuda")
        with lock:
            results.append(info)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    return results


def test_one_device_runs_jobs_one_after_the_other(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    script = _script(tmp_path, "excl.py", EXCLUSIVE)
    results = _run_pair(tmp_path, script, marks, ["0"])
    assert [r.status for r in results] == ["passed", "passed"], [r.message for r in results]
    assert {r.device for r in results} == {"0"}
    first, second = sorted(results, key=lambda r: r.started_at)
    assert second.started_at >= first.ended_at - 0.05  # the lease serialised them


def test_two_devices_run_two_jobs_at_once(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    script = _script(tmp_path, "together.py", TOGETHER)
    results = _run_pair(tmp_path, script, marks, ["0", "1"])
    assert [r.status for r in results] == ["passed", "passed"], [r.message for r in results]
    assert {r.device for r in results} == {"0", "1"}


def test_waiting_job_is_queued_and_can_be_cancelled(tmp_path: Path) -> None:
    holder = _script(tmp_path, "hold.py", IGNORES_TERM.replace("signal.signal(signal.SIGTERM, signal.SIG_IGN)", ""))
    infos: dict[str, Any] = {}

    def run(name: str, script: str) -> None:
        infos[name] = run_job(tmp_path, name, [PY, script], timeout_s=60, device_pool=["0"], backend="npu",
                              grace_s=1.0)

    first = threading.Thread(target=run, args=("holder", str(holder)))
    first.start()
    running = _wait_status(tmp_path, None, "running")
    second = threading.Thread(target=run, args=("waiter", "-c"))
    second.start()
    # the record is written "queued" first and its waiting message a moment later: wait for both
    queued = _wait_status(tmp_path, None, "queued", where=lambda job: bool(job.message))
    assert queued.kind == "waiter" and "waiting for a free device among 0" in (queued.message or "")
    assert cancel_job(tmp_path, queued.id, grace_s=0.5).status == "cancelled"
    second.join(timeout=30)
    assert infos["waiter"].status == "cancelled" and infos["waiter"].pid is None
    assert "waiting for a device" in (infos["waiter"].message or "")
    cancel_job(tmp_path, running.id, grace_s=1.0)
    first.join(timeout=30)
    assert infos["holder"].status == "cancelled"
    _assert_group_gone(_pgid(infos["holder"]))


def test_missing_program_is_failed_not_raised(tmp_path: Path) -> None:
    info = run_job(tmp_path, "bench", [str(tmp_path / "no-such-program")], timeout_s=10)
    assert info.status == "failed" and "could not start" in (info.message or "")


def test_output_is_capped_and_echo_goes_to_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HELIX_JOB_MAX_LOG_MB", "1")
    code = "import sys\nfor _ in range(3000): sys.stdout.write('y' * 1023 + '\\n')\nprint('THE END')"
    info = run_job(tmp_path, "bench", [PY, "-c", code], timeout_s=30, echo=True)
    assert info.status == "passed"
    log = (tmp_path / ".helix/jobs" / info.id / "output.log").read_bytes()
    assert 1024 * 1024 <= len(log) < 1024 * 1024 + 1000
    assert b"further output dropped" in log and b"THE END" not in log
    assert "THE END" in capfd.readouterr().err


def test_spawn_cli_runs_detached_in_its_own_session(tmp_path: Path) -> None:
    from helix_engine.jobs.launch import spawn_cli

    pid = spawn_cli(tmp_path, ["jobs", "list", "--json", "-w", str(tmp_path)])
    assert os.getsid(pid) == pid
    deadline = time.monotonic() + 30
    while procs.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not procs.pid_alive(pid)
    logs = list((tmp_path / ".helix" / "jobs").glob("spawn-*.log"))
    assert len(logs) == 1
    assert json.loads(logs[0].read_text())["jobs"] == []
    assert list_jobs(tmp_path) == []  # the spawn log is not mistaken for a job


@pytest.mark.slow
def test_jobs_cli_list_show_and_follow_a_live_job(tmp_path: Path) -> None:
    child = _script(tmp_path, "slow.py", """
        import time
        from helix_engine.jobs.events import EventWriter
        w = EventWriter.from_env()
        for i in range(4):
            w.case_started(f"c{i}", i, 4)
            time.sleep(0.15)
            w.case_finished(f"c{i}", {"metrics": {"kernel_avg_time_us": 10.0 + i}})
            w.progress(i + 1, 4)
        w.log("a very long log message " * 20)
    """)
    thread = threading.Thread(target=lambda: run_job(tmp_path, "bench", [PY, str(child)], timeout_s=60))
    thread.start()
    job = _wait_status(tmp_path, None, "running")
    tail = subprocess.run([PY, "-m", "helix_engine", "jobs", "tail", job.id, "--follow", "-w", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    thread.join(timeout=60)
    assert tail.returncode == 0, tail.stderr
    lines = tail.stdout.splitlines()
    assert sum("finished: kernel 1" in ln for ln in lines) == 4
    assert any("progress 4/4" in ln for ln in lines)
    assert lines[-1].startswith(f"job {job.id} passed")
    assert all(len(ln) <= 80 for ln in lines)
    listing = subprocess.run([PY, "-m", "helix_engine", "jobs", "-w", str(tmp_path)],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert job.id in listing.stdout and "passed" in listing.stdout
    assert all(len(ln) <= 80 for ln in listing.stdout.splitlines())
    show = subprocess.run([PY, "-m", "helix_engine", "jobs", "show", job.id, "--json", "-w", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    data = json.loads(show.stdout)
    assert data["job"]["status"] == "passed" and data["progress"] == [4, 4] and data["cases_finished"] == 4
    missing = subprocess.run([PY, "-m", "helix_engine", "jobs", "show", "nope", "-w", str(tmp_path)],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert missing.returncode == 1 and "helix jobs list" in missing.stderr and "Traceback" not in missing.stderr


@pytest.mark.slow
def test_triton_kernel_runs_in_a_cpu_job(tmp_path: Path) -> None:
    child = _script(tmp_path, "vadd.py", """
        import torch, triton, triton.language as tl
        from helix_engine.jobs.events import EventWriter

        @triton.jit
        def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

        x = torch.arange(100, dtype=torch.float32)
        y = torch.ones(100)
        out = torch.empty(100)
        add_kernel[(triton.cdiv(100, 64),)](x, y, out, 100, BLOCK=64)
        assert torch.equal(out, x + y)
        EventWriter.from_env().result({"max": float(out.max())})
    """)
    events: list[dict[str, Any]] = []
    info = run_job(tmp_path, "test", [PY, str(child)], timeout_s=120, backend="cpu", on_event=events.append)
    assert info.status == "passed", (tmp_path / ".helix/jobs" / info.id / "output.log").read_text()[-2000:]
    assert events[-1]["payload"] == {"max": 100.0}


POOL_SUPERVISOR = """
import concurrent.futures, sys
from pathlib import Path
from helix_engine.jobs.runner import install_interrupt_handlers, run_job
install_interrupt_handlers()  # what every `helix` command does (commands/jobs.py register)
ws = Path(sys.argv[1])
argv = [sys.executable, "-c", "import time; time.sleep(120)"]
with concurrent.futures.ThreadPoolExecutor(2) as pool:
    futures = [pool.submit(run_job, ws, "bench", argv, timeout_s=120, device_pool=[d], grace_s=1.0)
               for d in ("0", "1")]
    for f in futures:
        f.result()
"""


@pytest.mark.slow
def test_ctrl_c_in_main_thread_stops_jobs_run_from_worker_threads(tmp_path: Path) -> None:
    sup = subprocess.Popen([PY, "-c", POOL_SUPERVISOR, str(tmp_path)], cwd=ROOT, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(j.status == "running" for j in list_jobs(tmp_path)) < 2:
            time.sleep(0.05)
        jobs = list_jobs(tmp_path)
        assert [j.status for j in jobs] == ["running", "running"]
        os.kill(sup.pid, signal.SIGINT)
        sup.wait(timeout=30)  # not the 120 s the jobs would run
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait()
    for job in jobs:
        final = load_job(tmp_path, job.id)
        assert final.status == "cancelled", final
        assert "interrupted: the supervising helix process got SIGINT" in (final.message or "")
        _assert_group_gone(_pgid(job))


def test_stop_all_jobs_cancels_a_job_supervised_in_a_thread(tmp_path: Path) -> None:
    from helix_engine.jobs.runner import stop_all_jobs

    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(
        run_job(tmp_path, "bench", [PY, "-c", "import time; time.sleep(60)"], timeout_s=60, grace_s=1.0)))
    thread.start()
    job = _wait_status(tmp_path, None, "running")
    assert stop_all_jobs("the cockpit is closing") >= 1
    thread.join(timeout=30)
    assert out[0].status == "cancelled" and "the cockpit is closing" in (out[0].message or "")
    _assert_group_gone(_pgid(job))
    assert stop_all_jobs("nothing runs") == 0


def test_child_sees_helix_device_and_backend(tmp_path: Path) -> None:
    code = "import os; print(os.environ['HELIX_DEVICE'], os.environ['HELIX_BACKEND'], os.environ['TRITON_INTERPRET'])"
    info = run_job(tmp_path, "test", [PY, "-c", code], backend="cpu", timeout_s=30)
    assert (tmp_path / ".helix/jobs" / info.id / "output.log").read_text().split() == ["cpu", "cpu", "1"]
    info = run_job(tmp_path, "test", [PY, "-c", code], backend="cpu", timeout_s=30, env={"TRITON_INTERPRET": "0"})
    assert (tmp_path / ".helix/jobs" / info.id / "output.log").read_text().split()[-1] == "0"  # caller wins


def _cli(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "helix_engine", "jobs", *args, "-w", str(ws)], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


@pytest.mark.slow
def test_jobs_cli_on_finished_and_failed_jobs(tmp_path: Path) -> None:
    failed = run_job(tmp_path, "test", [PY, "-c", "import sys; print('é' * 300); sys.exit(4)"], timeout_s=30)
    ok = run_job(tmp_path, "bench", [PY, "-c", "x = bytearray(50_000_000); import time; time.sleep(0.5)"],
                 timeout_s=30, round_name="opt-round-12")
    assert (ok.model_extra or {}).get("peak_memory_mb", 0) > 40  # the 50 MB buffer was seen
    show = _cli(tmp_path, "show", failed.id)
    assert show.returncode == 0 and "exited with code 4" in show.stdout
    assert all(len(ln) <= 80 for ln in show.stdout.splitlines())
    assert "peak" in _cli(tmp_path, "show", ok.id).stdout
    cancel = _cli(tmp_path, "cancel", failed.id)
    assert cancel.returncode == 0 and "already finished (failed); nothing to cancel" in cancel.stdout
    assert load_job(tmp_path, failed.id).status == "failed"  # cancel did not rewrite it
    tail = _cli(tmp_path, "tail", failed.id)
    assert tail.returncode == 0 and "no events from job" in tail.stdout
    out = _cli(tmp_path, "tail", failed.id, "--output")
    assert "é" * 10 in out.stdout
    round_dir = tmp_path / "opt-round-12"
    round_dir.mkdir()
    listing = _cli(round_dir, "list", "--json")  # a round folder means its workspace
    data = json.loads(listing.stdout)
    assert [j["id"] for j in data["jobs"]] == [ok.id, failed.id]
    assert _cli(tmp_path, "list", "--limit", "1").stdout.count("\n") == 2  # header + one job
    follow = _cli(tmp_path, "tail", failed.id, "--follow")
    assert follow.returncode == 1 and f"job {failed.id} failed" in follow.stdout


def test_bad_command_lines_are_failed_jobs_not_crashes(tmp_path: Path) -> None:
    gone = run_job(tmp_path, "bench", [PY, "-c", "pass"], cwd=tmp_path / "missing", timeout_s=10)
    assert gone.status == "failed" and "does not exist" in (gone.message or "")
    nul = run_job(tmp_path, "bench", [PY, "-c", "pass\0"], timeout_s=10)
    assert nul.status == "failed" and "could not start" in (nul.message or "")
    assert {j.status for j in list_jobs(tmp_path)} == {"failed"}


def test_a_supervisor_error_still_ends_the_job_and_its_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from helix_engine.jobs import runner

    def broken_pump(self: Any) -> None:
        raise RuntimeError("tailing failed")

    monkeypatch.setattr(runner._Supervisor, "pump", broken_pump)
    with pytest.raises(RuntimeError, match="tailing failed"):
        run_job(tmp_path, "bench", [PY, "-c", "import time; time.sleep(60)"], timeout_s=60, grace_s=1.0)
    job = list_jobs(tmp_path)[0]
    assert job.status == "failed" and "helix failed while supervising" in (job.message or "")
    _assert_group_gone(_pgid(job))


def test_helix_debug_prints_the_leased_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HELIX_DEBUG", "1")
    info = run_job(tmp_path, "bench", [PY, "-c", "pass"], device_pool=["2"], backend="npu", timeout_s=30)
    assert info.status == "passed" and info.device == "2"
    assert f"job {info.id}: ASCEND_RT_VISIBLE_DEVICES=2" in capfd.readouterr().err
