"""The promoted best is only ever a round submit-round accepted: a round with a perf file and a
round-state.json that was never submitted (or is still active) is measured, and its speedup
shown, but `helix status` never names it "Promoted best" (it said "Promoted best: round-1")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helix_engine.cli import main

from builders import workflow_state, write_workflow_state
from state_fixtures import new_workspace, put_round, scaled


def _status(capsys: pytest.CaptureFixture[str], ws: Path) -> tuple[str, dict]:
    os.chdir(ws)
    assert main(["status"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert main(["status", "--json"]) == 0
    [item] = json.loads(capsys.readouterr().out)["operators"]
    return text, item


@pytest.mark.parametrize("how", ["no workflow state", "baseline submitted", "round active"])
def test_a_round_never_submitted_is_not_the_promoted_best(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    monkeypatch.chdir(tmp_path)
    ws = new_workspace(tmp_path)
    os.chdir(ws)
    if how != "no workflow state":
        assert main(["submit-baseline", "--baseline-dir", "baseline"]) == 0
    if how == "round active":
        assert main(["start-round", "--round-dir", "opt-round-1", "--round-strategy", "exploration",
                     "--analysis-policy", "pattern_entry", "--reason", "r"]) == 0
    capsys.readouterr()
    put_round(ws, 1, scaled(0.5))  # 2x faster: perf file and a passing round-state.json, not submitted
    text, item = _status(capsys, ws)
    assert item["best_round"] is None and item["geomean_speedup"] is None  # no round is the best: none was accepted
    assert item["upstream_best_round"] == "round-1" and item["upstream_geomean_speedup"] == pytest.approx(2.0)
    assert "Best round: baseline (no round promoted)" in text, text
    assert "Perf files (upstream's rule, unpaired): round-1 2.00x, avg +50.0%" in text, text
    assert item["promoted_best_round"] == "baseline", item
    assert "Promoted best: round-1" not in text, text
    shown = "opt-round-1 is not submitted yet" if how == "round active" else "opt-round-1 was never submitted"
    assert f"Promoted best: baseline (no submitted round is faster beyond the noise margin; {shown})" in text, text
    [entry] = item["rounds"]
    assert entry["comparable"] and entry["promotion"]["status"] == "not promoted"
    assert entry["promotion"]["reason"].startswith("submit-round has not accepted it"), entry


def test_the_same_round_once_accepted_is_the_promoted_best(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """What submit-round records for a pass (.helix/state.json: rounds.1.status passed) makes it the best."""
    monkeypatch.chdir(tmp_path)
    ws = new_workspace(tmp_path)
    put_round(ws, 1, scaled(0.5))
    write_workflow_state(ws, workflow_state(rounds={1: "passed"}))
    text, item = _status(capsys, ws)
    assert item["promoted_best_round"] == "round-1", item
    assert "Promoted best: round-1, geomean speedup (ratio of means) 2.00x" in text, text
    write_workflow_state(ws, workflow_state(rounds={1: "failed"}))  # rejected: not the best either
    text, item = _status(capsys, ws)
    assert item["promoted_best_round"] == "baseline" and "Promoted best: round-1" not in text, text
    assert item["best_round"] is None and "Best round: round-1" not in text, text  # rejected: never "Best round"
