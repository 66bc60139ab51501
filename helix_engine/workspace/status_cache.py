"""`helix status --json` of a workspace that has not changed since the last run, printed from the
output that run stored (issue 12, goal 1).

Why: the JSON of one workspace is a pure function of its files, of helix's code and of the
command's options, yet every run imported the models and read every round's state file again
(0.5 s and 50 MiB at 1000 rounds with the per-round summaries, ~0.1 s of it imports). A walk of
the workspace (one lstat an entry) tells whether anything changed: the run that computes the
output stores it in ``.helix/cache/status.sealed`` under a digest of that walk, and a later run
whose walk gives the same digest prints it without loading the workspace.

The digest covers the identity (type, inode, size, mtime, ctime; folders by type and inode, their
entries being listed) of every entry of the workspace, recursively, except ``.helix/cache/``
(caches never change an output); the identity of helix_engine's modules and the Python version;
the path and options as given and the working folder. The walk is taken before the status is
computed, so a file written meanwhile makes the next run miss. Conservative by design: a symbolic
link anywhere in the workspace, the temp file of an interrupted write (status reports it only
once it is old enough: the output depends on the clock), a file changed in the last
``RECENT_S`` seconds (a second write in the same timestamp tick would look unchanged), or more
entries than the walk allows, and nothing is stored or printed from the store.

The file is workspace data: read through the safe reader and sealed under this user's key
(workspace/sealed.py), so a crafted one never prints; one whose seal does not verify, a header that
does not parse, another digest, a length that differs or a control character the JSON encoder
never writes (anything but the newline) is a miss, and the status is computed as if there were no
file.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import operator
import os
import re
import stat
import time
from pathlib import Path
from typing import Any, NamedTuple

CACHE_NAME = "status.sealed"  # in .helix/cache/
VERSION = 2  # 2: the walk's entries as tuples, serialized by marshal
#: Entries changed this recently are not trusted to show a later change (timestamp granularity).
RECENT_S = 3.0
#: The walk gives up (no stored output) past this many entries: a few per round folder is usual,
#: a virtual environment or a profiler tree inside the workspace is not worth walking every run.
WALK_BASE, WALK_PER_TOP_ENTRY = 512, 48
_MAX_BYTES = 256 * 1024 * 1024
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")  # what json.dumps never leaves unescaped (but \n)


class _NotStorable(Exception):
    """The workspace holds something whose effect on the output a walk cannot vouch for."""


#: What a whole walk saw: every entry's lstat by its path (the workspace path as given, joined
#: with the names, as the load names them), the folders it listed whole (a name missing from one
#: of them did not exist), and the paths named like an interrupted write's temp file.
Listing = tuple[dict[str, tuple[int, int, int, int, int, int]], set[str], list[str]]  # reading.Seen by path


class Fingerprint(NamedTuple):  # not a dataclass: `dataclasses` (and `inspect`) are 7 ms of a 55 ms run
    """A workspace walked for one invocation: ``digest`` None when it cannot be stored;
    ``listing`` None when the walk did not finish (the load then looks at every file itself)."""

    workspace: Path
    digest: str | None
    listing: Listing | None = None


def _code() -> str:
    """helix_engine's modules and the Python version (code_identity.package_identity)."""
    from helix_engine.code_identity import package_identity

    return f"status-cache {VERSION} {package_identity()}"


def fingerprint(path: Path, options: tuple[str, ...]) -> Fingerprint:
    """Walk the workspace at ``path`` for an invocation with ``options`` (view, metric …)."""
    workspace = Path(path)
    walk = _Walk()
    try:
        digest: str | None = _digest(workspace, options, walk)
    except (_NotStorable, OSError, ValueError, RecursionError):
        return Fingerprint(workspace, None)
    return Fingerprint(workspace, None if walk.why else digest, (walk.stats, walk.folders, walk.temps))


class _Walk:
    """One walk's state: the digest's lines, the listing, and why its output cannot be stored."""

    __slots__ = ("lines", "stats", "folders", "temps", "recent", "budget", "why")

    def __init__(self) -> None:
        self.lines: list[tuple[Any, ...]] = []  # what the digest is of
        self.stats: dict[str, tuple[int, int, int, int, int, int]] = {}  # reading.Seen by path
        self.folders: set[str] = set()
        self.temps: list[str] = []
        self.recent = 0
        self.budget = 0
        self.why: str | None = None


