"""``helix probe-bench``: a fast, non-authoritative screen of candidate vs baseline.

Upstream caps (warmup ≤1, repeats ≤3, applied in the profiler modes), classifier and
thresholds (spec §5), and the baseline probe cache under ``.helix/`` guarded by an O_EXCL
lock. The classifier reads each case's ratio of medians where both sides carry samples
(``probe_speedups``). ``adaptive=True`` measures both sides in paired blocks in one job and
stops as soon as the geomean's interval settles the verdict (perf/sequential.py) or the budget
ends, and reports the time to verdict.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_engine.console import fmt_improvement, fmt_speedup
from helix_engine.errors import HelixError
from helix_engine.eval.bench import collect_records, promote_records, write_records
from helix_engine.eval.jobrun import bench_mode_for, check_file, resolve_backend
from helix_engine.eval.loader import find_bench_file
from helix_engine.eval.warm import NO_WORKER
from helix_engine.perf.formulas import avg_improvement_pct
from helix_engine.perf.results import RoundEvaluation
from helix_engine.workspace import layout
from helix_engine.workspace.files import atomic_write_json
from helix_engine.workspace.reading import owning_workspace, read_bytes_safe, read_json_object

PROBE_WARMUP, PROBE_REPEATS = 1, 3
CAPPED_MODES = ("torch-npu-profiler", "torch-profiler")
LOCK_RETRY_S, LOCK_RETRIES, LOCK_STALE_S = 1.0, 1800, 1800.0
SUMMARIES = {
    "likely_gain": "The probe points to a likely gain. It is advisory only: run the canonical "
    "run-bench and compare-perf before any official claim.",
    "likely_regression": "The probe points to a likely regression. It is advisory only: revisit the "
    "change, and run the canonical run-bench before any official claim.",
    "inconclusive": "The probe is inconclusive. It is advisory only: run the canonical run-bench "
    "before any official claim.",
}


@dataclass
class Classification:
    label: str
    geomean: float | None
    avg_improvement_pct: float | None
    improved: int
    regressed: int
    min_speedup: float | None


def classify(speedups: list[float]) -> Classification:
    """Spec §5: gain needs geomean ≥1.10, improved > regressed and min ≥0.92; regression is
    geomean ≤0.95 or min ≤0.85; everything else (and no cases) is inconclusive.

    The avg improvement is compare-perf's quantity, by compare-perf's function (the mean time
    reduction, ``formulas.avg_improvement_pct``; a speedup s is the pair (s, 1)), not upstream
    probe's mean(s−1), which printed +77.1% beside a compare-perf +53.6% for one round."""
    s = [v for v in speedups if v > 0 and math.isfinite(v)]
    if not s:
        return Classification("inconclusive", None, None, 0, 0, None)
    geomean = math.exp(sum(math.log(v) for v in s) / len(s))
    improved = sum(1 for v in s if v > 1.01)
    regressed = sum(1 for v in s if v < 0.99)
    low = min(s)
    avg = avg_improvement_pct([(v, 1.0) for v in s])
    if geomean >= 1.10 and improved > regressed and low >= 0.92:
        label = "likely_gain"
    elif geomean <= 0.95 or low <= 0.85:
        label = "likely_regression"
    else:
        label = "inconclusive"
    return Classification(label, geomean, avg, improved, regressed, low)


def probe_speedups(ev: RoundEvaluation) -> list[float]:
    """The per-case speedups a probe classifies: the ratio of medians where both sides carry
    samples (one slow outlier among a few samples cannot flip it), else upstream's ratio of means.

    Why: the paired probe classified by the ratio of means; on a loaded CPU one preempted
    repetition made a 300 µs case read 11x slower, and one such case (min <= 0.85) turned a 1.5x
    gain into ``likely_regression`` (so did the small device-event cases on an H200), while the
    adaptive probe, reading medians, said ``likely_gain``."""
    return [case.median.point if case.median is not None else case.speedup for case in ev.cases]


