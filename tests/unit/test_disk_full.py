"""A full disk (ENOSPC) or a used-up quota (EDQUOT) in any command is said as what to do,
"disk full: free space on <where> and run again", never "helix failed unexpectedly … report it"."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from helix_engine.cli import main
from helix_engine.diskfull import disk_full_text, mount_point, where_text
from helix_engine.errors import HelixError

from state_fixtures import new_workspace, put_round


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _fill_the_disk(monkeypatch: pytest.MonkeyPatch, code: int = errno.ENOSPC) -> None:
    """Every write that reaches the disk fails as a full disk does (at the fsync of the data)."""
    def full(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", full)


def _round_ws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    ws = new_workspace(tmp_path)
    rc, _out, err = _run(capsys, ["submit-baseline", "--baseline-dir", str(ws / "baseline")])
    assert rc == 0, err
    return ws


def _assert_disk_full(rc: int, err: str, written: Path) -> None:
    assert rc == 1, err
    assert "failed unexpectedly" not in err and "report it" not in err and "Traceback" not in err, err
    assert err.startswith("error: disk full: free space on "), err
    assert err.rstrip().endswith("and run again"), err
    assert str(mount_point(written)) in err and str(written) in err, err  # where: the mount, the file


def test_start_round_on_a_full_disk_says_where_to_free_space(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _round_ws(tmp_path, capsys)
    before = (ws / ".helix" / "state.json").read_bytes()
    _fill_the_disk(monkeypatch)
    rc, _out, err = _run(capsys, ["start-round", "--round-dir", str(ws / "opt-round-1"), "--round-strategy",
                                  "exploration", "--analysis-policy", "pattern_entry", "--reason", "r"])
    _assert_disk_full(rc, err, ws / ".helix")
    assert (ws / ".helix" / "state.json").read_bytes() == before  # the atomic write left it whole
    assert not [p for p in (ws / ".helix").iterdir() if p.name.endswith(".tmp")]


def test_submit_round_over_quota_says_where_to_free_space(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ws = _round_ws(tmp_path, capsys)
    rc, _out, err = _run(capsys, ["start-round", "--round-dir", str(ws / "opt-round-1"), "--round-strategy",
                                  "exploration", "--analysis-policy", "pattern_entry", "--reason", "r"])
    assert rc == 0, err
    # a terminal round that fails its check: submit-round records it (failed) in the state and the ledger
    put_round(ws, 1, None, correctness="failed", benchmark="not_run")
    _fill_the_disk(monkeypatch, errno.EDQUOT)
    rc, _out, err = _run(capsys, ["submit-round", "--round-dir", str(ws / "opt-round-1"), "--current-round", "1",
                                  "--final-round", "3"])
    assert "quota" in err, err
    _assert_disk_full(rc, err.replace(" (your disk quota is used up)", ""), ws)


def test_a_disk_full_error_deep_in_a_chain_is_still_disk_full(capsys: pytest.CaptureFixture[str]) -> None:
    """A command that wraps the OSError (raise … from exc) still ends as disk full."""
    from helix_engine.commands.run import run_command

    def wrapped(_args: Any) -> int:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/nowhere/x.json")
        except OSError as exc:
            raise RuntimeError("while saving") from exc

    def explained(_args: Any) -> int:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as exc:
            raise HelixError("could not record the round") from exc

    assert run_command(wrapped, object()) == 1
    err = capsys.readouterr().err
    assert err == f"error: disk full: free space on {where_text('/nowhere/x.json')} and run again\n", err
    assert run_command(explained, object()) == 1
    err = capsys.readouterr().err
    assert err == ("error: disk full: free space on the disk helix was writing to and run again "
                   "(could not record the round)\n"), err


def test_where_names_the_mount_point_and_the_file(tmp_path: Path) -> None:
    target = tmp_path / "not-yet" / "perf.txt"
    mount = mount_point(target)
    assert mount is not None and os.path.ismount(mount) and str(target).startswith(str(mount))
    text = disk_full_text(OSError(errno.ENOSPC, "No space left on device"), target)
    assert text.startswith(f"disk full: free space on {mount} (") and f"{target})" in text, text
