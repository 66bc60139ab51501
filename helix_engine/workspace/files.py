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
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helix_engine.diskfull import name_the_file

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
    import tempfile  # here: `helix status` reads this module's names and writes nothing through it

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        name_the_file(exc, path)
        raise
    try:
        # mkstemp makes 0600: keep the mode the file had, else the umask's (as open() would)
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):  # a full disk: say which file (os.write names none)
            name_the_file(exc, path)
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_append(path)
        try:
            os.write(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:  # a full disk: say which file (os.write names none)
        name_the_file(exc, path)
        raise


def _open_append(path: Path) -> int:
    """Open ``path`` for appending, refusing what a swapped-in file could turn it into.

    The open itself is the check (no check-then-open race): O_NOFOLLOW refuses a final
    symlink, O_NONBLOCK keeps a FIFO from blocking the writer (no reader: ENXIO), and the
    opened descriptor must be a regular file; O_NONBLOCK is then cleared for the write.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(exc.errno, f"{path} is a symbolic link; helix appends only to regular files "
                                     "- remove the link and run the command again") from None
        if exc.errno == errno.ENXIO:
            raise OSError(exc.errno, f"{path} is a FIFO (named pipe); helix appends only to regular files "
                                     "- remove it and run the command again") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "not a regular file"
        raise OSError(errno.EINVAL, f"{path} is {kind}; helix appends only to regular files "
                                    "- remove it and run the command again")
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


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


# ------------------------------------------------------------------------ crash leftovers

#: A temp file of `atomic_write_text` older than this cannot belong to a live writer (a write
#: takes milliseconds); younger ones may, since jobs write without the workspace lock.
TEMP_MAX_AGE_S = 600.0
#: Exactly what ``tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp")`` creates.
_TEMP_NAME = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp", re.DOTALL)
_ROUND_DIR = re.compile(r"opt-round-[1-9][0-9]*")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def is_temp_name(name: str) -> bool:
    """True for a name `atomic_write_text` gives its temp file (``.NAME.XXXXXXXX.tmp``)."""
    return _TEMP_NAME.fullmatch(name) is not None


def orphan_temps(workspace: Path, *, max_age_s: float = TEMP_MAX_AGE_S) -> list[Path]:
    """Temp files left by interrupted atomic writes (read-only; `helix status` reports them).

    Looks only in the contract's folders (the workspace, baseline/, opt-round-N/, .helix/,
    .helix/jobs/<id>/), opened without following a symlink, and lists only regular files whose
    name matches the temp pattern exactly and whose mtime is at least ``max_age_s`` old. In a load
    given the walk `helix status` made first, from that walk (reading.walked: it lstats every
    entry already; the folders opened and listed again were ~6 ms at 1000 rounds)."""
    from helix_engine.workspace.reading import walk_listing

    listing = walk_listing()
    top = os.fspath(workspace)
    if listing is not None and (top in listing[1] or (top == "." and "" in listing[1])):  # "." is "" there
        return _listed_temps(top, listing, max_age_s)
    return _orphan_temps(Path(workspace), max_age_s, remove=False)


#: The folders whose temp files are helix's (relative to the workspace, "" the workspace itself):
#: what `_temp_folders` opens.
CONTRACT_FOLDER = re.compile(r"|baseline|opt-round-[1-9][0-9]*|\.helix|\.helix/jobs/[^/]+")


def _listed_temps(top: str, listing: tuple[dict[str, tuple[int, int, int, int, int, int]], set[str], list[str]],
                  max_age_s: float) -> list[Path]:
    stats, _, temps = listing
    now = time.time()
    found: list[tuple[tuple[int, str, str], str]] = []
    for path in temps:
        folder, _, name = path.rpartition("/")
        if top == ".":  # the listing names ./x as x
            inside, rel = True, folder
        else:
            inside, rel = folder == top or folder.startswith(top + "/"), folder[len(top) + 1:] if folder != top else ""
        st = stats.get(path)
        if inside and CONTRACT_FOLDER.fullmatch(rel) and st is not None \
                and stat.S_ISREG(st[0]) and now - st[4] / 1e9 >= max_age_s:
            # `_temp_folders`' order: the workspace, its round folders and baseline, .helix, its jobs
            rank = 0 if not rel else 2 if rel == HELIX_DIR else 3 if rel.startswith(HELIX_DIR) else 1
            found.append(((rank, rel, name), path))
    return [Path(path) for _, path in sorted(found)]


def remove_orphan_temps(workspace: Path, *, max_age_s: float = TEMP_MAX_AGE_S) -> list[Path]:
    """Remove what `orphan_temps` lists and return the paths removed.

    Call it only while holding `workspace_lock` (the transitions do): the age guard protects the
    writers that do not take the lock. Removal is ``unlinkat`` in a folder opened without
    following symlinks, so a link named like a temp file is never followed, and nothing outside
    the workspace can be reached."""
    return _orphan_temps(Path(workspace), max_age_s, remove=True)


def _orphan_temps(workspace: Path, max_age_s: float, *, remove: bool) -> list[Path]:
    found: list[Path] = []
    try:
        root_fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return found
    try:
        now = time.time()
        for rel, fd in _temp_folders(root_fd):
            try:
                for name in sorted(_listdir(fd)):
                    if _TEMP_NAME.fullmatch(name) is None:
                        continue
                    try:
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < max_age_s:
                            continue
                        if remove:
                            os.unlink(name, dir_fd=fd)
                    except OSError:
                        continue
                    found.append(workspace.joinpath(*rel, name))
            finally:
                os.close(fd)
    finally:
        os.close(root_fd)
    return found


def _temp_folders(root_fd: int) -> Iterator[tuple[tuple[str, ...], int]]:
    """(relative parts, open fd) of each contract folder; the caller closes each fd."""
    yield (), os.dup(root_fd)
    names = _listdir(root_fd)
    for name in sorted(n for n in names if n == "baseline" or _ROUND_DIR.fullmatch(n)):
        fd = _open_dir(name, root_fd)
        if fd is not None:
            yield (name,), fd
    helix_fd = _open_dir(HELIX_DIR, root_fd)
    if helix_fd is None:
        return
    try:
        yield (HELIX_DIR,), os.dup(helix_fd)
        jobs_fd = _open_dir("jobs", helix_fd)
        if jobs_fd is None:
            return
        try:
            for name in sorted(_listdir(jobs_fd)):
                fd = _open_dir(name, jobs_fd)
                if fd is not None:
                    yield (HELIX_DIR, "jobs", name), fd
        finally:
            os.close(jobs_fd)
    finally:
        os.close(helix_fd)


def _open_dir(name: str, dir_fd: int) -> int | None:
    """A child folder opened without following a final symlink (None when it is not one)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None


def _listdir(fd: int) -> list[str]:
    try:
        return os.listdir(fd)
    except OSError:
        return []
