"""The promotion rule: which round is the current best, which are validated branches.

One rule, used by status, the snapshot (the tree's ★), the ledger and the submit guideline:

* "current best": submit-round accepted the round (workspace/status_rules.py makes a round it
  never accepted ineligible), correctness passed, the geomean against the baseline is above 1 beyond the
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

import functools
import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any

from helix_engine.perf import bound, evaluation
from helix_engine.perf.bound import values_of
from helix_engine.perf.interval_cache import IntervalCache
from helix_engine.perf.margins import NoiseMargins, as_margins
from helix_engine.perf.results import (
    CURRENT_BEST,
    NOT_PROMOTED,
    VALIDATED,
    Basis,
    LaterPromotion,
    Promotion,
    RoundEvaluation,
    RoundPromotion,
    SpeedupEstimate,
)
from helix_engine.record import record
from helix_engine.workspace.models import PerfRecord


@record(slots=True)
class Candidate:
    """One round as the rule sees it. ``vs_baseline`` is its status-rule comparison (with or
    without intervals: the rule computes them when the point could pass)."""

    number: int
    eligible: bool
    why_not: str | None = None
    metric: str = "auto"
    records: Sequence[PerfRecord] = field(default_factory=list)
    vs_baseline: RoundEvaluation | None = None
    #: what identifies ``records`` (a round's perf file identity); None: the records themselves
    records_key: Any = None
    #: the round's judged geomeans, read and filled by the rule (a round summary's ``judged``):
    #: "baseline" → Judged; a best round's number → (its records_key, Judged). With it, a round
    #: judged before is not compared again, and ``vs_baseline`` may come without its cases.
    judged: dict[Any, Any] | None = None
    #: ``records`` as the status rule pairs them (evaluation.CaseValues; status_pairing.case_values),
    #: or a function giving them when first needed; None: the round has none. With them, its
    #: comparison with a best whose point cannot pass reads no record (``_on_values``)
    values: evaluation.CaseValues | Callable[[], evaluation.CaseValues | None] | None = None
    #: what perf/bound.py reads of the candidate whatever the best (bound._facts), made when first
    #: needed: a new best has every later round's bound checked
    bound_facts: Any = field(default=None, compare=False, repr=False)


def _text(estimate: SpeedupEstimate) -> str:
    if estimate.interval is None:
        return f"{estimate.point:.2f}x (no samples, no interval)"
    return f"{estimate.point:.2f}x [{estimate.interval.low:.2f}–{estimate.interval.high:.2f}]"


def _records(cand: Candidate) -> Sequence[PerfRecord]:
    """The candidate's records as a list (a lazy sequence reads them now): what the core and its
    caches (keyed by the list) are given, never the lazy object that refers to a snapshot's view."""
    resolve = getattr(cand.records, "resolve", None)
    return resolve() if callable(resolve) else cand.records


def _records_key(cand: Candidate) -> Any:
    return cand.records if cand.records_key is None else cand.records_key


def beyond_noise(estimate: SpeedupEstimate, margin: float) -> bool:
    """Faster beyond the noise margin: the interval's low end (else the point) above 1 + margin."""
    value = estimate.interval.low if estimate.interval is not None else estimate.point
    return value > 1.0 + margin


def _judged(ev: RoundEvaluation, baseline: Sequence[PerfRecord], records: Sequence[PerfRecord],
            metric: str, margin: float | NoiseMargins) -> RoundEvaluation:
    """``ev`` with intervals when its point could pass (an interval contains its point, so a
    point at or below 1 + margin fails either way: no bootstrap is spent on it)."""
    if not _needs_interval(ev, margin):
        return ev
    return evaluation.evaluate(baseline, records, rule="status", metric=metric, with_ci=True,
                               noise_margin=margin, ci_statistics=("mean",), case_intervals=False)


