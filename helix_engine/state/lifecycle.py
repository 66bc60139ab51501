"""The four round-loop transitions (submit-baseline, start-round, set-current-round-state,
submit-round), each returning ``(payload, exit_code)`` exactly as upstream prints them.

Every transition holds the workspace lock and re-reads the workflow state under it, so two
callers never both win: the second sees the state the first left and is refused with a
sentence that says why. Every write is atomic; appends are single O_APPEND writes. Within
submit-round the ledger is written before the state, so a kill between the two leaves the round
active and a repeat of the call finishes the job without duplicating its ledger entry. Under the
lock, before its own work, every transition cleans up what a killed one left (state.recovery).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from helix_engine.errors import HelixError
from helix_engine.state import (
    candidate,
    checks,
    cleanup,
    guideline,
    ledger,
    recovery,
    workflow,
)
from helix_engine.state.baseline import baseline_gate_issues
from helix_engine.state.submit_check import submit_inputs
from helix_engine.workspace import files, layout
from helix_engine.workspace.md_attempts import StateUpdate
from helix_engine.workspace.models import AnalysisPolicy, RoundState, RoundStrategy
from helix_engine.workspace.reading import shown

Payload = tuple[dict[str, Any], int]
BUSY_GUIDELINE = "Another helix command is changing this workspace right now. Wait for it to finish, then run this command again."


@contextlib.contextmanager
def _locked(workspace: Path) -> Iterator[recovery.Recovery]:
    """Hold the workspace lock; first repair what a killed transition left (see state.recovery)."""
    with files.workspace_lock(workspace):
        yield recovery.recover(workspace)


def _annotate(result: Payload, rec: recovery.Recovery | None, workspace: Path) -> Payload:
    """Add what the transition repaired first (``recovered``) and the crash leftovers still
    there after it (``crash_leftovers``, e.g. a half-done submit-round that this command was
    not); a refusal's guideline starts with the latter, since they are usually why."""
    payload, code = result
    if rec is None:
        return result
    if rec.repaired:
        payload["recovered"] = list(rec.repaired)
    left = rec.errors + (recovery.unresolved(workspace) if rec.unresolved else [])
    if left:
        payload["crash_leftovers"] = left
        if code != 0:
            payload["guideline"] = " ".join([*(s.rstrip(".") + "." for s in left),
                                             str(payload.get("guideline", ""))]).strip()
    return payload, code


def _fail(kind: str | None, issue: str, guide: str, **extra: Any) -> Payload:
    payload: dict[str, Any] = {}
    if kind is not None:
        payload["kind"] = kind
    payload.update({"status": "fail", "issues": [issue], "guideline": guide})
    payload.update(extra)
    return payload, 1


# ------------------------------------------------------------------------------ baseline


def submit_baseline(baseline_dir: Path, *, reseal: bool = False) -> Payload:
    """Run the baseline gate; on pass mark the baseline passed (bootstrapping the state) and seal
    its files. A baseline sealed before whose files changed since is refused unless ``reseal``
    (prepare-baseline, which snapshots, tests and benches it again): accepting it as it is now
    would launder the change."""
    baseline_dir = Path(baseline_dir).expanduser().resolve()
    workspace = baseline_dir.parent
    if not reseal:
        from helix_engine.state.seals import baseline_problem

        changed = baseline_problem(workspace)
        if changed is not None:
            return _fail("baseline", changed, guideline.submit_baseline_guideline(changed))
    issues = baseline_gate_issues(workspace)
    if issues:
        return {"kind": "baseline", "status": "fail", "issues": issues,
                "guideline": checks.fail_guideline("baseline", issues)}, 1
    path = workflow.state_path(workspace)
    rec: recovery.Recovery | None = None
    try:
        with _locked(workspace) as rec:
            if path.exists():
                state = workflow.load_workflow(path)
            else:
                run_id = "submit-baseline-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
                state = workflow.new_workflow(run_id, baseline_passed=False)
            state.baseline.status = "passed"
            state.baseline.submitted_at = workflow.utc_now()
            from helix_engine.state.seals import seal_baseline

            seal_baseline(workspace)  # what was accepted: every later judgement checks these bytes
            state.phase = "awaiting_round_start"
            state.current_round = None
            workflow.save_workflow(path, state)
    except files.WorkspaceBusy as exc:
        return _fail("baseline", str(exc), BUSY_GUIDELINE)
    except (FileNotFoundError, ValueError) as exc:
        return _annotate(_fail("baseline", str(exc), guideline.submit_baseline_guideline(str(exc))), rec, workspace)
    return _annotate(({"kind": "baseline", "status": "pass", "issues": [], "guideline": "baseline check passed"}, 0),
                     rec, workspace)


