"""The `helix` console script routes engine subcommands to the engine (without textual) and
everything else to the cockpit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helix_tui import cli

ROOT = Path(__file__).resolve().parents[2]


def test_engine_subcommand_and_flags_go_to_engine(monkeypatch) -> None:
    seen: list[list[str]] = []
    import helix_engine.cli as engine_cli

    monkeypatch.setattr(engine_cli, "main", lambda argv: seen.append(list(argv)) or 0)
    import helix_tui.app as app

    monkeypatch.setattr(app, "run_cockpit", lambda argv: seen.append(["COCKPIT", *argv]) or 0)
    import helix_engine.commands.status as status_command

    # status tries its fast path first (without the engine's CLI); what it does not answer goes on
    monkeypatch.setattr(status_command, "stored_output", lambda words: seen.append(["FAST", *words]) and None)
    cli.main(["status", "--json", "x"])
    cli.main(["--version"])
    cli.main(["--no-watch", "ws"])
    cli.main(["tui", "ws"])
    cli.main(["some/workspace"])
    cli.main([])
    assert seen == [
        ["FAST", "--json", "x"],
        ["status", "--json", "x"],
        ["--version"],
        ["COCKPIT", "--no-watch", "ws"],
        ["COCKPIT", "ws"],
        ["COCKPIT", "some/workspace"],
        ["COCKPIT"],
    ]


def test_cockpit_on_a_folder_that_is_no_workspace_says_what_to_do(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from helix_tui.cli import main; sys.exit(main(sys.argv[1:]))", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 1
    assert "not an operator workspace" in out.stderr
    assert "Traceback" not in out.stderr
