"""Session goals (issue 14, build 2): ``--target-speedup`` / ``--max-rounds`` kept in
.helix/goals.json, and submit-round's continue/stop signal from them, through the CLI an agent
uses; ``HELIX_OPTIMIZE_MIN_SPEEDUP`` and ``--current-round/--final-round`` still override them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helix_engine.cli import main

from builders import Case
from state_fixtures import new_workspace, put_round, scaled, workflow_json

ROUND_KEYS = ["kind", "status", "issues", "guideline"]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HELIX_OPTIMIZE_MIN_SPEEDUP", "HELIX_OPTIMIZE_LOCAL_OPTIMUM_WINDOW",
                 "HELIX_OPTIMIZE_LOCAL_OPTIMUM_MAX_GEOMEAN_GAIN", "HELIX_BACKEND"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def ws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    ws = new_workspace(tmp_path)
    assert main(["submit-baseline", "--baseline-dir", str(ws / "baseline")]) == 0
    capsys.readouterr()
    return ws


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def _round(ws: Path, capsys: pytest.CaptureFixture[str], n: int, speedup: float, *goal_flags: str,
           submit: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    """start-round (with goal flags), the round's artifacts at ``speedup`` vs the baseline, submit-round."""
    code, started = _cli(capsys, "start-round", "--round-dir", str(ws / f"opt-round-{n}"), "--round-strategy",
                         "exploration", "--analysis-policy", "pattern_entry", "--reason", f"round {n}",
                         "--parent-round", "baseline", *goal_flags)
    assert code == 0, started
    put_round(ws, n, scaled(1 / speedup))
    return _cli(capsys, "submit-round", "--round-dir", str(ws / f"opt-round-{n}"), *submit)


STOP_TARGET = ("round check passed. Minimum speedup target satisfied: best completed-round geomean speedup is "
               "{best} (target {target}). Stop the optimize session now instead of opening another round.")


