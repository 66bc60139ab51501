"""A corpus of malformed and hostile workspaces: each yields a clear problem, nothing raises,
and `helix status` reports them all (exit 0) without a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from helix_engine.status import operator_status, render
from helix_engine.workspace.snapshot import load_workspace, reload
from tests.builders import (
    Case,
    NoteRound,
    RoundSpec,
    build_workspace,
    opt_note_text,
    perf_text,
    workflow_state,
    write_operator,
    write_perf,
    write_workflow_state,
)

ROOT = Path(__file__).resolve().parents[2]
BASE = {"a": 10.0, "b": 20.0}
R1 = {"a": 8.0, "b": 18.0}
R2 = {"a": 9.0, "b": 10.0}
Expect = list[tuple[str, str]]  # (Problem.file prefix, text in the problem)


def _good(root: Path, name: str) -> Path:
    return build_workspace(root, name=name, baseline=BASE, rounds=[R1, RoundSpec(R2, parent="opt-round-1")])


def _state_path(ws: Path, n: int) -> Path:
    return ws / f"opt-round-{n}" / "round-state.json"


def _edit_state(ws: Path, n: int, **changes: object) -> None:
    path = _state_path(ws, n)
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def missing_everything(root: Path) -> Expect:
    ws = root / "missing_everything"
    write_operator(ws, "add")
    (ws / "opt-round-1").mkdir()
    return [("opt-round-1/round-state.json", "is missing")]


def empty_round_state(root: Path) -> Expect:
    ws = _good(root, "empty_round_state")
    _state_path(ws, 2).write_text("")
    return [("opt-round-2/round-state.json", "is empty")]


def truncated_round_state(root: Path) -> Expect:
    ws = _good(root, "truncated_round_state")
    _state_path(ws, 2).write_text('{"round": "opt-round-2",\n "parent_')
    return [("opt-round-2/round-state.json:2", "is not valid JSON")]


def binary_round_state(root: Path) -> Expect:
    ws = _good(root, "binary_round_state")
    _state_path(ws, 2).write_bytes(b"\x00\x01\x02{}\xff")
    return [("opt-round-2/round-state.json", "binary")]


def non_utf8_opt_note(root: Path) -> Expect:
    ws = _good(root, "non_utf8_opt_note")
    (ws / "opt-note.md").write_bytes(b"## Round 1\nBest status: current best caf\xe9\n")
    return [("opt-note.md:2", "not valid UTF-8")]


def wrongly_typed_round_state(root: Path) -> Expect:
    ws = _good(root, "wrongly_typed_round_state")
    _edit_state(ws, 2, evidence_sources="benchmark", correctness_status=1)
    return [("opt-round-2/round-state.json", "is not a valid round state")]


def round_state_is_a_list(root: Path) -> Expect:
    ws = _good(root, "round_state_is_a_list")
    _state_path(ws, 2).write_text("[1, 2]")
    return [("opt-round-2/round-state.json", "holds a JSON list")]


def deeply_nested_json(root: Path) -> Expect:
    ws = _good(root, "deeply_nested_json")
    _state_path(ws, 2).write_text("[" * 200_000 + "]" * 200_000)
    return [("opt-round-2/round-state.json", "not valid JSON")]


def huge_round_state(root: Path) -> Expect:
    ws = _good(root, "huge_round_state")
    _state_path(ws, 2).write_text('{"pad": "' + "x" * (2 * 1024 * 1024) + '"}')
    return [("opt-round-2/round-state.json", "over the")]


def huge_attempts(root: Path) -> Expect:
    ws = _good(root, "huge_attempts")
    with open(ws / "opt-round-2" / "attempts.md", "ab") as handle:
        handle.truncate(50 * 1024 * 1024)
    return []


def contradictory_workflow(root: Path) -> Expect:
    ws = build_workspace(root, name="contradictory_workflow", baseline=BASE,
                         rounds=[R1, RoundSpec(R2, correctness="failed")],
                         workflow=workflow_state(rounds={1: "passed", 2: "passed", 7: "passed"}))
    assert ws.exists()
    return [(".helix/state.json", "marks round 2 passed"), (".helix/state.json", "lists round 7")]


def duplicate_labels_round(root: Path) -> Expect:
    ws = _good(root, "duplicate_labels_round")
    perf = ws / "opt-round-2" / "opt_add_perf.txt"
    perf.write_text(perf.read_text() + perf_text({"a": 1.0}))
    return [("opt-round-2/opt_add_perf.txt", "latency-a")]


def duplicate_labels_baseline(root: Path) -> Expect:
    ws = _good(root, "duplicate_labels_baseline")
    perf = ws / "baseline" / "add_perf.txt"
    perf.write_text(perf.read_text() + perf_text({"b": 1.0}))
    return [("baseline/add_perf.txt", "latency-b")]


def mismatched_bench_mode(root: Path) -> Expect:
    ws = _good(root, "mismatched_bench_mode")
    write_perf(ws / "opt-round-2" / "opt_add_perf.txt", R2, bench_mode="perf-counter")
    return [("opt-round-2/opt_add_perf.txt", "bench_mode=perf-counter")]


def mixed_bench_mode_in_file(root: Path) -> Expect:
    ws = _good(root, "mixed_bench_mode_in_file")
    write_perf(ws / "opt-round-2" / "opt_add_perf.txt",
               {"a": 9.0, "b": Case(kernel_us=10.0, total_op_us=12.0, bench_mode="msprof")})
    return [("opt-round-2/opt_add_perf.txt", "mixes bench modes")]


def two_overall_summaries(root: Path) -> Expect:
    ws = _good(root, "two_overall_summaries")
    text = opt_note_text([NoteRound(1), NoteRound(2, best_status="current best")], final_best="round-2",
                         geomean_text="1.49x")
    (ws / "opt-note.md").write_text(text + "\n## Overall Summary\nFinal best round: round-1\n")
    return [("opt-note.md", "Overall Summary")]


def perf_symlink_outside(root: Path) -> Expect:
    ws = _good(root, "perf_symlink_outside")
    outside = root.parent / "outside_perf.txt"
    write_perf(outside, {"a": 1.0, "b": 1.0})
    target = ws / "opt-round-2" / "opt_add_perf.txt"
    target.unlink()
    target.symlink_to(outside)
    return [("opt-round-2", "outside the workspace")]


def perf_artifact_dotdot(root: Path) -> Expect:
    ws = _good(root, "perf_artifact_dotdot")
    write_perf(root.parent / "dotdot_perf.txt", {"a": 1.0, "b": 1.0})
    _edit_state(ws, 2, perf_artifact="../../../dotdot_perf.txt")
    return [("opt-round-2/round-state.json", "outside the workspace")]


def perf_artifact_absolute(root: Path) -> Expect:
    ws = _good(root, "perf_artifact_absolute")
    _edit_state(ws, 2, perf_artifact="/etc/passwd")
    return [("opt-round-2/round-state.json", "outside the workspace")]


def baseline_perf_symlink_loop(root: Path) -> Expect:
    ws = _good(root, "baseline_perf_symlink_loop")
    base = ws / "baseline"
    (base / "add_perf.txt").unlink()
    (base / "loop_a").symlink_to(base / "loop_b")
    (base / "loop_b").symlink_to(base / "loop_a")
    (base / "add_perf.txt").symlink_to(base / "loop_a")
    return [("baseline/state.json", "perf_artifact")]


def round_perf_symlink_loop(root: Path) -> Expect:
    ws = _good(root, "round_perf_symlink_loop")
    _edit_state(ws, 2, perf_artifact=None, benchmark_status="not_run", effective_metric_source=None)
    rdir = ws / "opt-round-2"
    (rdir / "opt_add_perf.txt").unlink()
    (rdir / "loop_x").symlink_to(rdir / "loop_y")
    (rdir / "loop_y").symlink_to(rdir / "loop_x")
    (rdir / "opt_add_perf.txt").symlink_to(rdir / "loop_x")
    return [("opt-round-2/opt_add_perf.txt", "is a symlink loop")]


def workflow_invalid(root: Path) -> Expect:
    ws = _good(root, "workflow_invalid")
    write_workflow_state(ws, {**workflow_state(), "phase": "round_active", "current_round": None})
    return [(".helix/state.json", "not a valid workflow state")]


def workflow_not_json(root: Path) -> Expect:
    ws = _good(root, "workflow_not_json")
    (ws / ".helix" / "state.json").write_text("{'phase': 'baseline'}")
    return [(".helix/state.json", "not valid JSON")]


def bad_perf_values(root: Path) -> Expect:
    ws = _good(root, "bad_perf_values")
    perf = ws / "opt-round-2" / "opt_add_perf.txt"
    perf.write_text(perf_text({"a": 9.0}) + perf_text({"b": -1.0}).replace("-1.0", "NaN", 1))
    return [("opt-round-2/opt_add_perf.txt", "latency-b")]


def garbage_perf_line(root: Path) -> Expect:
    ws = _good(root, "garbage_perf_line")
    perf = ws / "opt-round-2" / "opt_add_perf.txt"
    perf.write_text(perf.read_text() + "this is not json\n")
    return [("opt-round-2/opt_add_perf.txt:3", "invalid JSON")]


def empty_perf(root: Path) -> Expect:
    ws = _good(root, "empty_perf")
    (ws / "opt-round-2" / "opt_add_perf.txt").write_text("")
    return [("opt-round-2/opt_add_perf.txt", "empty")]


def wrongly_typed_perf(root: Path) -> Expect:
    ws = _good(root, "wrongly_typed_perf")
    (ws / "baseline" / "add_perf.txt").write_text('{"case_label": "a", "kernel_avg_time_us": "fast"}\n')
    return [("baseline/add_perf.txt:1", "kernel_avg_time_us")]


def bad_round_dir_names(root: Path) -> Expect:
    ws = _good(root, "bad_round_dir_names")
    for name in ("opt-round-0", "opt-round-007", "opt-round-x"):
        (ws / name).mkdir()
    (ws / "opt-round-3").write_text("not a folder")
    return [("opt-round-0", "not a round folder"), ("opt-round-007", "not a round folder"),
            ("opt-round-x", "not a round folder"), ("opt-round-3", "is a file")]


def baseline_state_wrong_types(root: Path) -> Expect:
    ws = _good(root, "baseline_state_wrong_types")
    path = ws / "baseline" / "state.json"
    data = json.loads(path.read_text())
    data["baseline_established"] = [1]
    del data["bench_file"]
    path.write_text(json.dumps(data))
    return [("baseline/state.json", "bench_file is missing")]


def legacy_alias_conflict(root: Path) -> Expect:
    ws = _good(root, "legacy_alias_conflict")
    _edit_state(ws, 2, comparison_target="../baseline/other_perf.txt")
    return [("opt-round-2/round-state.json", "comparison_target")]


def verify_not_json(root: Path) -> Expect:
    ws = _good(root, "verify_not_json")
    vdir = ws / "opt-verify" / "verify-20260101-000000"
    vdir.mkdir(parents=True)
    (vdir / "verify-state.json").write_text("{")
    return [("opt-verify/verify-20260101-000000/verify-state.json", "not valid JSON")]


def opt_note_is_a_directory(root: Path) -> Expect:
    ws = _good(root, "opt_note_is_a_directory")
    (ws / "opt-note.md").unlink()
    (ws / "opt-note.md").mkdir()
    return [("opt-note.md", "directory")]


def two_operators(root: Path) -> Expect:
    ws = _good(root, "two_operators")
    (ws / "mul.py").write_text("import triton\n")
    return [(".", "several operator candidates")]


def baseline_failed_case(root: Path) -> Expect:
    ws = _good(root, "baseline_failed_case")
    write_perf(ws / "baseline" / "add_perf.txt",
               {"a": 10.0, "b": Case(kernel_us=None, error_message="RuntimeError: launch failed")})
    return [("baseline/add_perf.txt", "failed cases")]


def round_field_and_parent_wrong(root: Path) -> Expect:
    ws = _good(root, "round_field_and_parent_wrong")
    _edit_state(ws, 1, round="opt-round-9", parent_round="opt-round-2")
    _edit_state(ws, 2, parent_round="the good one")
    return [("opt-round-1/round-state.json", "folder is opt-round-1"),
            ("opt-round-1/round-state.json", "not an earlier round"),
            ("opt-round-2/round-state.json", "neither 'baseline'")]


def huge_opt_note(root: Path) -> Expect:
    ws = _good(root, "huge_opt_note")
    with open(ws / "opt-note.md", "ab") as handle:
        handle.truncate(17 * 1024 * 1024)
    return [("opt-note.md", "over the")]


def huge_perf(root: Path) -> Expect:
    ws = _good(root, "huge_perf")
    with open(ws / "opt-round-2" / "opt_add_perf.txt", "ab") as handle:
        handle.truncate(50 * 1024 * 1024)
    return [("opt-round-2/opt_add_perf.txt", "over the")]


def baseline_state_mode_mismatch(root: Path) -> Expect:
    ws = _good(root, "baseline_state_mode_mismatch")
    path = ws / "baseline" / "state.json"
    path.write_text(path.read_text().replace('"torch-npu-profiler"', '"msprof"'))
    return [("baseline/state.json", "bench_mode is msprof")]


def round_perf_is_the_baseline(root: Path) -> Expect:
    ws = _good(root, "round_perf_is_the_baseline")
    _edit_state(ws, 2, perf_artifact="../baseline/add_perf.txt")
    return [("opt-round-2/round-state.json", "compares the baseline with itself")]


def perf_is_a_directory(root: Path) -> Expect:
    ws = _good(root, "perf_is_a_directory")
    perf = ws / "opt-round-2" / "opt_add_perf.txt"
    perf.unlink()
    perf.mkdir()
    return [("opt-round-2/round-state.json", "missing file")]


CASES: list[Callable[[Path], Expect]] = [
    huge_opt_note, huge_perf, baseline_state_mode_mismatch, round_perf_is_the_baseline, perf_is_a_directory,
    missing_everything, empty_round_state, truncated_round_state, binary_round_state, non_utf8_opt_note,
    wrongly_typed_round_state, round_state_is_a_list, deeply_nested_json, huge_round_state, huge_attempts,
    contradictory_workflow, duplicate_labels_round, duplicate_labels_baseline, mismatched_bench_mode,
    mixed_bench_mode_in_file, two_overall_summaries, perf_symlink_outside, perf_artifact_dotdot,
    perf_artifact_absolute, baseline_perf_symlink_loop, round_perf_symlink_loop, workflow_invalid,
    workflow_not_json, bad_perf_values, garbage_perf_line, empty_perf, wrongly_typed_perf,
    bad_round_dir_names, baseline_state_wrong_types, legacy_alias_conflict, verify_not_json,
    opt_note_is_a_directory, two_operators, baseline_failed_case, round_field_and_parent_wrong,
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Expect]]:
    root = tmp_path_factory.mktemp("corpus") / "workspaces"
    root.mkdir()
    return root, {case.__name__: case(root) for case in CASES}


def _matches(snap, file: str, text: str) -> bool:  # noqa: ANN001
    for problem in snap.problems:
        where = f"{problem.file}:{problem.line}" if problem.line else problem.file
        if where.startswith(file) and text in problem.message:
            return True
    return False


@pytest.mark.parametrize("name", [case.__name__ for case in CASES])
def test_each_case_yields_a_clear_problem(corpus: tuple[Path, dict[str, Expect]], name: str) -> None:
    root, expectations = corpus
    snap = load_workspace(root / name)
    assert not any("internal error" in p.message for p in snap.problems), snap.problems
    for file, text in expectations[name]:
        assert _matches(snap, file, text), f"no problem {file!r} ~ {text!r} in {[str(p) for p in snap.problems]}"
    for problem in snap.problems:  # every problem is a sentence that says something
        assert problem.file and len(problem.message) > 10
    status = operator_status(snap)
    for view in ("best", "trend"):
        for fmt in ("text", "json", "markdown"):
            assert render([status], view=view, fmt=fmt)
    assert reload(snap, [root / name]).problems is not None


def test_good_parts_still_count(corpus: tuple[Path, dict[str, Expect]]) -> None:
    """A broken round does not hide the good ones."""
    root, _ = corpus
    assert load_workspace(root / "truncated_round_state").best_round == 1
    assert load_workspace(root / "mismatched_bench_mode").best_round == 1
    assert load_workspace(root / "perf_symlink_outside").best_round == 1
    assert load_workspace(root / "bad_perf_values").rounds[2].comparison.geomean_speedup == pytest.approx(10 / 9)
    assert load_workspace(root / "garbage_perf_line").best_round == 2
    assert load_workspace(root / "baseline_state_wrong_types").best_round == 2  # fallback lookup
    assert load_workspace(root / "duplicate_labels_baseline").best_round is None
    assert load_workspace(root / "huge_attempts").rounds[2].terminal


def test_snapshot_never_reads_attempts_md(corpus: tuple[Path, dict[str, Expect]],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = corpus
    original_read_bytes = Path.read_bytes
    original_read_text = Path.read_text
    original_open = Path.open

    def guard(path: Path) -> None:
        if path.name == "attempts.md":
            raise AssertionError(f"the snapshot read {path}")

    monkeypatch.setattr(Path, "read_bytes", lambda self: (guard(self), original_read_bytes(self))[1])
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: (guard(self), original_read_text(self, *a, **k))[1])
    monkeypatch.setattr(Path, "open", lambda self, *a, **k: (guard(self), original_open(self, *a, **k))[1])
    original_os_open = os.open  # the safe reader opens descriptors itself
    monkeypatch.setattr(os, "open", lambda path, *a, **k: (guard(Path(os.fsdecode(path))) if not isinstance(path, int)
                                                          else None, original_os_open(path, *a, **k))[1])
    snap = load_workspace(root / "huge_attempts")
    assert (root / "huge_attempts" / "opt-round-2" / "attempts.md").stat().st_size == 50 * 1024 * 1024
    assert snap.best_round == 2


@pytest.mark.parametrize("fmt", ["--json", "--format=text"])
def test_helix_status_on_the_whole_corpus(corpus: tuple[Path, dict[str, Expect]], fmt: str) -> None:
    root, expectations = corpus
    proc = subprocess.run([sys.executable, "-m", "helix_engine", "status", str(root), fmt],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HELIX_DEBUG": ""})
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    if fmt == "--json":
        names = {op["name"] for op in json.loads(proc.stdout)["operators"]}
        assert names == set(expectations)
    else:
        assert all(f"] {name}" in proc.stdout for name in expectations)
        assert proc.stdout.splitlines()[-1].startswith("Summary: ")


@pytest.mark.parametrize("case", ["missing_everything", "perf_symlink_outside", "deeply_nested_json"])
def test_helix_status_on_single_hostile_workspaces(corpus: tuple[Path, dict[str, Expect]], case: str) -> None:
    root, _ = corpus
    proc = subprocess.run([sys.executable, "-m", "helix_engine", "status", str(root / case)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert case in proc.stdout


def test_helix_status_on_a_file_is_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "not_a_folder.txt"
    path.write_text("x")
    proc = subprocess.run([sys.executable, "-m", "helix_engine", "status", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "is not a folder" in proc.stderr
