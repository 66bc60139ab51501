"""``helix submit-round --check`` (issue 13, finding 2): what submit-round would do, and what
fails, without writing anything; the same answer the real submit then gives."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helix_engine.state.lifecycle import start_round, submit_baseline, submit_round
from helix_engine.state.submit_check import check_submit

from state_fixtures import new_workspace, put_round, scaled, workflow_json

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HELIX_OPTIMIZE_MIN_SPEEDUP", "HELIX_OPTIMIZE_LOCAL_OPTIMUM_WINDOW", "HELIX_BACKEND"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    ws = new_workspace(tmp_path)
    assert submit_baseline(ws / "baseline")[1] == 0
    return ws


def tree_hash(ws: Path) -> dict[str, str]:
    """Every file and folder under the workspace (.helix included) with its bytes' hash and mode."""
    found: dict[str, str] = {}
    for folder, dirs, names in os.walk(ws):
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), ws)] = "dir"
        for name in names:
            path = Path(folder) / name
            found[os.path.relpath(path, ws)] = hashlib.sha256(path.read_bytes()).hexdigest() + oct(path.stat().st_mode)
    return found


def helix(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "helix_engine", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_check_of_a_failing_terminal_round_writes_nothing_and_says_it_would_close_it(ws: Path) -> None:
    """The cockpit's ctrl+s closed such a round at once; --check must say so and change nothing."""
    start_round(ws / "opt-round-1", "exploration", "pattern_entry", "try the mask")
    put_round(ws, 1, scaled(0.8), correctness="not_run")
    before = tree_hash(ws)
    payload, code = check_submit(ws / "opt-round-1")
    assert tree_hash(ws) == before
    assert code == 1 and payload["check"] is True
    assert payload["status"] == "fail" and payload["issues"] == ["correctness_status=not_run"]
    assert payload["would_record"] == "failed" and "close opt-round-1 as failed" in payload["would"]
    # the CLI, as an agent calls it: JSON with --json, a sentence per issue without
    proc = helix("submit-round", "--round-dir", str(ws / "opt-round-1"), "--check", "--json")
    assert proc.returncode == 1 and json.loads(proc.stdout) == payload
    proc = helix("submit-round", "--round-dir", str(ws / "opt-round-1"), "--check")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[:2] == [payload["would"], "  ✘ correctness_status=not_run"]
    assert tree_hash(ws) == before
    assert workflow_json(ws)["rounds"]["1"]["status"] == "active"
    # the real submit then does exactly what the check said
    real, real_code = submit_round(ws / "opt-round-1")
    assert (real_code, real["issues"]) == (1, payload["issues"])
    assert workflow_json(ws)["rounds"]["1"]["status"] == "failed"


def test_check_of_an_incomplete_round_says_nothing_would_be_recorded(ws: Path) -> None:
    start_round(ws / "opt-round-1", "exploration", "pattern_entry", "try the mask")
    put_round(ws, 1, scaled(0.8))
    (ws / "opt-round-1" / "round-state.json").unlink()
    before = tree_hash(ws)
    payload, code = check_submit(ws / "opt-round-1")
    assert tree_hash(ws) == before
    assert (code, payload["would_record"]) == (1, None)
    assert payload["issues"] == ["missing round-state.json"]
    assert "record nothing" in payload["would"]


def test_check_of_a_passing_round_runs_no_clean_up_and_matches_the_real_pass(ws: Path) -> None:
    start_round(ws / "opt-round-1", "exploration", "profile_required", "try the mask")
    rdir = put_round(ws, 1, scaled(0.8), state_overrides={"profile_dir": "profile"})
    (rdir / "test_result.pt").write_bytes(b"1")  # the pass clean-up of submit-round removes it
    before = tree_hash(ws)
    payload, code = check_submit(rdir)
    assert tree_hash(ws) == before and (rdir / "test_result.pt").exists()
    assert (code, payload["status"], payload["would_record"]) == (0, "pass", "passed")
    real, real_code = submit_round(rdir)
    assert real_code == 0 and real["guideline"] == payload["guideline"]


def test_check_with_the_form_values_judges_them_instead_of_the_file(ws: Path) -> None:
    """The cockpit checks what it is about to write before it writes anything."""
    start_round(ws / "opt-round-1", "exploration", "pattern_entry", "try the mask")
    rdir = put_round(ws, 1, scaled(0.8))
    data = json.loads((rdir / "round-state.json").read_text())
    (rdir / "round-state.json").unlink()
    before = tree_hash(ws)
    payload, code = check_submit(rdir, state_data=data)
    assert (code, payload["would_record"]) == (0, "passed")
    payload, code = check_submit(rdir, state_data={**data, "benchmark_status": "failed"})
    assert (code, payload["would_record"], payload["issues"]) == (1, "failed", ["benchmark_status=failed"])
    payload, _ = check_submit(rdir, state_data={**data, "correctness_status": "maybe"})
    assert payload["would_record"] is None and "correctness_status=maybe" in payload["issues"][0]
    assert tree_hash(ws) == before


def test_check_of_a_round_that_is_not_active_says_why(ws: Path) -> None:
    put_round(ws, 1, scaled(0.8))
    payload, code = check_submit(ws / "opt-round-1")
    assert code == 1 and payload["would_record"] is None
    assert payload["issues"] == ["cannot complete opt-round-1 while workflow phase is awaiting_round_start"]
    assert payload["issues"] == submit_round(ws / "opt-round-1")[0]["issues"]
    payload, code = check_submit(ws / "opt-round-7")
    assert (code, payload["issues"]) == (1, ["missing round directory: opt-round-7"])
