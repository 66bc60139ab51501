"""run-bench end to end on the CPU backend: perf files, compare-perf, crashes, jobs, timings."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helix_engine.errors import HelixError
from helix_engine.eval.bench import run_bench
from helix_engine.jobs.registry import read_events
from helix_engine.perf.artifact import read_perf
from helix_engine.workspace.models import HELIX_PERF_KEYS, UPSTREAM_PERF_KEYS
from tests.conftest import ROOT
from tests.e2e._eval_ws import KERNELS, add_operator, assert_jobs_settled, make_ws

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_BACKEND", "cpu")


def test_bench_with_baseline_writes_upstream_perf_and_compares(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax")
    slow = add_operator(ws, "softmax_slow", "baseline/softmax.py")
    out = run_bench(ws / "softmax.py", baseline_operator_file=slow)
    lines = out.text.splitlines()
    assert lines[0] == f"Baseline perf file: {ws / 'baseline' / 'softmax_perf.txt'}"
    assert lines[1] == f"Perf file: {ws / 'softmax_perf.txt'}"
    assert lines[2] == "Perf comparison:"
    assert lines[3].startswith("latency-fp32_4x64: baseline=")
    assert any(line == "PASS: compared 2 latency entries" for line in lines)
    assert out.exit_code == 0
    records, problems = read_perf(ws / "softmax_perf.txt", ws)
    assert problems == []
    assert [r.case_label for r in records] == ["fp32_4x64", "fp32_8x32"]
    raw = [json.loads(line) for line in (ws / "softmax_perf.txt").read_text().splitlines()]
    assert list(raw[0])[: len(UPSTREAM_PERF_KEYS)] == list(UPSTREAM_PERF_KEYS)
    assert list(raw[0])[len(UPSTREAM_PERF_KEYS):] == list(HELIX_PERF_KEYS)
    rec = records[0]
    assert rec.kernel_names == ["softmax_kernel"] and rec.kernel_source == "operator"
    assert rec.bench_mode == "perf-counter" and rec.backend == "cpu" and rec.ops == []
    # paired (the default with a reference): AB/BA blocks give each side the 3 repeats asked for
    assert len(rec.samples_us) == 3 and rec.stats.n == len(rec.samples_us)
    assert rec.kernel_avg_time_us == pytest.approx(sum(rec.samples_us) / len(rec.samples_us))
    assert rec.total_op_avg_time_us == rec.kernel_avg_time_us
    # --unpaired: the baseline perf file now exists and is reused: exactly one new job
    before = len(assert_jobs_settled(ws))
    again = run_bench(ws / "softmax.py", baseline_operator_file=slow, metric_source="all", paired=False)
    assert len(assert_jobs_settled(ws)) == before + 1
    assert "Metric source section: kernel" in again.text and "Metric source section: total-op" in again.text


def test_events_stream_per_case_records(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "add")
    seen: list[dict] = []
    out = run_bench(ws / "add.py", output=tmp_path / "custom" / "p.txt", on_event=seen.append)
    assert out.exit_code == 0 and out.perf_file == str(tmp_path / "custom" / "p.txt")
    assert not (ws / "add_perf.txt").exists()
    (job,) = assert_jobs_settled(ws)
    events, _ = read_events(ws / ".helix" / "jobs" / job.id)
    kinds = [e["event"] for e in events]
    assert kinds.count("case_started") == 2 and kinds.count("case_finished") == 2
    assert kinds[-1] == "result"
    finished = [e for e in events if e["event"] == "case_finished"]
    assert finished[0]["record"]["case_label"] == "n256" and finished[0]["record"]["stats"]["n"] == 3
    assert finished[1]["record"]["kernel_source"] == "metadata+operator"
    last = [e for e in events if e["event"] == "progress"][-1]
    assert (last["done"], last["total"]) == (2, 2)
    assert any(e.get("event") == "case_finished" for e in seen)


def test_crashing_case_does_not_lose_the_others(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax_abort")
    out = run_bench(ws / "softmax.py")
    assert out.exit_code == 1
    assert [r["case_label"] for r in out.records] == ["fp32_4x64", "fp32_8x32"]
    assert all("SIGABRT" in (r["error_message"] or "") for r in out.records)
    jobs = assert_jobs_settled(ws)
    assert len(jobs) == 2 and all(j.status == "failed" for j in jobs)  # resumed after the first crash
    assert not (ws / "softmax_perf.txt").exists()  # a crashed run never writes the perf file
    assert out.message.startswith("a bench job crashed; no perf file was written")


def _good_perf_then(ws: Path, variant: str) -> bytes:
    """Bench the good operator (the round's last good perf file), then swap in ``variant``."""
    first = run_bench(ws / "softmax.py")
    assert first.exit_code == 0, first.text
    good = (ws / "softmax_perf.txt").read_bytes()
    assert good.count(b"\n") == 2 and b'"error_message":null' in good
    shutil.copy(KERNELS / "ops" / f"{variant}.py", ws / "softmax.py")
    return good


def test_timeout_marks_unrun_cases_and_keeps_the_last_good_perf_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make_ws(tmp_path, "softmax")
    good = _good_perf_then(ws, "softmax_hang")
    monkeypatch.setenv("HELIX_EVAL_TIMEOUT_SECONDS", "4")
    out = run_bench(ws / "softmax.py")
    assert out.exit_code == 1 and out.perf_file is None
    records = out.records
    assert "timed out after 4 s" in records[0]["error_message"]
    assert records[1]["error_message"].startswith("not run: timed out")
    job = max(assert_jobs_settled(ws), key=lambda j: j.started_at)
    assert job.status == "timeout" and job.ended_at - job.started_at <= 4 + 5
    assert (ws / "softmax_perf.txt").read_bytes() == good
    assert f"FAIL: the bench timed out; {ws / 'softmax_perf.txt'} was left as it was" in out.text
    assert [p.name for p in ws.iterdir() if p.name.endswith(".tmp")] == []


def test_cancelled_rebench_keeps_the_last_good_perf_file(tmp_path: Path) -> None:
    """The reported case: cancelling a re-bench replaced the good file with error rows."""
    ws = make_ws(tmp_path, "softmax")
    good = _good_perf_then(ws, "softmax_hang")
    cancelled: list[bool] = []

    def on_event(event: dict) -> None:  # the hang is inside the first case: cancel it there
        if event.get("event") == "case_started" and not cancelled:
            cancelled.append(True)
            threading.Thread(target=_cancel_running, args=(ws,)).start()

    out = run_bench(ws / "softmax.py", on_event=on_event)
    assert cancelled and out.exit_code == 1 and out.perf_file is None
    job = max(assert_jobs_settled(ws), key=lambda j: j.started_at)
    assert job.status == "cancelled"
    assert (ws / "softmax_perf.txt").read_bytes() == good
    assert f"FAIL: the bench was cancelled; {ws / 'softmax_perf.txt'} was left as it was" in out.text
    assert "Next:" not in out.text and "compare-perf" not in out.text, out.text  # no hint to compare a cancelled run
    assert [p.name for p in ws.iterdir() if p.name.endswith(".tmp")] == []


def _cancel_running(ws: Path) -> None:
    """``helix jobs cancel`` for the workspace's running job (through its cancel marker)."""
    from helix_engine.jobs.registry import list_jobs
    from helix_engine.jobs.runner import cancel_job

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        running = [j for j in list_jobs(ws) if j.status == "running"]
        if running:
            cancel_job(ws, running[0].id, grace_s=1.0)
            return
        time.sleep(0.05)


def test_round_timings_while_round_active(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "add")
    cand = add_operator(ws, "add", "opt-round-1/opt_add.py")
    (ws / ".helix").mkdir(exist_ok=True)
    (ws / ".helix" / "state.json").write_text(json.dumps(
        {"schema_version": 1, "run_id": "r1", "phase": "round_active", "current_round": 1,
         "baseline": {"status": "passed"}, "rounds": {"1": {"status": "active", "round_dir": "opt-round-1"}}}))
    out = run_bench(cand)
    assert out.exit_code == 0 and out.perf_file == str(ws / "opt-round-1" / "opt_add_perf.txt")
    timings = [json.loads(line) for line in (ws / ".helix" / "round-timings" / "opt-round-1.jsonl").read_text().splitlines()]
    assert [t["event"] for t in timings] == ["run_bench_start", "run_bench_end"]
    assert timings[0]["run_id"] == "r1" and timings[0]["round"] == 1
    (job,) = assert_jobs_settled(ws)
    assert job.round == "opt-round-1"


def test_contract_error_is_a_clear_failure(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "add")
    bench = ws / "bench_add.py"
    bench.write_text(bench.read_text().replace('"n256"', '"n1000"'))
    out = run_bench(ws / "add.py")
    assert out.exit_code == 1 and out.perf_file is None
    assert "bench_add.py: build_bench_cases: duplicate case id 'n1000'" in out.text
    with pytest.raises(HelixError, match="does not run on the cpu backend"):
        run_bench(ws / "add.py", bench_mode="torch-profiler")


def test_device_pool_runs_one_job_per_case_in_declared_order(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "add")
    out = run_bench(ws / "add.py", devices=["0", "1"])
    assert out.exit_code == 0, out.text
    assert [r["case_label"] for r in out.records] == ["n256", "n1000"]
    jobs = assert_jobs_settled(ws)
    assert sorted(j.kind for j in jobs) == ["bench-plan", "run-bench", "run-bench"]
    assert sorted(j.device for j in jobs if j.kind == "run-bench") in (["0", "1"], ["0", "0"], ["1", "1"])


def test_msprof_run_one_target(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "add")
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"action": "bench", "operator_file": str(ws / "add.py"), "bench_file": str(ws / "bench_add.py"),
                               "bench_mode": "msprof", "backend": "cpu", "device_str": "cpu",
                               "result_path": str(tmp_path / "r.json")}))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    ok = subprocess.run([sys.executable, "-m", "helix_engine.eval.worker", str(req), "--run-one", "n256", "--iterations", "2"],
                        capture_output=True, text=True, env=env, timeout=120, check=False)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "helix_engine.eval.worker", str(req), "--run-one", "nope"],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert bad.returncode == 2 and "no bench case 'nope'" in bad.stderr


