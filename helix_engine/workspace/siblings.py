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
