"""compare-perf: the upstream comparison, line for line, plus bootstrap confidence.

Upstream rules (spec upstream-eval §4) reproduced here:
  * bench_mode must agree (no mix inside one file, not present on one side only, equal);
  * a case's id is ``latency-<case_label>``; every baseline id must exist in the compare
    file (``latency-case-N`` matches ``latency-N``); extra compare ids are ignored;
  * an ``error_message`` not starting with "no resolved kernels matched" fails the run
    (``skip_latency_errors`` skips and lists the case instead; the run still fails);
  * per-case metric kernel / total-op / auto, auto falling back to total-op per case and
    re-reading both sides of that case as total-op;
  * timing ≤ 0 (and, unlike upstream, NaN/inf) is an error of that case, never a crash;
  * delta (2 dp), Avg improvement (signed, 1 dp), Geomean speedup (2 dp), ids sorted.
A fatal problem yields ``Comparison.errors`` (one message, as upstream prints one ``FAIL:``).

After the upstream block we append our own lines (never changing upstream's): per-case 95%
bootstrap CIs of the speedup with a verdict, and a CI of the geomean, when both sides carry
``samples_us``; otherwise one line saying no CI is available.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from helix_engine.perf import stats
from helix_engine.perf.artifact import record_source
from helix_engine.perf.formulas import (  # noqa: F401 - re-exported: compare.geomean_speedup etc.
    avg_improvement_pct,
    delta_pct,
    format_delta,
    format_value,
    geomean_speedup,
    valid_time,
)
from helix_engine.perf.report import (  # noqa: F401 - re-exported for callers of compare
    MIXED_LINE,
    comparison_to_json,
    comparisons_passed,
    format_ci_lines,
    format_comparison,
    format_comparisons,
    metric_source_line,
)
from helix_engine.workspace.models import CaseDelta, Comparison, PerfRecord

METRICS: tuple[str, ...] = ("auto", "kernel", "total-op")
RECOVERABLE_ERROR_PREFIX = "no resolved kernels matched"
#: Fewest samples per side for a per-case CI (fewer gives a falsely narrow interval).
MIN_CI_SAMPLES = 3
NO_SAMPLES_NOTE = "No CI available: the perf files carry no raw samples (samples_us)."
UNUSABLE_SAMPLES_NOTE = (
    "No CI available: too few raw samples, or samples of another metric."
)
_CASE_ALIAS = re.compile(r"^latency-case-(\d+)$")


class _Fatal(Exception):
    """A problem that stops the comparison (upstream prints one ``FAIL:`` line)."""


@dataclass
class _Entry:
    latency_id: str  # the id as written in this file
    display: str
    value: float
    mode: str  # "kernel" | "total-op"
    record: PerfRecord
    where: str  # "file:line"



# ------------------------------------------------------------------------------- parsing


def _where(record: PerfRecord, name: str, index: int) -> str:
    source = record_source(record)
    return f"{source[0]}:{source[1]}" if source else f"{name}:{index + 1}"


def _file_of(records: Sequence[PerfRecord], name: str) -> str:
    for record in records:
        source = record_source(record)
        if source:
            return source[0]
    return name


def _line_of(record: PerfRecord, index: int) -> int:
    source = record_source(record)
    return source[1] if source else index + 1


def _canonical(latency_id: str) -> str:
    """``latency-case-N`` and ``latency-N`` name the same case."""
    match = _CASE_ALIAS.match(latency_id)
    return f"latency-{match.group(1)}" if match else latency_id


def _matcher(required: dict[str, str]) -> dict[str, str]:
    """Canonical id → the baseline id it stands for (exact ids win over aliases)."""
    table = {_canonical(wanted): wanted for wanted in required}
    table.update({wanted: wanted for wanted in required})
    return table


def _bench_mode(records: Sequence[PerfRecord], name: str) -> str | None:
    file = _file_of(records, name)
    mode: str | None = None
    for index, record in enumerate(records):
        if index == 0:
            mode = record.bench_mode
        elif record.bench_mode != mode:
            raise _Fatal(
                f"cannot compare results: {file}: mixed bench_mode in same file: line "
                f"{_line_of(record, index)} has bench_mode={record.bench_mode}, but earlier "
                f"records have bench_mode={mode}"
            )
    return mode


def check_bench_modes(
    baseline: Sequence[PerfRecord], candidate: Sequence[PerfRecord],
    baseline_name: str = "baseline", compare_name: str = "compare",
) -> str | None:
    """The upstream bench_mode pre-check: None when fine, else the FAIL message."""
    try:
        _check_bench_modes(baseline, candidate, baseline_name, compare_name)
    except _Fatal as exc:
        return str(exc)
    return None


def _check_bench_modes(
    baseline: Sequence[PerfRecord], candidate: Sequence[PerfRecord], bname: str, cname: str
) -> None:
    b_mode = _bench_mode(baseline, bname)
    c_mode = _bench_mode(candidate, cname)
    if b_mode is None and c_mode is None:
        return
    if b_mode is None:
        raise _Fatal(
            f"cannot compare results: candidate has bench_mode={c_mode} but baseline has no "
            "bench_mode (pre-perf-counter record)"
        )
    if c_mode is None:
        raise _Fatal(
            f"cannot compare results: baseline has bench_mode={b_mode} but candidate has no "
            "bench_mode (pre-perf-counter record)"
        )
    if b_mode != c_mode:
        raise _Fatal(
            "cannot compare results from different bench modes: "
            f"baseline={b_mode}, candidate={c_mode}"
        )


def _entry(record: PerfRecord, where: str, source: str) -> _Entry:
    """The value of one record under ``source`` (kernel | total-op | auto)."""
    lid = record.latency_id
    kernel, total = record.kernel_avg_time_us, record.total_op_avg_time_us
    if kernel is not None:
        if source != "total-op":
            return _Entry(lid, format_value(kernel), kernel, "kernel", record, where)
        if total is None:
            raise _Fatal(
                f"{where} requires total-op for '{lid}' under --metric-source total-op but "
                "total_op_avg_time_us is null"
            )
        return _Entry(lid, f"total-op={format_value(total)}", total, "total-op", record, where)
    if total is not None:
        if source == "kernel":
            raise _Fatal(f"{where} requires kernel latency for '{lid}' under --metric-source kernel")
        return _Entry(lid, f"NA (total-op={format_value(total)})", total, "total-op", record, where)
    raise _Fatal(f"{where} has no usable metric for '{lid}'")


def _parse_side(
    records: Sequence[PerfRecord], name: str, metric: str, skip: bool,
    required: dict[str, str] | None,
) -> tuple[dict[str, _Entry], dict[str, str]]:
    """Entries keyed by (baseline) latency id, and skipped ids → message."""
    file = _file_of(records, name)
    entries: dict[str, _Entry] = {}
    skipped: dict[str, str] = {}
    if required is not None and not required:
        return entries, skipped
    table = _matcher(required) if required is not None else None
    for index, record in enumerate(records):
        lid = record.latency_id
        key = lid if table is None else table.get(lid, table.get(_canonical(lid)))
        if key is None:
            continue
        where = _where(record, name, index)
        if key in entries or key in skipped:
            raise _Fatal(f"{where} duplicates latency id '{key}'")
        error = record.error_message
        if error is not None and not error.startswith(RECOVERABLE_ERROR_PREFIX):
            message = f"{where} cannot compare '{lid}' because 'error_message: {error}' is present"
            if skip:
                skipped[key] = message
                continue
            raise _Fatal(message)
        source = metric
        if metric == "auto" and required is not None and required.get(key) == "total-op":
            source = "total-op"
        entries[key] = _entry(record, where, source)
    if required is None and not entries and not skipped:
        raise _Fatal(f"{file} did not contain any latency-<id>: <value> entries")
    if required is not None:
        missing = sorted(set(required) - set(entries) - set(skipped))
        if missing:
            raise _Fatal(f"{file} is missing required latency ids: {missing}")
    return entries, skipped


def _normalize(
    b_entries: dict[str, _Entry], c_entries: dict[str, _Entry], skip: bool
) -> dict[str, str]:
    """auto: a case on total-op on either side is re-read as total-op on both sides."""
    skipped: dict[str, str] = {}
    for key in sorted(set(b_entries) & set(c_entries)):
        b, c = b_entries[key], c_entries[key]
        if b.mode == c.mode:
            continue
        try:
            b_entries[key] = _entry(b.record, b.where, "total-op")
            c_entries[key] = _entry(c.record, c.where, "total-op")
        except _Fatal as exc:
            if not skip:
                raise
            skipped[key] = str(exc)
            b_entries.pop(key, None)
            c_entries.pop(key, None)
    return skipped


def _invalid_values(
    b_entries: dict[str, _Entry], c_entries: dict[str, _Entry], bfile: str, cfile: str
) -> dict[str, str]:
    errors: dict[str, str] = {}
    for key in sorted(set(b_entries) & set(c_entries)):
        for side, file, value in (
            ("baseline", bfile, b_entries[key].value),
            ("compare", cfile, c_entries[key].value),
        ):
            if not valid_time(value):
                rule = "must be > 0" if math.isfinite(value) else "must be a finite number > 0"
                errors[key] = f"{file} cannot compare '{key}' because {side} timing {value} {rule}"
                break
    return errors


# ---------------------------------------------------------------------------- comparison


def compare_records(
    baseline: Sequence[PerfRecord],
    candidate: Sequence[PerfRecord],
    metric: str = "auto",
    skip_latency_errors: bool = False,
    with_ci: bool = True,
    *,
    baseline_name: str = "baseline",
    compare_name: str = "compare",
) -> Comparison:
    """compare-perf for one metric source (auto | kernel | total-op). Never raises on data.

    ``baseline_name``/``compare_name`` name the sides in messages for records that were not
    read from a file (records from ``read_perf`` carry their own file and line).
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
    comparison = Comparison(requested=metric, metric_source=None)
    bfile, cfile = _file_of(baseline, baseline_name), _file_of(candidate, compare_name)
    skip = skip_latency_errors
    try:
        _check_bench_modes(baseline, candidate, baseline_name, compare_name)
        b_entries, b_skipped = _parse_side(baseline, baseline_name, metric, skip, None)
        required = {key: entry.mode for key, entry in b_entries.items()}
        c_entries, c_skipped = _parse_side(candidate, compare_name, metric, skip, required)
        pair_skipped = _normalize(b_entries, c_entries, skip) if metric == "auto" else {}
        invalid = _invalid_values(b_entries, c_entries, bfile, cfile)
        if invalid and not skip:
            raise _Fatal(invalid[sorted(invalid)[0]])
    except _Fatal as exc:
        comparison.errors = [str(exc)]
        return comparison
    comparable = sorted((set(b_entries) & set(c_entries)) - set(invalid))
    skipped = {**b_skipped, **c_skipped, **pair_skipped, **invalid}
    comparison.skipped = [skipped[key] for key in sorted(skipped)]
    for key in comparable:
        b, c = b_entries[key], c_entries[key]
        comparison.cases.append(
            CaseDelta(
                latency_id=key, baseline_us=b.value, compare_us=c.value,
                metric="kernel" if b.mode == "kernel" else "total-op",
                delta_pct=delta_pct(b.value, c.value), speedup=b.value / c.value,
                baseline_display=b.display, compare_display=c.display,
            )
        )
    pairs = [(case.baseline_us, case.compare_us) for case in comparison.cases]
    comparison.avg_improvement_pct = avg_improvement_pct(pairs)
    comparison.geomean_speedup = geomean_speedup(pairs)
    if pairs:
        comparison.mean_latency_us = sum(c for _, c in pairs) / len(pairs)
        modes = {case.metric for case in comparison.cases}
        if metric in ("kernel", "total-op"):
            comparison.metric_source = metric  # type: ignore[assignment]
        else:
            comparison.metric_source = modes.pop() if len(modes) == 1 else "mixed"  # type: ignore[assignment]
    if with_ci:
        _attach_ci(comparison, {k: (b_entries[k].record, c_entries[k].record) for k in comparable})
    return comparison


