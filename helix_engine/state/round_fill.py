"""What ``helix round-state`` derives from the workspace, so agents stop hand-writing
round-state.json with wrong paths or a guessed metric source.

Measured fields come from files (the round's perf file compared with the canonical baseline
perf file through perf.compare), statuses from the round's latest run-test / run-bench jobs
in .helix/jobs, the parent from what start-round recorded in .helix/state.json (the best
completed round only for a round opened before helix recorded parents), ``profile_dir`` /
``ir_dir`` from the round's profile/ and ir/ folders when they hold output, ``perf_analysis_path``
when perf-analysis.md is there, ``opt_note_updated`` when opt-note.md has the round's entry. Writing stays in
lifecycle.write_round_state; the summary skeleton is written only when summary.md is missing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.perf.results import RoundEvaluation
from helix_engine.perf.round_number import round_number
from helix_engine.workspace import files, layout

#: job status → round-state status. Only a job that ran to a verdict counts: queued/running have
#: none yet, and a cancelled or lost job says nothing about the code (a bench that passed stays
#: the round's answer when a later one is cancelled or its process vanishes).
_JOB_STATUS: dict[str, str] = {"passed": "passed", "failed": "failed", "timeout": "failed"}
#: What counts as a round's evidence source, and the file or folder that shows it exists.
EVIDENCE_SOURCES: tuple[str, ...] = ("benchmark", "profile", "ir", "compiler-source")
COMPILER_ANALYSIS = "compiler-analysis.md"
#: The round's deeper diagnosis (the skill's analyze-round-performance output), optional in round-state.
PERF_ANALYSIS = "perf-analysis.md"


@dataclass
class Derived:
    """Fields derived for one round, and how (for the printed report)."""

    fields: dict[str, Any] = field(default_factory=dict)
    comparison: RoundEvaluation | None = None
    baseline_perf: Path | None = None
    notes: list[str] = field(default_factory=list)


def round_workspace(round_dir: Path) -> tuple[Path, int]:
    """(workspace, N) of an existing ``opt-round-N`` folder, else a sentence saying what to do."""
    round_dir = Path(round_dir)
    n = layout.round_number(round_dir.name)
    if n is None:
        raise HelixError(f"{round_dir} is not a round folder; pass --round-dir opt-round-N")
    if not round_dir.is_dir():
        raise HelixError(f"{round_dir} does not exist; open it first with `helix start-round --round-dir "
                         f"{round_dir.name} ...`")
    return round_dir.resolve().parent, n


def _operator_stem(ws: Path, round_dir: Path) -> str | None:
    op, _ = layout.discover_operator(ws)
    if op is not None:
        return layout.operator_stem(op)
    found = sorted(round_dir.glob("opt_*.py"))
    return found[0].stem[len("opt_"):] if len(found) == 1 else None


def job_status(ws: Path, round_name: str, kind: str) -> str | None:
    """The round's latest ``kind`` job that ran to a verdict, as passed/failed; None when none did."""
    from helix_engine.jobs.registry import list_jobs

    return latest_verdict(((job.kind, job.round, job.status) for job in list_jobs(ws)), round_name, kind)


def latest_verdict(jobs: Iterable[tuple[str, str | None, str]], round_name: str, kind: str) -> str | None:
    """The rule behind ``job_status`` over (kind, round, status) triples, newest first: the
    cockpit applies it to the jobs it already follows."""
    for job_kind, job_round, status in jobs:
        if job_kind == kind and job_round == round_name and status in _JOB_STATUS:
            return _JOB_STATUS[status]
    return None