# ---------------------------------------------------------------------------- start-round


def start_round(round_dir: Path, round_strategy: str, analysis_policy: str, reason: str,
                parent_round: str | None = None) -> Payload:
    """Open round N (or confirm it, when repeated with identical arguments): record its parent
    (``parent_round``, default the current best round, else baseline) and create its candidate
    ``opt_<op>.py`` from the parent's operator when the round has none."""
    round_dir = Path(round_dir).expanduser().resolve()
    rules = list(guideline.HARD_RULES)
    rec: recovery.Recovery | None = None
    try:
        strategy = workflow.validate_strategy(round_strategy)
        policy = workflow.validate_policy(analysis_policy)
        why = workflow.validate_reason(reason)
        path = workflow.state_path(round_dir.parent)
        if not path.exists():
            raise FileNotFoundError(workflow.STATE_MISSING)
        with _locked(round_dir.parent) as rec:
            started = _start_locked(path, round_dir, strategy, policy, why, parent_round)
    except files.WorkspaceBusy as exc:
        return _fail(None, str(exc), BUSY_GUIDELINE, hard_rules=rules)
    except (FileNotFoundError, ValueError) as exc:
        return _annotate(_fail(None, str(exc), guideline.start_round_guideline(str(exc)), hard_rules=rules), rec,
                         round_dir.parent)
    workspace = round_dir.parent
    operator = started.operator
    payload: dict[str, Any] = {
        "status": "pass",
        "round": round_dir.name,
        "guideline": f"Round {round_dir.name} is now active. Follow the hard rules below while working on this round.",
        "hard_rules": rules,
        "round_strategy": strategy,
        "analysis_policy": policy,
        "reason": why,
    }
    if started.warnings:
        payload["warnings"] = started.warnings
    # helix's additions, after upstream's keys: the parent and the file to edit
    payload["parent_round"] = started.parent
    payload["operator_file"] = shown(operator, workspace) if operator is not None else None
    payload["operator_created"] = started.created
    return _annotate((payload, 0), rec, workspace)


@dataclass
class _Started:
    warnings: list[str]
    parent: str | None  # None: a round started before helix recorded parents
    operator: Path | None
    created: bool


