"""What each command tells the agent to do next: the hard rules, the guideline texts chosen by
a substring of the error (upstream's rule), the min-speedup target, the local-optimum warning and
the pass guideline of submit-round with its ``next_option``."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from helix_engine.state import lints, measure
from helix_engine.state.checks import Artifacts, CheckResult
from helix_engine.state.goals import MIN_SPEEDUP_ENV, Goals, TargetCheck, target_check
from helix_engine.workspace import layout
from helix_engine.workspace.models import RoundState

WINDOW_ENV = "HELIX_OPTIMIZE_LOCAL_OPTIMUM_WINDOW"
MAX_GAIN_ENV = "HELIX_OPTIMIZE_LOCAL_OPTIMUM_MAX_GEOMEAN_GAIN"
DELETE_PT_ENV = "HELIX_OPTIMIZE_DELETE_PT_FILES"

HARD_RULES: tuple[str, ...] = (
    "Keep exactly one optimize round active at a time.",
    "A round is one code-changing optimization attempt, followed by canonical validation (run-test, run-bench, compare-perf).",
    "Once a round has its first canonical run-bench plus compare-perf result, stop editing that round; carry new ideas "
    "into the next round.",
    "Never script a series of rounds that only change parameters to advance the session faster: that is cheating and "
    "is forbidden.",
    "Never use agents or subagents to work on several rounds in parallel while the current round is in flight.",
    "Do not turn a round into a blind parameter sweep; when parameters need tuning, use the `autotune` optimization pattern.",
    "Do not spend rounds on hand-tuned launch or tile sweeps unless existing evidence clearly points that way.",
    "Before editing code, choose the operator, kernel path or wrapper bottleneck that anchors this round.",
    "Before editing code, decide whether the evidence at hand is enough or whether profiling, IR or compiler-source "
    "analysis must come first.",
    "Keep the round narrow: one coherent hypothesis, one active round, one evidence-backed direction of change.",
)

RESTART = (
    "The temporary optimize workflow state is invalid. Stop this attempt and restart the optimize "
    "session so the runner can rebuild the temporary workflow state."
)


def seal_guideline(message: str) -> str | None:
    """What to do about a refusal of state/seals.py (the accepted baseline, or a submitted round,
    changed since it was sealed); None for any other message."""
    if "the accepted baseline is not what was accepted" in message:
        return ("baseline/ or its harness files changed after the baseline was accepted, so nothing can be judged "
                "against it. Put them back as they were accepted, or re-establish the baseline with `helix "
                "prepare-baseline --force` (it snapshots, tests and benches the operator again), then retry.")
    if "is not what was submitted" in message:
        return ("A submitted round's files of record changed after submit-round sealed them. Put them back as they "
                "were submitted, or build on another round (`helix start-round --parent-round ...`); a new "
                "measurement goes into a new round.")
    return None


def start_round_guideline(message: str) -> str:
    sealed = seal_guideline(message)
    if sealed is not None:
        return sealed
    if "workflow state is not available" in message or ".helix/state.json" in message:
        return ("Optimize workflow state is unavailable. Run `helix submit-baseline --baseline-dir baseline` "
                "to repair session state from `baseline/`, then retry `helix start-round`.")
    if "baseline.status=passed" in message:
        return ("Baseline has not been accepted yet. Repair `baseline/` and run `helix submit-baseline` "
                "until it passes, then run `helix start-round` again.")
    if "cannot reopen completed round" in message:
        return "This round is already completed. Move to the next incomplete `opt-round-N/` instead of reopening it."
    if "numbered in sequence" in message:
        return ("Rounds are numbered in sequence. Start the round named in the issue (the next number "
                "after the last terminal round), not a later one.")
    if "workflow phase is round_active" in message:
        return "Another round is already active. Finish that round before starting a different round."
    if "workflow state" in message:
        return RESTART
    return "This start-round request could not be applied. Repair the optimize session and retry."


def set_state_guideline(message: str) -> str:
    if "workflow state is not available" in message or ".helix/state.json" in message:
        return ("Optimize workflow state is unavailable. Run `helix submit-baseline` to repair session "
                "state, then reopen the intended `opt-round-N/` with `helix start-round` before retrying "
                "`helix set-current-round-state`.")
    if "no optimize round is currently active" in message:
        return "No optimize round is currently active. Start the next round first before changing round strategy state."
    if "state update would be a no-op" in message:
        return ("This state update would be a no-op. Keep the current round state or change the strategy "
                "or analysis policy before retrying.")
    if "analysis_policy cannot become shallower" in message:
        return ("The requested analysis_policy would become shallower. Keep the current or a deeper "
                "analysis policy within the same round.")
    if "set-current-round-state requires" in message:
        return "Provide --round-strategy and/or --analysis-policy together with --reason."
    if "workflow state" in message:
        return RESTART
    return "This set-current-round-state request could not be applied. Repair the optimize session and retry."


def submit_round_guideline(message: str) -> str:
    sealed = seal_guideline(message)
    if sealed is not None:
        return sealed
    if "already submitted" in message:
        return already_submitted_guideline(message)
    if "workflow state is not available" in message or ".helix/state.json" in message:
        return ("Optimize workflow state is unavailable. Run `helix submit-baseline` to repair session "
                "state, then reopen this `opt-round-N/` with `helix start-round` before retrying "
                "`helix submit-round`.")
    if ("workflow phase is awaiting_round_start" in message or "current_round=None" in message
            or "missing workflow state entry" in message):
        return ("This round has not been formally started yet. Run `helix start-round` for this "
                "`opt-round-N/` before running `helix submit-round`.")
    if "cannot complete non-active round" in message or "workflow state current_round=" in message \
            or "--current-round=" in message:
        return ("The requested round is not the active workflow round. Finish the active round, or run "
                "`helix start-round` to open the intended round before submitting it.")
    if "workflow state" in message:
        return RESTART
    return "Round validation passed, but workflow-state completion failed. Repair the optimize session before continuing."


def already_submitted_guideline(message: str) -> str:
    """The round was submitted before: say how it ended as workflow.completable_round's message
    says it ("... already submitted and passed|failed"), never "passed" for a rejected round."""
    found = re.search(r"already submitted and (\w+)", message)
    status = found.group(1) if found else None
    if status == "passed":
        return ("This round was already submitted and passed (another submit-round call got there first). "
                "Do not submit it again; read its result with `helix status`, then run `helix start-round` "
                "for the next round if the session continues.")
    if status == "failed":
        return ("This round was already submitted and failed: submit-round rejected it and closed it, and the "
                "ledger records it as not promoted. A submitted round is not reopened or submitted again; read "
                "why it failed with `helix status`, then carry the fix into the next round with "
                "`helix start-round` if the session continues.")
    return ("This round was already submitted. Do not submit it again; read its result with `helix status`, "
            "then run `helix start-round` for the next round if the session continues.")


def submit_baseline_guideline(message: str) -> str:
    sealed = seal_guideline(message)
    if sealed is not None:
        return sealed
    if "workflow state" in message:
        return ("The temporary optimize workflow state is invalid. Do not continue to round work. Ask "
                "the runner to restart the optimize session so the workflow state can be rebuilt cleanly.")
    return "Baseline validation passed, but workflow-state advancement failed. Restart the optimize session before continuing."


def missing_round_dir_guideline(name: str) -> str:
    return (f"round check requires fixes: missing round directory: {name}. Start it with `helix start-round "
            f"--round-dir {name} ...` (or submit the round that is active) before submitting it.")


MIN_SPEEDUP_INVALID = (
    "The optimize session speedup target is invalid. Stop this attempt and restart the optimize "
    "session so the runner can set a valid target, or rerun `helix submit-round` only after "
    f"{MIN_SPEEDUP_ENV} is repaired."
)


def local_optimum_config() -> tuple[int, float]:
    """(window ≥ 2, band ≥ 0); invalid values fall back to the defaults (3, 0.02)."""
    window, gain = 3, 0.02
    try:
        value = int(os.environ.get(WINDOW_ENV, "3"))
        window = value if value >= 2 else 3
    except ValueError:
        pass
    try:
        band = float(os.environ.get(MAX_GAIN_ENV, "0.02"))
        gain = band if band >= 0 and math.isfinite(band) else 0.02
    except ValueError:
        pass
    return window, gain


def local_optimum_warning(workspace: Path, n: int, baseline: list | None) -> str | None:
    """Advisory: the last w rounds (consecutive, ending at N) moved the geomean by ≤ g each."""
    window, band = local_optimum_config()
    numbers = [k for k in measure.round_numbers(workspace) if k <= n]
    if len(numbers) < window or not baseline:
        return None
    recent = numbers[-window:]
    if recent[-1] != n or any(b != a + 1 for a, b in zip(recent, recent[1:])):
        return None
    samples: list[tuple[int, float, str]] = []
    ids: set[str] | None = None
    for k in recent:
        m = measure.measure_round(workspace, k, baseline)
        if m is None or m.comparison is None or m.geomean is None:
            return None
        case_ids = {c.latency_id for c in m.comparison.cases}
        if ids is not None and case_ids != ids:
            return None
        ids = case_ids
        samples.append((k, m.geomean, m.metric))
    if len({metric for _, _, metric in samples}) != 1:
        return None
    gains = [b[1] - a[1] for a, b in zip(samples, samples[1:])]
    if not all(abs(g) <= band for g in gains):
        return None
    basis = "mixed fallback" if samples[0][2] == "auto" else samples[0][2]
    gains_text = ", ".join(f"{g:+.2f}x" for g in gains)
    return (
        "recent rounds show only marginal baseline-relative geomean speedup gains on the same metric "
        f"basis ({basis}; round-{samples[0][0]} -> round-{samples[-1][0]}: {gains_text}); optimization "
        "may be stagnating in the current direction and may be stuck in a local optimum. Review earlier "
        "rounds and consider resuming from a round before this flat sequence to explore a different "
        "optimization path."
    )


def with_notes(text: str, notes: list[str]) -> str:
    return f"{text} Notes: {'; '.join(notes)}" if notes else text


def build_pass(round_dir: Path, state: RoundState, found: Artifacts, baseline_perf: Path | None, source: str,
               *, current_round: int | None, final_round: int | None, optimize_target: str | None,
               min_speedup: float | None, goals: Goals | None = None) -> CheckResult:
    """The pass result: warnings (kernel fallback, local optimum, hard-rule lints) as issues,
    and the guideline per the rules of upstream-state §2; with session goals (.helix/goals.json)
    and no batch flags, helix's continue/stop signal (``goal_guideline``)."""
    workspace = round_dir.parent
    n = layout.round_number(round_dir.name) or 0
    warnings: list[str] = []
    if optimize_target == "kernel" and state.effective_metric_source in ("total-op", "mixed"):
        warnings.append(
            "kernel optimize target fell back to "
            f"effective_metric_source={state.effective_metric_source}; the round may still participate "
            "in best-round selection, but review the comparison basis."
        )
    baseline = measure.baseline_records(workspace)
    flat = local_optimum_warning(workspace, n, baseline)
    if flat:
        warnings.append(flat)
    if found.operator_path is not None:
        found_lints = lints.lint_round(round_dir, operator=found.operator_path, source=source, baseline_records=baseline)
    else:
        found_lints = lints.lint_source(source, round_dir.name, backend=lints.target_backend(workspace, baseline))
    warnings.extend(str(p) for p in found_lints)
    goals = goals if goals is not None and goals.any else None
    # the round passes this check, so submit-round records it as passed: it counts (a round never
    # accepted by submit-round is never the promoted best)
    promoted = measure.promoted_best(workspace, statuses={n: "passed"}) \
        if min_speedup is not None or goals is not None else None
    estimate = promoted.vs_baseline if promoted is not None else None
    check = target_check(estimate, min_speedup, from_env=os.environ.get(MIN_SPEEDUP_ENV) is not None)
    best, met = check.best, check.met
    stop = check.stop_text()
    prefix = "round check passed. " + check.not_met_text()
    next_option: str | None = None
    if met:
        text = stop
    elif current_round is not None and final_round is not None:
        if current_round < final_round:
            next_option = f"opt-round-{current_round + 1}"
            text = (
                f"{prefix}Round {current_round}/{final_round} in the current worker batch is complete. "
                f"Next round: {next_option}. Run `helix start-round --round-dir {next_option}` "
                "before beginning the next round."
            )
        else:
            text = f"{prefix}This round satisfied the current worker batch target."
    elif goals is not None:
        text, next_option = goal_guideline(prefix, n, goals.max_rounds)
    else:
        text = "round check passed"
    signal = None if goals is None else stop_signal(
        n, check, goals, stop=next_option is None, batch=current_round is not None and final_round is not None)
    return CheckResult(
        status="pass", issues=warnings, guideline=with_notes(text, warnings), next_option=next_option,
        stage=None, terminal=True, round_state=state, operator_path=found.operator_path,
        perf_path=found.perf_path, baseline_perf_path=baseline_perf, lints=found_lints, best_speedup=best,
        stop_signal=signal,
    )


