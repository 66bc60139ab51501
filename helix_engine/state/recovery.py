"""Clean up after a crash, under the workspace lock, at the start of every transition (and in
``helix repair``).

What `workspace.leftovers` finds is repaired here only when the repair is unambiguous: orphan
temp files past their age are removed; a start-round killed after its state write gets the
round_start timing and attempts.md block it would have written (from state.json, which is
authoritative); a submit-round marker whose round state.json already records gets its
round_end timing and is removed. A submit-round killed before state.json recorded the round is
not finished here (the round's check decides its outcome): its sentence says to run
submit-round again, which finishes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.sanitize import clean_name
from helix_engine.state import workflow
from helix_engine.workspace import files, layout, leftovers
from helix_engine.workspace.md_attempts import StateUpdate
from helix_engine.workspace.models import WorkflowState
from helix_engine.workspace.reading import read_text_safe, shown


@dataclass
class Recovery:
    """What a transition repaired before doing its own work, and what it could not."""

    repaired: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # leftovers another command repairs
    errors: list[str] = field(default_factory=list)  # repairs an OSError stopped


def recover(workspace: Path) -> Recovery:
    """Repair the crash leftovers of ``workspace``. Call only while holding `files.workspace_lock`.
    Never raises on workspace content; an OSError becomes an unresolved sentence."""
    workspace = Path(workspace)
    rec = Recovery()
    try:
        removed = files.remove_orphan_temps(workspace)
    except OSError as exc:  # e.g. out of file descriptors: the transition itself still runs
        removed = []
        rec.errors.append(f"old temp files could not be checked ({exc.strerror or exc}); run "
                              f"`{leftovers.REPAIR_COMMAND}` again")
    if removed:
        names = ", ".join(clean_name(shown(p, workspace)) for p in removed[:3])
        more = f" and {len(removed) - 3} more" if len(removed) > 3 else ""
        rec.repaired.append(f"removed {len(removed)} temp file(s) left by interrupted writes: {names}{more}")
    state = _state(workspace)
    if state is None:
        return rec
    try:
        _finish_start(workspace, state, rec)
        _finish_submit(workspace, state, rec)
    except OSError as exc:
        rec.errors.append(f"a crash leftover could not be repaired ({exc.strerror or exc}); "
                              f"fix the file named and run `{leftovers.REPAIR_COMMAND}` again")
    rec.unresolved += unresolved(workspace, state)
    return rec


def unresolved(workspace: Path, state: WorkflowState | None = None) -> list[str]:
    """The leftovers only another command repairs, one sentence each (read-only)."""
    if state is None:
        state = _state(workspace)
    return [f"{clean_name(x.file)}: {x.message}" for x in leftovers.detect(workspace, state) if not x.automatic]


def mark_submit(workspace: Path, n: int, outcome: str) -> None:
    """submit-round's marker, written before its first write (see workspace.leftovers)."""
    files.atomic_write_json(leftovers.transition_path(workspace), {
        "command": "submit-round", "round": n, "outcome": outcome, "started_at": workflow.utc_now()})


def clear_submit(workspace: Path) -> None:
    """Remove the marker after submit-round's last write."""
    _remove_marker(leftovers.transition_path(workspace))


def _state(workspace: Path) -> WorkflowState | None:
    with contextlib.suppress(FileNotFoundError, ValueError):
        return workflow.load_workflow(workflow.state_path(workspace))
    return None


def _finish_start(workspace: Path, state: WorkflowState, rec: Recovery) -> None:
    n = leftovers.half_started_round(workspace, state)
    if n is None:
        return
    entry = state.rounds[str(n)]
    strategy = entry.strategy_state
    assert strategy is not None  # half_started_round checked it
    timing = _add_timing(workspace, n, "round_start", state.run_id, entry.started_at or strategy.updated_at)
    update = StateUpdate(strategy.updated_at, "start-round", strategy.round_strategy, strategy.analysis_policy,
                         strategy.reason, workflow.combination_warnings(strategy.round_strategy,
                                                                        strategy.analysis_policy))
    name = layout.round_dir_name(n)
    created = False
    if entry.parent_round:  # the candidate start-round would have copied from the recorded parent
        from helix_engine.state.candidate import create_candidate

        created = create_candidate(workspace, n, entry.parent_round)[1]
    workflow.append_state_update(workspace / name / layout.ATTEMPTS, update)
    rec.repaired.append(f"finished the interrupted start-round of {name}: wrote its State Update block to "
                        f"{name}/{layout.ATTEMPTS}" + (" and its round_start timing" if timing else "")
                        + (f" and created its candidate operator from {entry.parent_round}" if created else ""))


def _finish_submit(workspace: Path, state: WorkflowState, rec: Recovery) -> None:
    path = leftovers.transition_path(workspace)
    marker, problems = leftovers.read_transition(workspace)
    if problems:
        _remove_marker(path)
        rec.repaired.append(f"removed {layout.HELIX_DIR}/{leftovers.TRANSITION}, an unreadable submit-round marker")
        return
    if marker is None:
        return
    name = layout.round_dir_name(marker.round)
    entry = state.rounds.get(str(marker.round))
    if entry is not None and entry.status == "active" and state.current_round == marker.round:
        return  # submit-round again finishes it (the sentence says so)
    if entry is not None and entry.status in ("passed", "failed"):
        timing = _add_timing(workspace, marker.round, "round_end", state.run_id, entry.ended_at)
        _remove_marker(path)
        rec.repaired.append(f"finished the interrupted submit-round of {name} (recorded {entry.status})"
                            + (": wrote its round_end timing" if timing else ""))
        return
    _remove_marker(path)
    rec.repaired.append(f"removed a stale submit-round marker for {name}, which .helix/state.json does not "
                        "have active or completed")


def _add_timing(workspace: Path, n: int, event: str, run_id: str, timestamp: str | None) -> bool:
    """Append ``event`` to round n's timings unless it is there; False when it was there, or
    when the timings file is not a plain file helix can read (it is then left alone)."""
    path = workflow.timing_path(workspace, n)
    if os.path.lexists(path):
        text, problem = read_text_safe(path, workspace)
        if problem is not None:
            return False
        for line in (text or "").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and record.get("event") == event:
                    return False
    workflow.append_timing(workspace, n, event, run_id, timestamp)
    return True


def _remove_marker(path: Path) -> None:
    """Unlink the marker itself (a link is removed, never followed; a folder is left)."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise IsADirectoryError(f"{layout.HELIX_DIR}/{leftovers.TRANSITION} is a folder; remove it by hand")
        os.unlink(path)


def repair(workspace: Path) -> tuple[dict[str, Any], int]:
    """``helix repair``: the clean-up every transition does first, on its own. Exit 1 while a
    leftover remains that only another command repairs (its sentence names the command)."""
    workspace = Path(workspace)
    try:
        with files.workspace_lock(workspace):
            rec = recover(workspace)
    except files.WorkspaceBusy as exc:
        return {"status": "fail", "repaired": [], "unresolved": [],
                "guideline": f"{exc}. Another helix command is changing this workspace; run helix repair again "
                             "when it is done."}, 1
    left = rec.errors + unresolved(workspace)
    if left:
        guide = " ".join(s.rstrip(".") + "." for s in left)
    elif rec.repaired:
        guide = "The workspace is consistent again."
    else:
        guide = "Nothing to repair: no crash leftovers."
    return {"status": "fail" if left else "pass", "repaired": rec.repaired, "unresolved": left,
            "guideline": guide}, 1 if left else 0
