"""The evaluation core: the only code that turns two sets of perf records into speedups.

Input: the reference's records, the candidate's, and a rule set: ``compare-perf`` (upstream's
compare-perf: alias ids, fatal or skipped errors, per-case auto metric) or ``status`` (upstream's
``helix status``: exact ids, values ≤ 0 dropped with a warning). The rule decides which cases pair
up; this module computes everything numeric for both rules, once:

* per case, the ratio of the records' averages (upstream's number, statistic "mean") and, when
  both sides carry samples, the ratio of sample medians; each with its own bootstrap interval
  (perf/stats.py) and verdict. An interval always contains its own point
  (``stats.interval_around``), so a row can never read ``0.99x [1.05–1.05] faster``;
* the geomean of each statistic with its interval, the avg improvement, the mean latency;
* case problems: a time that is not finite, ≤ 0, or below what a device timer resolves (1 ns),
  and a speedup or geomean that is not finite, each with a sentence.

The promotion rule (perf/promotion.py) and every screen read the typed ``RoundEvaluation``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from helix_engine.perf import stats
from helix_engine.perf.formulas import avg_improvement_pct, delta_pct, geomean_of
from helix_engine.perf.margins import NoiseMargins, as_margins
from helix_engine.perf.results import (
    CaseEvaluation,
    CaseProblem,
    Interval,
    RoundEvaluation,
    Rule,
    SpeedupEstimate,
    Statistic,
)
from helix_engine.record import record
from helix_engine.workspace.models import PerfRecord

#: A time below this (µs) is below what a device timer resolves: 1 ns.
MIN_TIME_US = 1e-3
#: Default margin of practical equivalence (until `helix calibrate` measures one per case).
DEFAULT_NOISE_MARGIN = stats.NOISE_BAND
#: Fewest samples per side for an interval (fewer gives a falsely narrow one).
MIN_CI_SAMPLES = 3
NO_SAMPLES_NOTE = "No CI available: the perf files carry no raw samples (samples_us)."
UNUSABLE_SAMPLES_NOTE = "No CI available: too few raw samples, or samples of another metric."

Metric = Literal["kernel", "total-op"]
STATISTICS: tuple[Statistic, ...] = ("mean", "median")


@record
class Pair:
    """One case both sides have, as a rule paired it: the two times it compares."""

    latency_id: str
    baseline_us: float
    compare_us: float
    metric: Metric
    baseline_display: str = ""
    compare_display: str = ""
    baseline_record: PerfRecord | None = None
    compare_record: PerfRecord | None = None


@record
class Paired:
    """What a rule's pairing produced: pairs, or the errors that stop the comparison."""

    requested: str
    pairs: list[Pair] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    problems: list[CaseProblem] = field(default_factory=list)


@dataclass(frozen=True)
class CaseValues:
    """A perf file's records as the status rule pairs them, compact (issue 12): latency ids in
    sorted order, each case's kernel and total-op averages (None when absent) and the file's one
    bench mode. Kept per round in memory and in ``.helix/cache/rounds.sealed``, so a round's point
    comparison with a new best reads no record (``compare_values``). Only records the rule does
    not refuse on their own have them (status_pairing.case_values: no repeated id, no failed case,
    one bench mode, finite values); the others are compared from their records."""

    ids: tuple[str, ...]
    kernel: tuple[float | None, ...]
    total: tuple[float | None, ...]
    bench_mode: str | None
    #: whether some record carries samples; False: no comparison with these values has an interval
    #: (no case has a median on this side), so a point that could pass is judged on the point
    #: (promotion._on_values). True when not known.
    sampled: bool = True

    @functools.cached_property
    def kernel_ok(self) -> bool:
        """Every kernel average present, a float, and one ``time_rule`` accepts: the pairing
        (status_pairing.pair_values) then takes the column whole instead of case by case."""
        return _column_ok(self.kernel)

    @functools.cached_property
    def total_ok(self) -> bool:
        """``kernel_ok`` for the total-op averages."""
        return _column_ok(self.total)

    @functools.cached_property
    def kernel_bounds(self) -> tuple[float, float]:
        """(min, max) of the kernel column, when ``kernel_ok``: every ratio of two whole columns
        is at most max/min, so one division tells the pairing that none overflows
        (status_pairing.pair_values; a new best compares every later round with itself)."""
        return _bounds(self.kernel)

    @functools.cached_property
    def total_bounds(self) -> tuple[float, float]:
        """``kernel_bounds`` of the total-op column, when ``total_ok``."""
        return _bounds(self.total)

    def bounds(self, metric: str) -> tuple[float, float]:
        return self.kernel_bounds if metric == "kernel" else self.total_bounds


