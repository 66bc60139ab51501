"""``helix demo``: a real optimization session, start to finish, in a fresh workspace.

It does exactly what an agent following the optimize skill does, through the same engine calls:
copy an example operator workspace, prepare and submit the baseline, then two rounds. Each round
is start-round → write ``opt-round-N/opt_<op>.py`` → record the hypothesis in attempts.md →
run-test (differential vs the baseline operator) → run-bench (vs the baseline perf file) →
summary.md + round-state.json → submit-round. Round 1 is a better kernel, round 2 one that
regresses for a real reason (recorded as not promoted). Nothing is simulated: every number comes
from a job that ran the kernels on the detected backend.

Each example ships its round candidates beside the workspace files, in
``examples/<name>/candidates/round-N.py`` (the operator) and ``round-N.md`` (a ``key: value``
header: theme, round-strategy, analysis-policy, primary-analysis-level, selected-pattern, expect;
then the hypothesis and supporting evidence as text). Only the workspace files (``<op>.py``,
``bench_<op>.py``, ``differential_test_<op>.py``) are copied into the demo workspace; the
candidates are read from the package, so the demo workspace holds the contract and nothing else.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from helix_engine.console import fmt_improvement, fmt_speedup
from helix_engine.errors import HelixError
from helix_engine.perf.results import RoundPromotion
from helix_engine.sanitize import clean
from helix_engine.workspace import files, layout

DEFAULT_EXAMPLE = "softmax"
ROUNDS = (1, 2)
Printer = Callable[[str], None]


# ------------------------------------------------------------------------------ examples


def examples_root() -> Path:
    """The shipped examples: package ``helix_examples`` when installed, else the source tree."""
    try:
        import helix_examples  # type: ignore[import-not-found]  # examples/, named so only in the wheel

        return Path(helix_examples.__file__).resolve().parent
    except ImportError:
        return Path(__file__).resolve().parents[1] / "examples"


def list_examples() -> list[str]:
    root = examples_root()
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and (p / f"{p.name}.py").is_file() and (p / "candidates").is_dir())


@dataclass
class RoundNote:
    """One candidate's notes (``candidates/round-N.md``)."""

    theme: str
    round_strategy: str
    analysis_policy: str
    primary_level: str
    pattern: str
    expect: str
    hypothesis: str
    evidence: str


def read_note(path: Path) -> RoundNote:
    text = Path(path).read_text(encoding="utf-8")
    head, _, body = text.partition("\n\n")
    meta = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head.splitlines())}
    hypothesis = _paragraph(body, "Hypothesis:")
    evidence = _paragraph(body, "Supporting evidence:")
    missing = [k for k in ("theme", "round-strategy", "analysis-policy", "primary-analysis-level", "expect")
               if not meta.get(k)]
    if missing or not hypothesis:
        raise HelixError(f"{path} lacks {', '.join(missing) or 'a Hypothesis: paragraph'}; "
                         "reinstall helix (the example's candidate notes are incomplete)")
    return RoundNote(meta["theme"], meta["round-strategy"], meta["analysis-policy"],
                     meta["primary-analysis-level"], meta.get("selected-pattern", "none"), meta["expect"],
                     hypothesis, evidence or "the parent's code and perf artifact")


def _paragraph(body: str, label: str) -> str:
    match = re.search(rf"(?ms)^{re.escape(label)}\s*(.+?)(?:\n\s*\n|\Z)", body)
    return re.sub(r"\s+", " ", match.group(1)).strip() if match else ""


def copy_example(name: str, dest: Path) -> Path:
    """Copy the example's workspace files (operator + harnesses) into an empty ``dest``."""
    source = examples_root() / name
    if name not in list_examples():
        raise HelixError(f"there is no example named {name!r}; choose one of: {', '.join(list_examples())}")
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise HelixError(f"{dest} already exists and is not empty; give `helix demo` a new folder "
                         f"(for example `helix demo {dest}-2`) or remove this one")
    dest.mkdir(parents=True, exist_ok=True)
    for stem in (name, f"bench_{name}", f"differential_test_{name}"):
        files.atomic_write_text(dest / f"{stem}.py", (source / f"{stem}.py").read_text(encoding="utf-8"))
    return dest


# ------------------------------------------------------------------------------ progress


