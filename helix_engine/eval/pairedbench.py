"""Parent side of a paired bench: ``run-bench`` with a reference measures both in one job.

``--baseline-operator-file PATH`` or ``--against baseline|parent|best`` names the reference; one
job (one device) runs the worker's ``paired`` action (eval/interleave.py). The canonical perf file
gets the candidate's records exactly as an unpaired run writes them (upstream keys first), and
``<perf stem>.paired.json`` beside it keeps both sides' samples in measurement order with their
block ids, the reference operator's path and sha256, and the reference's records
(perf/paired.PairedRun). compare-perf, status and the cockpit then judge the candidate on those
blocks. The same failed-run rule holds: nothing is written unless the job completed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.errors import HelixError
from helix_engine.eval.bench import BenchRun, ending, refusal
from helix_engine.eval.jobrun import (
    check_file,
    finished_records,
    round_name_of,
    run_worker,
)
from helix_engine.workspace import layout

AGAINST: tuple[str, ...] = ("baseline", "parent", "best")


# --------------------------------------------------------------------------- the reference


def resolve_reference(operator_file: Path, against: str | None,
                      baseline_operator_file: Path | str | None) -> Path | None:
    """The reference operator file for ``--baseline-operator-file`` or ``--against``, or None."""
    if baseline_operator_file and against:
        raise HelixError("give either --baseline-operator-file or --against, not both")
    if baseline_operator_file:
        return check_file(baseline_operator_file, "baseline operator", "--baseline-operator-file")
    if against is None:
        return None
    if against not in AGAINST:
        raise HelixError(f"--against takes {', '.join(AGAINST)}, not {against!r}")
    from helix_engine.workspace.snapshot import load_workspace

    op = Path(operator_file).resolve()
    ws = layout.workspace_of(op)
    snap = load_workspace(ws)
    base = snap.baseline.operator_file if snap.baseline is not None else None
    n = layout.round_number(op.parent.name)
    if against == "baseline":
        return _existing(base, "the baseline operator (baseline/<op>.py)", "run `helix prepare-baseline` first")
    if n is None:
        raise HelixError(f"--against {against} compares a round: {op} is not in an opt-round-N folder; use "
                         "--against baseline or --baseline-operator-file")
    if against == "parent":
        parent = _parent_of(snap, n)
        if parent is None:
            raise HelixError(f"opt-round-{n} records no parent (no parent_round in its round-state.json or in "
                             ".helix/state.json); use --against baseline or --baseline-operator-file")
        m = layout.parse_round_ref(parent)
        if m is None:
            return _existing(base, "the baseline operator (baseline/<op>.py)", "run `helix prepare-baseline` first")
        view = snap.rounds.get(m)
        return _existing(view.operator_file if view else None, f"opt-round-{m}'s operator",
                         f"opt-round-{m} has no operator file")
    best = snap.promotion.best_round if snap.promotion is not None else None
    if best == n:
        raise HelixError(f"opt-round-{n} is the promoted best round itself; compare it with --against parent "
                         "or --against baseline")
    if best is None:
        return _existing(base, "the baseline operator (no round is promoted, so the best is the baseline)",
                         "run `helix prepare-baseline` first")
    view = snap.rounds.get(best)
    return _existing(view.operator_file if view else None, f"opt-round-{best}'s operator (the promoted best)",
                     f"opt-round-{best} has no operator file")


def _existing(path: Path | None, what: str, fix: str) -> Path:
    if path is None or not Path(path).is_file():
        raise HelixError(f"cannot find {what}; {fix}")
    return Path(path).resolve()


def _parent_of(snap: Any, n: int) -> str | None:
    """The round's parent: round-state.json's parent_round, else the one start-round recorded."""
    view = snap.rounds.get(n)
    if view is not None and view.state is not None:
        return str(view.parent or "baseline")
    wf = snap.workflow
    entry = wf.rounds.get(str(n)) if wf is not None else None
    recorded = getattr(entry, "parent_round", None) if entry is not None else None
    return str(recorded) if recorded else None


# ------------------------------------------------------------------------------ the job


@dataclass
class PairedCollect:
    """What one paired job returned: the candidate's run (canonical records), the reference's."""

    run: BenchRun
    reference: BenchRun
    cases: list[dict[str, Any]] = field(default_factory=list)
    job_id: str | None = None
    worker: str = "cold"  # "warm": the warm worker's fork ran the job (eval/warm.py)
    worker_note: str = ""
    #: what the gate found and which bytes ran (gate/paired.py); empty when the job ended early
    gate: dict[str, Any] = field(default_factory=dict)


def collect_paired(op: Path, ref_op: Path, bench: Path, mode: str, be: Any, ws: Path, *,
                   devices: list[str] | None = None, case_ids: list[str] | None = None,
                   caps: dict[str, int | None] | None = None,
                   on_event: Callable[[dict[str, Any]], None] | None = None, timeout_s: float | None = None,
                   kind: str = "run-bench", warm: bool = False) -> PairedCollect:
    """Run the worker's ``paired`` action as one job (one device of the pool); ``warm``: a probe may
    run in the warm worker's fork (eval/warm.py)."""
    request = {"action": "paired", "operator_file": str(op), "reference_operator_file": str(ref_op),
               "bench_file": str(bench), "bench_mode": mode, "case_ids": case_ids, **(caps or {})}
    run = run_worker(ws, kind, request, backend=be, cwd=bench.parent, device_pool=devices,
                     round_name=round_name_of(op), on_event=on_event, timeout_s=timeout_s, warm=warm)
    endings = [ending(run)]
    result = run.result or {}
    if isinstance(result.get("records"), list) and isinstance(result.get("reference_records"), list):
        return PairedCollect(BenchRun(result["records"], [run.job.id], run.output, job_endings=endings),
                             BenchRun(result["reference_records"], [run.job.id], run.output, job_endings=endings),
                             list(result.get("paired_cases") or []), run.job.id, run.worker, run.worker_note,
                             result["gate"] if isinstance(result.get("gate"), dict) else {})
    fatal = run.failure_text() if run.result is not None or not finished_records(run) else None
    partial = finished_records(run)
    return PairedCollect(BenchRun(partial, [run.job.id], run.output, fatal, endings),
                         BenchRun([], [run.job.id], run.output, fatal, endings), [], run.job.id)


