"""The device pool: ``--devices 0,2,4-7`` and one benchmark/profile per device at a time.

Why flock: the lease must hold across unrelated helix processes (two agents, a cockpit and
a CLI call) and must free itself when its holder dies, even by SIGKILL. A lease is an
exclusive ``flock`` on ``<ws>/.helix/devices/<backend>-<dev>.lock``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from helix_engine.errors import HelixError
from helix_engine.workspace.files import atomic_write_json
from helix_engine.workspace.layout import HELIX_DIR

DEVICES_DIR = "devices"
_PART_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
#: The largest device index accepted (guards against ``0-99999999`` typos).
MAX_DEVICE_INDEX = 4095


def parse_devices(text: str) -> list[str]:
    """``"0,2,4-7"`` → ``["0", "2", "4", "5", "6", "7"]``.

    Ranges must ascend; a device may appear once. Any other shape raises HelixError with a
    sentence that shows the accepted syntax.
    """
    hint = "write device indexes like 0,2,4-7 (ranges ascending, each device once)"
    if text is None or not str(text).strip():
        raise HelixError(f"the device list is empty; {hint}")
    seen: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        match = _PART_RE.match(part)
        if not match:
            raise HelixError(f"{part!r} in the device list {text!r} is not a device or range; {hint}")
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        if hi < lo:
            raise HelixError(f"the range {part!r} descends; {hint}")
        if hi > MAX_DEVICE_INDEX:
            raise HelixError(f"device {hi} in {text!r} is out of range (0-{MAX_DEVICE_INDEX}); {hint}")
        for dev in range(lo, hi + 1):
            if dev in seen:
                raise HelixError(f"device {dev} appears twice in {text!r}; {hint}")
            seen.append(dev)
    return [str(d) for d in seen]


def lock_path(ws: Path, backend: str, device: str) -> Path:
    return Path(ws) / HELIX_DIR / DEVICES_DIR / f"{backend}-{device}.lock"


def _try_lock(path: Path) -> int | None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return None
        raise
    return fd


def holder_path(ws: Path, backend: str, device: str) -> Path:
    return lock_path(ws, backend, device).with_suffix(".holder.json")


def device_holder(ws: Path, backend: str, device: str) -> dict[str, object] | None:
    """Who holds a device (informational; the flock is the truth), or None when free."""
    fd = _try_lock(lock_path(ws, backend, device))
    if fd is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        return None
    from helix_engine.workspace.reading import read_json_object

    data, _ = read_json_object(holder_path(ws, backend, device), ws, what="device lease", fix="")
    return data or {}


@contextlib.contextmanager
def lease_device(
    ws: Path,
    backend: str,
    pool: list[str],
    *,
    job_id: str | None = None,
    poll_s: float = 0.1,
    should_stop: Callable[[], bool] | None = None,
    on_wait: Callable[[], None] | None = None,
) -> Iterator[str | None]:
    """Hold one free device of ``pool`` for the duration of the block; wait while all are busy.

    ``on_wait`` is called once when the first attempt finds every device busy (so the caller
    can mark the job ``queued``). When ``should_stop()`` turns true while waiting, the block
    gets ``None`` (no device was leased).
    """
    if not pool:
        raise HelixError("the device pool is empty; pass --devices like 0 or 0,1")
    fd: int | None = None
    chosen: str | None = None
    waited = False
    while fd is None:
        for device in pool:
            fd = _try_lock(lock_path(ws, backend, device))
            if fd is not None:
                chosen = device
                break
        if fd is not None:
            break
        if not waited:
            waited = True
            if on_wait is not None:
                on_wait()
        if should_stop is not None and should_stop():
            yield None
            return
        time.sleep(poll_s)
    try:
        with contextlib.suppress(OSError):
            atomic_write_json(
                holder_path(ws, backend, str(chosen)),
                {"pid": os.getpid(), "job_id": job_id, "since": time.time()},
            )
        yield chosen
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