def _digest(workspace: Path, options: tuple[str, ...], walk: _Walk) -> str:
    top = os.fspath(workspace)
    st = os.lstat(top)
    if not stat.S_ISDIR(st.st_mode):  # a link to a workspace, or no folder at all
        raise _NotStorable(top)
    # the environment helix reads (HELIX_OPTIMIZE_MIN_SPEEDUP changes status's Next, NO_COLOR its text)
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(("HELIX_", "NO_COLOR")))
    walk.lines = [(_code(), repr((top, os.getcwd(), os.path.realpath(top), *options)), repr(env),
                   st.st_ino, st.st_dev)]
    walk.recent = time.time_ns() - int(RECENT_S * 1e9)
    with os.scandir(top) as found:
        entries = sorted(found, key=_NAME)
    walk.budget = WALK_BASE + WALK_PER_TOP_ENTRY * len(entries)
    if top == ".":  # the load names ./x as x (pathlib's Path(".") / "x"): so does the listing
        walk.folders.add("")
    _entries(entries, top, "", walk, 2 if top == "." else 0)
    # one tuple an entry, serialized in C (an f-string an entry was a third of a 1000-round walk)
    return hashlib.sha256(marshal.dumps(walk.lines, 2)).hexdigest()  # version 2: no refs (no identity in it)


_NAME = operator.attrgetter("name")


def _entries(entries: list[os.DirEntry[str]], folder: str, rel: str, walk: _Walk, cut: int) -> None:
    """Walk one listed folder. What makes the output unstorable (a link, a temp file, a name with
    a newline, a file changed just now) is noted and the walk goes on, so the listing stays whole
    for the load. ``cut``: how much of each path to drop for the load's name of it (``./``)."""
    from helix_engine.workspace.files import is_temp_name

    walk.budget -= len(entries)
    if walk.budget < 0:
        raise _NotStorable("too many entries")
    walk.folders.add(folder[cut:] if cut else folder)
    stats, lines, recent = walk.stats, walk.lines, walk.recent
    is_link, is_dir = stat.S_ISLNK, stat.S_ISDIR
    for entry in entries:
        name = entry.name
        path = entry.path
        key = path[cut:] if cut else path
        st = entry.stat(follow_symlinks=False)
        mode = st.st_mode
        stats[key] = (mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)  # (the stat result: 3x)
        temp = name[:1] == "." and is_temp_name(name)  # every temp name starts with a dot
        if temp:
            walk.temps.append(key)
        if temp or is_link(mode) or "\n" in name:
            walk.why = walk.why or rel + name
            if temp or is_link(mode):
                continue  # a link is never walked into; a name with a newline is, for what it holds
        if is_dir(mode):
            if rel == ".helix/" and name == "cache":
                continue
            lines.append((rel + name, mode, st.st_ino))
            with os.scandir(path) as found:
                inner = sorted(found, key=_NAME)
            _entries(inner, path, f"{rel}{name}/", walk, cut)
            continue
        if st.st_mtime_ns >= recent or st.st_ctime_ns >= recent:
            walk.why = walk.why or rel + name
        lines.append((rel + name, mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))


def stored(found: Fingerprint) -> str | None:
    """The output stored for ``found``'s digest, or None (no file, not sealed by this user's helix,
    another digest, anything odd)."""
    if found.digest is None:
        return None
    from helix_engine.workspace import sealed

    data = sealed.read_bytes(found.workspace, CACHE_NAME, max_bytes=_MAX_BYTES)
    payload = sealed.unseal_bytes(data, CACHE_NAME) if data else None
    if payload is None:
        return None
    try:
        text = str(payload, "utf-8")
    except UnicodeDecodeError:
        return None
    header, sep, body = text.partition("\n")
    try:
        meta = json.loads(header)
    except (ValueError, RecursionError):
        return None
    if not (sep and isinstance(meta, dict) and meta.get("version") == VERSION and meta.get("digest") == found.digest
            and meta.get("chars") == len(body)):
        return None
    if not (body.startswith("{") and body.endswith("}\n")) or _CONTROL.search(body) is not None:
        return None
    return body


def store(found: Fingerprint, pieces: list[str]) -> None:
    """Keep the output (``pieces``, as they were printed) for the next run with the same digest,
    sealed. Never raises: the store only saves time."""
    if found.digest is None:
        return
    from helix_engine.workspace import sealed

    header = json.dumps({"version": VERSION, "digest": found.digest, "chars": sum(map(len, pieces))})
    try:
        sealed.write_sealed_pieces(found.workspace, CACHE_NAME,
                                   (piece.encode() for piece in [header + "\n", *pieces]))
    except (OSError, ValueError, UnicodeError):
        pass
