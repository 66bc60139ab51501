"""Issue 11 finding 9: an operator that fails inside cases.

- raises in every case: run-bench prints one traceback (the user's frames, no helix_engine
  frame) once, names the cases that share it, and the job is ``failed`` with a sentence while
  the command exits 1: both agree;
- calls ``sys.exit(0)`` mid-bench: the job is ``failed`` with a sentence naming sys.exit(), not
  "the worker ended with status passed", and the command exits non-zero.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.jobs.registry import list_jobs, read_events
from helix_engine.jobs.runner import EARLY_EXIT
from tests.e2e._eval_ws import assert_jobs_settled, make_ws

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_BACKEND", "cpu")


def _run(capsys: pytest.CaptureFixture[str], ws: Path, argv: list[str]) -> tuple[int, str]:
    os.chdir(ws)
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out + err


def test_run_bench_raising_in_every_case(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws = make_ws(tmp_path, "softmax_raises")
    rc, text = _run(capsys, ws, ["run-bench", "--operator-file", "softmax.py"])
    assert rc == 1
    assert text.count("Traceback (most recent call last)") == 1, text
    assert text.count('raise RuntimeError("deliberate failure inside softmax")') == 1, text
    assert "helix_engine" not in text, text
    assert "fp32_8x32" in text and "same error" in text
    assert "2 case(s) failed:" in text
    # no case measured: nothing worth a perf file (a failed run never writes one)
    assert ("FAIL: no case was measured (all 2 failed; fp32_4x64: RuntimeError: deliberate failure inside "
            "softmax); no perf file was written") in text
    assert not (ws / "softmax_perf.txt").exists()
    (job,) = assert_jobs_settled(ws)
    assert job.status == "failed" and job.exit_code == 1
    assert job.message == ("2 of 2 cases failed: RuntimeError: deliberate failure inside softmax "
                           "(the same error in cases fp32_4x64, fp32_8x32)")
    # the job's case records (what run-bench returns): each carries the error, no time, no samples
    events, _ = read_events(ws / ".helix" / "jobs" / job.id)
    records = [e["record"] for e in events if e["event"] == "case_finished"]
    assert [r["case_label"] for r in records] == ["fp32_4x64", "fp32_8x32"]
    assert all(r["error_message"] == "RuntimeError: deliberate failure inside softmax" for r in records)
    assert all(r["kernel_avg_time_us"] is None and "samples_us" not in r for r in records)


def test_run_test_raising_operator(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws = make_ws(tmp_path, "softmax_raises")
    rc, text = _run(capsys, ws, ["run-test", "--operator-file", "softmax.py", "--test-mode", "standalone"])
    assert rc == 1
    assert "RuntimeError: deliberate failure inside softmax" in text and "Return code: 1" in text
    assert text.count("Traceback (most recent call last)") == 1, text
    assert "helix_engine" not in text, text
    (job,) = assert_jobs_settled(ws)
    assert job.status == "failed" and job.exit_code == 1
    assert job.message == "the test raised RuntimeError: deliberate failure inside softmax"


def test_sys_exit_0_mid_bench_fails_the_job(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws = make_ws(tmp_path, "softmax")
    op = ws / "softmax.py"
    op.write_text(op.read_text().replace("def softmax(x):\n", "def softmax(x):\n    import sys\n    sys.exit(0)\n"))
    rc, text = _run(capsys, ws, ["run-bench", "--operator-file", "softmax.py"])
    assert rc != 0
    assert "status passed" not in text, text
    assert "sys.exit()" in text, text
    jobs = assert_jobs_settled(ws)
    assert jobs and all(j.status == "failed" and j.message == EARLY_EXIT for j in jobs), [(j.status, j.message) for j in jobs]
    assert [j.status for j in list_jobs(ws)] == ["failed"] * len(jobs)
