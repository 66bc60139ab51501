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
A fatal problem yields ``RoundEvaluation.errors`` (one message, as upstream prints one ``FAIL:``).

This module only pairs the cases (``pair_records``); every number comes from the evaluation
core (perf/evaluation.py). After the upstream block, report.py appends our own lines (never
changing upstream's): each speedup statistic with its 95% bootstrap interval and verdict, and
the geomean's, when both sides carry ``samples_us``; otherwise one line saying no CI is available.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from helix_engine.perf import evaluation
from helix_engine.perf.artifact import record_source
from helix_engine.perf.evaluation import (  # noqa: F401 - re-exported for callers of compare
    MIN_CI_SAMPLES,
    NO_SAMPLES_NOTE,
    UNUSABLE_SAMPLES_NOTE,
    Pair,
    Paired,
)
from helix_engine.perf.formulas import (  # noqa: F401 - re-exported: compare.geomean_speedup etc.
    avg_improvement_pct,
    delta_pct,
    format_delta,
    format_value,
    geomean_speedup,
    valid_time,
)
from helix_engine.perf.margins import NoiseMargins
from helix_engine.perf.report import (  # noqa: F401 - re-exported for callers of compare
    MIXED_LINE,
    comparison_to_json,
    comparisons_passed,
    format_ci_lines,
    format_comparison,
    format_comparisons,
    metric_source_line,
)
from helix_engine.perf.results import CaseProblem, RoundEvaluation
from helix_engine.workspace.models import PerfRecord

METRICS: tuple[str, ...] = ("auto", "kernel", "total-op")
RECOVERABLE_ERROR_PREFIX = "no resolved kernels matched"
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
    b_l2, c_l2 = _cache_state(baseline, bname), _cache_state(candidate, cname)
    if b_l2 != c_l2:
        raise _Fatal(
            f"cannot compare results measured with the L2 {b_l2} (baseline) and {c_l2} (candidate): a case "
            "that fits the cache reads faster warm; bench both the same way (run-bench --l2 "
            f"{b_l2} for the candidate, or a paired run-bench, which measures both sides in one job)"
        )


def _cache_state(records: Sequence[PerfRecord], name: str) -> str | None:
    """The file's one cache state (PerfRecord.cache_state); a file that mixes them is refused."""
    states = {r.cache_state for r in records if r.bench_mode is not None}
    if len(states) > 1:
        raise _Fatal(f"cannot compare results: {_file_of(records, name)}: mixed L2 states in same file "
                     f"({', '.join(sorted(str(s) for s in states))})")
    return next(iter(states), None)


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
) -> dict[str, tuple[str, CaseProblem]]:
    """key → (upstream-style message, case problem) for the pairs the core says cannot give a
    speedup (a time not finite, ≤ 0 or below 1 ns; a speedup that overflows)."""
    errors: dict[str, tuple[str, CaseProblem]] = {}
    for key in sorted(set(b_entries) & set(c_entries)):
        b, c = b_entries[key].value, c_entries[key].value
        found = evaluation.pair_problem(b, c)
        if found is not None:
            side, reason = found
            file = cfile if side == "compare" else bfile
            value = c if side == "compare" else b
            errors[key] = (f"{file} cannot compare '{key}' because {reason}",
                           evaluation.case_problem(key, side, value, f"in {file}, {reason}"))
    return errors


# ---------------------------------------------------------------------------- comparison


def pair_records(
    baseline: Sequence[PerfRecord],
    candidate: Sequence[PerfRecord],
    metric: str = "auto",
    skip_latency_errors: bool = False,
    *,
    baseline_name: str = "baseline",
    compare_name: str = "compare",
) -> Paired:
    """The compare-perf rule's pairing for one metric source (auto | kernel | total-op)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
    paired = Paired(requested=metric)
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
            raise _Fatal(invalid[min(invalid)][0])
    except _Fatal as exc:
        paired.errors = [str(exc)]
        return paired
    comparable = sorted((set(b_entries) & set(c_entries)) - set(invalid))
    skipped = {**b_skipped, **c_skipped, **pair_skipped, **{k: v[0] for k, v in invalid.items()}}
    paired.skipped = [skipped[key] for key in sorted(skipped)]
    paired.problems = [invalid[key][1] for key in sorted(invalid)]
    for key in comparable:
        b, c = b_entries[key], c_entries[key]
        paired.pairs.append(Pair(
            latency_id=key, baseline_us=b.value, compare_us=c.value,
            metric="kernel" if b.mode == "kernel" else "total-op",
            baseline_display=b.display, compare_display=c.display,
            baseline_record=b.record, compare_record=c.record,
        ))
    return paired


def compare_records(
    baseline: Sequence[PerfRecord],
    candidate: Sequence[PerfRecord],
    metric: str = "auto",
    skip_latency_errors: bool = False,
    with_ci: bool = True,
    *,
    baseline_name: str = "baseline",
    compare_name: str = "compare",
    noise_margin: float | NoiseMargins = evaluation.DEFAULT_NOISE_MARGIN,
) -> RoundEvaluation:
    """compare-perf for one metric source (auto | kernel | total-op). Never raises on data.

    ``baseline_name``/``compare_name`` name the sides in messages for records that were not
    read from a file (records from ``read_perf`` carry their own file and line).
    """
    return evaluation.evaluate(baseline, candidate, rule="compare-perf", metric=metric,
                               skip_latency_errors=skip_latency_errors, with_ci=with_ci,
                               noise_margin=noise_margin, baseline_name=baseline_name,
                               compare_name=compare_name)


def compare_all(
    baseline: Sequence[PerfRecord],
    candidate: Sequence[PerfRecord],
    skip_latency_errors: bool = False,
    with_ci: bool = True,
    *,
    baseline_name: str = "baseline",
    compare_name: str = "compare",
    noise_margin: float | NoiseMargins = evaluation.DEFAULT_NOISE_MARGIN,
) -> list[RoundEvaluation]:
    """``-m all``: a kernel section and a total-op section (or one failed pre-check)."""
    problem = check_bench_modes(baseline, candidate, baseline_name, compare_name)
    if problem is not None:
        return [RoundEvaluation(requested="all", errors=[problem])]
    return [
        compare_records(baseline, candidate, source, skip_latency_errors, with_ci,
                        baseline_name=baseline_name, compare_name=compare_name, noise_margin=noise_margin)
        for source in ("kernel", "total-op")
    ]
