"""The bound the promotion rule decides a later round by, when a new best makes it judge every
later round again (issue 12): with the same cases as whole valid columns on the baseline, the best
and the round, the round's geomean against the best is the ratio of their geomeans against the
baseline to within rounding, so a ratio clearly below the noise limit decides the round without the
comparison (perf/promotion.py then builds a LaterPromotion, its comparison made when read)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from helix_engine.perf import evaluation
from helix_engine.perf.margins import NoiseMargins
from helix_engine.perf.results import RoundPromotion
from helix_engine.record import record

if TYPE_CHECKING:
    from helix_engine.perf.promotion import Candidate, Judged


def values_of(cand: Candidate) -> evaluation.CaseValues | None:
    """The candidate's compact values (a function giving them is called now, once: a candidate
    is kept between reloads while its round's view is, and a new best asks every later one)."""
    found = cand.values
    if callable(found):
        found = cand.values = found()
    return found


#: how far below the noise limit the ratio of two geomeans must lie for the bound to decide: the
#: ratio and the direct geomean are each a few ulps (~1e-14 at 20 cases) from the exact value
SLACK = 1e-9


@record(slots=True)
class BestBound:
    """What ``decides`` needs of the best before a run of rounds, made once per best (a new
    best judges every later round): its entry, values, the column the pairings take whole, its
    geomean against the baseline, the noise margin of a comparison with it, and the largest
    baseline time and its own extreme times (every ratio of two whole columns lies within them)."""

    entry: RoundPromotion
    values: evaluation.CaseValues
    column: str
    geomean: float
    margin: float
    base_max: float
    best_min: float
    best_max: float


def best_bound(best: Candidate, entry: RoundPromotion, base: evaluation.CaseValues | None,
               margins: NoiseMargins) -> BestBound | None:
    """The best's part of ``decides``; None when no round can be decided against it by the bound."""
    best_geo = entry.vs_baseline
    found = values_of(best)
    if base is None or found is None or entry.vs_baseline_paired or best_geo is None or best_geo.point <= 0 \
            or not base.ids or not (found.ids is base.ids or found.ids == base.ids) \
            or found.bench_mode != base.bench_mode:
        return None
    if best.metric in ("auto", "kernel") and base.kernel_ok and found.kernel_ok:
        column = "kernel"
    elif best.metric == "total-op" and base.total_ok and found.total_ok:
        column = "total-op"
    else:
        return None
    (_, base_max), (best_min, best_max) = base.bounds(column), found.bounds(column)
    if not math.isfinite(base_max / best_min):
        return None
    return BestBound(entry, found, column, best_geo.point, margins.for_geomean(found.ids), base_max, best_min,
                      best_max)


def decides(cand: Candidate, best: Candidate, best_entry: RoundPromotion, judged: Judged,
            base: evaluation.CaseValues | None, margins: NoiseMargins, kept: dict[int, BestBound | None]) -> bool:
    """Whether ``cand``'s comparison with ``best`` is known not to pass without computing it.
    When the baseline, the best and the round hold the same cases, each a whole valid column of
    the one metric both compare on, the three status-rule pairings take the same columns whole
    (status_pairing.pair_values), so the round's geomean against the best is the ratio of their
    geomeans against the baseline (the round's, ``judged``, and the best's, ``best_entry``, each
    from the perf files, not a paired run) to within rounding: a ratio below the limit by
    ``SLACK`` decides it (the point-only comparison computes no interval either). False
    sends the round to the comparison itself. ``kept``: the best's part, by its number, for the
    rest of one ``promote`` call."""
    bound = for_best(best, best_entry, base, margins, kept)
    return bound is not None and decides_with(bound, best.metric, cand, judged)


def for_best(best: Candidate, best_entry: RoundPromotion, base: evaluation.CaseValues | None,
             margins: NoiseMargins, kept: dict[int, BestBound | None]) -> BestBound | None:
    """``best_bound``, made once per best (and entry) for one ``promote`` call (``kept``)."""
    bound = kept.get(best.number, _UNSET)
    if bound is _UNSET or (bound is not None and bound.entry is not best_entry):
        bound = kept[best.number] = best_bound(best, best_entry, base, margins)
    return bound


def decides_with(bound: BestBound, best_metric: str, cand: Candidate, judged: Judged) -> bool:
    """The round's part of ``decides``, given the best's (``bound``, its metric): the promotion
    rule calls it alone over a run of later rounds, the best's part made once."""
    point = judged.point
    if cand.metric != best_metric or point is None:
        return False
    facts = cand.bound_facts
    if facts is None:
        facts = cand.bound_facts = _facts(cand)
    if not facts:
        return False
    ids, bench_mode, kernel_min, total_min = facts
    mine_min = kernel_min if bound.column == "kernel" else total_min
    found = bound.values
    if mine_min is None or not (ids is found.ids or ids == found.ids) or bench_mode != found.bench_mode:
        return False
    if not (math.isfinite(bound.base_max / mine_min) and math.isfinite(bound.best_max / mine_min)):
        return False  # a pairing might check (and drop) pairs case by case
    ratio = point / bound.geomean
    return math.isfinite(ratio) and ratio * (1.0 + SLACK) <= 1.0 + bound.margin


_UNSET: Any = object()


def _facts(cand: Candidate) -> tuple[tuple[str, ...], str | None, float | None, float | None] | tuple[()]:
    """What ``decides`` reads of a candidate whatever the best: its values' latency ids and bench
    mode, and the least time of each whole valid column (None: not whole); () when no best can
    decide it (no values, or its comparison with the baseline is a paired run's). Made once a
    candidate (Candidate.bound_facts), one tuple: a new best reads it for ~450 rounds."""
    ev = cand.vs_baseline
    mine = values_of(cand)
    if ev is None or (ev.paired is not None and ev.paired.geomean is not None) or mine is None:
        return ()
    return (mine.ids, mine.bench_mode, mine.kernel_bounds[0] if mine.kernel_ok else None,
            mine.total_bounds[0] if mine.total_ok else None)
