"""Ctrl-C and SIGTERM stop the jobs a helix process supervises, then act as before.

Why: a job supervised from a worker thread (a device pool running cases in parallel) never
sees the main thread's Ctrl-C; without this the interrupted command would wait for every
job to time out. Kept import-light (the CLI installs it at start-up): it only reaches the
runner when the runner is already loaded, i.e. when jobs can exist.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

_INSTALLED = False
_RUNNER = "helix_engine.jobs.runner"


def _stop_jobs(signum: int, grace_s: float) -> None:
    runner = sys.modules.get(_RUNNER)
    if runner is None:
        return
    name = signal.Signals(signum).name
    if runner.stop_all_jobs(f"the supervising helix process got {name}"):
        runner.drain(grace_s + 2.0)


def install_interrupt_handlers(grace_s: float = 5.0) -> bool:
    """Chain SIGINT/SIGTERM/SIGHUP: stop this process's jobs, then run the previous handler
    (so Ctrl-C still raises KeyboardInterrupt and SIGTERM still ends the process).
    Main thread only; installs once; returns whether it installed now."""
    global _INSTALLED
    if _INSTALLED or threading.current_thread() is not threading.main_thread():
        return False
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(sig)

        def handler(signum: int, frame: Any, _previous: Any = previous) -> None:
            _stop_jobs(signum, grace_s)
            if callable(_previous):
                _previous(signum, frame)
            elif _previous != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            return False
    _INSTALLED = True
    return True
