"""The round checker: each upstream stage in order, then helix's own checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_engine.state.checks import check_round, is_completed, is_terminal, load_round_state

from state_fixtures import BASELINE, new_workspace, put_round, read_json, scaled


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    return new_workspace(tmp_path)


def edit_state(rdir: Path, **changes: object) -> None:
    data = read_json(rdir / "round-state.json")
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    (rdir / "round-state.json").write_text(json.dumps(data), encoding="utf-8")


def test_complete_round_passes_without_touching_files(ws: Path) -> None:
    rdir = put_round(ws, 1, scaled(0.8))
    (rdir / "PROF_123").mkdir()
    (rdir / "opt_add_result.pt").write_bytes(b"x")
    result = check_round(rdir)
    assert result.passed, result.issues
    assert result.payload() == {"kind": "round", "status": "pass", "issues": [], "guideline": "round check passed"}
    assert (rdir / "PROF_123").is_dir() and (rdir / "opt_add_result.pt").exists()  # no side effects
    assert is_terminal(rdir) and is_completed(rdir)


@pytest.mark.parametrize(
    ("mutate", "issue"),
    [
        (lambda r: (r / "attempts.md").unlink(), "missing attempts.md"),
        (lambda r: (r / "summary.md").unlink(), "summary_path points to a missing file: summary.md (expected summary.md)"),
        (lambda r: ((r / "notes.md").write_text("x"), edit_state(r, summary_path="notes.md")),
         "summary_path must use summary.md (got notes.md)"),
        (lambda r: (r / "round-state.json").unlink(), "missing round-state.json"),
        (lambda r: (r / "opt_add_perf.txt").unlink(),
         "perf_artifact points to a missing file: opt_add_perf.txt (expected opt_add_perf.txt)"),
        (lambda r: ((r / "opt_add_perf.txt").rename(r / "mine_perf.txt"), edit_state(r, perf_artifact="mine_perf.txt")),
         "perf_artifact must use opt_add_perf.txt (got mine_perf.txt)"),
        (lambda r: edit_state(r, perf_analysis_path="perf-analysis.md"),
         "perf_analysis_path points to a missing file: perf-analysis.md (expected perf-analysis.md)"),
        (lambda r: (r / "opt_add.py").unlink(), "missing opt_add.py"),
    ],
)
def test_artifact_stage(ws: Path, mutate, issue: str) -> None:  # noqa: ANN001
    rdir = put_round(ws, 1, scaled(0.8))
    mutate(rdir)
    result = check_round(rdir)
    assert result.status == "fail" and result.stage == "artifacts"
    assert issue in result.issues
    assert result.guideline == "round check requires fixes: " + "; ".join(result.issues)
    assert not result.terminal


def test_perf_path_outside_the_workspace_is_refused(ws: Path, tmp_path: Path) -> None:
    rdir = put_round(ws, 1, scaled(0.8))
    outside = tmp_path / "elsewhere_perf.txt"
    outside.write_text((rdir / "opt_add_perf.txt").read_text())
    (rdir / "opt_add_perf.txt").unlink()
    (rdir / "opt_add_perf.txt").symlink_to(outside)
    edit_state(rdir, perf_artifact="opt_add_perf.txt")
    result = check_round(rdir)
    assert result.status == "fail"
    assert any("outside the workspace" in i for i in result.issues)


@pytest.mark.parametrize(
    ("changes", "issue"),
    [
        ({"hypothesis": None}, "missing required round-state fields: hypothesis"),
        ({"evidence_sources": "benchmark"}, "round-state evidence_sources must be a list of strings"),
        ({"correctness_status": "great"}, "round-state correctness_status=great is not one of passed, failed, not_run"),
        ({"effective_metric_source": "wall"}, "round-state effective_metric_source=wall is not one of kernel, total-op, mixed"),
        ({"comparison_target_path": None}, "missing required round-state fields: comparison_target_path"),
        ({"comparison_target": "../baseline/x_perf.txt"},
         "comparison_target_path and comparison_target disagree: '../baseline/add_perf.txt' != '../baseline/x_perf.txt'"),
    ],
)
def test_round_state_stage(ws: Path, changes: dict, issue: str) -> None:
    rdir = put_round(ws, 1, scaled(0.8))
    edit_state(rdir, **changes)
    result = check_round(rdir)
    assert (result.stage, result.issues) == ("round_state", [issue])


def test_legacy_comparison_target_alias_loads(ws: Path) -> None:
    rdir = put_round(ws, 1, scaled(0.8))
    edit_state(rdir, comparison_target_path=None, comparison_target="../baseline/add_perf.txt")
    assert load_round_state(rdir).comparison_target_path == "../baseline/add_perf.txt"
    assert check_round(rdir).passed


def test_status_stage_and_terminal_rejected_round(ws: Path) -> None:
    rdir = put_round(ws, 1, None, correctness="failed", benchmark="not_run")
    result = check_round(rdir)
    assert (result.stage, result.issues) == ("status", ["correctness_status=failed"])
    assert result.terminal  # complete package + loadable state: submit-round marks it failed
    rdir2 = put_round(ws, 2, None, correctness="passed", benchmark="failed")
    assert check_round(rdir2).issues == ["benchmark_status=failed"]


def test_baseline_gate_stage(ws: Path) -> None:
    data = read_json(ws / "baseline" / "state.json")
    data["baseline_established"] = False
    data["benchmark_status"] = "failed"
    (ws / "baseline" / "state.json").write_text(json.dumps(data))
    result = check_round(put_round(ws, 1, scaled(0.8)))
    assert result.stage == "baseline"
    assert result.issues == ["baseline/state.json marks baseline as not established", "baseline benchmark_status=failed"]


def test_comparison_stage(ws: Path) -> None:
    rdir = put_round(ws, 1, scaled(0.8))
    (ws / "baseline" / "other_perf.txt").write_text((ws / "baseline" / "add_perf.txt").read_text())
    edit_state(rdir, comparison_target_path="../baseline/other_perf.txt", evidence_sources=[])
    result = check_round(rdir)
    assert result.stage == "comparison"
    assert result.issues == [
        "comparison_target_path must point to the canonical baseline perf artifact ../baseline/add_perf.txt "
        "(got ../baseline/other_perf.txt)",
        "missing supporting evidence sources",
    ]
    edit_state(rdir, comparison_target_path="../baseline/gone_perf.txt", evidence_sources=["benchmark"])
    assert check_round(rdir).issues == [
        "comparison_target_path points to a missing file: ../baseline/gone_perf.txt (expected ../baseline/add_perf.txt)"
    ]


def test_kernel_continuity_stage(ws: Path) -> None:
    rdir = put_round(ws, 1, scaled(0.8))
    (rdir / "opt_add.py").write_text("import torch\n\n\ndef add(x, y):\n    return x + y\n")
    result = check_round(rdir)
    assert (result.stage, result.issues) == (
        "continuity", ["round operator no longer preserves a recognizable Ascend kernel launch path"])


def test_launch_grid_with_brackets_passes_the_continuity_stage(ws: Path) -> None:
    """The reported case: ``kernel[(x.shape[0],)](...)`` was rejected by upstream's regex."""
    rdir = put_round(ws, 1, scaled(0.8))
    source = (rdir / "opt_add.py").read_text()
    launch = next(line for line in source.splitlines() if "add_kernel[grid](" in line)
    (rdir / "opt_add.py").write_text(source.replace(launch, launch.replace("[grid]", "[(triton.cdiv(x.shape[0], 256),)]")))
    assert "[(triton.cdiv(x.shape[0], 256),)](" in (rdir / "opt_add.py").read_text()
    result = check_round(rdir)
    assert result.passed, result.issues