def paired_model(collect: PairedCollect, op: Path, ref_op: Path, bench: Path, mode: str, backend: str,
                 perf_path: Path, ref_perf: Path | None) -> Any:
    """The sidecar for a completed paired job whose candidate records are in ``perf_path``."""
    from helix_engine.perf.artifact import record_from_json
    from helix_engine.perf.context import now_iso
    from helix_engine.perf.paired import OperatorRef, PairedCase, PairedRun, sha256_of

    return PairedRun(
        candidate=OperatorRef(path=str(op), sha256=sha256_of(op)),
        reference=OperatorRef(path=str(ref_op), sha256=sha256_of(ref_op)),
        bench_file=str(bench), bench_mode=mode, backend=backend, job_id=collect.job_id, created_at=now_iso(),
        perf_file=str(perf_path), perf_sha256=sha256_of(perf_path),
        reference_perf_file=str(ref_perf) if ref_perf is not None else None,
        reference_records=[record_from_json(r) for r in collect.reference.records],
        cases=[PairedCase.model_validate(c) for c in collect.cases],
    )


def promote_paired(perf_path: Path, collect: PairedCollect, model: Any, ws: Path | None = None) -> str | None:
    """Write the sidecar, then the perf file (bench.promote_records: only for a completed run).
    The sidecar goes first, carrying the sha256 the perf file is about to have, so whoever sees
    the new perf file (the cockpit's watcher) finds its paired result already there; a run that
    dies in between leaves a sidecar that matches no perf file, which readers ignore."""
    import hashlib

    from helix_engine.eval.bench import promote_records, unwritten_perf_text
    from helix_engine.perf.artifact import record_from_json, render_perf
    from helix_engine.perf.paired import sidecar_path, write_paired

    if refusal(collect.run) is None:
        text = render_perf([record_from_json(r) for r in collect.run.records])
        model.perf_sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
        try:
            write_paired(sidecar_path(perf_path), model)
        except OSError as exc:  # a full disk: say where the measurements still are
            if ws is None:
                raise
            raise HelixError(unwritten_perf_text(perf_path, collect.run, ws, exc)) from exc
    return promote_records(perf_path, collect.run, ws)


# --------------------------------------------------------------------------- run-bench


