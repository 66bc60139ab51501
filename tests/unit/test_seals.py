"""Files of record bound to what was measured (state/seals.py): the accepted baseline's seal,
round evidence for the exact bytes, and records that verify only under this user's key. The real
checker on real records (``real_gate``: no fixture records)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_engine.state import seals
from helix_engine.state.checks import check_round
from helix_engine.state.lifecycle import start_round, submit_baseline

from builders import gate_record
from state_fixtures import new_workspace, put_round, scaled

pytestmark = pytest.mark.real_gate


def _accepted(tmp_path: Path) -> Path:
    ws = new_workspace(tmp_path)
    assert submit_baseline(ws / "baseline")[1] == 0
    assert (ws / ".helix" / "gate" / "baseline.json").is_file()
    assert start_round(ws / "opt-round-1", "exploration", "pattern_entry", "r")[1] == 0
    put_round(ws, 1, scaled(0.5))
    return ws


def _record(ws: Path, kind: str) -> None:
    body = gate_record(ws, f"opt-round-1.{kind}")
    assert body is not None
    seals.write_record(ws, f"opt-round-1.{kind}", {k: v for k, v in body.items() if k != "format"})


def test_a_round_without_gate_runs_is_refused_not_recorded(tmp_path: Path) -> None:
    ws = _accepted(tmp_path)
    result = check_round(ws / "opt-round-1")
    assert not result.passed and not result.terminal and result.stage == "gate"
    assert any("has no run-test through the gate" in i for i in result.issues)
    _record(ws, "run-test")
    _record(ws, "run-bench")
    assert check_round(ws / "opt-round-1").passed


@pytest.mark.parametrize("edit, words", [
    ("baseline/add_perf.txt", "baseline/add_perf.txt changed"),
    ("baseline/add.py", "baseline/add.py changed"),
    ("bench_add.py", "bench_add.py changed"),
])
def test_an_edited_baseline_is_refused_with_the_changed_file_and_the_fix(tmp_path: Path, edit: str,
                                                                         words: str) -> None:
    ws = _accepted(tmp_path)
    _record(ws, "run-test")
    _record(ws, "run-bench")
    with open(ws / edit, "a", encoding="utf-8") as fh:
        fh.write("\n# edited\n")
    result = check_round(ws / "opt-round-1")
    assert not result.passed and not result.terminal
    assert words in result.issues[0] and "helix prepare-baseline --force" in result.issues[0]


def test_a_swap_after_the_runs_names_the_changed_file(tmp_path: Path) -> None:
    ws = _accepted(tmp_path)
    _record(ws, "run-test")
    _record(ws, "run-bench")
    op = ws / "opt-round-1" / "opt_add.py"
    op.write_text(op.read_text(encoding="utf-8") + "\n# swapped\n", encoding="utf-8")
    issues = check_round(ws / "opt-round-1").issues
    assert any("opt-round-1/opt_add.py changed after its run-test" in i for i in issues)
    assert any("opt-round-1/opt_add.py changed after its run-bench" in i for i in issues)


def test_a_helper_swapped_added_or_removed_after_the_runs_is_refused(tmp_path: Path) -> None:
    """The operator process can import the files beside the operator: a cheat benches with a
    patching helper.py and swaps in an honest one (or adds one, or removes it) before submit-round."""
    ws = _accepted(tmp_path)
    helper = ws / "opt-round-1" / "helper.py"
    helper.write_text("SCALE = 1\n", encoding="utf-8")
    _record(ws, "run-test")
    _record(ws, "run-bench")
    assert check_round(ws / "opt-round-1").passed
    helper.write_text("SCALE = 2\n", encoding="utf-8")
    (ws / "opt-round-1" / "extra.py").write_text("", encoding="utf-8")
    issues = check_round(ws / "opt-round-1").issues
    for kind in ("run-test", "run-bench"):
        assert any(f"opt-round-1/extra.py is new; opt-round-1/helper.py changed since the {kind} of opt-round-1"
                   in i for i in issues), issues
    helper.unlink()
    (ws / "opt-round-1" / "extra.py").unlink()
    issues = check_round(ws / "opt-round-1").issues
    assert any("opt-round-1/helper.py is gone since the run-bench" in i for i in issues), issues
    helper.write_text("SCALE = 1\n", encoding="utf-8")
    assert check_round(ws / "opt-round-1").passed
    (ws / "opt-round-1" / "summary.md").write_text("notes written after the run", encoding="utf-8")  # not read
    assert check_round(ws / "opt-round-1").passed
    (ws / "opt-round-1" / "tuning.cfg").write_text("# an operator can exec this", encoding="utf-8")  # a red team's
    issues = check_round(ws / "opt-round-1").issues
    assert any("opt-round-1/tuning.cfg is new since the run-bench" in i for i in issues), issues


def test_a_perf_file_edited_after_its_bench_is_refused(tmp_path: Path) -> None:
    ws = _accepted(tmp_path)
    _record(ws, "run-test")
    _record(ws, "run-bench")
    perf = ws / "opt-round-1" / "opt_add_perf.txt"
    perf.write_text(perf.read_text(encoding="utf-8").replace("5.0", "0.05"), encoding="utf-8")
    assert any("is not the file its run-bench" in i for i in check_round(ws / "opt-round-1").issues)


def test_a_record_edited_by_hand_does_not_verify(tmp_path: Path) -> None:
    ws = _accepted(tmp_path)
    _record(ws, "run-test")
    _record(ws, "run-bench")
    path = ws / ".helix" / "gate" / "opt-round-1.run-test.json"
    data = json.loads(path.read_text())
    data["all_cases"], data["passed"] = True, True
    data["job_id"] = "forged"
    path.write_text(json.dumps(data))
    issues = check_round(ws / "opt-round-1").issues
    assert any("does not verify" in i for i in issues)


@pytest.mark.parametrize("field, value, words", [
    ("all_cases", False, "ran only some cases"),
    ("split", False, "not through the gate"),
    ("passed", False, "did not pass"),
    ("findings", [{"kind": "threads", "case": "a", "message": "started 1 thread"}], "found: started 1 thread"),
])
def test_evidence_that_does_not_count_says_why(tmp_path: Path, field: str, value: object, words: str) -> None:
    ws = _accepted(tmp_path)
    body = gate_record(ws, "opt-round-1.run-test")
    assert body is not None
    body[field] = value
    seals.write_record(ws, "opt-round-1.run-test", {k: v for k, v in body.items() if k != "format"})
    _record(ws, "run-bench")
    assert any(words in i for i in check_round(ws / "opt-round-1").issues)


def test_a_test_against_another_reference_does_not_count(tmp_path: Path) -> None:
    ws = _accepted(tmp_path)
    body = gate_record(ws, "opt-round-1.run-test")
    assert body is not None
    body["reference"] = {"path": "scratch/add.py", "sha256": "0" * 64}
    seals.write_record(ws, "opt-round-1.run-test", {k: v for k, v in body.items() if k != "format"})
    _record(ws, "run-bench")
    assert any("which is not the accepted baseline" in i for i in check_round(ws / "opt-round-1").issues)
