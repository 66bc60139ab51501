"""The child side of the runner: how a job's process is started (parent-death signal, no
core files), how its output is teed, and how its end is described in words.

Why apart from runner.py: these are the low-level process details; the runner keeps the
policy (limits, statuses, cancel).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOG_CAP_ENV = "HELIX_JOB_MAX_LOG_MB"
CORE_ENV = "HELIX_JOB_CORE_DUMPS"


def pdeathsig_setup() -> Callable[[], None] | None:
    """A preexec hook asking Linux to SIGKILL the child when its supervisor dies."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    keep_cores = os.environ.get(CORE_ENV, "").lower() in ("1", "true", "yes")

    def setup() -> None:
        prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the supervisor died before prctl took effect
            os._exit(137)
        if not keep_cores:  # a crashing operator must not litter the workspace with core files
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return setup


def signal_text(rc: int) -> str:
    sig = -rc
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    hint = {
        "SIGABRT": "the process aborted (os.abort() or a failed assertion in native code)",
        "SIGSEGV": "the process accessed invalid memory (a crash in native code)",
        "SIGKILL": "something killed it; if not helix, maybe the kernel's out-of-memory killer",
        "SIGBUS": "the process hit a bus error (bad memory mapping)",
        "SIGFPE": "the process hit a floating-point exception in native code",
    }.get(name, "")
    return f"killed by {name} (signal {sig})" + (f": {hint}" if hint else "")


STUCK = ("did not exit even after SIGKILL (stuck in the kernel or a device driver); "
          "check it with `ps` and the device's health")


def reap(proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> int | None:
    """The child's return code, or None when it will not die (D state in a driver)."""
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None


def stop_text(rc: int | None) -> str:
    """How a stopped child ended, from its return code (what really happened, not the plan)."""
    if rc is None:
        return STUCK
    if rc == -signal.SIGKILL:
        return "was killed with SIGKILL (it outlived SIGTERM's grace period)"
    if rc == -signal.SIGTERM:
        return "was stopped with SIGTERM"
    if rc < 0:
        return f"ended by {signal_text(rc).split(':')[0]} after SIGTERM"
    return f"exited with code {rc} after SIGTERM"


class Tee(threading.Thread):
    """Copies the child's combined stdout/stderr to output.log (capped) and maybe stderr."""

    def __init__(self, fd: int, log_path: Path, echo: bool, cap_bytes: int) -> None:
        super().__init__(daemon=True, name="helix-job-tee")
        self.fd, self.log_path, self.echo, self.cap = fd, log_path, echo, cap_bytes
        self.written = 0
        self.tail = b""

    def run(self) -> None:
        log = None
        try:
            log = open(self.log_path, "ab")  # noqa: SIM115 - closed in finally
        except OSError:
            self.cap = 0  # keep draining the pipe so the child never blocks on a full pipe
        try:
            while True:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                self._remember(chunk)
                if log is not None and self.written < self.cap:
                    self._write(log, chunk)
                if self.echo:
                    with contextlib.suppress(OSError, ValueError, AttributeError):
                        sys.stderr.buffer.write(chunk)
                        sys.stderr.flush()
        finally:
            if log is not None:
                with contextlib.suppress(OSError):
                    log.close()
            with contextlib.suppress(OSError):
                os.close(self.fd)

    def _write(self, log: Any, chunk: bytes) -> None:
        try:
            part = chunk[: self.cap - self.written]
            log.write(part)
            self.written += len(part)
            if self.written >= self.cap:
                log.write(f"\n[helix: output.log reached {self.cap // (1024 * 1024)} MB; "
                          f"further output dropped ({LOG_CAP_ENV})]\n".encode())
            log.flush()
        except OSError:  # disk full: stop logging, keep draining
            self.cap = self.written

    def _remember(self, chunk: bytes) -> None:
        self.tail = (self.tail + chunk)[-4096:]

    def last_line(self) -> str:
        """The last line the child printed itself (a profiler's own markers are skipped: the
        failure sentence quotes this line, output.log keeps them all)."""
        from helix_engine.jobs.summary import is_tool_noise

        for raw in reversed(self.tail.splitlines()):
            text = raw.decode("utf-8", "replace").strip()
            if text and not is_tool_noise(text):
                return text[:200]
        return ""
