"""Rendering of compare-perf results: the upstream text block, our CI lines, and JSON.

Workspace text (case ids, displays, messages) is escaped with ``sanitize.clean`` where it is
formatted; for ordinary text that changes nothing, so the upstream block stays byte-identical.
"""

from __future__ import annotations

from collections.abc import Sequence

from helix_engine.console import fmt_improvement, fmt_speedup
from helix_engine.perf import stats
from helix_engine.perf.formulas import format_delta
from helix_engine.perf.results import STATISTIC_LABEL, SpeedupEstimate
from helix_engine.perf.results import RoundEvaluation as Comparison
from helix_engine.perf.round_number import round_number
from helix_engine.sanitize import clean

MIXED_LINE = "mixed (kernel + total-op fallback)"


def metric_source_line(comparison: Comparison) -> str:
    source = comparison.metric_source
    if source is None:
        return "unknown"
    return MIXED_LINE if source == "mixed" else source


def format_comparison(comparison: Comparison, *, section: bool = False) -> str:
    """The upstream compare-perf text (then our CI lines), newline-terminated.

    ``section=True`` renders it as one section of ``-m all`` (header line first; a section
    that could not be compared says ``unavailable: …``).
    """
    lines: list[str] = []
    if section and comparison.requested != "all":
        lines.append(f"Metric source section: {comparison.requested}")
    if comparison.errors:
        prefix = "unavailable: " if section and comparison.requested != "all" else "FAIL: "
        lines.extend(prefix + clean(error) for error in comparison.errors)
        return "\n".join(lines) + "\n"
    lines.append("Perf comparison:")
    for case in comparison.cases:
        lines.append(
            f"{clean(case.latency_id)}: baseline={clean(case.baseline_display)}, "
            f"compare={clean(case.compare_display)}, "
            f"delta={format_delta(case.baseline_us, case.compare_us)}"
        )
    number = round_number(comparison)
    if number is not None and number.measured == "paired run":  # the number verdicts rest on, then the files'
        lines.append(f"Avg improvement: {fmt_improvement(number.avg_improvement_pct)} (paired run)")
        lines.append(f"Geomean speedup: {number.text()}")
        lines.append(f"Perf files (unpaired): avg improvement {fmt_improvement(comparison.avg_improvement_pct)}, "
                     f"geomean speedup {fmt_speedup(comparison.geomean_speedup)}")
    else:  # upstream's lines, as upstream prints them
        lines.append(f"Avg improvement: {fmt_improvement(comparison.avg_improvement_pct)}")
        lines.append(f"Geomean speedup: {fmt_speedup(comparison.geomean_speedup)}")
    lines.append(f"Metric source: {metric_source_line(comparison)}")
    if comparison.skipped:
        lines.append(
            f"FAIL: skipped {len(comparison.skipped)} latency entries due to latency errors"
        )
        lines.extend(clean(skipped) for skipped in comparison.skipped)
    else:
        lines.append(f"PASS: compared {len(comparison.cases)} latency entries")
    lines.extend(format_ci_lines(comparison))
    return "\n".join(lines) + "\n"


def _estimate_text(estimate: SpeedupEstimate) -> str:
    """``1.234x [1.200x, 1.270x] faster``: a point always beside its own interval."""
    assert estimate.interval is not None
    return (f"{estimate.point:.3f}x [{estimate.interval.low:.3f}x, {estimate.interval.high:.3f}x] "
            f"{estimate.verdict}")


def pairing_line(comparison: Comparison) -> str | None:
    """The sentence that says a comparison's verdicts come from a paired run."""
    pairing = comparison.judged.pairing
    if pairing is None:
        return None
    job = f" (job {clean(pairing.job_id)})" if pairing.job_id else ""
    return (f"Paired: the reference {clean(pairing.reference_operator)} was measured in the same job{job}, "
            "interleaved in blocks (ABBA/BAAB; AB/BA for few repetitions); the intervals and verdicts below "
            "compare with it.")


#: what an "unpaired" verdict means, printed under the intervals that carry one
UNPAIRED_NOTE = ("Unpaired: measured in separate jobs, and the drift between jobs is not in these intervals; "
                 "run a paired bench for a verdict (run-bench --against baseline, or --baseline-operator-file), "
                 "or `helix calibrate` to measure that drift")


def unpaired_verdicts(comparison: Comparison) -> bool:
    """Whether any interval of ``comparison`` got the verdict "unpaired"."""
    estimates = [e for case in comparison.cases for e in (case.mean, case.median) if e is not None]
    estimates += [e for e in (comparison.geomean, comparison.geomean_median) if e is not None]
    return any(e.verdict == "unpaired" for e in estimates)