def _needs_interval(ev: RoundEvaluation, margin: float | NoiseMargins) -> bool:
    geo = ev.geomean
    limit = as_margins(margin).for_geomean(case.latency_id for case in ev.cases)
    if geo is None or geo.interval is not None or not _could_pass(geo.point, limit):
        return False
    return bool(ev.cases) and all(case.median is not None for case in ev.cases)  # samples on both sides


def _could_pass(point: float, limit: float) -> bool:
    """Whether a geomean with this point could be beyond the noise margin ``limit``: only then is
    its interval computed (an interval contains its point, so a point at or below fails either way)."""
    return point > 1.0 + limit


def _on_values(reference: Candidate, cand: Candidate, margins: NoiseMargins) -> Judged | None:
    """``cand`` judged against ``reference`` from both rounds' compact values, when that is all the
    rule needs: the comparison is not possible (no geomean), its point cannot pass, or one side
    carries no samples (then the full path judges the point too: no interval is computed). None:
    compare the records."""
    ref_values, cand_values = values_of(reference), values_of(cand)
    if ref_values is None or cand_values is None:
        return None
    found = evaluation.compare_values(ref_values, cand_values, cand.metric)
    margin = margins.for_geomean(found.latency_ids)
    if found.geomean is not None and _could_pass(found.geomean.point, margin) \
            and ref_values.sampled and cand_values.sampled:
        return None
    return _Judged(found.geomean, margin)


def separate_jobs_margin(margins: NoiseMargins, latency_ids: Sequence[str]) -> tuple[float, bool]:
    """The margin a comparison of two perf files from separate jobs is judged by: the drift
    calibrate measured between its jobs when it did for every case (True), else the per-case
    margins as before (False: that drift is not measured; issue 28 keeps this rule's answer for
    such files, which submit-round's paired evidence makes the exception)."""
    drifts = [margins.for_unpaired(lid) for lid in latency_ids]
    if drifts and all(d is not None for d in drifts):
        return sum(d for d in drifts if d is not None) / len(drifts), True
    return margins.for_geomean(latency_ids), False


def _separate(geomean: SpeedupEstimate | None, margin: tuple[float, bool]) -> _Judged:
    if not margin[1] or geomean is None:
        return _Judged(geomean, margin[0])
    return _Judged(geomean, margin[0], shown=f"{_text(geomean)} (separate jobs: judged by the {margin[0]:.1%} drift "
                                              "calibrate measured between jobs)")


def _judged_geomean(ev: RoundEvaluation, reference: Sequence[PerfRecord], records: Sequence[PerfRecord],
                    metric: str, margins: NoiseMargins, store: IntervalCache | None) -> _Judged:
    """What the rule reads of ``_judged(ev, …)``, two perf files from separate jobs (margin:
    ``separate_jobs_margin``); a bootstrapped geomean comes from ``store`` when an earlier run
    computed it for the same inputs (and is kept there when it did not)."""
    margin = separate_jobs_margin(margins, [case.latency_id for case in ev.cases])
    # the interval is computed when the point could pass by the margin it is judged by
    limit: float | NoiseMargins = margin[0] if margin[1] else margins
    if store is None or not _needs_interval(ev, limit):
        return _separate(_judged(ev, reference, records, metric, limit).geomean, margin)
    key = store.key(reference, records, metric, margins)
    found = store.get(key)
    if found is not None:
        return _separate(found[0], margin)
    result = _separate(_judged(ev, reference, records, metric, limit).geomean, margin)
    if result.geomean is not None:
        store.put(key, result.geomean, result.margin)
    return result


def judge_vs_baseline(ev: RoundEvaluation, baseline: Sequence[PerfRecord], records: Sequence[PerfRecord],
                      metric: str, noise_margin: float | NoiseMargins,
                      store: IntervalCache | None = None) -> Judged | None:
    """What the rule reads of a round's comparison with the baseline (``ev``, with its cases): the
    paired comparison's geomean when there is one, else the status comparison's, with an interval
    when its point could pass. None without a geomean (the round cannot be promoted)."""
    if ev.geomean is None:
        return None
    margins = as_margins(noise_margin)
    if ev.paired is not None and ev.paired.geomean is not None:
        paired = ev.paired  # measured beside the baseline in one job: drift is out of its interval
        return _Judged(paired.geomean, margins.for_geomean(case.latency_id for case in paired.cases))
    return _judged_geomean(ev, baseline, records, metric, margins, store)