class Progress:
    """One line per step, plus one line per finished case from the job's events."""

    def __init__(self, out: Printer) -> None:
        self.out = out
        self.t0 = time.monotonic()

    def step(self, text: str) -> None:
        self.out(f"[{time.monotonic() - self.t0:6.1f}s] {text}")

    def detail(self, text: str) -> None:
        self.out(f"          {text}")

    def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "case_started":
            self._index = (event.get("index"), event.get("total"))
        elif kind == "case_finished":
            index, total = getattr(self, "_index", (None, None))
            where = f"{int(index) + 1}/{total} " if isinstance(index, int) and total else ""
            case = str(event.get("case_id", "")).removeprefix("candidate:")
            self.detail(f"{where}{case}: {_case_text(event.get('record') or {})}")


def _case_text(record: dict[str, Any]) -> str:
    if "ok" in record:  # a test case: it ran; accuracy is judged once all cases are archived
        return "ran" if record.get("ok") else f"raised {record.get('error') or record.get('message') or ''}".strip()
    error = record.get("error_message")
    value = record.get("kernel_avg_time_us") or record.get("total_op_avg_time_us")
    if value is not None:
        stats = record.get("stats") or {}
        spread = f" (p10 {stats['p10']:.1f}, p90 {stats['p90']:.1f})" if "p10" in stats and "p90" in stats else ""
        return f"{value:.1f} µs{spread}"
    return f"error: {error}" if error else "done"


# ------------------------------------------------------------------------------ the session


@dataclass
class RoundResult:
    number: int
    theme: str
    correctness: str
    benchmark: str
    geomean: float | None
    avg_improvement: float | None
    submit_status: str
    best_status: str | None = None


@dataclass
class DemoResult:
    workspace: Path
    example: str
    backend: str | None
    rounds: list[RoundResult] = field(default_factory=list)


def run_demo(dest: Path, example: str = DEFAULT_EXAMPLE, backend: str | None = None,
             out: Printer = print) -> DemoResult:
    """Copy ``example`` into ``dest`` and run baseline + two rounds through the engine."""
    if backend:
        os.environ["HELIX_BACKEND"] = backend  # every engine call and child job sees the same one
    _require_torch()
    progress = Progress(out)
    ws = copy_example(example, Path(dest).expanduser()).resolve()
    progress.step(f"copied example {example!r} into {ws}")
    be = _backend_line(backend)
    progress.step(f"backend: {be}")
    _prepare_baseline(ws, example, backend, progress)
    result = DemoResult(ws, example, backend)
    for n in ROUNDS:
        parent = "baseline" if n == 1 or not _completed(result, 1) else "opt-round-1"
        result.rounds.append(run_round(ws, example, n, parent, progress, backend))
    _report_ledger(ws, result, progress)
    progress.step("done: the workspace holds the baseline, two submitted rounds and the ledger (opt-note.md)")
    return result


def _completed(result: DemoResult, n: int) -> bool:
    return any(r.number == n and r.submit_status == "pass" for r in result.rounds)


def _require_torch() -> None:
    """Refuse before copying anything when the jobs' Python has no torch (a fresh install:
    torch is not a dependency), with what to install, rather than two failed jobs."""
    from helix_engine.eval.backends import detect, torch_missing

    missing = torch_missing(detect())
    if missing:
        raise HelixError(f"the demo runs real jobs, and {missing}")


def _backend_line(backend: str | None) -> str:
    from helix_engine.eval.backends import select_backend

    be = select_backend(backend)
    return f"{be.name} (device {be.device_str}, bench mode {be.default_bench_mode})"


def _prepare_baseline(ws: Path, op: str, backend: str | None, progress: Progress) -> None:
    from helix_engine.eval.baseline import prepare_baseline

    progress.step(f"prepare-baseline: snapshot baseline/{op}.py, differential test, benchmark, submit-baseline")
    payload = prepare_baseline(ws, backend=backend, on_event=progress.on_event)
    for line in str(payload.get("text", "")).splitlines():
        progress.detail(line)
    if payload.get("exit_code") != 0:
        raise HelixError(f"the baseline was not established (see above); inspect {ws / layout.BASELINE_DIR} "
                         f"and the job logs under {ws / layout.HELIX_DIR / 'jobs'}")
    _print_perf(ws / layout.BASELINE_DIR / layout.baseline_perf_name(op), progress)


def _print_perf(perf_file: Path, progress: Progress) -> None:
    from helix_engine.perf.artifact import read_perf

    records, _ = read_perf(perf_file)
    if records:
        r = records[0]
        progress.detail(f"{perf_file.name}: {len(records)} cases, measured on {r.backend or '?'} "
                        f"({r.device or 'unknown device'}) by {r.method or r.bench_mode}")


