"""The warm worker (eval/warm.py, eval/zygote.py) end to end on the CPU backend: probes run in its
fork and agree with a cold probe, cancel and a killed client end the fork, a job whose settings
differ runs cold and says why, and the CLI starts, reports and stops it."""

from __future__ import annotations

import json
import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.errors import HelixError
from helix_engine.eval import warm, zygote
from helix_engine.eval.probe import probe_bench
from helix_engine.jobs.registry import list_jobs
from helix_engine.jobs.runner import cancel_job
from tests.e2e._eval_ws import add_operator, make_ws, pid_gone

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_BACKEND", "cpu")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A softmax workspace (baseline: the slow softmax) with a warm worker running for it."""
    old = os.environ.get("HELIX_BACKEND")
    os.environ["HELIX_BACKEND"] = "cpu"
    ws = make_ws(tmp_path_factory.mktemp("warm"), "softmax")
    add_operator(ws, "softmax_slow", "baseline/softmax.py")
    add_operator(ws, "softmax_hang", "opt-round-1/softmax.py")
    info = warm.start(ws, "cpu", idle_s=300)
    try:
        yield ws
    finally:
        warm.stop(ws, "cpu")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not pid_gone(info["pid"]):
            time.sleep(0.1)
        if old is None:
            os.environ.pop("HELIX_BACKEND", None)
        else:
            os.environ["HELIX_BACKEND"] = old


def _running(ws: Path) -> int:
    return int(warm.hello(ws, "cpu")["probes_running"])