def _start_locked(path: Path, round_dir: Path, strategy: RoundStrategy, policy: AnalysisPolicy, why: str,
                  parent_arg: str | None) -> _Started:
    state = workflow.load_workflow(path)
    workspace = round_dir.parent
    name = round_dir.name
    n = workflow.parse_round_dir_name(name)
    warnings = workflow.combination_warnings(strategy, policy)
    if state.baseline.status != "passed":
        raise ValueError("cannot start a round before baseline.status=passed")
    from helix_engine.state import seals

    changed = seals.baseline_problem(workspace)  # a round judged against a changed baseline is judged on nothing
    if changed is not None:
        raise ValueError(changed)
    entry = state.rounds.get(str(n))
    if state.phase == "round_active" and state.current_round == n and entry is not None and entry.status == "active":
        current = entry.strategy_state
        if current is None:
            raise ValueError(f"active round {name} is missing strategy_state; use set-current-round-state to initialize it")
        if (current.round_strategy, current.analysis_policy, current.reason.strip()) != (strategy, policy, why):
            raise ValueError(f"cannot reinitialize active round {name} with different strategy state")
        recorded = entry.parent_round
        if parent_arg is not None and candidate.choose_parent(workspace, n, parent_arg) != (recorded or "baseline"):
            raise ValueError(f"cannot reinitialize active round {name} with a different parent "
                             f"(it builds on {recorded or 'baseline'})")
        return _Started(warnings, recorded, candidate.existing_candidate(workspace, n), False)  # identical repeat: no change
    if state.phase != "awaiting_round_start":
        active = f" (opt-round-{state.current_round} is active)" if state.current_round is not None else ""
        raise ValueError(f"cannot start {name} while workflow phase is {state.phase}{active}")
    if entry is not None and entry.status == "passed":
        raise ValueError(f"cannot reopen completed round {name}")
    if n > 1 and not checks.is_terminal(workspace / layout.round_dir_name(n - 1)):
        # submit-round refuses a round whose predecessor is not terminal; opening it anyway
        # would leave an active round that can never be submitted.
        why = checks.not_terminal_reason(workspace / layout.round_dir_name(n - 1))
        raise ValueError(
            f"cannot start {name}: opt-round-{n - 1} is not a terminal round yet ({why}) and rounds are "
            f"numbered in sequence; start (or finish) opt-round-{n - 1} first"
        )
    parent = candidate.choose_parent(workspace, n, parent_arg)
    changed = seals.submitted_problem(workspace, parent, f"the parent of {name}")
    if changed is not None:  # its operator is copied into the round, and the round is measured against it
        raise ValueError(f"{changed}; or build {name} on another round with --parent-round")
    state.phase = "round_active"
    state.current_round = n
    state.rounds[str(n)] = workflow.active_entry(n, workflow.strategy_state(strategy, policy, why, "start-round"),
                                                 parent_round=parent)
    workflow.save_workflow(path, state)
    workflow.append_timing(workspace, n, "round_start", state.run_id)
    operator, created = _candidate(workspace, n, parent, warnings)
    _mirror(round_dir / layout.ATTEMPTS, StateUpdate(workflow.utc_now(), "start-round", strategy, policy, why,
                                                     list(warnings)), warnings)
    return _Started(warnings, parent, operator, created)


def _candidate(workspace: Path, n: int, parent: str, warnings: list[str]) -> tuple[Path | None, bool]:
    """The round's operator, created from the parent's when missing; a failure is a warning
    (the round is open either way, and the warning names the file to write)."""
    try:
        operator, created, note = candidate.create_candidate(workspace, n, parent)
    except OSError as exc:
        target = workspace / layout.round_dir_name(n) / candidate.candidate_name(workspace)
        operator, created, note = None, False, f"{shown(target, workspace)} could not be created ({exc}); write it yourself"
    if note:
        warnings.append(note)
    return operator, created


def _mirror(attempts: Path, update: StateUpdate, warnings: list[str]) -> None:
    """attempts.md mirrors the state; the state stays authoritative if the mirror fails."""
    try:
        workflow.append_state_update(attempts, update)
    except OSError as exc:
        warnings.append(f"attempts.md history mirror could not be updated: {exc}. Workflow state remains authoritative.")


# --------------------------------------------------------------- set-current-round-state


def set_current_round_state(workspace: Path, reason: str, round_strategy: str | None = None,
                            analysis_policy: str | None = None) -> Payload:
    """Change the active round's strategy and/or deepen its analysis policy."""
    rec: recovery.Recovery | None = None
    try:
        why = workflow.validate_reason(reason)
        if round_strategy is None and analysis_policy is None:
            raise ValueError("set-current-round-state requires --round-strategy and/or --analysis-policy")
        path = workflow.state_path(Path(workspace).expanduser().resolve())
        if not path.exists():
            raise FileNotFoundError(workflow.STATE_MISSING)
        with _locked(path.parent.parent) as rec:
            result = _set_locked(path, why, round_strategy, analysis_policy)
    except files.WorkspaceBusy as exc:
        return _fail(None, str(exc), BUSY_GUIDELINE)
    except (FileNotFoundError, ValueError) as exc:
        return _annotate(_fail(None, str(exc), guideline.set_state_guideline(str(exc))), rec, Path(workspace))
    return _annotate((result, 0), rec, Path(workspace))