def _stale_reference(ref_perf: Path, perf_path: Path, got: PairedCollect) -> tuple[str, list[Any]] | None:
    """When the reference's perf file on disk was measured another way than this job (another
    bench mode or cache state, an older run), the line that says so and the reference's records
    as this job measured them, which the comparison uses instead; None when the file will do."""
    from helix_engine.perf.artifact import read_perf, record_from_json
    from helix_engine.perf.compare import check_bench_modes

    disk, problems = read_perf(ref_perf)
    if not disk or any(p.severity == "error" for p in problems):
        return None  # a damaged file: the comparison fails on it and says why, as it always did
    mine, _ = read_perf(perf_path)
    problem = check_bench_modes(disk, mine, str(ref_perf), str(perf_path))
    if problem is None:
        return None

    def how(records: list[Any]) -> str:
        from helix_engine.sanitize import clean  # workspace text: a mode is shown, never obeyed

        modes = sorted({clean(str(r.bench_mode))[:40] for r in records}) or ["no bench mode"]
        states = sorted({str(r.cache_state) for r in records if r.bench_mode})
        return ", ".join(modes) + (f", L2 {'/'.join(states)}" if states else "")

    return (f"Note: {ref_perf} holds a run measured with {how(disk)} (this job: {how(mine)}); the comparison below "
            "uses the reference as this job measured it", [record_from_json(r) for r in got.reference.records])


def run_paired_bench(op: Path, ref_op: Path, bench: Path, mode: str, be: Any, ws: Path, *,
                     output: Path | str | None = None, devices: list[str] | None = None,
                     metric_source: str = "auto", skip_latency_errors: bool = False,
                     on_event: Callable[[dict[str, Any]], None] | None = None,
                     timeout_s: float | None = None) -> Any:
    """``run-bench`` with a reference, paired: upstream's lines (``Baseline perf file:``, ``Perf
    file:``, the compare-perf block), then where the paired result is."""
    from helix_engine.eval.bench import (
        BenchOutcome,
        case_error_lines,
        case_errored,
        compare_files,
        promote_records,
    )
    from helix_engine.eval.jobrun import round_timing
    from helix_engine.perf.paired import sidecar_path

    ref_perf = layout.perf_path_for(ref_op)
    with round_timing(ws, "run_bench"):
        got = collect_paired(op, ref_op, bench, mode, be, ws, devices=devices, on_event=on_event,
                             timeout_s=timeout_s)
    run = got.run
    base = {"bench_mode": mode, "backend": be.name, "job_ids": run.job_ids, "output": run.output,
            "baseline_perf_file": str(ref_perf)}
    if run.fatal is not None:
        return BenchOutcome(1, None, records=run.records, message=run.fatal,
                            text=f"FAIL: the bench did not run: {run.fatal}", **base)
    lines: list[str] = []
    if not ref_perf.is_file():  # as upstream: the reference without a perf file gets one
        ref_refused = promote_records(ref_perf, got.reference, ws)
        if ref_refused is not None:
            return BenchOutcome(1, None, records=run.records, message=ref_refused,
                                text=f"FAIL: baseline bench: {ref_refused}", **base)
    lines.append(f"Baseline perf file: {ref_perf}")
    perf_path = Path(output).expanduser().resolve() if output else layout.perf_path_for(op)
    sidecar = sidecar_path(perf_path)
    refused = promote_paired(perf_path, got, paired_model(got, op, ref_op, bench, mode, be.name, perf_path, ref_perf),
                             ws)
    if refused is not None:
        lines += [f"FAIL: {refused}", *case_error_lines(run.records)]
        if run.output.strip():
            lines.append(run.output.rstrip())
        return BenchOutcome(1, None, records=run.records, message=refused, text="\n".join(lines), **base)
    rc = 1 if any(case_errored(r) for r in run.records) else 0
    from helix_engine.state.seals import record_evidence

    record_evidence(ws, round_name_of(op), "run-bench", job_id=got.job_id, passed=rc == 0, gate=got.gate,
                    operator=op, reference=ref_op, harness=bench, perf_file=perf_path)
    lines.append(f"Perf file: {perf_path}")
    outcome = BenchOutcome(rc, str(perf_path), records=run.records, paired_file=str(sidecar), **base)
    if rc != 0:
        lines += case_error_lines(run.records)
        if run.output.strip():
            lines.append(run.output.rstrip())
    stale = _stale_reference(ref_perf, perf_path, got)
    if stale is not None:
        lines.append(stale[0])
    text, compare_rc, comps = compare_files(ref_perf, perf_path, metric_source, skip_latency_errors,
                                            stale[1] if stale is not None else None)
    lines.append(text.rstrip("\n"))
    outcome.comparison, outcome.comparison_text, outcome.exit_code = comps, text, compare_rc
    blocks = sorted({len({s.get("block") for s in c.get("slots", [])}) for c in got.cases})
    lines.append(f"Paired result: {sidecar} (candidate and reference measured in one job, "
                 f"{'/'.join(map(str, blocks)) or 0} blocks per case)")
    outcome.text = "\n".join(lines)
    return outcome
