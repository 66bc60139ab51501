"""The one safe reader for workspace files, and checked reads of the small JSON files.

Why (DESIGN.md principle 8): workspace content is untrusted. A FIFO where a file should be
blocks a plain read forever, a character device is read until memory runs out, and a path
checked with ``exists()`` and then read can be swapped for a symlink in between. So a read
opens the path once, without following a final symlink and without blocking, then checks the
*opened* descriptor: a regular file, inside the workspace (the kernel's name for the open
file, not the path we asked for), under a byte cap. Every way that fails becomes a Problem
(file, line where known, a sentence saying what to do); nothing here raises on file content.
Streaming readers (job events, profiler CSVs, log tails) get the same checks through
`open_workspace_file`.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import io
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from helix_engine.sanitize import clean_name
from helix_engine.workspace.files import MAX_TEXT_BYTES
from helix_engine.workspace.json_text import parse_json
from helix_engine.workspace.problem import Problem

if TYPE_CHECKING:
    from helix_engine.workspace.models import PerfRecord

#: JSON state files are a few hundred bytes; anything over this is not a state file.
MAX_JSON_BYTES = 1024 * 1024

M = TypeVar("M")

#: Read-only, never block (a FIFO opens at once), never become our controlling terminal.
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CHUNK = 1 << 20
_LINK_ADVICE = "helix does not follow links in a workspace; replace it with the file"


_SESSION = threading.local()  # .roots: workspace abspath -> realpath, .folders: folder -> realpath (per thread)


@contextlib.contextmanager
def load_session() -> Iterator[None]:
    """Resolve each workspace root, and each folder a declared path names, once for the duration
    of one load or reload (hot path: every declared path and every read checks it stays inside
    the workspace)."""
    outer = getattr(_SESSION, "roots", None)
    outer_folders = getattr(_SESSION, "folders", None)
    _SESSION.roots = {} if outer is None else outer
    _SESSION.folders = {} if outer_folders is None else outer_folders
    try:
        yield
    finally:
        _SESSION.roots = outer
        _SESSION.folders = outer_folders


_WALK = threading.local()  # .listing: a walk's (entries, folders listed whole, temp names), per thread
#: What `seen` gives of an entry: (st_mode, st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns) of its
#: own lstat.
Seen = tuple[int, int, int, int, int, int]


@contextlib.contextmanager
def walked(listing: tuple[dict[str, Seen], set[str], list[str]] | None) -> Iterator[None]:
    """Answer `seen` from ``listing``, what a walk of the workspace saw just before (`helix status`
    walks it to vouch for its stored output: status_cache.Listing), for the duration of one load.
    Why: a load looks at ~9 names a round (is it there, a link, a regular file, its identity);
    at 1000 rounds those 9000 lstats were ~15 ms of a computed status, and the walk had just made
    them. The identities are the walk's, taken before any file is read, as a load takes its own."""
    outer = getattr(_WALK, "listing", None)
    _WALK.listing = listing
    try:
        yield
    finally:
        _WALK.listing = outer


def walk_listing() -> tuple[dict[str, Seen], set[str], list[str]] | None:
    """The listing this thread's load was given (`walked`), if any."""
    found: tuple[dict[str, Seen], set[str], list[str]] | None = getattr(_WALK, "listing", None)
    return found


