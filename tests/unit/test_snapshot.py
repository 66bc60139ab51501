"""load_workspace on hand-built upstream-format workspaces, with numbers worked out by hand."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import pytest

from helix_engine.workspace import logged_best, status_pairing, status_rules
from helix_engine.workspace.snapshot import find_workspaces, load_workspace
from tests.builders import (
    Case,
    NoteRound,
    RoundSpec,
    build_workspace,
    expected_avg_improvement_pct,
    expected_geomean,
    opt_note_text,
    workflow_state,
    write_operator,
    write_opt_note,
    write_perf,
    write_round,
)

BASE = {"a": 10.0, "b": 20.0}
R1 = {"a": 8.0, "b": 18.0}
R2 = {"a": 9.0, "b": 10.0}


def _messages(snap) -> list[str]:
    return [str(p) for p in snap.problems]


def _warnings(snap) -> list[str]:
    return snap.evaluation.warnings


def test_geomean_and_avg_improvement_by_hand(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R1, RoundSpec(R2, parent="opt-round-1")])
    snap = load_workspace(ws)
    # round 1: speedups 10/8 = 1.25 and 20/18 = 1.1111 → geomean sqrt(1.388889) = 1.178511
    #          improvements 0.2 and 0.1 → +15.0 %
    r1 = snap.rounds[1].comparison
    assert r1 is not None
    assert r1.geomean_speedup == pytest.approx(1.178511, abs=1e-6)
    assert r1.avg_improvement_pct == pytest.approx(15.0)
    assert r1.mean_latency_us == pytest.approx(13.0)
    # round 2: speedups 1.1111 and 2.0 → geomean sqrt(2.2222) = 1.490712; improvements 0.1, 0.5 → +30 %
    r2 = snap.rounds[2].comparison
    assert r2 is not None
    assert r2.geomean_speedup == pytest.approx(1.490712, abs=1e-6)
    assert r2.avg_improvement_pct == pytest.approx(30.0)
    assert r2.metric_source == "kernel"
    assert r2.cases == []  # the snapshot keeps a summary; the cases are judged again on demand
    full = status_rules.round_comparison(snap, 2)
    assert full is not None and dataclasses.replace(full, cases=[]) == r2
    assert [c.latency_id for c in full.cases] == ["latency-a", "latency-b"]
    assert full.cases[1].delta_pct == pytest.approx(-50.0)
    assert snap.best_round == 2
    assert snap.logged_best == "round-2"  # the builder logs the computed best
    assert _warnings(snap) == []
    assert snap.problems == []
    # the builder's expectations agree with the hand numbers
    assert expected_geomean(BASE, R2) == pytest.approx(r2.geomean_speedup)
    assert expected_avg_improvement_pct(BASE, R2) == pytest.approx(30.0)


def test_round_tree_parent_terminal_completed(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[
        R1, RoundSpec(R2, parent="round-1"), RoundSpec(R2, parent="opt-round-1", correctness="failed")])
    snap = load_workspace(ws)
    assert snap.rounds[2].parent == "opt-round-1"  # "round-1" normalized
    assert snap.children("baseline") == [1]
    assert snap.children("opt-round-1") == [2, 3]
    assert snap.rounds[3].terminal and not snap.rounds[3].completed
    assert snap.rounds[1].completed and snap.rounds[1].workflow_status == "passed"
    assert snap.rounds[3].comparison is None
    assert "skipping opt-round-3 because correctness_status is failed" in _warnings(snap)
    assert snap.operator_file == ws / "add.py"
    assert snap.baseline is not None and snap.baseline.operator_file == ws / "baseline" / "add.py"


def test_missing_attempts_means_not_terminal(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R1])
    (ws / "opt-round-1" / "attempts.md").unlink()
    snap = load_workspace(ws)
    assert not snap.rounds[1].terminal and not snap.rounds[1].completed
    # upstream status does not look at attempts.md: the round still counts
    assert snap.best_round == 1


@pytest.mark.parametrize("first_is_faster", [True, False])
def test_best_round_tie_goes_to_lower_mean_latency(tmp_path: Path, first_is_faster: bool) -> None:
    base = {"a": 10.0, "b": 40.0}
    slow = {"a": 5.0, "b": 40.0}  # speedups 2, 1 → geomean sqrt(2); mean latency 22.5
    fast = {"a": 10.0, "b": 20.0}  # speedups 1, 2 → geomean sqrt(2); mean latency 15
    rounds = [fast, slow] if first_is_faster else [slow, fast]
    ws = build_workspace(tmp_path, baseline=base, rounds=rounds)
    snap = load_workspace(ws)
    assert snap.rounds[1].comparison.geomean_speedup == snap.rounds[2].comparison.geomean_speedup
    assert snap.rounds[1].comparison.geomean_speedup == pytest.approx(math.sqrt(2))
    assert snap.best_round == (1 if first_is_faster else 2)


def test_metric_from_effective_source_and_override(tmp_path: Path) -> None:
    base = {"a": (10.0, 20.0)}
    cand = {"a": (5.0, 20.0)}
    ws = build_workspace(tmp_path, baseline=base, rounds=[RoundSpec(cand, metric="total-op")])
    snap = load_workspace(ws)
    assert snap.rounds[1].comparison.geomean_speedup == pytest.approx(1.0)
    assert snap.rounds[1].comparison.metric_source == "total-op"
    kernel = status_rules.evaluate(snap, "kernel")
    assert kernel.results[1].comparison.geomean_speedup == pytest.approx(2.0)
    assert kernel.results[1].comparison.avg_improvement_pct == pytest.approx(50.0)


def test_mixed_means_auto_with_total_op_fallback_per_case(tmp_path: Path) -> None:
    # case a has no kernel time in the baseline: both sides of a fall back to total-op (30/15 = 2);
    # case b uses the kernel (10/5 = 2) → geomean 2.0, metric "mixed"
    base = {"a": (None, 30.0), "b": (10.0, 12.0)}
    cand = {"a": (5.0, 15.0), "b": (5.0, 6.0)}
    ws = build_workspace(tmp_path, baseline=base, rounds=[RoundSpec(cand, metric="mixed")])
    snap = load_workspace(ws)
    comp = snap.rounds[1].comparison
    assert comp.geomean_speedup == pytest.approx(2.0)
    assert comp.metric_source == "mixed"
    full = status_rules.round_comparison(snap, 1)
    assert {c.latency_id: c.metric for c in full.cases} == {"latency-a": "total-op", "latency-b": "kernel"}
    # forcing the kernel metric makes the round uncomparable (no kernel time for a in the baseline)
    ev = status_rules.evaluate(snap, "kernel")
    assert ev.best_round is None and ev.state == "warning"
    assert any("kernel_avg_time_us" in w for w in ev.warnings)


def test_nonpositive_values_are_dropped_with_a_warning(tmp_path: Path) -> None:
    base = {"a": 10.0, "b": Case(kernel_us=0.0, total_op_us=1.0)}
    cand = {"a": 5.0, "b": 5.0}
    ws = build_workspace(tmp_path, baseline=base, rounds=[cand])
    snap = load_workspace(ws)
    assert snap.rounds[1].comparison.geomean_speedup == pytest.approx(2.0)  # from case a only
    assert "baseline latency must be > 0 for latency-b" in _warnings(snap)
    assert any("latency-b" in m and "positive" in m for m in _messages(snap))


def test_round_value_nonpositive_dropped(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[{"a": -1.0, "b": 10.0}])
    snap = load_workspace(ws)
    assert snap.rounds[1].comparison.geomean_speedup == pytest.approx(2.0)
    assert "round latency must be > 0 for opt-round-1:latency-a" in _warnings(snap)


def test_latency_ids_must_match_exactly(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[{"a": 5.0}, {"a": 5.0, "b": 10.0, "extra": 1.0}])
    snap = load_workspace(ws)
    assert snap.rounds[1].comparison is not None and snap.rounds[1].comparison.geomean_speedup is None
    assert "latency ids do not match for comparable perf data" in _warnings(snap)
    assert snap.best_round == 2  # extra ids in the round are ignored
    assert snap.rounds[2].comparison.geomean_speedup == pytest.approx(2.0)


def test_logged_best_from_summary_marker_and_disagreement(tmp_path: Path) -> None:
    note = opt_note_text([NoteRound(1, best_status="current best"), NoteRound(2, best_status="validated branch")],
                         final_best="opt-round-2", geomean_text="1.49x")
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R1, R2], opt_note=note)
    snap = load_workspace(ws)
    assert snap.logged_best == "round-2"
    assert logged_best.LOGGED_DISAGREE in _warnings(snap)
    assert not any(w.startswith(logged_best.BEST_MISMATCH_PREFIX) for w in _warnings(snap))


def test_logged_best_from_last_marker_and_mismatch_warning(tmp_path: Path) -> None:
    note = opt_note_text([NoteRound(1, best_status="current best"), NoteRound(2, best_status="not promoted")],
                         overall_summary=False)
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R1, R2], opt_note=note)
    snap = load_workspace(ws)
    assert snap.logged_best == "round-1"
    assert snap.best_round == 2
    assert ("numeric best round != logged best. computed speedup: 1.49x; logged speedup: missing"
            in _warnings(snap))
    assert any(p.file == "opt-note.md" and "update Final best round" in p.message for p in snap.problems)


def test_logged_geomean_text_is_quoted(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R1, R2], final_best="round 1", geomean_text="1.16x")
    snap = load_workspace(ws)
    assert snap.logged_best == "round-1"
    assert ("numeric best round != logged best. computed speedup: 1.49x; logged speedup: 1.16x"
            in _warnings(snap))


def test_baseline_lookup_without_state_json(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R2])
    (ws / "baseline" / "state.json").unlink()
    snap = load_workspace(ws)
    assert snap.baseline.perf_file == ws / "baseline" / "add_perf.txt"
    assert snap.best_round == 1
    assert any(p.file == "baseline/state.json" and "missing" in p.message for p in snap.problems)


def test_multiple_baseline_perf_files_without_state(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R2])
    (ws / "baseline" / "state.json").unlink()
    write_perf(ws / "baseline" / "other_perf.txt", BASE)
    snap = load_workspace(ws)
    ev = snap.evaluation
    assert ev.state == "warning" and snap.best_round is None
    assert "found multiple baseline perf files" in ev.warnings
    assert status_pairing.MISSING_BASELINE not in ev.warnings  # selection failed: no second warning


def test_declared_baseline_perf_missing_has_no_fallback(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R2])
    state = json.loads((ws / "baseline" / "state.json").read_text())
    state["perf_artifact"] = "gone_perf.txt"
    (ws / "baseline" / "state.json").write_text(json.dumps(state))
    snap = load_workspace(ws)
    assert snap.baseline.perf_file is None
    assert "perf_artifact points to a missing file" in _warnings(snap)
    assert snap.best_round is None


def test_declared_baseline_perf_workspace_relative_fallback(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R2])
    (ws / "data").mkdir()
    shutil.move(ws / "baseline" / "add_perf.txt", ws / "data" / "add_perf.txt")
    state = json.loads((ws / "baseline" / "state.json").read_text())
    state["perf_artifact"] = "data/add_perf.txt"
    (ws / "baseline" / "state.json").write_text(json.dumps(state))
    snap = load_workspace(ws)
    assert snap.baseline.perf_file == ws / "data" / "add_perf.txt"
    assert snap.best_round == 1


def test_top_level_perf_is_the_baseline_without_baseline_dir(tmp_path: Path) -> None:
    ws = tmp_path / "legacy"
    write_operator(ws, "add")
    write_perf(ws / "add_perf.txt", BASE)
    write_round(ws, 1, RoundSpec(R2))
    snap = load_workspace(ws)
    assert snap.baseline.perf_file == ws / "add_perf.txt"
    assert snap.best_round == 1


def test_no_session_and_missing_baseline_states(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    write_operator(empty, "add")
    assert load_workspace(empty).evaluation.state == "no-session"
    no_base = build_workspace(tmp_path, name="nobase", baseline=None, rounds=[R1])
    ev = load_workspace(no_base).evaluation
    assert ev.state == "warning" and status_pairing.MISSING_BASELINE in ev.warnings
    uncomparable = build_workspace(tmp_path, name="unc", baseline=BASE,
                                   rounds=[RoundSpec(R1, correctness="failed")])
    ev = load_workspace(uncomparable).evaluation
    assert ev.state == "warning" and status_pairing.MISSING_COMPARABLE in ev.warnings


def test_workflow_active_round_and_missing_state(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R1],
                         workflow=workflow_state(phase="round_active", current_round=2,
                                                 rounds={1: "passed", 2: "active"}))
    (ws / "opt-round-2").mkdir()
    (ws / "opt-round-2" / "attempts.md").write_text("## State Update 2026-07-20T08:05:00Z\n")
    snap = load_workspace(ws)
    assert snap.workflow is not None and snap.workflow.current_round == 2
    assert snap.rounds[2].workflow_status == "active"
    assert "skipping opt-round-2 because round-state.json is missing" in _warnings(snap)
    # an active round without round-state.json yet is normal, not a problem
    assert not any(p.file.startswith("opt-round-2") for p in snap.problems)


def test_verify_latest_in_name_order(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R2])
    ok = {"verify-result": {k: {"status": "passed"} for k in
                            ("test", "rerun_baseline_bench", "rerun_best_bench", "compare_perf")}}
    ok["verify-result"]["speedup"] = {"geomean_speedup": 1.4}
    for name, payload in (("verify-20260101-000000", {"verify-result": {}}), ("verify-20260102-000000", ok)):
        (ws / "opt-verify" / name).mkdir(parents=True)
        (ws / "opt-verify" / name / "verify-state.json").write_text(json.dumps(payload))
    snap = load_workspace(ws)
    assert snap.extra["verify"]["verified"] is True
    assert snap.extra["verify"]["geomean"] == 1.4
    assert snap.extra["verify"]["path"].parent.name == "verify-20260102-000000"
    ok["verify-result"]["compare_perf"]["status"] = "failed"
    (ws / "opt-verify" / "verify-20260102-000000" / "verify-state.json").write_text(json.dumps(ok))
    assert load_workspace(ws).extra["verify"] == {
        "path": ws / "opt-verify" / "verify-20260102-000000" / "verify-state.json",
        "verified": False, "geomean": None}


def test_find_workspaces(tmp_path: Path) -> None:
    a = build_workspace(tmp_path, name="a", baseline=BASE, rounds=[R1])
    b = build_workspace(tmp_path, name="b", op="mul", baseline=BASE, rounds=[R2])
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    assert find_workspaces(tmp_path) == [a, b]
    assert find_workspaces(a) == [a]
    fresh = tmp_path / "fresh"
    write_operator(fresh / "inner", "add")  # a folder of one fresh operator
    write_operator(fresh, "sub")  # operator + bench_ harness: a workspace
    assert find_workspaces(fresh) == [fresh]
    assert find_workspaces(tmp_path / "missing") == []
    (tmp_path / "empty").mkdir()
    assert find_workspaces(tmp_path / "empty") == []


def test_snapshot_of_missing_path_is_a_problem(tmp_path: Path) -> None:
    snap = load_workspace(tmp_path / "nope")
    assert snap.problems and "does not exist" in snap.problems[0].message


def test_opt_note_parsed_into_extra(tmp_path: Path) -> None:
    """The snapshot keeps what the status rules read of the ledger (the logged best and the last
    entry marked current best), not its every entry and section (~2.5 MB at 1000 rounds)."""
    from helix_engine.workspace.logged_best import logged_best_from_note
    from helix_engine.workspace.markdown import parse_opt_note

    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R1, R2])
    snap = load_workspace(ws)
    note = snap.extra["opt_note"]
    full = parse_opt_note((ws / "opt-note.md").read_text())
    assert [r.number for r in full.rounds] == [1, 2] and full.marked_best == "round-2"
    assert [r.number for r in note.rounds] == [2] and not note.sections
    assert note.final_best_round == "round-2" and note.overall_line == full.overall_line
    assert logged_best_from_note(note) == logged_best_from_note(full)


def test_comparison_target_elsewhere_is_flagged(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[RoundSpec(
        R1, state_overrides={"comparison_target_path": "opt_add_perf.txt"})])
    snap = load_workspace(ws)
    assert any("comparison_target_path" in p.message for p in snap.rounds[1].problems)


def test_workflow_lists_a_round_that_does_not_exist(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[R1],
                         workflow=workflow_state(rounds={1: "passed", 4: "passed"}))
    snap = load_workspace(ws)
    assert any(p.file == ".helix/state.json" and "round 4" in p.message for p in snap.problems)


def test_workflow_passed_but_round_failed_is_contradiction(tmp_path: Path) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[RoundSpec(R1, correctness="failed")],
                         workflow=workflow_state(rounds={1: "passed"}))
    snap = load_workspace(ws)
    assert any("marks round 1 passed" in p.message for p in snap.problems)


def test_baseline_written_by_hand_in_upstream_format(tmp_path: Path) -> None:
    """Files typed exactly as the spec shows them (not via the builder's helpers)."""
    ws = tmp_path / "add"
    (ws / "baseline").mkdir(parents=True)
    (ws / "opt-round-3").mkdir()
    (ws / "add.py").write_text("import triton\n")
    (ws / "baseline" / "add.py").write_text("import triton\n")
    (ws / "baseline" / "state.json").write_text(
        '{"baseline_kind":"original","source_operator":"../add.py","baseline_operator":"add.py",'
        '"test_file":"../differential_test_add.py","test_mode":"differential","bench_file":"../bench_add.py",'
        '"bench_mode":"torch-npu-profiler","perf_artifact":"add_perf.txt","correctness_status":"passed",'
        '"benchmark_status":"passed","baseline_established":true}')
    (ws / "baseline" / "add_perf.txt").write_text(
        '{"case_label":"fp16_1024","kernel_names":["add_kernel"],"kernel_source":"metadata+operator",'
        '"kernel_avg_time_us":10.0,"ops":[{"op_type":"add_kernel","avg_time_us":10.0}],'
        '"total_op_avg_time_us":12.5,"error_message":null,"case_wall_clock_seconds":2.41,'
        '"bench_mode":"torch-npu-profiler"}\n'
        '{"case_label":"fp32_8192","kernel_names":["add_kernel"],"kernel_source":"metadata+operator",'
        '"kernel_avg_time_us":null,"ops":[{"op_type":"AddV2","avg_time_us":100.0}],'
        '"total_op_avg_time_us":100.0,"error_message":"no resolved kernels matched profiler kernel view",'
        '"case_wall_clock_seconds":3.1,"bench_mode":"torch-npu-profiler"}\n')
    (ws / "opt-round-3" / "round-state.json").write_text(
        '{"round":"opt-round-3","parent_round":"opt-round-1","hypothesis":"hoist mask",'
        '"evidence_sources":["benchmark","profile"],"correctness_status":"passed","benchmark_status":"passed",'
        '"perf_artifact":"opt_add_perf.txt","comparison_target_path":"../baseline/add_perf.txt",'
        '"effective_metric_source":"mixed","summary_path":"summary.md","opt_note_updated":true}')
    (ws / "opt-round-3" / "opt_add_perf.txt").write_text(
        '{"case_label":"fp16_1024","kernel_avg_time_us":8.0,"total_op_avg_time_us":10.0,'
        '"error_message":null,"bench_mode":"torch-npu-profiler"}\n'
        '{"case_label":"fp32_8192","kernel_avg_time_us":null,"total_op_avg_time_us":80.0,'
        '"error_message":"no resolved kernels matched profiler kernel view","bench_mode":"torch-npu-profiler"}\n')
    write_opt_note(ws, "## Round 3\nParent: round-1\nBest status: current best\n")
    snap = load_workspace(ws)
    comp = snap.rounds[3].comparison
    # fp16_1024 on the kernel: 10/8 = 1.25; fp32_8192 on total-op: 100/80 = 1.25 → geomean 1.25
    # improvements 0.2 and 0.2 → +20.0 %
    assert comp.geomean_speedup == pytest.approx(1.25)
    assert comp.avg_improvement_pct == pytest.approx(20.0)
    assert comp.metric_source == "mixed"
    assert snap.best_round == 3 and snap.logged_best == "round-3"
    assert snap.rounds[3].parent == "baseline"  # opt-round-1 does not exist
    assert not snap.rounds[3].terminal  # no attempts.md, summary.md or operator


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generated_sessions_agree_with_an_independent_reading_of_the_rules(tmp_path: Path, seed: int) -> None:
    """The builder computes the upstream best round on its own (tests/builders.numeric_best)."""
    from tests.builders import generate_large_workspace, numeric_best

    ws = generate_large_workspace(tmp_path, rounds=40, cases=6, seed=seed)
    snap = load_workspace(ws)
    baseline = {r.case_label: r.kernel_avg_time_us for r in snap.baseline.perf}
    specs = []
    for n in sorted(snap.rounds):
        view = snap.rounds[n]
        specs.append(RoundSpec({r.case_label: r.kernel_avg_time_us for r in view.perf},
                               correctness=view.state.correctness_status))
    best_n, best_geo, best_avg = numeric_best(baseline, specs)
    assert snap.best_round == best_n
    best = snap.rounds[best_n].comparison
    assert best.geomean_speedup == pytest.approx(best_geo, rel=1e-12)
    assert best.avg_improvement_pct == pytest.approx(best_avg, rel=1e-12)
    assert snap.logged_best == f"round-{best_n}"
    assert not any(w.startswith(logged_best.BEST_MISMATCH_PREFIX) for w in _warnings(snap))
    assert len(snap.rounds) == 40 and all(v.terminal for v in snap.rounds.values())
