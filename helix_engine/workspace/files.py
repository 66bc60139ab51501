"""Safe file access inside a workspace: atomic writes, the transition lock, and path
resolution that refuses to leave the workspace (reads go through `reading.read_text_safe`).

Every engine write goes through `atomic_write_text` so that a process killed at any moment
leaves the file either whole-old or whole-new. Every state transition holds `workspace_lock`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HELIX_DIR = ".helix"
LOCK_NAME = "lock"
#: Files larger than this are not parsed (a problem is reported instead).
MAX_TEXT_BYTES = 16 * 1024 * 1024


class WorkspaceBusy(RuntimeError):
    """Another helix process holds the workspace lock."""


class PathOutsideWorkspace(ValueError):
    """A declared path resolves outside the workspace (``..``, absolute, or a symlink)."""


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via temp file + fsync + rename (+ fsync of the folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600: keep the mode the file had, else the umask's (as open() would)
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _mode_for(path: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask, read without changing it where Linux allows (threads write too)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_json(path: Path, obj: Any, *, indent: int | None = 2) -> None:
    """Atomically write ``obj`` as JSON (UTF-8, trailing newline)."""
    atomic_write_text(Path(path), json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def append_text(path: Path, text: str) -> None:
    """Append with a single ``write`` on an O_APPEND descriptor, then fsync.

    Appends (attempts.md, events.jsonl, timings) are not rewritten atomically, but one
    write(2) call on O_APPEND keeps concurrent appenders from interleaving mid-line.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


@contextlib.contextmanager
def workspace_lock(workspace: Path, *, timeout_s: float = 30.0) -> Iterator[None]:
    """Hold the exclusive lock on ``<workspace>/.helix/lock`` (flock; released on death).

    Waits up to ``timeout_s`` seconds, then raises WorkspaceBusy with a sentence that says
    what to do. ``timeout_s=0`` means try once.
    """
    helix_dir = Path(workspace) / HELIX_DIR
    helix_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(helix_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise WorkspaceBusy(
                        f"another helix command holds the lock on {helix_dir}; wait for it to "
                        "finish and run this command again"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def resolve_inside(workspace: Path, declared_in: Path, value: str) -> Path:
    """Resolve a path field the way the contract says, refusing anything outside the workspace.

    ``value`` is tried relative to ``declared_in`` (the folder of the file that declares it),
    then relative to the workspace. The first candidate that exists wins; if neither exists the
    first is returned (so callers can say "points to a missing file"). Absolute paths, and any
    candidate whose real path (symlinks followed) leaves the workspace, raise
    PathOutsideWorkspace.
    """
    if not isinstance(value, str) or not value.strip():
        raise ValueError("path is empty")
    raw = Path(value)
    if raw.is_absolute():
        raise PathOutsideWorkspace(f"{value!r} is an absolute path; use a path inside the workspace")
    root = Path(workspace).resolve()
    candidates = [Path(declared_in) / raw, Path(workspace) / raw]
    chosen: Path | None = None
    for cand in candidates:
        if cand.exists() or cand.is_symlink():
            chosen = cand
            break
    if chosen is None:
        chosen = candidates[0]
    try:
        real = chosen.resolve()
    except (RuntimeError, OSError) as exc:  # symlink loop (RuntimeError on 3.11), ELOOP
        raise PathOutsideWorkspace(f"{value!r} is a symlink loop; replace it with a real file") from exc
    if real != root and root not in real.parents:
        raise PathOutsideWorkspace(
            f"{value!r} resolves to {real}, outside the workspace {root}; keep artifacts inside it"
        )
    return chosen
