"""Exit cleanly when the terminal goes away (an SSH connection drops).

When the pty's other end closes, the kernel sends SIGHUP and every write to the terminal fails
with EIO. Textual's output thread dies on that error and the app can then block forever while
restoring the terminal. So on SIGHUP: point stdin/stdout/stderr at /dev/null (writes succeed,
nothing blocks), ask the app to exit, and keep a short watchdog that ends the process with exit
code 0 if shutdown still hangs. Nothing is lost: the workspace files are the state, every write
is atomic, and jobs run detached under their own supervisors.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

#: Seconds a hung-up cockpit may take to shut down before the watchdog ends it.
WATCHDOG_S = 3.0


def detach_terminal() -> None:
    """Replace fds 0, 1 and 2 with /dev/null so no write can fail or block any more."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            with contextlib.suppress(OSError):
                os.dup2(devnull, fd)
        os.close(devnull)


def start_watchdog(seconds: float = WATCHDOG_S) -> threading.Timer:
    timer = threading.Timer(seconds, os._exit, args=(0,))
    timer.daemon = True
    timer.start()
    return timer


def install(loop: asyncio.AbstractEventLoop, on_hangup: Callable[[], None], *, real_terminal: bool) -> Callable[[], None]:
    """Handle SIGHUP; returns a function that restores the previous handler.

    A plain signal handler (not ``loop.add_signal_handler``) so it also runs when the event
    loop is stuck on a dead terminal. ``real_terminal=False`` (headless tests) only exits.
    """
    try:
        previous: Any = signal.getsignal(signal.SIGHUP)
    except (AttributeError, ValueError):  # no SIGHUP on this platform
        return lambda: None

    def handler(_signum: int, _frame: object) -> None:
        if real_terminal:
            detach_terminal()
            start_watchdog()
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            loop.call_soon_threadsafe(on_hangup)

    try:
        signal.signal(signal.SIGHUP, handler)
    except ValueError:  # not the main thread
        return lambda: None

    def restore() -> None:
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(signal.SIGHUP, previous)

    return restore