@record
class PromotionMemo:
    """What one ``promote`` computed, for the next call on (mostly) the same rounds: a reload after
    one perf file changes re-decides only the rounds whose inputs changed (that round, and those
    after it whose best-before changed), and re-bootstraps only comparisons it has not seen.
    Entries keep their inputs and are used only when the new inputs are the same objects (or
    equal ones): a memo never changes a number, it only skips recomputing it."""

    #: per round: its step, with its own inputs and the best it was judged against (``_Step.own``,
    #: ``_Step.against``); a step that did not read the best is kept when only the best changed
    steps: dict[int, _AnyStep] = field(default_factory=dict)
    vs_baseline: dict[int, tuple[tuple[object, ...], _Judged]] = field(default_factory=dict)
    vs_best: dict[tuple[int, int], tuple[tuple[object, ...], _Judged]] = field(default_factory=dict)
    store: IntervalCache | None = None  # bootstrapped geomeans kept between runs (perf/interval_cache.py)
    #: the candidates decided, in round order, and the best before each (its number; None: the
    #: baseline): the next call given the same first k candidates (the same objects) starts at k
    order: list[Candidate] = field(default_factory=list)
    bests: list[int | None] = field(default_factory=list)
    #: the result's rounds, as the call ended (a later round may have superseded an earlier best)
    decided: dict[int, RoundPromotion] = field(default_factory=dict)
    #: the call's baseline records and margins (the objects), which every candidate's inputs hold
    inputs: tuple[object, ...] = ()


@record(slots=True)
class _Step:
    promotion: RoundPromotion
    becomes_best: bool = False
    superseded: RoundPromotion | None = None  # the previous best's entry, once this round beats it
    #: whether the decision read the best before the round: not when the round is not eligible or
    #: not faster than the baseline beyond the margin (its step holds whatever the best is)
    uses_best: bool = True
    #: the round's judged geomean against the baseline, when the decision read the best: a round
    #: re-decided only because the best before it changed is judged against the new best from it
    #: (``_against_best``), its half of the rule that reads no best not done again
    judged: Judged | None = None
    #: what the step was decided from, set by ``promote`` on the step it made (a step kept from the
    #: previous call is never changed: that call's memo still holds it): the round's own inputs,
    #: and the best before it (number, records key, entry; None: the baseline)
    own: tuple[object, ...] = ()
    against: tuple[object, ...] | None = None


class _LaterStep(LaterPromotion):
    """The entry of a round the bound decides (a LaterPromotion) that is its own step too: the
    fields of ``_Step`` that such a step holds, the others fixed. A new best re-decides ~450 of
    1000 rounds by the bound, one object each instead of two."""

    __slots__ = ("judged", "own", "against")
    becomes_best = False
    superseded = None
    uses_best = True

    def __init__(self, make: tuple[Any, ...], round: int, vs_baseline: SpeedupEstimate, previous_best: int,
                 judged: Judged, own: tuple[object, ...], against: tuple[object, ...] | None) -> None:
        LaterPromotion.__init__(self, make, round, VALIDATED, vs_baseline, previous_best, "point")
        self.judged: Judged | None = judged
        self.own = own
        self.against = against

    @property
    def promotion(self) -> LaterPromotion:
        return self


_AnyStep = _Step | _LaterStep


