"""The Python files beside a round's operator that the gate's operator process receives.

An operator may ``import helper`` from its own folder, so the gate copies the folder's other
``*.py`` files into the process's private folder (gate/opclient.private_copy), the anti-cheat lint
reads each of them (state/anti_cheat.sibling_findings), and a run-test / run-bench records their
digests so that submit-round can tell a helper swapped after the run (state/seals). One rule for
all three, here: the regular, non-symlink ``*.py`` files of the folder but the operator, in name
order, each while it fits in what is left of ``MAX_SIBLING_BYTES``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

#: the sibling files copied with an operator, at most (an operator folder is small)
MAX_SIBLING_BYTES = 8 * 1024 * 1024


def sibling_files(operator: Path) -> list[Path]:
    """The files the gate's operator process receives beside ``operator`` (see the module)."""
    operator = Path(operator).resolve()
    found: list[Path] = []
    budget = MAX_SIBLING_BYTES
    try:
        candidates = sorted(operator.parent.glob("*.py"))
    except OSError:
        return found
    for src in candidates:
        try:
            if src == operator or src.is_symlink() or not src.is_file():
                continue
            size = src.stat().st_size
        except OSError:
            continue
        if size > budget:
            continue
        budget -= size
        found.append(src)
    return found


def sibling_digests(operator: Path) -> dict[str, str]:
    """name → sha256 of each of ``sibling_files(operator)`` as it is now (one unreadable: left out)."""
    digests: dict[str, str] = {}
    for path in sibling_files(operator):
        try:
            digests[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            continue
    return digests


#: What a round folder holds that is written after its runs, and read by no operator: its perf file
#: and paired sidecar (sealed on their own), round-state.json, result archives, and the notes
#: (summary.md, attempts.md); and the folders of helix's profiles and IR captures, and Python's caches.
_AFTER_THE_RUN = (".md", "_perf.txt", ".paired.json", "round-state.json", "_result.pt")
_OUTPUT_FOLDERS = frozenset({"profile", "ir", "__pycache__"})
#: Files hashed in full up to this size; a larger one is known by its size (a data file an operator
#: reads, e.g. a table of tile sizes, is small)
MAX_HASHED_BYTES = 16 * 1024 * 1024
MAX_ROUND_FILES = 500


def round_digests(operator: Path) -> dict[str, str]:
    """relative path → sha256 (``size:N`` above MAX_HASHED_BYTES) of every regular file under the
    operator's folder but the operator and what ``_AFTER_THE_RUN`` names: what the operator can
    import or read at import (a helper, a config it execs, a package folder), so that a run's
    evidence is void once one of them changed (state/seals.py). Symlinks and dot folders are
    skipped; at most MAX_ROUND_FILES files."""
    operator = Path(operator).resolve()
    root = operator.parent
    found: dict[str, str] = {}
    try:
        paths = sorted(p for p in root.rglob("*") if not any(part.startswith(".") for part in p.relative_to(root).parts)
                       and p.relative_to(root).parts[0] not in _OUTPUT_FOLDERS)
    except OSError:
        return found
    for path in paths:
        if len(found) >= MAX_ROUND_FILES:
            break
        try:
            if path == operator or path.is_symlink() or not path.is_file() or path.name.endswith(_AFTER_THE_RUN):
                continue
            size = path.stat().st_size
            found[path.relative_to(root).as_posix()] = (hashlib.sha256(path.read_bytes()).hexdigest()
                                                        if size <= MAX_HASHED_BYTES else f"size:{size}")
        except OSError:
            continue
    return found
