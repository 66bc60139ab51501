"""Which bench runs may become a perf file: a run that completed (every job passed) with at
least one measured case; cancel, timeout, crash, a run that never started and a run where every
case failed leave the previous file byte-identical (run-bench, its baseline, probe's cache)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helix_engine.eval.bench import BenchRun, promote_records, refusal
from helix_engine.perf.artifact import read_perf


def rec(label: str, us: float | None, error: str | None = None, total: float | None = None) -> dict[str, Any]:
    return {"case_label": label, "kernel_names": ["k"], "kernel_source": "operator", "kernel_avg_time_us": us,
            "ops": [], "total_op_avg_time_us": us if total is None else total, "error_message": error,
            "case_wall_clock_seconds": 0.1, "bench_mode": "perf-counter"}


GOOD = [rec("a", 10.0), rec("b", 20.0)]
CASES = {
    "completed": (BenchRun(GOOD, ["j1"], "", job_endings=["completed"]), None),
    "one case raised (upstream writes it, rc 1)": (
        BenchRun([rec("a", 10.0), rec("b", None, "RuntimeError: boom", None)], ["j1"], "", job_endings=["completed"]),
        None),
    "kernel-name miss still measured total-op": (
        BenchRun([rec("a", None, "no resolved kernels matched profiler kernel view", 12.0)], ["j1"], "",
                 job_endings=["completed"]), None),
    "cancelled": (BenchRun([rec("a", 10.0), rec("b", None, "not run: cancelled")], ["j1"], "",
                           job_endings=["cancelled"]), "the bench was cancelled"),
    "timed out": (BenchRun([rec("a", None, "timed out after 4 s")], ["j1"], "", job_endings=["timeout"]),
                  "the bench timed out"),
    "crashed, resumed": (BenchRun(GOOD, ["j1", "j2"], "", job_endings=["failed", "completed"]),
                         "a bench job crashed"),
    "never ran": (BenchRun([], ["j1"], "", "ImportError: no module", ["completed"]),
                  "the bench did not run: ImportError: no module"),
    "every case failed": (BenchRun([rec("a", None, "RuntimeError: x", None), rec("b", None, "RuntimeError: x", None)],
                                   ["j1"], "", job_endings=["completed"]),
                          "no case was measured (all 2 failed; a: RuntimeError: x)"),
    "no case at all": (BenchRun([], ["j1"], "", job_endings=["completed"]), "the bench measured no case"),
}


@pytest.mark.parametrize(("run", "why"), list(CASES.values()), ids=list(CASES))
def test_refusal_rule(run: BenchRun, why: str | None) -> None:
    assert refusal(run) == why


@pytest.mark.parametrize(("run", "why"), list(CASES.values()), ids=list(CASES))
def test_promotion_keeps_the_previous_file_byte_identical(tmp_path: Path, run: BenchRun, why: str | None) -> None:
    perf = tmp_path / "opt_op_perf.txt"
    good = b'{"case_label":"a","kernel_names":[],"kernel_source":"operator","kernel_avg_time_us":9.0}\n'
    perf.write_bytes(good)
    said = promote_records(perf, run)
    if why is None:
        assert said is None
        records, problems = read_perf(perf)
        assert problems == [] and [r.case_label for r in records] == [r["case_label"] for r in run.records]
    else:
        assert said == f"{why}; {perf} was left as it was: a failed run never replaces a perf file"
        assert perf.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["opt_op_perf.txt"]  # no temp file left


def test_failed_run_without_a_previous_file_writes_none(tmp_path: Path) -> None:
    perf = tmp_path / "opt_op_perf.txt"
    said = promote_records(perf, CASES["cancelled"][0])
    assert said == f"the bench was cancelled; no perf file was written ({perf}): a failed run never replaces a perf file"
    assert list(tmp_path.iterdir()) == []