@record(slots=True)
class Judged:
    """What the rule reads of a judged comparison: its geomean, and the margin it is judged by."""

    geomean: SpeedupEstimate | None
    margin: float
    #: ``_text(geomean)``, made once: a round's judgement is kept between reloads, and its text goes
    #: into a reason each time the best before the round changes
    shown: str | None = field(default=None, compare=False, repr=False)
    #: ``geomean.point`` (None without a geomean), read by the bound for ~450 rounds when a new best
    #: comes: a float in this object, not one behind the estimate and its dict
    point: float | None = field(init=False, default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.point = self.geomean.point if self.geomean is not None else None

    def text(self) -> str:
        if self.shown is None:
            assert self.geomean is not None
            self.shown = _text(self.geomean)
        return self.shown


_Judged = Judged


def _memo_judged(table: str, key: Any, inputs: tuple[object, ...], compute: Callable[[], _Judged],
                 previous: PromotionMemo | None, memo: PromotionMemo | None) -> _Judged:
    found = getattr(previous, table).get(key) if previous is not None else None
    if found is None or found[0] != inputs:
        found = (inputs, compute())
    if memo is not None:
        getattr(memo, table)[key] = found
    return found[1]


def promote(candidates: Sequence[Candidate], baseline: Sequence[PerfRecord], *,
            noise_margin: float | NoiseMargins = evaluation.DEFAULT_NOISE_MARGIN,
            memo: PromotionMemo | None = None, previous: PromotionMemo | None = None,
            baseline_values: evaluation.CaseValues | None = None) -> Promotion:
    """Apply the rule to every candidate in round order. ``noise_margin``: one margin, or the
    per-case margins of ``helix calibrate`` (a geomean is judged by its cases' mean margin). A
    comparison with a paired result (``RoundEvaluation.paired``) is judged on the paired one.
    ``memo`` (filled) and ``previous`` (read): see PromotionMemo; the result is the same with or
    without them. ``baseline_values``: the baseline records' compact values (status_rules.
    case_values), with which a round that cannot beat the best before it is known so from the two
    rounds' geomeans against the baseline (perf/bound.py), its comparison with that best
    computed only when read (LaterPromotion)."""
    margins = as_margins(noise_margin)
    base_ids = [r.latency_id for r in baseline]
    overall = margins.for_geomean(base_ids)
    out = Promotion(noise_margin=overall, margin_source=margins.source, margin_text=margins.describe(base_ids))
    margin_text = f"the calibrated {overall:.1%} noise margin" if margins.source == "calibrated" \
        else f"the {overall:.0%} noise margin"
    best: Candidate | None = None
    ordered = sorted(candidates, key=operator.attrgetter("number"))
    start = _unchanged_prefix(ordered, previous) if memo is not None else 0
    if start:
        best = _resume(ordered, start, out, memo, previous)  # type: ignore[arg-type]  # start > 0: both set
    bests = memo.bests if memo is not None else []
    bounds: dict[int, bound.BestBound | None] = {}  # bound.decides' part of each best, for this call
    store = memo.store if memo is not None else None
    against: tuple[object, ...] | None = None  # the best before the round, as its steps are keyed
    # a candidate that is the previous call's own object at its place, under the same baseline and
    # margins, has the inputs it had (a candidate never changes them): they are not made again
    same_inputs = memo is not None and previous is not None and len(previous.inputs) == 2 \
        and previous.inputs[0] is baseline and previous.inputs[1] is margins
    before = previous.order if same_inputs and previous is not None else []
    if memo is not None:
        memo.inputs = (baseline, margins)
    i = start
    while i < len(ordered):
        if best is not None and (against is None or against[0] != best.number or against[2] is not out.rounds[best.number]):
            against = (best.number, best.records if best.records_key is None else best.records_key,
                       out.rounds[best.number])  # made again only when the best (or its entry) changes
        elif best is None:
            against = None
        if best is not None and before:
            assert memo is not None and previous is not None and against is not None  # before: both given
            i = _later_run(ordered, i, before, previous, memo, out, best, against, margins, margin_text,
                           baseline_values, bounds)
            if i == len(ordered):
                break
        cand = ordered[i]
        n = cand.number
        bests.append(best.number if best is not None else None)
        found = previous.steps.get(n) if previous is not None else None
        same = found is not None and i < len(before) and before[i] is cand
        own = found.own if same and found is not None else (
            cand.eligible, cand.why_not, cand.metric, cand.records if cand.records_key is None else cand.records_key,
            cand.vs_baseline, baseline, margins)
        if found is None or (not same and found.own != own):
            found = _decide(cand, best, out, baseline, margins, margin_text, memo, previous, baseline_values, bounds)
            found.own, found.against = own, against
        else:
            if memo is not None and previous is not None and n in previous.vs_baseline:
                memo.vs_baseline[n] = previous.vs_baseline[n]  # kept for when the best before it changes
            if found.uses_best and found.against != against:  # only the best before it changed
                judged = found.judged
                assert judged is not None  # a step that read the best keeps the judgement it read
                # a new best re-decides every later round: most by the bound, taken first here
                later = _bound_step(cand, judged, best, out.rounds[best.number], margins, store, margin_text,
                                    baseline_values, bounds) if best is not None else None
                step: _AnyStep = later if later is not None else _against_best(
                    cand, judged, best, out, margins, margin_text, memo, previous, baseline_values, bounds,
                    bound_tried=True)
                step.own, step.against = found.own, against  # last time's inputs tuple (the same values)
                found = step
        if memo is not None:
            memo.steps[n] = found  # the same entry when it was used: nothing new outlives the call
        out.rounds[n] = found.promotion
        if found.becomes_best:
            if best is not None and found.superseded is not None:
                out.rounds[best.number] = found.superseded
            best = cand
        i += 1
    if memo is not None:
        memo.order, memo.decided = ordered, out.rounds  # the result is never changed after this call
    out.best_round = best.number if best is not None else None
    return out


def _unchanged_prefix(ordered: list[Candidate], previous: PromotionMemo | None) -> int:
    """How many of the first candidates are the previous call's own objects (in the same order):
    those rounds are decided as they were (a candidate's inputs are its fields and the best before
    it, and the best before the first of them is the same too)."""
    if previous is None or not previous.order:
        return 0
    before = previous.order
    return next(itertools.compress(itertools.count(), map(operator.is_not, ordered, before)),
                min(len(ordered), len(before)))


def _resume(ordered: list[Candidate], start: int, out: Promotion, memo: PromotionMemo,
            previous: PromotionMemo) -> Candidate | None:
    """``out`` and ``memo`` as the loop in ``promote`` leaves them after the first ``start``
    candidates, from the previous call's: its entries for those rounds, except that the best
    before ``start`` is not (yet) superseded by a later round. Returns that best."""
    # the previous call's tables hold its rounds in round order (each filled in the order of its
    # ``order``, a later write to a round already there keeps its place): the first ``start``
    # entries are those rounds', copied at C speed (a reload: ~1000 rounds)
    steps, vs_baseline = previous.steps, previous.vs_baseline
    out.rounds.update(itertools.islice(previous.decided.items(), start))
    memo.steps.update(itertools.islice(steps.items(), start))
    last_number = ordered[start - 1].number
    if vs_baseline:
        memo.vs_baseline.update(itertools.takewhile(lambda item: item[0] <= last_number, vs_baseline.items()))
    memo.bests[:] = previous.bests[:start]
    assert next(reversed(memo.steps)) == last_number, "the previous call's steps are not in round order"
    last = steps[last_number]
    best_number = last_number if last.becomes_best else previous.bests[start - 1]
    if best_number is None:
        return None
    out.rounds[best_number] = steps[best_number].promotion
    return next(cand for cand in ordered[:start] if cand.number == best_number)


def _versus(best: Candidate, cand: Candidate, margins: NoiseMargins, store: IntervalCache | None) -> _Judged:
    """``cand`` judged against ``best``: from their compact values when that is all the rule needs
    (``_on_values``), else from their records, bootstrapped when the point could pass."""
    quick = _on_values(best, cand, margins)
    if quick is not None:
        return quick
    reference, records = _records(best), _records(cand)
    vs = evaluation.evaluate(reference, records, rule="status", metric=cand.metric, with_ci=False,
                             noise_margin=margins)
    return _judged_geomean(vs, reference, records, cand.metric, margins, store)


def _later(best: Candidate, cand: Candidate, margins: NoiseMargins, store: IntervalCache | None, judged: Judged,
           margin_text: str) -> tuple[SpeedupEstimate, str]:
    """A LaterPromotion's comparison with the best, which the bound stood in for, computed (and kept
    in the round's judgements) as the eager path does; and the reason it goes into."""
    found = _versus(best, cand, margins, store)
    if cand.judged is not None and best.records_key is not None:
        cand.judged[best.number] = (best.records_key, found)
    assert found.geomean is not None and found.geomean.interval is None \
        and not beyond_noise(found.geomean, found.margin), "the bound decided a comparison that passes"
    return found.geomean, (f"faster than the baseline ({judged.text()}) but not than round-{best.number} "
                           f"beyond {margin_text} ({found.text()})")


def _decide(cand: Candidate, best: Candidate | None, out: Promotion, baseline: Sequence[PerfRecord],
            margins: NoiseMargins, margin_text: str, memo: PromotionMemo | None,
            previous: PromotionMemo | None, baseline_values: evaluation.CaseValues | None,
            bounds: dict[int, bound.BestBound | None]) -> _AnyStep:
    """The rule for one round, given the best before it (``out`` holds the rounds before it): its
    half against the baseline, then, for a round faster than the baseline, its half against the best."""
    judged = _vs_baseline(cand, baseline, margins, margin_text, memo, previous)
    if isinstance(judged, _Step):
        return judged
    return _against_best(cand, judged, best, out, margins, margin_text, memo, previous, baseline_values, bounds)


def _paired(step: _Step, cand: Candidate) -> _Step:
    """``step``, its entry saying whether its geomean against the baseline is the paired run's
    (judge_vs_baseline's choice)."""
    ev = cand.vs_baseline
    if step.promotion.vs_baseline is not None and ev is not None and ev.paired is not None \
            and ev.paired.geomean is not None:
        step.promotion.vs_baseline_paired = True
    return step


def _vs_baseline(cand: Candidate, baseline: Sequence[PerfRecord], margins: NoiseMargins, margin_text: str,
                 memo: PromotionMemo | None, previous: PromotionMemo | None) -> Judged | _Step:
    """The half of the rule that reads no best: the round's step when it is not promoted (not
    eligible, or not faster than the baseline beyond the margin), else its judged geomean
    against the baseline."""
    n = cand.number
    ev = cand.vs_baseline
    if not cand.eligible or ev is None or ev.geomean is None:
        why = cand.why_not or (ev.errors[0] if ev is not None and ev.errors else "no comparison with the baseline")
        return _Step(RoundPromotion(round=n, status=NOT_PROMOTED, reason=why), uses_best=False)
    store = memo.store if memo is not None else None
    kept = cand.judged.get("baseline") if cand.judged is not None else None
    if kept is not None:
        judged = kept
    elif ev.paired is not None and ev.paired.geomean is not None:
        judged = judge_vs_baseline(ev, baseline, _records(cand), cand.metric, margins)
    else:
        outer = ev
        judged = _memo_judged("vs_baseline", n, (outer, baseline, _records_key(cand), cand.metric, margins),
                              lambda: _judged_geomean(outer, baseline, _records(cand), cand.metric, margins, store),
                              previous, memo)
    if cand.judged is not None and kept is None:
        cand.judged["baseline"] = judged
    assert judged is not None and judged.geomean is not None
    vs_base = judged.geomean
    if not beyond_noise(vs_base, judged.margin):
        slower = vs_base.point < 1.0 - judged.margin
        return _paired(_Step(RoundPromotion(
            round=n, status=NOT_PROMOTED, vs_baseline=vs_base,
            basis="interval" if vs_base.interval is not None else "point",
            reason=(f"geomean {judged.text()} vs baseline is "
                    + ("slower than the baseline" if slower else f"not faster beyond {margin_text}"))),
            uses_best=False), cand)
    return judged


def _against_best(cand: Candidate, judged: Judged, best: Candidate | None, out: Promotion, margins: NoiseMargins,
                  margin_text: str, memo: PromotionMemo | None, previous: PromotionMemo | None,
                  baseline_values: evaluation.CaseValues | None, bounds: dict[int, bound.BestBound | None],
                  *, bound_tried: bool = False) -> _AnyStep:
    """The half of the rule for a round faster than the baseline beyond the margin (``judged``,
    its geomean against the baseline): the current best, or a validated branch, by the best before
    it. ``bound_tried``: ``_bound_step`` has already not decided it."""
    step = _against_best_rule(cand, judged, best, out, margins, margin_text, memo, previous, baseline_values,
                              bounds, bound_tried)
    if not isinstance(step, _LaterStep):  # the bound decides no round judged on a paired run
        _paired(step, cand)
    step.judged = judged
    return step


def _bound_step(cand: Candidate, judged: Judged, best: Candidate, best_entry: RoundPromotion, margins: NoiseMargins,
                store: IntervalCache | None, margin_text: str, baseline_values: evaluation.CaseValues | None,
                bounds: dict[int, bound.BestBound | None]) -> _LaterStep | None:
    """The step of a round faster than the baseline (``judged``) that the bound decides is not
    faster than ``best`` (perf/bound.py): a validated branch whose comparison with the best is
    made when read. None: the bound does not decide it, or that comparison is known already (the
    round's judgements keep it: the rule reads it)."""
    known = cand.judged.get(best.number) if cand.judged is not None else None
    if known is not None and best.records_key is not None and known[0] == best.records_key:
        return None
    if not bound.decides(cand, best, best_entry, judged, baseline_values, margins, bounds):
        return None
    return _later_step(cand, judged, best, margins, store, margin_text)


def _later_step(cand: Candidate, judged: Judged, best: Candidate, margins: NoiseMargins, store: IntervalCache | None,
                margin_text: str, own: tuple[object, ...] = (), against: tuple[object, ...] | None = None) -> _LaterStep:
    """The step of a round the bound decides against ``best``: a validated branch, its comparison
    with the best made when read (LaterPromotion). ``own``, ``against``: the step's keys."""
    geomean = judged.geomean
    assert geomean is not None  # the bound reads it
    return _LaterStep((_later, best, cand, margins, store, judged, margin_text), cand.number, geomean, best.number,
                      judged, own, against)


def _later_run(ordered: list[Candidate], i: int, before: list[Candidate], previous: PromotionMemo,
               memo: PromotionMemo, out: Promotion, best: Candidate, against: tuple[object, ...],
               margins: NoiseMargins, margin_text: str, baseline_values: evaluation.CaseValues | None,
               bounds: dict[int, bound.BestBound | None]) -> int:
    """The loop of ``promote`` over a run of rounds from ``i`` that keep their step or are decided by
    the bound against ``best``, the best's part read once (a new best re-decides ~500 later rounds
    of 1000): each round is the previous call's own candidate at its place (its inputs unchanged),
    and its step either did not read the best, or read this one (``against``), or the bound decides
    it against this one. Returns the index of the first round it leaves to the loop: a round whose
    inputs changed, one that became the best, one the bound does not decide."""
    best_part = bound.for_best(best, out.rounds[best.number], baseline_values, margins, bounds)
    steps, rounds, bests, kept = memo.steps, out.rounds, memo.bests, previous.steps
    vs_baseline, kept_vs_baseline = memo.vs_baseline, previous.vs_baseline
    number, key, metric, store = best.number, best.records_key, best.metric, memo.store
    end = min(len(ordered), len(before))
    while i < end:
        cand = ordered[i]
        n = cand.number
        found = kept.get(n)
        if before[i] is not cand or found is None or found.becomes_best:
            break
        if found.uses_best and found.against != against:  # the best before it changed: the bound's turn
            judged = found.judged
            if best_part is None or judged is None:
                break
            known = cand.judged.get(number) if cand.judged is not None else None
            if (known is not None and key is not None and known[0] == key) \
                    or not bound.decides_with(best_part, metric, cand, judged):
                break
            found = _later_step(cand, judged, best, margins, store, margin_text, found.own, against)
        if n in kept_vs_baseline:
            vs_baseline[n] = kept_vs_baseline[n]
        bests.append(number)
        steps[n] = found
        rounds[n] = found.promotion
        i += 1
    return i


def _against_best_rule(cand: Candidate, judged: Judged, best: Candidate | None, out: Promotion,
                       margins: NoiseMargins, margin_text: str, memo: PromotionMemo | None,
                       previous: PromotionMemo | None, baseline_values: evaluation.CaseValues | None,
                       bounds: dict[int, bound.BestBound | None], bound_tried: bool = False) -> _AnyStep:
    n = cand.number
    vs_base = judged.geomean
    assert vs_base is not None
    basis: Basis = "interval" if vs_base.interval is not None else "point"
    if best is None:
        return _Step(RoundPromotion(
            round=n, status=CURRENT_BEST, vs_baseline=vs_base, basis=basis,
            reason=f"geomean {judged.text()} vs baseline, faster beyond {margin_text}"), becomes_best=True)
    store = memo.store if memo is not None else None
    step = None if bound_tried else _bound_step(cand, judged, best, out.rounds[best.number], margins, store,
                                                margin_text, baseline_values, bounds)
    if step is not None:
        return step
    known = cand.judged.get(best.number) if cand.judged is not None else None
    if known is not None and best.records_key is not None and known[0] == best.records_key:
        vs = known[1]
    elif cand.judged is not None and best.records_key is not None:
        vs = _versus(best, cand, margins, store)  # kept in the round's judgements, read first next time
        cand.judged[best.number] = (best.records_key, vs)
    else:
        vs = _memo_judged("vs_best", (best.number, n), (_records_key(best), _records_key(cand), cand.metric, margins),
                          functools.partial(_versus, best, cand, margins, store), previous, memo)
    vs_best = vs.geomean
    if vs_best is None:
        reason = f"faster than the baseline ({judged.text()}) but not comparable with round-{best.number}"
        return _Step(RoundPromotion(round=n, status=VALIDATED, vs_baseline=vs_base, basis=basis,
                                    previous_best=best.number, reason=reason))
    if vs_best.interval is None:
        basis = "point"
    if beyond_noise(vs_best, vs.margin):
        old = out.rounds[best.number]
        superseded = RoundPromotion(  # field by field: dataclasses.replace would not take a LaterPromotion
            round=old.round, status=VALIDATED, reason=f"{old.reason}; superseded by round-{n}",
            vs_baseline=old.vs_baseline, vs_baseline_paired=old.vs_baseline_paired,
            vs_previous_best=old.vs_previous_best, previous_best=old.previous_best, basis=old.basis)
        return _Step(RoundPromotion(
            round=n, status=CURRENT_BEST, vs_baseline=vs_base, vs_previous_best=vs_best, basis=basis,
            previous_best=best.number,
            reason=f"geomean {judged.text()} vs baseline and {vs.text()} vs round-{best.number}, "
                   f"both faster beyond {margin_text}"), becomes_best=True, superseded=superseded)
    return _Step(RoundPromotion(
        round=n, status=VALIDATED, vs_baseline=vs_base, vs_previous_best=vs_best, basis=basis,
        previous_best=best.number,
        reason=f"faster than the baseline ({judged.text()}) but not than round-{best.number} "
               f"beyond {margin_text} ({vs.text()})"))
