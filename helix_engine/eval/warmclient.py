"""A probe job's child when the warm worker serves it: ``python -m helix_engine.eval.warmclient
SOCKET MODULE ARGS…`` (see warm.py).

It hands the zygote its command line, working folder, environment and stdin/stdout/stderr,
relays SIGTERM/SIGINT/SIGHUP to the fork's process group and exits as the fork did (its code,
or the same signal), so the job runner sees an ordinary child. When the zygote cannot be
reached any more it runs the cold worker in its place (exec), so a probe never fails for want
of a warm worker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from helix_engine.eval import warm

_RELAYED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: How long the zygote may take to say it forked (it answers at once unless it is stuck).
START_TIMEOUT_S = 30.0


def _cold(module: str, args: list[str], why: str) -> None:
    print(f"helix: the warm worker is gone ({why}); running cold", file=sys.stderr, flush=True)
    python = os.environ.get("HELIX_PYTHON") or sys.executable
    os.execv(python, [python, "-m", module, *args])


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: python -m helix_engine.eval.warmclient SOCKET MODULE [ARGS…]", file=sys.stderr)
        return 2
    path, module, rest = Path(args[0]), args[1], args[2:]
    try:
        sock = warm.connect(path)
        warm.send(sock, {"op": "run", "module": module, "argv": rest, "cwd": os.getcwd(), "env": dict(os.environ),
                         "path": list(sys.path)}, fds=[0, 1, 2])
        sock.settimeout(START_TIMEOUT_S)
        started, _ = warm.receive(sock)
        sock.settimeout(None)
    except (warm.WarmError, OSError, ValueError) as exc:
        _cold(module, rest, str(exc))
        return 1  # not reached: exec
    if "error" in started or not isinstance(started.get("pid"), int):
        _cold(module, rest, str(started.get("error") or "it sent no process id"))
    pid = int(started["pid"])

    def relay(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signum)

    for sig in _RELAYED:
        signal.signal(sig, relay)
    try:
        ended, _ = warm.receive(sock)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        print("helix: the warm worker ended before the probe did", file=sys.stderr, flush=True)
        return 1
    if isinstance(ended.get("signal"), int):
        number = int(ended["signal"])
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP cannot be set
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    code = ended.get("code")
    return int(code) if isinstance(code, int) else 1


if __name__ == "__main__":
    sys.exit(main())
