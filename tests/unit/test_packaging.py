"""pyproject's explicit package list names every package on disk (styles/ and examples/ are
mapped into the wheel), and the README's test command is the one CI runs."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_is_listed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(project["tool"]["setuptools"]["packages"])
    on_disk = set()
    for top in ("helix_engine", "helix_tui"):
        for init in (ROOT / top).rglob("__init__.py"):
            on_disk.add(".".join(init.parent.relative_to(ROOT).parts))
    on_disk |= {"helix_tui.styles", "helix_examples"}
    assert on_disk == listed


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    test_cmd = ci[-1].strip()
    assert "pytest" in test_cmd
    assert test_cmd in readme
