"""Rendering of compare-perf results: the upstream text block, our CI lines, and JSON.

Workspace text (case ids, displays, messages) is escaped with ``sanitize.clean`` where it is
formatted; for ordinary text that changes nothing, so the upstream block stays byte-identical.
"""

from __future__ import annotations

from collections.abc import Sequence

from helix_engine.console import fmt_improvement, fmt_speedup
from helix_engine.perf import stats
from helix_engine.perf.formulas import format_delta
from helix_engine.sanitize import clean
from helix_engine.workspace.models import Comparison

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


def format_ci_lines(comparison: Comparison) -> list[str]:
    """Our confidence lines (each ≤ 80 columns unless an id alone is longer)."""
    if comparison.errors or not comparison.cases:
        return []
    rows = [case for case in comparison.cases if case.ci95 is not None]
    lines: list[str] = []
    if rows:
        lines.append("Speedup 95% CI (bootstrap, ratio of medians):")
        for case in rows:
            assert case.ci95 is not None and case.ci_point is not None
            low, high = case.ci95
            detail = f"{case.ci_point:.3f}x [{low:.3f}x, {high:.3f}x] {case.verdict}"
            latency_id = clean(case.latency_id)
            line = f"  {latency_id}: {detail}"
            if len(line) > 80:
                lines.extend([f"  {latency_id}:", f"    {detail}"])
            else:
                lines.append(line)
    if comparison.geomean_ci95 is not None:
        low, high = comparison.geomean_ci95
        lines.append(f"Geomean speedup 95% CI: [{low:.3f}x, {high:.3f}x]")
    if comparison.ci_note:
        lines.append(comparison.ci_note)
    return lines


def format_comparisons(comparisons: Sequence[Comparison]) -> str:
    """One comparison as is; ``-m all`` results as sections (or the one pre-check FAIL)."""
    sections = len(comparisons) > 1
    return "".join(format_comparison(c, section=sections) for c in comparisons)


def comparisons_passed(comparisons: Sequence[Comparison]) -> bool:
    """rc 0 only if every comparison (every section of ``-m all``) passed."""
    return bool(comparisons) and all(c.passed for c in comparisons)


def comparison_to_json(comparison: Comparison) -> dict[str, object]:
    """The ``--json`` form of one comparison (ours; upstream has no JSON for compare-perf)."""
    return {
        "requested": comparison.requested,
        "metric_source": comparison.metric_source,
        "metric_source_line": metric_source_line(comparison),
        "passed": comparison.passed,
        "avg_improvement": comparison.avg_improvement_pct,
        "geomean_speedup": comparison.geomean_speedup,
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
                "ci95": list(case.ci95) if case.ci95 else None,
                "ci_point": case.ci_point,
                "verdict": case.verdict,
            }
            for case in comparison.cases
        ],
        "errors": list(comparison.errors),
        "skipped": list(comparison.skipped),
        "ci": {
            "available": any(case.ci95 is not None for case in comparison.cases),
            "method": "percentile bootstrap of median(b)/median(c)",
            "confidence": stats.DEFAULT_CONFIDENCE,
            "resamples": stats.DEFAULT_RESAMPLES,
            "geomean_ci95": list(comparison.geomean_ci95) if comparison.geomean_ci95 else None,
            "note": comparison.ci_note,
        },
    }
