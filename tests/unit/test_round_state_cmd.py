"""``helix round-state``: round-state.json derived from the workspace (paths, metric source,
statuses, parent), summary.md skeleton only when missing."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from helix_engine.cli import main
from helix_engine.jobs.registry import JobInfo, job_dir, new_job_id, write_job
from helix_engine.state.checks import inspect_round

from builders import write_perf
from state_fixtures import new_workspace, put_round, scaled


def _round(ws: Path, n: int, cases: dict[str, Any] | None) -> Path:
    rdir = ws / f"opt-round-{n}"
    rdir.mkdir()
    shutil.copy(ws / "opt-round-1" / "opt_add.py", rdir / "opt_add.py")
    (rdir / "attempts.md").write_text("# attempts\n")
    if cases is not None:
        write_perf(rdir / "opt_add_perf.txt", cases)
    return rdir


def _job(ws: Path, kind: str, round_name: str, status: str, at: float) -> None:
    info = JobInfo(id=new_job_id(kind), kind=kind, round=round_name, created_at=at, status=status, ended_at=at + 1)
    folder = job_dir(ws, info.id)
    folder.mkdir(parents=True)
    write_job(folder, info)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    rc = main(["round-state", *args, "--json"])
    out = capsys.readouterr().out
    return rc, (json.loads(out) if rc == 0 else {"out": out})


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = new_workspace(tmp_path)
    put_round(ws, 1, scaled(0.5))
    return ws


def test_derives_paths_metric_statuses_parent_and_writes_a_loadable_state(
        ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rdir = _round(ws, 2, scaled(0.8))
    now = time.time()
    _job(ws, "run-test", "opt-round-2", "failed", now - 50)
    _job(ws, "run-test", "opt-round-2", "passed", now - 40)  # the latest one counts
    _job(ws, "run-test", "baseline", "failed", now - 30)  # another round's job does not
    _job(ws, "run-bench", "opt-round-2", "passed", now - 20)
    _job(ws, "probe-bench", "opt-round-2", "failed", now - 10)  # a probe is not the canonical bench
    rc, data = _run(capsys, "--round-dir", str(rdir), "--hypothesis", "hoist mask", "--evidence", "benchmark, profile")
    assert rc == 0, data
    state = json.loads((rdir / "round-state.json").read_text())
    # round 1 (2x) was never submitted: only a round submit-round accepted is a default parent
    assert state["round"] == "opt-round-2" and state["parent_round"] == "baseline"
    assert state["evidence_sources"] == ["benchmark", "profile"]
    assert state["perf_artifact"] == "opt_add_perf.txt"
    assert state["comparison_target_path"] == "../baseline/add_perf.txt"
    assert state["effective_metric_source"] == "kernel"
    assert (state["correctness_status"], state["benchmark_status"]) == ("passed", "passed")
    assert data["comparison"]["geomean_speedup"] == pytest.approx(1.25)
    assert data["comparison"]["geomean_mean"]["point"] == data["comparison"]["geomean_speedup"]
    assert data["comparison"]["geomean_mean"]["ci95"] is None  # the builders write no samples
    found = inspect_round(rdir)
    assert found.state is not None and not found.issues, found.issues
    summary = (rdir / "summary.md").read_text()
    assert "Hypothesis: hoist mask" in summary and "geomean speedup (ratio of means) 1.25x" in summary
    assert "Parent: baseline" in summary


@pytest.mark.parametrize(("cases", "expected"), [
    ({"a": (None, 6.0), "b": (None, 11.0), "c": (None, 21.0)}, "total-op"),
    ({"a": 4.0, "b": (None, 11.0), "c": 20.0}, "mixed"),
])
def test_metric_source_follows_the_fallback(ws: Path, capsys: pytest.CaptureFixture[str],
                                            cases: dict[str, Any], expected: str) -> None:
    rdir = _round(ws, 2, cases)
    rc, data = _run(capsys, "--round-dir", str(rdir), "--hypothesis", "h", "--evidence", "benchmark")
    assert rc == 0, data
    assert data["round_state"]["effective_metric_source"] == expected


def test_no_jobs_and_no_perf_file_is_not_run_and_explicit_flags_win(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rdir = _round(ws, 2, None)
    rc, data = _run(capsys, "--round-dir", str(rdir), "--hypothesis", "h", "--evidence", "benchmark")
    assert rc == 0
    st = data["round_state"]
    assert (st["correctness_status"], st["benchmark_status"]) == ("not_run", "not_run")
    assert st["self_reported_statuses"] == []  # both from the round's jobs
    assert "perf_artifact" not in st and any("run-bench" in n for n in data["notes"])
    write_perf(rdir / "opt_add_perf.txt", scaled(0.9))
    rc, data = _run(capsys, "--round-dir", str(rdir), "--hypothesis", "h2", "--evidence", "benchmark",
                    "--parent-round", "baseline", "--correctness", "passed", "--benchmark", "passed",
                    "--metric-source", "mixed")
    st = data["round_state"]
    assert rc == 0 and st["parent_round"] == "baseline" and st["effective_metric_source"] == "mixed"
    assert (st["correctness_status"], st["benchmark_status"]) == ("passed", "passed")
    assert st["self_reported_statuses"] == ["correctness_status", "benchmark_status"]  # recorded as said
    assert st["hypothesis"] == "h2"


def test_summary_is_written_only_when_missing_and_text_output(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rdir = _round(ws, 2, scaled(0.8))
    (rdir / "summary.md").write_text("my own summary\n")
    assert main(["round-state", "--round-dir", str(rdir), "--hypothesis", "h", "--evidence", "benchmark"]) == 0
    out = capsys.readouterr().out
    assert (rdir / "summary.md").read_text() == "my own summary\n"
    assert "Wrote opt-round-2/round-state.json" in out and "Kept opt-round-2/summary.md" in out
    assert "geomean speedup (ratio of means) 1.25x" in out


def test_legacy_comparison_target_is_replaced_not_contradicted(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rdir = _round(ws, 2, scaled(0.8))
    (rdir / "round-state.json").write_text(json.dumps({"comparison_target": "../baseline/old_perf.txt",
                                                        "my_note": "kept"}))
    rc, data = _run(capsys, "--round-dir", str(rdir), "--hypothesis", "h", "--evidence", "benchmark")
    assert rc == 0, data
    assert "comparison_target" not in data["round_state"] and data["round_state"]["my_note"] == "kept"


@pytest.mark.parametrize(("args", "message"), [
    (["--round-dir", "{ws}/baseline"], "not a round folder"),
    (["--round-dir", "{ws}/opt-round-7"], "does not exist; open it first with `helix start-round"),
    (["--round-dir", "{ws}/opt-round-2", "--evidence", " , "], "--evidence is empty"),
    (["--round-dir", "{ws}/opt-round-2", "--parent-round", "round one"], "neither baseline nor opt-round-M"),
])
def test_refusals_are_sentences(ws: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    _round(ws, 2, scaled(0.8))
    argv = [a.format(ws=ws) for a in args]
    if "--evidence" not in argv:
        argv += ["--evidence", "benchmark"]
    assert main(["round-state", *argv, "--hypothesis", "h"]) == 1
    assert message in capsys.readouterr().err
    assert not (ws / "opt-round-2" / "round-state.json").exists()


def test_parent_is_the_one_start_round_recorded_not_the_best(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Round 1 (2x) is the best, but round 2 was opened on the baseline: round-state names the
    baseline, as the round was built from it (issue 14, finding 4)."""
    assert main(["submit-baseline", "--baseline-dir", str(ws / "baseline")]) == 0
    assert main(["start-round", "--round-dir", str(ws / "opt-round-2"), "--round-strategy", "exploration",
                 "--analysis-policy", "pattern_entry", "--reason", "branch from the baseline",
                 "--parent-round", "baseline"]) == 0
    capsys.readouterr()
    write_perf(ws / "opt-round-2" / "opt_add_perf.txt", scaled(0.8))
    rc, data = _run(capsys, "--round-dir", str(ws / "opt-round-2"), "--hypothesis", "h", "--evidence", "benchmark")
    assert rc == 0, data
    assert data["round_state"]["parent_round"] == "baseline"
    # without a recorded parent (a round opened before helix recorded them): the best submitted
    # round, and round 1 was never submitted, so the baseline
    rdir = _round(ws, 3, scaled(0.9))
    rc, data = _run(capsys, "--round-dir", str(rdir), "--hypothesis", "h", "--evidence", "benchmark")
    assert rc == 0 and data["round_state"]["parent_round"] == "baseline"


