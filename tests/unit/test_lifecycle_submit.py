"""submit-round: the full loop to the min-speedup target, every precondition with its
guideline, failed terminal rounds, the pass clean-up and the advisory warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_engine.state.lifecycle import start_round, submit_baseline, submit_round
from helix_engine.workspace.markdown import parse_opt_note, parse_result_numbers, parse_speedup_text

from builders import expected_avg_improvement_pct, expected_geomean
from state_fixtures import BASELINE, new_workspace, put_round, scaled, workflow_json

ROUND_KEYS = ["kind", "status", "issues", "guideline"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HELIX_OPTIMIZE_MIN_SPEEDUP", "HELIX_OPTIMIZE_LOCAL_OPTIMUM_WINDOW",
                 "HELIX_OPTIMIZE_LOCAL_OPTIMUM_MAX_GEOMEAN_GAIN", "HELIX_OPTIMIZE_DELETE_PT_FILES", "HELIX_BACKEND"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    ws = new_workspace(tmp_path)
    assert submit_baseline(ws / "baseline")[1] == 0
    return ws


def run_round(ws: Path, n: int, factor: float | None, *, parent: str = "baseline", **kwargs) -> tuple[dict, int]:  # noqa: ANN003
    assert start_round(ws / f"opt-round-{n}", "exploration", "pattern_entry", f"round {n}")[1] == 0
    put_round(ws, n, scaled(factor) if factor else None, parent=parent,
              **({} if factor else {"correctness": "failed", "benchmark": "not_run"}))
    return submit_round(ws / f"opt-round-{n}", **kwargs)


def test_full_loop_stops_on_the_min_speedup_target(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_OPTIMIZE_MIN_SPEEDUP", "1.5")
    p1, c1 = run_round(ws, 1, 1 / 1.1, current_round=1, final_round=5)
    assert (c1, list(p1)) == (0, ROUND_KEYS + ["next_option", "ledger"])  # ledger: helix's, last
    assert p1["guideline"] == (
        "round check passed. Minimum speedup target not yet satisfied: best completed-round geomean speedup is "
        "1.10x (target 1.50x). Round 1/5 in the current worker batch is complete. Next round: opt-round-2. "
        "Run `helix start-round --round-dir opt-round-2` before beginning the next round."
    )
    assert p1["next_option"] == "opt-round-2"
    p2, c2 = run_round(ws, 2, 1 / 1.3, parent="opt-round-1", current_round=2, final_round=5)
    assert c2 == 0 and "is 1.30x (target 1.50x)" in p2["guideline"] and p2["next_option"] == "opt-round-3"
    p3, c3 = run_round(ws, 3, 1 / 1.6, parent="opt-round-2", current_round=3, final_round=5)
    assert c3 == 0 and "next_option" not in p3
    assert p3["guideline"] == (
        "round check passed. Minimum speedup target satisfied: best completed-round geomean speedup is 1.60x "
        "(target 1.50x). Stop the optimize session now instead of opening another round."
    )
    state = workflow_json(ws)
    assert (state["phase"], state["current_round"]) == ("awaiting_round_start", None)
    assert [state["rounds"][k]["status"] for k in "123"] == ["passed", "passed", "passed"]
    # The ledger parses back to the measured numbers.
    note = parse_opt_note((ws / "opt-note.md").read_text())
    assert note.problems == [] and note.overall_summary_count == 1
    assert [(r.number, r.parent, r.best_status) for r in note.rounds] == [
        (1, "baseline", "validated branch"), (2, "round-1", "validated branch"), (3, "round-2", "current best")]
    best = scaled(1 / 1.6)
    assert note.final_best_round == "round-3"
    assert parse_speedup_text(note.geomean_text) == round(expected_geomean(BASELINE, best), 2)
    assert note.avg_improvement_text == f"{expected_avg_improvement_pct(BASELINE, best):+.1f}%"
    assert parse_result_numbers(note.round(2).result)[0] == round(expected_geomean(BASELINE, scaled(1 / 1.3)), 2)
    assert note.validated_branches == "round-1, round-2"
    assert all(json.loads((ws / f"opt-round-{n}" / "round-state.json").read_text())["opt_note_updated"] for n in (1, 2, 3))
    ends = [json.loads(line)["event"] for line in (ws / ".helix/round-timings/opt-round-3.jsonl").read_text().splitlines()]
    assert ends == ["round_start", "round_end"]
    # helix status reads the same best round from the numbers and from the ledger.
    from helix_engine.workspace.snapshot import load_workspace

    snap = load_workspace(ws)
    assert snap.best_round == 3 and snap.logged_best == "round-3"


def test_batch_end_and_plain_guidelines(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p, c = run_round(ws, 1, 0.9, current_round=1, final_round=1)
    assert (c, p["guideline"]) == (0, "round check passed. This round satisfied the current worker batch target.")
    p, c = run_round(ws, 2, 0.8, current_round=2)  # only one of the two given
    assert (c, p["guideline"], "next_option" in p) == (0, "round check passed", False)
    monkeypatch.setenv("HELIX_OPTIMIZE_MIN_SPEEDUP", "1.2")
    p, c = run_round(ws, 3, 0.85)
    assert p["guideline"].startswith("round check passed. Minimum speedup target satisfied: best completed-round "
                                     "geomean speedup is 1.25x (target 1.20x).")


@pytest.mark.parametrize("value", ["", "  ", "fast", "0", "-1.5", "nan"])
def test_invalid_min_speedup_asks_for_a_restart(ws: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("HELIX_OPTIMIZE_MIN_SPEEDUP", value)
    put_round(ws, 1, scaled(0.8))
    payload, code = submit_round(ws / "opt-round-1")
    assert code == 1 and list(payload) == ROUND_KEYS and payload["kind"] == "round"
    assert "HELIX_OPTIMIZE_MIN_SPEEDUP" in payload["issues"][0]
    assert "restart the optimize session" in payload["guideline"]


def test_missing_round_directory(ws: Path) -> None:
    payload, code = submit_round(ws / "opt-round-4")
    assert (code, payload) == (1, {
        "kind": "round", "status": "fail", "issues": ["missing round directory: opt-round-4"],
        "guideline": "round check requires fixes: missing round directory: opt-round-4. Start it with `helix "
                     "start-round --round-dir opt-round-4 ...` (or submit the round that is active) before "
                     "submitting it.",
    })


def test_round_not_started(ws: Path) -> None:
    put_round(ws, 1, scaled(0.8))
    payload, code = submit_round(ws / "opt-round-1")
    assert code == 1
    assert payload["issues"] == ["cannot complete opt-round-1 while workflow phase is awaiting_round_start"]
    assert payload["guideline"].startswith("This round has not been formally started yet.")
    assert not (ws / "opt-note.md").exists()


def test_current_round_argument_must_match(ws: Path) -> None:
    start_round(ws / "opt-round-1", "exploration", "pattern_entry", "r")
    put_round(ws, 1, scaled(0.8))
    payload, code = submit_round(ws / "opt-round-1", current_round=2, final_round=3)
    assert code == 1 and payload["issues"] == ["--current-round=2 does not match workflow state round 1"]
    assert payload["guideline"].startswith("The requested round is not the active workflow round.")
    assert workflow_json(ws)["rounds"]["1"]["status"] == "active"


def test_no_workflow_state(tmp_path: Path) -> None:
    ws = new_workspace(tmp_path)
    put_round(ws, 1, scaled(0.8))
    payload, code = submit_round(ws / "opt-round-1")
    assert (code, payload["issues"]) == (1, ["optimize workflow state is not available"])
    assert "helix submit-baseline" in payload["guideline"]
    assert not (ws / ".helix").exists()


def test_rejected_terminal_round_is_marked_failed_with_an_honest_entry(ws: Path) -> None:
    payload, code = run_round(ws, 1, None)
    assert (code, payload["issues"]) == (1, ["correctness_status=failed"])
    assert workflow_json(ws)["rounds"]["1"]["status"] == "failed"
    assert workflow_json(ws)["phase"] == "awaiting_round_start"
    note = parse_opt_note((ws / "opt-note.md").read_text())
    [entry] = note.rounds
    assert entry.best_status == "not promoted"
    assert entry.result == "correctness failed; benchmark not_run; rejected: correctness_status=failed"
    # no round qualifies: the baseline stays the best (the engine used to write "none"/"unknown")
    assert note.final_best_round == "baseline" and note.geomean_text == "1.00x"


def test_incomplete_round_stays_active(ws: Path) -> None:
    start_round(ws / "opt-round-1", "exploration", "pattern_entry", "r")
    put_round(ws, 1, scaled(0.8))
    (ws / "opt-round-1" / "summary.md").unlink()
    payload, code = submit_round(ws / "opt-round-1")
    assert code == 1 and payload["issues"][0].startswith("summary_path points to a missing file")
    assert workflow_json(ws)["rounds"]["1"]["status"] == "active"
    assert not (ws / "opt-note.md").exists()


def test_second_submit_is_refused_clearly(ws: Path) -> None:
    assert run_round(ws, 1, 0.8)[1] == 0
    note = (ws / "opt-note.md").read_text()
    payload, code = submit_round(ws / "opt-round-1")
    assert code == 1
    assert payload["issues"] == ["opt-round-1 was already submitted and passed; the workflow state no longer has it active"]
    assert payload["guideline"].startswith("This round was already submitted and passed")
    assert (ws / "opt-note.md").read_text() == note


def test_second_submit_of_a_failed_round_says_it_failed_not_passed(ws: Path) -> None:
    """The guideline said "already submitted and passed" after "already submitted and failed"."""
    assert run_round(ws, 1, None)[1] == 1  # rejected: correctness failed, closed as failed
    note = (ws / "opt-note.md").read_text()
    failed = "opt-round-1 was already submitted and failed; the workflow state no longer has it active"
    payload, code = submit_round(ws / "opt-round-1")  # the same failing round again
    assert code == 1 and payload["issues"] == ["correctness_status=failed", failed], payload
    assert "already submitted and passed" not in payload["guideline"], payload["guideline"]
    assert "This round was already submitted and failed: submit-round rejected it" in payload["guideline"]
    assert (ws / "opt-note.md").read_text() == note
    assert workflow_json(ws)["rounds"]["1"]["status"] == "failed"
    # a round whose check passes now (fixed afterwards) is refused with the state's sentence alone
    # (submit-round's `_fail(str(exc), submit_round_guideline(str(exc)))`): it says failed too
    from helix_engine.state import guideline, workflow

    with pytest.raises(ValueError) as refused:
        workflow.completable_round(workflow.load_workflow(workflow.state_path(ws)), "opt-round-1", None)
    assert str(refused.value) == failed
    text = guideline.submit_round_guideline(str(refused.value))
    assert text.startswith("This round was already submitted and failed") and "passed" not in text, text
    assert "helix start-round" in text
    passed = guideline.submit_round_guideline(failed.replace("failed;", "passed;"))
    assert passed.startswith("This round was already submitted and passed")


def test_pass_cleanup(ws: Path, tmp_path: Path) -> None:
    start_round(ws / "opt-round-1", "exploration", "profile_required", "r")
    rdir = put_round(ws, 1, scaled(0.8), state_overrides={"profile_dir": "profile"})
    (rdir / "test_result.pt").write_bytes(b"1")
    (rdir / "opt_add_result.pt").write_bytes(b"1")
    (rdir / "keep.pt").write_bytes(b"1")
    nested = rdir / "profile" / "ASCEND_PROFILER_OUTPUT"
    nested.mkdir(parents=True)
    (nested / "kernel_details.csv").write_text("a,b\n")
    (nested / "trace_view.json").write_text("{}")
    (rdir / "profile" / "raw").mkdir()
    (rdir / "profile" / "raw" / "data.bin").write_bytes(b"\0")
    (rdir / "PROF_0001").mkdir()
    (ws / "OPPROF_x").mkdir()
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "file.txt").write_text("keep me")
    (rdir / "profile" / "link").symlink_to(outside)
    assert submit_round(rdir)[1] == 0
    assert not (rdir / "test_result.pt").exists() and not (rdir / "opt_add_result.pt").exists()
    assert (rdir / "keep.pt").exists()
    assert (nested / "kernel_details.csv").exists() and not (nested / "trace_view.json").exists()
    assert not (rdir / "profile" / "raw").exists() and not (rdir / "profile" / "link").exists()
    assert (outside / "file.txt").read_text() == "keep me"
    assert not (rdir / "PROF_0001").exists() and not (ws / "OPPROF_x").exists()


def test_pass_cleanup_keeps_helix_profile_outputs(ws: Path) -> None:
    """profile-bench on cuda/cpu writes a Chrome trace and a manifest, no CSV: submit keeps them."""
    start_round(ws / "opt-round-1", "exploration", "profile_required", "r")
    rdir = put_round(ws, 1, scaled(0.8), state_overrides={"profile_dir": "profile"})
    cpu_run = rdir / "profile" / "PROF_small_1700000000000"
    cpu_run.mkdir(parents=True)
    (cpu_run / "trace.json").write_text('{"traceEvents": []}')
    (cpu_run / "profile-manifest.json").write_text(json.dumps({"backend": "cpu", "trace_file": "trace.json"}))
    (cpu_run / "scratch.json").write_text("{}")
    cuda_run = rdir / "profile" / "PROF_big_1700000000001"
    cuda_run.mkdir()
    (cuda_run / "host.pt.trace.json").write_text('{"traceEvents": []}')
    (cuda_run / "profile-manifest.json").write_text(json.dumps({"backend": "cuda", "trace_file": "host.pt.trace.json"}))
    npu_run = rdir / "profile" / "PROF_npu_1700000000002"
    (npu_run / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (npu_run / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv").write_text("a\n")
    (npu_run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text("{}")
    (npu_run / "profile-manifest.json").write_text(json.dumps({"backend": "npu", "trace_file": None}))
    assert submit_round(rdir)[1] == 0
    assert (cpu_run / "trace.json").read_text() == '{"traceEvents": []}'
    assert (cpu_run / "profile-manifest.json").is_file() and not (cpu_run / "scratch.json").exists()
    assert (cuda_run / "host.pt.trace.json").is_file() and (cuda_run / "profile-manifest.json").is_file()
    assert (npu_run / "profile-manifest.json").is_file()
    assert (npu_run / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv").is_file()
    assert not (npu_run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").exists()  # upstream's rule for NPU output


def test_pt_files_kept_when_cleanup_is_never(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELIX_OPTIMIZE_DELETE_PT_FILES", "never")
    start_round(ws / "opt-round-1", "exploration", "pattern_entry", "r")
    rdir = put_round(ws, 1, scaled(0.8))
    (rdir / "test_result.pt").write_bytes(b"1")
    assert submit_round(rdir)[1] == 0
    assert (rdir / "test_result.pt").exists()


def test_kernel_target_fallback_warning(ws: Path) -> None:
    start_round(ws / "opt-round-1", "exploration", "pattern_entry", "r")
    put_round(ws, 1, scaled(0.8), metric="total-op")
    payload, code = submit_round(ws / "opt-round-1", optimize_target="kernel")
    assert code == 0
    warning = ("kernel optimize target fell back to effective_metric_source=total-op; the round may still "
               "participate in best-round selection, but review the comparison basis.")
    assert payload["issues"] == [warning]
    assert payload["guideline"] == f"round check passed Notes: {warning}"


def test_local_optimum_warning(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for n, speedup in ((1, 1.10), (2, 1.11)):
        assert run_round(ws, n, 1 / speedup)[1] == 0
    payload, code = run_round(ws, 3, 1 / 1.12)
    assert code == 0
    [warning] = payload["issues"]
    assert warning.startswith("recent rounds show only marginal baseline-relative geomean speedup gains on the same "
                              "metric basis (kernel; round-1 -> round-3: +0.01x, +0.01x)")
    assert "consider resuming from a round before this flat sequence" in warning
    monkeypatch.setenv("HELIX_OPTIMIZE_LOCAL_OPTIMUM_WINDOW", "4")
    assert run_round(ws, 4, 1 / 1.30)[0]["issues"] == []  # 1.12 -> 1.30 is not flat


def test_local_optimum_needs_consecutive_rounds(ws: Path) -> None:
    assert run_round(ws, 1, 1 / 1.10)[1] == 0
    assert run_round(ws, 2, None)[1] == 1  # a rejected round has no perf file: no flat stretch
    assert run_round(ws, 3, 1 / 1.10)[0]["issues"] == []


def test_compare_perf_says_a_missing_file_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from helix_engine.cli import main

    assert main(["compare-perf", "--baseline", str(tmp_path / "a_perf.txt"), "--compare",
                 str(tmp_path / "b_perf.txt")]) == 1
    err = capsys.readouterr().err
    assert f"cannot read the baseline perf file {tmp_path / 'a_perf.txt'}: it is missing. Pass the" in err


def test_submit_round_says_what_the_ledger_recorded(ws: Path) -> None:
    """A pass is not a promotion: the payload carries the ledger's own words for the round
    (read back from opt-note.md), so a slower round reads as not promoted."""
    p1, _ = run_round(ws, 1, 1 / 1.5)
    assert p1["ledger"]["best_status"] == "current best" and p1["ledger"]["final_best_round"] == "round-1"
    p2, c2 = run_round(ws, 2, 1 / 0.5, parent="opt-round-1")
    assert c2 == 0 and p2["status"] == "pass"
    note = parse_opt_note((ws / "opt-note.md").read_text())
    assert p2["ledger"] == {"round": "round-2", "best_status": "not promoted", "result": note.round(2).result,
                            "final_best_round": "round-1"}


def test_every_state_command_takes_json(tmp_path: Path) -> None:
    """An agent passes --json to every command: those whose output is always JSON accept it too."""
    from helix_engine.cli import build_parser

    parser = build_parser()
    for words in (["start-round", "--round-dir", "opt-round-1", "--round-strategy", "exploration",
                   "--analysis-policy", "pattern_entry", "--reason", "r"],
                  ["submit-baseline", "--baseline-dir", "baseline"], ["submit-round", "--round-dir", "opt-round-1"],
                  ["set-current-round-state", "--reason", "r"], ["round-state", "--round-dir", "opt-round-1",
                                                                 "--hypothesis", "h", "--evidence", "benchmark"]):
        args, extra = parser.parse_known_args([*words, "--json"])
        assert not extra and args.json is True, words
