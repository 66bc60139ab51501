"""The opt-note.md ledger, kept by the engine from measured numbers.

A submitted round gets its ``## Round N`` entry (written or refreshed in place, never twice) and
the single ``## Overall Summary`` is refreshed. Every line a person wrote elsewhere survives,
because the markdown writer edits only the field lines it owns. learned_lessons.md is never
touched: lessons are the agent's judgement, not bookkeeping.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from helix_engine.console import fmt_improvement, fmt_speedup
from helix_engine.state import measure
from helix_engine.workspace import files, layout
from helix_engine.workspace.markdown import (
    OptNote,
    OverallFields,
    RoundEntryFields,
    parse_opt_note,
    refresh_overall_summary,
    set_best_status,
    upsert_round,
)
from helix_engine.workspace.models import Problem
from helix_engine.workspace.reading import read_json_object, read_text_safe

CURRENT_BEST = "current best"
VALIDATED = "validated branch"
NOT_PROMOTED = "not promoted"


def _one_line(text: str, limit: int = 160) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def parent_label(parent: str) -> str:
    """``opt-round-3`` → ``round-3`` (the ledger's spelling); ``baseline`` stays."""
    if parent.strip().lower() == "baseline":
        return "baseline"
    number = layout.parse_round_ref(parent)
    return f"round-{number}" if number else parent


def result_text(m: measure.RoundMeasure | None, issues: list[str] | None = None,
                correctness: str | None = None, benchmark: str | None = None) -> str:
    """The honest one-line result: statuses, then the measured numbers or why there are none."""
    cs = correctness or (m.state.correctness_status if m else "not_run")
    bs = benchmark or (m.state.benchmark_status if m else "not_run")
    parts = [f"correctness {cs}", f"benchmark {bs}"]
    if m is not None and m.geomean is not None:
        source = m.comparison.metric_source if m.comparison else None
        parts.append(
            f"geomean speedup {fmt_speedup(m.geomean)}, avg improvement "
            f"{fmt_improvement(m.avg_improvement)} vs baseline ({source or m.metric})"
        )
    elif m is not None and m.comparison is not None and m.comparison.errors:
        parts.append("no comparison with the baseline: " + _one_line(m.comparison.errors[0], 120))
    if issues:
        parts.append("rejected: " + _one_line("; ".join(issues), 200))
    return "; ".join(parts)


def _workflow_statuses(workspace: Path) -> dict[int, str]:
    data, _ = read_json_object(Path(workspace) / layout.HELIX_DIR / layout.WORKFLOW_STATE, workspace,
                               what="workflow state", fix="")
    rounds = data.get("rounds", {}) if isinstance(data, dict) else {}
    if not isinstance(rounds, dict):
        return {}
    return {int(k): str(v.get("status")) for k, v in rounds.items() if isinstance(v, dict) and k.isdigit()}


def update_ledger(workspace: Path, n: int, *, passed: bool, issues: list[str] | None = None) -> list[Problem]:
    """Write round ``n``'s entry and refresh the Overall Summary; set opt_note_updated.

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
    baseline = measure.baseline_records(workspace)
    measures: dict[int, measure.RoundMeasure] = {}
    for k in measure.round_numbers(workspace):
        m = measure.measure_round(workspace, k, baseline)
        if m is not None:
            measures[k] = m
    eligible = [m for k, m in measures.items() if m.completed and statuses.get(k) != "failed" and m.geomean is not None]
    best = measure.best_round(eligible)
    best_n = best.number if best else None
    eligible_numbers = {m.number for m in eligible}

    def status_of(k: int) -> str:
        m = measures.get(k)
        if k == best_n:
            return CURRENT_BEST
        if m is not None and k in eligible_numbers and (m.geomean or 0) > 1.0:
            return VALIDATED
        return NOT_PROMOTED

    current = measures.get(n)
    theme = _one_line(current.state.hypothesis) if current else "(no round-state.json)"
    parent = parent_label(current.state.parent_round) if current else "unknown"
    upsert_round(note, RoundEntryFields(n, parent, theme, result_text(current, None if passed else issues),
                                        status_of(n)))
    for entry in note.rounds:
        if entry.number != n and entry.best_status and CURRENT_BEST in entry.best_status.lower() \
                and entry.number != best_n:
            set_best_status(note, entry.number, status_of(entry.number))
    if best_n is not None:
        set_best_status(note, best_n, CURRENT_BEST)
    refresh_overall_summary(note, _overall(note, measures, eligible, best, statuses, status_of))
    files.atomic_write_text(path, note.render())
    _mark_note_updated(workspace / layout.round_dir_name(n))
    return []


def _overall(note: OptNote, measures: dict[int, measure.RoundMeasure], eligible: list[measure.RoundMeasure],
             best: measure.RoundMeasure | None, statuses: dict[int, str], status_of) -> OverallFields:  # noqa: ANN001
    validated = [f"round-{m.number}" for m in sorted(eligible, key=lambda m: m.number)
                 if status_of(m.number) == VALIDATED]
    submitted = sum(1 for s in statuses.values() if s in ("passed", "failed"))
    if best is not None and (best.geomean or 0) > 1.0:
        outcome = (
            f"round-{best.number} is the fastest validated round: {fmt_speedup(best.geomean)} geomean speedup, "
            f"{fmt_improvement(best.avg_improvement)} avg improvement vs baseline, after {submitted} submitted "
            f"round(s) ({len(eligible)} validated)."
        )
    elif best is not None:
        outcome = (
            f"no validated round is faster than the baseline yet; the best is round-{best.number} at "
            f"{fmt_speedup(best.geomean)} geomean after {submitted} submitted round(s)."
        )
    else:
        outcome = f"no validated round with a baseline comparison yet after {submitted} submitted round(s)."
    points: list[tuple[int, str]] = []
    for m in sorted(eligible, key=lambda m: m.number):
        if status_of(m.number) in (CURRENT_BEST, VALIDATED):
            points.append((m.number, f"{_one_line(m.state.hypothesis, 80)}: {fmt_speedup(m.geomean)} geomean, "
                                     f"{fmt_improvement(m.avg_improvement)} avg vs baseline"))
    return OverallFields(
        final_best_round=f"round-{best.number}" if best else "none",
        avg_improvement=fmt_improvement(best.avg_improvement) if best else "unknown",
        geomean_speedup=fmt_speedup(best.geomean) if best else "unknown",
        validated_branches=", ".join(validated) if validated else "none",
        outcome=outcome,
        key_points=points,
    )


def _mark_note_updated(round_dir: Path) -> None:
    """Set ``opt_note_updated: true`` keeping every other key (and its order) as it was."""
    path = round_dir / layout.ROUND_STATE
    data, _ = read_json_object(path, round_dir.parent, what="round state", fix="")
    if isinstance(data, dict) and data.get("opt_note_updated") is not True:
        data["opt_note_updated"] = True
        files.atomic_write_json(path, data)