def probe_statistic(ev: RoundEvaluation) -> str:
    """Which statistic ``probe_speedups`` gave, as output lines name it."""
    kinds = {"median" if case.median is not None else "mean" for case in ev.cases}
    if kinds == {"median"}:
        return "ratio of medians"
    return "ratio of means" if kinds == {"mean"} else "ratio of medians (of means where a side has no samples)"


@dataclass
class ProbeOutcome:
    exit_code: int
    classification: str | None
    metric_source: str | None
    geomean_speedup: float | None = None
    avg_improvement_pct: float | None = None
    improved: int = 0
    regressed: int = 0
    cache: str | None = None
    cache_miss_reason: str | None = None
    baseline_probe_perf: str | None = None
    candidate_probe_perf: str | None = None
    warnings: list[str] = field(default_factory=list)
    batches: list[dict[str, Any]] = field(default_factory=list)
    time_to_verdict_s: float | None = None
    verdict_first_seen_s: float | None = None
    elapsed_s: float | None = None
    stable: bool | None = None  # adaptive: the verdict settled before the budget ended
    decision: str | None = None  # adaptive: faster / slower / equivalent / unsettled (perf/sequential.py)
    interval: tuple[float, float] | None = None  # adaptive: the last look's geomean interval
    interval_confidence: float | None = None
    margin: float | None = None  # adaptive: the geomean's margin of practical equivalence
    ready_s: float | None = None  # adaptive: from the command's start until both sides were built
    statistic: str | None = None  # the speedup statistic classified ("ratio of medians")
    message: str | None = None
    paired_file: str | None = None  # the paired result of a paired probe (baseline measured in the same job)
    worker: str | None = None  # "warm": the warm worker's fork ran the job (eval/warm.py); "cold": a fresh process
    worker_note: str = ""  # why it was cold, or which warm worker
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "text"}


def _sha(path: Path | None) -> str | None:
    if path is None or not path.is_file():
        return None
    data, _ = read_bytes_safe(path, owning_workspace(path))
    return hashlib.sha256(data).hexdigest() if data is not None else None


def cache_key(baseline_op: Path, bench: Path, mode: str, backend: str, devices: list[str] | None) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "measurement_profile": "probe",
        "probe_contract": {"name": "fast-probe", "warmup": PROBE_WARMUP, "repeats": PROBE_REPEATS},
        "baseline_operator_sha256": _sha(baseline_op),
        "bench_file_sha256": _sha(bench),
        "bench_fingerprint_sha256": _sha(bench.with_suffix(".json")),
        "bench_mode": mode,
        "backend": backend,
        "remote": None,
        "remote_workdir": None,
        "npu_devices": devices,
    }