def _wait(predicate: object, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_a_probe_runs_in_the_warm_workers_fork_and_agrees_with_a_cold_one(served: Path) -> None:
    before = warm.hello(served, "cpu")["served"]
    hot = probe_bench(served / "softmax.py", against="baseline")
    assert hot.exit_code == 0, hot.text
    assert hot.worker == "warm", hot.worker_note
    assert f"warm worker pid {warm.hello(served, 'cpu')['pid']}" in hot.worker_note
    assert "Worker: warm (" in hot.text
    assert warm.hello(served, "cpu")["served"] == before + 1
    cold = probe_bench(served / "softmax.py", against="baseline", warm=False)
    assert cold.exit_code == 0 and cold.worker == "cold" and "Worker:" not in cold.text
    assert hot.classification == cold.classification == "likely_gain"
    adaptive = probe_bench(served / "softmax.py", against="baseline", adaptive=True, budget_s=60)
    assert adaptive.exit_code == 0 and adaptive.worker == "warm", adaptive.text
    assert adaptive.classification == "likely_gain" and adaptive.decision == "faster"
    assert _running(served) == 0


def test_cancelling_a_warm_probe_ends_its_fork(served: Path) -> None:
    got: dict[str, object] = {}
    thread = threading.Thread(target=lambda: got.update(out=probe_bench(
        served / "opt-round-1" / "softmax.py", against="baseline", bench_file=served / "bench_softmax.py")))
    thread.start()
    assert _wait(lambda: _running(served) == 1), "the hanging probe never reached the worker"
    job = next(j for j in list_jobs(served) if j.status == "running" and j.kind == "probe-bench")
    cancel_job(served, job.id, grace_s=1.0)
    thread.join(30)
    assert not thread.is_alive()
    out = got["out"]
    assert out.exit_code == 1 and "cancelled" in (out.message or "")  # type: ignore[attr-defined]
    assert _wait(lambda: _running(served) == 0), "the fork outlived its cancelled job"
    probes = [j for j in list_jobs(served) if j.kind != "warm-worker"]
    assert probes and all(j.status in ("passed", "cancelled") and pid_gone(j.pid) for j in probes)


def test_a_killed_client_takes_its_fork_with_it(served: Path) -> None:
    thread = threading.Thread(target=lambda: probe_bench(
        served / "opt-round-1" / "softmax.py", against="baseline", bench_file=served / "bench_softmax.py"))
    thread.start()
    assert _wait(lambda: _running(served) == 1)
    job = next(j for j in list_jobs(served) if j.status == "running" and j.kind == "probe-bench")
    assert job.pid is not None
    os.kill(job.pid, signal.SIGKILL)  # the client: the job's child
    assert _wait(lambda: _running(served) == 0), "the fork outlived its client"
    thread.join(30)
    assert not thread.is_alive()


def test_a_job_with_other_import_settings_runs_cold_and_says_why(served: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_HELIX_WARM_TEST", "1")
    out = probe_bench(served / "softmax.py", against="baseline")
    assert out.exit_code == 0 and out.worker == "cold"
    assert "the environment differs (TRITON_HELIX_WARM_TEST)" in out.worker_note
    assert "Worker: cold, a fresh process: the warm worker was started with other settings" in out.text


def test_the_worker_refuses_what_it_does_not_run(served: Path) -> None:
    sock = warm.connect(warm.socket_path(served, "cpu"))
    with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out:
        warm.send(sock, {"op": "run", "module": "os", "argv": [], "cwd": str(served), "env": {}},
                  fds=[null_in.fileno(), null_out.fileno(), null_out.fileno()])
        reply, _ = warm.receive(sock)
    sock.close()
    assert "runs only helix_engine.eval.worker" in reply["error"]
    sock = warm.connect(warm.socket_path(served, "cpu"))
    with open(os.devnull, "rb") as null_in:
        warm.send(sock, {"op": "run", "module": "helix_engine.eval.worker", "argv": [], "cwd": str(served),
                         "env": {"TORCH_SOMETHING": "1"}, "path": []}, fds=[null_in.fileno()] * 3)
        reply, _ = warm.receive(sock)
    sock.close()
    assert "settings differ" in reply["error"]
    assert _running(served) == 0


def test_the_cli_starts_reports_and_stops_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = make_ws(tmp_path, "softmax")
    assert main(["worker", "status", str(ws), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["running"] is False
    assert main(["worker", "start", "-w", str(ws), "--idle-minutes", "5"]) == 0
    assert capsys.readouterr().out.startswith("started: warm worker pid ")
    assert main(["worker", "start", str(ws)]) == 0
    assert capsys.readouterr().out.startswith("already running: ")
    assert main(["worker", "status", str(ws), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["running"] and status["matches"] and status["backend"] == "cpu"
    path = warm.socket_path(ws, "cpu")
    assert path.exists()
    assert main(["worker", "stop", str(ws)]) == 0
    assert capsys.readouterr().out.startswith("stopped: warm worker pid ")
    assert _wait(lambda: pid_gone(status["pid"]) and not path.exists())
    (job,) = [j for j in list_jobs(ws) if j.kind == "warm-worker"]
    assert _wait(lambda: next(j for j in list_jobs(ws) if j.id == job.id).status == "passed")


# ------------------------------------------------------------------ pieces, no worker needed


def test_fingerprints_name_what_differs() -> None:
    base = {"python": "/p", "code": "c", "origins": {"torch": "/t"}, "env": {"TRITON_X": "1"}}
    assert warm.difference(base, dict(base)) is None
    assert "helix's code changed" in (warm.difference(base, dict(base, code="d")) or "")
    assert "imports torch from elsewhere" in (warm.difference(base, dict(base, origins={"torch": "/u"})) or "")
    assert warm.difference(base, dict(base, env={})) == "the environment differs (TRITON_X)"
    env = {"CUDA_VISIBLE_DEVICES": "3", "HELIX_JOB_DIR": "/j", "PYTHONPATH": "/x", "TORCH_Y": "1", "HOME": "/h"}
    assert warm.fingerprint(env, "/usr/bin/python3")["env"] == {"TORCH_Y": "1"}


def test_the_socket_folder_must_be_private(monkeypatch: pytest.MonkeyPatch) -> None:
    with tempfile.TemporaryDirectory(prefix="hx-", dir="/tmp") as short:  # pytest's tmp_path can be too long
        base = Path(short)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
        (base / "helix").mkdir(mode=0o777)
        os.chmod(base / "helix", 0o777)
        with pytest.raises(warm.WarmError, match="not a private folder"):
            warm.runtime_dir()
        os.chmod(base / "helix", 0o700)
        assert warm.runtime_dir() == base / "helix"
        assert len(str(warm.socket_path(base / ("x" * 200), "cpu"))) <= warm.SOCKET_PATH_MAX


def test_a_runtime_folder_too_long_for_a_socket_falls_back_to_tmp(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # found running the suite under pytest-xdist: its longer tmp_path made the socket path 109 bytes,
    # and every bind in such a folder fails with "AF_UNIX path too long"
    deep = tmp_path / ("d" * 90)
    deep.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    with tempfile.TemporaryDirectory(prefix="hx-", dir="/tmp") as short:
        monkeypatch.setenv("TMPDIR", short)
        monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
        path = warm.socket_path(tmp_path, "cpu")
        assert path.parent == Path(short) / f"helix-{os.getuid()}"
        assert len(os.fsencode(path)) <= warm.SOCKET_PATH_MAX
        served = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        served.bind(str(path))  # the path the worker binds is one AF_UNIX takes
        served.close()
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(warm.WarmError, match="too long a path in .* and in .*at most 107 bytes.*set XDG_RUNTIME_DIR or TMPDIR"):
        warm.socket_path(tmp_path, "cpu")
    # the same sentence from `helix worker start`, before it spawns anything, and from the worker itself
    with pytest.raises(HelixError, match="too long a path .*then start the worker again"):
        warm.start(tmp_path, "cpu", wait_s=1)
    assert not (tmp_path / ".helix" / "jobs").exists()
    assert zygote.main([str(tmp_path), "cpu", "60"]) == 1


def test_no_usable_temp_folder_is_a_sentence_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # found by review: with $XDG_RUNTIME_DIR usable, the fallback's gettempdir() was called anyway and its
    # FileNotFoundError escaped usable(), whose promise is never to raise
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)

    def no_tmp() -> str:
        raise FileNotFoundError(2, "No usable temporary directory found")

    monkeypatch.setattr(tempfile, "gettempdir", no_tmp)
    path, note = warm.usable(tmp_path, "cpu", dict(os.environ))
    assert path is None and "no usable temp folder" in note and "set TMPDIR" in note
    with tempfile.TemporaryDirectory(prefix="hx-", dir="/tmp") as short:
        monkeypatch.setenv("XDG_RUNTIME_DIR", short)
        assert warm.socket_path(tmp_path, "cpu").parent == Path(short) / "helix"  # gettempdir not asked
        # a relative $XDG_RUNTIME_DIR is ignored (the worker and its client run in different folders)
        monkeypatch.chdir("/tmp")
        monkeypatch.setenv("XDG_RUNTIME_DIR", os.path.basename(short))
        monkeypatch.setenv("TMPDIR", short)
        monkeypatch.setattr(tempfile, "gettempdir", lambda: short)
        assert warm.socket_path(tmp_path, "cpu").parent == Path(short) / f"helix-{os.getuid()}"


def test_an_oversized_message_is_refused() -> None:
    a, b = socket.socketpair()
    a.sendall(warm.HEADER.pack(warm.MAX_MESSAGE + 1))
    with pytest.raises(ConnectionError, match="larger than the worker accepts"):
        warm.receive(b)
    a.close()
    b.close()


def test_no_worker_means_a_cold_probe_with_a_quiet_note(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax")
    path, note = warm.usable(ws, "cpu", dict(os.environ))
    assert path is None and note.startswith(warm.NO_WORKER)
    path, note = warm.usable(ws, "npu", dict(os.environ))
    assert path is None and "not npu" in note


# ------------------------------------------------------------------ found by a red-team review


def _fork_ops(ws: Path, extra: Path, marker: Path) -> Path:
    """An operator in round 2 that imports a module found only on PYTHONPATH and registers an exit
    hook writing ``marker``: what a cold child does with both, the fork must do too."""
    (extra / "helix_warm_extra.py").write_text("SCALE = 1.0\n")
    op = ws / "opt-round-2" / "softmax.py"
    op.parent.mkdir(exist_ok=True)
    source = (ws / "softmax.py").read_text()
    op.write_text("import atexit\nimport helix_warm_extra  # noqa: F401\n"
                  f"atexit.register(lambda: open({str(marker)!r}, 'a').write('x'))\n" + source)
    return op


def test_the_fork_sees_the_jobs_pythonpath_and_no_operator_exit_hook_runs(served: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator runs in the gate's operator process (started by the fork with the job's
    PYTHONPATH), which ends without running the operator's exit handlers: operator code does not
    run after the gate has taken its last measurement (gate/opclient.py ``close``)."""
    extra, marker = tmp_path / "extra", tmp_path / "exited"
    extra.mkdir()
    op = _fork_ops(served, extra, marker)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(extra), os.environ.get("PYTHONPATH", "")]))
    out = probe_bench(op, against="baseline", bench_file=served / "bench_softmax.py")
    assert out.exit_code == 0 and out.worker == "warm", out.text
    assert not marker.exists()


def test_the_zygote_survives_bad_messages_and_keeps_no_descriptor(served: Path) -> None:
    pid = warm.hello(served, "cpu")["pid"]
    fds_before = len(os.listdir(f"/proc/{pid}/fd"))
    for body in ({"op": "run", "module": [], "argv": [], "cwd": "/", "env": {}, "path": []},
                 {"op": "run", "module": "helix_engine.eval.worker", "argv": [1], "cwd": "/", "env": {}, "path": []}):
        sock = warm.connect(warm.socket_path(served, "cpu"))
        with open(os.devnull, "rb") as null:
            warm.send(sock, body, fds=[null.fileno()] * 3)
            reply, _ = warm.receive(sock)
        sock.close()
        assert reply["error"]
    for _ in range(5):  # a body too deeply nested to parse, with descriptors riding along
        sock = warm.connect(warm.socket_path(served, "cpu"))
        with open(os.devnull, "rb") as null:
            deep = b"[" * 200_000
            socket.send_fds(sock, [warm.HEADER.pack(len(deep))], [null.fileno()] * 3)
            sock.sendall(deep)
        sock.settimeout(10)
        with pytest.raises((ConnectionError, OSError, ValueError, KeyError)):
            reply, _ = warm.receive(sock)
            raise KeyError(reply["error"])  # an error answer is fine too
        sock.close()
    assert warm.hello(served, "cpu")["pid"] == pid
    assert _wait(lambda: len(os.listdir(f"/proc/{pid}/fd")) <= fds_before + 1)


def test_a_second_worker_for_the_same_workspace_leaves_the_first_alone(served: Path) -> None:
    import subprocess
    import sys

    pid = warm.hello(served, "cpu")["pid"]
    second = subprocess.run([sys.executable, "-m", "helix_engine.eval.zygote", str(served), "cpu", "60"],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode != 0 and "already serves" in second.stderr + second.stdout
    assert warm.hello(served, "cpu")["pid"] == pid  # its socket is still the first one's


def test_stopping_the_worker_mid_probe_fails_the_probe_with_a_sentence(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax")
    add_operator(ws, "softmax_slow", "baseline/softmax.py")
    add_operator(ws, "softmax_hang", "opt-round-1/softmax.py")
    warm.start(ws, "cpu", idle_s=120)
    got: dict[str, object] = {}
    try:
        thread = threading.Thread(target=lambda: got.update(out=probe_bench(
            ws / "opt-round-1" / "softmax.py", against="baseline", bench_file=ws / "bench_softmax.py")))
        thread.start()
        assert _wait(lambda: int(warm.hello(ws, "cpu")["probes_running"]) == 1)
    finally:
        warm.stop(ws, "cpu")
    thread.join(60)
    message = str(getattr(got.get("out"), "message", ""))
    assert "SIGKILL" in message and "Invalid argument" not in message and "Traceback" not in message, message


def test_what_a_fork_started_does_not_outlive_it(served: Path, tmp_path: Path) -> None:
    """A killed fork runs no cleanup, and a process it forked (no exec: its environment names no
    job) is in no job's tree: the zygote, a subreaper, adopts and ends it."""
    mark = tmp_path / "grandchild.pid"
    op = served / "opt-round-3" / "softmax.py"
    op.parent.mkdir(exist_ok=True)
    op.write_text("import os, time\n"
                  "if os.fork() == 0:\n"
                  "    os.setsid()\n"
                  f"    open({str(mark)!r}, 'w').write(str(os.getpid()))\n"
                  "    time.sleep(60)\n"
                  "    os._exit(0)\n"
                  "time.sleep(30)  # the job is still running when the test kills it, however loaded the box\n"
                  + (served / "opt-round-1" / "softmax.py").read_text())
    thread = threading.Thread(target=lambda: probe_bench(op, against="baseline",
                                                         bench_file=served / "bench_softmax.py"))
    thread.start()
    assert _wait(lambda: mark.exists() and mark.read_text().isdigit() and _running(served) == 1, timeout_s=60)
    grandchild = int(mark.read_text())
    job = next(j for j in list_jobs(served) if j.status == "running" and j.kind == "probe-bench")
    assert job.pid is not None
    os.kill(job.pid, signal.SIGKILL)  # the client: the zygote then kills the fork with no time to clean up
    thread.join(30)
    assert _wait(lambda: pid_gone(grandchild)), "a process the fork started outlived it"


def test_close_does_not_wait_forever_on_a_lock_its_own_thread_holds(tmp_path: Path) -> None:
    """The SIGTERM handler runs close() on the main thread, which may hold the lock when the
    signal lands: close gives up waiting for it after a second instead of hanging the worker."""
    from helix_engine.eval.zygote import Zygote

    z = Zygote(tmp_path, "cpu", 10.0)
    done = threading.Event()

    def handler_like() -> None:
        with z.lock:  # the interrupted main thread's hold
            z.close()
        done.set()

    thread = threading.Thread(target=handler_like, daemon=True)
    thread.start()
    assert done.wait(10), "close() waited for a lock its own thread held"
