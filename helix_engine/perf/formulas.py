"""The compare-perf formulas and value display, one implementation of each (upstream rounding).

Every part of helix that prints a speedup or an improvement uses these: compare-perf,
status, the ledger writer, the cockpit.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Sequence


def valid_time(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _all_valid(values: list[float]) -> bool:
    """``valid_time`` of every value, a check at a time over all of them (the promotion rule
    takes ~450 geomeans of 20 cases when a mid round becomes the best, issue 12)."""
    return (all(map(isinstance, values, itertools.repeat((int, float))))
            and all(map(math.isfinite, values)) and (not values or min(values) > 0))


def avg_improvement_pct(pairs: Sequence[tuple[float, float]]) -> float | None:
    """mean((b−c)/b)·100 over (baseline, compare) pairs; None if empty or any value ≤0/NaN."""
    if not pairs or not _all_valid([v for pair in pairs for v in pair]):
        return None
    improvements = [(b - c) / b for b, c in pairs]
    return sum(improvements) / len(improvements) * 100.0


def geomean_speedup(pairs: Sequence[tuple[float, float]]) -> float | None:
    """exp(mean(ln(b/c))) over (baseline, compare) pairs; None if empty or any value ≤0/NaN."""
    return geomean_of([b for b, _ in pairs], [c for _, c in pairs])


def geomean_of(baseline: Sequence[float], compare: Sequence[float], *, checked: bool = False) -> float | None:
    """``geomean_speedup`` of the pairs zip(baseline, compare), the times as two columns (the
    promotion rule's compact comparison keeps a round's times so, issue 12). ``checked``: the
    caller has already found every time valid (``valid_time``), as the status rule's pairing does
    for the pairs it keeps; the check is then not repeated (~4 µs of a 7 µs geomean of 20 pairs).
    Upstream's formula on the ratios, not exp((Σ ln b − Σ ln c)/n) (which would let a column keep
    its sum): two rounds whose ratios are the same, case for case or permuted, then tie exactly,
    and upstream breaks that tie by mean latency."""
    if not baseline:
        return None
    if not checked and not _all_valid([*baseline, *compare]):
        return None
    return math.exp(sum(map(math.log, map(operator.truediv, baseline, compare))) / len(baseline))


def delta_pct(baseline: float, compare: float) -> float:
    """(c−b)/b·100: negative means faster."""
    return (compare - baseline) / baseline * 100.0


def format_value(value: float) -> str:
    """Upstream value display: up to 6 decimals, trailing zeros stripped, at least ``.0``."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text if "." in text else text + ".0"


def format_delta(baseline: float, compare: float) -> str:
    if baseline == 0:
        return "0.00%" if compare == 0 else "inf"
    return f"{delta_pct(baseline, compare):.2f}%"