def _bounds(column: tuple[float | None, ...]) -> tuple[float, float]:
    values: tuple[float, ...] = column  # type: ignore[assignment]  # a whole valid column: no None
    return min(values), max(values)


def _column_ok(column: tuple[float | None, ...]) -> bool:
    """Every value a float that ``time_rule`` accepts (finite, at least MIN_TIME_US, so > 0),
    checked in C over the column: a load asks it of ~1000 rounds' columns when the bound judges
    them against the best before them."""
    if not column:
        return True
    if set(map(type, column)) != {float}:
        return False
    floats = cast("tuple[float, ...]", column)  # every value a float: no None
    return all(map(math.isfinite, floats)) and min(floats) >= MIN_TIME_US


# -------------------------------------------------------------------------- time validity


def time_rule(value: float) -> str | None:
    """Why ``value`` (µs) cannot be compared, as the end of a sentence; None when it can."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return "must be a finite number > 0"
    if value <= 0:
        return "must be > 0"
    if value < MIN_TIME_US:
        return ("is below 1 ns (0.001 µs), shorter than any device timer resolves; the timer or the "
                "bench is broken, re-run it")
    return None


def pair_problem(b: float, c: float) -> tuple[Literal["baseline", "compare", "both"], str] | None:
    """(side, reason) when the pair of times cannot give a speedup; None when it can."""
    sides: tuple[tuple[Literal["baseline", "compare"], float], ...] = (("baseline", b), ("compare", c))
    for side, value in sides:
        rule = time_rule(value)
        if rule is not None:
            return side, f"{side} timing {value} {rule}"
    if not math.isfinite(b / c):
        return "both", (f"its speedup {b}/{c} is not a finite number (times {b} and {c} µs); "
                        "re-run the bench, one of the times is wrong")
    return None


def case_problem(latency_id: str, side: Literal["baseline", "compare", "both"], value: float | None,
                 reason: str) -> CaseProblem:
    return CaseProblem(latency_id=latency_id, side=side, value=value,
                       message=f"{latency_id} is not compared: {reason}.")


# ------------------------------------------------------------------------------ the math


def _usable_samples(record: PerfRecord | None, metric: str) -> list[float] | None:
    """The record's samples when they measure ``metric`` (kernel | total-op), else None.

    Writers keep samples of the record's own metric: the kernel sum when kernels matched,
    otherwise total-op. They measure the other metric too only when both averages agree
    (perf-counter timing, where total-op = kernel).
    """
    if record is None:
        return None
    samples = record.samples_us
    if not samples or len(samples) < MIN_CI_SAMPLES:
        return None
    values = _resolvable(tuple(samples))
    if values is None:
        return None
    kernel, total = record.kernel_avg_time_us, record.total_op_avg_time_us
    own = "kernel" if kernel is not None else "total-op"
    if own != metric and not (kernel is not None and kernel == total):
        return None
    return list(values)


@functools.lru_cache(maxsize=2048)
def _resolvable(samples: tuple[float, ...]) -> tuple[float, ...] | None:
    """The samples as floats when every one is finite and resolvable, else None; checked once per
    distinct sample set (the baseline's recur in every round's comparisons)."""
    if not all(map(math.isfinite, samples)) or min(samples) < MIN_TIME_US:
        return None
    return tuple(map(float, samples))


def _estimate(statistic: Statistic, point: float, dist: Any, sample_point: float,
              noise_margin: float, n_units: int | None = None, df: int | None = None,
              confidence: float = stats.DEFAULT_CONFIDENCE) -> SpeedupEstimate:
    """The statistic's interval, expanded for the number of units resampled (``n_units``: blocks
    of a paired case, else the smaller side's samples; ``df`` for a geomean over cases), and its
    verdict."""
    low, high = stats.interval_around(dist, point, sample_point, confidence, n_units=n_units, df=df)
    judged = stats.verdict(stats.SpeedupCI(point, low, high), noise_band=noise_margin)
    return SpeedupEstimate(statistic=statistic, point=point,
                           interval=Interval(low=low, high=high, confidence=confidence), verdict=judged)


def _unpaired(estimate: SpeedupEstimate, drift: float | None) -> SpeedupEstimate:
    """``estimate``, its verdict "unpaired" when no drift between jobs was measured (``drift``
    None); the interval stays (it says how steady each job was), the verdict does not claim one."""
    if drift is None:
        estimate.verdict = "unpaired"
    return estimate


def _geo(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


@record
class _CaseSamples:
    b: list[float]
    c: list[float]
    dists: dict[str, Any] = field(default_factory=dict)
    blocks: Sequence[Any] | None = None  # paired blocks (perf/paired.Block): bootstrap whole blocks

    @property
    def units(self) -> int:
        """Independent units the bootstrap resamples: blocks, else the smaller side's samples."""
        return len(self.blocks) if self.blocks is not None else min(len(self.b), len(self.c))