def test_profile_and_ir_folders_with_output_are_recorded(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rdir = _round(ws, 2, scaled(0.8))
    (rdir / "profile").mkdir()  # an empty folder is no evidence
    (rdir / "ir" / "add_kernel").mkdir(parents=True)
    rc, data = _run(capsys, "--round-dir", str(rdir), "--hypothesis", "h", "--evidence", "benchmark")
    assert rc == 0 and "profile_dir" not in data["round_state"] and "ir_dir" not in data["round_state"]
    run = rdir / "profile" / "PROF_a_1" / "ASCEND_PROFILER_OUTPUT"
    run.mkdir(parents=True)
    (run / "op_statistic.csv").write_text("OP Type,Count\nadd_kernel,1\n")
    (rdir / "ir" / "add_kernel" / "add_kernel.ttir").write_text("module {}\n")
    rc, data = _run(capsys, "--round-dir", str(rdir), "--hypothesis", "h", "--evidence", "benchmark,profile,ir")
    assert rc == 0, data
    assert (data["round_state"]["profile_dir"], data["round_state"]["ir_dir"]) == ("profile", "ir")
    found = inspect_round(rdir)
    assert found.state is not None and found.state.profile_dir == "profile" and not found.issues
    # a folder the round state already declares is kept, not replaced
    state = json.loads((rdir / "round-state.json").read_text())
    (rdir / "round-state.json").write_text(json.dumps({**state, "profile_dir": "profile/PROF_a_1"}))
    rc, data = _run(capsys, "--round-dir", str(rdir), "--hypothesis", "h", "--evidence", "benchmark,profile,ir")
    assert rc == 0 and data["round_state"]["profile_dir"] == "profile/PROF_a_1"


def test_opt_note_entry_and_perf_analysis_are_recorded(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The agent walk: round-state wrote opt_note_updated false although opt-note.md had the round's
    entry, and no perf_analysis_path although perf-analysis.md existed."""
    rdir = _round(ws, 2, scaled(0.8))
    rc, data = _run(capsys, "--round-dir", str(rdir), "--hypothesis", "h", "--evidence", "benchmark")
    assert rc == 0 and data["round_state"]["opt_note_updated"] is False
    assert "perf_analysis_path" not in data["round_state"]
    (rdir / "perf-analysis.md").write_text("# Perf analysis\n\nthe exp pass dominates\n")
    (ws / "opt-note.md").write_text("## Round 1\nParent: baseline\n\n## Round 2\nParent: round-1\nTheme: t\n")
    rc, data = _run(capsys, "--round-dir", str(rdir), "--hypothesis", "h", "--evidence", "benchmark")
    assert rc == 0 and data["round_state"]["opt_note_updated"] is True
    assert data["round_state"]["perf_analysis_path"] == "perf-analysis.md"
    found = inspect_round(rdir)
    assert found.state is not None and found.state.perf_analysis_path == "perf-analysis.md" and not found.issues
    # another round's entry does not count; an empty perf-analysis.md is no analysis
    rdir3 = _round(ws, 3, scaled(0.8))
    (rdir3 / "perf-analysis.md").write_text("")
    rc, data = _run(capsys, "--round-dir", str(rdir3), "--hypothesis", "h", "--evidence", "benchmark")
    assert rc == 0 and data["round_state"]["opt_note_updated"] is False
    assert "perf_analysis_path" not in data["round_state"]