def compare_all(
    baseline: Sequence[PerfRecord],
    candidate: Sequence[PerfRecord],
    skip_latency_errors: bool = False,
    with_ci: bool = True,
    *,
    baseline_name: str = "baseline",
    compare_name: str = "compare",
) -> list[Comparison]:
    """``-m all``: a kernel section and a total-op section (or one failed pre-check)."""
    problem = check_bench_modes(baseline, candidate, baseline_name, compare_name)
    if problem is not None:
        return [Comparison(requested="all", metric_source=None, errors=[problem])]
    return [
        compare_records(baseline, candidate, source, skip_latency_errors, with_ci,
                        baseline_name=baseline_name, compare_name=compare_name)
        for source in ("kernel", "total-op")
    ]


def _usable_samples(record: PerfRecord, metric: str) -> list[float] | None:
    """The record's samples when they measure ``metric`` (kernel | total-op), else None.

    Writers keep samples of the record's own metric: the kernel sum when kernels matched,
    otherwise total-op. They measure the other metric too only when both averages agree
    (perf-counter timing, where total-op = kernel).
    """
    samples = record.samples_us
    if not samples or len(samples) < MIN_CI_SAMPLES or not all(valid_time(v) for v in samples):
        return None
    kernel, total = record.kernel_avg_time_us, record.total_op_avg_time_us
    own = "kernel" if kernel is not None else "total-op"
    if own != metric and not (kernel is not None and kernel == total):
        return None
    return list(samples)


