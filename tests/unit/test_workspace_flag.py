"""``--workspace``/``-w`` on every command that takes a workspace (issue 14, agent walk 10): the
workspace was positional on goals/prepare-baseline, ``--workspace`` on set-current-round-state and
absent on start-round; an agent guessed wrong on the next command."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from helix_engine.cli import build_parser, main

from state_fixtures import new_workspace, put_round, scaled

#: Commands with a workspace argument that do not take the option, and why.
EXEMPT = {("tui",): "the `helix` console script opens the cockpit before this parser sees the words"}


def leaf_parsers() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found: list[tuple[tuple[str, ...], argparse.ArgumentParser]] = []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
        if path:
            found.append((path, parser))
        for action in subs:
            for name, child in action.choices.items():
                walk(child, (*path, name))

    walk(build_parser(), ())
    return found


def takes_a_workspace(parser: argparse.ArgumentParser) -> bool:
    """A WORKSPACE/PATH argument, or a folder option that lies in one (--round-dir, --baseline-dir)."""
    for action in parser._actions:  # noqa: SLF001
        if action.dest in ("workspace", "workspace_flag", "paths"):
            return True
        if {"--round-dir", "--baseline-dir"} & set(action.option_strings):
            return True
    return False


WORKSPACE_COMMANDS = [(path, p) for path, p in leaf_parsers() if takes_a_workspace(p) and path not in EXEMPT]


def test_the_walk_finds_the_commands_the_agent_used() -> None:
    names = {" ".join(path) for path, _ in WORKSPACE_COMMANDS}
    assert {"goals", "prepare-baseline", "set-current-round-state", "start-round", "submit-round", "round-state",
            "repair", "calibrate", "status", "lint", "submit-baseline", "agent start", "jobs list", "ir diff",
            "compiler-source locate"} <= names


@pytest.mark.parametrize("path,parser", WORKSPACE_COMMANDS, ids=[" ".join(p) for p, _ in WORKSPACE_COMMANDS])
def test_every_workspace_taking_command_accepts_workspace_and_w(path: tuple[str, ...],
                                                                parser: argparse.ArgumentParser) -> None:
    flags = {s for a in parser._actions for s in a.option_strings}  # noqa: SLF001
    assert {"--workspace", "-w"} <= flags, f"helix {' '.join(path)} lacks --workspace/-w"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main(list(argv))
    out = capsys.readouterr()
    try:
        return code, json.loads(out.out)
    except ValueError:
        return code, out.out + out.err


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HELIX_OPTIMIZE_MIN_SPEEDUP", "HELIX_BACKEND"):
        monkeypatch.delenv(name, raising=False)


def test_the_agent_walk_with_workspace_from_another_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    ws = new_workspace(tmp_path / "ws")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    w = str(ws)
    assert _cli(capsys, "submit-baseline", "-w", w, "--baseline-dir", "baseline")[0] == 0
    code, goals = _cli(capsys, "goals", "--workspace", w, "--max-rounds", "2", "--json")
    assert code == 0 and goals["max_rounds"] == 2 and Path(goals["path"]).parent.parent == ws
    code, started = _cli(capsys, "start-round", "--workspace", w, "--round-dir", "opt-round-1", "--round-strategy",
                         "exploration", "--analysis-policy", "pattern_entry", "--reason", "try")
    assert code == 0, started
    code, changed = _cli(capsys, "set-current-round-state", "-w", w, "--analysis-policy", "profile_required",
                         "--reason", "need a profile")
    assert code == 0, changed
    code, changed = _cli(capsys, "set-current-round-state", w, "--round-strategy", "structural_change",
                         "--reason", "fuse")  # the positional form too
    assert code == 0, changed
    put_round(ws, 1, scaled(0.5))
    code, state = _cli(capsys, "round-state", "-w", w, "--round-dir", "opt-round-1", "--hypothesis", "h",
                       "--evidence", "benchmark", "--correctness", "passed", "--benchmark", "passed", "--json")
    assert code == 0 and Path(state["round_state_path"]).parent == ws / "opt-round-1"
    assert _cli(capsys, "lint", "-w", w, "--round-dir", "opt-round-1", "--json")[1]["lints"] == []
    code, check = _cli(capsys, "submit-round", "-w", w, "--round-dir", "opt-round-1", "--check", "--json")
    assert code == 0 and check["would_record"] == "passed", check
    assert _cli(capsys, "submit-round", "--workspace", w, "--round-dir", "opt-round-1")[0] == 0
    code, status = _cli(capsys, "status", "-w", w, "--json")
    assert code == 0 and [op["path"] for op in status["operators"]] == [str(ws)]
    assert _cli(capsys, "repair", "--workspace", w, "--json")[0] == 0


def test_contradicting_workspaces_are_refused_with_a_sentence(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    ws = new_workspace(tmp_path / "ws")
    other = new_workspace(tmp_path / "other")
    code, text = _cli(capsys, "goals", str(other), "-w", str(ws))
    assert code == 1 and "two workspaces given" in text and "pass one of them" in text
    code, text = _cli(capsys, "submit-round", "-w", str(ws), "--round-dir", str(other / "opt-round-1"), "--check")
    assert code == 1 and "is not inside --workspace" in text
    code, same = _cli(capsys, "goals", str(ws), "-w", str(ws), "--json")  # the same one twice is fine
    assert code == 0 and Path(same["path"]).parent.parent == ws