def run_round(ws: Path, op: str, n: int, parent: str, progress: Progress,
              backend: str | None = None) -> RoundResult:
    """One round exactly as the skill runs it; returns what submit-round recorded."""
    from helix_engine.eval.bench import run_bench
    from helix_engine.eval.test import run_test
    from helix_engine.state.lifecycle import start_round, submit_round, write_round_state

    note = read_note(examples_root() / op / "candidates" / f"round-{n}.md")
    round_dir = ws / layout.round_dir_name(n)
    baseline_op = ws / layout.BASELINE_DIR / f"{op}.py"
    payload, rc = start_round(round_dir, note.round_strategy, note.analysis_policy, note.theme)
    progress.step(f"round {n}: start-round ({note.round_strategy}, {note.analysis_policy}): {payload.get('status')}")
    if rc != 0:
        raise HelixError(f"start-round refused opt-round-{n}: {payload.get('guideline')}")
    candidate = round_dir / layout.round_operator_name(op)
    files.atomic_write_text(candidate, (examples_root() / op / "candidates" / f"round-{n}.py").read_text(encoding="utf-8"))
    progress.step(f"round {n}: wrote {candidate.relative_to(ws)} — {note.theme}")
    _attempt(round_dir, n, parent, note, op)

    progress.step(f"round {n}: run-test (differential vs baseline/{op}.py)")
    test = run_test(candidate, ref_operator_file=baseline_op, backend=backend, on_event=progress.on_event)
    correctness = "passed" if test.passed else "failed"
    verdict = (test.comparison or {}).get("message") or test.message or f"exit code {test.exit_code}"
    progress.detail(verdict)
    files.append_text(round_dir / layout.ATTEMPTS, f"\nCorrectness (run-test, differential vs baseline/{op}.py): "
                      f"{correctness}. {verdict}\n")
    benchmark, geomean, avg, source, compare_text = "not_run", None, None, None, None
    if test.passed:
        progress.step(f"round {n}: run-bench vs baseline/{layout.baseline_perf_name(op)}")
        bench = run_bench(candidate, baseline_operator_file=baseline_op, backend=backend, on_event=progress.on_event)
        compare_text = bench.comparison_text or bench.text
        comp = (bench.comparison or [{}])[0]
        geomean, avg, source = comp.get("geomean_speedup"), comp.get("avg_improvement"), comp.get("metric_source")
        benchmark = "passed" if bench.exit_code == 0 and bench.perf_file and source else "failed"
        progress.detail(f"geomean speedup {fmt_speedup(geomean)}, avg improvement {fmt_improvement(avg)} vs baseline "
                        f"(metric {source or 'unknown'})")
        files.append_text(round_dir / layout.ATTEMPTS, "\nCanonical benchmark (run-bench + compare-perf vs "
                          f"baseline/{layout.baseline_perf_name(op)}):\n\n```\n{compare_text.strip()}\n```\n")
    vs_parent = _compare_with_parent(ws, op, parent, round_dir) if benchmark == "passed" else None
    if vs_parent is not None:
        progress.detail(f"vs parent {parent}: geomean speedup {fmt_speedup(vs_parent)}")
        files.append_text(round_dir / layout.ATTEMPTS, f"\nLocal comparison with the parent ({parent}, compare-perf): "
                          f"geomean speedup {fmt_speedup(vs_parent)}\n")
    fields: dict[str, Any] = dict(round=round_dir.name, parent_round=parent, hypothesis=note.theme,
                                  evidence_sources=["benchmark"], correctness_status=correctness,
                                  benchmark_status=benchmark, summary_path=layout.SUMMARY, opt_note_updated=False)
    if benchmark == "passed":
        fields.update(perf_artifact=layout.round_perf_name(op),
                      comparison_target_path=f"../{layout.BASELINE_DIR}/{layout.baseline_perf_name(op)}",
                      effective_metric_source=source)
    write_round_state(round_dir, **fields)
    promoted = _promotion(ws, n)  # the engine's one promotion rule, as the ledger will record it
    decision = ("promote: the new current best" if promoted.status == "current best" else
                f"do not promote ({promoted.status}): {promoted.reason}; the next idea goes into a new round"
                if benchmark == "passed" else "reject: no valid benchmark result")
    files.append_text(round_dir / layout.ATTEMPTS, f"\nDecision: {decision}\n")
    _summary(round_dir, n, parent, note, correctness, benchmark, geomean, avg, source, compare_text, promoted, op)
    submitted, _ = submit_round(round_dir, current_round=n, final_round=len(ROUNDS))
    status = str(submitted.get("status"))
    progress.step(f"round {n}: submit-round: {status} — {submitted.get('guideline')}")
    return RoundResult(n, note.theme, correctness, benchmark, geomean, avg, status)