def test_unparseable_round_operator_is_a_clear_continuity_issue(ws: Path) -> None:
    rdir = put_round(ws, 1, scaled(0.8))
    (rdir / "opt_add.py").write_text("import triton\n\ndef add(x, y:\n    pass\n")
    result = check_round(rdir)
    assert result.stage == "continuity"
    assert result.issues == [
        "opt_add.py does not parse as Python (line 3: '(' was never closed), so its kernel launch path cannot "
        "be checked; fix the syntax error and submit the round again"
    ]


def test_sequential_numbering(ws: Path) -> None:
    rdir = put_round(ws, 2, scaled(0.8))
    result = check_round(rdir)
    assert result.stage == "helix"
    assert "opt-round-2 needs opt-round-1 to be a terminal round" in result.issues[0]
    put_round(ws, 1, None, correctness="failed", benchmark="not_run")  # rejected but terminal: fine
    assert check_round(rdir).passed


def test_parent_must_be_baseline_or_completed_round(ws: Path) -> None:
    put_round(ws, 1, None, correctness="failed", benchmark="not_run")
    rdir = put_round(ws, 2, scaled(0.8), parent="opt-round-1")
    result = check_round(rdir)
    assert result.stage == "helix"
    assert result.issues[0].startswith("parent_round=opt-round-1 is not a completed round")
    for parent, start in (("round-7", "parent_round=round-7 must be an earlier round"),
                          ("the good one", "parent_round=the good one names no round")):
        put_round(ws, 2, scaled(0.8), parent=parent)
        assert check_round(rdir).issues[0].startswith(start)
    put_round(ws, 1, scaled(0.9))
    put_round(ws, 2, scaled(0.8), parent="round-1")
    assert check_round(rdir).passed


