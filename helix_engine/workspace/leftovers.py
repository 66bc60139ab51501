"""Crash leftovers: what a killed helix command can leave behind, found without writing.

The transitions write in a fixed order, so each kill point leaves a recognisable state:

- any atomic write: an orphan ``.NAME.XXXXXXXX.tmp`` beside its target (`files.orphan_temps`);
- start-round writes ``.helix/state.json`` (round N active), then the ``round_start`` timing,
  then ``opt-round-N/attempts.md`` (creating the folder): a kill after the first write leaves
  the round active with no attempts.md (and often no folder). The reverse (a folder with no
  state entry) cannot come from a kill: it is an agent's folder made before start-round;
- submit-round writes its marker ``.helix/transition.json``, then the ledger, round-state.json,
  state.json and the ``round_end`` timing, and removes the marker last: a marker left behind
  names the round whose submission was interrupted. Without it an opt-note.md entry for the
  active round proves nothing (agents write their own entries before submitting), and state
  "completed" with no ledger entry cannot come from a kill (the ledger is written first).

`helix status` and the cockpit report these as warnings, each one sentence with the command
that repairs it; `state.recovery` repairs the unambiguous ones under the workspace lock.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from helix_engine.sanitize import clean_name
from helix_engine.workspace import files, layout
from helix_engine.workspace.filemodel import FileModel
from helix_engine.workspace.models import Problem, WorkflowState
from helix_engine.workspace.reading import load_model, shown

#: ``.helix/transition.json``: written when submit-round starts recording, removed when done.
TRANSITION = "transition.json"
REPAIR_COMMAND = "helix repair"


class PendingTransition(FileModel):
    """The marker of a submit-round that has started writing and not yet finished."""

    command: Literal["submit-round"]
    round: int
    outcome: Literal["passed", "failed"]
    started_at: str


def _at_least_one(value: int) -> int:
    if value < 1:
        raise ValueError("Input should be greater than or equal to 1")
    return value


PendingTransition._field_after = {"round": _at_least_one}


@dataclass(frozen=True)
class Leftover:
    """One half-done transition: where, one sentence with the repairing command, and whether
    the next state-changing command repairs it by itself."""

    file: str
    message: str
    automatic: bool

    def problem(self) -> Problem:
        return Problem(self.file, self.message, severity="warning")


def transition_path(workspace: Path) -> Path:
    return Path(workspace) / layout.HELIX_DIR / TRANSITION


def read_transition(workspace: Path) -> tuple[PendingTransition | None, list[Problem]]:
    """The submit-round marker, if one was left (None and no problem when there is none)."""
    path = transition_path(workspace)
    if not os.path.lexists(path):
        return None, []
    marker, _, problems = load_model(path, Path(workspace), PendingTransition, what="submit-round marker",
                                     fix=f"run `{REPAIR_COMMAND}` to remove it")
    return marker, [Problem(p.file, p.message, p.line, "warning") for p in problems]


def half_started_round(workspace: Path, state: WorkflowState | None) -> int | None:
    """N when start-round of opt-round-N was killed after writing state.json: the round is
    active, still as start-round set it, and opt-round-N/attempts.md does not exist (in a real
    folder or no folder at all: a linked folder is never written through)."""
    if state is None or state.phase != "round_active" or not isinstance(state.current_round, int):
        return None
    n = state.current_round
    entry = state.rounds.get(str(n))
    if entry is None or entry.status != "active" or entry.strategy_state is None \
            or entry.strategy_state.updated_by != "start-round":
        return None
    folder = Path(workspace) / layout.round_dir_name(n)
    try:
        if os.path.islink(folder) or (os.path.lexists(folder) and not folder.is_dir()):
            return None
        if os.path.lexists(folder / layout.ATTEMPTS):
            return None
    except OSError:
        return None
    return n


def detect(workspace: Path, state: WorkflowState | None) -> list[Leftover]:
    """Every half-done transition in ``workspace`` (``state`` is its loaded state.json)."""
    workspace = Path(workspace)
    found: list[Leftover] = []
    n = half_started_round(workspace, state)
    if n is not None:
        name = layout.round_dir_name(n)
        found.append(Leftover(
            f"{name}/{layout.ATTEMPTS}",
            f"start-round of {name} was interrupted after .helix/state.json made the round active and "
            f"before it wrote this file; run `{REPAIR_COMMAND}` (or start-round again with the same "
            "arguments) to finish it",
            automatic=True,
        ))
    marker, problems = read_transition(workspace)
    rel = f"{layout.HELIX_DIR}/{TRANSITION}"
    for problem in problems:
        found.append(Leftover(problem.file, problem.message, automatic=True))
    if marker is not None:
        name = layout.round_dir_name(marker.round)
        entry = state.rounds.get(str(marker.round)) if state is not None else None
        if entry is not None and entry.status == "active" and state is not None \
                and state.phase == "round_active" and state.current_round == marker.round:
            found.append(Leftover(
                rel,
                f"submit-round of {name} was interrupted before .helix/state.json recorded the round; "
                f"run `helix submit-round --round-dir {name}` again to finish it (its opt-note.md entry "
                "is not written twice)",
                automatic=False,
            ))
        elif entry is not None and entry.status in ("passed", "failed"):
            found.append(Leftover(
                rel,
                f"submit-round of {name} was interrupted after it recorded the round {entry.status}; run "
                f"`{REPAIR_COMMAND}` to write its round_end timing and remove this marker",
                automatic=True,
            ))
        else:
            found.append(Leftover(
                rel,
                f"is left by an interrupted submit-round of {name}, which .helix/state.json does not "
                f"have active or completed; run `{REPAIR_COMMAND}` to remove it",
                automatic=True,
            ))
    return found


def temp_problem(workspace: Path) -> Problem | None:
    """One warning for the orphan temp files (read-only), or None when there are none."""
    temps = files.orphan_temps(workspace)
    if not temps:
        return None
    first = clean_name(shown(temps[0], workspace))
    minutes = int(files.TEMP_MAX_AGE_S // 60)
    if len(temps) == 1:
        return Problem(first, f"is a temp file left by an interrupted write (over {minutes} minutes old); run "
                       f"`{REPAIR_COMMAND}` to remove it (any state-changing helix command also does)",
                       severity="warning")
    return Problem(".", f"{len(temps)} temp files left by interrupted writes (over {minutes} minutes old, e.g. "
                   f"{first}); run `{REPAIR_COMMAND}` to remove them (any state-changing helix command also does)",
                   severity="warning")