def from_pairs(paired: Paired, *, rule: Rule, with_ci: bool = True,
               noise_margin: float | NoiseMargins = DEFAULT_NOISE_MARGIN,
               ci_statistics: tuple[Statistic, ...] = STATISTICS,
               blocks: Mapping[str, Sequence[Any]] | None = None,
               case_intervals: bool = True, confidence: float = stats.DEFAULT_CONFIDENCE) -> RoundEvaluation:
    """Every number of a comparison, from the pairs a rule produced. ``ci_statistics`` limits
    the bootstrap to the statistics a caller needs (the promotion rule judges the mean only);
    ``case_intervals`` False leaves the cases without intervals (the geomean's is computed all
    the same: the promotion rule reads only that one).

    ``noise_margin``: one margin for every case, or per-case margins (``helix calibrate``).
    ``blocks``: latency id → the case's paired blocks (perf/paired.py): the reference and the
    candidate were measured in one job, interleaved; that case's samples are the blocks' and its
    intervals resample whole blocks. ``confidence``: of every interval (the adaptive probe's
    sequential rule asks for wider ones at each look, perf/sequential.py)."""
    margins = as_margins(noise_margin)
    ev = RoundEvaluation(rule=rule, requested=paired.requested, errors=list(paired.errors),
                         skipped=list(paired.skipped), problems=list(paired.problems),
                         noise_margin=margins.for_geomean([p.latency_id for p in paired.pairs]),
                         margin_source=margins.source,
                         margin_text=margins.describe([p.latency_id for p in paired.pairs]))
    if ev.errors:
        return ev
    from helix_engine.perf.context import mismatch_warning  # when records are compared (datetime: not at import)

    ev.context_warning = mismatch_warning([p.baseline_record for p in paired.pairs if p.baseline_record],
                                          [p.compare_record for p in paired.pairs if p.compare_record])
    samples: dict[str, _CaseSamples] = {}
    any_samples = False
    for p in paired.pairs:
        case = CaseEvaluation(
            latency_id=p.latency_id, baseline_us=p.baseline_us, compare_us=p.compare_us, metric=p.metric,
            delta_pct=delta_pct(p.baseline_us, p.compare_us),
            mean=SpeedupEstimate(statistic="mean", point=p.baseline_us / p.compare_us),
            baseline_display=p.baseline_display, compare_display=p.compare_display,
            noise_margin=margins.for_case(p.latency_id), median_noise_margin=margins.for_case(p.latency_id, "median"),
        )
        ev.cases.append(case)
        b_rec, c_rec = p.baseline_record, p.compare_record
        any_samples = any_samples or bool(b_rec and b_rec.samples_us and c_rec and c_rec.samples_us)
        b, c = _usable_samples(b_rec, p.metric), _usable_samples(c_rec, p.metric)
        if b is None or c is None:
            continue
        case_blocks = _usable_blocks(blocks.get(p.latency_id) if blocks else None)
        if case_blocks is not None:
            b = [v for block in case_blocks for v in block.reference]
            c = [v for block in case_blocks for v in block.candidate]
            case.n_blocks = len(case_blocks)
        case.n_baseline, case.n_compare = len(b), len(c)
        case.median = SpeedupEstimate(statistic="median", point=stats.median_ratio(b, c))
        samples[p.latency_id] = _CaseSamples(b, c, blocks=case_blocks)
    pairs = [(case.baseline_us, case.compare_us) for case in ev.cases]
    ev.avg_improvement_pct = avg_improvement_pct(pairs)
    geo, error = point_geomean([b for b, _ in pairs], [c for _, c in pairs])
    if error is not None:
        ev.errors.append(error)
        return ev
    if geo is not None:
        ev.geomean = geo
    if ev.cases:
        ev.mean_latency_us = sum(c for _, c in pairs) / len(pairs)
        modes = {case.metric for case in ev.cases}
        ev.metric_source = modes.pop() if len(modes) == 1 else "mixed"
        if len(samples) == len(ev.cases):
            ev.geomean_median = SpeedupEstimate(
                statistic="median", point=_geo([c.median.point for c in ev.cases if c.median is not None]))
    if with_ci:
        _attach_intervals(ev, samples, any_samples, margins, ci_statistics, case_intervals, confidence,
                          separate_jobs=blocks is None)
    return ev