def _attach_ci(comparison: Comparison, records: dict[str, tuple[PerfRecord, PerfRecord]]) -> None:
    with_samples: list[tuple[list[float], list[float]]] = []
    any_samples = False
    for case in comparison.cases:
        b_rec, c_rec = records[case.latency_id]
        any_samples = any_samples or bool(b_rec.samples_us and c_rec.samples_us)
        b, c = _usable_samples(b_rec, case.metric), _usable_samples(c_rec, case.metric)
        if b is None or c is None:
            continue
        ci = stats.bootstrap_speedup_ci(b, c)
        case.ci95, case.ci_point, case.verdict = (ci.low, ci.high), ci.point, stats.verdict(ci)
        with_samples.append((b, c))
    if not comparison.cases:
        return
    if not with_samples:
        comparison.ci_note = UNUSABLE_SAMPLES_NOTE if any_samples else NO_SAMPLES_NOTE
        return
    if len(with_samples) < len(comparison.cases):
        missing = len(comparison.cases) - len(with_samples)
        comparison.ci_note = (
            f"No geomean CI: {missing} of {len(comparison.cases)} cases lack usable samples."
        )
        return
    geo = stats.bootstrap_geomean_ci(with_samples)
    comparison.geomean_ci95 = (geo.low, geo.high)