def test_same_code_as_parent_is_not_an_optimization(ws: Path) -> None:
    rdir = put_round(ws, 1, scaled(0.8))
    baseline_code = (ws / "baseline" / "add.py").read_text()
    (rdir / "opt_add.py").write_text("# rollback, reformatted\n" + baseline_code.replace("    pid =", "\n    pid  ="))
    result = check_round(rdir)
    assert result.stage == "helix"
    assert result.issues[0].startswith("opt_add.py has the same code as its parent baseline")


def test_lints_come_back_as_pass_notes(ws: Path) -> None:
    rdir = put_round(ws, 1, scaled(0.8))
    code = (rdir / "opt_add.py").read_text().replace("BLOCK=512)", "BLOCK=512, num_warps=4)")
    (rdir / "opt_add.py").write_text(code)
    result = check_round(rdir)  # baseline bench_mode torch-npu-profiler → target npu
    assert result.passed
    line = code.splitlines().index(next(x for x in code.splitlines() if "num_warps" in x)) + 1
    assert result.issues == [f"opt-round-1/opt_add.py:{line}: " + result.lints[0].message]
    assert result.guideline == "round check passed Notes: " + result.issues[0]
    assert BASELINE  # the fixture's baseline is what the round was scaled from


def test_lints_ride_along_on_a_failing_check(ws: Path) -> None:
    rdir = put_round(ws, 1, scaled(0.8))
    code = (rdir / "opt_add.py").read_text().replace("BLOCK=512)", "BLOCK=512, num_warps=4)")
    (rdir / "opt_add.py").write_text(code)
    (rdir / "attempts.md").unlink()
    result = check_round(rdir)
    assert result.issues == ["missing attempts.md"]  # the payload stays upstream's
    assert [p.file for p in result.lints] == ["opt-round-1/opt_add.py"]


@pytest.mark.parametrize(
    ("content", "start"),
    [(b"[1, 2]", "round-state.json must contain a JSON object"),
     (b"\xff\xfe\x00garbage", "round-state.json cannot be read as UTF-8 text"),
     (b'{"round": ', "round-state.json is not valid JSON"),
     (b"", "round-state.json is not valid JSON")],
)
def test_hostile_round_state_files(ws: Path, content: bytes, start: str) -> None:
    rdir = put_round(ws, 1, scaled(0.8))
    (rdir / "round-state.json").write_bytes(content)
    result = check_round(rdir)
    assert result.status == "fail" and not result.terminal
    assert any(issue.startswith(start) for issue in result.issues), result.issues