def evidence_found(round_dir: Path, existing: dict[str, Any] | None = None) -> list[str]:
    """The evidence sources the round folder holds: ``benchmark`` (its perf file), ``profile``
    (a profile folder with output in it), ``ir`` (an IR folder with stage dumps), ``compiler-source``
    (compiler-analysis.md). Declared ``profile_dir`` / ``ir_dir`` are looked at first."""
    round_dir = Path(round_dir)
    existing = existing or {}
    found: list[str] = []
    ws = round_dir.resolve().parent
    stem = _operator_stem(ws, round_dir)
    perf = existing.get("perf_artifact") or (layout.round_perf_name(stem) if stem else None)
    if perf and _plain_file(round_dir / str(perf)):
        found.append("benchmark")
    if _has_output(round_dir, existing.get("profile_dir"), "profile"):
        found.append("profile")
    if _has_output(round_dir, existing.get("ir_dir"), "ir"):
        found.append("ir")
    if _plain_file(round_dir / COMPILER_ANALYSIS):
        found.append("compiler-source")
    return found


def _plain_file(path: Path) -> bool:
    try:
        return path.is_file() and not path.is_symlink() and path.stat().st_size > 0
    except OSError:
        return False


def _has_output(round_dir: Path, declared: Any, default: str) -> bool:
    """A folder inside the round (not a link) with at least one non-empty file in it (checks a
    few hundred entries at most: profiler dumps can hold thousands)."""
    names = [str(declared), default] if isinstance(declared, str) and declared.strip() else [default]
    root = round_dir.resolve()
    for name in names:
        folder = round_dir / name
        try:
            if folder.is_symlink() or not folder.is_dir() or root not in folder.resolve().parents:
                continue
            for seen, (current, dirs, files_here) in enumerate(os.walk(folder)):
                dirs[:] = [d for d in dirs if not d.startswith(".")]  # staging folders of unfinished runs
                if any(_plain_file(Path(current) / f) for f in files_here[:200] if not f.startswith(".")):
                    return True
                if seen > 200:
                    break
        except OSError:
            continue
    return False


def compare_with_baseline(ws: Path, perf: Path, baseline_perf: Path) -> RoundEvaluation:
    """compare-perf's comparison (the evaluation core), with intervals when samples exist, and the
    paired run's beside it when the round's perf file has a current one against the baseline
    operator (what round_number then reads: the number every screen shows)."""
    from helix_engine.perf.artifact import read_perf
    from helix_engine.perf.evaluation import evaluate
    from helix_engine.perf.paired import attach_paired
    from helix_engine.state.baseline import inspect_baseline

    base, _ = read_perf(baseline_perf, ws)
    cand, _ = read_perf(perf, ws)
    found = evaluate(base, cand, rule="compare-perf", metric="auto", with_ci=True,
                     baseline_name=str(baseline_perf), compare_name=str(perf))
    attach_paired(found, perf, inspect_baseline(ws).operator_path, cand, workspace=ws, ci_statistics=("mean",))
    return found


def _best_completed_round(ws: Path, exclude: int) -> str:
    """The promotion rule's current best among the other rounds, else the baseline."""
    from helix_engine.state import measure

    best = measure.promoted_best(ws, exclude={exclude})
    return layout.round_dir_name(best.round) if best is not None else layout.BASELINE_DIR


def recorded_parent(ws: Path, n: int) -> str | None:
    """The parent start-round recorded for round N in .helix/state.json (the round was built
    from it, whatever became best since); None when none was recorded or the state is unreadable."""
    from helix_engine.state import workflow

    try:
        state = workflow.load_workflow(workflow.state_path(ws))
    except (FileNotFoundError, ValueError, OSError):
        return None
    entry = state.rounds.get(str(n))
    parent = getattr(entry, "parent_round", None) if entry is not None else None
    return parent if isinstance(parent, str) and parent.strip() else None


#: round-state.json field → the folder helix's own commands write it to (profile-bench's default
#: ``<operator dir>/profile``; ``ir capture --ir-dir opt-round-N/ir`` as the skill shows).
EVIDENCE_DIRS: dict[str, str] = {"profile_dir": "profile", "ir_dir": "ir"}