@contextlib.contextmanager
def probe_lock(path: Path) -> Iterator[None]:
    """O_EXCL lock file; retried every LOCK_RETRY_S up to LOCK_RETRIES; stale after LOCK_STALE_S."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(LOCK_RETRIES + 1):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            with contextlib.suppress(OSError):
                if time.time() - path.stat().st_mtime > LOCK_STALE_S:
                    path.unlink()
                    continue
            time.sleep(LOCK_RETRY_S)
            continue
        try:
            os.write(fd, json.dumps({"pid": os.getpid(), "ts": time.time()}).encode())
        finally:
            os.close(fd)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
        return
    raise HelixError(f"the probe cache lock {path} stayed busy; another probe-bench is running. Wait for it, "
                     "or delete the lock file if no probe is running")


def _miss_reason(meta_path: Path, perf_path: Path, key: dict[str, Any]) -> str | None:
    if not meta_path.is_file() or not perf_path.is_file():
        return "no cached baseline probe"
    data, _ = read_json_object(meta_path, owning_workspace(meta_path), what="probe cache sidecar", fix="")
    old = data.get("key", {}) if data is not None else None
    if not isinstance(old, dict):
        return "the cache sidecar is unreadable"
    changed = sorted(k for k in set(old) | set(key) if old.get(k) != key.get(k))
    return f"key changed: {', '.join(changed)}" if changed else None


def _evaluate(baseline: Path, candidate: Path, metric: str) -> RoundEvaluation:
    """The probe perf files through the evaluation core (compare-perf's rule and numbers)."""
    from helix_engine.perf.artifact import read_perf
    from helix_engine.perf.evaluation import evaluate

    b, _ = read_perf(baseline)
    c, _ = read_perf(candidate)
    return evaluate(b, c, rule="compare-perf", metric=metric, with_ci=False,
                    baseline_name=str(baseline), compare_name=str(candidate))


DECISION_TEXT = {"faster": "faster: the interval lies wholly above 1 + margin",
                 "slower": "slower: the interval lies wholly below 1 - margin",
                 "equivalent": "equivalent: the interval lies wholly inside 1 ± margin",
                 "unsettled": "not settled: the interval still straddles a margin"}


def _adaptive_line(out: ProbeOutcome) -> str:
    """``Adaptive: 2 look(s), 4 blocks per case; settled faster: ... (geomean ratio of medians
    1.50x, 97.5% interval [1.44x, 1.57x], margin 1.0%)``."""
    last = out.batches[-1]
    decision = str(out.decision or "unsettled")
    shown = (f"geomean ratio of medians {fmt_speedup(out.geomean_speedup)}" if out.geomean_speedup is not None
             else "no geomean")
    if out.interval is not None and out.interval_confidence is not None:
        shown += (f", {out.interval_confidence:.1%} interval [{fmt_speedup(out.interval[0])}, "
                  f"{fmt_speedup(out.interval[1])}]")
    if out.margin is not None:
        shown += f", margin {out.margin:.1%}"
    return (f"Adaptive: {len(out.batches)} look(s), {last.get('blocks', 0)} paired blocks per case; "
            f"{DECISION_TEXT.get(decision, decision)} ({shown})")


def _disagreement(out: ProbeOutcome) -> str | None:
    """Why a settled interval and the classification point different ways, when they do: the
    interval judges the geomean only, the classification (spec §5) also every case."""
    agrees = {"faster": "likely_gain", "slower": "likely_regression"}
    if out.decision not in agrees or out.classification == agrees[out.decision] or not out.batches:
        return None
    last = out.batches[-1]
    low = last.get("min_speedup")
    slowest = f"the slowest case is at {fmt_speedup(low)}, " if isinstance(low, (int, float)) else ""
    return (f"Why they differ: the interval judges the geomean only; the classification also needs every case "
            f"at 0.92x or more and more cases improved than regressed (gain), or no case at 0.85x or less "
            f"(regression): {slowest}{last.get('improved', 0)} improved, {last.get('regressed', 0)} regressed")


def _worker_line(out: ProbeOutcome) -> str:
    """Which process measured: the warm worker's fork, or a fresh one and why (eval/warm.py)."""
    if out.worker == "warm":
        return f"Worker: warm ({out.worker_note}; torch and Triton were already imported)"
    why = f": {out.worker_note}" if out.worker_note else ""
    return f"Worker: cold, a fresh process{why}"


def _render(out: ProbeOutcome, verbose: bool) -> str:
    lines = []
    if out.classification is None:
        lines.append(f"FAIL: {out.message}")
    else:
        lines += [
            f"Probe classification: {out.classification}",
            f"Metric source: {out.metric_source}",
            f"Advisory geomean speedup: {fmt_speedup(out.geomean_speedup)}",
            f"Advisory avg improvement: {fmt_improvement(out.avg_improvement_pct)}",
            f"Advisory improved cases: {out.improved}",
            f"Advisory regressed cases: {out.regressed}",
            f"Summary: {SUMMARIES[out.classification]}",
        ]
        if out.statistic:
            avg_of = ("the avg improvement is compare-perf's over the ratio of means" if not out.batches
                      else "the avg improvement is of the same, by compare-perf's formula")
            lines.append(f"Speedup statistic: {out.statistic} (per case; the geomean above is of the same; {avg_of})")
        if out.batches:
            lines.append(_adaptive_line(out))
            why = _disagreement(out)
            if why is not None:
                lines.append(why)
            lines.append(f"Time to verdict: {out.time_to_verdict_s:.1f} s" if out.time_to_verdict_s is not None
                         else "Time to verdict: none (the budget ended first; the verdict above is the last look's)")
            if out.ready_s is not None:
                lines.append(f"Start-up: {out.ready_s:.1f} s (job start, imports, both operators built) before "
                             "the first timing")
        if out.worker == "warm" or (out.worker == "cold" and out.worker_note
                                    and (verbose or not out.worker_note.startswith(NO_WORKER))):
            lines.append(_worker_line(out))
    if verbose:
        if out.cache:
            lines.append(f"Baseline cache: {out.cache}")
        if out.cache_miss_reason:
            lines.append(f"Cache miss reason: {out.cache_miss_reason}")
        if out.baseline_probe_perf:
            lines.append(f"Baseline probe perf: {out.baseline_probe_perf}")
        if out.candidate_probe_perf:
            lines.append(f"Candidate probe perf: {out.candidate_probe_perf}")
        if out.paired_file:
            lines.append(f"Paired result: {out.paired_file} (baseline and candidate measured in one job)")
    if out.warnings:
        lines.append("Warnings:")
        lines += [f"  - {w}" for w in out.warnings]
    return "\n".join(lines)


def probe_bench(
    operator_file: Path | str, baseline_operator_file: Path | str | None = None, *,
    bench_file: Path | str | None = None,
    bench_mode: str | None = None, metric_source: str = "auto", backend: str | None = None,
    devices: list[str] | None = None, adaptive: bool = False, budget_s: float = 120.0, verbose: bool = False,
    on_event: Callable[[dict[str, Any]], None] | None = None, against: str | None = None, paired: bool = True,
    warm: bool = True,
) -> ProbeOutcome:
    """Probe the candidate against a reference (``baseline_operator_file`` or ``against``). Paired
    by default: one job measures both, interleaved, and the classification reads that job's two
    sides; ``paired=False`` is upstream's path (a cached baseline probe, then the candidate).
    ``warm``: the paired and adaptive jobs run in the workspace's warm worker when one is running
    and matches (``helix worker start``, eval/warm.py), else in a fresh process."""
    if metric_source not in ("auto", "kernel", "total-op"):
        raise HelixError(f"probe-bench takes --metric-source auto, kernel or total-op, not {metric_source!r}")
    op = check_file(operator_file, "operator file", "--operator-file")
    from helix_engine.eval.pairedbench import resolve_reference

    found = resolve_reference(op, against, baseline_operator_file)
    if found is None:
        raise HelixError("probe-bench needs a reference: give --baseline-operator-file or --against baseline")
    base_op = found
    bench = check_file(bench_file, "bench file", "--bench-file") if bench_file else find_bench_file(op)
    be = resolve_backend(backend)
    mode = bench_mode_for(be, bench_mode)
    ws = layout.workspace_of(op)
    warnings: list[str] = []
    caps: dict[str, int | None] = {}
    if mode in CAPPED_MODES or adaptive:
        caps = {"warmup_cap": PROBE_WARMUP, "repeats_cap": PROBE_REPEATS}
    else:
        warnings.append(f"probe caps (warmup ≤{PROBE_WARMUP}, repeats ≤{PROBE_REPEATS}) apply only in "
                        f"{' and '.join(CAPPED_MODES)}; {mode} ran canonically")
    if adaptive:
        return _adaptive(op, base_op, bench, mode, be, ws, devices, caps, metric_source, budget_s,
                         warnings, verbose, on_event, warm)
    if paired:
        return _paired(op, base_op, bench, mode, be, ws, devices, caps, metric_source, warnings, verbose, on_event,
                       warm)
    helix = ws / layout.HELIX_DIR
    perf_path, meta_path = helix / "baseline_probe_perf.txt", helix / "baseline_probe_perf.meta.json"
    key = cache_key(base_op, bench, mode, be.name, devices)
    out = ProbeOutcome(0, None, None, warnings=warnings, baseline_probe_perf=str(perf_path))
    with probe_lock(helix / "baseline_probe_perf.lock"):
        reason = _miss_reason(meta_path, perf_path, key)
        out.cache, out.cache_miss_reason = ("miss", reason) if reason else ("hit", None)
        if reason:
            base_run = collect_records(base_op, bench, mode, be, layout.workspace_of(base_op), devices=devices,
                                       caps=caps, on_event=on_event, kind="probe-bench")
            if base_run.fatal:
                return _fail(out, f"the baseline probe did not run: {base_run.fatal}", verbose)
            refused = promote_records(perf_path, base_run)  # a failed run never becomes the cache
            if refused is not None:
                return _fail(out, f"the baseline probe failed: {refused}", verbose)
            atomic_write_json(meta_path, {"key": key, "created_at": time.time()})
    run = collect_records(op, bench, mode, be, ws, devices=devices, caps=caps, on_event=on_event,
                          kind="probe-bench")
    if run.fatal:
        return _fail(out, f"the candidate probe did not run: {run.fatal}", verbose)
    cand_path = helix / f"candidate_probe_perf.{os.getpid()}.{secrets.token_hex(3)}.txt"
    write_records(cand_path, run.records)
    out.candidate_probe_perf = str(cand_path)
    ev = _evaluate(perf_path, cand_path, metric_source)
    if ev.errors:
        return _fail(out, ev.errors[0], verbose)
    _classified(out, ev)
    out.text = _render(out, verbose)
    return out


def _paired(op: Path, base_op: Path, bench: Path, mode: str, be: Any, ws: Path, devices: list[str] | None,
            caps: dict[str, int | None], metric: str, warnings: list[str], verbose: bool,
            on_event: Callable[[dict[str, Any]], None] | None, warm: bool = True) -> ProbeOutcome:
    """Baseline and candidate in one job, interleaved (eval/pairedbench.py); the candidate's
    probe perf file and its paired result go under .helix/, and the classification reads the
    job's two sides (no baseline cache: a cached baseline is what drifts away from the candidate)."""
    from helix_engine.eval.pairedbench import collect_paired, paired_model, promote_paired
    from helix_engine.perf.paired import evaluate_paired, sidecar_path

    helix = ws / layout.HELIX_DIR
    out = ProbeOutcome(0, None, None, warnings=warnings)
    got = collect_paired(op, base_op, bench, mode, be, ws, devices=devices, caps=caps, on_event=on_event,
                         kind="probe-bench", warm=warm)
    out.worker, out.worker_note = got.worker, got.worker_note
    if got.run.fatal:
        return _fail(out, f"the paired probe did not run: {got.run.fatal}", verbose)
    cand_path = helix / f"candidate_probe_perf.{os.getpid()}.{secrets.token_hex(3)}.txt"
    run = paired_model(got, op, base_op, bench, mode, be.name, cand_path, None)
    refused = promote_paired(cand_path, got, run)
    if refused is not None:
        return _fail(out, f"the paired probe failed: {refused}", verbose)
    out.candidate_probe_perf = str(cand_path)
    out.paired_file = str(sidecar_path(cand_path))
    from helix_engine.perf.artifact import read_perf

    records, _ = read_perf(cand_path)
    ev = evaluate_paired(run, records, metric=metric, with_ci=False, sidecar=sidecar_path(cand_path))
    if ev.errors:
        return _fail(out, ev.errors[0], verbose)
    _classified(out, ev)
    out.text = _render(out, verbose)
    return out


def _classified(out: ProbeOutcome, ev: RoundEvaluation) -> None:
    """Classify the core's per-case speedups (``probe_speedups``); the geomean printed is the
    core's geomean of the same statistic."""
    _fill(out, classify(probe_speedups(ev)), ev.metric_source)
    out.avg_improvement_pct = ev.avg_improvement_pct  # the core's: what compare-perf prints for these records
    out.statistic = probe_statistic(ev)
    same = ev.geomean_median if out.statistic == "ratio of medians" else ev.geomean
    if same is not None and out.statistic in ("ratio of medians", "ratio of means"):
        out.geomean_speedup = same.point


def _fill(out: ProbeOutcome, cls: Classification, source: str | None) -> None:
    out.classification, out.metric_source = cls.label, source or "unknown"
    out.geomean_speedup, out.avg_improvement_pct = cls.geomean, cls.avg_improvement_pct
    out.improved, out.regressed = cls.improved, cls.regressed


def _fail(out: ProbeOutcome, message: str, verbose: bool) -> ProbeOutcome:
    out.exit_code, out.message = 1, message
    out.text = _render(out, verbose)
    return out


def _adaptive(op: Path, base_op: Path, bench: Path, mode: str, be: Any, ws: Path, devices: list[str] | None,
              caps: dict[str, int | None], metric: str, budget_s: float, warnings: list[str], verbose: bool,
              on_event: Callable[[dict[str, Any]], None] | None, warm: bool = True) -> ProbeOutcome:
    """One job holds both operators and measures them in paired blocks until a look settles the
    verdict (adaptive.py, perf/sequential.py); times are wall-clock from the moment the command
    started, start-up included. The margin is the workspace's calibrated one when its calibration
    matches this bench mode and backend, else 1%."""
    from helix_engine.eval.jobrun import round_name_of, run_worker
    from helix_engine.perf.calibration import margins_for
    from helix_engine.workspace.models import PerfRecord

    out = ProbeOutcome(0, None, None, warnings=warnings, statistic="ratio of medians")
    started = time.time()
    margins = margins_for(ws, [PerfRecord(case_label="probe", bench_mode=mode, backend=be.name)])
    request = {"action": "adaptive", "operator_file": str(op), "baseline_operator_file": str(base_op),
               "bench_file": str(bench), "bench_mode": mode, "deadline_ts": started + budget_s,
               "noise_margins": margins.model_dump(mode="json"), **caps}
    run = run_worker(ws, "probe-adaptive", request, backend=be, cwd=bench.parent, device_pool=devices,
                     round_name=round_name_of(op), on_event=on_event, timeout_s=budget_s + 300, warm=warm)
    out.worker, out.worker_note = run.worker, run.worker_note
    result = run.result or {}
    if run.result is None or result.get("error") or not result.get("batches"):
        return _fail(out, f"the adaptive probe did not finish: {run.failure_text()}", verbose)
    out.elapsed_s = time.time() - started
    if isinstance(result.get("ready_ts"), (int, float)):
        out.ready_s = round(float(result["ready_ts"]) - started, 3)
    out.batches = [dict(b, elapsed_s=round(b.pop("ts") - started, 3)) for b in result["batches"]]
    last = out.batches[-1]
    out.classification, out.metric_source = last["verdict"], result.get("metric_source") or "unknown"
    out.geomean_speedup, out.avg_improvement_pct = last["geomean"], last["avg_improvement_pct"]
    out.improved, out.regressed = last["improved"], last["regressed"]
    out.decision, out.margin, out.interval_confidence = last["decision"], last["margin"], last["confidence"]
    if last.get("low") is not None and last.get("high") is not None:
        out.interval = (last["low"], last["high"])
    out.stable = bool(result.get("stable"))
    if not out.stable:
        warnings.append(f"the {budget_s:g} s budget ended before the geomean's interval settled the verdict "
                        f"(wholly beyond or wholly inside the {margins.describe()} margin); measure longer "
                        "(--budget-s) or run the canonical run-bench")
    verdicts = [b["verdict"] for b in out.batches]
    first = len(verdicts) - 1
    while first > 0 and verdicts[first - 1] == verdicts[-1]:
        first -= 1
    out.verdict_first_seen_s = out.batches[first]["elapsed_s"]
    out.time_to_verdict_s = last["elapsed_s"] if out.stable else None
    out.text = _render(out, verbose)
    return out
