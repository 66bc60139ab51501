"""Start a helix command detached from the caller, so a job outlives the cockpit.

Why a new session: closing the terminal (SIGHUP) or quitting the cockpit must not stop a
benchmark that an hour of work depends on. The spawned ``python -m helix_engine <argv>``
registers its own job under ``.helix/jobs/``; its stdout/stderr go to a spawn log there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

from helix_engine.errors import HelixError
from helix_engine.jobs.registry import jobs_root

_REPO_ROOT = str(Path(__file__).resolve().parents[2])


def spawn_cli(ws: Path, argv: list[str], *, refusal_wait_s: float = 0.0) -> int:
    """Run ``python -m helix_engine *argv`` detached in ``ws``; return its pid.

    With ``refusal_wait_s``, wait that long for an immediate refusal (a HelixError exits 1
    before any job exists, so nothing would show it): raise it as a HelixError instead."""
    ws = Path(ws)
    root = jobs_root(ws)
    root.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
    log_path = root / f"spawn-{stamp}.log"
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _REPO_ROOT not in paths:
        paths.append(_REPO_ROOT)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    python = os.environ.get("HELIX_PYTHON") or sys.executable
    try:
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [python, "-m", "helix_engine", *[str(a) for a in argv]],
                cwd=str(ws), env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True,
            )
    except OSError as exc:
        raise HelixError(f"could not start helix ({exc.strerror or exc}); check HELIX_PYTHON") from None
    if refusal_wait_s > 0:
        try:
            code = proc.wait(timeout=refusal_wait_s)
        except subprocess.TimeoutExpired:
            code = None
        if code:
            raise HelixError(f"`helix {argv[0] if argv else ''}` refused: {_refusal(log_path)}")
    # Reap it when it ends so it never lingers as a zombie of a long-lived cockpit.
    threading.Thread(target=proc.wait, daemon=True, name=f"helix-reap-{proc.pid}").start()
    return proc.pid


def _refusal(log_path: Path) -> str:
    """The CLI's ``error: …`` sentence from the spawn log (else its last line)."""
    from helix_engine.workspace.reading import read_bytes_safe

    data, _ = read_bytes_safe(log_path, log_path.parent)
    if data is None:
        return f"it exited at once; see {log_path}"
    lines = [ln.strip() for ln in data.decode("utf-8", errors="replace").splitlines() if ln.strip()]
    errors = [ln[len("error:"):].strip() for ln in lines if ln.startswith("error:")]
    return errors[-1] if errors else (lines[-1][:300] if lines else f"it exited at once; see {log_path}")
