"""A round's speedup against the baseline: the one number every screen and file shows for it.

The number verdicts rest on (``RoundEvaluation.judged``): the paired run's comparison when the
round has one (its candidate and the baseline measured side by side in one job), else the two
perf files'; the geomean is the promotion rule's when the rule judged the round (it may carry an
interval the status comparison did not compute), and the average improvement comes from the same
comparison as the geomean. Upstream's numbers (the two perf files' geomean and average, which the
upstream status block and ``compare-perf`` print) are kept beside it under their own names, never
in its place.
"""

from __future__ import annotations

from typing import Literal

from helix_engine.perf.results import RoundEvaluation, RoundPromotion, SpeedupEstimate
from helix_engine.record import record

Measured = Literal["paired run", "perf files"]


@record(slots=True)
class RoundNumber:
    """A round's speedup against the baseline, and what it was measured on."""

    #: the geomean of the per-case speedups (ratio of means), its interval when one was computed
    geomean: SpeedupEstimate
    #: the average improvement, of the same comparison as ``geomean`` (percent)
    avg_improvement_pct: float | None
    #: "paired run": both sides measured in one job; "perf files": two separate jobs' files
    measured: Measured
    #: upstream's geomean: the round's perf file against the baseline's, unpaired
    upstream_geomean: float | None = None
    #: upstream's average improvement, of the same two perf files (percent)
    upstream_avg_improvement_pct: float | None = None

    @property
    def point(self) -> float:
        return self.geomean.point

    def text(self, *, source: bool = True) -> str:
        """``7.11x [6.08x, 8.37x] (paired run)``: the point, its interval when there is one, its
        source (``source=False``: without it)."""
        shown = f"{self.geomean.point:.2f}x"
        if self.geomean.interval is not None:
            shown += f" [{self.geomean.interval.low:.2f}x, {self.geomean.interval.high:.2f}x]"
        return f"{shown} ({self.measured})" if source else shown

    def to_json(self) -> dict[str, object]:
        interval = self.geomean.interval
        return {"geomean_speedup": self.geomean.point,
                "geomean_ci95": [interval.low, interval.high] if interval is not None else None,
                "verdict": self.geomean.verdict,
                "avg_improvement": None if self.avg_improvement_pct is None else self.avg_improvement_pct / 100.0,
                "measured": self.measured,
                "upstream_geomean_speedup": self.upstream_geomean,
                "upstream_avg_improvement": (None if self.upstream_avg_improvement_pct is None
                                             else self.upstream_avg_improvement_pct / 100.0)}


def round_number(comparison: RoundEvaluation | None, promotion: RoundPromotion | None = None) -> RoundNumber | None:
    """The number of a round whose status comparison with the baseline is ``comparison`` (None:
    not comparable), and whose promotion entry is ``promotion``; None without a geomean."""
    if comparison is None:
        return None
    judged = comparison.judged
    paired = judged is not comparison and judged.geomean is not None
    if not paired:
        judged = comparison
    geomean = promotion.vs_baseline if promotion is not None and promotion.vs_baseline is not None \
        and promotion.vs_baseline_paired == paired else judged.geomean
    if geomean is None:
        return None
    return RoundNumber(geomean, judged.avg_improvement_pct, "paired run" if paired else "perf files",
                       comparison.geomean_speedup, comparison.avg_improvement_pct)
