"""run-test end to end on the CPU backend with real Triton kernels (interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helix_engine.errors import HelixError
from helix_engine.eval.test import run_test
from tests.conftest import ROOT
from tests.e2e._eval_ws import add_operator, assert_jobs_settled, make_ws

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_BACKEND", "cpu")


def test_differential_pass_writes_archive(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax")
    out = run_test(ws / "softmax.py", test_mode="differential")
    assert out.exit_code == 0, out.text
    archive = ws / "softmax_result.pt"
    assert out.text.splitlines()[-1] == f"Archived result: {archive}"
    assert "Return code: 0" in out.text
    data = torch.load(archive, weights_only=True)
    assert data["compute"] is True
    assert [c["id"] for c in data["cases"]] == ["c0_2x16", "c1_3x33", "c2_4x64", "c3_1x8", "c4_5x20"]
    x = data["cases"][2]["inputs"][0]
    assert torch.allclose(data["cases"][2]["result"], torch.softmax(x, -1), atol=1e-6)
    jobs = assert_jobs_settled(ws)
    assert [j.kind for j in jobs] == ["run-test"] and jobs[0].status == "passed"


def test_one_percent_error_fails_with_thresholds_against_a_live_reference(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax_err")
    ref = add_operator(ws, "softmax", "baseline/softmax.py")
    out = run_test(ws / "softmax.py", test_mode="differential", ref_operator_file=ref)
    assert out.exit_code == 1
    assert out.job_status == "failed"  # the job's status agrees with the command (issue 11 #9)
    lines = out.text.splitlines()
    fail = next(line for line in lines if line.startswith("FAIL:"))
    assert fail.startswith("FAIL: 5 of 5 case(s) failed. First failure: case c0_2x16 failed")
    i = lines.index(fail)
    assert lines[i + 1].startswith("case c0_2x16 failed (floating-point-compute)")
    thresholds = json.loads(lines[i + 2].removeprefix("  thresholds="))
    assert thresholds["rel"] == 2**-13 and thresholds["atol"] == 1e-3
    diagnostics = json.loads(lines[i + 3].removeprefix("  diagnostics="))
    assert diagnostics["failure_stage"] == "cap"
    assert diagnostics["mere"] == pytest.approx(0.01, rel=0.01)  # the deliberate 1%
    # the reference ran in the same job, in its own process: no archive of its outputs is read or written
    assert not (ws / "baseline" / "softmax_result.pt").exists()
    assert len(assert_jobs_settled(ws)) == 1
    # second run, through the CLI with --json as an agent calls it (a bare environment): an archive
    # beside the reference is not used (the operator could have written it); one more job, exit 1
    import torch

    torch.save({"compute": True, "cases": []}, ref.with_name("softmax_result.pt"))
    env = {"HELIX_BACKEND": "cpu", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "helix_engine", "run-test", "--operator-file", str(ws / "softmax.py"),
                           "--ref-operator-file", str(ref), "--json"], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert proc.returncode == 1, proc.stderr
    again = json.loads(proc.stdout)
    assert again["passed"] is False and again["comparison"]["failed_case_count"] == 5
    assert again["reference_archive"] is None
    assert len(assert_jobs_settled(ws)) == 2
    # dtype-close mode fails too (1% is far beyond rtol 1e-4)
    close = run_test(ws / "softmax.py", ref_operator_file=ref, accuracy_mode="dtype-close")
    assert close.exit_code == 1 and close.comparison["diagnostics"]["accuracy_mode"] == "dtype-close"


def test_case_id_stays_in_memory(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax")
    ref = add_operator(ws, "softmax_slow", "baseline/softmax.py")
    out = run_test(ws / "softmax.py", ref_operator_file=ref, case_id="c2_4x64")
    assert out.exit_code == 0, out.text
    assert "PASS: all 1 case(s) matched accuracy mode npu-contract (checked on cpu)." in out.text
    assert "NPU accuracy contract" not in out.text
    assert not (ws / "softmax_result.pt").exists() and not (ws / "baseline" / "softmax_result.pt").exists()
    bad = run_test(ws / "softmax.py", ref_operator_file=ref, case_id="nope")
    assert bad.exit_code == 1 and "no case with id 'nope'" in bad.text


def test_standalone_pass_filters_warnings(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "add")
    out = run_test(ws / "add.py", test_mode="standalone")
    assert out.exit_code == 0, out.text
    assert out.text.splitlines() == ["All tests passed!", "Return code: 0"]
    verbose = run_test(ws / "add.py", verbose=True)
    assert "[WARNING] this line is filtered unless --verbose" in verbose.text
    with pytest.raises(HelixError, match="standalone tests take no --case-id"):
        run_test(ws / "add.py", test_mode="standalone", case_id="x")


def test_aborting_operator_is_reported_not_fatal(tmp_path: Path) -> None:
    ws = make_ws(tmp_path, "softmax_abort")
    out = run_test(ws / "softmax.py", test_mode="differential")
    assert out.exit_code == 1
    assert out.job_status == "failed"
    assert "FAIL: the test did not complete:" in out.text and "SIGABRT" in out.text
    assert_jobs_settled(ws)


def test_hanging_operator_times_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_EVAL_TIMEOUT_SECONDS", "4")
    ws = make_ws(tmp_path, "softmax_hang")
    out = run_test(ws / "softmax.py", test_mode="differential")
    assert out.exit_code == 1 and out.job_status == "timeout"
    assert "HELIX_EVAL_TIMEOUT_SECONDS=4" in out.text
    (job,) = assert_jobs_settled(ws)
    assert job.ended_at - job.started_at <= 4 + 5


def test_memory_hog_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_JOB_MAX_RSS_MB", "900")
    ws = make_ws(tmp_path, "softmax_hog")
    out = run_test(ws / "softmax.py", test_mode="differential")
    assert out.exit_code == 1 and out.job_status == "failed"
    assert "HELIX_JOB_MAX_RSS_MB" in out.text and "memory" in out.text
    assert_jobs_settled(ws)


def test_cli_run_test_of_a_missing_operator_is_a_sentence(tmp_path: Path) -> None:
    """(The CLI's --json and exit code on a failing run: the reuse step of the one-percent test.)"""
    ws = make_ws(tmp_path, "softmax_err")
    env = {"HELIX_BACKEND": "cpu", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "helix_engine", "run-test", "--operator-file", str(ws / "missing.py")],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 1 and "error: operator file" in proc.stderr and "Traceback" not in proc.stderr


def test_round_candidate_archive_cleanup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = make_ws(tmp_path, "softmax", standalone=False)
    ref = add_operator(ws, "softmax", "baseline/softmax.py")
    cand = add_operator(ws, "softmax_slow", "opt-round-1/opt_softmax.py")
    monkeypatch.setenv("HELIX_OPTIMIZE_DELETE_PT_FILES", "run-test")
    out = run_test(cand, ref_operator_file=ref)
    assert out.exit_code == 0, out.text
    assert not (ws / "opt-round-1" / "opt_softmax_result.pt").exists()
    assert not (ws / "baseline" / "softmax_result.pt").exists()  # the live reference writes no archive
    assert "Deleted candidate archive" in out.text
    monkeypatch.setenv("HELIX_OPTIMIZE_DELETE_PT_FILES", "sometimes")
    with pytest.raises(HelixError, match="HELIX_OPTIMIZE_DELETE_PT_FILES='sometimes' is not valid"):
        run_test(cand, ref_operator_file=ref)


def test_round_candidate_without_a_reference_is_refused(tmp_path: Path) -> None:
    """A differential run of opt-round-N/opt_<op>.py with no reference compares nothing; it must
    not exit 0 as if correctness passed (upstream run-test-optimize requires one reference)."""
    ws = make_ws(tmp_path, "softmax", standalone=False)
    cand = add_operator(ws, "softmax_slow", "opt-round-1/opt_softmax.py")
    with pytest.raises(HelixError, match=r"add --ref-operator-file baseline/softmax\.py"):
        run_test(cand, test_mode="differential")
    with pytest.raises(HelixError, match="round candidate"):
        run_test(cand, case_id="c2_4x64")
    assert not (ws / ".helix" / "jobs").exists()  # refused before any job started
