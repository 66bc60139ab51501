"""The round's candidate operator and its parent, as start-round sets them up.

start-round records the parent the round builds on (in ``.helix/state.json``, beside the strategy
state) and copies the parent's operator to ``opt-round-N/opt_<op>.py``, so the person or agent
edits a file that exists and every view knows the round's parent before round-state.json does.
An existing candidate is never overwritten; a linked round folder is never written through.
"""

from __future__ import annotations

import os
from pathlib import Path

from helix_engine.state import checks
from helix_engine.workspace import files, layout
from helix_engine.workspace.reading import read_text_safe, shown


def default_parent(workspace: Path, n: int) -> str:
    """The promotion rule's current best among the other rounds, else ``baseline`` (what
    `helix round-state` assumes too)."""
    from helix_engine.state import measure

    best = measure.promoted_best(Path(workspace), exclude={n})
    return layout.round_dir_name(best.round) if best is not None else layout.BASELINE_DIR


def choose_parent(workspace: Path, n: int, parent: str | None) -> str:
    """``parent`` checked as submit-round will check it (baseline, or an earlier completed
    round), normalized to ``baseline`` / ``opt-round-M``; the default when not given."""
    if parent is None or not parent.strip():
        return default_parent(workspace, n)
    number = checks.parent_number(parent)
    if number is None:
        raise ValueError(f"parent_round {parent!r} names no round: use baseline or opt-round-M (an earlier "
                         "completed round)")
    if number == 0:
        return layout.BASELINE_DIR
    if number >= n:
        raise ValueError(f"parent_round {parent} must be an earlier round than opt-round-{n}")
    if not checks.is_completed(Path(workspace) / layout.round_dir_name(number)):
        raise ValueError(f"parent_round {parent} is not a completed round (terminal with correctness and "
                         "benchmark passed); branch from baseline or from a completed round")
    return layout.round_dir_name(number)


def candidate_name(workspace: Path) -> str:
    """``opt_<op>.py`` for the workspace's operator (``opt_<operator>.py`` when there is none)."""
    return checks.expected_names(Path(workspace))[0]


def existing_candidate(workspace: Path, n: int) -> Path | None:
    """The round's operator file when it has one (the expected name, or a legacy one)."""
    op_name, _, legacy = checks.expected_names(Path(workspace))
    return checks.resolve_round_operator(Path(workspace) / layout.round_dir_name(n), op_name, legacy)


def create_candidate(workspace: Path, n: int, parent: str) -> tuple[Path | None, bool, str | None]:
    """Copy ``parent``'s operator to ``opt-round-N/opt_<op>.py`` unless the round has an operator.

    Returns (the round's operator path, whether it was created now, a sentence when it could not
    be created). Raises OSError only for a failed write (the caller turns it into a warning)."""
    workspace = Path(workspace)
    folder = workspace / layout.round_dir_name(n)
    found = existing_candidate(workspace, n)
    if found is not None:
        return found, False, None
    name = candidate_name(workspace)
    if "<" in name:
        return None, False, "the workspace has no operator file, so the round's opt_<op>.py cannot be named"
    target = folder / name
    if os.path.islink(folder) or (os.path.lexists(folder) and not folder.is_dir()) or os.path.lexists(target):
        return target, False, f"{shown(target, workspace)} was not written: the round folder is not a plain folder"
    source = checks.operator_of(workspace, parent)
    if source is None:
        return target, False, f"{parent} has no operator file to copy; write {shown(target, workspace)} yourself"
    text, problem = read_text_safe(source, workspace)
    if text is None:
        why = problem.message if problem else "unreadable"
        return target, False, f"{shown(source, workspace)} cannot be copied ({why}); write {shown(target, workspace)} yourself"
    files.atomic_write_text(target, text)
    return target, True, None