def _set_locked(path: Path, why: str, strategy_arg: str | None, policy_arg: str | None) -> dict[str, Any]:
    state = workflow.load_workflow(path)
    if state.phase != "round_active" or not isinstance(state.current_round, int):
        raise ValueError("no optimize round is currently active")
    n = state.current_round
    entry = state.rounds.get(str(n))
    if entry is None:
        raise ValueError(f"missing workflow state entry for opt-round-{n}")
    if entry.status != "active":
        raise ValueError(f"cannot update non-active round opt-round-{n}")
    existing = entry.strategy_state
    if existing is None:
        if strategy_arg is None or policy_arg is None:
            raise ValueError("legacy active round is missing strategy_state; provide both --round-strategy and "
                             "--analysis-policy")
        new_strategy, new_policy = workflow.validate_strategy(strategy_arg), workflow.validate_policy(policy_arg)
    else:
        new_strategy = workflow.validate_strategy(strategy_arg) if strategy_arg is not None else existing.round_strategy
        new_policy = workflow.validate_policy(policy_arg) if policy_arg is not None else existing.analysis_policy
    old_strategy = existing.round_strategy if existing else new_strategy
    old_policy = existing.analysis_policy if existing else new_policy
    if existing is not None:
        if (old_strategy, old_policy) == (new_strategy, new_policy):
            raise ValueError("state update would be a no-op")
        if workflow.policy_depth(new_policy) < workflow.policy_depth(old_policy):
            raise ValueError("analysis_policy cannot become shallower within the same round")
    warnings = workflow.transition_warnings(old_strategy, new_strategy, new_policy)
    entry.strategy_state = workflow.strategy_state(new_strategy, new_policy, why, "set-current-round-state")
    workflow.save_workflow(path, state)
    name = entry.round_dir
    update = StateUpdate(workflow.utc_now(), "set-current-round-state", new_strategy, new_policy, why, list(warnings),
                         previous_round_strategy=old_strategy if existing else "<unset>",
                         previous_analysis_policy=old_policy if existing else "<unset>")
    _mirror(path.parent.parent / name / layout.ATTEMPTS, update, warnings)
    result: dict[str, Any] = {
        "status": "pass",
        "round": name,
        "guideline": f"Round strategy state for {name} is now updated. Use the new state as the active same-round contract.",
        "round_strategy": new_strategy,
        "analysis_policy": new_policy,
        "reason": why,
    }
    if existing is not None:
        result["previous_round_strategy"] = old_strategy
        result["previous_analysis_policy"] = old_policy
    if warnings:
        result["warnings"] = warnings
    return result


# ------------------------------------------------------------------------------ submit-round


def submit_round(round_dir: Path, current_round: int | None = None, final_round: int | None = None,
                 optimize_target: str | None = None, accept_findings: str | None = None,
                 accept_implausible: str | None = None) -> Payload:
    """Check the round, then record the outcome: passed (active round only) or failed (when the
    round is terminal), the ledger entry, the round_end timing event and the pass clean-up.
    ``accept_findings`` / ``accept_implausible``: why a round held for review is honest (the
    ledger records it)."""
    round_dir = Path(round_dir).expanduser().resolve()
    kwargs, refused = submit_inputs(round_dir, current_round, final_round, optimize_target)
    if refused is not None:
        return refused, 1
    assert kwargs is not None
    if accept_findings is not None:
        if not accept_findings.strip():
            return _fail("round", "--accept-findings needs a reason", "Say why the findings are honest code: "
                         "`helix submit-round --round-dir ... --accept-findings \"why\"`.")
        kwargs["accept_findings"] = accept_findings.strip()
    if accept_implausible is not None:
        if not accept_implausible.strip():
            return _fail("round", "--accept-implausible needs a reason", "Say why the measured numbers are real: "
                         "`helix submit-round --round-dir ... --accept-implausible \"why\"`.")
        kwargs["accept_implausible"] = accept_implausible.strip()
    workspace = round_dir.parent
    from helix_engine.state.seals import baseline_problem

    changed = baseline_problem(workspace)  # before any check: a status check would close the round on it
    if changed is not None:
        return _fail("round", changed, guideline.submit_round_guideline(changed))
    path = workflow.state_path(workspace)
    if not path.exists():
        result = checks.check_round(round_dir, **kwargs)
        if result.passed:
            return _fail("round", workflow.STATE_MISSING, guideline.submit_round_guideline(workflow.STATE_MISSING))
        return result.payload(), 1
    held_out = _held_out_failure(round_dir, kwargs)
    try:
        with _locked(workspace) as rec:
            return _annotate(_submit_locked(path, round_dir, current_round, kwargs, held_out), rec, workspace)
    except files.WorkspaceBusy as exc:
        return _fail("round", str(exc), BUSY_GUIDELINE)