def seen(path: str) -> Seen:
    """``(st_mode, st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` of ``os.lstat(path)``, from the walk this
    thread's load was given when it saw ``path`` or the whole folder it is in (`walked`); raises
    OSError as os.lstat does. Six numbers, not a stat result: a walk keeps one per entry (a stat
    result with its ~15 objects was ~4.5 MiB at 1000 rounds)."""
    listing = getattr(_WALK, "listing", None)
    if listing is not None:
        if "/.." in path:  # a round's ../baseline/...: the same name, once the walk shows each ".." is safe
            path = _collapsed(path, listing[1]) or path
        found = listing[0].get(path)
        if found is not None:
            return found
        if os.path.dirname(path) in listing[1]:
            raise FileNotFoundError(2, "No such file or directory", path)
    st = os.lstat(path)
    return (st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _collapsed(path: str, folders: set[str]) -> str | None:
    """``path`` with each ``name/..`` removed where ``name`` is a folder the walk listed (a real
    folder, never a link: then ``..`` leads where the text says); None when one is not."""
    at = path.find("/../")
    if at > 0 and "/.." not in path[at + 3:] and "/./" not in path and path[:at] in folders:
        head, _, last = path[:at].rpartition("/")  # the usual opt-round-N/../baseline/x: one step up
        if last not in ("", ".", ".."):
            return f"{head}/{path[at + 4:]}" if head else path[at + 4:]
    out: list[str] = []
    for part in path.split("/"):
        if part == "..":  # stepping out of a listed folder by name (not out of "." or "..")
            if not out or out[-1] in ("", ".", "..") or "/".join(out) not in folders:
                return None
            out.pop()
        elif part != "." or not out:
            out.append(part)
    return "/".join(out)


def real_path(path: str) -> tuple[str, bool]:
    """``os.path.realpath(path)`` (not strict), through the load session's folder cache, and
    whether it may end on a link (then a caller that must see a loop resolves it itself)."""
    return _realpath(path)


def _realpath(path: str) -> tuple[str, bool]:
    """``os.path.realpath(path)`` and whether it may end on a link (a loop). In a load session the
    folder is resolved once (a thousand rounds' files share a few hundred folders) and only the
    last name is looked at: realpath(folder/name) is realpath(folder)/name unless name is a link."""
    folders: dict[str, str] | None = getattr(_SESSION, "folders", None)
    folder, name = os.path.split(path)
    if folders is None or not os.path.isabs(path) or name in ("", ".", ".."):
        real = os.path.realpath(path, strict=False)
        return real, True
    real_folder = _real_folder(folder, folders)
    full = os.path.join(real_folder, name)
    try:
        is_link = stat.S_ISLNK(seen(full)[0])
    except OSError:
        return full, False  # missing (or unreadable): realpath keeps the name as it is
    if is_link:
        return os.path.realpath(path, strict=False), True
    return full, False


def _real_folder(folder: str, folders: dict[str, str], depth: int = 0) -> str:
    """``os.path.realpath(folder)`` from the resolved folder above it: one lstat for the last name
    (a round's ``opt-round-N/../baseline`` costs a look at opt-round-N, not a walk from /)."""
    found = folders.get(folder)
    if found is not None:
        return found
    parent, name = os.path.split(folder)
    if depth > 64 or not parent or parent == folder or not name:
        real = os.path.realpath(folder, strict=False)
    else:
        real_parent = _real_folder(parent, folders, depth + 1)
        if name == ".":
            real = real_parent
        elif name == "..":
            real = os.path.dirname(real_parent)  # realpath(X/..) is the folder above realpath(X)
        else:
            real = os.path.join(real_parent, name)
            try:
                if stat.S_ISLNK(os.lstat(real).st_mode):
                    real = os.path.realpath(folder, strict=False)
            except OSError:
                pass  # missing: realpath keeps the name as it is
    folders[folder] = real
    return real


def root_real(workspace: Path) -> str:
    key = os.path.abspath(workspace)
    roots: dict[str, str] | None = getattr(_SESSION, "roots", None)
    if roots is None:
        return os.path.realpath(key)
    found = roots.get(key)
    if found is None:
        found = roots[key] = os.path.realpath(key)
    return found


def _under(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def inside(path: Path, workspace: Path) -> bool:
    """True when ``path`` (symlinks followed) lies inside ``workspace``; raises on symlink loops
    like ``Path.resolve`` does (callers turn that into a Problem). A check on a *name*, for
    declared paths; reads check the opened file instead."""
    real, maybe_link = _realpath(os.fspath(path))
    if maybe_link and os.path.islink(real):  # realpath stops on a link only when the links loop
        raise OSError(f"symlink loop at {clean_name(real)}")
    return _under(real, root_real(workspace))


def shown(path: Path, workspace: Path | None) -> str:
    """``path`` relative to the workspace when it lies inside it, escaped for display (a file
    name can hold undecodable bytes or control characters)."""
    if workspace is not None:  # the usual case, a path made from the workspace's: no abspath (a load asks ~2000)
        text, top = os.fspath(path), os.fspath(workspace)
        rest = text[len(top) + 1:]
        if text.startswith(top) and text[len(top):len(top) + 1] == os.sep and top not in ("", ".", os.sep) \
                and not top.endswith(os.sep + "..") and top != ".." and _normal(rest):
            return clean_name(rest)
    full = os.path.abspath(path)
    if workspace is not None:
        root = os.path.abspath(workspace).rstrip(os.sep)
        if full.startswith(root + os.sep):
            return clean_name(full[len(root) + 1:])
    return clean_name(path)


def _normal(rest: str) -> bool:
    """Whether ``rest`` is a relative path abspath would leave as it is (no ``.``/``..`` names, no
    empty ones)."""
    return bool(rest) and not rest.startswith(os.sep) and not rest.endswith(os.sep) and (os.sep * 2) not in rest \
        and all(part not in (".", "..") for part in rest.split(os.sep))


def owning_workspace(path: Path) -> Path:
    """The workspace of a file in ``W/``, or anywhere under ``W/baseline/`` or ``W/opt-round-N/``
    (profiles and IR dumps nest deeper), found by name with no link followed; else the file's
    folder. For readers handed only a file path (lints, checks, the IR and profile readers)."""
    from helix_engine.workspace import layout

    folder = Path(os.path.abspath(path)).parent
    for above in (folder, *folder.parents):
        if above.name == layout.BASELINE_DIR or layout.round_number(above.name) is not None:
            return above.parent
    return folder


# ------------------------------------------------------------------------ the safe reader


class UnreadableFile(OSError):
    """The safe reader refused or could not read a file; ``problem`` says why and what to do."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def file_kind(mode: int) -> str:
    """What a non-regular file is, for a sentence: "a FIFO (named pipe)", "a folder" …"""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _not_regular(name: str, mode: int) -> Problem:
    return Problem(name, f"is {file_kind(mode)}, not a regular file, so it was not read; helix reads only "
                   "regular files in a workspace (replace it with the file)")


def _is_loop(path: str) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def link_problem(path: Path, workspace: Path) -> Problem | None:
    """A Problem when a folder or file on the way from ``workspace`` to ``path`` is a symbolic
    link that loops or leads outside the workspace (named as that component); else None.

    Why: O_NOFOLLOW guards only the last name, and a read that fails under a folder linked to
    /etc should say so, not that a file "is missing". Best effort: the tree can change while it
    is looked at (None then, and the caller's own sentence stands)."""
    try:
        return _link_problem(path, workspace)
    except (OSError, RuntimeError, ValueError):
        return None


def _link_problem(path: Path, workspace: Path) -> Problem | None:
    root_abs = os.path.abspath(workspace).rstrip(os.sep)
    full = os.path.abspath(path)
    if not full.startswith(root_abs + os.sep):
        return None
    root = root_real(workspace)
    current = root_abs
    for part in full[len(root_abs) + 1:].split(os.sep):
        current = os.path.join(current, part)
        if not os.path.islink(current):
            if not os.path.lexists(current):
                return None
            continue
        name = shown(Path(current), workspace)
        if _is_loop(current):
            return Problem(name, "is a symlink loop, so it was not read; replace it with the real "
                           "file or folder")
        target = os.path.realpath(current)
        if not _under(target, root):
            return Problem(name, f"is linked outside the workspace (to {clean_name(target)}); it was not "
                           "read. Copy what it should hold into the workspace instead")
    return None


def _open_problem(path: Path, workspace: Path | None, exc: OSError) -> Problem:
    """The sentence for an ``open`` that failed."""
    name = shown(path, workspace)
    if workspace is not None:
        linked = link_problem(path, workspace)
        if linked is not None:
            return linked
    code = exc.errno
    if code == errno.ELOOP:
        with contextlib.suppress(OSError, RuntimeError, ValueError):  # the link may be gone by now
            if os.path.islink(path):
                if _is_loop(str(path)):
                    return Problem(name, "is a symlink loop, so it was not read; replace it with the file")
                target = os.path.realpath(path)
                if workspace is not None and not _under(target, root_real(workspace)):
                    return Problem(name, f"is a symbolic link to {clean_name(target)}, outside the workspace; "
                                   f"it was not read ({_LINK_ADVICE})")
                return Problem(name, f"is a symbolic link, so it was not read ({_LINK_ADVICE})")
    if code == errno.ENOENT:
        return Problem(name, "is missing")
    if code == errno.ENOTDIR:
        return Problem(name, "cannot be read: a folder on its path is a file; fix the path")
    if code == errno.ENXIO:  # open(2) on a UNIX socket
        with contextlib.suppress(OSError):
            return _not_regular(name, os.lstat(path).st_mode)
    return Problem(name, f"cannot be read ({exc.strerror or exc}); make it a readable regular file")


def _opened_inside(fd: int, st: os.stat_result, path: Path, workspace: Path) -> bool:
    """Containment of the *opened* file: the kernel's path for the descriptor (Linux), else the
    realpath of the name when it is the same inode as the descriptor (a swap in between fails)."""
    root = root_real(workspace)
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = None
    if real is not None and real.startswith(os.sep):
        return _under(real.removesuffix(" (deleted)"), root)
    try:
        real = os.path.realpath(path, strict=True)
        named = os.stat(real)
    except (OSError, RuntimeError):
        return False
    return _under(real, root) and (named.st_dev, named.st_ino) == (st.st_dev, st.st_ino)


def open_checked_fd(path: Path, workspace: Path | None) -> tuple[int, os.stat_result]:
    """Open ``path`` for reading the safe way and return (descriptor, its fstat).

    ``workspace`` None means a path the user named on the command line: its final symlink is
    followed and containment is not checked, but it must still be a regular file. Raises
    UnreadableFile (with the Problem) for everything else; the caller closes the descriptor."""
    path = Path(path)
    flags = _FLAGS | (_NOFOLLOW if workspace is not None else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UnreadableFile(_open_problem(path, workspace, exc)) from None
    except ValueError as exc:  # an embedded NUL in the name
        raise UnreadableFile(Problem(shown(path, workspace), f"cannot be opened ({exc})")) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(_not_regular(shown(path, workspace), st.st_mode))
        if workspace is not None and not _opened_inside(fd, st, path, workspace):
            problem = link_problem(path, workspace) or Problem(
                shown(path, workspace), "resolves outside the workspace (through a symbolic link); it was not "
                "read. Copy the file into the workspace instead")
            raise UnreadableFile(problem)
        with contextlib.suppress(OSError):  # reads of a regular file never block; keep them plain
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _over(name: str, size: int, cap: int) -> Problem:
    return Problem(name, f"is {size / 1e6:.1f} MB, over the {cap / 1e6:.0f} MB limit helix reads; trim it "
                   "or move old content elsewhere")


def read_bytes_safe(path: Path, workspace: Path | None, *,
                    max_bytes: int = MAX_TEXT_BYTES) -> tuple[bytes | None, Problem | None]:
    """The bytes of a workspace file (at most ``max_bytes``), or (None, Problem). Never raises."""
    try:
        fd, st = open_checked_fd(path, workspace)
    except UnreadableFile as exc:
        return None, exc.problem
    name = shown(path, workspace)
    try:
        if st.st_size > max_bytes:
            return None, _over(name, st.st_size, max_bytes)
        chunks: list[bytes] = []
        total = 0
        step = max(_CHUNK, st.st_size + 1)  # the whole file in one read, then one that finds its end
        while total <= max_bytes:  # read at most cap + 1 bytes, whatever the size said
            chunk = os.read(fd, min(step, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            step = _CHUNK
    except OSError as exc:
        return None, Problem(name, f"cannot be read ({exc.strerror or exc}); make it a readable regular file")
    finally:
        os.close(fd)
    if total > max_bytes:
        return None, _over(name, total, max_bytes)
    return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), None  # one read: no copy (a 3 MB cache)


def decode_text(data: bytes, name: str) -> tuple[str | None, Problem | None]:
    """UTF-8 text (a leading byte-order mark dropped), or a Problem for binary or undecodable data."""
    if b"\x00" in data:
        return None, Problem(name, "is binary (contains NUL bytes), expected text")
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return None, Problem(name, "is not valid UTF-8 text", line)


def read_text_safe(path: Path, workspace: Path | None, *,
                   max_bytes: int = MAX_TEXT_BYTES) -> tuple[str | None, Problem | None]:
    """A workspace text file through the safe reader: (text, None) or (None, Problem)."""
    data, problem = read_bytes_safe(path, workspace, max_bytes=max_bytes)
    if problem is not None:
        return None, problem
    return decode_text(data or b"", shown(path, workspace))


def open_workspace_file(path: Path, workspace: Path | None) -> io.BufferedReader:
    """A binary file object on a checked descriptor, for streaming readers (job events paged
    by offset, big profiler CSVs, log tails); wrap it in ``io.TextIOWrapper`` for text.
    Raises UnreadableFile; the caller caps what it reads."""
    fd, _ = open_checked_fd(path, workspace)
    try:
        return io.open(fd, "rb", closefd=True)  # noqa: UP020 - io.open on a descriptor, by intent
    except BaseException:
        os.close(fd)
        raise


def read_perf_safe(path: Path, workspace: Path) -> tuple[list[PerfRecord], list[Problem]]:
    """Read a perf file (``perf.artifact.parse_perf_text``); never raises."""
    from helix_engine.perf.artifact import parse_perf_text

    text, problem = read_text_safe(path, workspace)
    if problem is not None:
        return [], [problem]
    return parse_perf_text(text or "", shown(path, workspace))


def read_json_object(path: Path, workspace: Path | None, *, what: str, fix: str,
                     max_bytes: int = MAX_JSON_BYTES) -> tuple[dict[str, Any] | None, list[Problem]]:
    """Read a JSON object file. ``what`` names it in messages; ``fix`` says how to repair it."""
    text, problem = read_text_safe(path, workspace, max_bytes=max_bytes)
    if problem is not None:
        return None, [Problem(problem.file, f"{problem.message} ({what}); {fix}", problem.line, problem.severity)]
    assert text is not None
    name = shown(path, workspace)
    if not text.strip():
        return None, [Problem(name, f"is empty, expected {what}; {fix}")]
    data, problem = parse_json(text, name, fix)
    if problem is not None:
        return None, [problem]
    if not isinstance(data, dict):
        return None, [Problem(name, f"holds a JSON {type(data).__name__}, expected an object ({what}); {fix}")]
    return data, []


def describe_validation(exc: Any, limit: int = 3) -> str:
    """The first few field errors of a validation error (filemodel's or pydantic's: both list
    ``errors()`` with loc, msg and type), as one readable clause."""
    parts: list[str] = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if err.get("type") == "missing":
            parts.append(f"{loc} is missing")
        elif loc:
            parts.append(f"{loc}: {msg}")
        else:
            parts.append(msg)
    extra = exc.error_count() - limit
    if extra > 0:
        parts.append(f"and {extra} more")
    return "; ".join(parts)


def load_model(path: Path, workspace: Path, model: type[M], *, what: str,
               fix: str) -> tuple[M | None, dict[str, Any] | None, list[Problem]]:
    """Read ``path`` and validate it as ``model`` (a filemodel or pydantic model class): (model or
    None, raw dict or None, problems)."""
    data, problems = read_json_object(path, workspace, what=what, fix=fix)
    if data is None:
        return None, None, problems
    try:
        return model.model_validate(data), data, []  # type: ignore[attr-defined]  # either kind of model
    except ValueError as exc:
        if callable(getattr(exc, "errors", None)):  # a validation error (both kinds are ValueErrors)
            message = f"is not a valid {what} ({describe_validation(exc)}); {fix}"
            return None, data, [Problem(shown(path, workspace), message)]
        return None, data, [Problem(shown(path, workspace), f"is not a valid {what} ({exc}); {fix}")]
    except (TypeError, RecursionError) as exc:  # odd nested values
        return None, data, [Problem(shown(path, workspace), f"is not a valid {what} ({exc}); {fix}")]


def exists_file(path: Path) -> bool:
    """``is_file`` that never raises (permission errors, over-long names …)."""
    try:
        return path.is_file()
    except OSError:
        return False


def exists_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def list_dir(path: Path, *, suffix: str = "") -> list[Path]:
    """Sorted entries of a folder (those whose name ends with ``suffix``), or [] when it cannot
    be listed. Names are filtered and sorted before any path is built: a workspace's top folder
    holds a folder per round."""
    try:
        names = sorted(name for name in os.listdir(path) if name.endswith(suffix))
    except (OSError, ValueError):
        return []
    return [path / name for name in names]
