"""What the submit pre-fill and `helix round-state` derive (issue 13, finding 2): statuses from the
latest jobs that ran to a verdict (a later lost or cancelled bench does not turn a pass into a
fail), evidence sources only where the round folder holds the evidence."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from helix_engine.jobs.registry import JobInfo, job_dir, new_job_id, write_job
from helix_engine.state import round_fill

from state_fixtures import new_workspace, put_round, scaled


def _job(ws: Path, kind: str, round_name: str, status: str, at: float) -> None:
    info = JobInfo(id=new_job_id(kind), kind=kind, round=round_name, created_at=at, status=status, ended_at=at + 1)
    folder = job_dir(ws, info.id)
    folder.mkdir(parents=True)
    write_job(folder, info)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = new_workspace(tmp_path)
    put_round(ws, 1, scaled(0.5))
    return ws


@pytest.mark.parametrize("later", ["lost", "cancelled", "running", "queued"])
def test_a_later_job_without_a_verdict_keeps_the_earlier_pass(ws: Path, later: str) -> None:
    now = time.time()
    _job(ws, "run-bench", "opt-round-1", "passed", now - 60)
    _job(ws, "run-bench", "opt-round-1", later, now - 10)
    assert round_fill.job_status(ws, "opt-round-1", "run-bench") == "passed"
    assert round_fill.derive(ws / "opt-round-1", {}).fields["benchmark_status"] == "passed"


@pytest.mark.parametrize(("later", "expected"), [("failed", "failed"), ("timeout", "failed"), ("passed", "passed")])
def test_a_later_job_with_a_verdict_decides(ws: Path, later: str, expected: str) -> None:
    now = time.time()
    _job(ws, "run-test", "opt-round-1", "passed" if later != "passed" else "failed", now - 60)
    _job(ws, "run-test", "opt-round-1", later, now - 10)
    assert round_fill.job_status(ws, "opt-round-1", "run-test") == expected


def test_only_lost_jobs_leave_the_status_not_run(ws: Path) -> None:
    _job(ws, "run-test", "opt-round-1", "lost", time.time())
    assert round_fill.job_status(ws, "opt-round-1", "run-test") is None
    assert round_fill.derive(ws / "opt-round-1", {}).fields["correctness_status"] == "not_run"


def test_evidence_is_found_only_where_it_exists(ws: Path) -> None:
    rdir = ws / "opt-round-1"
    assert round_fill.evidence_found(rdir) == ["benchmark"]  # the perf file only
    (rdir / "profile").mkdir()
    (rdir / "ir").mkdir()
    (rdir / "ir" / ".capture.helix-host-1.partial").mkdir()  # an unfinished capture's staging folder
    (rdir / "ir" / ".capture.helix-host-1.partial" / "k.ttir").write_text("module {}\n")
    (rdir / "compiler-analysis.md").write_text("")
    assert round_fill.evidence_found(rdir) == ["benchmark"]  # empty folders and an empty note are no evidence
    (rdir / "profile" / "PROF_a_1").mkdir()
    (rdir / "profile" / "PROF_a_1" / "trace.json").write_text("{}")
    (rdir / "ir" / "add_kernel.ttir").write_text("module {}\n")
    (rdir / "compiler-analysis.md").write_text("the scheduler splits the loop\n")
    assert round_fill.evidence_found(rdir) == ["benchmark", "profile", "ir", "compiler-source"]
    (rdir / "opt_add_perf.txt").unlink()
    assert "benchmark" not in round_fill.evidence_found(rdir)