def _held_out_failure(round_dir: Path, kwargs: dict[str, Any]) -> tuple[bool, str] | None:
    """Held-out correctness (issue 27, item 3): a round the checker would pass is tested again, in
    a job, on inputs derived now (new seeds, shapes near the test's), against the accepted
    baseline. None when it passed; else (terminal, sentence): terminal when the outputs were
    compared and differ (the round is rejected), not when the job did not complete (a crash, a
    timeout, a busy device: the submit is refused and can be repeated)."""
    result = checks.check_round(round_dir, **kwargs)
    if not result.passed or result.operator_path is None:
        return None
    from helix_engine.eval.test import run_test
    from helix_engine.state.baseline import inspect_baseline

    reference = inspect_baseline(round_dir.parent).operator_path
    if reference is None:
        return None
    try:
        outcome = run_test(result.operator_path, ref_operator_file=reference, held_out=True)
    except HelixError as exc:
        return False, f"the held-out test could not run: {exc}; run submit-round again"
    if outcome.exit_code == 0:
        return None
    if outcome.comparison is None:
        return False, (f"the held-out test (job {outcome.job_id}) did not complete: "
                       f"{outcome.message or 'no comparison was made'}; run submit-round again")
    why = next((line.removeprefix("FAIL: ") for line in outcome.text.splitlines() if line.startswith("FAIL:")),
               "the outputs differ from the baseline's")
    return True, (f"{round_dir.name} fails on held-out inputs (new seeds, shapes near the test's; job "
                  f"{outcome.job_id}): {why}. A round that is right only on the visible test's inputs is not correct")