def derive(round_dir: Path, existing: dict[str, Any]) -> Derived:
    """Defaults for round-state.json from the workspace (the caller's arguments win)."""
    from helix_engine.state import baseline as base

    round_dir = Path(round_dir)
    ws, n = round_workspace(round_dir)
    out = Derived()
    stem = _operator_stem(ws, round_dir)
    perf = round_dir / layout.round_perf_name(stem) if stem else None
    out.baseline_perf = base.baseline_perf_path(ws) or (
        layout.baseline_dir(ws) / layout.baseline_perf_name(stem) if stem else None)
    if out.baseline_perf is not None and out.baseline_perf.is_file():
        out.fields["comparison_target_path"] = Path(os.path.relpath(out.baseline_perf, round_dir.resolve())).as_posix()
    else:
        out.notes.append("no baseline perf file: run `helix prepare-baseline` first")
    if perf is not None and perf.is_file():
        out.fields["perf_artifact"] = perf.name
        if out.baseline_perf is not None and out.baseline_perf.is_file():
            out.comparison = compare_with_baseline(ws, perf, out.baseline_perf)
            if out.comparison.metric_source and not out.comparison.errors:
                out.fields["effective_metric_source"] = out.comparison.metric_source
    else:
        out.notes.append(f"no {perf.name if perf else 'opt_<op>_perf.txt'} in {round_dir.name}: run "
                         "`helix run-bench` on the round's operator")
    correctness = job_status(ws, round_dir.name, "run-test")
    benchmark = job_status(ws, round_dir.name, "run-bench")
    if benchmark == "passed" and (out.comparison is None or out.comparison.errors):
        damage = baseline_perf_damage(ws, out.baseline_perf)
        if damage is None:
            benchmark = "failed"  # the job ran, but its perf file does not compare with the baseline
        else:  # the baseline's damage, not the round's: nothing is said of the round's bench
            benchmark = "not_run"
            out.notes.append(f"benchmark_status left not_run, not failed: {damage}, so {round_dir.name}'s perf file "
                             "cannot be compared with it (the damage is the baseline's, not the round's); "
                             "re-establish the baseline with `helix prepare-baseline --force`, then run "
                             "`helix round-state` again")
    out.fields["correctness_status"] = correctness or "not_run"
    out.fields["benchmark_status"] = benchmark or "not_run"
    if not existing.get("parent_round"):
        out.fields["parent_round"] = recorded_parent(ws, n) or _best_completed_round(ws, n)
    for key, folder in EVIDENCE_DIRS.items():
        if not existing.get(key) and _has_output(round_dir, None, folder):
            out.fields[key] = folder
    if not existing.get("perf_analysis_path") and _plain_file(round_dir / PERF_ANALYSIS):
        out.fields["perf_analysis_path"] = PERF_ANALYSIS
    if opt_note_has_round(ws, n):
        out.fields["opt_note_updated"] = True  # a missing entry keeps the file's value: submit-round writes it
    parent = layout.parse_round_ref(str(existing.get("parent_round") or out.fields.get("parent_round") or ""))
    if parent is not None:  # flagged here; submit-round refuses it (state/seals.py submitted_read_as)
        from helix_engine.state.seals import submitted_problem

        changed = submitted_problem(ws, layout.round_dir_name(parent), f"the parent of {round_dir.name}")
        if changed is not None:
            out.notes.append(changed)
    return out


#: round-state.json's field (helix's, beside upstream's, which it leaves as they are) that names the
#: statuses `helix round-state` wrote from --correctness / --benchmark rather than from the round's jobs.
SELF_REPORTED = "self_reported_statuses"


def self_reported(derived: Derived, correctness: str | None, benchmark: str | None) -> list[str]:
    """The status fields given by hand (--correctness / --benchmark), for round-state.json's
    ``self_reported_statuses`` (``[]``: both came from the round's jobs), with a note for each.
    They are recorded as said and never promote: submit-round takes a round's statuses as
    measured only from its run-test and run-bench through the gate (state/seals.py)."""
    found: list[str] = []
    for name, flag, value in (("correctness_status", "--correctness", correctness),
                              ("benchmark_status", "--benchmark", benchmark)):
        if value is None:
            continue
        found.append(name)
        measured = derived.fields.get(name)
        jobs = "" if measured == value else f"; the round's jobs say {measured}"
        derived.notes.append(f"{name}={value} is self-reported ({flag}{jobs}): round-state.json lists it in "
                             f"{SELF_REPORTED}; submit-round counts only the round's run-test and run-bench through "
                             "the gate, so a self-reported status never promotes a round")
    return found


