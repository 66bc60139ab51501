"""``helix submit-round --check``: what submit-round would do now, without doing any of it.

The same inputs, the same round checker and the same workflow-state rule as submit-round
(lifecycle.py), so the answer cannot drift from the real thing; nothing is written, no lock is
taken and no crash leftover is repaired. The cockpit's submit form asks it first, with the
round state the form is about to write (``state_data``), and asks for a confirmation before a
submit that would close the round as failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helix_engine.state import checks, guideline, workflow
from helix_engine.state.goals import FIX, load_goals, resolve_min_speedup

Payload = tuple[dict[str, Any], int]


def _fail(issue: str, guide: str) -> dict[str, Any]:
    return {"kind": "round", "status": "fail", "issues": [issue], "guideline": guide}


def submit_inputs(round_dir: Path, current_round: int | None, final_round: int | None,
                  optimize_target: str | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the checker's keyword arguments, None), or (None, the fail payload) when the inputs
    themselves are refused (no round folder, a bad min-speedup target, unreadable session goals,
    a bad optimize target). The target is ``HELIX_OPTIMIZE_MIN_SPEEDUP`` when set, else the
    session goals' (.helix/goals.json)."""
    if not round_dir.is_dir():
        name = round_dir.name
        return None, _fail(f"missing round directory: {name}", guideline.missing_round_dir_guideline(name))
    try:
        target = resolve_min_speedup()
    except ValueError as exc:
        return None, _fail(str(exc), guideline.MIN_SPEEDUP_INVALID)
    session, problem = load_goals(round_dir.parent)
    if problem is not None:
        return None, _fail(problem, "The session goals cannot be read, so no stop signal can be given. Repair "
                           f"them ({FIX}), then rerun `helix submit-round`.")
    if target is None and session is not None:
        target = session.target_speedup
    if optimize_target not in (None, "kernel", "operator"):
        issue = f"--optimize-target must be kernel or operator, not {optimize_target!r}"
        return None, _fail(issue, "Rerun `helix submit-round` with --optimize-target kernel or operator.")
    return {"current_round": current_round, "final_round": final_round,
            "optimize_target": optimize_target, "min_speedup": target, "goals": session}, None


def check_submit(round_dir: Path, current_round: int | None = None, final_round: int | None = None,
                 optimize_target: str | None = None, state_data: dict[str, Any] | None = None,
                 summary_pending: bool = False) -> Payload:
    """submit-round's payload as it would be now, plus ``check: true``, ``would_record``
    (``passed``, ``failed`` — the round would be closed as rejected — or None: nothing would be
    recorded), ``would`` (that, in a sentence) and ``lints`` (the hard-rule warnings). Exit code
    0 only when the round would be recorded as passed. Writes nothing. ``state_data`` /
    ``summary_pending``: judge the round state and summary a form is about to write instead."""
    round_dir = Path(round_dir).expanduser().resolve()
    name = round_dir.name
    kwargs, refused = submit_inputs(round_dir, current_round, final_round, optimize_target)
    if refused is not None:
        return _with_outcome(refused, None, name, []), 1
    assert kwargs is not None
    result = checks.check_round(round_dir, **kwargs, state_data=state_data, summary_pending=summary_pending)
    lints = [str(p) for p in result.lints]
    state_issue: str | None = None
    path = workflow.state_path(round_dir.parent)
    try:
        workflow.completable_round(workflow.load_workflow(path), name, current_round)
    except (FileNotFoundError, ValueError) as exc:
        state_issue = str(exc)
    payload = result.payload()
    if result.passed:
        if state_issue is None:
            return _with_outcome(payload, "passed", name, lints), 0
        # the round passes, but the state cannot record it (submit-round's refusal)
        return _with_outcome(_fail(state_issue, guideline.submit_round_guideline(state_issue)), None, name, lints), 1
    if not result.terminal or state_issue is not None:
        if result.terminal and state_issue is not None and path.exists():
            payload["issues"] = payload["issues"] + [state_issue]
            payload["guideline"] = (checks.fail_guideline("round", payload["issues"]) + " "
                                    + guideline.submit_round_guideline(state_issue))
        return _with_outcome(payload, None, name, lints), 1
    return _with_outcome(payload, "failed", name, lints), 1


def _with_outcome(payload: dict[str, Any], record: str | None, name: str, lints: list[str]) -> dict[str, Any]:
    if record == "passed":
        would = f"submit-round would record {name} as passed"
    elif record == "failed":
        would = (f"submit-round would close {name} as failed (rejected): it is a terminal round that fails the "
                 "check, and the ledger would record it so")
    else:
        would = f"submit-round would record nothing: {name} keeps its current state until the issues are fixed"
    return {**payload, "check": True, "would_record": record, "would": would, "lints": lints}


def check_text(payload: dict[str, Any]) -> str:
    """The dry run for a terminal: what would happen, then each issue, lint and the guideline."""
    lines = [str(payload.get("would", ""))]
    lines += [f"  ✘ {issue}" for issue in payload.get("issues") or []] if payload.get("status") != "pass" else \
        [f"  note: {issue}" for issue in payload.get("issues") or []]
    lines += [f"  ! {lint}" for lint in payload.get("lints") or []]
    if payload.get("guideline"):
        lines.append(str(payload["guideline"]))
    return "\n".join(lines)