def format_ci_lines(comparison: Comparison) -> list[str]:
    """Our confidence lines (each ≤ 80 columns unless an id alone is longer): per statistic, each
    case's point with its own interval and verdict, then the geomean's; the margin the verdicts
    used; a warning when the two sides were measured apart. With a paired result, these lines
    are the paired comparison's (``judged``) and say so."""
    if comparison.errors or not comparison.cases:
        return []
    judged = comparison.judged
    if judged.errors or not judged.cases:
        judged = comparison
    paired = judged.pairing is not None
    lines: list[str] = []
    line = pairing_line(judged) if paired else None
    if line:
        lines.append(line)
    how = "bootstrap over paired blocks" if paired else "bootstrap"
    for statistic in ("mean", "median"):
        rows = [(clean(case.latency_id), getattr(case, statistic)) for case in judged.cases]
        rows = [(lid, est) for lid, est in rows if est is not None and est.interval is not None]
        if not rows:
            continue
        lines.append(f"Speedup 95% CI ({how}, {STATISTIC_LABEL[statistic]}):")
        for latency_id, estimate in rows:
            detail = _estimate_text(estimate)
            line = f"  {latency_id}: {detail}"
            if len(line) > 80:
                lines.extend([f"  {latency_id}:", f"    {detail}"])
            else:
                lines.append(line)
    for estimate in (judged.geomean, judged.geomean_median):
        if estimate is not None and estimate.interval is not None:
            label = f"paired, {STATISTIC_LABEL[estimate.statistic]}" if paired else STATISTIC_LABEL[estimate.statistic]
            lines.append(f"Geomean speedup 95% CI ({label}): {_estimate_text(estimate)}")
    if any(case.mean.interval is not None for case in judged.cases) and judged.margin_text:
        lines.append(f"Noise margin: {clean(judged.margin_text)}")
    if unpaired_verdicts(judged):
        lines.append(UNPAIRED_NOTE)
    if judged.ci_note:
        lines.append(judged.ci_note)
    elif comparison.ci_note and comparison is not judged:
        lines.append(comparison.ci_note)
    if judged.context_warning:
        lines.append(clean(judged.context_warning))
    return lines


def format_comparisons(comparisons: Sequence[Comparison]) -> str:
    """One comparison as is; ``-m all`` results as sections (or the one pre-check FAIL)."""
    sections = len(comparisons) > 1
    return "".join(format_comparison(c, section=sections) for c in comparisons)


def comparisons_passed(comparisons: Sequence[Comparison]) -> bool:
    """rc 0 only if every comparison (every section of ``-m all``) passed."""
    return bool(comparisons) and all(c.passed for c in comparisons)


def estimate_to_json(estimate: SpeedupEstimate | None) -> dict[str, object] | None:
    if estimate is None:
        return None
    return {"statistic": estimate.statistic, "point": estimate.point,
            "ci95": list(estimate.ci95) if estimate.ci95 else None, "verdict": estimate.verdict}


def comparison_to_json(comparison: Comparison) -> dict[str, object]:
    """The ``--json`` form of one comparison (ours; upstream has no JSON for compare-perf).

    The top level is the comparison verdicts rest on: the paired run's when there is one (both
    sides measured in one job), else the two perf files' (``measured`` says which); ``speedup``
    and ``geomean_speedup`` are ratios of means; each ``speedup_*``/``geomean_*`` object is one
    statistic with its own interval and verdict. ``upstream_geomean_speedup`` and
    ``upstream_avg_improvement`` are the two perf files' (upstream's compare-perf numbers);
    ``perf_files``: their whole comparison when the top level is the paired one; ``paired``: the
    paired comparison (also at the top level then)."""
    number = round_number(comparison)
    judged = comparison.judged if number is not None and number.measured == "paired run" else comparison
    out = _comparison_json(judged)  # the numbers verdicts rest on (perf/round_number.py), at the obvious keys
    out["measured"] = number.measured if number is not None else None
    out["upstream_geomean_speedup"] = comparison.geomean_speedup  # the two perf files' (upstream's compare-perf)
    out["upstream_avg_improvement"] = comparison.avg_improvement_pct
    out["perf_files"] = _comparison_json(comparison) if judged is not comparison else None
    out["paired"] = _comparison_json(comparison.paired) if comparison.paired is not None else None
    return out


def _comparison_json(comparison: Comparison) -> dict[str, object]:
    return {
        "requested": comparison.requested,
        "metric_source": comparison.metric_source,
        "metric_source_line": metric_source_line(comparison),
        "passed": comparison.passed,
        "avg_improvement": comparison.avg_improvement_pct,
        "geomean_speedup": comparison.geomean_speedup,
        "geomean_mean": estimate_to_json(comparison.geomean),
        "geomean_median": estimate_to_json(comparison.geomean_median),
        "mean_latency_us": comparison.mean_latency_us,
        "cases": [
            {
                "latency_id": case.latency_id,
                "baseline_us": case.baseline_us,
                "compare_us": case.compare_us,
                "baseline_display": case.baseline_display,
                "compare_display": case.compare_display,
                "metric": case.metric,
                "delta_pct": case.delta_pct,
                "speedup": case.speedup,
                "speedup_mean": estimate_to_json(case.mean),
                "speedup_median": estimate_to_json(case.median),
                "samples": {"baseline": case.n_baseline, "compare": case.n_compare},
                "blocks": case.n_blocks,
                "noise_margin": case.noise_margin,
                "median_noise_margin": case.median_noise_margin,
            }
            for case in comparison.cases
        ],
        "errors": list(comparison.errors),
        "skipped": list(comparison.skipped),
        "problems": [p.to_json() for p in comparison.problems],
        "ci": {
            "available": any(case.mean.interval is not None for case in comparison.cases),
            "method": "percentile bootstrap of each statistic, moved onto the printed point and "
                      "widened when needed so it contains it",
            "confidence": stats.DEFAULT_CONFIDENCE,
            "resamples": stats.DEFAULT_RESAMPLES,
            "noise_margin": comparison.noise_margin,
            "margin_source": comparison.margin_source,
            "margin": comparison.margin_text,
            "note": comparison.ci_note,
        },
        "pairing": comparison.pairing.to_json() if comparison.pairing is not None else None,
        "context_warning": comparison.context_warning,
    }
