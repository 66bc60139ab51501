"""In a load session the safe reader resolves each folder once (issue 12: one realpath per path
check was a tenth of a load); its answer for every path must be the one a full realpath gives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helix_engine.workspace import reading

CASES = ("a/f.txt", "a/missing", "la/f.txt", "la/b/up/f.txt", "a/b/../f.txt", "loop1", "loop1/x", "a/out",
         "a/lf", "a/b/up", "a/b/up/b/up/lf", "missing/dir/x", "a/f.txt/x", "la/../a/f.txt", "a/../../x",
         "a/b/up/../f.txt", "dangling", "a/b")


def _tree(tmp_path: Path) -> Path:
    """Links to folders, a link loop, a link out of the workspace, a dangling link, a link in a
    linked folder."""
    ws = tmp_path / "ws"
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "f.txt").write_text("x")
    os.symlink("a", ws / "la")
    os.symlink("loop1", ws / "loop2")
    os.symlink("loop2", ws / "loop1")
    os.symlink("/etc/passwd", ws / "a" / "out")
    os.symlink("f.txt", ws / "a" / "lf")
    os.symlink("..", ws / "a" / "b" / "up")
    os.symlink("nowhere", ws / "dangling")
    return ws


def _answer(path: Path, ws: Path) -> bool | str:
    try:
        return reading.inside(path, ws)
    except OSError:
        return "loop"


@pytest.mark.parametrize("order", ["forward", "backward"])
def test_inside_in_a_session_answers_as_a_full_realpath(tmp_path: Path, order: str) -> None:
    ws = _tree(tmp_path)
    cases = CASES if order == "forward" else tuple(reversed(CASES))  # folders cached in either order
    plain = {case: _answer(ws / case, ws) for case in cases}
    assert plain["a/out"] is False and plain["loop1"] == "loop" and plain["a/f.txt"] is True
    with reading.load_session():
        cached = {case: _answer(ws / case, ws) for case in cases}
        again = {case: _answer(ws / case, ws) for case in cases}
    assert cached == plain and again == plain
    for case in cases:  # the resolved name itself, not only the yes/no
        with reading.load_session():
            real, _ = reading._realpath(os.fspath(ws / case))
        assert real == os.path.realpath(ws / case), case
