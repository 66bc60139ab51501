"""Roofline figures: achieved GB/s and TFLOP/s of a bench case, as a fraction of the device's peak.

Why: a speedup says a round is faster than its parent, not how far it is from what the device
can do. A bench case may declare the bytes its operator must move and the flops it must do
(case keys ``bytes``/``flops``, or a hook ``build_bench_case_work(case)`` returning them);
divided by the measured time they give achieved bandwidth and throughput, and against the
device's peak (perf/peaks.py: measured by ``helix calibrate --peak``, else a datasheet table)
a fraction that decides the bound by measurement: a kernel at 85% of copy bandwidth is
memory-bound, whatever the pipe ratios suggest.

One implementation: the bench child writes these figures into each perf record (helix key
``roofline``; upstream readers ignore unknown keys), and compare-perf, the perf pane,
profile-report and the symptom routing all compute them here, from the record's declared work
and the time the comparison used, against the peaks known now (a calibration run after the
bench upgrades a datasheet fraction to a measured one; the source is always shown).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeGuard

from helix_engine.perf.peaks import DevicePeaks, Peak, peaks_for

RECORD_KEY = "roofline"
WORK_HOOK = "build_bench_case_work"
#: At or above this fraction of the copy bandwidth a case is memory-bound by measurement.
MEMORY_BOUND_AT = 0.70
#: At or above this fraction of the matmul/datasheet throughput a case is compute-bound.
COMPUTE_BOUND_AT = 0.70
#: Below this fraction of every known peak the time goes to neither: launch or scalar work.
LOW_AT = 0.30

Bound = Literal["memory-bound", "compute-bound", "latency-bound"]

_DTYPE_NAMES = {
    "float16": "fp16", "half": "fp16", "fp16": "fp16", "f16": "fp16",
    "bfloat16": "bf16", "bf16": "bf16",
    "float32": "fp32", "float": "fp32", "fp32": "fp32", "f32": "fp32",
}


def dtype_name(value: Any) -> str | None:
    """``torch.float16`` / ``"float16"`` / ``"fp16"`` → ``"fp16"`` (bf16, fp32 likewise); else None."""
    if value is None:
        return None
    text = str(value).lower().removeprefix("torch.")
    return _DTYPE_NAMES.get(text)


# --------------------------------------------------------------------------- declared work


@dataclass(frozen=True)
class CaseWork:
    """What a bench case declares: bytes its operator must move, flops it must do, the dtype
    whose compute peak applies, and optionally the bytes each kernel moves (profile-report)."""

    bytes: float | None = None
    flops: float | None = None
    dtype: str | None = None
    kernel_bytes: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bytes": self.bytes, "flops": self.flops, "dtype": self.dtype}
        if self.kernel_bytes:
            out["kernel_bytes"] = dict(self.kernel_bytes)
        return {k: v for k, v in out.items() if v is not None}


def _amount(value: Any, key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{key}={value!r} is invalid; declare a number ≥ 0 (the count for one call of the operator)")
    return int(value) if float(value).is_integer() else float(value)


def parse_work(data: Mapping[str, Any], fallback_dtype: Any = None) -> CaseWork | None:
    """The work in a case dict or a hook's result; None when it declares neither bytes nor flops.
    Raises ValueError with a sentence when a value is not a non-negative number."""
    nbytes, flops = _amount(data.get("bytes"), "bytes"), _amount(data.get("flops"), "flops")
    per_kernel = data.get("kernel_bytes") or {}
    if not isinstance(per_kernel, Mapping):
        raise ValueError("kernel_bytes must map kernel names to bytes")
    kernel_bytes = {str(k): v for k, v in ((k, _amount(v, f"kernel_bytes[{k!r}]")) for k, v in per_kernel.items())
                    if v is not None}
    if nbytes is None and flops is None and not kernel_bytes:
        return None
    return CaseWork(nbytes, flops, dtype_name(data.get("dtype")) or dtype_name(fallback_dtype), kernel_bytes)


def case_work(bench_module: Any, case: Mapping[str, Any]) -> CaseWork | None:
    """A case's declared work: the ``build_bench_case_work(case)`` hook when the harness has it,
    else the case's own ``bytes``/``flops`` keys. ValueError (a sentence) when malformed."""
    hook = getattr(bench_module, WORK_HOOK, None)
    if callable(hook):
        got = hook(case)
        if got is None:
            return None
        if not isinstance(got, Mapping):
            raise ValueError(f"{WORK_HOOK} returned {type(got).__name__}; return a dict with bytes and/or flops")
        return parse_work(got, case.get("dtype"))
    return parse_work(case, case.get("dtype"))


