"""Jobs on a Ray cluster (issue 15), on a real local Ray head started inside the test run:
two CPUs and a custom ``NPU: 2`` resource that CPU-backend jobs ask for
(HELIX_CLUSTER_RESOURCE=NPU). One cluster serves the whole module (Ray starts slowly on two
cores); each test runs real worker jobs through it.

- run-bench --cluster writes a perf file with the same cases and keys as a local run, and the
  job is registered here with the node and device it ran on;
- two jobs at once land on different devices, both stream their cases while running, `helix
  cluster status` shows them, and a cancel reaches the task (its worker process on the node ends);
- a killed Ray worker makes the job `lost`, with a sentence.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helix_engine.jobs.registry import JobInfo, list_jobs, read_events
from helix_engine.jobs.runner import cancel_job
from tests.conftest import ROOT
from tests.e2e._eval_ws import make_ws, pid_gone

_EXCEPTHOOK = sys.excepthook  # importing ray replaces it for the process: put back after the file
ray = pytest.importorskip("ray", reason="the cluster tests need Ray: pip install -e '.[cluster]'")

pytestmark = pytest.mark.slow

WAIT_S = 120.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local Ray head (2 CPUs, NPU: 2), its address; no token (the CLI child has its own HOME)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_AUTH_MODE", "disabled")
        # what ray.init sets for the whole process and ray.shutdown leaves: put back after this file,
        # so the files its worker runs next (and their subprocesses) do not inherit it
        # set, then (when it was unset) deleted: either way mp records its original and puts it back
        mp.setenv("PYTHONBREAKPOINT", os.environ.get("PYTHONBREAKPOINT", ""))
        if not os.environ["PYTHONBREAKPOINT"]:
            mp.delenv("PYTHONBREAKPOINT")
        sigterm = signal.getsignal(signal.SIGTERM)
        ray.init(address="local", num_cpus=2, resources={"NPU": 2}, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
        try:
            yield ray.get_runtime_context().gcs_address
        finally:
            ray.shutdown()
            signal.signal(signal.SIGTERM, sigterm)
            sys.excepthook = _EXCEPTHOOK


@pytest.fixture
def on_cluster(cluster: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("HELIX_CLUSTER", cluster)
    monkeypatch.setenv("HELIX_CLUSTER_RESOURCE", "NPU")
    monkeypatch.setenv("HELIX_BACKEND", "cpu")
    return cluster


def _wait_for(what: str, probe: Callable[[], object]) -> object:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _running_with_a_case(ws: Path) -> list[JobInfo]:
    """Jobs running now whose events.jsonl (streamed from the node) already shows a case."""
    out = []
    for job in list_jobs(ws):
        events, _ = read_events(ws / ".helix" / "jobs" / job.id, 0)
        if job.status == "running" and any(e.get("event") == "case_started" for e in events):
            out.append(job)
    return out


def _bench_in_thread(ws: Path, outcomes: list) -> threading.Thread:
    from helix_engine.eval.bench import run_bench

    thread = threading.Thread(target=lambda: outcomes.append(run_bench(ws / "softmax.py", timeout_s=300)))
    thread.start()
    return thread


def test_run_bench_on_the_cluster_writes_the_perf_file_a_local_run_writes(cluster: str, tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "add")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
           "RAY_AUTH_MODE": "disabled", "HELIX_CLUSTER_RESOURCE": "NPU"}
    local = subprocess.run([sys.executable, "-m", "helix_engine", "run-bench", "--operator-file", "add.py",
                            "--backend", "cpu", "-o", str(tmp_path / "local_perf.txt")],
                           capture_output=True, text=True, env=env, cwd=ws, timeout=300, check=False)
    assert local.returncode == 0, local.stdout + local.stderr
    remote = subprocess.run([sys.executable, "-m", "helix_engine", "run-bench", "--operator-file", "add.py",
                             "--backend", "cpu", "--cluster", cluster],
                            capture_output=True, text=True, env=env, cwd=ws, timeout=300, check=False)
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert f"Perf file: {ws / 'add_perf.txt'}" in remote.stdout

    def records(path: Path) -> list[dict]:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    here, there = records(tmp_path / "local_perf.txt"), records(ws / "add_perf.txt")
    assert [r["case_label"] for r in there] == [r["case_label"] for r in here] == ["n256", "n1000"]
    assert [list(r) for r in there] == [list(r) for r in here]  # the same keys, in the same order
    assert all(r["kernel_avg_time_us"] > 0 and r["error_message"] is None for r in there)

    cluster_job, local_job = sorted(list_jobs(ws), key=lambda j: j.created_at, reverse=True)
    assert cluster_job.status == local_job.status == "passed"
    extra = cluster_job.model_extra or {}
    assert extra["cluster"] == cluster and extra["cluster_resource"] == "NPU"
    assert cluster_job.device in ("0", "1") and extra["node_ip"] and extra["node"]
    assert cluster_job.pid is None and "pgid" not in extra  # nothing here that a cancel could signal
    events, _ = read_events(ws / ".helix" / "jobs" / cluster_job.id, 0)
    finished = [e["case_id"] for e in events if e["event"] == "case_finished"]
    assert finished == ["n256", "n1000"] and events[-1]["event"] == "result"


def test_two_jobs_at_once_take_two_devices_and_a_cancel_reaches_the_task(on_cluster: str, tmp_path: Path) -> None:
    from helix_engine.cli import main

    ws = make_ws(tmp_path, "softmax_hang")
    outcomes: list = []
    threads = [_bench_in_thread(ws, outcomes) for _ in range(2)]
    try:
        both = _wait_for("two jobs running at once", lambda: len(_running_with_a_case(ws)) == 2 and
                         _running_with_a_case(ws))
        assert sorted(j.device for j in both) == ["0", "1"]  # one NPU each
        for job in both:
            _wait_for("the node's worker pid", lambda job=job: list_jobs(ws) and
                      [j for j in list_jobs(ws) if j.id == job.id and (j.model_extra or {}).get("node_pid")])
        jobs = {j.id: j for j in list_jobs(ws)}
        status_out = _cli_json(main, ["cluster", "status", "--json"])
        (node,) = status_out["nodes"]
        npu = next(d for d in node["devices"] if d["resource"] == "NPU")
        assert npu["total"] == 2
        assert {j["job_id"] for j in node["jobs"]} == set(jobs)
        assert {j["device"] for j in node["jobs"]} == {"0", "1"}

        first, second = sorted(jobs)
        node_pid = jobs[first].model_extra["node_pid"]
        done = cancel_job(ws, first, grace_s=1.0)
        assert done.status == "cancelled", done
        assert "cancelled on request" in (done.message or "") and "Ray" in (done.message or "")
        _wait_for("the cancelled job's worker process to end", lambda: pid_gone(node_pid))
        assert next(j for j in list_jobs(ws) if j.id == second).status == "running"  # the other one runs on
        cancel_job(ws, second, grace_s=1.0)
    finally:
        for job in list_jobs(ws):
            if job.status in ("queued", "running"):
                cancel_job(ws, job.id, grace_s=1.0)
        for thread in threads:
            thread.join(timeout=60)
    assert len(outcomes) == 2 and all(o.exit_code == 1 and "cancelled" in o.text for o in outcomes)
    assert not (ws / "softmax_perf.txt").exists()  # a cancelled run never writes a perf file


def _cli_json(main: Callable[[list[str]], int], argv: list[str]) -> dict:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


def test_a_killed_ray_worker_makes_the_job_lost_with_a_sentence(on_cluster: str, tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax_hang")
    with (ws / "softmax.py").open("a") as op:
        op.write('\nprint("operator loaded on the node", flush=True)\n')
    outcomes: list = []
    thread = _bench_in_thread(ws, outcomes)
    try:
        (job,) = _wait_for("the job to run a case", lambda: _running_with_a_case(ws))
        log = ws / ".helix" / "jobs" / job.id / "output.log"
        _wait_for("the node's output, streamed while the job runs", lambda: "operator loaded on the node"
                  in log.read_text() and next(j for j in list_jobs(ws) if j.id == job.id).status == "running")
        job = _wait_for("the node's worker pid", lambda: [j for j in list_jobs(ws)
                                                          if (j.model_extra or {}).get("node_pid")])[0]
        task_pid, node_pid = job.model_extra["task_pid"], job.model_extra["node_pid"]
        os.kill(task_pid, signal.SIGKILL)  # the Ray worker running the task dies
        lost = _wait_for("the job to be marked lost", lambda: [j for j in list_jobs(ws)
                                                               if j.id == job.id and j.status == "lost"])[0]
    finally:  # run-bench resumes the cases after a lost job in a new job (as after a local crash): stop it
        _wait_for("the resumed job", lambda: len(list_jobs(ws)) == 2 or not thread.is_alive())
        for left in list_jobs(ws):
            if left.status in ("queued", "running"):
                cancel_job(ws, left.id, grace_s=1.0)
        thread.join(timeout=WAIT_S)
    assert lost.message.startswith("the Ray worker running the job on node ")
    assert "WorkerCrashedError" in lost.message and lost.message.endswith("Run it again")
    _wait_for("the orphaned worker child to end (parent-death signal)", lambda: pid_gone(node_pid))
    assert outcomes and outcomes[0].exit_code == 1
    assert "fp32_4x64" in outcomes[0].text and "lost" in outcomes[0].text  # the case it was in failed, saying why


async def test_the_cockpit_follows_a_cluster_job_live_and_cancels_it(on_cluster: str, tmp_path: Path) -> None:
    """The jobs pane shows the node, the device and the case in flight while the job runs on
    the cluster; C shows the cluster with the job on its node; x cancels it."""
    from textual.widgets import DataTable, Static

    from helix_tui.app import HelixApp

    ws = make_ws(tmp_path, "softmax_hang")
    outcomes: list = []
    thread = _bench_in_thread(ws, outcomes)
    app = HelixApp(ws, job_poll_s=0.3)
    try:
        async with app.run_test(size=(140, 40)) as pilot:

            async def until(what: str, predicate: Callable[[], bool]) -> None:
                deadline = time.monotonic() + WAIT_S
                while not predicate():
                    assert time.monotonic() < deadline, f"timed out waiting for {what}"
                    await pilot.pause(0.1)

            await pilot.press("3")
            jobs = app.main.query_one("#jobs")
            line, cases = jobs.query_one("#job-line", Static), jobs.query_one("#job-cases", DataTable)
            await until("the running case in the jobs pane", lambda: cases.row_count >= 1
                        and "running" in str(line.render()))
            shown = str(line.render())
            (job,) = list_jobs(ws)
            assert f"node {job.model_extra['node_ip']}" in shown and f"device NPU {job.device}" in shown
            assert [str(c) for c in cases.get_row_at(0)][:2] == ["fp32_4x64", "running"]

            await pilot.press("C")
            status = app.screen.query_one("#cluster-status", Static)
            await until("the job on the cluster screen", lambda: job.id in str(status.render()))
            assert f"NPU {job.device}" in str(status.render())
            await pilot.press("escape")

            await pilot.press("x")
            await until("the job cancelled", lambda: app.tracker.jobs[job.id].status == "cancelled")
    finally:
        for left in list_jobs(ws):
            if left.status in ("queued", "running"):
                cancel_job(ws, left.id, grace_s=1.0)
        thread.join(timeout=WAIT_S)
    assert outcomes and outcomes[0].exit_code == 1 and "cancelled" in outcomes[0].text