def _promotion(ws: Path, n: int) -> RoundPromotion:
    from helix_engine.perf.results import NOT_PROMOTED
    from helix_engine.state import measure

    found = measure.promotion(ws, statuses={n: "passed"}).rounds.get(n)  # as if submit-round accepts it
    return found if found is not None else RoundPromotion(round=n, status=NOT_PROMOTED, reason="not compared")


def _compare_with_parent(ws: Path, op: str, parent: str, round_dir: Path) -> float | None:
    """Geomean speedup of this round over its parent round (None for a baseline parent)."""
    if parent == "baseline":
        return None
    from helix_engine.eval.bench import compare_files

    parent_perf = ws / parent / layout.round_perf_name(op)
    mine = round_dir / layout.round_perf_name(op)
    if not parent_perf.is_file() or not mine.is_file():
        return None
    _, rc, comps = compare_files(parent_perf, mine, "auto", False)
    return comps[0].get("geomean_speedup") if rc == 0 and comps else None


def _attempt(round_dir: Path, n: int, parent: str, note: RoundNote, op: str) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = (
        f"\n## Attempt 1 ({stamp}, helix demo)\n"
        f"Parent: {parent}\n"
        f"Hypothesis: {note.hypothesis}\n"
        f"Candidate patterns: {note.pattern}\n"
        f"Selected pattern: {note.pattern}\n"
        f"Primary analysis level: {note.primary_level}\n"
        f"Supporting evidence: {note.evidence}\n"
        f"Code change: opt-round-{n}/{layout.round_operator_name(op)}: {note.theme}\n"
    )
    files.append_text(round_dir / layout.ATTEMPTS, text)


def _summary(round_dir: Path, n: int, parent: str, note: RoundNote, correctness: str, benchmark: str,
             geomean: float | None, avg: float | None, source: str | None, compare_text: str | None,
             promoted: RoundPromotion, op: str) -> None:
    best_line = ("yes: faster than the baseline and the previous best beyond noise"
                 if promoted.status == "current best"
                 else f"no: {promoted.status} ({promoted.reason})" if benchmark == "passed"
                 else "no: rejected")
    text = (
        f"# opt-round-{n} summary\n\n"
        f"Parent: {parent}\n"
        f"Hypothesis: {note.hypothesis}\n"
        f"Selected pattern: {note.pattern}\n"
        f"Primary analysis level: {note.primary_level}\n"
        f"Final analysis level: {note.primary_level}\n"
        f"Supporting evidence: {note.evidence}\n"
        f"Deciding evidence: compare-perf of opt-round-{n}/{layout.round_perf_name(op)} against "
        f"baseline/{layout.baseline_perf_name(op)}\n"
        f"Code changes: {note.theme} (opt-round-{n}/{layout.round_operator_name(op)})\n"
        f"Correctness: {correctness} (differential run-test vs baseline/{op}.py)\n"
        f"Benchmark: {benchmark}; geomean speedup {fmt_speedup(geomean)}, avg improvement "
        f"{fmt_improvement(avg)} vs baseline (metric source {source or 'n/a'})\n"
        f"Current best: {best_line}\n"
        f"Open questions: none recorded by the demo\n"
    )
    if compare_text:
        text += f"\n```\n{compare_text.strip()}\n```\n"
    files.atomic_write_text(round_dir / layout.SUMMARY, text)


#: ``geomean speedup 7.85x [7.61x, 8.10x]`` in a ledger Result line (the interval when written).
_LEDGER_GEOMEAN = re.compile(r"geomean speedup ([0-9]+(?:\.[0-9]+)?x(?: \[[^\]]*\])?)")


def _report_ledger(ws: Path, result: DemoResult, progress: Progress) -> None:
    """Read back what the engine recorded in opt-note.md for each round."""
    from helix_engine.workspace.markdown import parse_opt_note

    path = ws / layout.OPT_NOTE
    if not path.is_file():
        progress.step("opt-note.md was not written")
        return
    note = parse_opt_note(path.read_text(encoding="utf-8"))
    by_number = {r.number: r for r in note.rounds}
    for rr in result.rounds:
        entry = by_number.get(rr.number)
        rr.best_status = entry.best_status if entry else None
        # the ledger's own number (the paired run's when there was one, with its interval), not the
        # run-bench headline printed above: the two are different measurements
        recorded = _LEDGER_GEOMEAN.search(entry.result or "") if entry else None
        shown = f"{recorded.group(1)} geomean vs baseline, as recorded" if recorded else "no geomean recorded"
        progress.step(f"opt-note.md: round-{rr.number}: {clean(rr.best_status or 'no entry')} ({clean(shown)})")
    progress.step(f"opt-note.md: final best round: {note.final_best_round or 'none'}")
