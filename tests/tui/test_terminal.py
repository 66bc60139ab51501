"""The cockpit in a real pseudo-terminal: it paints, `q` quits, and a hang-up (the SSH link
closing the terminal) ends it cleanly with exit code 0, in 16 and 256 colours."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time
from pathlib import Path

import pytest

from cockpit_helpers import make_workspace

ROOT = Path(__file__).resolve().parents[2]


def _spawn(ws: Path, term: str) -> tuple[int, int]:
    pid, fd = pty.fork()
    if pid == 0:  # child: the `helix tui` console script, as a user runs it
        os.environ.update({"TERM": term, "PYTHONPATH": str(ROOT), "COLUMNS": "80", "LINES": "24"})
        os.environ.pop("NO_COLOR", None)
        os.execvp(sys.executable, [sys.executable, "-m", "helix_tui.cli", "tui", str(ws)])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    return pid, fd


def _read_until(fd: int, needle: bytes, timeout: float = 30.0) -> bytes:
    out = b""
    deadline = time.monotonic() + timeout
    while needle not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    return out


def _wait(pid: int, timeout: float = 20.0) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


@pytest.mark.slow
@pytest.mark.parametrize(("term", "how"), [("xterm-256color", "q"), ("xterm", "hangup"), ("xterm-256color", "close")])
def test_paints_and_exits_cleanly(tmp_path: Path, term: str, how: str) -> None:
    ws = make_workspace(tmp_path)
    pid, fd = _spawn(ws, term)
    try:
        out = _read_until(fd, b"1.44x")
        assert b"1.44x" in out and b"round-2" in out
        if term == "xterm":
            assert b"38;5;" not in out  # 16 colours only: no 256-colour escapes
        if how == "q":
            os.write(fd, b"q")
            assert b"\x1b[?1049l" in _read_until(fd, b"\x1b[?1049l", timeout=10)  # the alternate screen is left
        elif how == "hangup":
            os.kill(pid, signal.SIGHUP)
        else:
            os.close(fd)  # the SSH connection drops: the terminal goes away
        assert _wait(pid) == 0
    finally:
        if how != "close":
            os.close(fd)
