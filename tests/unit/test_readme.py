"""The README stays true: its quick start is what CI runs, every `helix ...` command it shows
parses with the real CLI and is exercised by some test, every registered subcommand and every
cockpit key is documented."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from helix_engine import cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
QUICK_START = (
    "python3 -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
    " && python3 -m pip install -e '.[cpu]' && helix demo",
    "python3 -m pip install -q -e '.[test]' && python3 -m pytest -q -n auto --dist loadfile",
)
COCKPIT_WORDS = {"tui"}  # handled by the console script (helix_tui.cli), not helix_engine.cli


def _code_blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S)


def _helix_command_lines(inline: bool = True) -> list[str]:
    """Every `helix ...` command in bash blocks (and inline code), comments stripped."""
    found: list[str] = []
    for lang, body in _code_blocks(README):
        if lang != "bash":
            continue
        for line in body.splitlines():
            for part in line.split("&&"):
                part = part.split("  #", 1)[0].strip()
                if part.startswith("helix ") or part == "helix":
                    found.append(part)
    if inline:
        for code in re.findall(r"`(helix(?: [^`]*)?)`", README):
            found.append(code.strip())
    return found


def _cli_table_commands() -> list[str]:
    table = README.split("## CLI reference", 1)[1].split("\n## ", 1)[0]
    return [c.strip() for c in re.findall(r"^\| `(helix [^`]*)`", table, flags=re.M)]


def _subcommands() -> set[str]:
    names = set()
    for line in _helix_command_lines():
        words = line.split()
        if len(words) > 1 and re.fullmatch(r"[a-z][a-z-]+", words[1]):
            names.add(words[1])
    return names


def _test_sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace")
                     for p in (ROOT / "tests").rglob("*.py") if p.name != Path(__file__).name)


def test_quick_start_is_the_two_lines_ci_runs() -> None:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    (lang, block), *_ = _code_blocks(section)
    assert lang == "bash"
    assert tuple(line for line in block.splitlines() if line.strip()) == QUICK_START
    ci_last = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1].strip()
    assert ci_last == QUICK_START[1]


def test_ci_installs_what_the_first_quick_start_line_installs() -> None:
    """The quick start's first line minus the demo: the pinned CPU torch from PyTorch's CPU index,
    then helix's cpu extra; CI runs those same two installs (.ci/run says how it resolves offline),
    and adds the cluster extra (Ray) to the second so the cluster tests run."""
    installs = [part.strip() for part in QUICK_START[0].split("&&") if part.strip().startswith("python3 -m pip")]
    assert installs == ["python3 -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu",
                        "python3 -m pip install -e '.[cpu]'"]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip().startswith("python3 -m pip install")]
    # torch first, then helix's cpu extra, then the pinned type checker and linter, then the tests
    assert len(ci) == 4 and ci[3] == QUICK_START[1]
    assert ci[0].endswith(" torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
    assert ci[1].endswith(" -e '.[cpu,cluster]'")
    assert ci[2].endswith(" mypy==2.4.1 ruff==0.17.6")


def test_a_plain_install_never_pulls_torch() -> None:
    """`pip install -e .` (and the cpu extra) must not ask PyPI for torch: on Linux that is a CUDA
    build of several GB. Only the cuda extra names torch; the npu extra never names `triton`
    (it would overwrite triton-ascend's files)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]

    def names(reqs: list[str]) -> set[str]:
        return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in reqs}

    assert not names(project["dependencies"]) & {"torch", "triton", "torch-npu", "triton-ascend"}
    assert "torch" not in names(extras["cpu"]) and "triton" in names(extras["cpu"])
    assert "torch" not in names(extras["test"]) and "torch" not in names(extras["npu"])
    assert names(extras["cluster"]) == {"ray"}
    assert "triton" not in names(extras["npu"])
    assert {"torch", "triton"} <= names(extras["cuda"])


def test_readme_shows_helix_commands_at_all() -> None:
    assert len(_helix_command_lines()) >= 15
    assert {"demo", "status", "start-round", "submit-round", "run-test", "run-bench"} <= _subcommands()


def test_every_readme_subcommand_is_registered() -> None:
    registered = cli.command_names() | COCKPIT_WORDS
    unknown = _subcommands() - registered
    assert not unknown, f"README shows subcommands that do not exist: {sorted(unknown)}"


def test_every_registered_subcommand_is_in_the_cli_table() -> None:
    table = README.split("## CLI reference", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in cli.command_names() if f"`helix {name}" not in table]
    assert not missing, f"the CLI reference table lacks: {missing}"


def test_every_readme_subcommand_appears_in_some_test() -> None:
    sources = _test_sources()
    untested = [name for name in sorted(_subcommands() - COCKPIT_WORDS)
                if f'"{name}"' not in sources and f"'{name}'" not in sources]
    assert not untested, f"no test runs these README commands: {untested}"


def _parseable_lines() -> list[str]:
    """Full command lines (bash blocks, CLI table) without `...`, `[optional]` or `a / b`."""
    out = []
    for line in _helix_command_lines(inline=False) + _cli_table_commands():
        words = line.split()
        if len(words) < 2 or words[1] in COCKPIT_WORDS or any(m in line for m in ("...", "[", " / ", "<")):
            continue
        out.append(line)
    return sorted(set(out))


@pytest.mark.parametrize("line", _parseable_lines())
def test_readme_command_lines_parse_with_the_real_cli(line: str) -> None:
    args = cli.build_parser().parse_args(shlex.split(line)[1:])  # argparse exits on a bad flag
    assert callable(getattr(args, "func", None)), f"{line!r} names no subcommand"


def test_key_table_lists_every_cockpit_key() -> None:
    from helix_tui.commands import ACTIONS, display_key

    table = README.split("## Cockpit keys", 1)[1].split("\n## ", 1)[0]
    for action in ACTIONS:
        assert f"| `{display_key(action.key)}` | {action.title} |" in table, action.title


def test_cockpit_capture_is_real_output() -> None:
    intro = README.split("## Quick start", 1)[0]
    (lang, block), = _code_blocks(intro)
    assert lang == "text" and "<<" not in block
    assert "baseline" in block and "round-1" in block and "round-2" in block
