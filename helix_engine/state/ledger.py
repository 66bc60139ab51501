"""The opt-note.md ledger, kept by the engine from measured numbers.

A submitted round gets its ``## Round N`` entry (written or refreshed in place, never twice) and
the single ``## Overall Summary`` is refreshed. The engine owns the measured lines (Result, Best
status, the summary's Final best round, Avg improvement, Geomean speedup, Validated branches,
Outcome, and the key points it wrote itself) and rewrites them from the evaluation core and the
promotion rule, the same numbers `helix status` and the cockpit show. Every other line is the
agent's (Parent, Theme, Summary, Attempts, Next step, its key points, prose): written only when
missing, never rewritten. learned_lessons.md is never touched.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from helix_engine.console import fmt_improvement, fmt_speedup
from helix_engine.perf.results import (
    CURRENT_BEST,
    NOT_PROMOTED,
    VALIDATED,
    Promotion,
    RoundEvaluation,
    RoundPromotion,
    SpeedupEstimate,
)
from helix_engine.perf.round_number import RoundNumber, round_number
from helix_engine.state import measure
from helix_engine.workspace import files, layout
from helix_engine.workspace.markdown import (
    OverallFields,
    RoundEntryFields,
    parse_opt_note,
    refresh_overall_summary,
    set_best_status,
    upsert_round,
)
from helix_engine.workspace.models import Problem, RoundView
from helix_engine.workspace.reading import read_json_object, read_text_safe

__all__ = ["CURRENT_BEST", "NOT_PROMOTED", "VALIDATED", "parent_label", "result_text", "update_ledger"]


def _one_line(text: str, limit: int = 160) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def parent_label(parent: str) -> str:
    """``opt-round-3`` → ``round-3`` (the ledger's spelling); ``baseline`` stays."""
    if parent.strip().lower() == "baseline":
        return "baseline"
    number = layout.parse_round_ref(parent)
    return f"round-{number}" if number else parent


def _geomean_text(estimate: SpeedupEstimate) -> str:
    """``1.50x`` or ``1.50x [1.45x, 1.55x]``: the point beside its own interval."""
    text = fmt_speedup(estimate.point)
    if estimate.interval is not None:
        text += f" [{estimate.interval.low:.2f}x, {estimate.interval.high:.2f}x]"
    return text


def _measured(view: RoundView | None, promotion: RoundPromotion | None) -> tuple[RoundEvaluation | None,
                                                                                RoundNumber | None]:
    """The round's comparison with the baseline and its number (perf/round_number.py: the one every
    screen shows, its geomean and average improvement from one comparison)."""
    if view is None or view.comparison is None:
        return None, None
    return view.comparison, round_number(view.comparison, promotion)


def _number_text(number: RoundNumber) -> str:
    """``7.11x [6.08x, 8.37x] geomean speedup, +84.9% avg improvement (paired run)``."""
    return (f"{_geomean_text(number.geomean)} geomean speedup, {fmt_improvement(number.avg_improvement_pct)} avg "
            f"improvement ({number.measured})")


def result_text(view: RoundView | None, issues: list[str] | None = None, *,
                promotion: RoundPromotion | None = None, accepted: list[str] | None = None) -> str:
    """The honest one-line result: statuses, then the measured numbers or why there are none
    (``promotion``: the round's promotion entry, whose geomean carries the interval), then the
    holds for review the submitter accepted, with the reasons given (``accepted``)."""
    state = view.state if view is not None else None
    cs = state.correctness_status if state is not None else "not_run"
    bs = state.benchmark_status if state is not None else "not_run"
    parts = [f"correctness {cs}", f"benchmark {bs}"]
    comparison, number = _measured(view, promotion)
    if comparison is not None and number is not None:
        parts.append(
            f"geomean speedup {_geomean_text(number.geomean)}, avg improvement "
            f"{fmt_improvement(number.avg_improvement_pct)} vs baseline ({number.measured}, {comparison.metric_source})"
        )
    elif comparison is not None and comparison.errors:
        parts.append("no comparison with the baseline: " + _one_line(comparison.errors[0], 120))
    if issues:
        parts.append("rejected: " + _one_line("; ".join(issues), 200))
    if accepted:
        parts.append("accepted for review: " + _one_line("; ".join(accepted), 400))
    return "; ".join(parts)


def _workflow_statuses(workspace: Path) -> dict[int, str]:
    data, _ = read_json_object(Path(workspace) / layout.HELIX_DIR / layout.WORKFLOW_STATE, workspace,
                               what="workflow state", fix="")
    rounds = data.get("rounds", {}) if isinstance(data, dict) else {}
    if not isinstance(rounds, dict):
        return {}
    return {int(k): str(v.get("status")) for k, v in rounds.items() if isinstance(v, dict) and k.isdigit()}


def recorded(workspace: Path, n: int) -> dict[str, str | None] | None:
    """What opt-note.md now records for round ``n``: its Best status and Result lines as written,
    and the final best round; None when the note or the entry cannot be read. Read back from the
    file, so submit-round reports the ledger's own words and numbers, not a second computation."""
    text, problem = read_text_safe(Path(workspace) / layout.OPT_NOTE, Path(workspace))
    if problem is not None or not text:
        return None
    note = parse_opt_note(text, layout.OPT_NOTE)
    entry = next((r for r in note.rounds if r.number == n), None)
    if entry is None:
        return None
    return {"round": f"round-{n}", "best_status": entry.best_status, "result": entry.result,
            "final_best_round": note.final_best_round}


def update_ledger(workspace: Path, n: int, *, passed: bool, issues: list[str] | None = None,
                  accepted: list[str] | None = None) -> list[Problem]:
    """Write round ``n``'s entry and refresh the Overall Summary; set opt_note_updated.
    ``accepted``: the holds for review the submitter accepted for this round, each with its
    reason (--accept-findings, --accept-implausible), kept on its Result line.

    ``passed`` is the outcome being recorded for round n (its workflow status may not be
    written yet). Returns problems that stopped the update (an unreadable opt-note.md is left
    alone rather than overwritten)."""
    workspace = Path(workspace)
    path = workspace / layout.OPT_NOTE
    text = ""
    if os.path.lexists(path):
        content, problem = read_text_safe(path, workspace)
        if problem is not None:
            return [Problem(problem.file, problem.message + "; the ledger was not updated", problem.line, "warning")]
        text = content or ""
    if not text:
        operator, _ = layout.discover_operator(workspace)
        name = layout.operator_stem(operator) if operator else workspace.name
        text = f"# Optimization notes for {name}\n\n"
    note = parse_opt_note(text, layout.OPT_NOTE)
    statuses = _workflow_statuses(workspace)
    statuses[n] = "passed" if passed else "failed"
    snap, ev = measure.evaluated(workspace, statuses={n: statuses[n]})
    for k, view in snap.rounds.items():  # the views as this outcome makes them
        result = ev.results.get(k)
        view.comparison = result.comparison if result is not None else None
    promotion = ev.promotion
    current = snap.rounds.get(n)
    state = current.state if current is not None else None
    theme = _one_line(state.hypothesis) if state is not None else "(no round-state.json)"
    parent = parent_label(state.parent_round) if state is not None else "unknown"
    upsert_round(note, RoundEntryFields(n, parent, theme, result_text(current, None if passed else issues,
                                                                 promotion=promotion.rounds.get(n),
                                                                 accepted=accepted),
                                        promotion.status_of(n)))
    for entry in note.rounds:  # Best status is the engine's line: every entry follows the rule
        if entry.number != n and entry.number in snap.rounds:
            set_best_status(note, entry.number, promotion.status_of(entry.number))
    submitted = sum(1 for s in statuses.values() if s in ("passed", "failed"))
    refresh_overall_summary(note, _overall(snap.rounds, promotion, submitted))
    files.atomic_write_text(path, note.render())
    _mark_note_updated(workspace / layout.round_dir_name(n))
    return []


def _overall(views: dict[int, RoundView], promotion: Promotion, submitted: int) -> OverallFields:
    validated = [f"round-{k}" for k in promotion.validated]
    best = promotion.best_round
    margin = f"{promotion.noise_margin:.0%}"
    points: list[tuple[int, str]] = []
    for k in sorted(promotion.rounds):
        if promotion.status_of(k) not in (CURRENT_BEST, VALIDATED) or k not in views:
            continue
        comparison, number = _measured(views[k], promotion.rounds.get(k))
        state = views[k].state
        if comparison is None or number is None or state is None:
            continue
        point = f"{_one_line(state.hypothesis, 80)}: {_number_text(number)} vs baseline"
        points.append((k, point))
    if best is None:
        return OverallFields(
            final_best_round="baseline", avg_improvement="+0.0%", geomean_speedup="1.00x",
            validated_branches=", ".join(validated) if validated else "none",
            outcome=(f"no round is faster than the baseline beyond the {margin} noise margin after "
                     f"{submitted} submitted round(s); the baseline stays the best."),
            key_points=points,
        )
    comparison, number = _measured(views[best], promotion.rounds.get(best))
    assert comparison is not None and number is not None
    return OverallFields(
        final_best_round=f"round-{best}",
        avg_improvement=fmt_improvement(number.avg_improvement_pct),
        geomean_speedup=fmt_speedup(number.point),  # upstream parses this line: the number only (Outcome says the rest)
        validated_branches=", ".join(validated) if validated else "none",
        outcome=(f"round-{best} is the current best: {_number_text(number)} vs baseline, faster "
                 f"beyond the {margin} noise margin, after {submitted} submitted round(s) "
                 f"({len(validated)} other validated)."),
        key_points=points,
    )


def _mark_note_updated(round_dir: Path) -> None:
    """Set ``opt_note_updated: true`` keeping every other key (and its order) as it was."""
    path = round_dir / layout.ROUND_STATE
    data, _ = read_json_object(path, round_dir.parent, what="round state", fix="")
    if isinstance(data, dict) and data.get("opt_note_updated") is not True:
        data["opt_note_updated"] = True
        files.atomic_write_json(path, data)
