"""submit-baseline, start-round and set-current-round-state: preconditions, payloads field for
field, guidelines, idempotent repeats, warnings and the files each transition writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix_engine.state.guideline import HARD_RULES
from helix_engine.state.lifecycle import set_current_round_state, start_round, submit_baseline, write_round_state
from helix_engine.workspace.markdown import parse_state_updates

from builders import workflow_state, write_workflow_state
from state_fixtures import new_workspace, put_round, read_json, scaled, workflow_json

PASS_KEYS = ["status", "round", "guideline", "hard_rules", "round_strategy", "analysis_policy", "reason"]
#: helix's additions, after upstream's keys: the parent start-round recorded and the file to edit
HELIX_START_KEYS = ["parent_round", "operator_file", "operator_created"]
FAIL_KEYS = ["status", "issues", "guideline", "hard_rules"]


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    return new_workspace(tmp_path)


@pytest.fixture()
def accepted(ws: Path) -> Path:
    payload, code = submit_baseline(ws / "baseline")
    assert code == 0, payload
    return ws


def start(ws: Path, n: int = 1, strategy: str = "exploration", policy: str = "pattern_entry",
          reason: str = "try the mask") -> tuple[dict, int]:
    return start_round(ws / f"opt-round-{n}", strategy, policy, reason)


# ------------------------------------------------------------------------- submit-baseline


def test_submit_baseline_bootstraps_state(ws: Path) -> None:
    assert not (ws / ".helix").exists()
    payload, code = submit_baseline(ws / "baseline")
    assert (payload, code) == ({"kind": "baseline", "status": "pass", "issues": [], "guideline": "baseline check passed"}, 0)
    state = workflow_json(ws)
    assert state["run_id"].startswith("submit-baseline-") and state["run_id"].endswith("Z")
    assert (state["phase"], state["current_round"], state["baseline"]["status"]) == ("awaiting_round_start", None, "passed")
    assert state["baseline"]["submitted_at"].endswith("Z")
    assert state["schema_version"] == 1 and state["rounds"] == {}


def test_submit_baseline_failures(tmp_path: Path) -> None:
    payload, code = submit_baseline(tmp_path / "nothing" / "baseline")
    assert code == 1
    assert payload == {
        "kind": "baseline", "status": "fail",
        "issues": ["missing baseline/state.json", "missing baseline perf artifact", "missing baseline operator snapshot"],
        "guideline": "baseline check requires fixes: missing baseline/state.json; missing baseline perf artifact; "
                     "missing baseline operator snapshot",
    }
    ws = new_workspace(tmp_path / "w")
    state = read_json(ws / "baseline" / "state.json")
    state.update(baseline_established=False, correctness_status="failed")
    (ws / "baseline" / "state.json").write_text(json.dumps(state))
    payload, code = submit_baseline(ws / "baseline")
    assert code == 1 and payload["issues"] == ["baseline/state.json marks baseline as not established",
                                               "baseline correctness_status=failed"]
    del state["bench_mode"]
    (ws / "baseline" / "state.json").write_text(json.dumps(state))
    assert submit_baseline(ws / "baseline")[0]["issues"] == ["missing required baseline-state fields: bench_mode"]
    assert not (ws / ".helix").exists()  # nothing written on failure


def test_submit_baseline_resets_an_active_round_and_refuses_a_broken_state(accepted: Path) -> None:
    assert start(accepted)[1] == 0
    assert submit_baseline(accepted / "baseline")[1] == 0
    state = workflow_json(accepted)
    assert (state["phase"], state["current_round"]) == ("awaiting_round_start", None)
    (accepted / ".helix" / "state.json").write_text("{not json")
    payload, code = submit_baseline(accepted / "baseline")
    assert code == 1 and payload["kind"] == "baseline"
    assert payload["issues"][0].startswith("malformed workflow state JSON")
    assert "restart the optimize session" in payload["guideline"]


# ----------------------------------------------------------------------------- start-round


def test_start_round_pass_payload_and_side_effects(accepted: Path) -> None:
    payload, code = start(accepted)
    assert code == 0
    assert list(payload) == PASS_KEYS + HELIX_START_KEYS
    assert payload["round"] == "opt-round-1"
    assert payload["guideline"] == "Round opt-round-1 is now active. Follow the hard rules below while working on this round."
    assert payload["hard_rules"] == list(HARD_RULES) and len(HARD_RULES) == 10
    assert (payload["round_strategy"], payload["analysis_policy"], payload["reason"]) == (
        "exploration", "pattern_entry", "try the mask")
    state = workflow_json(accepted)
    assert (state["phase"], state["current_round"]) == ("round_active", 1)
    entry = state["rounds"]["1"]
    assert entry["status"] == "active" and entry["round_dir"] == "opt-round-1"
    assert entry["strategy_state"]["updated_by"] == "start-round"
    [update] = parse_state_updates((accepted / "opt-round-1" / "attempts.md").read_text())
    assert (update.source, update.round_strategy, update.analysis_policy, update.reason) == (
        "start-round", "exploration", "pattern_entry", "try the mask")
    timings = (accepted / ".helix" / "round-timings" / "opt-round-1.jsonl").read_text().splitlines()
    event = json.loads(timings[0])
    assert list(event) == ["event", "timestamp", "run_id", "round"] and event["event"] == "round_start"


def test_hard_rules_cover_the_spec_points() -> None:
    text = " ".join(HARD_RULES).lower()
    for phrase in ("one optimize round active", "one code-changing", "stop editing", "cheating", "subagents",
                   "autotune", "sweep", "bottleneck", "profiling", "one coherent hypothesis"):
        assert phrase in text, phrase


def test_start_round_identical_repeat_changes_nothing(accepted: Path) -> None:
    start(accepted)
    before = (accepted / ".helix" / "state.json").read_bytes()
    attempts = (accepted / "opt-round-1" / "attempts.md").read_bytes()
    payload, code = start(accepted)
    assert code == 0 and payload["round"] == "opt-round-1"
    assert (accepted / ".helix" / "state.json").read_bytes() == before
    assert (accepted / "opt-round-1" / "attempts.md").read_bytes() == attempts
    payload, code = start(accepted, reason="another reason")
    assert code == 1 and list(payload) == FAIL_KEYS
    assert payload["issues"] == ["cannot reinitialize active round opt-round-1 with different strategy state"]
    assert payload["guideline"] == "This start-round request could not be applied. Repair the optimize session and retry."


@pytest.mark.parametrize(
    ("setup", "issue", "guide"),
    [
        ("no_state", "optimize workflow state is not available", "`helix submit-baseline"),
        ("baseline_pending", "cannot start a round before baseline.status=passed", "Baseline has not been accepted yet"),
        ("other_active", "cannot start opt-round-1 while workflow phase is round_active", "Another round is already active"),
        ("completed", "cannot reopen completed round opt-round-1", "This round is already completed"),
        ("broken", "invalid workflow state (phase): ", "restart the optimize session"),
    ],
)
def test_start_round_preconditions(ws: Path, setup: str, issue: str, guide: str) -> None:
    states = {
        "baseline_pending": workflow_state(phase="baseline", baseline_status="pending"),
        "other_active": workflow_state(phase="round_active", current_round=2, rounds={2: "active"}),
        "completed": workflow_state(rounds={1: "passed"}),
        "broken": {**workflow_state(), "phase": "dancing"},
    }
    if setup in states:
        write_workflow_state(ws, states[setup])
    if setup == "other_active":  # a round start-round opened has its attempts.md (else it is a crash leftover)
        (ws / "opt-round-2").mkdir()
        (ws / "opt-round-2" / "attempts.md").write_text("# Attempts\n", encoding="utf-8")
    payload, code = start(ws)
    assert code == 1 and list(payload) == FAIL_KEYS
    assert payload["issues"][0].startswith(issue)
    assert guide in payload["guideline"]
    assert not (ws / "opt-round-1" / "attempts.md").exists()


def test_a_failed_round_may_be_reopened(ws: Path) -> None:
    write_workflow_state(ws, workflow_state(rounds={1: "failed"}))
    assert start(ws)[1] == 0
    assert workflow_json(ws)["rounds"]["1"]["status"] == "active"


def test_start_round_rejects_bad_names(accepted: Path) -> None:
    for name in ("opt-round-0", "opt-round-x", "round-1"):
        payload, code = start_round(accepted / name, "exploration", "pattern_entry", "r")
        assert code == 1 and "invalid round directory name" in payload["issues"][0]
    assert start_round(accepted / "opt-round-1", "exploration", "pattern_entry", "   ")[0]["issues"] == ["reason is required"]


@pytest.mark.parametrize(
    ("strategy", "policy"),
    [("exploration", "compiler_source_required"), ("structural_change", "pattern_entry"), ("plateau_review", "pattern_entry")],
)
def test_combination_warnings(accepted: Path, strategy: str, policy: str) -> None:
    payload, code = start(accepted, strategy=strategy, policy=policy)
    assert code == 0
    [warning] = payload["warnings"]
    assert warning.startswith(f"The combination {strategy} + {policy} is unusual")
    [update] = parse_state_updates((accepted / "opt-round-1" / "attempts.md").read_text())
    assert update.warnings == [warning]


def test_start_round_refuses_when_numbering_skips(accepted: Path) -> None:
    """submit-round refuses opt-round-3 while opt-round-2 is not terminal, so opening it would
    leave an active round that can never be submitted (and blocks starting opt-round-2)."""
    payload, code = start(accepted, n=3)
    assert code == 1
    assert payload["status"] == "fail"
    assert "opt-round-2 is not a terminal round yet" in payload["issues"][0]
    assert "numbered in sequence" in payload["guideline"]
    state = json.loads((accepted / ".helix" / "state.json").read_text())
    assert state["phase"] == "awaiting_round_start" and "3" not in state["rounds"]
    assert not (accepted / "opt-round-3" / "attempts.md").exists()
    payload, code = start(accepted, n=2)
    assert code == 1 and "opt-round-1 is not a terminal round yet" in payload["issues"][0]
    payload, code = start(accepted, n=1)
    assert code == 0


def test_start_round_refusal_names_the_active_round(accepted: Path) -> None:
    start(accepted, n=1)
    payload, code = start(accepted, n=1, reason="something else entirely")
    assert code == 1
    payload, code = start(accepted, n=2)
    assert code == 1 and "(opt-round-1 is active)" in payload["issues"][0]


# ----------------------------------------------------------------- set-current-round-state


def test_set_state_transition_and_payload(accepted: Path) -> None:
    start(accepted, strategy="structural_change", policy="profile_required")
    payload, code = set_current_round_state(accepted, "profile was flat", round_strategy="exploration",
                                            analysis_policy="ir_required")
    assert code == 0
    assert list(payload) == ["status", "round", "guideline", "round_strategy", "analysis_policy", "reason",
                             "previous_round_strategy", "previous_analysis_policy", "warnings"]
    assert payload["guideline"] == ("Round strategy state for opt-round-1 is now updated. Use the new state as the "
                                    "active same-round contract.")
    assert (payload["previous_round_strategy"], payload["previous_analysis_policy"]) == ("structural_change", "profile_required")
    assert payload["warnings"][0].startswith("Returning from structural_change to exploration is unusual")
    updates = parse_state_updates((accepted / "opt-round-1" / "attempts.md").read_text())
    assert updates[-1].source == "set-current-round-state"
    assert (updates[-1].previous_round_strategy, updates[-1].round_strategy) == ("structural_change", "exploration")
    entry = workflow_json(accepted)["rounds"]["1"]["strategy_state"]
    assert (entry["round_strategy"], entry["analysis_policy"], entry["updated_by"]) == (
        "exploration", "ir_required", "set-current-round-state")


@pytest.mark.parametrize(
    ("kwargs", "issue", "guide"),
    [
        ({}, "set-current-round-state requires --round-strategy and/or --analysis-policy", "Provide --round-strategy"),
        ({"analysis_policy": "profile_required"}, "state update would be a no-op", "would be a no-op"),
        ({"analysis_policy": "pattern_entry"}, "analysis_policy cannot become shallower within the same round",
         "would become shallower"),
    ],
)
def test_set_state_rejections(accepted: Path, kwargs: dict, issue: str, guide: str) -> None:
    start(accepted, strategy="focused_tuning", policy="profile_required")
    payload, code = set_current_round_state(accepted, "because", **kwargs)
    assert (code, list(payload), payload["issues"]) == (1, ["status", "issues", "guideline"], [issue])
    assert guide in payload["guideline"]


def test_set_state_needs_an_active_round_and_a_state(accepted: Path, tmp_path: Path) -> None:
    payload, code = set_current_round_state(accepted, "r", round_strategy="exploration")
    assert code == 1 and payload["issues"] == ["no optimize round is currently active"]
    assert payload["guideline"].startswith("No optimize round is currently active")
    payload, code = set_current_round_state(tmp_path / "empty", "r", round_strategy="exploration")
    assert payload["issues"] == ["optimize workflow state is not available"]


def test_set_state_on_a_legacy_round_needs_both(ws: Path) -> None:
    data = workflow_state(phase="round_active", current_round=1, rounds={1: "active"})
    del data["rounds"]["1"]["strategy_state"]
    write_workflow_state(ws, data)
    payload, code = set_current_round_state(ws, "r", round_strategy="exploration")
    assert code == 1 and "provide both" in payload["issues"][0]
    payload, code = set_current_round_state(ws, "r", round_strategy="exploration", analysis_policy="pattern_entry")
    assert code == 0 and "previous_round_strategy" not in payload
    [update] = parse_state_updates((ws / "opt-round-1" / "attempts.md").read_text())
    assert (update.previous_round_strategy, update.previous_analysis_policy) == ("<unset>", "<unset>")


def test_unknown_state_fields_survive_transitions(accepted: Path) -> None:
    state = workflow_json(accepted)
    state["runner_note"] = {"kept": True}
    (accepted / ".helix" / "state.json").write_text(json.dumps(state))
    start(accepted)
    assert workflow_json(accepted)["runner_note"] == {"kept": True}


# ------------------------------------------------------------------------ write_round_state


def test_write_round_state_validates_and_keeps_unknown_keys(accepted: Path) -> None:
    rdir = put_round(accepted, 1, scaled(0.8))
    data = read_json(rdir / "round-state.json")
    data["agent_extra"] = 7
    (rdir / "round-state.json").write_text(json.dumps(data))
    write_round_state(rdir, hypothesis="new words", evidence_sources=["benchmark", "profile"])
    after = read_json(rdir / "round-state.json")
    assert after["hypothesis"] == "new words" and after["agent_extra"] == 7
    with pytest.raises(ValueError, match="evidence_sources"):
        write_round_state(rdir, evidence_sources="benchmark")
    assert read_json(rdir / "round-state.json") == after
    fresh = accepted / "opt-round-2"
    fresh.mkdir()
    write_round_state(fresh, hypothesis="h", correctness_status="failed")
    assert read_json(fresh / "round-state.json")["round"] == "opt-round-2"


@pytest.mark.parametrize(
    ("content", "issue"),
    [(b"\xff\x00", "malformed workflow state JSON"), (b"[]", "workflow state must be a JSON object"),
     (b'{"schema_version": 2}', "unsupported workflow state schema_version: 2"),
     (json.dumps({**workflow_state(), "phase": "round_active", "current_round": 4}).encode(),
      "invalid workflow state: phase=round_active requires rounds[4]")],
)
def test_hostile_workflow_state_asks_for_a_restart(ws: Path, content: bytes, issue: str) -> None:
    (ws / ".helix").mkdir()
    (ws / ".helix" / "state.json").write_bytes(content)
    payload, code = start(ws)
    assert code == 1 and payload["issues"][0].startswith(issue)
    assert "restart the optimize session" in payload["guideline"]
    assert (ws / ".helix" / "state.json").read_bytes() == content
