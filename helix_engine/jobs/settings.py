"""What a job runs under: its time limit, its memory limit and its environment.

Why in one place: each limit comes from an argument, else an environment variable, else a
default, and the message that reports a breach must name which one applied.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.jobs import procs
from helix_engine.jobs.events import JOB_DIR_ENV

TIMEOUT_ENV = "HELIX_EVAL_TIMEOUT_SECONDS"
DEFAULT_TIMEOUT_S = 300.0
RSS_ENV = "HELIX_JOB_MAX_RSS_MB"
_REPO_ROOT = str(Path(__file__).resolve().parents[2])


def resolve_timeout(timeout_s: float | None) -> tuple[float, str]:
    """The time limit and a phrase naming where it came from (for the timeout message)."""
    if timeout_s is not None:
        if not (timeout_s > 0 and math.isfinite(timeout_s)):
            raise HelixError(f"the timeout must be a positive number of seconds, not {timeout_s}")
        return float(timeout_s), f"set by the caller; {TIMEOUT_ENV} sets the default"
    from_env = env_seconds(TIMEOUT_ENV, example=600)
    if from_env is None:
        return DEFAULT_TIMEOUT_S, f"the {TIMEOUT_ENV} default, {DEFAULT_TIMEOUT_S:g} s"
    return from_env


def env_seconds(name: str, *, example: float) -> tuple[float, str] | None:
    """A time limit from environment variable ``name`` and a phrase naming it; None when unset.
    A value that is not a positive finite number is refused with a sentence saying how to set it."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value > 0 and math.isfinite(value)):
        raise HelixError(f"{name}={raw!r} is not a positive number of seconds; set it like {example:g}")
    return value, f"{name}={raw}"


def resolve_rss_limit(max_rss_mb: float | None) -> tuple[int | None, str]:
    """Memory limit in bytes (None: off) and where it came from."""
    if max_rss_mb is None:
        raw = os.environ.get(RSS_ENV, "").strip()
        if raw:
            try:
                max_rss_mb = float(raw)
            except ValueError:
                raise HelixError(f"{RSS_ENV}={raw!r} is not a number of megabytes; set it like 8000") from None
            source = f"{RSS_ENV}={raw}"
        else:
            total = procs.physical_memory_bytes()
            if total is None:
                return None, "no limit"
            return int(total * 0.75), f"the {RSS_ENV} default, 75% of this machine's memory"
    else:
        source = f"set by the caller; {RSS_ENV} sets the default"
    if not math.isfinite(max_rss_mb) or max_rss_mb <= 0:
        return None, "no limit"
    return int(max_rss_mb * 1024 * 1024), source


def child_environment(backend: Any, device: str | None, env: dict[str, str] | None, folder: Path) -> dict[str, str]:
    """Inherited env + backend env + caller env, then the variables the runner owns."""
    merged = dict(os.environ)
    merged.update(backend.child_env(device, base=merged))
    if env:
        merged.update({str(k): str(v) for k, v in env.items()})
    if merged.get("TRITON_ALL_BLOCKS_PARALLEL") == "1":
        merged["TRITON_ALL_BLOCKS_PARALLEL"] = "0"
    if device is not None and backend.visible_devices_var:
        merged[backend.visible_devices_var] = str(device)
    merged[JOB_DIR_ENV] = str(folder)
    merged["HELIX_JOB_ID"] = folder.name
    merged["PYTHONUNBUFFERED"] = "1"
    paths = [p for p in merged.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _REPO_ROOT not in paths:
        paths.append(_REPO_ROOT)  # so `python -m helix_engine...` works from any cwd
    merged["PYTHONPATH"] = os.pathsep.join(paths)
    return merged