def goal_guideline(prefix: str, n: int, max_rounds: int | None) -> tuple[str, str | None]:
    """The signal from the session goals when no runner passed --current-round/--final-round:
    stop after round ``max_rounds``, else continue with the next round (the target speedup was
    checked before: a met target is upstream's stop message)."""
    if max_rounds is not None and n >= max_rounds:
        return (f"{prefix}Maximum rounds reached: opt-round-{n} is round {n} of at most {max_rounds} "
                "(.helix/goals.json). Stop the optimize session now instead of opening another round."), None
    limit = f" (round {n} of at most {max_rounds})" if max_rounds is not None else ""
    next_option = f"opt-round-{n + 1}"
    return (f"{prefix}Continue the optimize session: opt-round-{n} is complete{limit}. Next round: {next_option}. "
            f"Run `helix start-round --round-dir {next_option}` before beginning the next round."), next_option


def stop_signal(n: int, check: TargetCheck, goals: Goals, *, stop: bool, batch: bool) -> dict[str, object]:
    """helix's machine-readable form of the guideline's decision (a key after upstream's)."""
    best, target = check.best, check.target
    if check.met:
        reason = "target-speedup"
    elif batch:
        reason = "batch-complete" if stop else "batch-continues"
    elif stop:
        reason = "max-rounds"
    else:
        reason = "continue"
    from_env = os.environ.get(MIN_SPEEDUP_ENV) is not None
    return {
        "decision": "stop" if stop else "continue", "reason": reason, "round": n,
        "best_geomean_speedup": best, "target_speedup": target,
        "target_source": None if target is None else (MIN_SPEEDUP_ENV if from_env else ".helix/goals.json"),
        "max_rounds": goals.max_rounds,
        "best_geomean_interval": list(check.interval) if check.interval is not None else None,
        "target_judged_by": check.judged_by,
    }