def test_bench_refuses_to_overwrite_a_submitted_rounds_perf_file(tmp_path: Path) -> None:
    """A passed round's perf file is what the ledger and status measured; re-benching it in
    place (the cockpit's b on a submitted round did) silently changed a submitted result."""
    from tests.builders import workflow_state, write_workflow_state

    ws = make_ws(tmp_path, "softmax")
    cand = add_operator(ws, "softmax", "opt-round-1/opt_softmax.py")
    perf = ws / "opt-round-1" / "opt_softmax_perf.txt"
    perf.write_text('{"case_label": "kept"}\n')
    write_workflow_state(ws, workflow_state(rounds={1: "passed"}))
    with pytest.raises(HelixError, match=r"opt-round-1 was submitted.*--output"):
        run_bench(cand)
    assert perf.read_text() == '{"case_label": "kept"}\n'
    assert not (ws / ".helix" / "jobs").exists()  # refused before any job started
    write_workflow_state(ws, workflow_state(phase="round_active", current_round=1, rounds={1: "active"}))
    out = run_bench(cand)  # the active round may be benched (its first canonical run)
    assert out.exit_code == 0 and perf.read_text() != '{"case_label": "kept"}\n'
    base_op = add_operator(ws, "softmax", "baseline/softmax.py")
    base_perf = ws / "baseline" / "softmax_perf.txt"
    base_perf.write_text('{"case_label": "kept"}\n')
    write_workflow_state(ws, workflow_state(rounds={1: "passed"}))
    with pytest.raises(HelixError, match=r"baseline/softmax_perf.txt is what submitted rounds"):
        run_bench(base_op)
    assert base_perf.read_text() == '{"case_label": "kept"}\n'
