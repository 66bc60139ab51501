"""The command line after a first hour of use (issue 13, finding 10): a mistyped command gets
"did you mean", a bad flag gets its own subcommand's usage, `helix status FOLDER` lists only
operator workspaces, the Summary counts the warnings it printed, and `tui` is in the help."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from helix_engine.cli import main
from helix_engine.workspace.snapshot import find_workspaces
from helix_tui import cli as console
from tests.builders import RoundSpec, build_workspace, write_operator

ROOT = Path(__file__).resolve().parents[2]
BASE = {"a": 10.0, "b": 20.0}


def console_script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`helix ARGS` as the console script runs it, in ``cwd``; also reports whether textual was
    imported (a mistyped command must not pay for the cockpit)."""
    code = ("import sys\nfrom helix_tui.cli import main\ntry:\n    rc = main(sys.argv[1:])\n"
            "except SystemExit as exc:\n    rc = exc.code\nprint('TEXTUAL' if 'textual' in sys.modules else "
            "'NO-TEXTUAL', file=sys.stderr)\nsys.exit(rc)")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


# ------------------------------------------------------------------ did you mean


def test_mistyped_command_says_did_you_mean(tmp_path: Path) -> None:
    """`helix statsu` said `statsu is not an operator workspace…`: the word was taken as a path."""
    proc = console_script("statsu", cwd=tmp_path)
    assert proc.returncode == 2
    assert "'statsu' is not a helix command; did you mean `helix status`?" in proc.stderr
    assert "operator workspace" not in proc.stderr
    assert "Traceback" not in proc.stderr and "NO-TEXTUAL" in proc.stderr


def test_a_prefix_names_every_command_it_begins(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["sub"])
    assert exc.value.code == 2
    assert "did you mean `helix submit-baseline` or `helix submit-round`?" in capsys.readouterr().err


def test_a_word_with_no_near_command_points_at_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["frobnicate"])
    err = capsys.readouterr().err
    assert "'frobnicate' is not a helix command; `helix --help` lists every command" in err
    assert "did you mean" not in err


def test_existing_folders_and_path_spellings_still_open_the_cockpit(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    import helix_engine.cli as engine_cli
    import helix_tui.app as app

    monkeypatch.setattr(engine_cli, "main", lambda argv: seen.append(["ENGINE", *argv]) or 0)
    monkeypatch.setattr(app, "run_cockpit", lambda argv: seen.append(["COCKPIT", *argv]) or 0)
    (tmp_path / "myop").mkdir()
    monkeypatch.chdir(tmp_path)
    for argv in (["myop"], ["./missing"], ["~/ws"], ["a/b"], ["."], ["statsu"]):
        console.main(argv)
    assert seen == [["COCKPIT", "myop"], ["COCKPIT", "./missing"], ["COCKPIT", "~/ws"], ["COCKPIT", "a/b"],
                    ["COCKPIT", "."], ["ENGINE", "statsu"]]


# ------------------------------------------------------------------ a bad flag


def test_bad_flag_prints_the_subcommands_usage(tmp_path: Path) -> None:
    """`helix status --jsn` printed `usage: helix [-h] [--version] COMMAND ...`."""
    proc = console_script("status", "--jsn", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: helix status ")
    assert "usage: helix [-h]" not in proc.stderr
    assert "helix status: error: unrecognized arguments: --jsn (did you mean --json?)" in proc.stderr
    assert "`helix status --help` lists its options" in proc.stderr


def test_bad_flag_of_a_nested_subcommand_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["jobs", "list", "--bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: helix jobs list ")
    assert "helix jobs list: error: unrecognized arguments: --bogus;" in err


def test_a_good_command_line_still_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[{"a": 8.0, "b": 18.0}])
    assert main(["status", str(ws), "--json"]) == 0
    assert '"operators"' in capsys.readouterr().out


# ------------------------------------------------------------------ tui in the help


def test_help_lists_tui(tmp_path: Path) -> None:
    proc = console_script("--help", cwd=tmp_path)
    assert proc.returncode == 0
    listed = [line.split()[0] for line in proc.stdout.splitlines() if line.startswith("    ") and line.split()]
    assert "tui" in listed and "status" in listed


def test_engine_only_cli_explains_where_the_cockpit_is(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tui", "ws"]) == 1
    assert "run `helix tui ws`" in capsys.readouterr().err


# ------------------------------------------------------------------ which folders are operators


@pytest.fixture()
def mixed_folder(tmp_path: Path) -> Path:
    """A real workspace and a fresh operator folder beside a venv, an empty folder and a git clone."""
    build_workspace(tmp_path, name="softmax", baseline=BASE, rounds=[{"a": 8.0, "b": 18.0}])
    write_operator(tmp_path / "fresh", "mul")  # operator + harnesses, before prepare-baseline
    venv.create(tmp_path / "venv", with_pip=False)
    (tmp_path / "empty").mkdir()
    origin = tmp_path.parent / f"{tmp_path.name}-origin"
    origin.mkdir()
    (origin / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    (origin / "README.md").write_text("# a project\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    for cmd in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "init"]):
        subprocess.run([*git, *cmd], cwd=origin, check=True, capture_output=True, timeout=60)
    subprocess.run([*git, "clone", "-q", str(origin), str(tmp_path / "clone")], check=True,
                   capture_output=True, timeout=60)
    return tmp_path


def test_status_of_a_folder_lists_only_operator_workspaces(mixed_folder: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(mixed_folder)]) == 0
    heads = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert heads == ["[NO-SESSION] fresh", "[OK] softmax"]


def test_picker_lists_only_operator_workspaces(mixed_folder: Path) -> None:
    """The cockpit's picker and `helix status` read the same discovery function."""
    assert find_workspaces(mixed_folder) == [mixed_folder / "fresh", mixed_folder / "softmax"]


def test_a_folder_of_no_workspaces_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    venv.create(tmp_path / "venv", with_pip=False)
    (tmp_path / "empty").mkdir()
    assert main(["status", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "is not an operator workspace and none of its subfolders is one" in err
    assert "[NO-SESSION]" not in err


# ------------------------------------------------------------------ the Summary line


def test_summary_counts_the_warnings_it_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`Warning: skipping opt-round-2 …` was followed by `Summary: 1 ok, 0 warning, 0 no-session`."""
    ws = build_workspace(tmp_path, baseline=BASE,
                         rounds=[{"a": 8.0, "b": 18.0}, RoundSpec({"a": 7.0, "b": 17.0}, correctness="failed")])
    assert main(["status", str(ws)]) == 0
    lines = capsys.readouterr().out.splitlines()
    printed = [line for line in lines if line.startswith("  Warning: ")]
    assert printed and printed[0].startswith("  Warning: skipping opt-round-2")
    assert lines[-1] == f"Summary: 1 ok, 0 warning, 0 no-session workspaces; {len(printed)} warning" + (
        "" if len(printed) == 1 else "s") + " above"


def test_summary_without_warnings_is_upstreams_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = build_workspace(tmp_path, baseline=BASE, rounds=[{"a": 8.0, "b": 18.0}])
    assert main(["status", str(ws)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "Summary: 1 ok, 0 warning, 0 no-session"