def test_target_reached_stops(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _round(ws, capsys, 1, 1.6, "--target-speedup", "1.5")
    assert code == 0 and "next_option" not in p
    assert p["guideline"] == STOP_TARGET.format(best="1.60x", target="1.50x")
    assert p["stop_signal"] == {"decision": "stop", "reason": "target-speedup", "round": 1,
                                "best_geomean_speedup": pytest.approx(1.6), "target_speedup": 1.5,
                                "target_source": ".helix/goals.json", "max_rounds": None,
                                "best_geomean_interval": None, "target_judged_by": "point"}  # no samples
    assert list(p) == [*ROUND_KEYS, "stop_signal", "ledger"]  # upstream's keys first, in upstream's order


def test_max_rounds_continue_then_stop(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _round(ws, capsys, 1, 1.1, "--max-rounds", "2", "--target-speedup", "1.5")
    assert code == 0 and p["next_option"] == "opt-round-2"
    assert p["guideline"] == (
        "round check passed. Minimum speedup target not yet satisfied: best completed-round geomean speedup is "
        "1.10x (target 1.50x). Continue the optimize session: opt-round-1 is complete (round 1 of at most 2). "
        "Next round: opt-round-2. Run `helix start-round --round-dir opt-round-2` before beginning the next round.")
    assert (p["stop_signal"]["decision"], p["stop_signal"]["reason"]) == ("continue", "continue")
    code, p = _round(ws, capsys, 2, 1.2)  # the goals are kept between rounds
    assert code == 0 and "next_option" not in p
    assert p["guideline"] == (
        "round check passed. Minimum speedup target not yet satisfied: best completed-round geomean speedup is "
        "1.20x (target 1.50x). Maximum rounds reached: opt-round-2 is round 2 of at most 2 (.helix/goals.json). "
        "Stop the optimize session now instead of opening another round.")
    assert p["stop_signal"] == {"decision": "stop", "reason": "max-rounds", "round": 2,
                                "best_geomean_speedup": pytest.approx(1.2), "target_speedup": 1.5,
                                "target_source": ".helix/goals.json", "max_rounds": 2,
                                "best_geomean_interval": None, "target_judged_by": "point"}
    assert workflow_json(ws)["rounds"]["2"]["status"] == "passed"


def test_target_only_continues_until_reached(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _round(ws, capsys, 1, 1.1, "--target-speedup", "1.3")
    assert code == 0 and p["next_option"] == "opt-round-2" and p["stop_signal"]["decision"] == "continue"
    assert "opt-round-1 is complete. Next round: opt-round-2." in p["guideline"]
    code, p = _round(ws, capsys, 2, 1.4)
    assert p["stop_signal"]["reason"] == "target-speedup" and "next_option" not in p


@pytest.mark.parametrize(("env", "speedup", "decision", "shown"), [
    ("1.05", 1.1, "stop", "1.05x"),  # the environment's lower target is met
    ("2.0", 1.6, "continue", "2.00x"),  # the environment's higher target is not, though the goal's 1.5 is
])
def test_environment_target_overrides_the_goal(ws: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch, env: str, speedup: float,
                                               decision: str, shown: str) -> None:
    monkeypatch.setenv("HELIX_OPTIMIZE_MIN_SPEEDUP", env)
    code, p = _round(ws, capsys, 1, speedup, "--target-speedup", "1.5", "--max-rounds", "3")
    assert code == 0 and p["stop_signal"]["decision"] == decision
    assert p["stop_signal"]["target_source"] == "HELIX_OPTIMIZE_MIN_SPEEDUP"
    assert f"(target {shown})" in p["guideline"]


@pytest.mark.parametrize(("flags", "max_rounds", "guideline_tail", "decision", "reason"), [
    (("--current-round", "1", "--final-round", "1"), "5",
     "This round satisfied the current worker batch target.", "stop", "batch-complete"),
    (("--current-round", "1", "--final-round", "3"), "1",
     ("Round 1/3 in the current worker batch is complete. Next round: opt-round-2. Run `helix start-round "
      "--round-dir opt-round-2` before beginning the next round."), "continue", "batch-continues"),
])
def test_runner_flags_override_max_rounds(ws: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...],
                                          max_rounds: str, guideline_tail: str, decision: str, reason: str) -> None:
    code, p = _round(ws, capsys, 1, 1.1, "--max-rounds", max_rounds, submit=flags)
    assert code == 0 and p["guideline"] == "round check passed. " + guideline_tail
    assert (p["stop_signal"]["decision"], p["stop_signal"]["reason"]) == (decision, reason)


def _sampled(samples: list[float]) -> Case:
    return Case(kernel_us=sum(samples) / len(samples), samples_us=samples, bench_mode="perf-counter")


SAMPLED_BASELINE = {"a": _sampled([20.0, 21, 19, 20, 22, 18]), "b": _sampled([40.0, 41, 39, 40, 42, 38])}
#: 2.31x by the point, [1.51x, 3.52x] by the interval: one slow repetition per case
NOISY = {"a": _sampled([6.0, 6, 6, 6, 6, 22]), "b": _sampled([12.0, 12, 12, 12, 12, 44])}
#: 2.50x [2.41x, 2.59x]
TIGHT = {"a": _sampled([8.0, 8.1, 7.9, 8, 8, 8]), "b": _sampled([16.0, 16.1, 15.9, 16, 16, 16])}


@pytest.fixture()
def sampled_ws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    ws = new_workspace(tmp_path, baseline=SAMPLED_BASELINE)
    assert main(["submit-baseline", "--baseline-dir", str(ws / "baseline")]) == 0
    capsys.readouterr()
    return ws


def _sampled_round(ws: Path, capsys: pytest.CaptureFixture[str], n: int, cases: dict[str, Any],
                   *goal_flags: str) -> tuple[int, dict[str, Any]]:
    code, started = _cli(capsys, "start-round", "--round-dir", str(ws / f"opt-round-{n}"), "--round-strategy",
                         "exploration", "--analysis-policy", "pattern_entry", "--reason", f"round {n}",
                         "--parent-round", "baseline", *goal_flags)
    assert code == 0, started
    put_round(ws, n, cases)
    return _cli(capsys, "submit-round", "--round-dir", str(ws / f"opt-round-{n}"))


def test_goal_target_met_by_the_point_only_continues(sampled_ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The agent walk: 'Minimum speedup target satisfied ... 2.18x (target 2.00x)' stopped the session
    although the interval's low end was 1.78x. helix's own target stops only when the low end clears it."""
    code, p = _sampled_round(sampled_ws, capsys, 1, NOISY, "--target-speedup", "2.0", "--max-rounds", "3")
    assert code == 0 and p["next_option"] == "opt-round-2"
    low, high = p["stop_signal"]["best_geomean_interval"]
    assert low < 2.0 <= p["stop_signal"]["best_geomean_speedup"] <= high
    assert p["guideline"].startswith(
        "round check passed. Target speedup met by the point estimate only: the best completed round's geomean "
        f"speedup is 2.31x [{low:.2f}x, {high:.2f}x], but the low end of its 95% interval, {low:.2f}x, is below "
        "the target 2.00x (.helix/goals.json), so the target is not established yet. Continue the optimize "
        "session: opt-round-1 is complete (round 1 of at most 3). Next round: opt-round-2.")
    assert (p["stop_signal"]["decision"], p["stop_signal"]["reason"]) == ("continue", "continue")
    assert p["stop_signal"]["target_judged_by"] == "interval-low"


def test_goal_target_cleared_by_the_interval_stops_naming_both(sampled_ws: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _sampled_round(sampled_ws, capsys, 1, TIGHT, "--target-speedup", "2.0")
    assert code == 0 and "next_option" not in p
    low, high = p["stop_signal"]["best_geomean_interval"]
    assert p["guideline"] == (
        "round check passed. Target speedup reached: the best completed round's geomean speedup is "
        f"2.50x [{low:.2f}x, {high:.2f}x], and the low end of its 95% interval, {low:.2f}x, is at or above the "
        "target 2.00x (.helix/goals.json). Stop the optimize session now instead of opening another round.")
    assert (p["stop_signal"]["decision"], p["stop_signal"]["reason"]) == ("stop", "target-speedup")


def test_the_environment_target_keeps_upstreams_point_rule(sampled_ws: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """HELIX_OPTIMIZE_MIN_SPEEDUP is upstream's rule: the point estimate, upstream's sentence."""
    monkeypatch.setenv("HELIX_OPTIMIZE_MIN_SPEEDUP", "2.0")
    code, p = _sampled_round(sampled_ws, capsys, 1, NOISY, "--max-rounds", "3")
    assert code == 0 and p["guideline"] == STOP_TARGET.format(best="2.31x", target="2.00x")
    assert p["stop_signal"]["target_judged_by"] == "point" and p["stop_signal"]["best_geomean_interval"] is None


def _next(ws: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """(status --json's next_step, the text's Next: block joined on one line)."""
    code, data = _cli(capsys, "status", str(ws), "--json")
    assert code == 0
    assert main(["status", str(ws)]) == 0
    text = capsys.readouterr().out
    shown = " ".join(line.strip() for line in text.split("Next: ", 1)[1].splitlines()[:3]).split(" Summary:")[0]
    return data["operators"][0]["next_step"], shown


def test_status_next_says_the_session_is_done_when_the_goals_say_stop(
        ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The agent walk: status printed 'Next: helix start-round --round-dir opt-round-2 ...' right after
    submit-round said stop. Next follows the guideline's own check, in text and JSON."""
    code, p = _round(ws, capsys, 1, 1.1, "--target-speedup", "1.5", "--max-rounds", "2")
    assert p["stop_signal"]["decision"] == "continue"
    assert _next(ws, capsys)[0].startswith("helix start-round --round-dir opt-round-2")
    code, p = _round(ws, capsys, 2, 1.2)
    assert p["stop_signal"]["reason"] == "max-rounds"
    step, shown = _next(ws, capsys)
    assert step == ("none: the optimize session is done, opt-round-2 was round 2 of at most 2 (.helix/goals.json); "
                    "`helix goals --max-rounds N` allows more")
    assert shown.startswith(step[:60])
    assert main(["goals", str(ws), "--max-rounds", "5", "--target-speedup", "1.15"]) == 0
    capsys.readouterr()
    step, _ = _next(ws, capsys)  # round 2 (1.20x, no samples: the point) reaches 1.15x
    assert step == ("none: the optimize session is done, round-2's geomean speedup 1.20x reaches the target 1.15x "
                    "(.helix/goals.json)")


def test_status_next_follows_the_interval_rule(sampled_ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _sampled_round(sampled_ws, capsys, 1, NOISY, "--target-speedup", "2.0")
    assert p["stop_signal"]["decision"] == "continue"  # met by the point only
    assert _next(sampled_ws, capsys)[0].startswith("helix start-round --round-dir opt-round-2")
    assert main(["goals", str(sampled_ws), "--target-speedup", "1.4"]) == 0
    capsys.readouterr()
    step, _ = _next(sampled_ws, capsys)
    assert step.startswith("none: the optimize session is done, round-1's geomean speedup 2.31x [")
    assert step.endswith("clears the target 1.40x (.helix/goals.json) by the low end of its 95% interval")


def test_without_goals_the_payload_is_upstreams(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _round(ws, capsys, 1, 1.1)
    ledger = p.pop("ledger")  # helix's one key, after upstream's: what opt-note.md now records
    assert (code, p) == (0, {"kind": "round", "status": "pass", "issues": [], "guideline": "round check passed"})
    assert ledger["best_status"] == "current best" and ledger["final_best_round"] == "round-1"
    assert not (ws / ".helix" / "goals.json").exists()


def test_goals_are_recorded_only_by_a_start_round_that_passes(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, p = _cli(capsys, "start-round", "--round-dir", str(ws / "opt-round-2"), "--round-strategy", "exploration",
                   "--analysis-policy", "pattern_entry", "--reason", "r", "--max-rounds", "4")
    assert code == 1 and "numbered in sequence" in p["guideline"]  # opt-round-1 comes first
    assert not (ws / ".helix" / "goals.json").exists()
    code, p = _cli(capsys, "start-round", "--round-dir", str(ws / "opt-round-1"), "--round-strategy", "exploration",
                   "--analysis-policy", "pattern_entry", "--reason", "r", "--max-rounds", "4")
    assert code == 0 and p["goals"] == {"target_speedup": None, "max_rounds": 4}
    assert main(["goals", str(ws), "--target-speedup", "1.25"]) == 0  # one condition set, the other kept
    capsys.readouterr()
    code, shown = _cli(capsys, "goals", str(ws), "--json")
    assert (shown["target_speedup"], shown["max_rounds"]) == (1.25, 4)


def test_unreadable_goals_refuse_the_submit_with_the_fix(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["start-round", "--round-dir", str(ws / "opt-round-1"), "--round-strategy", "exploration",
                 "--analysis-policy", "pattern_entry", "--reason", "r"]) == 0
    capsys.readouterr()
    put_round(ws, 1, scaled(0.9))
    (ws / ".helix" / "goals.json").write_text('{"max_rounds": 0}')
    code, p = _cli(capsys, "submit-round", "--round-dir", str(ws / "opt-round-1"))
    assert code == 1 and p["status"] == "fail" and "max_rounds must be at least 1" in p["issues"][0]
    assert "helix goals --clear" in p["guideline"]
    assert workflow_json(ws)["rounds"]["1"]["status"] == "active"  # nothing was recorded


@pytest.mark.parametrize(("flag", "value"), [("--target-speedup", "0"), ("--target-speedup", "inf"),
                                             ("--max-rounds", "0"), ("--max-rounds", "2.5")])
def test_bad_goal_values_are_usage_errors(ws: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["goals", str(ws), flag, value])
    assert exc.value.code == 2 and "give a" in capsys.readouterr().err
    assert not (ws / ".helix" / "goals.json").exists()
