"""``.helix/state.json``: load, validate, mutate and save the runner-managed workflow state,
plus the two append-only logs a transition writes (attempts.md State Update blocks and
``.helix/round-timings/opt-round-N.jsonl``).

Error messages keep the upstream wording on purpose: the guideline a failed command returns is
chosen by a substring of the message (``workflow state``, ``baseline.status=passed``, ...).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from helix_engine.workspace import files, layout
from helix_engine.workspace.filemodel import ValidationError
from helix_engine.workspace.json_text import parse_json
from helix_engine.workspace.md_attempts import StateUpdate, state_update_append_text
from helix_engine.workspace.models import (
    ANALYSIS_POLICIES,
    ROUND_STRATEGIES,
    AnalysisPolicy,
    RoundEntry,
    RoundStrategy,
    StrategyState,
    StrategyUpdater,
    WorkflowState,
)
from helix_engine.workspace.reading import (
    MAX_JSON_BYTES,
    UnreadableFile,
    decode_text,
    open_workspace_file,
    owning_workspace,
    read_bytes_safe,
)

STATE_MISSING = "optimize workflow state is not available"

COMBINATION_WARNINGS: dict[tuple[str, str], str] = {
    ("exploration", "compiler_source_required"): (
        "The combination exploration + compiler_source_required is unusual; compiler-source depth "
        "is often too deep for an exploratory round."
    ),
    ("structural_change", "pattern_entry"): (
        "The combination structural_change + pattern_entry is unusual; structural rewrites often "
        "need deeper evidence than pattern_entry alone."
    ),
    ("plateau_review", "pattern_entry"): (
        "The combination plateau_review + pattern_entry is unusual; plateau review usually follows "
        "deeper evidence."
    ),
}
TRANSITION_WARNINGS: dict[tuple[str, str], str] = {
    ("structural_change", "exploration"): (
        "Returning from structural_change to exploration is unusual; confirm the previous rewrite "
        "direction is no longer justified."
    ),
    ("focused_tuning", "exploration"): (
        "Returning from focused_tuning to exploration is unusual; confirm the round really needs a "
        "broader search again."
    ),
    ("plateau_review", "focused_tuning"): (
        "Leaving plateau_review for focused_tuning is unusual; confirm the plateau conclusion has "
        "been resolved."
    ),
    ("plateau_review", "structural_change"): (
        "Leaving plateau_review for structural_change is unusual; confirm a new structural "
        "hypothesis is now evidence-backed."
    ),
}


def utc_now() -> str:
    """ISO-8601 UTC with a Z, to the second (the upstream timestamp format)."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def state_path(workspace: Path) -> Path:
    return Path(workspace) / layout.HELIX_DIR / layout.WORKFLOW_STATE


def find_state_upwards(start: Path) -> Path | None:
    """The first ``.helix/state.json`` in ``start`` or one of its parents."""
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        candidate = state_path(folder)
        if candidate.is_file():
            return candidate
    return None


def load_workflow(path: Path) -> WorkflowState:
    """Load and validate; FileNotFoundError when absent, ValueError (naming "workflow state")
    for anything malformed."""
    path = Path(path)
    if not os.path.lexists(path):
        raise FileNotFoundError(STATE_MISSING)
    data, problem = read_bytes_safe(path, path.parent.parent, max_bytes=MAX_JSON_BYTES)
    if problem is not None:
        raise ValueError(f"workflow state cannot be read: {problem}")
    text, problem = decode_text(data or b"", "workflow state")
    if problem is not None:
        raise ValueError(f"malformed workflow state JSON: it {problem.message}")
    raw, problem = parse_json(text or "", "workflow state")
    if problem is not None:
        raise ValueError(f"malformed workflow state JSON: {problem.message}")
    if not isinstance(raw, dict):
        raise ValueError("workflow state must be a JSON object")
    if raw.get("schema_version") != 1:
        raise ValueError(f"unsupported workflow state schema_version: {raw.get('schema_version')!r}")
    try:
        state = WorkflowState.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ValueError(f"invalid workflow state ({where or 'file'}): {first.get('msg')}") from None
    if state.phase == "round_active":
        entry = state.rounds.get(str(state.current_round))
        if entry is None:
            raise ValueError(f"invalid workflow state: phase=round_active requires rounds[{state.current_round}]")
        if entry.status != "active":
            raise ValueError(
                f"invalid workflow state: phase=round_active requires active state for round {state.current_round}"
            )
    return state


def save_workflow(path: Path, state: WorkflowState) -> None:
    files.atomic_write_json(path, state.to_json())


def new_workflow(run_id: str, *, baseline_passed: bool) -> WorkflowState:
    return WorkflowState(
        schema_version=1,
        run_id=run_id,
        phase="awaiting_round_start" if baseline_passed else "baseline",
        current_round=None,
    )


