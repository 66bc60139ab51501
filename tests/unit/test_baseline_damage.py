"""A damaged baseline perf file is said to be the baseline's problem, with the command that
re-establishes it, not blamed on the round ("skipping opt-round-1 because benchmark_status is
failed" was all `helix status` said)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.jobs.registry import JobInfo, write_job

from state_fixtures import new_workspace, put_round, scaled

FIX = "`helix prepare-baseline --force`"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out + err


def _measured_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Baseline accepted, opt-round-1 started, benched (its perf file, and passed run-test and
    run-bench jobs of the round in .helix/jobs, as the commands leave them)."""
    ws = new_workspace(tmp_path)
    os.chdir(ws)
    assert _cli(capsys, "submit-baseline", "--baseline-dir", "baseline")[0] == 0
    assert _cli(capsys, "start-round", "--round-dir", "opt-round-1", "--round-strategy", "exploration",
                "--analysis-policy", "pattern_entry", "--reason", "r")[0] == 0
    put_round(ws, 1, scaled(0.8))
    (ws / "opt-round-1" / "round-state.json").unlink()  # `helix round-state` writes it below
    for kind in ("run-test", "run-bench"):
        folder = ws / ".helix" / "jobs" / f"20260720-080000-{kind}-0001"
        folder.mkdir(parents=True)
        write_job(folder, JobInfo.model_validate({"id": folder.name, "kind": kind, "created_at": time.time(),
                                                  "status": "passed", "round": "opt-round-1"}))
    return ws


def test_a_damaged_baseline_perf_file_is_named_with_its_fix_not_blamed_on_the_round(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ws = _measured_round(tmp_path, capsys)
    perf = ws / "baseline" / "add_perf.txt"
    perf.write_text(perf.read_text()[:150])  # cut mid-record: no record reads
    argv = ("round-state", "--round-dir", "opt-round-1", "--hypothesis", "h", "--evidence", "benchmark")
    rc, text = _cli(capsys, *argv)  # the accepted baseline's seal no longer holds: refused, nothing written
    assert rc == 1 and "baseline/add_perf.txt changed" in text and FIX in text, text
    assert not (ws / "opt-round-1" / "round-state.json").exists()
    (ws / ".helix" / "gate" / "baseline.json").unlink()  # a baseline accepted by an older helix: no seal
    rc, text = _cli(capsys, *argv)
    assert rc == 0, text
    state = json.loads((ws / "opt-round-1" / "round-state.json").read_text())
    # the damage is the baseline's: the round's bench is not said to have failed (state/round_fill.py)
    assert state["benchmark_status"] == "not_run" and state["correctness_status"] == "passed", state
    flat = " ".join(text.split())
    assert ("benchmark_status left not_run, not failed: the baseline perf file baseline/add_perf.txt is damaged"
            in flat and "the damage is the baseline's, not the round's" in flat and FIX in flat), text

    rc, text = _cli(capsys, "status")
    flat = " ".join(text.split())
    assert "skipping opt-round-1 because benchmark_status is" not in flat, text
    assert ("skipping opt-round-1 because it cannot be compared with the baseline: the baseline perf file "
            "baseline/add_perf.txt is damaged") in flat, text
    assert f"re-establish the baseline with {FIX}" in flat, text
    assert "helix round-state --round-dir opt-round-1" in flat, text
    assert f"cannot parse baseline perf file baseline/add_perf.txt; re-establish it with {FIX}" in flat, text

    rc, text = _cli(capsys, "status", "--format", "json")
    [item] = json.loads(text)["operators"]
    skip = [w for w in item["warnings"] if w.startswith("skipping opt-round-1 because")]
    assert len(skip) == 1 and "baseline/add_perf.txt" in skip[0] and FIX in skip[0], item["warnings"]
    assert any(p["file"] == "baseline/add_perf.txt" and FIX in p["message"] for p in item["problems"]), item["problems"]


def test_a_baseline_perf_file_with_one_bad_line_says_how_to_re_establish_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The other records still read (the round compares on them), but the file is damaged."""
    monkeypatch.chdir(tmp_path)
    ws = _measured_round(tmp_path, capsys)
    put_round(ws, 1, scaled(0.8))
    perf = ws / "baseline" / "add_perf.txt"
    lines = perf.read_text().splitlines(keepends=True)
    perf.write_text(lines[0] + "{not json\n" + "".join(lines[2:]))
    rc, text = _cli(capsys, "status")
    flat = " ".join(text.split())
    assert f"baseline perf file baseline/add_perf.txt is damaged; re-establish it with {FIX}" in flat, text
    assert "baseline/add_perf.txt:2: has invalid JSON" in flat, text


def test_a_round_failed_by_itself_is_still_blamed_on_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """With a sound baseline the upstream warning stays word for word."""
    monkeypatch.chdir(tmp_path)
    ws = _measured_round(tmp_path, capsys)
    put_round(ws, 1, scaled(0.8), benchmark="failed")
    rc, text = _cli(capsys, "status")
    assert "skipping opt-round-1 because benchmark_status is failed" in " ".join(text.split()), text
    assert "prepare-baseline" not in text, text


def test_a_round_whose_own_perf_file_does_not_compare_is_still_failed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """round-state's derivation blames the round when the damage is the round's (the baseline reads)."""
    monkeypatch.chdir(tmp_path)
    ws = _measured_round(tmp_path, capsys)
    perf = ws / "opt-round-1" / "opt_add_perf.txt"
    perf.write_text(perf.read_text()[:150])
    rc, text = _cli(capsys, "round-state", "--round-dir", "opt-round-1", "--hypothesis", "h", "--evidence", "benchmark")
    assert rc == 0, text
    state = json.loads((ws / "opt-round-1" / "round-state.json").read_text())
    assert state["benchmark_status"] == "failed" and "the damage is the baseline's" not in text, text
