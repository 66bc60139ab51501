"""``helix lint`` (issue 14, agent walk): the pattern cards sent the agent to "helix's lint",
which was no command. It prints exactly the lints ``submit-round --check`` computes, and every
``helix ...`` command a knowledge page names parses with helix's own parser."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from importlib import resources
from pathlib import Path

import pytest

from helix_engine.cli import build_parser, main
from helix_engine.state.lifecycle import start_round, submit_baseline

from state_fixtures import new_workspace, put_round, scaled

SECOND_KERNEL = '''

@triton.jit
def scale_kernel(x_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets), 0.0), mask=offsets < n_elements)


def scale(x):
    scale_kernel[(1,)](x, x.numel(), BLOCK=256)
    return x
'''


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HELIX_OPTIMIZE_MIN_SPEEDUP", "HELIX_BACKEND"):
        monkeypatch.delenv(name, raising=False)


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("correctness", ["passed", "not_run"])
def test_lint_prints_exactly_what_submit_round_check_returns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], correctness: str) -> None:
    ws = new_workspace(tmp_path)
    assert submit_baseline(ws / "baseline")[1] == 0
    start_round(ws / "opt-round-1", "exploration", "pattern_entry", "fuse")
    rdir = put_round(ws, 1, scaled(0.5), correctness=correctness)
    operator = rdir / "opt_add.py"
    operator.write_text(operator.read_text(encoding="utf-8") + SECOND_KERNEL, encoding="utf-8")

    _, check = _json(capsys, "submit-round", "--round-dir", str(rdir), "--check", "--json")
    assert main(["lint", "--round-dir", str(rdir), "--json"]) == 0
    linted = json.loads(capsys.readouterr().out)
    assert linted["lints"] == check["lints"]
    assert any("2 @triton.jit kernels" in s for s in linted["lints"])
    assert any("propagate_nan" in s for s in linted["lints"])
    # FILE: a round's operator is linted as its round; the text form prints the same lines
    assert main(["lint", str(operator), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lints"] == check["lints"]
    assert main(["lint", "--round-dir", str(rdir)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"! {s}" for s in check["lints"]]


def test_lint_needs_one_subject(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint"]) == 1
    assert "give one of FILE or --round-dir" in capsys.readouterr().err
    assert main(["lint", str(tmp_path / "missing.py")]) == 1
    assert "is not a file" in capsys.readouterr().err


# ------------------------------------------------------------ commands named in knowledge pages

HELIX_CMD = re.compile(r"`(helix [^`]+)`")


def knowledge_pages() -> list[tuple[str, str]]:
    """(name, text) of every markdown page shipped in helix_engine.knowledge, at any depth."""
    found: list[tuple[str, str]] = []

    def walk(folder: object, prefix: str) -> None:
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):  # type: ignore[attr-defined]
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif entry.name.endswith(".md"):
                found.append((prefix + entry.name, entry.read_text(encoding="utf-8")))

    walk(resources.files("helix_engine.knowledge"), "")
    return found


def unknown_words(command: str) -> list[str]:
    """The subcommands and flags of ``helix ...`` that helix's parser does not know ([] when all
    do). Placeholders (NAME, DIR) and values are not judged: only command words and flags."""
    parser: argparse.ArgumentParser = build_parser()
    words = shlex.split(command.replace("…", "").replace("...", ""))[1:]
    bad: list[str] = []
    chooses_subcommand = True
    for word in words:
        if word.startswith("-"):
            flags = {s for a in parser._actions for s in a.option_strings}  # noqa: SLF001
            if word.split("=", 1)[0] not in flags:
                bad.append(word)
            continue
        subs = next((a.choices for a in parser._actions  # noqa: SLF001
                     if isinstance(a, argparse._SubParsersAction)), None)  # noqa: SLF001
        if chooses_subcommand and subs is not None:
            if word in subs:
                parser = subs[word]
                continue
            if not word.isupper() and "/" not in word:
                bad.append(word)
        chooses_subcommand = False
    return bad


def test_the_command_checker_catches_what_the_agent_hit() -> None:
    assert unknown_words("helix lint --round-dir opt-round-1") == []
    assert unknown_words("helix linter") == ["linter"]
    assert unknown_words("helix profile-bench --target-opx X") == ["--target-opx"]
    assert unknown_words("helix patterns show NAME") == []


@pytest.mark.parametrize("name,text", knowledge_pages(), ids=[n for n, _ in knowledge_pages()])
def test_every_helix_command_in_a_knowledge_page_exists(name: str, text: str) -> None:
    commands = HELIX_CMD.findall(text)
    bad = {c: unknown_words(c) for c in commands if unknown_words(c)}
    assert bad == {}, f"{name} names commands or flags helix does not have"
    assert "helix's lint" not in text, f"{name}: name the command (`helix lint`)"
