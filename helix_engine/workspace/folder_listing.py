"""The workspace folder's listing, kept between reloads while the folder is unchanged: a
1000-round workspace lists ~1000 round folders, ~3 ms on every reload (issue 12). Adding, removing
or renaming an entry changes the folder's mtime; a change within ``RECENT_S`` of the last one may
share its timestamp tick, so a folder that recent is listed every time."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix_engine.workspace import layout
from helix_engine.workspace.problem import Problem
from helix_engine.workspace.status_cache import RECENT_S


@dataclass(frozen=True)
class Listing:
    """What ``_load_layout`` took from one listing of the workspace folder, with the folder's
    identity then: a reload whose folder has the same identity has the same entries (adding,
    removing or renaming one changes the folder's mtime), so it does not list ~1000 round folders
    again (~3 ms at 1000 rounds, every reload). The top-level files are kept as entries not yet
    asked for their type, so the operator's is checked anew each time."""

    identity: tuple[int, int, int, int]  # st_dev, st_ino, st_mtime_ns, st_ctime_ns of the folder
    files: list[Any]  # the top-level entries that are not round folders (layout.discover_operator)
    dirs: dict[int, Path]
    dir_problems: list[Problem]
    perf_names: list[str]


class _Names:
    """A top-level entry by name for ``layout.discover_operator``: its type asked of the file
    system each time (a DirEntry keeps the answer of its first ask)."""

    __slots__ = ("name", "_path")

    def __init__(self, root: Path, name: str) -> None:
        self.name, self._path = name, os.path.join(root, name)

    def is_file(self) -> bool:
        return os.path.isfile(self._path)


def _folder_identity(root: Path) -> tuple[int, int, int, int] | None:
    """The workspace folder's identity, or None when a listing now may not show a change made in
    the same timestamp tick as the folder's last one (it changed in the last RECENT_S seconds)."""
    try:
        st = os.stat(root)
    except OSError:
        return None
    if max(st.st_mtime_ns, st.st_ctime_ns) > time.time_ns() - int(RECENT_S * 1e9):
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def kept(root: Path, found: Any) -> Listing | None:
    """``found`` (the last listing kept for ``root``) when the folder still has its identity."""
    if not isinstance(found, Listing):
        return None
    identity = _folder_identity(root)
    return found if identity is not None and identity == found.identity else None


def keep(root: Path, entries: list[os.DirEntry[str]] | None, dirs: dict[int, Path], dir_problems: list[Problem],
         perf_names: list[str] | None) -> Listing | None:
    """What to keep of a listing just made, or None when it cannot be kept: the folder changed in
    the last RECENT_S seconds, it could not be listed, or a round entry is a link (its target can
    change, or go, with the folder's identity as it was: such a listing is made every time)."""
    identity = _folder_identity(root)  # after the listing: a change during it is seen as a change
    if entries is None or perf_names is None or identity is None \
            or any(e.name.startswith(layout.ROUND_PREFIX) and e.is_symlink() for e in entries):
        return None
    files = [_Names(root, e.name) for e in entries if not e.name.startswith(layout.ROUND_PREFIX)]
    return Listing(identity, files, dict(dirs), list(dir_problems), perf_names)
