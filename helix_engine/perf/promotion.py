"""The promotion rule: which round is the current best, which are validated branches.

One rule, used by status, the snapshot (the tree's ★), the ledger and the submit guideline:

* "current best": correctness passed, the geomean against the baseline is above 1 beyond the
  noise margin, and the round is faster than the best before it beyond the noise margin (the
  first such round beats the baseline, which is the best before any round);
* "validated branch": faster than the baseline beyond the noise margin, not (or no longer) the
  current best;
* "not promoted": everything else, a no-op round at ~1.0x and a round slower than the baseline
  included. With no current best, the best is ``baseline``.

"Beyond the noise margin" means the lower end of the geomean's 95% interval is above 1 + margin
when both sides carry samples (the interval contains its point, so the point is above too); files
without samples (upstream's) can only be judged on the point, and the result says so (basis).
Rounds are judged in round order, so a round's status depends only on files, never on who asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from helix_engine.perf import evaluation
from helix_engine.perf.margins import NoiseMargins, as_margins
from helix_engine.perf.results import (
    CURRENT_BEST,
    NOT_PROMOTED,
    VALIDATED,
    Basis,
    Promotion,
    RoundEvaluation,
    RoundPromotion,
    SpeedupEstimate,
)
from helix_engine.workspace.models import PerfRecord


@dataclass
class Candidate:
    """One round as the rule sees it. ``vs_baseline`` is its status-rule comparison (with or
    without intervals: the rule computes them when the point could pass)."""

    number: int
    eligible: bool
    why_not: str | None = None
    metric: str = "auto"
    records: Sequence[PerfRecord] = field(default_factory=list)
    vs_baseline: RoundEvaluation | None = None


def _text(estimate: SpeedupEstimate) -> str:
    if estimate.interval is None:
        return f"{estimate.point:.2f}x (no samples, no interval)"
    return f"{estimate.point:.2f}x [{estimate.interval.low:.2f}–{estimate.interval.high:.2f}]"


def beyond_noise(estimate: SpeedupEstimate, margin: float) -> bool:
    """Faster beyond the noise margin: the interval's low end (else the point) above 1 + margin."""
    value = estimate.interval.low if estimate.interval is not None else estimate.point
    return value > 1.0 + margin


def _judged(ev: RoundEvaluation, baseline: Sequence[PerfRecord], records: Sequence[PerfRecord],
            metric: str, margin: float | NoiseMargins) -> RoundEvaluation:
    """``ev`` with intervals when its point could pass (an interval contains its point, so a
    point at or below 1 + margin fails either way: no bootstrap is spent on it)."""
    geo = ev.geomean
    limit = as_margins(margin).for_geomean(case.latency_id for case in ev.cases)
    if geo is None or geo.interval is not None or geo.point <= 1.0 + limit:
        return ev
    if not ev.cases or any(case.median is None for case in ev.cases):
        return ev  # a case without usable samples on both sides: no interval to compute
    return evaluation.evaluate(baseline, records, rule="status", metric=metric, with_ci=True,
                               noise_margin=margin, ci_statistics=("mean",))


def promote(candidates: Sequence[Candidate], baseline: Sequence[PerfRecord], *,
            noise_margin: float | NoiseMargins = evaluation.DEFAULT_NOISE_MARGIN) -> Promotion:
    """Apply the rule to every candidate in round order. ``noise_margin``: one margin, or the
    per-case margins of ``helix calibrate`` (a geomean is judged by its cases' mean margin). A
    comparison with a paired result (``RoundEvaluation.paired``) is judged on the paired one."""
    margins = as_margins(noise_margin)
    base_ids = [r.latency_id for r in baseline]
    overall = margins.for_geomean(base_ids)
    out = Promotion(noise_margin=overall, margin_source=margins.source, margin_text=margins.describe(base_ids))
    margin_text = f"the calibrated {overall:.1%} noise margin" if margins.source == "calibrated" \
        else f"the {overall:.0%} noise margin"
    best: Candidate | None = None
    for cand in sorted(candidates, key=lambda c: c.number):
        n = cand.number
        ev = cand.vs_baseline
        if not cand.eligible or ev is None or ev.geomean is None:
            why = cand.why_not or (ev.errors[0] if ev is not None and ev.errors else "no comparison with the baseline")
            out.rounds[n] = RoundPromotion(round=n, status=NOT_PROMOTED, reason=why)
            continue
        if ev.paired is not None and ev.paired.geomean is not None:
            ev = ev.paired  # measured beside the baseline in one job: drift is out of its interval
        else:
            ev = _judged(ev, baseline, cand.records, cand.metric, margins)
        assert ev.geomean is not None
        base_margin = margins.for_geomean(case.latency_id for case in ev.cases)
        vs_base = ev.geomean
        basis: Basis = "interval" if vs_base.interval is not None else "point"
        if not beyond_noise(vs_base, base_margin):
            slower = vs_base.point < 1.0 - base_margin
            out.rounds[n] = RoundPromotion(
                round=n, status=NOT_PROMOTED, vs_baseline=vs_base, basis=basis,
                reason=(f"geomean {_text(vs_base)} vs baseline is "
                        + ("slower than the baseline" if slower else f"not faster beyond {margin_text}")))
            continue
        if best is None:
            out.rounds[n] = RoundPromotion(
                round=n, status=CURRENT_BEST, vs_baseline=vs_base, basis=basis,
                reason=f"geomean {_text(vs_base)} vs baseline, faster beyond {margin_text}")
            best = cand
            continue
        vs = evaluation.evaluate(best.records, cand.records, rule="status", metric=cand.metric, with_ci=False,
                                 noise_margin=margins)
        vs = _judged(vs, best.records, cand.records, cand.metric, margins)
        vs_best = vs.geomean
        if vs_best is None:
            reason = f"faster than the baseline ({_text(vs_base)}) but not comparable with round-{best.number}"
            out.rounds[n] = RoundPromotion(round=n, status=VALIDATED, vs_baseline=vs_base, basis=basis,
                                           previous_best=best.number, reason=reason)
            continue
        if vs_best.interval is None:
            basis = "point"
        if beyond_noise(vs_best, margins.for_geomean(case.latency_id for case in vs.cases)):
            old = out.rounds[best.number]
            out.rounds[best.number] = old.model_copy(update={
                "status": VALIDATED, "reason": f"{old.reason}; superseded by round-{n}"})
            out.rounds[n] = RoundPromotion(
                round=n, status=CURRENT_BEST, vs_baseline=vs_base, vs_previous_best=vs_best, basis=basis,
                previous_best=best.number,
                reason=f"geomean {_text(vs_base)} vs baseline and {_text(vs_best)} vs round-{best.number}, "
                       f"both faster beyond {margin_text}")
            best = cand
        else:
            out.rounds[n] = RoundPromotion(
                round=n, status=VALIDATED, vs_baseline=vs_base, vs_previous_best=vs_best, basis=basis,
                previous_best=best.number,
                reason=f"faster than the baseline ({_text(vs_base)}) but not than round-{best.number} "
                       f"beyond {margin_text} ({_text(vs_best)})")
    out.best_round = best.number if best is not None else None
    return out