def completable_round(state: WorkflowState, name: str, current_arg: int | None) -> int:
    """The round number, when the state lets this round be completed now (else ValueError)."""
    n = parse_round_dir_name(name)
    entry = state.rounds.get(str(n))
    if entry is not None and entry.status in ("passed", "failed") and state.current_round != n:
        raise ValueError(
            f"{name} was already submitted and {entry.status}; the workflow state no longer has it active"
        )
    if state.phase != "round_active":
        raise ValueError(f"cannot complete {name} while workflow phase is {state.phase}")
    if state.current_round != n:
        raise ValueError(f"workflow state current_round={state.current_round} does not match {name}")
    if current_arg is not None and current_arg != n:
        raise ValueError(f"--current-round={current_arg} does not match workflow state round {n}")
    if entry is None:
        raise ValueError(f"missing workflow state entry for {name}")
    if entry.status != "active":
        raise ValueError(f"cannot complete non-active round {name}")
    return n


def parse_round_dir_name(name: str) -> int:
    number = layout.round_number(name)
    if number is None:
        raise ValueError(f"invalid round directory name: {name!r} (expected opt-round-N with N >= 1)")
    return number


def validate_strategy(value: str) -> RoundStrategy:
    normalized = value.strip()
    for strategy in ROUND_STRATEGIES:
        if strategy == normalized:
            return strategy
    raise ValueError(f"unknown round_strategy: {value!r} (choose one of {', '.join(ROUND_STRATEGIES)})")


def validate_policy(value: str) -> AnalysisPolicy:
    normalized = value.strip()
    for policy in ANALYSIS_POLICIES:
        if policy == normalized:
            return policy
    raise ValueError(f"unknown analysis_policy: {value!r} (choose one of {', '.join(ANALYSIS_POLICIES)})")


def validate_reason(value: str | None) -> str:
    normalized = (value or "").strip()
    if not normalized:
        raise ValueError("reason is required")
    return normalized


def policy_depth(policy: str) -> int:
    return ANALYSIS_POLICIES.index(policy)


def combination_warnings(strategy: str, policy: str) -> list[str]:
    warning = COMBINATION_WARNINGS.get((strategy, policy))
    return [warning] if warning else []


def transition_warnings(previous_strategy: str, strategy: str, policy: str) -> list[str]:
    warnings: list[str] = []
    if previous_strategy != strategy and (previous_strategy, strategy) in TRANSITION_WARNINGS:
        warnings.append(TRANSITION_WARNINGS[(previous_strategy, strategy)])
    return warnings + combination_warnings(strategy, policy)


def strategy_state(strategy: RoundStrategy, policy: AnalysisPolicy, reason: str,
                   updated_by: StrategyUpdater) -> StrategyState:
    return StrategyState(
        round_strategy=strategy,
        analysis_policy=policy,
        reason=reason,
        updated_at=utc_now(),
        updated_by=updated_by,
    )


def active_entry(n: int, strategy: StrategyState, parent_round: str | None = None) -> RoundEntry:
    entry = RoundEntry(
        status="active",
        round_dir=layout.round_dir_name(n),
        strategy_state=strategy,
        started_at=utc_now(),
        ended_at=None,
    )
    if parent_round is not None:
        entry.parent_round = parent_round
    return entry


def append_state_update(attempts_path: Path, update: StateUpdate) -> None:
    """Append the block to attempts.md (created with its folder when missing).

    The separator depends on what the file ends with, so it is read first; the append itself is
    one O_APPEND write, and we hold the workspace lock, so nothing interleaves."""
    existing_tail = ""
    if os.path.lexists(attempts_path):  # through the safe reader: a FIFO or a link is refused, not waited on
        try:
            with open_workspace_file(attempts_path, owning_workspace(attempts_path)) as handle:
                handle.seek(0, 2)
                size = handle.tell()
                handle.seek(max(0, size - 2))
                existing_tail = handle.read(2).decode("utf-8", errors="replace")
        except UnreadableFile as exc:
            raise ValueError(f"cannot append the State Update: {exc.problem}") from None
    files.append_text(attempts_path, state_update_append_text(existing_tail, update))


def timing_path(workspace: Path, n: int) -> Path:
    return Path(workspace) / layout.HELIX_DIR / layout.ROUND_TIMINGS_DIR / f"{layout.round_dir_name(n)}.jsonl"


def append_timing(workspace: Path, n: int, event: str, run_id: str, timestamp: str | None = None) -> None:
    """One ``round_start``/``round_end`` line in ``.helix/round-timings/opt-round-N.jsonl``
    (``timestamp``: when the event happened, if not now — a crash repair writes it late)."""
    record: dict[str, Any] = {"event": event, "timestamp": timestamp or utc_now(), "run_id": run_id, "round": n}
    files.append_text(timing_path(workspace, n), json.dumps(record, separators=(",", ":")) + "\n")