def baseline_perf_damage(ws: Path, baseline_perf: Path | None) -> str | None:
    """What is wrong with the baseline perf file (missing, unreadable, a bad line, no record), as
    a sentence naming it; None when it reads cleanly."""
    from helix_engine.perf.artifact import read_perf
    from helix_engine.workspace.reading import shown

    if baseline_perf is None or not baseline_perf.is_file():
        where = shown(baseline_perf, ws) if baseline_perf is not None else "baseline/<op>_perf.txt"
        return f"the baseline perf file {where} is missing"
    records, problems = read_perf(baseline_perf, ws)
    error = next((p for p in problems if p.severity == "error"), None)
    name = shown(baseline_perf, ws)
    if error is not None:
        where = f"line {error.line}: " if error.line else ""
        return f"the baseline perf file {name} is damaged ({where}{error.message})"
    return None if records else f"the baseline perf file {name} has no readable perf record"


def opt_note_has_round(ws: Path, n: int) -> bool:
    """Whether opt-note.md already holds the ``## Round N`` entry (read through the safe reader)."""
    from helix_engine.workspace.markdown import parse_opt_note
    from helix_engine.workspace.reading import read_text_safe

    path = ws / layout.OPT_NOTE
    if not path.is_file():
        return False
    text, problem = read_text_safe(path, ws)
    if problem is not None or not text:
        return False
    return any(entry.number == n for entry in parse_opt_note(text, layout.OPT_NOTE).rounds)


def comparison_line(derived: Derived) -> str:
    c = derived.comparison
    target = derived.fields.get("comparison_target_path", "the baseline perf file")
    if c is None:
        return "not measured (no perf file to compare)"
    if c.errors:
        return f"the perf files do not compare: {c.errors[0]}"
    number = round_number(c)
    if number is None:
        return f"no comparable case vs {target}"
    avg = f", avg improvement {number.avg_improvement_pct:+.1f}%" if number.avg_improvement_pct is not None else ""
    return f"geomean speedup (ratio of means) {number.text()}{avg} vs {target} (metric {c.metric_source})"


def write_summary_skeleton(round_dir: Path, state: dict[str, Any], derived: Derived) -> Path | None:
    """summary.md with the fields the workflow asks for, only when it is missing (an agent's
    or a person's text is never replaced). Returns the path when written."""
    path = Path(round_dir) / str(state.get("summary_path") or layout.SUMMARY)
    if path.exists():
        return None
    todo = "(to complete)"
    lines = [
        f"# {state['round']} summary", "",
        f"Parent: {state['parent_round']}",
        f"Hypothesis: {state['hypothesis']}",
        f"Selected pattern: {todo}",
        f"Primary analysis level: {todo}",
        f"Final analysis level: {todo}",
        f"Supporting evidence: {', '.join(state['evidence_sources'])}",
        f"Deciding evidence: {todo}",
        f"Code changes: {todo}",
        f"Correctness: {state['correctness_status']}",
        f"Benchmark: {state['benchmark_status']}; {comparison_line(derived)}",
        f"Current best: {todo}",
        f"Open questions: {todo}",
    ]
    files.atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def report_text(round_dir: Path, path: Path, state: dict[str, Any], summary: Path | None,
                derived: Derived) -> str:
    """What was written, for a person or an agent reading the terminal."""
    name = Path(round_dir).name
    lines = [f"Wrote {name}/{path.name}:", json.dumps(state, indent=2, ensure_ascii=False),
             f"Comparison: {comparison_line(derived)}"]
    if summary is not None:
        lines.append(f"Wrote {name}/{summary.name}: a skeleton with the hypothesis and the measured "
                     "comparison; complete its '(to complete)' fields")
    else:
        lines.append(f"Kept {name}/{state.get('summary_path') or layout.SUMMARY} (it exists)")
    lines += [f"Note: {note}" for note in derived.notes]
    return "\n".join(lines)