def point_geomean(baseline: Sequence[float], compare: Sequence[float], *,
                  checked: bool = False) -> tuple[SpeedupEstimate | None, str | None]:
    """The geomean speedup's point over the pairs' baseline and compare times (None without
    pairs), or the error that stops the comparison: what ``from_pairs`` and ``compare_values``
    both report. ``checked``: every time is known valid (formulas.geomean_of)."""
    geo = geomean_of(baseline, compare, checked=checked)
    if geo is None:
        return None, None
    if not math.isfinite(geo):
        return None, "the geomean speedup is not a finite number; re-run the bench, a time is wrong"
    return SpeedupEstimate(statistic="mean", point=geo), None


@dataclass(frozen=True)
class PointComparison:
    """``compare_values``' answer: the geomean point (None: not comparable) and the latency ids of
    the cases it is over, in the core's order (what the geomean's noise margin is the mean of)."""

    geomean: SpeedupEstimate | None
    latency_ids: tuple[str, ...]


@functools.cache
def _pair_values() -> Callable[[CaseValues, CaseValues, str], Any]:
    """status_pairing.pair_values (it imports this module): looked up once, not imported per call
    (~0.9 µs of a ~9 µs comparison, ~450 of them when a mid round of 1000 becomes the best)."""
    from helix_engine.workspace.status_pairing import pair_values

    return pair_values


def compare_values(reference: CaseValues, candidate: CaseValues, metric: str) -> PointComparison:
    """``evaluate(reference, candidate, rule="status", with_ci=False)``'s geomean and cases, from
    compact values: the status rule's pairing (status_pairing.pair_values, which pair_for_status
    runs too) and the same point geomean, without records or per-case result models."""
    paired = _pair_values()(reference, candidate, metric)
    if paired.refusal is not None or not paired.ids:
        return PointComparison(None, ())  # a refused comparison has no cases
    geo, _ = point_geomean(paired.baseline, paired.compare, checked=True)  # the pairing kept valid times only
    return PointComparison(geo, tuple(paired.ids))


def _usable_blocks(found: Sequence[Any] | None) -> Sequence[Any] | None:
    """A case's paired blocks when there are enough of them, each side's samples finite and
    resolvable (the same rule as for samples); else None (the case uses its records' samples)."""
    from helix_engine.perf.paired import MIN_BLOCKS

    if not found or len(found) < MIN_BLOCKS:
        return None
    values = [v for block in found for v in (*block.reference, *block.candidate)]
    if not values or not all(map(math.isfinite, values)) or min(values) < MIN_TIME_US:
        return None
    return found


def _distribution(found: _CaseSamples, statistic: Statistic) -> Any:
    if found.blocks is not None:
        from helix_engine.perf.paired import block_bootstrap

        return block_bootstrap(found.blocks, statistic)
    return stats.ratio_bootstrap(found.b, found.c, statistic)