def _submit_locked(path: Path, round_dir: Path, current_arg: int | None, kwargs: dict[str, Any],
                   held_out: tuple[bool, str] | None = None) -> Payload:
    result = checks.check_round(round_dir, **kwargs)
    if result.passed and kwargs.get("accept_findings"):
        from helix_engine.state.lints import round_anti_cheat_findings
        from helix_engine.workspace.reading import read_text_safe

        source, _ = read_text_safe(result.operator_path, round_dir.parent) if result.operator_path else (None, None)
        if source and result.operator_path is not None and round_anti_cheat_findings(
                result.operator_path, source, round_dir.name):
            result.accepted.insert(0, f"held for review, accepted by the submitter: {kwargs['accept_findings']}")
    if result.passed:  # each accepted hold, with its reason: in the payload and in the ledger
        result.issues.extend(result.accepted)
    if result.passed and held_out is not None:  # measured correct on what it was shown, wrong on the rest
        result.status, result.stage = "fail", "held-out"
        result.terminal, result.issues = held_out[0], [held_out[1]]
        result.guideline = checks.fail_guideline("round", result.issues)
    if not result.passed and not result.terminal:
        return result.payload(), 1
    outcome: Literal["passed", "failed"] = "passed" if result.passed else "failed"
    try:
        state = workflow.load_workflow(path)
        n = workflow.completable_round(state, round_dir.name, current_arg)
    except (FileNotFoundError, ValueError) as exc:
        if not result.passed:
            # Terminal but not recordable (e.g. not the active round): report the check itself
            # plus why the state could not record it.
            payload = result.payload()
            payload["issues"] = payload["issues"] + [str(exc)]
            payload["guideline"] = (checks.fail_guideline("round", payload["issues"]) + " "
                                    + guideline.submit_round_guideline(str(exc)))
            return payload, 1
        return _fail("round", str(exc), guideline.submit_round_guideline(str(exc)))
    recovery.mark_submit(round_dir.parent, n, outcome)  # removed last: a kill before that leaves it
    if result.passed:
        cleanup.pass_cleanup(round_dir, result.round_state)
    try:
        problems = [str(p) for p in ledger.update_ledger(round_dir.parent, n, passed=result.passed,
                                                         issues=result.issues,
                                                         accepted=result.accepted if result.passed else None)]
    except Exception as exc:  # noqa: BLE001 - the ledger must never block recording the outcome
        problems = [f"opt-note.md: the ledger could not be updated ({type(exc).__name__}: {exc})"]
    for problem in problems:
        if result.passed:  # a pass stays a pass; the note says why the ledger is stale
            joiner = "; " if result.issues else " Notes: "
            result.issues.append(problem)
            result.guideline += joiner + problem
    entry = state.rounds[str(n)]
    entry.status = outcome
    entry.ended_at = workflow.utc_now()
    state.phase = "awaiting_round_start"
    state.current_round = None
    workflow.save_workflow(path, state)
    workflow.append_timing(round_dir.parent, n, "round_end", state.run_id)
    recovery.clear_submit(round_dir.parent)
    if result.passed:  # the files of record of a promoted round; a later rewrite of them is seen
        from helix_engine.state.seals import seal_submitted

        seal_submitted(round_dir.parent, round_dir)
    payload = result.payload()
    if not problems:  # helix's key: what the ledger now says of this round (upstream's keys unchanged)
        with contextlib.suppress(Exception):  # only ever informs: the submission is recorded
            found = ledger.recorded(round_dir.parent, n)
            if found is not None:
                payload["ledger"] = found
    return payload, 0 if result.passed else 1


# ------------------------------------------------------------------------- round-state form


def existing_round_state(round_dir: Path) -> dict[str, Any]:
    """round-state.json as a dict ({} when missing or unreadable)."""
    from helix_engine.workspace.reading import read_json_object

    path = Path(round_dir) / layout.ROUND_STATE
    loaded, _ = read_json_object(path, Path(round_dir).parent, what="round state", fix="")
    return loaded or {}


def write_round_state(round_dir: Path, derived: dict[str, Any] | None = None, **fields: Any) -> Path:
    """Create or update ``round-state.json`` from a form (the cockpit's submit form) or from
    ``helix round-state``.

    Precedence: defaults < the file's current keys < ``derived`` (measured from the workspace
    by state.round_fill) < ``fields`` (given explicitly; None means not given). Unknown keys
    already in the file are kept; the result must load as a RoundState, else a ValueError
    says which field to fix and nothing is written."""
    round_dir = Path(round_dir)
    path = round_dir / layout.ROUND_STATE
    data = existing_round_state(round_dir)
    defaults: dict[str, Any] = {
        "round": round_dir.name, "parent_round": "baseline", "hypothesis": "", "evidence_sources": [],
        "correctness_status": "not_run", "benchmark_status": "not_run", "summary_path": layout.SUMMARY,
        "opt_note_updated": False,
    }
    given = {k: v for k, v in fields.items() if v is not None}
    merged = {**defaults, **data, **(derived or {}), **given}
    if "comparison_target" in data and ("comparison_target_path" in given or "comparison_target_path" in (derived or {})):
        merged.pop("comparison_target")  # the legacy alias would contradict the new path
    try:
        RoundState.model_validate(merged)
    except Exception as exc:  # noqa: BLE001 - pydantic's text names the field
        raise ValueError(f"round-state.json would be invalid: {exc}") from None
    files.atomic_write_json(path, merged)
    return path
