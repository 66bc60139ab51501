"""start-round records the round's parent and creates ``opt-round-N/opt_<op>.py`` from the
parent's operator (issue 13, findings 3 and 5): the user edits a file that exists, and the round
has its place in the tree before round-state.json is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helix_engine.state.lifecycle import start_round, submit_baseline, submit_round
from helix_engine.state.recovery import repair
from helix_engine.workspace.snapshot import load_workspace

from state_fixtures import new_workspace, put_round, scaled, workflow_json

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HELIX_OPTIMIZE_MIN_SPEEDUP", "HELIX_BACKEND"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    ws = new_workspace(tmp_path)
    assert submit_baseline(ws / "baseline")[1] == 0
    return ws


def start(ws: Path, n: int, parent: str | None = None) -> tuple[dict, int]:
    return start_round(ws / f"opt-round-{n}", "exploration", "pattern_entry", f"round {n}", parent_round=parent)


def finish(ws: Path, n: int, factor: float, parent: str) -> None:
    """The agent's part of a round: edit the operator (a new block size), bench, submit."""
    put_round(ws, n, scaled(factor), parent=parent)
    assert submit_round(ws / f"opt-round-{n}")[1] == 0


def test_the_first_round_starts_from_a_copy_of_the_baseline_operator(ws: Path) -> None:
    payload, code = start(ws, 1)
    assert code == 0
    candidate = ws / "opt-round-1" / "opt_add.py"
    assert candidate.read_bytes() == (ws / "baseline" / "add.py").read_bytes()
    assert (payload["parent_round"], payload["operator_file"], payload["operator_created"]) == (
        "baseline", "opt-round-1/opt_add.py", True)
    assert workflow_json(ws)["rounds"]["1"]["parent_round"] == "baseline"


def test_the_default_parent_is_the_current_best_and_can_be_chosen(ws: Path) -> None:
    start(ws, 1)
    finish(ws, 1, 0.8, "baseline")
    payload, code = start(ws, 2)
    assert (code, payload["parent_round"]) == (0, "opt-round-1")
    view = load_workspace(ws).rounds[2]  # no round-state.json yet: the parent start-round recorded
    assert (view.parent, view.parent_source) == ("opt-round-1", "start-round")
    assert (ws / "opt-round-2" / "opt_add.py").read_bytes() == (ws / "opt-round-1" / "opt_add.py").read_bytes()
    assert (ws / "opt-round-1" / "opt_add.py").read_bytes() != (ws / "baseline" / "add.py").read_bytes()
    finish(ws, 2, 0.9, "opt-round-1")  # slower than round 1: round 1 stays the best
    payload, code = start(ws, 3, parent="baseline")
    assert (code, payload["parent_round"]) == (0, "baseline")
    assert (ws / "opt-round-3" / "opt_add.py").read_bytes() == (ws / "baseline" / "add.py").read_bytes()
    assert workflow_json(ws)["rounds"]["3"]["parent_round"] == "baseline"


@pytest.mark.parametrize(("parent", "issue"), [
    ("opt-round-5", "parent_round opt-round-5 must be an earlier round than opt-round-2"),
    ("opt-round-1", "parent_round opt-round-1 is not a completed round"),
    ("main", "parent_round 'main' names no round"),
])
def test_a_parent_submit_round_would_refuse_is_refused_before_anything_is_written(ws: Path, parent: str,
                                                                                 issue: str) -> None:
    start(ws, 1)
    put_round(ws, 1, scaled(0.8), correctness="failed")
    submit_round(ws / "opt-round-1")  # terminal, failed: not a parent to build on
    before = (ws / ".helix" / "state.json").read_bytes()
    payload, code = start(ws, 2, parent=parent)
    assert code == 1 and payload["issues"][0].startswith(issue), payload
    assert (ws / ".helix" / "state.json").read_bytes() == before
    assert not (ws / "opt-round-2").exists()


def test_an_existing_operator_is_never_overwritten(ws: Path) -> None:
    (ws / "opt-round-1").mkdir()
    (ws / "opt-round-1" / "opt_add.py").write_text("# my own start\n")
    payload, code = start(ws, 1)
    assert code == 0 and payload["operator_created"] is False
    assert payload["operator_file"] == "opt-round-1/opt_add.py"
    assert (ws / "opt-round-1" / "opt_add.py").read_text() == "# my own start\n"


def test_a_linked_round_folder_is_not_written_through(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, ws / "opt-round-1")
    payload, _ = start(ws, 1)
    assert not (outside / "opt_add.py").exists()
    assert payload.get("operator_created") in (None, False)


def test_the_cli_takes_parent_round(ws: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "helix_engine", "start-round", "--round-dir", str(ws / "opt-round-1"),
                           "--round-strategy", "exploration", "--analysis-policy", "pattern_entry", "--reason", "r",
                           "--parent-round", "baseline"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["operator_file"] == "opt-round-1/opt_add.py" and (ws / "opt-round-1" / "opt_add.py").is_file()


def test_repair_finishes_a_start_round_killed_before_the_candidate(ws: Path) -> None:
    start(ws, 1)
    (ws / "opt-round-1" / "attempts.md").unlink()  # killed right after the state write
    (ws / "opt-round-1" / "opt_add.py").unlink()
    payload, code = repair(ws)
    assert code == 0, payload
    assert (ws / "opt-round-1" / "opt_add.py").read_bytes() == (ws / "baseline" / "add.py").read_bytes()
    assert any("candidate operator from baseline" in line for line in payload["repaired"])