def _attach_intervals(ev: RoundEvaluation, samples: dict[str, _CaseSamples], any_samples: bool,
                      margins: NoiseMargins, statistics: tuple[Statistic, ...],
                      case_intervals: bool = True, confidence: float = stats.DEFAULT_CONFIDENCE,
                      separate_jobs: bool = False) -> None:
    """Each statistic's bootstrap interval and verdict, per case (judged by the case's own
    margin for that statistic) and for the geomean (by the mean of its cases' margins).
    ``separate_jobs``: the two sides' records come from separate jobs (no paired result): an
    interval within each job leaves the drift between them out, so a case is judged only by the
    drift calibrate measured between jobs (NoiseMargins.for_unpaired), else its verdict is
    "unpaired"."""
    for case in ev.cases:
        found = samples.get(case.latency_id)
        if found is None:
            continue
        for statistic in statistics:
            dist = _distribution(found, statistic)
            found.dists[statistic] = dist
            if not case_intervals:
                continue
            sample_point = stats.statistic_of(found.b, statistic) / stats.statistic_of(found.c, statistic)
            margin = margins.for_case(case.latency_id, statistic)
            drift = margins.for_unpaired(case.latency_id) if separate_jobs else margin
            if statistic == "mean":
                case.mean = _unpaired(_estimate("mean", case.mean.point, dist, sample_point, drift or margin,
                                                found.units, confidence=confidence), drift)
            elif case.median is not None:
                case.median = _unpaired(_estimate("median", case.median.point, dist, sample_point, drift or margin,
                                                  found.units, confidence=confidence), drift)
    if not ev.cases:
        return
    if not samples:
        ev.ci_note = UNUSABLE_SAMPLES_NOTE if any_samples else NO_SAMPLES_NOTE
        return
    if len(samples) < len(ev.cases):
        missing = len(ev.cases) - len(samples)
        ev.ci_note = f"No geomean CI: {missing} of {len(ev.cases)} cases lack usable samples."
        return
    found_all = [samples[case.latency_id] for case in ev.cases]
    # the geomean's expansion: the fewest units of a case, and the cases' degrees of freedom summed
    n_min, dof = min(s.units for s in found_all), sum(max(1, s.units - 1) for s in found_all)
    drifts = [margins.for_unpaired(c.latency_id) for c in ev.cases] if separate_jobs else []
    drift = (sum(d for d in drifts if d is not None) / len(drifts) if all(d is not None for d in drifts) else None) \
        if separate_jobs else 0.0
    if ev.geomean is not None and "mean" in statistics:
        sample_geo = _geo([stats.statistic_of(s.b, "mean") / stats.statistic_of(s.c, "mean") for s in found_all])
        dist = stats.geomean_distribution([s.dists["mean"] for s in found_all])
        ev.geomean = _unpaired(_estimate("mean", ev.geomean.point, dist, sample_geo, drift or ev.noise_margin, n_min,
                                         dof, confidence), drift)
    if ev.geomean_median is not None and "median" in statistics:
        dist = stats.geomean_distribution([s.dists["median"] for s in found_all])
        point = ev.geomean_median.point
        margin = drift or margins.for_geomean([c.latency_id for c in ev.cases], "median")
        ev.geomean_median = _unpaired(_estimate("median", point, dist, point, margin, n_min, dof, confidence), drift)


# --------------------------------------------------------------------------- entry points


def evaluate(baseline: Sequence[PerfRecord], candidate: Sequence[PerfRecord], *, rule: Rule = "compare-perf",
             metric: str = "auto", skip_latency_errors: bool = False, with_ci: bool = True,
             noise_margin: float | NoiseMargins = DEFAULT_NOISE_MARGIN, baseline_name: str = "baseline",
             compare_name: str = "compare", ci_statistics: tuple[Statistic, ...] = STATISTICS,
             blocks: Mapping[str, Sequence[Any]] | None = None, case_intervals: bool = True,
             confidence: float = stats.DEFAULT_CONFIDENCE) -> RoundEvaluation:
    """``candidate`` against ``baseline`` under ``rule``. Never raises on data. ``blocks``: the
    paired blocks of a paired run (see ``from_pairs``)."""
    if rule == "status":
        from helix_engine.workspace.status_pairing import pair_for_status

        paired = pair_for_status(list(baseline), list(candidate), metric, round_name=compare_name,
                                 baseline_file=baseline_name, round_file=compare_name).paired
    else:
        from helix_engine.perf.compare import pair_records

        paired = pair_records(baseline, candidate, metric, skip_latency_errors,
                              baseline_name=baseline_name, compare_name=compare_name)
    return from_pairs(paired, rule=rule, with_ci=with_ci, noise_margin=noise_margin, ci_statistics=ci_statistics,
                      blocks=blocks, case_intervals=case_intervals, confidence=confidence)


def live_case(baseline: Sequence[PerfRecord], record: dict[str, Any] | PerfRecord,
              metric: str = "auto") -> CaseEvaluation | None:
    """One case that just finished, against the baseline's case of the same label (the jobs
    pane's live column): the number compare-perf will print for it, or None."""
    try:
        cand = record if isinstance(record, PerfRecord) else PerfRecord.model_validate(record)
    except (ValueError, TypeError):
        return None
    base = [r for r in baseline if r.latency_id == cand.latency_id]
    if not base:
        return None
    result = evaluate(base[:1], [cand], metric=metric, with_ci=False)
    return result.cases[0] if result.cases else None