def record_work(record: Any) -> CaseWork | None:
    """The work a perf record carries (``roofline`` key), or None (upstream files, no declaration)."""
    data = _record_dict(record).get(RECORD_KEY)
    if not isinstance(data, Mapping):
        return None
    try:
        return parse_work(data)
    except ValueError:
        return None


def _record_dict(record: Any) -> dict[str, Any]:
    if isinstance(record, Mapping):
        return dict(record)
    extra = getattr(record, "model_extra", None) or {}
    return {**extra, "device": getattr(record, "device", None),
            "kernel_avg_time_us": getattr(record, "kernel_avg_time_us", None),
            "total_op_avg_time_us": getattr(record, "total_op_avg_time_us", None)}


# ------------------------------------------------------------------------------- figures


def achieved_gbps(nbytes: float, time_us: float) -> float:
    """bytes ÷ seconds ÷ 1e9 (GB/s, decimal as datasheets count)."""
    return nbytes / time_us / 1e3


def achieved_tflops(flops: float, time_us: float) -> float:
    """flops ÷ seconds ÷ 1e12."""
    return flops / time_us / 1e6


def _valid_time(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


@dataclass(frozen=True)
class Roofline:
    """One case's figures at one time (µs per call)."""

    work: CaseWork
    time_us: float
    metric: str
    device: str | None
    gbps: float | None
    tflops: float | None
    bw_peak: Peak | None
    compute_peak: Peak | None
    note: str | None = None
    cache_bytes: float | None = None  # the device's L2, when known: a smaller working set can beat the DRAM roof

    @property
    def bw_fraction(self) -> float | None:
        return self.gbps / self.bw_peak.value if self.gbps is not None and self.bw_peak else None

    @property
    def compute_fraction(self) -> float | None:
        return self.tflops / self.compute_peak.value if self.tflops is not None and self.compute_peak else None

    def to_json(self) -> dict[str, Any]:
        """The record's ``roofline`` value: the declared work, then what was achieved and of what."""
        out: dict[str, Any] = {**self.work.to_json(), "time_us": self.time_us, "metric": self.metric}
        for key, value, peak, frac in (("gbps", self.gbps, self.bw_peak, self.bw_fraction),
                                       ("tflops", self.tflops, self.compute_peak, self.compute_fraction)):
            if value is None:
                continue
            out[key] = float(f"{value:.6g}")
            if peak is not None and frac is not None:
                out[f"peak_{key}"], out[f"peak_{key}_source"] = peak.value, peak.source
                out[f"peak_{key}_label"] = peak.label
                out["bw_fraction" if key == "gbps" else "compute_fraction"] = float(f"{frac:.6g}")
        if self.device:
            out["device"] = self.device
        if self.note:
            out["note"] = self.note
        return out

    def text(self) -> str:
        """``3622 GB/s (86% of copy 4224 measured) · 0.9 TFLOP/s`` — each figure with its peak."""
        parts: list[str] = []
        if self.gbps is not None:
            parts.append(f"{_num(self.gbps)} GB/s" + _of(self.bw_fraction, self.bw_peak, "GB/s"))
        if self.tflops is not None:
            parts.append(f"{_num(self.tflops)} TFLOP/s" + _of(self.compute_fraction, self.compute_peak, "TFLOP/s"))
        return " · ".join(parts)


    def short(self) -> str:
        """``3622 GB/s 86%`` (the peak is named once, on the block's Peak line)."""
        parts = [f"{_num(v)} {unit}" + (f" {pct(f)}" if f is not None else "")
                 for v, unit, f in ((self.gbps, "GB/s", self.bw_fraction),
                                    (self.tflops, "TFLOP/s", self.compute_fraction)) if v is not None]
        return " · ".join(parts)


def _num(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def pct(fraction: float) -> str:
    """A fraction of peak as a percentage that never reads 0% for a real figure."""
    if fraction >= 0.01:
        return f"{fraction:.0%}"
    return f"{fraction:.1%}" if fraction >= 0.001 else "<0.1%"


def _of(fraction: float | None, peak: Peak | None, unit: str) -> str:
    if fraction is None or peak is None:
        return ""
    return f" ({pct(fraction)} of {_num(peak.value)} {unit}, {peak.short})"


def figures(work: CaseWork, time_us: float, metric: str, peaks: DevicePeaks) -> Roofline | None:
    """The figures of ``work`` done in ``time_us``; None without a valid time."""
    if not _valid_time(time_us):
        return None
    gbps = achieved_gbps(work.bytes, time_us) if work.bytes else None
    tflops = achieved_tflops(work.flops, time_us) if work.flops else None
    compute_peak = peaks.tflops.get(work.dtype) if work.dtype else None
    note = peaks.note
    if tflops is not None and compute_peak is None and peaks.tflops and note is None:
        note = f"no compute peak for dtype {work.dtype or '(undeclared)'}: declare dtype fp16, bf16 or fp32"
    return Roofline(work, float(time_us), metric, peaks.device, gbps, tflops,
                    peaks.gbps if gbps is not None else None, compute_peak if tflops is not None else None, note,
                    peaks.cache_bytes)


def record_time(record: Any) -> tuple[float | None, str]:
    """The record's time per call and which one: the kernel time, else the total-op time (auto)."""
    data = _record_dict(record)
    kernel, total = data.get("kernel_avg_time_us"), data.get("total_op_avg_time_us")
    if _valid_time(kernel):
        return float(kernel), "kernel"
    if _valid_time(total):
        return float(total), "total-op"
    return None, "kernel"


def for_record(record: Any, workspace: Path | None = None, *, time_us: float | None = None,
               metric: str | None = None, peaks: DevicePeaks | None = None) -> Roofline | None:
    """A perf record's figures (its own time, or ``time_us`` the comparison used), against the
    peaks of its device known now; None when it declares no work or has no time."""
    work = record_work(record)
    if work is None:
        return None
    if time_us is None:
        time_us, metric = record_time(record)
    if time_us is None:
        return None
    device = _record_dict(record).get("device")
    return figures(work, time_us, metric or "kernel", peaks or peaks_for(device, workspace))


def record_entry(record: Mapping[str, Any], work: CaseWork | None, workspace: Path | None) -> dict[str, Any] | None:
    """What the bench child stores under the record's ``roofline`` key: the declared work and,
    when the case was timed, what it achieved against the peaks known at that moment."""
    if work is None:
        return None
    time_us, metric = record_time(record)
    fig = figures(work, time_us, metric, peaks_for(record.get("device"), workspace)) if time_us else None
    return fig.to_json() if fig is not None else work.to_json()


# ------------------------------------------------------------------------- the judgement


@dataclass(frozen=True)
class Judgement:
    """The bound a case's fractions decide, and the measurement that decided it (a sentence)."""

    bound: Bound
    evidence: str
    caveat: str | None = None  # e.g. above the copy peak because the working set fits the L2

    @property
    def text(self) -> str:
        """``memory-bound`` or ``memory-bound, above the copy peak: fits the 50 MB L2``."""
        return self.bound + (f", {self.caveat}" if self.caveat else "")


def _above_peak(fig: Roofline) -> str | None:
    """Why a bandwidth fraction reads over 100%: a DRAM copy peak does not bound a working set
    that stays in the L2 between calls (run-bench reuses its inputs), or the declared bytes
    count traffic the cache serves."""
    if fig.bw_fraction is None or fig.bw_fraction <= 1.0:
        return None
    if fig.cache_bytes and fig.work.bytes and fig.work.bytes <= fig.cache_bytes:
        return (f"above the copy peak: the working set ({fig.work.bytes / 1e6:.3g} MB) fits the "
                f"{fig.cache_bytes / 1e6:.0f} MB L2")
    return "above the copy peak: the declared bytes count traffic the cache serves"


def judge(fig: Roofline | None) -> Judgement | None:
    """memory-bound at ≥ MEMORY_BOUND_AT of the bandwidth peak; compute-bound at ≥
    COMPUTE_BOUND_AT of the compute peak; latency-bound (launch or scalar work) when every
    known fraction is under LOW_AT; None in between or without a peak."""
    if fig is None:
        return None
    bw, cp = fig.bw_fraction, fig.compute_fraction
    if bw is None and cp is None:
        return None
    if bw is not None and bw >= MEMORY_BOUND_AT and fig.bw_peak is not None:
        caveat = _above_peak(fig)
        more = (f"; {caveat}, so this case times the cache, not DRAM: give a case a working set larger than the "
                "L2 to see the DRAM roof") if caveat else ""
        return Judgement("memory-bound", f"achieved {_num(fig.gbps or 0)} GB/s = {bw:.0%} of "
                         f"{_num(fig.bw_peak.value)} GB/s ({fig.bw_peak.label}) ≥ {MEMORY_BOUND_AT:.0%}: "
                         f"at the bandwidth roof, only moving fewer bytes helps{more}", caveat)
    if cp is not None and cp >= COMPUTE_BOUND_AT and fig.compute_peak is not None:
        return Judgement("compute-bound", f"achieved {_num(fig.tflops or 0)} TFLOP/s = {cp:.0%} of "
                         f"{_num(fig.compute_peak.value)} TFLOP/s ({fig.compute_peak.label}) ≥ {COMPUTE_BOUND_AT:.0%}")
    if all(f is None or f < LOW_AT for f in (bw, cp)):
        shown = "; ".join(x for x in (
            f"{bw:.0%} of the bandwidth peak ({fig.bw_peak.label})" if bw is not None and fig.bw_peak else "",
            f"{cp:.0%} of the compute peak ({fig.compute_peak.label})" if cp is not None and fig.compute_peak else "",
        ) if x)
        return Judgement("latency-bound", f"{shown}: under {LOW_AT:.0%} of every peak, so the time goes to "
                         "launches or scalar work, not to moving bytes or computing")
    return None


# ------------------------------------------------------------------------ comparisons


@dataclass(frozen=True)
class CaseRoofline:
    """One compared case: the baseline's and the candidate's figures at the compared times."""

    latency_id: str
    baseline: Roofline | None
    compare: Roofline | None


def _by_label(records: Sequence[Any]) -> dict[str, Any]:
    return {f"latency-{getattr(r, 'case_label', None) or _record_dict(r).get('case_label')}": r for r in records}


def comparison_figures(comparison: Any, baseline: Sequence[Any], candidate: Sequence[Any],
                       workspace: Path | None = None) -> list[CaseRoofline]:
    """Per compared case, each side's figures at the time the comparison used (same metric);
    cases whose records declare no work are left out."""
    base, cand = _by_label(baseline), _by_label(candidate)
    cache: dict[str | None, DevicePeaks] = {}

    def fig(record: Any, time_us: float | None, metric: str) -> Roofline | None:
        if record is None or time_us is None:
            return None
        device = _record_dict(record).get("device")
        if device not in cache:
            cache[device] = peaks_for(device, workspace)
        return for_record(record, time_us=time_us, metric=metric, peaks=cache[device])

    rows = []
    for case in getattr(comparison, "cases", []):
        b = fig(base.get(case.latency_id), case.baseline_us, case.metric)
        c = fig(cand.get(case.latency_id), case.compare_us, case.metric)
        if b is not None or c is not None:
            rows.append(CaseRoofline(case.latency_id, b, c))
    return rows


def peak_line(rows: Sequence[CaseRoofline]) -> str:
    """Which peaks the fractions below are of (one line), or a sentence saying none is known."""
    figs = [f for r in rows for f in (r.compare, r.baseline) if f is not None]
    peaks = dict.fromkeys((p.label, p.value, unit) for unit in ("GB/s", "TFLOP/s") for f in figs
                          for p in ((f.bw_peak if unit == "GB/s" else f.compute_peak),) if p is not None)
    if not peaks:
        note = next((f.note for f in figs if f.note), None)
        return f"Peak: none known ({note})" if note else "Peak: none known"
    shown = "; ".join(f"{_num(v)} {unit} ({label})" for label, v, unit in peaks)
    device = next((f.device for f in figs if f.device), None)
    return f"Peak{f' of {device}' if device else ''}: {shown}"


def format_block(comparisons: Sequence[Any], baseline: Sequence[Any], candidate: Sequence[Any],
                 workspace: Path | None = None) -> list[str]:
    """compare-perf's roofline block (printed after upstream's block and our CI lines, never
    inside them); [] when no case declares its work."""
    lines: list[str] = []
    for comparison in comparisons:
        rows = comparison_figures(comparison, baseline, candidate, workspace)
        if not rows:
            continue
        metric = getattr(comparison, "metric_source", None) or getattr(comparison, "requested", "")
        lines.append(f"Roofline (bytes/flops the bench cases declare ÷ {metric} time; % of the peak below):")
        for row in rows:
            sides = [f"{side} {fig.short()}" + (f" ({j.text})" if (j := judge(fig)) else "")
                     for side, fig in (("baseline", row.baseline), ("compare", row.compare)) if fig is not None]
            line = f"  {row.latency_id}: " + ", ".join(sides)
            lines.extend([line] if len(line) <= 80 else [f"  {row.latency_id}:", *(f"    {s}" for s in sides)])
        lines.append(peak_line(rows))
    return lines


def case_text(row: CaseRoofline, compare_name: str = "compare", baseline_name: str = "baseline") -> str:
    """One compared case for the cockpit's exact line: ``roofline: baseline 1200 GB/s 28%,
    round-2 3622 GB/s 86% (memory-bound)``."""
    sides = [f"{name} {fig.short()}" + (f" ({j.text})" if (j := judge(fig)) else "")
             for name, fig in ((baseline_name, row.baseline), (compare_name, row.compare)) if fig is not None]
    return "roofline: " + ", ".join(sides)


def summary_text(rows: Sequence[CaseRoofline], name: str = "compare") -> str | None:
    """The perf pane's one line for a comparison: the candidate's range of fractions of the
    bandwidth (and compute) peak, how many cases each measurement decides, and which peak."""
    figs = [r.compare for r in rows if r.compare is not None]
    if not figs:
        return None
    parts = []
    for label, values, peak in (
        ("bandwidth", [f.bw_fraction for f in figs if f.bw_fraction is not None], figs[0].bw_peak),
        ("compute", [f.compute_fraction for f in figs if f.compute_fraction is not None],
         next((f.compute_peak for f in figs if f.compute_peak), None)),
    ):
        if values and peak is not None:
            span = pct(min(values)) if len(values) == 1 or pct(min(values)) == pct(max(values)) \
                else f"{pct(min(values))}–{pct(max(values))}"
            parts.append(f"{span} of {label} ({_num(peak.value)} {'GB/s' if label == 'bandwidth' else 'TFLOP/s'}, "
                         f"{peak.short})")
    if not parts:
        note = next((f.note for f in figs if f.note), None)
        return f"roofline: {name} declares its work; no peak known" + (f" ({note})" if note else "")
    bounds = [j.bound for f in figs if (j := judge(f)) is not None]
    decided = ", ".join(f"{bounds.count(b)} {b}" for b in dict.fromkeys(bounds))
    return f"roofline: {name} at " + "; ".join(parts) + (f" · by measurement: {decided}" if decided else "")


def record_text(record: Any, workspace: Path | None = None) -> str:
    """A single record's figures (the baseline table's roofline column), or ""."""
    fig = for_record(record, workspace)
    return fig.short() if fig is not None else ""


def comparisons_to_json(comparisons: Sequence[Any], baseline: Sequence[Any], candidate: Sequence[Any],
                        workspace: Path | None = None) -> list[dict[str, Any]]:
    """The block as JSON: per comparison, per case, each side's figures and judgement."""
    out = []
    for comparison in comparisons:
        rows = comparison_figures(comparison, baseline, candidate, workspace)
        out.append({"metric_source": getattr(comparison, "metric_source", None), "cases": [
            {"latency_id": r.latency_id,
             **{side: ({**fig.to_json(), "bound": (j.bound if (j := judge(fig)) else None),
                        "caveat": (j.caveat if j else None)} if fig else None)
                for side, fig in (("baseline", r.baseline), ("compare", r.compare))}}
            for r in rows]})
    return out


# ------------------------------------------------------------------------ profile-report


def profile_figures(work_json: Any, kernels: Sequence[tuple[str, float]], repeats: int, kernel_names: Sequence[str],
                    device: str | None, workspace: Path | None = None) -> dict[str, Any]:
    """profile-report's roofline: ``kernels`` are (name, total µs over the profiled steps) rows,
    ``repeats`` the profiled steps. The operator's declared bytes/flops over the resolved kernels'
    time per call, and each kernel's achieved bandwidth where the case declares its bytes
    (``kernel_bytes``). {} when the case declared no work or no step was profiled."""
    work = parse_work(work_json) if isinstance(work_json, Mapping) else None
    if work is None or repeats <= 0:
        return {}
    peaks = peaks_for(device, workspace)
    out: dict[str, Any] = {"device": device, "steps": repeats, "kernels": []}
    per_call = {name: total / repeats for name, total in kernels}
    resolved = [n for n in kernel_names if n in per_call]
    shown: list[Roofline] = []
    if resolved and (work.bytes or work.flops):
        op_fig = figures(work, sum(per_call[n] for n in resolved), "kernel", peaks)
        if op_fig is not None:
            shown.append(op_fig)
            verdict = judge(op_fig)
            out["operator"] = {**op_fig.to_json(), "kernels": resolved, "text": op_fig.text(),
                               "bound": verdict.bound if verdict else None,
                               "caveat": verdict.caveat if verdict else None,
                               "evidence": verdict.evidence if verdict else None}
    single = resolved[0] if len(resolved) == 1 else None
    for name, time_us in per_call.items():
        nbytes = work.kernel_bytes.get(name) or (work.bytes if name == single else None)
        if not nbytes:
            continue
        fig = figures(CaseWork(bytes=nbytes, dtype=work.dtype), time_us, "kernel", peaks)
        if fig is not None:
            shown.append(fig)
            out["kernels"].append({"name": name, "bytes": nbytes, "time_us": fig.time_us, "gbps": fig.gbps,
                                   "bw_fraction": fig.bw_fraction, "text": fig.text(),
                                   "declared": "kernel_bytes" if name in work.kernel_bytes else "case bytes"})
    out["peak"] = peak_line([CaseRoofline("", None, f) for f in shown]) if shown else None
    if peaks.note:
        out["note"] = peaks.note
    return out
